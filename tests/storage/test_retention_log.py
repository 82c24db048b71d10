"""Retention: by time, by size and by log start offset, with a manual clock and scheduler."""

from __future__ import annotations

from pathlib import Path

from log_helpers import NOW, check_invariants, open_log, producer_batch, read_all, small_config

from josefk.storage.clock import ManualClock
from josefk.storage.log import Log
from josefk.storage.scheduler import Scheduler

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
