"""Produce requests a well-behaved client never sends, written by hand: per-partition errors.

Requests are Produce v3 encoded here from the protocol guide (a non-flexible version every
broker accepts); batches come from kafka-python's independent v2 batch builder and are then
damaged on purpose. Each case checks the error code of its partition, that the partitions
beside it were appended, and that nothing of the rejected batch reached the log.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c
import pytest
from broker_process import BrokerProcess
from client_helpers import (
    CLIENT_TIMEOUT_S,
    ck_consume,
    ck_create_topic,
    ck_watermarks,
    unique_topic,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

pytestmark = pytest.mark.timeout(120)

NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUIRED_ACKS = 21
INVALID_RECORD = 87

# Offsets of v2 batch header fields (the protocol guide's RecordBatch layout).
BASE_OFFSET = 0
CRC = 17
ATTRIBUTES = 21
RECORD_COUNT = 57


def build_batch(count: int, tag: str) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(count):
        builder.append(
            i,
            timestamp=1_700_000_000_000 + i,
            key=f"{tag}-{i}".encode(),
            value=b"v" * 50,
            headers=[],
        )
    return bytearray(builder.build())


def fix_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, CRC, crc32c.crc32c(bytes(batch[ATTRIBUTES:])))
    return batch


@dataclass(frozen=True)
class PartitionData:
    topic: str
    partition: int
    records: bytes


def produce_v3(
    correlation_id: int, acks: int, data: Sequence[PartitionData], version: int = 3
) -> bytes:
    """A Produce request of ``version`` 3 to 8, whose requests are laid out alike (v7 is the
    first that may carry zstd, KIP-110)."""
    assert 3 <= version <= 8
    client_id = b"josefk-produce-errors"
    body = struct.pack(">hhih", 0, version, correlation_id, len(client_id)) + client_id
    body += struct.pack(">hhi", -1, acks, 10_000)  # no transactional id, acks, timeout
    by_topic: dict[str, list[PartitionData]] = {}
    for item in data:
        by_topic.setdefault(item.topic, []).append(item)
    body += struct.pack(">i", len(by_topic))
    for topic, items in by_topic.items():
        name = topic.encode()
        body += struct.pack(">h", len(name)) + name + struct.pack(">i", len(items))
        for item in items:
            body += struct.pack(">ii", item.partition, len(item.records)) + item.records
    return struct.pack(">i", len(body)) + body


def parse_produce_v3_response(
    body: bytes, version: int = 3
) -> dict[tuple[str, int], tuple[int, int]]:
    """-> {(topic, partition): (error_code, base_offset)}; ``version`` 3 to 7 (v5 added each
    partition's log start offset)."""
    assert 3 <= version <= 7
    pos = 4  # correlation id
    out = {}
    (topics,) = struct.unpack_from(">i", body, pos)
    pos += 4
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", body, pos)
        pos += 2
        name = body[pos : pos + name_len].decode()
        pos += name_len
        (partitions,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(partitions):
            index, error_code, base_offset, _append_time = struct.unpack_from(">ihqq", body, pos)
            pos += 22 if version < 5 else 30
            out[(name, index)] = (error_code, base_offset)
    return out


async def send_produce(
    broker: BrokerProcess, data: Sequence[PartitionData], *, acks: int = -1, version: int = 3
) -> dict[tuple[str, int], tuple[int, int]]:
    reader, writer = await asyncio.open_connection(broker.host, broker.port)
    try:
        writer.write(produce_v3(77, acks, data, version))
        await writer.drain()
        (size,) = struct.unpack(
            ">i", await asyncio.wait_for(reader.readexactly(4), CLIENT_TIMEOUT_S)
        )
        body = await asyncio.wait_for(reader.readexactly(size), CLIENT_TIMEOUT_S)
    finally:
        writer.close()
    assert struct.unpack_from(">i", body)[0] == 77
    return parse_produce_v3_response(body, version)


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    name = unique_topic("rawproduce")
    ck_create_topic(broker.bootstrap, name, partitions=2)
    return name


async def check_rejected_beside_a_good_partition(
    broker: BrokerProcess, topic: str, bad: bytearray, expected: Sequence[int]
) -> None:
    """Partition 0 gets the damaged batch, partition 1 a good one, in the same request."""
    _, high0 = await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0)
    _, high1 = await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 1)
    good = build_batch(2, "good")
    result = await send_produce(
        broker, [PartitionData(topic, 0, bytes(bad)), PartitionData(topic, 1, bytes(good))]
    )
    assert result[(topic, 0)][0] in expected, (
        f"partition 0: {result[(topic, 0)]}, expected {expected}"
    )
    assert result[(topic, 1)] == (NONE, high1)
    assert await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0) == (0, high0)
    assert await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 1) == (0, high1 + 2)
    assert broker.is_alive()


async def test_valid_raw_batch_is_appended(broker: BrokerProcess, topic: str) -> None:
    _, high = await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0)
    result = await send_produce(broker, [PartitionData(topic, 0, bytes(build_batch(3, "ok")))])
    assert result == {(topic, 0): (NONE, high)}
    got = await asyncio.to_thread(ck_consume, broker.bootstrap, topic, offset=high, count=3)
    assert [m.key() for m in got] == [b"ok-0", b"ok-1", b"ok-2"]


async def test_bad_crc_is_corrupt_message(broker: BrokerProcess, topic: str) -> None:
    batch = build_batch(3, "crc")
    batch[-1] ^= 0xFF  # a record byte changes, the CRC stays
    await check_rejected_beside_a_good_partition(broker, topic, batch, [CORRUPT_MESSAGE])


async def test_record_count_disagreeing_with_records(broker: BrokerProcess, topic: str) -> None:
    batch = build_batch(3, "count")
    struct.pack_into(">i", batch, RECORD_COUNT, 5)
    await check_rejected_beside_a_good_partition(
        broker, topic, fix_crc(batch), [CORRUPT_MESSAGE, INVALID_RECORD]
    )


async def test_batch_length_past_the_records(broker: BrokerProcess, topic: str) -> None:
    batch = build_batch(2, "len")
    struct.pack_into(">i", batch, 8, len(batch) + 100)  # batchLength claims more than sent
    await check_rejected_beside_a_good_partition(broker, topic, batch, [CORRUPT_MESSAGE])


async def test_nonzero_base_offset_from_a_producer(broker: BrokerProcess, topic: str) -> None:
    batch = build_batch(2, "base")
    struct.pack_into(">q", batch, BASE_OFFSET, 7)  # not covered by the CRC
    await check_rejected_beside_a_good_partition(broker, topic, batch, [INVALID_RECORD])


async def test_garbage_records_are_corrupt(broker: BrokerProcess, topic: str) -> None:
    await check_rejected_beside_a_good_partition(
        broker, topic, bytearray(b"\x07" * 70), [CORRUPT_MESSAGE, INVALID_RECORD]
    )


async def test_unknown_partition_and_topic(broker: BrokerProcess, topic: str) -> None:
    missing = unique_topic("never-created")
    result = await send_produce(
        broker,
        [
            PartitionData(topic, 99, bytes(build_batch(1, "p99"))),
            PartitionData(missing, 0, bytes(build_batch(1, "missing"))),
        ],
    )
    assert result[(topic, 99)][0] == UNKNOWN_TOPIC_OR_PARTITION
    assert result[(missing, 0)][0] == UNKNOWN_TOPIC_OR_PARTITION


async def test_invalid_acks_value(broker: BrokerProcess, topic: str) -> None:
    _, high = await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0)
    result = await send_produce(
        broker, [PartitionData(topic, 0, bytes(build_batch(1, "acks2")))], acks=2
    )
    assert result[(topic, 0)][0] == INVALID_REQUIRED_ACKS
    assert await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0) == (0, high)


async def test_acks_zero_gets_no_response_and_an_error_closes_the_connection(
    broker: BrokerProcess, topic: str
) -> None:
    """acks=0: a good produce is answered by nothing (the next response on the connection is
    the next request's); a failed one closes the connection, the only way to tell the client."""
    _, high = await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0)
    reader, writer = await asyncio.open_connection(broker.host, broker.port)
    try:
        good = produce_v3(501, 0, [PartitionData(topic, 0, bytes(build_batch(2, "acks0")))])
        client_id = b"x"
        api_versions = struct.pack(">hhih", 18, 0, 502, len(client_id)) + client_id
        writer.write(good + struct.pack(">i", len(api_versions)) + api_versions)
        await writer.drain()
        (size,) = struct.unpack(
            ">i", await asyncio.wait_for(reader.readexactly(4), CLIENT_TIMEOUT_S)
        )
        body = await asyncio.wait_for(reader.readexactly(size), CLIENT_TIMEOUT_S)
        assert struct.unpack_from(">i", body)[0] == 502
        bad = build_batch(2, "acks0-bad")
        bad[-1] ^= 0xFF
        writer.write(produce_v3(503, 0, [PartitionData(topic, 0, bytes(bad))]))
        await writer.drain()
        try:
            # Closing is immediate; 10 s only bounds the wait if the broker never does.
            rest: bytes | None = await asyncio.wait_for(reader.read(), 10.0)
        except ConnectionResetError:
            rest = b""
        except TimeoutError:
            rest = None
        assert rest is not None, "connection still open 10 s after a failed acks=0 produce"
        assert rest == b"", "the broker answered an acks=0 produce instead of closing"
    finally:
        writer.close()
    assert await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0) == (0, high + 2)
