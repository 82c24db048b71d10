"""The CLI pointed at something that is not a Kafka broker, or at nothing, fails within a
few seconds and says why, naming the address; one such address in a bootstrap list does not
hide the broker behind the next one.

Before: a server that accepted the connection and never answered held ``josefk topics list``
for about 30 s and printed an empty reason; and listed first in ``--bootstrap``, it failed
the command although the next address was a live broker (seen with a frozen broker of a
cluster)."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cli_helpers import (
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    command,
    env_for,
    free_port,
)

pytestmark = pytest.mark.timeout(120)
# Generous for a loaded two-core CI machine; the CLI's own connect timeout is 3 s.
DEADLINE_S = 15


def serve(answer: Callable[[socket.socket], None]) -> Iterator[int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def run() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(conn)
            answer(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for conn in accepted:
            conn.close()
        listener.close()


def http_like(conn: socket.socket) -> None:
    conn.recv(4096)
    conn.sendall(b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


@pytest.fixture
def http_port() -> Iterator[int]:
    yield from serve(http_like)


@pytest.fixture
def silent_port() -> Iterator[int]:
    yield from serve(lambda conn: None)


def run_cli(port: int, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command("topics", "list", "-b", ",".join([f"127.0.0.1:{port}", *more])),
        env=env_for(None),
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )


def test_an_address_that_answers_but_is_not_kafka(http_port: int) -> None:
    result = run_cli(http_port)
    assert result.returncode == 1
    assert f"127.0.0.1:{http_port} answered but is not a Kafka broker" in result.stderr


def test_an_address_that_accepts_and_never_answers(silent_port: int) -> None:
    result = run_cli(silent_port)
    assert result.returncode == 1
    assert f"127.0.0.1:{silent_port} accepted the connection but did not answer" in result.stderr


def test_nothing_listening() -> None:
    port = free_port()
    result = run_cli(port)
    assert result.returncode == 1
    assert f"cannot connect to 127.0.0.1:{port}" in result.stderr
    assert "Connect call failed" in result.stderr or "refused" in result.stderr


@pytest.mark.parametrize("bad", ["silent", "http"])
def test_a_bad_address_first_in_the_list_is_skipped(
    bad: str, request: pytest.FixtureRequest, cli_broker: Any
) -> None:
    port = request.getfixturevalue(f"{bad}_port")
    result = run_cli(port, cli_broker.bootstrap)
    assert result.returncode == 0, result.stderr
