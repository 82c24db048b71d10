"""Fixtures of the integration suite: real ``josefk serve`` processes.

``broker`` is one broker shared by all tests of a module (tests use distinct topics);
``broker_factory`` starts private brokers for tests that kill, stop or restart them.
When a test fails, the stderr tail of every broker still in use is attached to the report.

Running: ``python -m pytest tests/integration`` (kcat and ``npm install`` in tests/js are
needed for their modules, which skip otherwise). The brokers import josefk from this checkout;
``JOSEFK_TEST_SOURCE_DIR=/path/to/tree`` points them at another copy, e.g. an export of HEAD
while the working tree is mid-edit.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from pathlib import Path

import pytest
from broker_process import (
    LIVE_BROKERS,
    BrokerFactory,
    BrokerProcess,
    start_or_close,
    stop_broker,
)


def _new_broker(base: Path, name: str, settings: Sequence[str]) -> BrokerProcess:
    base.mkdir(parents=True, exist_ok=True)
    return start_or_close(
        BrokerProcess(base / "data", base / f"{name}.stderr.log", settings=settings)
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the whole module, default configuration."""
    base = tmp_path_factory.mktemp("josefk-broker")
    shared = _new_broker(base, "shared", ())
    yield shared
    stop_broker(shared)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    """Start private brokers: ``broker_factory(settings=["num.partitions=3"])``."""
    started: list[BrokerProcess] = []

    def start(*, settings: Sequence[str] = ()) -> BrokerProcess:
        new = _new_broker(tmp_path / f"broker{len(started)}", f"broker{len(started)}", settings)
        started.append(new)
        return new

    yield start
    errors: list[BaseException] = []
    for one in started:
        try:
            stop_broker(one)
        except BaseException as exc:  # noqa: BLE001  report every broker, not only the first
            errors.append(exc)
    if errors:
        raise errors[0]


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3.x loads its JSON schemas with importlib.resources' legacy API at import
    # time; the warning names importlib, so pyproject's "kafka.*" module filter misses it.
    config.addinivalue_line(
        "filterwarnings",
        r"ignore:(read_text|open_text) is deprecated. Use files\(\) instead:DeprecationWarning",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for one in LIVE_BROKERS:
            report.sections.append((f"josefk serve stderr ({one.bootstrap})", one.describe()))
    return report
