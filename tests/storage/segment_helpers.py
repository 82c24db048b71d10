"""Helpers shared by the lower-half storage tests: building batches and reading files back.

Batches are built with josefk.records' BatchBuilder; files are read back with kafka-python's
independent reader (``kafka.record.MemoryRecords``) to check the on-disk format.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kafka.record import MemoryRecords

from josefk.records import BatchBuilder, Compression, RecordBatch
from josefk.storage.segment import LogSegment


def make_batch(
    base_offset: int,
    count: int = 1,
    *,
    timestamp: int = 1_000,
    timestamps: Sequence[int] | None = None,
    value_size: int = 10,
    compression: Compression = Compression.NONE,
    offset_step: int = 1,
) -> bytearray:
    """A valid v2 batch of ``count`` records from ``base_offset``.

    ``offset_step`` > 1 leaves gaps between offsets (as compaction does).
    """
    builder = BatchBuilder(base_offset=base_offset, compression=compression)
    for i in range(count):
        ts = timestamps[i] if timestamps is not None else timestamp + i
        builder.append(
            f"key-{i}".encode(),
            bytes([65 + (base_offset + i) % 26]) * value_size,
            timestamp=ts,
            offset=base_offset + i * offset_step,
        )
    return builder.build()


def append_batch(segment: LogSegment, batch: bytearray | bytes) -> RecordBatch:
    """Append one batch the way the Log does, passing the header's facts."""
    view = RecordBatch(memoryview(batch))
    segment.append(view.last_offset, view.max_timestamp, view.last_offset, memoryview(batch))
    return view


def read_with_kafka_python(path: Path) -> list[tuple[int, int, int]]:
    """(base_offset, last_offset, record count) of every batch, as kafka-python reads them."""
    records = MemoryRecords(path.read_bytes())
    out = []
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        assert batch.validate_crc()
        items = list(batch)
        out.append((batch.base_offset, batch.base_offset + batch.last_offset_delta, len(items)))
    return out
