"""``josefk.shutdown.timeout.ms``: how long a stopping broker waits for the answers it still
owes before it closes those connections. A client that stopped reading its answers must not
keep the broker from exiting, and the log still closes cleanly (the clean-shutdown marker)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from client_helpers import ck_produce, make_messages, unique_topic

from josefk.protocol.api import ApiKey, RequestHeader, encode_request, request_class
from josefk.storage.manager import CLEAN_SHUTDOWN_FILE

pytestmark = pytest.mark.timeout(120)
Fetch = request_class(ApiKey.FETCH)


def fetch_frame(topic: str, correlation_id: int) -> bytes:
    header = RequestHeader(
        request_api_key=ApiKey.FETCH,
        request_api_version=12,
        correlation_id=correlation_id,
        client_id="stalled",
    )
    partition = Fetch.FetchTopic.FetchPartition(
        partition=0, fetch_offset=0, partition_max_bytes=8 << 20
    )
    body = Fetch(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=8 << 20,
        topics=[Fetch.FetchTopic(topic=topic, partitions=[partition])],
    )
    return encode_request(header, body)


def test_a_client_that_stops_reading_cannot_hold_the_broker_past_the_deadline(
    broker_factory: Any,
) -> None:
    # A deadline far below the default (30 s) and below the test's wait for the exit, so the
    # broker exits only if it honours the setting.
    broker = broker_factory(settings=["josefk.shutdown.timeout.ms=500"])
    topic = unique_topic("stalled-reader")
    ck_produce(broker.bootstrap, topic, make_messages(2_000, value_size=4_000))

    with socket.socket() as stalled:
        # Ask for ~8 MB three times over and read (almost) none of it: the answers fill both
        # socket buffers and the broker's writer waits on a socket that never drains.
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect((broker.host, broker.port))
        stalled.sendall(b"".join(fetch_frame(topic, i) for i in range(3)))
        stalled.settimeout(10)
        assert len(stalled.recv(4)) > 0  # the broker is answering
        code = broker.stop(timeout=20)
    assert code == 0
    log = broker.log_path.read_text()
    assert "shutdown deadline (500 ms) passed: closing 1 connection(s)" in log, log[-2000:]
    assert (broker.data_dir / CLEAN_SHUTDOWN_FILE).exists()
