"""Retention: by time, by size and by log start offset, with a manual clock and scheduler."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from log_helpers import NOW, check_invariants, open_log, producer_batch, read_all, small_config

from josefk.records import NO_TIMESTAMP, BatchBuilder, Compression, InvalidRecordError
from josefk.storage.log import Log
from josefk.util.clock import ManualClock
from josefk.util.scheduler import Scheduler

DAY = 86_400_000


def fill(log_path: Path, clock: ManualClock, scheduler: Scheduler | None, **config: object) -> Log:
    log = open_log(log_path, small_config(**config), clock=clock, scheduler=scheduler)
    # 10 segments of 4 batches each (segment.bytes 1024, ~250-byte batches), one day apart.
    for day in range(10):
        for _ in range(4):
            log.append_as_leader(
                producer_batch(2, timestamp=NOW - (10 - day) * DAY, value_size=170), 0
            )
    return log


def deleted_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.endswith(".deleted"))


async def test_retention_ms_deletes_old_segments_after_delay(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    scheduler = Scheduler(clock)
    path = tmp_path / "t-0"
    log = fill(path, clock, scheduler, retention_ms=5 * DAY + 1000, file_delete_delay_ms=60_000)
    segments = log.num_segments
    assert segments >= 10
    log.update_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments()
    assert deleted > 0
    # Segments whose newest record is older than retention.ms are gone; the rest stay.
    for segment in log.log_segments():
        assert NOW - segment.largest_timestamp() <= 5 * DAY + 1000
    assert log.log_start_offset == log.log_segments()[0].base_offset
    check_invariants(log)
    # Renamed at once, removed only after file.delete.delay.ms, by the scheduler.
    assert deleted_files(path)
    await scheduler.run_due()
    assert deleted_files(path)
    clock.advance(60_000)
    await scheduler.run_due()
    assert deleted_files(path) == []


def test_retention_never_passes_the_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = fill(tmp_path / "t-0", clock, None, retention_ms=DAY)
    log.update_high_watermark(0)
    assert log.delete_old_segments() == 0
    second = log.log_segments()[1].base_offset
    log.update_high_watermark(second)
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == second
    check_invariants(log)


def test_roll_before_deleting_every_segment(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = fill(tmp_path / "t-0", clock, None, retention_ms=DAY // 2)
    leo = log.log_end_offset
    log.update_high_watermark(leo)
    log.delete_old_segments()
    assert log.num_segments == 1
    assert log.active_segment.base_offset == leo and log.active_segment.size() == 0
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (leo, leo, leo)
    # The empty active segment is never deleted, however old the clock says things are.
    clock.advance(100 * DAY)
    assert log.delete_old_segments() == 0
    assert log.append_as_leader(producer_batch(1), 0).first_offset == leo
    check_invariants(log)


def test_retention_bytes(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = fill(tmp_path / "t-0", clock, None, retention_bytes=3000, retention_ms=-1)
    log.update_high_watermark(log.log_end_offset)
    size_before = log.size()
    deleted = log.delete_old_segments()
    assert deleted > 0
    assert log.size() <= 3000 + 1024
    assert size_before - log.size() >= size_before - 3000 - 1024
    # Deleting one more segment would go below retention.bytes.
    assert log.size() - log.log_segments()[0].size() < 3000
    check_invariants(log)


def test_compact_policy_keeps_old_segments(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = fill(tmp_path / "t-0", clock, None, retention_ms=DAY, cleanup_policy=("compact",))
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 0
    log.maybe_increment_log_start_offset(log.log_segments()[3].base_offset)
    assert log.delete_old_segments() == 3


def test_retention_by_log_start_offset_keeps_reads_working(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = fill(tmp_path / "t-0", clock, None, retention_ms=-1)
    log.update_high_watermark(log.log_end_offset)
    target = log.log_segments()[4].base_offset + 3
    log.maybe_increment_log_start_offset(target)
    assert log.delete_old_segments() == 4
    assert log.log_start_offset == target
    assert read_all(log, target)[0].last_offset >= target
    check_invariants(log)


# -- batches whose records carry no timestamp ------------------------------------------------

HOUR = 3_600_000


def untimestamped_batch(
    count: int, *, header_max: int, codec: Compression = Compression.NONE
) -> bytearray:
    """A producer batch whose records have timestamp -1 and whose header max is ``header_max``.

    librdkafka writes such batches for messages produced with timestamp -1: first
    timestamp -1, every delta 0, and 0 in the max timestamp field.
    """
    builder = BatchBuilder(compression=codec)
    for i in range(count):
        builder.append(f"k{i}".encode(), b"v" * 30, timestamp=NO_TIMESTAMP)
    data = builder.build()
    struct.pack_into(">q", data, 35, header_max)
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    return data


@pytest.mark.parametrize(
    ("header_max", "codec"),
    [
        (NO_TIMESTAMP, Compression.NONE),
        (0, Compression.NONE),
        (0, Compression.GZIP),
        (0, Compression.ZSTD),
    ],
)
def test_retention_keeps_fresh_records_without_timestamps(
    tmp_path: Path, header_max: int, codec: Compression
) -> None:
    """A header max of 0 over untimestamped records is not a segment from 1970: the max is
    computed from the records (-1, none), and retention falls back to the file's mtime."""
    clock = ManualClock(wall_ms=NOW)
    path = tmp_path / "t-0"
    log = open_log(path, small_config(retention_ms=7 * DAY, segment_bytes=1 << 20), clock=clock)
    for _ in range(5):
        log.append_as_leader(untimestamped_batch(10, header_max=header_max, codec=codec), 0)
    log.update_high_watermark(log.log_end_offset)
    segment = log.active_segment
    # Written an hour ago by the file's clock: retention keeps it...
    os.utime(segment.path, ns=((NOW - HOUR) * 1_000_000,) * 2)
    assert log.delete_old_segments() == 0
    assert log.log_end_offset == 50 and len(read_all(log)) == 5
    assert segment.largest_timestamp() == NOW - HOUR
    # The stored headers carry no timestamp, with a valid CRC, and the time index holds none.
    for batch in read_all(log):
        batch.ensure_valid()
        assert batch.max_timestamp == NO_TIMESTAMP
    assert segment.max_timestamp_so_far() == NO_TIMESTAMP
    assert segment.time_index.entries == 0
    # ...until retention.ms has passed since then.
    clock.advance(7 * DAY)
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 50
    check_invariants(log)


def test_header_max_timestamp_is_recomputed_from_records(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1 << 20))
    # A header that understates its records: the max goes up to the true one.
    understated = producer_batch(3, timestamps=[NOW - 10, NOW, NOW - 5])
    struct.pack_into(">q", understated, 35, NOW - 10)
    struct.pack_into(">I", understated, 17, crc32c(memoryview(understated)[21:]))
    info = log.append_as_leader(understated, 0)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW, 2)
    # A correct header is left alone: the stored bytes are the producer's but for the
    # fields the broker owns (base offset and leader epoch, outside the CRC).
    correct = producer_batch(4, timestamps=[NOW, NOW + 3, NOW + 1, NOW + 2])
    sent = bytes(correct)
    log.append_as_leader(correct, 5)
    first, second = read_all(log)
    first.ensure_valid()
    assert first.max_timestamp == NOW
    stored = bytes(second.buffer)
    assert stored[17:] == sent[17:] and second.max_timestamp == NOW + 3
    assert log.active_segment.max_timestamp_so_far() == NOW + 3


def test_records_that_overrun_their_batch_are_rejected(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    batch = producer_batch(3)
    batch[61] = 0x7E  # the first record claims 63 bytes, more than the batch holds
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    # Kafka's reader calls a record that overruns its batch an invalid record (INVALID_RECORD,
    # which a producer does not retry), not a corrupt one.
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(batch, 0)
    assert log.log_end_offset == 0 and log.active_segment.size() == 0
