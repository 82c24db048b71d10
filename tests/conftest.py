"""Shared fixtures for the whole suite, the fast tier's marking, and the skip report.

The fast tier: every test that starts a real process (a josefk broker, etcd, the josefk CLI,
a Kafka client's own process, a container, Spark) is marked ``slow`` here at collection, by
its directory (tests/integration, cluster, docker, spark, cli) or because its module imports
one of the helpers that start them (``PROCESS_HELPERS``) or starts one itself (``Popen``). ``pytest -m "not slow"`` then runs
the unit, property and in-process broker tests only, for the edit-test loop; the full suite
stays CI's.

Every run ends with the list of skipped tests and their reasons. Under CI (``CI=true``) a
skip is allowed only for a reason this machine cannot remedy (``ALLOWED_CI_SKIPS``: the npm
registry being unreachable, so KafkaJS cannot be installed); any other skip means
``scripts/test.sh`` failed to install something a test needs, and the run fails.
"""

from __future__ import annotations

import ast
import os
from functools import cache
from pathlib import Path
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

# Directories whose every test starts real processes.
PROCESS_DIRS: Final = frozenset({"integration", "cluster", "docker", "spark", "cli", "js"})
# Test helper modules that start real processes (a module importing one is a process test).
PROCESS_HELPERS: Final = frozenset(
    {
        "broker_process",
        "sasl_broker",
        "client_suite",
        "cluster_process",
        "etcd_server",
        "cli_helpers",
        "netns",
    }
)
# Calls that start a process a test then talks to.
LONG_LIVED_STARTS: Final = frozenset({"Popen", "create_subprocess_exec", "create_subprocess_shell"})
TESTS: Final = Path(__file__).resolve().parent


def imports_a_process_helper(source: str) -> bool:
    """Whether module source imports one of ``PROCESS_HELPERS`` (anywhere, also in a function)
    or starts a long-lived process itself (``Popen``, ``create_subprocess_*``; a short
    ``subprocess.run`` of openssl or a compiler does not count)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute | ast.Name):
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            if name in LONG_LIVED_STARTS:
                return True
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        if any(name.rsplit(".", 1)[-1] in PROCESS_HELPERS for name in names):
            return True
    return False


@cache
def starts_processes(path: Path) -> bool:
    """Whether the tests of the module at ``path`` start real processes (see the docstring)."""
    try:
        relative = path.resolve().relative_to(TESTS)
    except ValueError:
        return False
    return relative.parts[0] in PROCESS_DIRS or imports_a_process_helper(path.read_text())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if starts_processes(Path(item.path)):
            item.add_marker(pytest.mark.slow)


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
