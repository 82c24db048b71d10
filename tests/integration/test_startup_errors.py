"""Start-up problems a person can act on: one line naming the problem and the fix, exit code
1, no traceback. Each case runs the real ``josefk serve`` process.

Among them the data-dir lock: a second broker on a running broker's data dir refuses to start
(naming the dir and the owner's pid) instead of writing beside it and losing its records, and
a SIGKILLed broker's lock never blocks its restart.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from broker_process import SOURCE_DIR, BrokerProcess, free_port
from client_helpers import ck_consume, ck_produce, make_messages, unique_topic

pytestmark = pytest.mark.timeout(180)


def serve(*args: str, cwd: Path, metrics_port: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOSEFK_")}
    env["PYTHONPATH"] = str(SOURCE_DIR)
    return subprocess.run(
        [sys.executable, "-m", "josefk", "serve", "--metrics-port", str(metrics_port), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def assert_refused(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 1, no traceback, and the one error line holds every fragment."""
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output, output
    errors = [line for line in result.stderr.splitlines() if "ERROR" in line or "Error:" in line]
    assert len(errors) == 1, output
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def test_a_second_broker_on_the_same_data_dir_is_refused(
    broker_factory: Any, tmp_path: Path
) -> None:
    first: BrokerProcess = broker_factory()
    topic = unique_topic("locked")
    messages = make_messages(20)
    ck_produce(first.bootstrap, topic, messages)

    second = serve(
        "--data-dir", str(first.data_dir), "--listen", f"127.0.0.1:{free_port()}", cwd=tmp_path
    )
    assert_refused(second, str(first.data_dir), f"pid {first.pid}", "in use by another")

    # The first broker goes on serving, its records intact.
    ck_produce(first.bootstrap, topic, make_messages(5, tag="after"))
    assert len(ck_consume(first.bootstrap, topic, count=25)) == 25

    # A crash releases the lock: the restart on the same dir works and keeps the data.
    first.kill()
    first.start()
    assert len(ck_consume(first.bootstrap, topic, count=25)) == 25


def test_a_data_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a dir")
    result = serve("--data-dir", str(tmp_path / "a-file"), "--listen", "127.0.0.1:0", cwd=tmp_path)
    assert_refused(result, "a-file", "is a file, not a directory", "--data-dir")
    result = serve(
        "--data-dir", str(tmp_path / "a-file" / "data"), "--listen", "127.0.0.1:0", cwd=tmp_path
    )
    assert_refused(result, "a-file/data", "Not a directory", "--data-dir")


@pytest.mark.parametrize("what", ["listener", "metrics"])
def test_a_port_in_use(tmp_path: Path, what: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        if what == "listener":
            listen, metrics_port = f"127.0.0.1:{port}", 0
            expected: Sequence[str] = ("cannot listen on", str(port), "--listen")
        else:
            listen, metrics_port = "127.0.0.1:0", port
            expected = ("cannot serve metrics", str(port), "--metrics-port")
        result = serve(
            "--data-dir", str(tmp_path / "data"), "--listen", listen,
            cwd=tmp_path, metrics_port=metrics_port,
        )  # fmt: skip
    assert_refused(result, "Address already in use", *expected)
    # The ports are bound before anything touches the data dir. Before: the second broker
    # created the dir and 100 internal partitions in it, then failed on the port.
    assert not (tmp_path / "data").exists()


def test_a_port_out_of_range(tmp_path: Path) -> None:
    result = serve("--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:70000", cwd=tmp_path)
    assert_refused(result, "70000", "not between 0 and 65535")


def test_a_config_file_names_the_line_and_key(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("# josefk\nnum.partitions=3\nlog.segment.bytes=lots\n")
    result = serve("--config", str(config), "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
    assert_refused(result, "log.segment.bytes=lots", "line 3")
    config.write_text("num.partitions=3\nbad.escape=\\u12\n")
    result = serve("--config", str(config), "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
    assert_refused(result, "line 2", "escape")
