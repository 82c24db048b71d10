"""Shared fixtures for the whole suite, and the skip report.

Every run ends with the list of skipped tests and their reasons. Under CI (``CI=true``) a
skip is allowed only for a reason this machine cannot remedy (``ALLOWED_CI_SKIPS``: the npm
registry being unreachable, so KafkaJS cannot be installed); any other skip means
``scripts/test.sh`` failed to install something a test needs, and the run fails.
"""

from __future__ import annotations

import os
from typing import Final

import pytest
from hypothesis import HealthCheck, settings

# CI runs on two cores; keep property tests thorough but bounded, and never time-dependent.
settings.register_profile(
    "josefk",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("josefk")

# Substrings of the only skip reasons CI accepts.
ALLOWED_CI_SKIPS: Final = ("npm registry cannot be reached",)

_SKIPPED: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        _SKIPPED.append((report.nodeid, reason.removeprefix("Skipped: ")))


def _disallowed() -> list[tuple[str, str]]:
    if os.environ.get("CI", "").lower() != "true":
        return []
    return [(n, r) for n, r in _SKIPPED if not any(a in r for a in ALLOWED_CI_SKIPS)]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _SKIPPED:
        return
    terminalreporter.section("skipped tests")
    for nodeid, reason in _SKIPPED:
        terminalreporter.write_line(f"{nodeid}: {reason}")
    disallowed = _disallowed()
    if disallowed:
        terminalreporter.write_line(
            f"{len(disallowed)} test(s) skipped in CI for a reason other than "
            f"{ALLOWED_CI_SKIPS}: scripts/test.sh must install what they need",
            red=True,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == 0 and _disallowed():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
