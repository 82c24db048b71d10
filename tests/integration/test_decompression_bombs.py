"""Decompression bombs: a small Produce whose batches inflate to gigabytes.

One request carries 30 partitions, each a 2 KB zstd batch holding one record that inflates
to 65 MiB (past the 64 MiB a batch may inflate to), and a good batch for one more partition.
The broker must refuse the bombs with MESSAGE_TOO_LARGE, append the good batch and keep its
peak resident memory (VmHWM of the broker process, which only grows) within a generous bound:
batches are read as bounded streams, the request's batches share one decompression budget,
and no refused partition's buffer outlives its failure. Before that, each failed batch's 64
MiB buffer was kept alive by its exception until the answer was built (about 2 GB here).
"""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

import cramjam
import crc32c
import pytest
from client_helpers import ck_create_topic, ck_watermarks, unique_topic
from conftest import BrokerFactory
from test_produce_errors import PartitionData, send_produce

pytestmark = pytest.mark.timeout(240)

NONE = 0
MESSAGE_TOO_LARGE = 10
ZSTD = 4
BOMBS = 30
INFLATED = 65 << 20
# Generous: the broker decompresses one window and one unfinished record (here, up to the
# per-batch bound of 64 MiB) at a time; 30 bombs held at once would be about 2 GB.
PEAK_GROWTH_BOUND = 600 << 20


def varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def record_head(value_length: int) -> bytes:
    """A record with key "k" up to its value; the value and a header count of 0 follow."""
    body = b"\x00" + varint(0) + varint(0) + varint(1) + b"k" + varint(value_length)
    return varint(len(body) + value_length + 1) + body


def batch(codec: int, payload: bytes, *, timestamp: int | None = None) -> bytes:
    now = int(time.time() * 1000) if timestamp is None else timestamp
    count = 1
    after_crc = struct.pack(">hiqqqhii", codec, count - 1, now, now, -1, -1, -1, count) + payload
    head = struct.pack(">qiib", 0, 9 + len(after_crc), -1, 2)
    return head + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc


def bomb() -> bytes:
    stream = cramjam.zstd.Compressor(level=3)
    stream.compress(record_head(INFLATED))
    zeros = bytes(1 << 20)
    for _ in range(INFLATED >> 20):
        stream.compress(zeros)
    stream.compress(b"\x00")  # the header count
    return bytes(stream.finish())


def good() -> bytes:
    return batch(0, record_head(5) + b"hello" + b"\x00")


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


async def test_a_request_of_zstd_bombs_is_refused_within_bounded_memory(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory()
    topic = unique_topic("bombs")
    await asyncio.to_thread(ck_create_topic, broker.bootstrap, topic, partitions=BOMBS + 1)
    payload = bomb()
    assert len(payload) < 4096
    # Records without timestamps (-1, as some clients write them): a validator that trusts
    # a compressed batch's header otherwise must decompress this one for its max timestamp.
    bad = batch(ZSTD, payload, timestamp=-1)
    data = [PartitionData(topic, p, bad) for p in range(BOMBS)]
    data.append(PartitionData(topic, BOMBS, good()))
    before = peak_rss(broker.pid)
    result = await send_produce(broker, data, version=7)  # zstd needs v7 (KIP-110)
    growth = peak_rss(broker.pid) - before
    assert growth < PEAK_GROWTH_BOUND, f"peak RSS grew by {growth >> 20} MiB"
    assert {result[(topic, p)][0] for p in range(BOMBS)} == {MESSAGE_TOO_LARGE}
    assert result[(topic, BOMBS)] == (NONE, 0)
    for p in (0, BOMBS - 1):
        assert await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, p) == (0, 0)
    assert await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, BOMBS) == (0, 1)
    assert broker.is_alive()
