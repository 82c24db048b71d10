"""Malformed and hostile requests against a real ``josefk serve``.

Thousands of bad frames over many connections (random bytes, huge and negative sizes, garbage
bodies behind a well-formed header for every API key 0..75 and a spread of versions, truncated
frames, lying string lengths) must leave the broker serving everyone else. Every connection
here half-closes after sending, so the broker always has a reason to close it: the test reads
until EOF with a timeout instead of sleeping.

The random source is seeded so that a failure can be replayed.
"""

from __future__ import annotations

import asyncio
import errno
import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from broker_process import BrokerProcess
from client_helpers import (
    CLIENT_TIMEOUT_S,
    TestMessage,
    assert_delivered,
    assert_same_messages,
    ck_config,
    ck_consume,
    ck_create_topic,
    ck_produce,
    from_confluent,
    make_messages,
    unique_topic,
)
from confluent_kafka import KafkaError, Producer

pytestmark = pytest.mark.timeout(240)

SEED = 20261122
API_KEYS = range(76)
VERSIONS = (-1, 0, 1, 2, 3, 4, 5, 7, 9, 12, 13, 16, 17, 100, 32767)
CONCURRENCY = 48
CONNECTION_TIMEOUT_S = 15.0
UNSUPPORTED_VERSION = 35

_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


def request_header(api_key: int, api_version: int, correlation_id: int, *, flexible: bool) -> bytes:
    client_id = b"josefk-hostile"
    head = _HEADER.pack(api_key, api_version, correlation_id) + struct.pack(">h", len(client_id))
    head += client_id
    return head + (b"\x00" if flexible else b"")  # empty tagged-field section in header v2


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def garbage_bodies(rng: random.Random) -> Iterator[bytes]:
    yield b""
    yield rng.randbytes(rng.randrange(1, 64))
    # Plausible-looking prefixes with absurd counts and lengths.
    yield struct.pack(">i", 0x7FFFFFFF) + rng.randbytes(8)
    yield b"\xff" * rng.randrange(1, 40)
    yield struct.pack(">hi", -1, -1) + rng.randbytes(rng.randrange(0, 300))


@dataclass
class Connection:
    """The bytes one connection sends before half-closing."""

    name: str
    data: bytes
    frames: int


@dataclass
class Outcome:
    closed_by_broker: int = 0
    reset_by_broker: int = 0
    still_open_at_timeout: list[str] = field(default_factory=list)
    bytes_received: int = 0


def hostile_connections(rng: random.Random) -> list[Connection]:
    conns: list[Connection] = []
    correlation = 1
    # Garbage bodies behind a well-formed header, for every API key and many versions. The
    # first frame of each connection is the interesting one; the rest pile on in case the
    # broker answers and keeps reading.
    for api_key in API_KEYS:
        for version in VERSIONS:
            frames = []
            for body in garbage_bodies(rng):
                flexible = rng.random() < 0.5
                frames.append(
                    frame(request_header(api_key, version, correlation, flexible=flexible) + body)
                )
                correlation += 1
            conns.append(Connection(f"api{api_key}v{version}", b"".join(frames), len(frames)))
    # Unknown API keys.
    for api_key in (76, 99, 1000, 32767, -1, -32768):
        data = frame(request_header(api_key, 0, correlation, flexible=False) + rng.randbytes(16))
        conns.append(Connection(f"unknown-api{api_key}", data, 1))
    # Sizes that are huge, negative or zero.
    for size in (0x7FFFFFFF, 1 << 30, 200 * 1024 * 1024, -1, -(1 << 31), 0, 1, 3):
        conns.append(Connection(f"size{size}", _SIZE.pack(size) + rng.randbytes(64), 1))
    # Truncated frames: the size promises more than ever arrives.
    for cut in (0, 1, 2, 3, 5, 9, 20):
        full = frame(request_header(3, 12, correlation, flexible=True) + rng.randbytes(40))
        conns.append(Connection(f"truncated{cut}", full[: 4 + cut], 1))
    # A client id whose length runs past the frame, and a negative one other than -1.
    for client_id_len in (0x7FFF, 500, -2, -32768):
        head = _HEADER.pack(18, 3, correlation) + struct.pack(">h", client_id_len) + b"ab"
        conns.append(Connection(f"client-id-len{client_id_len}", frame(head), 1))
    # Pure noise, unframed.
    for index in range(200):
        conns.append(Connection(f"noise{index}", rng.randbytes(rng.randrange(1, 4096)), 1))
    # Many random frames back to back on one connection.
    for index in range(40):
        frames = [
            frame(
                request_header(
                    rng.randrange(76),
                    rng.randrange(-2, 20),
                    correlation + i,
                    flexible=rng.random() < 0.5,
                )
                + rng.randbytes(rng.randrange(0, 512))
            )
            for i in range(50)
        ]
        conns.append(Connection(f"burst{index}", b"".join(frames), len(frames)))
    return conns


async def run_connection(host: str, port: int, conn: Connection, outcome: Outcome) -> None:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(host, port), CONNECTION_TIMEOUT_S
    )
    try:
        try:
            writer.write(conn.data)
            await asyncio.wait_for(writer.drain(), CONNECTION_TIMEOUT_S)
            if writer.can_write_eof():
                writer.write_eof()
        except (ConnectionResetError, BrokenPipeError):
            outcome.reset_by_broker += 1
            return
        except OSError as exc:
            # The broker closed with bytes of ours unread (it reads what a connection sends
            # only as far as its first bad frame): the kernel reset the connection, and the
            # half-close finds it gone.
            if exc.errno != errno.ENOTCONN:
                raise
            outcome.reset_by_broker += 1
            return

        async def drain_until_eof() -> None:
            while chunk := await reader.read(65536):
                outcome.bytes_received += len(chunk)

        try:
            await asyncio.wait_for(drain_until_eof(), CONNECTION_TIMEOUT_S)
            outcome.closed_by_broker += 1
        except ConnectionResetError:
            outcome.reset_by_broker += 1
        except TimeoutError:
            outcome.still_open_at_timeout.append(conn.name)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionResetError, BrokenPipeError):
            pass


async def storm(host: str, port: int, conns: list[Connection]) -> Outcome:
    outcome = Outcome()
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(conn: Connection) -> None:
        async with limit:
            await run_connection(host, port, conn, outcome)

    await asyncio.gather(*(one(c) for c in conns))
    return outcome


async def test_thousands_of_malformed_frames_leave_the_broker_serving(
    broker: BrokerProcess,
) -> None:
    topic = unique_topic("hostile")
    await asyncio.to_thread(ck_create_topic, broker.bootstrap, topic)
    # A well-behaved client connected before the storm keeps its connection through it.
    producer = Producer(ck_config(broker.bootstrap, **{"enable.idempotence": False, "acks": "all"}))
    before = make_messages(20, tag="before")
    after = make_messages(20, tag="after")
    reports: list[KafkaError | None] = []

    def produce(messages: list[TestMessage]) -> None:
        for m in messages:
            producer.produce(
                topic,
                key=m.key,
                value=m.value,
                headers=list(m.headers),
                timestamp=m.timestamp,
                partition=0,
                on_delivery=lambda err, msg: reports.append(err),
            )
        assert producer.flush(CLIENT_TIMEOUT_S) == 0

    await asyncio.to_thread(produce, before)

    conns = hostile_connections(random.Random(SEED))
    total_frames = sum(c.frames for c in conns)
    assert total_frames >= 5000
    outcome = await storm(broker.host, broker.port, conns)

    assert broker.is_alive(), f"broker died during the storm\n{broker.describe()}"
    await asyncio.to_thread(produce, after)
    assert all(err is None for err in reports), [e for e in reports if e is not None][:3]
    got = await asyncio.to_thread(ck_consume, broker.bootstrap, topic, count=40)
    assert_same_messages([from_confluent(m) for m in got], before + after)
    # A fresh client on a fresh connection too.
    fresh_topic = unique_topic("hostile-fresh")
    fresh = make_messages(5)
    assert_delivered(await asyncio.to_thread(ck_produce, broker.bootstrap, fresh_topic, fresh))
    assert broker.is_alive()
    # Every connection was half-closed by us, so the broker must have closed each one.
    assert not outcome.still_open_at_timeout, (
        f"{len(outcome.still_open_at_timeout)} connections still open {CONNECTION_TIMEOUT_S}s "
        f"after the client's EOF: {outcome.still_open_at_timeout[:10]}"
    )


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), CLIENT_TIMEOUT_S))
    return await asyncio.wait_for(reader.readexactly(size), CLIENT_TIMEOUT_S)


async def test_api_versions_for_an_unsupported_version_answers_with_our_ranges(
    broker: BrokerProcess,
) -> None:
    """KIP-511: a v0-shaped response with UNSUPPORTED_VERSION and the supported ranges."""
    reader, writer = await asyncio.open_connection(broker.host, broker.port)
    try:
        writer.write(frame(request_header(18, 127, 4242, flexible=True) + b"\x00"))
        await writer.drain()
        body = await read_frame(reader)
        correlation_id, error_code, count = struct.unpack_from(">ihi", body)
        assert correlation_id == 4242
        assert error_code == UNSUPPORTED_VERSION
        ranges = {}
        for index in range(count):
            key, low, high = struct.unpack_from(">hhh", body, 10 + 6 * index)
            ranges[key] = (low, high)
        assert ranges[18][0] == 0 and ranges[18][1] >= 3
        assert 0 in ranges and 1 in ranges and 3 in ranges  # Produce, Fetch, Metadata
        # The connection is still usable: a proper ApiVersions v0 on it.
        writer.write(frame(request_header(18, 0, 4243, flexible=False)))
        await writer.drain()
        body = await read_frame(reader)
        assert struct.unpack_from(">ih", body) == (4243, 0)
    finally:
        writer.close()


async def test_oversized_request_closes_the_connection(broker: BrokerProcess) -> None:
    """socket.request.max.bytes (100 MiB by default): the broker closes, it does not allocate."""
    reader, writer = await asyncio.open_connection(broker.host, broker.port)
    try:
        writer.write(_SIZE.pack(0x7FFFFFF0) + request_header(0, 9, 1, flexible=False))
        await writer.drain()
        # No half-close here: the size alone must make the broker hang up.
        try:
            rest = await asyncio.wait_for(reader.read(), CLIENT_TIMEOUT_S)
        except ConnectionResetError:
            rest = b""
        assert rest == b""
    finally:
        writer.close()
    assert broker.is_alive()


async def test_pipelined_requests_are_answered_in_order(broker: BrokerProcess) -> None:
    """Many requests in one write, different APIs: responses come back in request order."""
    reader, writer = await asyncio.open_connection(broker.host, broker.port)
    try:
        requests = []
        for correlation_id in range(1, 301):
            if correlation_id % 3 == 0:
                # Metadata v1, no topics (an empty, non-null array): brokers and controller.
                requests.append(
                    frame(
                        request_header(3, 1, correlation_id, flexible=False) + b"\x00\x00\x00\x00"
                    )
                )
            else:
                requests.append(frame(request_header(18, 0, correlation_id, flexible=False)))
        writer.write(b"".join(requests))
        await writer.drain()
        seen = []
        for _ in range(300):
            body = await read_frame(reader)
            (correlation_id,) = struct.unpack_from(">i", body)
            seen.append(correlation_id)
        assert seen == list(range(1, 301))
    finally:
        writer.close()


async def test_many_connections_at_once(broker: BrokerProcess) -> None:
    """Hundreds of open connections, each answered; none refused or starved."""
    count = 400
    conns = await asyncio.gather(
        *(
            asyncio.wait_for(asyncio.open_connection(broker.host, broker.port), CLIENT_TIMEOUT_S)
            for _ in range(count)
        )
    )
    try:
        for index, (_, writer) in enumerate(conns):
            writer.write(frame(request_header(18, 0, index, flexible=False)))

        async def answer(index: int, reader: asyncio.StreamReader) -> int:
            body = await read_frame(reader)
            correlation_id, error_code = struct.unpack_from(">ih", body)
            assert error_code == 0
            return int(correlation_id)

        got = await asyncio.gather(*(answer(i, r) for i, (r, _) in enumerate(conns)))
        assert got == list(range(count))
    finally:
        for _, writer in conns:
            writer.close()
    assert broker.is_alive()
