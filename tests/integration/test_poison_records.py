"""Poison records: batches with correct CRCs whose records Kafka's validator refuses.

Each batch is crafted here byte by byte (records laid out as the protocol guide says, the
header's CRC right, so only the records are wrong) and sent with a raw Produce v3 beside a
good batch for another partition. The bad partition must get Kafka's error and keep its log
end offset; then a real consumer (confluent-kafka, which verifies CRCs) reads the partition
from its start to its end, which it could not if the batch had been appended: librdkafka
loops on _BAD_COMPRESSION or stalls at such an offset.
"""

from __future__ import annotations

import asyncio
import struct
import time
import zlib

import cramjam
import crc32c
import pytest
from broker_process import BrokerProcess
from client_helpers import ck_consume, ck_create_topic, ck_watermarks, unique_topic
from test_produce_errors import PartitionData, send_produce

pytestmark = pytest.mark.timeout(180)

NONE = 0
CORRUPT_MESSAGE = 2
INVALID_TIMESTAMP = 32
INVALID_RECORD = 87
GZIP, ZSTD = 1, 4
HOUR_MS = 3_600_000


def varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def record(
    index: int,
    *,
    key: bytes | None = b"key",
    value: bytes = b"value",
    delta: int = 0,
    key_length: int | None = None,
    header_count: int = 0,
    extra: bytes = b"",
) -> bytes:
    body = b"\x00" + varint(delta) + varint(index)
    body += varint((len(key) if key is not None else -1) if key_length is None else key_length)
    body += key or b""
    body += varint(len(value)) + value + varint(header_count) + extra
    return varint(len(body)) + body


def batch(
    records: list[bytes],
    *,
    count: int | None = None,
    codec: int = 0,
    payload: bytes | None = None,
    base_timestamp: int | None = None,
) -> bytes:
    """A producer's batch (base offset 0, no producer id) around ``records`` with a right CRC.

    ``count`` overrides the record count (and last offset delta to match it); ``payload``
    replaces the record bytes as sent (garbage in a compressed batch).
    """
    now = int(time.time() * 1000) if base_timestamp is None else base_timestamp
    count = len(records) if count is None else count
    data = b"".join(records)
    if payload is None:
        if codec == GZIP:
            payload = zlib.compress(data, wbits=31)
        elif codec == ZSTD:
            payload = bytes(cramjam.zstd.compress(data))
        else:
            payload = data
    after_crc = struct.pack(">hiqqqhii", codec, count - 1, now, now, -1, -1, -1, count) + payload
    crc = crc32c.crc32c(after_crc)
    head = struct.pack(">qiib", 0, 4 + 1 + 4 + len(after_crc), -1, 2)
    return head + struct.pack(">I", crc) + after_crc


def good_batch(count: int, tag: str) -> bytes:
    return batch([record(i, key=f"{tag}-{i}".encode()) for i in range(count)])


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    name = unique_topic("poison")
    ck_create_topic(
        broker.bootstrap,
        name,
        partitions=2,
        config={
            "message.timestamp.before.max.ms": str(HOUR_MS),
            "message.timestamp.after.max.ms": str(HOUR_MS),
        },
    )
    return name


async def refused_and_readable(
    broker: BrokerProcess, topic: str, bad: bytes, expected: tuple[int, ...]
) -> None:
    """Partition 0 gets ``bad``, partition 1 a good batch in the same request; then both
    partitions are read whole by confluent-kafka, a good batch appended after the bad one."""
    _, high0 = await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0)
    _, high1 = await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 1)
    result = await send_produce(
        broker,
        [PartitionData(topic, 0, bad), PartitionData(topic, 1, good_batch(2, "good"))],
        version=7,  # the first that may carry zstd (KIP-110): each codec's own check is tested
    )
    assert result[(topic, 0)][0] in expected, f"partition 0 answered {result[(topic, 0)]}"
    assert result[(topic, 1)] == (NONE, high1)
    assert await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0) == (0, high0)
    after = await send_produce(broker, [PartitionData(topic, 0, good_batch(3, "after"))])
    assert after[(topic, 0)] == (NONE, high0)
    got = await asyncio.to_thread(
        ck_consume, broker.bootstrap, topic, partition=0, count=high0 + 3, timeout=30
    )
    assert [m.key() for m in got[-3:]] == [b"after-0", b"after-1", b"after-2"]
    assert all(m.error() is None for m in got)
    assert broker.is_alive()


DAY_MS = 24 * HOUR_MS

POISON = {
    "key length past the record": batch([record(0), record(1, key_length=200), record(2)]),
    "negative key length": batch([record(0, key_length=-5)]),
    "negative header count": batch([record(0), record(1, header_count=-1)]),
    "bytes inside a record its fields do not use": batch([record(0, extra=b"\x00\x00\x00")]),
    "record count above the records": batch([record(0), record(1)], count=3),
    "gzip batch of garbage": batch([record(0)], codec=GZIP, payload=b"\x1f\x8b" + b"\x07" * 60),
    "zstd batch of garbage": batch(
        [record(0)], codec=ZSTD, payload=b"\x28\xb5\x2f\xfd" + b"\x55" * 40
    ),
    "gzip batch with bytes after its records": batch(
        [record(0)], codec=GZIP, payload=zlib.compress(record(0) + b"\x00\x00", wbits=31)
    ),
    "gzip batch of one record claiming 2**31-1": batch(
        [record(0)], count=(1 << 31) - 1, codec=GZIP
    ),
    "zstd batch whose record has a negative key length": batch(
        [record(0), record(1, key_length=-3)], codec=ZSTD
    ),
}


@pytest.mark.parametrize("name", list(POISON))
async def test_poison_batch_is_refused_and_consumers_keep_reading(
    broker: BrokerProcess, topic: str, name: str
) -> None:
    await refused_and_readable(broker, topic, POISON[name], (INVALID_RECORD, CORRUPT_MESSAGE))


@pytest.mark.parametrize("codec", [GZIP, ZSTD], ids=["gzip", "zstd"])
@pytest.mark.parametrize("delta", [-DAY_MS, DAY_MS], ids=["before", "after"])
async def test_compressed_records_with_bad_timestamps_behind_a_good_header(
    broker: BrokerProcess, topic: str, codec: int, delta: int
) -> None:
    """The header's base and max timestamps are now; one record inside is a day off."""
    now = int(time.time() * 1000)
    bad = batch([record(0), record(1, delta=delta), record(2)], codec=codec, base_timestamp=now)
    await refused_and_readable(broker, topic, bad, (INVALID_TIMESTAMP,))
