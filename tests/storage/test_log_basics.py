"""The partition log: offsets, append as leader and follower, read, roll, truncation."""

from __future__ import annotations

import errno
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest
from log_helpers import NOW, check_invariants, open_log, producer_batch, read_all, small_config

from josefk.records import RecordBatch, TimestampType
from josefk.records.errors import CorruptRecordError, InvalidRecordError
from josefk.storage.errors import KafkaStorageError, OffsetOutOfRangeError, RecordTooLargeError
from josefk.storage.index import AbstractIndex
from josefk.storage.log import (
    InvalidTimestampError,
    Log,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from josefk.storage.offsets import FetchIsolation
from josefk.storage.segment import LogOffsetMetadata, LogSegment
from josefk.util.clock import ManualClock
from josefk.util.scheduler import InlineExecutor

T = TypeVar("T")


def test_fresh_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "orders-0")
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (0, 0, 0)
    assert log.num_segments == 1
    assert (tmp_path / "orders-0" / "00000000000000000000.log").exists()
    assert str(log.topic_partition) == "orders-0"
    check_invariants(log)


def test_append_as_leader_assigns_offsets_in_place(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first = producer_batch(3)
    info = log.append_as_leader(first, leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    assert info.log_append_time == -1 and info.max_timestamp == NOW
    batch = RecordBatch(memoryview(first))
    assert (batch.base_offset, batch.partition_leader_epoch) == (0, 5)
    second = producer_batch(2) + producer_batch(4)
    info = log.append_as_leader(second, leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.batch_count) == (3, 8, 2)
    assert info.last_offset_of_first_batch == 4
    assert log.log_end_offset == 9
    batches = read_all(log)
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 2), (3, 4), (5, 8)]
    for b in batches:
        b.ensure_valid()
    check_invariants(log)


def test_log_append_time(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW + 555)
    log = open_log(
        tmp_path / "t-0", small_config(message_timestamp_type="LogAppendTime"), clock=clock
    )
    buffer = producer_batch(2, timestamp=5)
    info = log.append_as_leader(buffer, 0)
    assert info.log_append_time == NOW + 555 and info.max_timestamp == NOW + 555
    stored = read_all(log)[0]
    assert stored.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert stored.max_timestamp == NOW + 555
    stored.ensure_valid()


def test_invalid_batches_are_rejected_before_writing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(max_message_bytes=200))
    corrupt = producer_batch(1)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(producer_batch(1) + corrupt, 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(producer_batch(1)[:-3], 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytearray(), 0)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(producer_batch(1, value_size=300), 0)
    assert log.log_end_offset == 0 and log.size() == 0


def test_append_larger_than_segment_is_rejected(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=300, max_message_bytes=10_000))
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(producer_batch(1, value_size=400), 0)


def test_timestamp_bounds(tmp_path: Path) -> None:
    log = open_log(
        tmp_path / "t-0",
        small_config(message_timestamp_after_max_ms=1000, message_timestamp_before_max_ms=1000),
    )
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(producer_batch(1, timestamp=NOW + 5000), 0)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(producer_batch(1, timestamp=NOW - 5000), 0)
    log.append_as_leader(producer_batch(1, timestamp=NOW + 500), 0)
    assert log.log_end_offset == 1


def test_rolls_by_size_and_reads_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(30):
        log.append_as_leader(producer_batch(2, value_size=50), 0)
    assert log.num_segments > 3
    assert all(s.size() <= 1024 for s in log.log_segments())
    assert [b.base_offset for b in read_all(log)] == list(range(0, 60, 2))
    check_invariants(log)


def test_read_inside_a_batch_returns_the_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(producer_batch(5), 0)
    log.append_as_leader(producer_batch(5), 0)
    info = log.read(7, 10_000, FetchIsolation.LOG_END)
    assert info.records is not None
    batch = RecordBatch(memoryview(info.records.read()))
    assert (batch.base_offset, batch.last_offset) == (5, 9)
    assert info.fetch_offset_metadata.message_offset == 7


def test_read_limits_and_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(producer_batch(3), 0)
    log.append_as_leader(producer_batch(3), 0)
    # Nothing is committed yet: a consumer read at the HW is empty, a follower's is not.
    assert log.read(0, 10_000, FetchIsolation.HIGH_WATERMARK).size == 0
    assert log.read(0, 10_000, FetchIsolation.LOG_END).size > 0
    log.update_high_watermark(3)
    hw_batches = read_all(log, 0, FetchIsolation.HIGH_WATERMARK)
    assert [b.base_offset for b in hw_batches] == [0]
    committed = read_all(log, 0, FetchIsolation.TXN_COMMITTED)
    assert [b.base_offset for b in committed] == [0]
    assert log.read(6, 100, FetchIsolation.LOG_END).size == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100, FetchIsolation.LOG_END)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    # max_length smaller than the first batch: empty unless min_one_message (KIP-74).
    small = log.read(0, 10, FetchIsolation.LOG_END)
    assert small.first_entry_incomplete or small.size <= 10
    whole = log.read(0, 10, FetchIsolation.LOG_END, min_one_message=True)
    assert whole.records is not None
    assert RecordBatch(memoryview(whole.records.read())).last_offset == 2


def test_high_watermark_rules(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(producer_batch(10), 0)
    assert log.update_high_watermark(100) == 10
    assert log.update_high_watermark(-5) == 0
    assert log.maybe_increment_high_watermark(LogOffsetMetadata(4)) is not None
    assert log.high_watermark == 4
    assert log.maybe_increment_high_watermark(LogOffsetMetadata(3)) is None
    assert log.high_watermark == 4
    with pytest.raises(ValueError):
        log.maybe_increment_high_watermark(LogOffsetMetadata(11))
    metadata = log.fetch_high_watermark_metadata()
    assert metadata.segment_base_offset == 0 and metadata.relative_position_in_segment == 0


def test_append_as_follower(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "t-0")
    for n in (3, 2, 4):
        leader.append_as_leader(producer_batch(n), 7)
    data = leader.read(0, 1 << 20, FetchIsolation.LOG_END).records
    assert data is not None
    raw = bytearray(data.read())
    follower = open_log(tmp_path / "t-1")
    info = follower.append_as_follower(raw + raw[:20])  # a cut-off tail is dropped
    assert (info.first_offset, info.last_offset) == (0, 8)
    assert follower.log_end_offset == 9
    assert [b.partition_leader_epoch for b in read_all(follower)] == [7, 7, 7]
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(raw)
    shuffled = bytearray(raw)
    third = RecordBatch(memoryview(shuffled)[len(raw) - len(producer_batch(4)) :])
    third.set_base_offset(1)
    other = open_log(tmp_path / "t-2")
    with pytest.raises(OffsetsOutOfOrderError):
        other.append_as_follower(shuffled)
    assert follower.append_as_follower(b"").record_count == 0


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(20):
        log.append_as_leader(producer_batch(5, value_size=40), 0)
    log.update_high_watermark(100)
    log.flush()
    assert log.num_segments > 2
    assert log.truncate_to(45)
    assert log.log_end_offset == 45
    assert log.high_watermark == 45 and log.recovery_point == 45
    assert read_all(log)[-1].last_offset == 44
    assert not log.truncate_to(100)
    check_invariants(log)
    log.append_as_leader(producer_batch(5), 0)
    assert read_all(log)[-1].base_offset == 45
    check_invariants(log)


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(producer_batch(5), 0)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (1000, 1000, 1000)
    assert log.num_segments == 1 and log.active_segment.base_offset == 1000
    info = log.append_as_leader(producer_batch(2), 0)
    assert info.first_offset == 1000
    check_invariants(log)


def test_delete_records_raises_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(20):
        log.append_as_leader(producer_batch(5, value_size=40), 0)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(50)
    log.update_high_watermark(60)
    segments_before = log.num_segments
    assert log.delete_records(50) == 50
    assert log.num_segments < segments_before
    assert log.log_segments()[0].base_offset <= 50
    with pytest.raises(OffsetOutOfRangeError):
        log.read(49, 100)
    assert read_all(log, 50)[0].base_offset == 50
    assert not log.maybe_increment_log_start_offset(10)
    check_invariants(log)


def test_fetch_offset_by_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(20):
        log.append_as_leader(
            producer_batch(2, timestamp=NOW - 100_000 + i * 1000, value_size=40), 0
        )
    assert log.fetch_offset_by_timestamp(-2).offset == 0
    assert log.fetch_offset_by_timestamp(-1).offset == 40
    latest = log.fetch_offset_by_timestamp(-3)
    assert latest is not None and latest.timestamp == NOW - 100_000 + 19_000
    assert latest.offset in (38, 39)
    found = log.fetch_offset_by_timestamp(NOW - 100_000 + 7_500)
    assert found is not None and found.offset == 16
    assert log.fetch_offset_by_timestamp(NOW) is None


def test_roll_by_time_with_jitter(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    config = small_config(segment_bytes=1 << 20, segment_ms=10_000, segment_jitter_ms=5_000)
    log = open_log(tmp_path / "t-0", config, clock=clock)
    jitter = log.active_segment.rolling_jitter_ms
    assert 0 <= jitter < 5_000
    log.append_as_leader(producer_batch(1, timestamp=NOW), 0)
    # Just below segment.ms - jitter: no roll.
    log.append_as_leader(producer_batch(1, timestamp=NOW + 10_000 - jitter), 0)
    assert log.num_segments == 1
    log.append_as_leader(producer_batch(1, timestamp=NOW + 10_001 - jitter), 0)
    assert log.num_segments == 2
    assert log.active_segment.base_offset == 2


def test_flush_messages_moves_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(flush_messages=3))
    log.append_as_leader(producer_batch(2), 0)
    assert log.recovery_point == 0
    log.append_as_leader(producer_batch(2), 0)
    assert log.recovery_point == 4
    log.append_as_leader(producer_batch(1), 0)
    log.flush(up_to_offset=5)
    assert log.recovery_point == 5


def test_producer_batches_must_start_at_offset_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    batch = producer_batch(2)
    RecordBatch(memoryview(batch)).set_base_offset(42)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(batch, 0)
    assert log.log_end_offset == 0


def test_roll_schedules_a_flush_of_the_old_segments(tmp_path: Path) -> None:
    import asyncio

    from josefk.util.scheduler import Scheduler

    clock = ManualClock(wall_ms=NOW)
    scheduler = Scheduler(clock)
    log = open_log(tmp_path / "t-0", clock=clock, scheduler=scheduler)
    log.append_as_leader(producer_batch(3), 0)
    log.roll()
    assert log.recovery_point == 0
    asyncio.run(scheduler.run_due())
    assert log.recovery_point == 3
    # Rolling an empty active segment is a no-op.
    assert log.roll() is log.active_segment and log.num_segments == 2


def test_hw_position_is_forgotten_when_its_segment_is_deleted(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(producer_batch(3), 0)
    end_of_first = log.log_end_offset_metadata
    log.roll()
    log.append_as_leader(producer_batch(2), 0)
    # A follower reported the old LEO metadata: offset 3 at the end of segment 0.
    assert log.maybe_increment_high_watermark(end_of_first) is not None
    assert log.fetch_high_watermark_metadata().segment_base_offset == 0
    log.delete_records(3)
    metadata = log.fetch_high_watermark_metadata()
    assert (metadata.message_offset, metadata.segment_base_offset) == (3, 3)
    assert metadata.relative_position_in_segment == 0
    assert log.read(3, 100).size == 0


def test_flushed_inactive_segments_release_their_index_maps(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(30):
        log.append_as_leader(producer_batch(2, value_size=50), 0)
    log.flush()
    old = log.log_segments()[:-1]
    assert old and not any(s.offset_index.is_open or s.time_index.is_open for s in old)
    assert log.active_segment.offset_index.is_open
    # A lookup maps an index again on demand.
    assert [b.base_offset for b in read_all(log)] == list(range(0, 60, 2))
    found = log.fetch_offset_by_timestamp(NOW)
    assert found is not None and found.offset == 0


class _HookExecutor(InlineExecutor):
    """Runs a hook on the loop's side just before the blocking call, to model a race."""

    def __init__(self, hook: Callable[[], None]) -> None:
        self.hook = hook

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        self.hook()
        return super().submit(fn, *args, **kwargs)


async def test_flush_racing_a_close_is_not_an_io_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures: list[Path] = []
    holder: list[Log] = []
    log = Log.load(
        tmp_path / "t-0",
        small_config(),
        clock=ManualClock(wall_ms=NOW),
        executor=_HookExecutor(lambda: holder[0].close()),
        on_io_error=lambda path, error: failures.append(path),
    )
    holder.append(log)
    log.append_as_leader(producer_batch(2), 0)

    def closed_fd(self: LogSegment) -> None:
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(LogSegment, "flush", closed_fd)
    await log.flush_async()
    assert failures == [] and not log.is_offline


async def test_flush_error_on_a_live_segment_takes_the_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures: list[Path] = []
    log = Log.load(
        tmp_path / "t-0",
        small_config(),
        clock=ManualClock(wall_ms=NOW),
        executor=InlineExecutor(),
        on_io_error=lambda path, error: failures.append(path),
    )
    log.append_as_leader(producer_batch(2), 0)

    def failing(self: LogSegment) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(LogSegment, "flush", failing)
    with pytest.raises(KafkaStorageError):
        await log.flush_async()
    assert failures == [tmp_path] and log.is_offline
    assert log.recovery_point == 0
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)


def test_multi_batch_appends_roll_before_an_index_overflows(tmp_path: Path) -> None:
    # index.interval.bytes 0: every batch but a segment's first gets an index entry, and an
    # index of 96 bytes holds 12 of them, so appends of 3 batches must roll in time.
    config = small_config(segment_bytes=100_000, segment_index_bytes=96, index_interval_bytes=0)
    log = open_log(tmp_path / "t-0", config)
    for _ in range(12):
        log.append_as_leader(producer_batch(1) + producer_batch(1) + producer_batch(1), 0)
    assert log.num_segments >= 3
    for segment in log.log_segments():
        assert segment.offset_index.entries <= segment.offset_index.max_entries
    assert [b.base_offset for b in read_all(log)] == list(range(36))
    log.close_handlers()
    reopened = open_log(tmp_path / "t-0", config, had_clean_shutdown=False)
    assert reopened.log_end_offset == 36
    check_invariants(reopened)


def test_an_index_that_cannot_be_mapped_fails_the_append_not_the_log_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOMEM mapping the new segment's index (address space, overcommit) is this append's
    failure: the log dir stays online and the next append, with memory again, rolls."""
    failures: list[Path] = []
    log = Log.load(
        tmp_path / "t-0",
        small_config(segment_bytes=1024),
        clock=ManualClock(wall_ms=NOW),
        executor=InlineExecutor(),
        on_io_error=lambda path, error: failures.append(path),
    )
    size = len(producer_batch(5))
    while log.active_segment.size() + size <= 1024:
        log.append_as_leader(producer_batch(5), 0)
    assert log.num_segments == 1  # the next append rolls
    mapped = AbstractIndex._map

    def no_memory(self: AbstractIndex, fd: int, length: int) -> Any:
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(AbstractIndex, "_map", no_memory)
    end = log.log_end_offset
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(producer_batch(5), 0)
    assert failures == [] and not log.is_offline
    monkeypatch.setattr(AbstractIndex, "_map", mapped)
    log.append_as_leader(producer_batch(5), 0)
    assert log.log_end_offset == end + 5 and log.num_segments == 2
    check_invariants(log)
