"""Helpers for the log cleaner tests: keyed appends, a cleaner on an inline executor, and an
independent check of a cleaned log's files (kafka-python reads the .log, struct the indexes)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

from kafka.record import MemoryRecords
from log_helpers import read_all

from josefk.records import BatchBuilder, Compression
from josefk.records.record import iter_records
from josefk.storage.log import Log
from josefk.storage.log_cleaner import CleanerConfig, LogCleaner
from josefk.util.clock import ManualClock
from josefk.util.scheduler import InlineExecutor

Entry = tuple[bytes, bytes | None]


def append_keyed(
    log: Log,
    records: Sequence[Entry],
    *,
    timestamp: int,
    compression: Compression = Compression.NONE,
    producer: tuple[int, int, int] | None = None,
) -> tuple[int, int]:
    """Append one batch of (key, value) records as a producer would; returns its offsets.
    ``producer``: (producer id, epoch, base sequence) for an idempotent batch."""
    pid, epoch, sequence = producer if producer is not None else (-1, -1, -1)
    builder = BatchBuilder(
        compression=compression, producer_id=pid, producer_epoch=epoch, base_sequence=sequence
    )
    for key, value in records:
        builder.append(key, value, timestamp=timestamp)
    info = log.append_as_leader(builder.build(), 0)
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset, info.last_offset


def inline_cleaner(log: Log, clock: ManualClock, **config: object) -> LogCleaner:
    return LogCleaner(
        CleanerConfig(**config),  # type: ignore[arg-type]
        logs=lambda: [log],
        clock=clock,
        executor=InlineExecutor(),
        io_executor=InlineExecutor(),
    )


def records_of(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record a consumer from offset 0 reads."""
    return [(r.offset, r.key, r.value) for b in read_all(log) for r in iter_records(b)]


def check_files_with_independent_reader(directory: Path) -> None:
    """Every segment's .log parses with kafka-python (CRCs valid, offsets increasing), every
    offset index entry points at the start of a batch and names that batch's last offset,
    and time index entries never go back."""
    previous_offset = -1
    for log_file in sorted(directory.glob("*.log")):
        base = int(log_file.stem)
        data = log_file.read_bytes()
        records = MemoryRecords(data)
        starts: dict[int, int] = {}  # position -> last offset of the batch there
        position = 0
        while True:
            batch = records.next_batch()
            if batch is None:
                break
            assert batch.validate_crc(), f"{log_file}: bad CRC at {position}"
            size = struct.unpack_from(">i", data, position + 8)[0] + 12
            last_offset = batch.base_offset + struct.unpack_from(">i", data, position + 23)[0]
            assert batch.base_offset >= base
            for record in batch:
                assert record.offset > previous_offset, f"{log_file}: offsets go back"
                previous_offset = record.offset
            starts[position] = last_offset
            position += size
        assert position == len(data), f"{log_file}: {len(data) - position} bytes after the batches"
        index = log_file.with_suffix(".index").read_bytes()
        last_relative = -1
        for slot in range(len(index) // 8):
            relative, file_position = struct.unpack_from(">ii", index, slot * 8)
            if (relative, file_position) == (0, 0) and (slot > 0 or starts.get(0) != base):
                break  # preallocated, unused
            assert file_position in starts, f"{log_file}: index points inside a batch"
            assert base + relative == starts[file_position]
            assert relative > last_relative
            last_relative = relative
        time_index = log_file.with_suffix(".timeindex").read_bytes()
        last_timestamp = -1
        for slot in range(len(time_index) // 12):
            timestamp, relative = struct.unpack_from(">qi", time_index, slot * 12)
            if timestamp == 0 and relative == 0:
                break
            assert timestamp >= last_timestamp
            last_timestamp = timestamp
