"""Ctrl-C on an interactive ``josefk produce`` exits 130 after delivering what was typed.

Before: the thread reading stdin sat in ``sys.stdin.buffer.read1`` holding the buffered
reader's lock; at interpreter shutdown the main thread reached for the same lock and Python
aborted ("Fatal Python error: _enter_buffered_busy", exit 134). Driven both through a pipe
held open and through a pseudo-terminal, as a person at a terminal would."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import (
    COMMAND_TIMEOUT_S,
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    command,
    env_for,
    josefk,
)

pytestmark = pytest.mark.timeout(120)


def wait_for_records(broker: BrokerProcess, topic: str, count: int) -> None:
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    while time.monotonic() < deadline:
        described = josefk(broker, "topics", "describe", topic, "--json")
        if sum(p["high_watermark"] for p in described.json()["partitions"]) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"{count} records never reached {topic}")


def test_ctrl_c_with_stdin_held_open_exits_130(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "typed", "--partitions", "1")
    process = subprocess.Popen(
        command("produce", "typed"),
        env=env_for(cli_broker.bootstrap),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None
    process.stdin.write(b"one\ntwo\n")
    process.stdin.flush()
    wait_for_records(cli_broker, "typed", 2)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=COMMAND_TIMEOUT_S)
    process.stdin.close()
    assert b"Fatal Python error" not in stderr, stderr.decode()
    assert b"Traceback" not in stderr, stderr.decode()
    assert process.returncode == 130, (process.returncode, stdout, stderr)


def test_ctrl_c_at_a_terminal_exits_130(cli_broker: BrokerProcess, tmp_path: Path) -> None:
    josefk(cli_broker, "topics", "create", "typed-tty", "--partitions", "1")
    controller, terminal = pty.openpty()
    stderr_path = tmp_path / "stderr"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            command("produce", "typed-tty"),
            env=env_for(cli_broker.bootstrap),
            stdin=terminal,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    os.close(terminal)
    try:
        os.write(controller, b"hello\n")
        wait_for_records(cli_broker, "typed-tty", 1)
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=COMMAND_TIMEOUT_S)
    finally:
        os.close(controller)
        if process.poll() is None:
            process.kill()
    err = stderr_path.read_text(errors="replace")
    assert "Fatal Python error" not in err, err
    assert code == 130, (code, err)
