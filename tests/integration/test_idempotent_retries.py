"""Real idempotent producers retry after a lost Produce response, and nothing is stored twice.

A TCP proxy sits between the client and ``josefk serve`` (the broker advertises the proxy's
address, so every connection goes through it). The proxy forwards requests and responses
frame by frame, but swallows the responses to the first few Produce requests and cuts the
connection instead: the broker has appended the batch, the client never hears so, and
retries it with the same producer id, epoch and sequence on a new connection. The broker must
answer the retry with the original offset (no error), and the log must hold each message once.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, free_port
from client_helpers import (
    ck_consume,
    ck_create_topic,
    ck_produce,
    ck_watermarks,
    make_messages,
    unique_topic,
)

pytestmark = pytest.mark.timeout(120)

PRODUCE = 0


class DroppingProxy:
    """Forwards one listener to the broker; loses the first ``drops`` Produce responses."""

    def __init__(self) -> None:
        # Bound before the broker starts, so that the broker cannot pick the same port.
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._upstream = ("", 0)
        self._lock = threading.Lock()
        self.drops_left = 0
        self.dropped = 0
        self.produce_requests = 0
        self._sockets: list[socket.socket] = []
        self._closed = False

    def start(self, upstream: tuple[str, int]) -> None:
        self._upstream = upstream
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._server.close()
        with self._lock:
            for sock in self._sockets:
                _close(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            with self._lock:
                self._sockets += [client, upstream]
            produce_ids: set[int] = set()
            threading.Thread(
                target=self._requests, args=(client, upstream, produce_ids), daemon=True
            ).start()
            threading.Thread(
                target=self._responses, args=(upstream, client, produce_ids), daemon=True
            ).start()

    def _requests(self, client: socket.socket, upstream: socket.socket, ids: set[int]) -> None:
        try:
            while True:
                frame = _read_frame(client)
                api_key, _, correlation_id = struct.unpack_from(">hhi", frame, 4)
                if api_key == PRODUCE:
                    ids.add(correlation_id)
                    with self._lock:
                        self.produce_requests += 1
                upstream.sendall(frame)
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)

    def _responses(self, upstream: socket.socket, client: socket.socket, ids: set[int]) -> None:
        try:
            while True:
                frame = _read_frame(upstream)
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                if correlation_id in ids:
                    with self._lock:
                        drop = self.drops_left > 0
                        if drop:
                            self.drops_left -= 1
                            self.dropped += 1
                    if drop:
                        # The broker appended; the client only sees the connection die.
                        return
                client.sendall(frame)
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)


def _read_frame(sock: socket.socket) -> bytes:
    head = _read_exactly(sock, 4)
    (size,) = struct.unpack(">i", head)
    return head + _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError("peer closed")
        data += chunk
    return bytes(data)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[str, DroppingProxy]]:
    proxy = DroppingProxy()
    broker = BrokerProcess(
        tmp_path / "data",
        tmp_path / "broker.stderr.log",
        settings=[f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy.port}"],
    )
    # The broker announces its advertised address (the proxy's), so its own port is chosen
    # here rather than learnt from it.
    broker_port = broker.port = free_port()
    try:
        broker.start(port_fallback=False)
        proxy.start(("127.0.0.1", broker_port))
        yield f"127.0.0.1:{proxy.port}", proxy
        broker.stop()
    finally:
        proxy.close()
        broker.close()


def test_confluent_kafka_retries_after_lost_responses_store_each_message_once(
    proxied: tuple[str, DroppingProxy],
) -> None:
    bootstrap, proxy = proxied
    topic = unique_topic("idem-lost-ck")
    ck_create_topic(bootstrap, topic)
    proxy.drops_left = 2
    messages = make_messages(200, tag="lost")
    reports = ck_produce(
        bootstrap,
        topic,
        messages,
        **{
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.num.messages": 50,
            "retry.backoff.ms": 50,
        },
    )
    assert [r.error for r in reports if r.error is not None] == []
    assert proxy.dropped == 2
    assert proxy.produce_requests > 4  # retries happened
    assert sorted(r.offset for r in reports) == list(range(200))
    assert ck_watermarks(bootstrap, topic)[1] == 200
    got = [m.value() for m in ck_consume(bootstrap, topic, count=200)]
    assert got == [m.value for m in messages]


def test_kafka_python_retries_after_lost_responses_store_each_message_once(
    proxied: tuple[str, DroppingProxy],
) -> None:
    from kafka import KafkaProducer

    bootstrap, proxy = proxied
    topic = unique_topic("idem-lost-kp")
    ck_create_topic(bootstrap, topic)
    proxy.drops_left = 2
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=20,
        batch_size=4096,
        retry_backoff_ms=50,
        request_timeout_ms=10_000,
    )
    try:
        futures = [producer.send(topic, value=f"kp-{i}".encode(), partition=0) for i in range(150)]
        producer.flush(60)
        offsets = [f.get(timeout=60).offset for f in futures]
    finally:
        producer.close(10)
    assert proxy.dropped == 2
    assert offsets == list(range(150))
    assert ck_watermarks(bootstrap, topic)[1] == 150
    got = [m.value() for m in ck_consume(bootstrap, topic, count=150)]
    assert got == [f"kp-{i}".encode() for i in range(150)]
