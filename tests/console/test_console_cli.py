"""``josefk console`` as a command: its options, a bad ``--listen``, a port already taken,
a cluster that does not answer (the console serves anyway and says so), and actions from
another site refused."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from click.testing import CliRunner

from josefk.cli.main import _register, cli

SOURCE_DIR = Path(__file__).resolve().parents[2]
# Nothing listens on port 1 of loopback: connections are refused at once.
NO_BROKER = "127.0.0.1:1"


def console(*args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOSEFK_")}
    env["PYTHONPATH"] = str(SOURCE_DIR)
    return subprocess.Popen(
        [sys.executable, "-m", "josefk", "console", "-b", NO_BROKER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_help_shows_the_security_and_server_options() -> None:
    _register()
    result = CliRunner().invoke(cli, ["console", "--help"])
    assert result.exit_code == 0
    for option in ("--bootstrap", "--command-config", "-X", "--listen", "--metrics-url"):
        assert option in result.output


def test_a_bad_listen_address_is_a_usage_error() -> None:
    _register()
    result = CliRunner().invoke(cli, ["console", "--listen", "8080"])
    assert result.exit_code == 2 and "HOST:PORT" in result.output


def test_a_port_in_use_is_one_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        process = console("--listen", f"127.0.0.1:{taken.getsockname()[1]}")
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "cannot listen on 127.0.0.1:" in stderr and "Traceback" not in stderr


def test_serves_and_says_so_when_no_broker_answers() -> None:
    process = console("--listen", "127.0.0.1:0", "--interval", "0.5")
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("josefk console: http://127.0.0.1:"), line
        url = line.split()[2]
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(url + "api/overview", timeout=10) as answer:
                overview = json.load(answer)
            if overview["errors"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # the next sample
        assert overview["brokers"] == [] and overview["bootstrap"] == NO_BROKER
        assert any("cannot connect" in e["error"] for e in overview["errors"])
        # Another site cannot make a visitor's browser act through the console: a form's
        # body is not JSON, and a foreign Origin is refused before the cluster is asked.
        for headers, status in (
            ({"Content-Type": "text/plain"}, 415),
            ({"Content-Type": "application/json", "Origin": "http://evil.example"}, 403),
        ):
            refused = urllib.request.Request(
                url + "api/topics", data=b'{"name": "x"}', headers=headers, method="POST"
            )
            try:
                urllib.request.urlopen(refused, timeout=10)
            except urllib.error.HTTPError as exc:
                assert exc.code == status
                assert json.load(exc)["error"]
            else:
                raise AssertionError(f"{headers} was not refused")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert process.returncode == 0
