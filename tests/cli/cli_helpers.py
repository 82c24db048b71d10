"""Helpers of the CLI suite: run ``python -m josefk ...`` as a user would, and a broker.

Owns ``josefk()`` (one command as a subprocess with stdin, captured output and a checked
exit status), ``Result`` (with ``json()`` / ``json_lines()``) and the ``cli_broker``
fixture: one real ``josefk serve`` per test module, started with
group.initial.rebalance.delay.ms=0 so a ``--group`` consumer is assigned without the
three-second wait meant for real deployments. Reuses the integration suite's broker
fixtures (tests/integration is put on sys.path).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_INTEGRATION = Path(__file__).resolve().parent.parent / "integration"
if str(_INTEGRATION) not in sys.path:
    sys.path.insert(0, str(_INTEGRATION))

from broker_process import BrokerProcess, free_port, stop_broker  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "josefk_integration_fixtures_cli", _INTEGRATION / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)

# Bounds a single command; generous for a loaded 2-core CI box, never reached when passing.
COMMAND_TIMEOUT_S = 60.0


@pytest.fixture(scope="module", name="cli_broker")
def cli_broker_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("josefk-cli-broker")
    broker: BrokerProcess = _fixtures._new_broker(
        base, "cli", ["group.initial.rebalance.delay.ms=0"]
    )
    yield broker
    stop_broker(broker)


class Result:
    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        self.code = proc.returncode
        self.stdout_bytes = proc.stdout
        self.stdout = proc.stdout.decode(errors="replace")
        self.stderr = proc.stderr.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.stdout)

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    def __repr__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def env_for(bootstrap: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOSEFK_")}
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"
    if bootstrap is not None:
        env["JOSEFK_BOOTSTRAP"] = bootstrap
    return env


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "josefk", *args]


def josefk(
    broker: BrokerProcess | None,
    *args: str,
    stdin: bytes | str = b"",
    expect: int | None = 0,
) -> Result:
    """Run ``josefk ARGS`` with JOSEFK_BOOTSTRAP pointing at ``broker``; check the exit code."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run(
        command(*args),
        input=data,
        capture_output=True,
        env=env_for(broker.bootstrap if broker is not None else None),
        timeout=COMMAND_TIMEOUT_S,
    )
    result = Result(proc)
    if expect is not None:
        assert result.code == expect, f"josefk {' '.join(args)}: {result!r}"
    return result


__all__ = [
    "COMMAND_TIMEOUT_S",
    "BrokerProcess",
    "Result",
    "cli_broker_fixture",
    "command",
    "env_for",
    "free_port",
    "josefk",
]
