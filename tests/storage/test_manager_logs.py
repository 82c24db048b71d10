"""LogManager: log dirs, start-up recovery, checkpoints, schedulers, offline dirs."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from log_helpers import NOW, producer_batch, read_all, small_config

from josefk.config.topic import LogConfig
from josefk.storage.checkpoint import OffsetCheckpointFile
from josefk.storage.errors import KafkaStorageError
from josefk.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager, LogManagerConfig
from josefk.storage.offsets import TopicPartition
from josefk.storage.segment import LogSegment
from josefk.util.clock import JitterSource, ManualClock
from josefk.util.scheduler import InlineExecutor, Scheduler

DAY = 86_400_000


class Broker:
    """A LogManager with a manual clock and scheduler, restartable over the same dirs."""

    def __init__(self, dirs: list[Path], config: LogConfig | None = None, **settings: int) -> None:
        self.dirs = dirs
        self.config = config if config is not None else small_config()
        self.settings = settings
        self.clock = ManualClock(wall_ms=NOW)
        self.failures: list[Path] = []
        self.manager = self._new_manager()

    def _new_manager(self) -> LogManager:
        self.scheduler = Scheduler(self.clock)
        return LogManager(
            LogManagerConfig(log_dirs=tuple(self.dirs), **self.settings),
            self.config,
            clock=self.clock,
            scheduler=self.scheduler,
            executor=InlineExecutor(),
            jitter=JitterSource(3),
            on_log_dir_failure=lambda path, error: self.failures.append(path),
        )

    async def restart(self, *, clean: bool) -> LogManager:
        if clean:
            await self.manager.shutdown()
        else:
            for log in self.manager.all_logs():
                log.close_handlers()  # a crash: nothing flushed, no marker
        self.manager = self._new_manager()
        await self.manager.startup()
        return self.manager

    async def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        await self.scheduler.run_due()


def append(manager: LogManager, tp: TopicPartition, batches: int = 10, **kwargs: object) -> None:
    log = manager.get_or_create_log(tp)
    for _ in range(batches):
        log.append_as_leader(producer_batch(2, value_size=60, **kwargs), 0)  # type: ignore[arg-type]


@pytest.fixture
def recover_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = LogSegment.recover

    def counting(self: LogSegment, *args: object, **kwargs: object) -> int:
        calls.append(self.base_offset)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", counting)
    return calls


async def test_logs_spread_over_dirs_and_survive_a_clean_restart(
    tmp_path: Path, recover_calls: list[int]
) -> None:
    broker = Broker([tmp_path / "a", tmp_path / "b"])
    manager = broker.manager
    await manager.startup()
    tps = [TopicPartition("orders", p) for p in range(4)]
    for tp in tps:
        append(manager, tp)
    parents = sorted(manager.get_log(tp).dir.parent.name for tp in tps)  # type: ignore[union-attr]
    assert parents == ["a", "a", "b", "b"]
    log0 = manager.get_or_create_log(tps[0])
    log0.update_high_watermark(12)
    log0.delete_records(4)
    await broker.restart(clean=True)
    for d in ("a", "b"):
        assert not (tmp_path / d / CLEAN_SHUTDOWN_FILE).exists()  # removed after loading
    assert broker.manager.had_clean_shutdown == {tmp_path / "a": True, tmp_path / "b": True}
    assert recover_calls == []
    reopened = broker.manager.get_log(tps[0])
    assert reopened is not None
    assert (reopened.log_start_offset, reopened.high_watermark, reopened.log_end_offset) == (
        4,
        12,
        20,
    )
    assert reopened.recovery_point == 20
    assert sorted(log.topic_partition for log in broker.manager.all_logs()) == tps


async def test_shutdown_writes_checkpoints_and_marker(tmp_path: Path) -> None:
    broker = Broker([tmp_path / "a"])
    await broker.manager.startup()
    tp = TopicPartition("t", 0)
    append(broker.manager, tp)
    log = broker.manager.get_or_create_log(tp)
    log.update_high_watermark(6)
    await broker.manager.shutdown()
    root = tmp_path / "a"
    assert (root / CLEAN_SHUTDOWN_FILE).exists()
    assert OffsetCheckpointFile(root / "recovery-point-offset-checkpoint").read() == {tp: 20}
    assert OffsetCheckpointFile(root / "replication-offset-checkpoint").read() == {tp: 6}
    assert OffsetCheckpointFile(root / "log-start-offset-checkpoint").read() == {}
    assert (root / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 20\n"


async def test_unclean_restart_recovers_and_truncates_a_torn_tail(
    tmp_path: Path, recover_calls: list[int]
) -> None:
    broker = Broker([tmp_path / "a"])
    await broker.manager.startup()
    tp = TopicPartition("t", 0)
    append(broker.manager, tp, batches=12)
    await broker.manager.checkpoint_recovery_points()  # recovery point 0: nothing flushed
    log = broker.manager.get_or_create_log(tp)
    active = log.active_segment.path
    expected_leo = log.log_end_offset - 2
    await broker.restart(clean=False)
    recover_calls.clear()
    # A torn write: the last batch half on disk.
    size = active.stat().st_size
    os.truncate(active, size - 20)
    await broker.restart(clean=False)
    assert recover_calls  # every segment after the recovery point was recovered
    reopened = broker.manager.get_log(tp)
    assert reopened is not None and reopened.log_end_offset == expected_leo
    assert read_all(reopened)[-1].next_offset == expected_leo


async def test_segment_cut_short_after_a_clean_shutdown_is_recovered(
    tmp_path: Path, recover_calls: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    """The marker says clean, but the only segment lost its second half while the broker
    was down: the first half is served, not an empty partition, and a warning names the file."""
    broker = Broker([tmp_path / "a"], small_config(segment_bytes=1 << 20))
    await broker.manager.startup()
    tp = TopicPartition("t", 0)
    append(broker.manager, tp, batches=40)
    log = broker.manager.get_or_create_log(tp)
    log.update_high_watermark(log.log_end_offset)
    assert log.num_segments == 1
    segment_path = log.active_segment.path
    whole = [
        (position, batch.size_in_bytes, batch.last_offset)
        for position, batch in log.active_segment.batches()
    ]
    await broker.manager.shutdown()
    assert (tmp_path / "a" / CLEAN_SHUTDOWN_FILE).exists()
    half = segment_path.stat().st_size // 2
    os.truncate(segment_path, half)
    expected_leo = max(last for position, size, last in whole if position + size <= half) + 1

    broker.manager = broker._new_manager()
    await broker.manager.startup()
    assert broker.manager.had_clean_shutdown == {tmp_path / "a": True}
    reopened = broker.manager.get_log(tp)
    assert reopened is not None
    assert reopened.log_end_offset == expected_leo
    assert reopened.high_watermark == expected_leo  # the checkpointed HW is clamped
    assert read_all(reopened)[-1].next_offset == expected_leo
    assert recover_calls == [0]
    assert any(
        r.levelname == "WARNING" and str(segment_path) in r.getMessage() for r in caplog.records
    )
    # New appends continue after the recovered end.
    append(broker.manager, tp, batches=1)
    assert reopened.log_end_offset == expected_leo + 2


async def test_retention_runs_on_schedule_and_files_go_after_the_delay(tmp_path: Path) -> None:
    broker = Broker(
        [tmp_path / "a"],
        small_config(retention_ms=DAY, file_delete_delay_ms=60_000),
        retention_check_interval_ms=300_000,
        initial_task_delay_ms=1000,
    )
    await broker.manager.startup()
    tp = TopicPartition("t", 0)
    append(broker.manager, tp, batches=30, timestamp=NOW - 2 * DAY)
    log = broker.manager.get_or_create_log(tp)
    log.update_high_watermark(log.log_end_offset)
    segments = log.num_segments
    assert segments > 2
    await broker.tick(999)
    assert log.num_segments == segments
    await broker.tick(1)
    assert log.num_segments == 1 and log.active_segment.size() == 0
    assert log.log_start_offset == log.log_end_offset
    assert any(p.name.endswith(".deleted") for p in log.dir.iterdir())
    await broker.tick(60_000)
    assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())


async def test_flush_and_checkpoint_schedulers(tmp_path: Path) -> None:
    broker = Broker(
        [tmp_path / "a"],
        small_config(flush_ms=10_000, segment_bytes=1 << 20),
        flush_check_interval_ms=1000,
        recovery_point_checkpoint_interval_ms=60_000,
        high_watermark_checkpoint_interval_ms=5_000,
        initial_task_delay_ms=0,
    )
    await broker.manager.startup()
    tp = TopicPartition("t", 0)
    append(broker.manager, tp)
    log = broker.manager.get_or_create_log(tp)
    log.update_high_watermark(8)
    await broker.tick(5_000)
    assert log.recovery_point == 0
    assert OffsetCheckpointFile(tmp_path / "a" / "replication-offset-checkpoint").read() == {tp: 8}
    await broker.tick(5_000)
    assert log.recovery_point == 20
    await broker.tick(60_000)
    assert OffsetCheckpointFile(tmp_path / "a" / "recovery-point-offset-checkpoint").read() == {
        tp: 20
    }


async def test_delete_log(tmp_path: Path) -> None:
    broker = Broker([tmp_path / "a"], small_config(file_delete_delay_ms=1000))
    await broker.manager.startup()
    tp = TopicPartition("gone", 0)
    append(broker.manager, tp)
    broker.manager.delete_log(tp)
    assert broker.manager.get_log(tp) is None
    names = os.listdir(tmp_path / "a")
    assert [n for n in names if n.startswith("gone-0.") and n.endswith("-delete")]
    await broker.tick(1000)
    assert [n for n in os.listdir(tmp_path / "a") if n.startswith("gone")] == []
    # A fresh log of the same name starts empty.
    assert broker.manager.get_or_create_log(tp).log_end_offset == 0


async def test_leftover_delete_dirs_are_removed_at_start_up(tmp_path: Path) -> None:
    leftover = tmp_path / "a" / "old-0.0123abcd-delete"
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"x")
    (tmp_path / "a" / "not a partition").mkdir()
    broker = Broker([tmp_path / "a"])
    await broker.manager.startup()
    await broker.scheduler.run_due()
    assert not leftover.exists()
    assert broker.manager.all_logs() == []


async def test_io_error_takes_the_log_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = Broker([tmp_path / "a", tmp_path / "b"])
    await broker.manager.startup()
    bad, good = TopicPartition("t", 0), TopicPartition("t", 1)
    append(broker.manager, bad)
    append(broker.manager, good)
    bad_log = broker.manager.get_or_create_log(bad)
    bad_dir = bad_log.dir.parent
    original_flush = LogSegment.flush

    def failing_flush(self: LogSegment) -> None:
        if self.path.parent.parent == bad_dir:
            raise OSError(5, "Input/output error")
        original_flush(self)

    monkeypatch.setattr(LogSegment, "flush", failing_flush)
    with pytest.raises(KafkaStorageError) as info:
        bad_log.flush()
    assert str(bad_dir) in str(info.value)
    assert broker.failures == [bad_dir]
    assert list(broker.manager.offline_log_dirs) == [bad_dir]
    with pytest.raises(KafkaStorageError):
        bad_log.append_as_leader(producer_batch(1), 0)
    with pytest.raises(KafkaStorageError):
        broker.manager.get_or_create_log(bad)
    # The other dir carries on, and new logs go there.
    good_log = broker.manager.get_or_create_log(good)
    good_log.append_as_leader(producer_batch(1), 0)
    assert broker.manager.get_or_create_log(TopicPartition("new", 0)).dir.parent != bad_dir
    assert [log.topic_partition for log in broker.manager.all_logs()] == [
        good,
        TopicPartition("new", 0),
    ]
    await broker.manager.shutdown()
    assert not (bad_dir / CLEAN_SHUTDOWN_FILE).exists()
    assert (good_log.dir.parent / CLEAN_SHUTDOWN_FILE).exists()


async def test_unusable_log_dir_at_start_up_goes_offline(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    broker = Broker([tmp_path / "file", tmp_path / "b"])
    await broker.manager.startup()
    assert list(broker.manager.offline_log_dirs) == [tmp_path / "file"]
    assert broker.manager.get_or_create_log(TopicPartition("t", 0)).dir.parent == tmp_path / "b"


async def test_corrupt_checkpoint_takes_only_its_dir_offline(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "recovery-point-offset-checkpoint").write_text("0\n5\n")
    broker = Broker([tmp_path / "a", tmp_path / "b"])
    await broker.manager.startup()
    assert list(broker.manager.offline_log_dirs) == [tmp_path / "a"]
    assert "recovery-point-offset-checkpoint" in str(
        broker.manager.offline_log_dirs[tmp_path / "a"]
    )


async def test_retention_pass_releases_index_maps_of_old_segments(tmp_path: Path) -> None:
    broker = Broker([tmp_path / "a"], small_config(retention_ms=-1))
    await broker.manager.startup()
    tp = TopicPartition("t", 0)
    append(broker.manager, tp, batches=30)
    log = broker.manager.get_or_create_log(tp)
    log.flush()
    assert log.fetch_offset_by_timestamp(-3) is not None  # maps every time index
    old = log.log_segments()[:-1]
    assert any(s.time_index.is_open for s in old)
    await broker.manager.cleanup_logs()
    assert not any(s.time_index.is_open or s.offset_index.is_open for s in old)
    assert log.active_segment.offset_index.is_open


async def test_the_periodic_passes_give_the_loop_turns_and_skip_closed_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retention or producer expiry pass over thousands of logs must not hold the event
    loop; a log closed meanwhile (its topic deleted) is skipped, not an error."""
    import josefk.storage.manager as manager_module

    monkeypatch.setattr(manager_module, "PASS_CHUNK", 1)
    broker = Broker([tmp_path / "a"], small_config(retention_ms=-1))
    await broker.manager.startup()
    for partition in range(4):
        append(broker.manager, TopicPartition("t", partition), batches=2)
    logs = broker.manager.all_logs()
    loop = asyncio.get_running_loop()
    ran_during: list[str] = []

    def close_last() -> None:
        ran_during.append("retention")
        logs[-1].close()

    loop.call_soon(close_last)
    assert await broker.manager.cleanup_logs() == 0
    assert ran_during == ["retention"]
    loop.call_soon(ran_during.append, "expiry")
    assert await broker.manager.remove_expired_producers() == 0
    assert ran_during == ["retention", "expiry"]


async def test_unclean_restart_recovers_only_from_the_checkpointed_recovery_point(
    tmp_path: Path, recover_calls: list[int]
) -> None:
    # Many partitions with several segments each, flushed (which moves each recovery point
    # to the log end) and checkpointed, then more appends and a crash: start-up recovers
    # only each log's segments past its checkpointed recovery point, and maps no index of a
    # segment that is not active (they open on first use).
    broker = Broker([tmp_path / "a"])
    await broker.manager.startup()
    tps = [TopicPartition("many", p) for p in range(20)]
    for tp in tps:
        append(broker.manager, tp, batches=12)
    for log in broker.manager.all_logs():
        log.flush()
    await broker.manager.checkpoint_recovery_points()
    checkpointed = OffsetCheckpointFile(tmp_path / "a" / "recovery-point-offset-checkpoint").read()
    assert checkpointed == {tp: 24 for tp in tps}
    for tp in tps[:5]:
        append(broker.manager, tp, batches=3)  # past the recovery point, then the crash
    expected: list[int] = []
    for tp in tps:
        log = broker.manager.get_log(tp)
        assert log is not None
        bases = [s.base_offset for s in log.log_segments()]
        # As Kafka: from the segment holding the recovery point (24) on.
        holding = max(b for b in bases if b <= 24)
        expected += [b for b in bases if b >= holding]
    assert len(expected) < sum(len(broker.manager.get_log(tp).log_segments()) for tp in tps) / 2  # type: ignore[union-attr]
    await broker.restart(clean=False)
    assert broker.manager.had_clean_shutdown == {tmp_path / "a": False}
    assert sorted(recover_calls) == sorted(expected)
    for tp in tps:
        log = broker.manager.get_log(tp)
        assert log is not None
        assert log.log_end_offset == (30 if tp in tps[:5] else 24)
        assert log.num_segments >= 3
        # No index mapped at all, the active segment's included (loaded in a worker
        # thread, where the bound on maps does not act): each maps on first use.
        for segment in log.log_segments():
            assert not segment.offset_index.is_open and not segment.time_index.is_open
        assert [b.next_offset for b in read_all(log)][-1] == log.log_end_offset


async def test_shutdown_leaves_every_log_a_producer_snapshot_at_its_end(tmp_path: Path) -> None:
    # The snapshots are written side by side in the executor before the logs close; each log
    # must still get one at its own log end offset, so the next start replays nothing.
    broker = Broker([tmp_path / "a"])
    await broker.manager.startup()
    tps = [TopicPartition("t", p) for p in range(5)]
    for tp in tps:
        append(broker.manager, tp)
    ends = {tp: broker.manager.get_or_create_log(tp).log_end_offset for tp in tps}
    await broker.manager.shutdown()
    for tp in tps:
        log_dir = tmp_path / "a" / f"{tp.topic}-{tp.partition}"
        assert sorted(p.name for p in log_dir.glob("*.snapshot"))[-1] == f"{ends[tp]:020d}.snapshot"
