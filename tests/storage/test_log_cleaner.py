"""The log cleaner on real files: what a cleaning keeps, tombstones and their delete horizon,
producer state, compaction lags, grouping, a log changed under the cleaner, checkpoints, the
keyless-record refusal, the throttler, and a hypothesis property over random workloads."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from cleaner_helpers import (
    append_keyed,
    check_files_with_independent_reader,
    inline_cleaner,
    records_of,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_helpers import NOW, open_log, read_all, small_config

from josefk.records import BatchBuilder, Compression, InvalidRecordError, RecordBatch
from josefk.records.record import iter_records
from josefk.storage.cleaner import SegmentSnapshot, Throttler, group_segments_by_size
from josefk.storage.log import Log
from josefk.storage.log_cleaner import CLEANER_CHECKPOINT
from josefk.storage.offsets import TopicPartition, TxnMarker
from josefk.util.clock import ManualClock

DAY = 86_400_000


def compact_config(**overrides: object) -> object:
    values: dict[str, object] = {
        "cleanup_policy": ("compact",),
        "min_cleanable_dirty_ratio": 0.0,
        "segment_bytes": 600,
        "segment_index_bytes": 4096,
        "index_interval_bytes": 100,
    }
    values.update(overrides)
    return small_config(**values)


def fill(
    log, clock, rounds: int, keys: int = 5, seed: int = 0
) -> dict[bytes, tuple[int, bytes | None]]:
    rnd = random.Random(seed)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for i in range(rounds):
        key = f"key-{rnd.randrange(keys)}".encode()
        value = f"value-{i}".encode()
        first, _ = append_keyed(log, [(key, value)], timestamp=clock.milliseconds())
        latest[key] = (first, value)
    return latest


async def test_a_cleaning_keeps_the_latest_value_of_each_key_at_its_offset(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(tmp_path / "t-0", compact_config(), clock=clock)
    latest = fill(log, clock, 200)
    active_base = log.active_segment.base_offset
    before = records_of(log)
    cleaner = inline_cleaner(log, clock)
    assert await cleaner.clean_once()
    after = records_of(log)
    assert len(after) < len(before)
    assert set(after) <= set(before)  # same offsets, keys and values, nothing made up
    cleaned = [r for r in after if r[0] < active_base]
    keys = [key for _, key, _ in cleaned]
    assert len(keys) == len(set(keys)), "a key twice in the cleaned section"
    final = {key: (offset, value) for offset, key, value in after}
    assert final == latest
    assert cleaner.checkpoint(TopicPartition("t", 0)) == active_base
    check_files_with_independent_reader(log.dir)
    log.close()


async def test_the_checkpoint_file_is_kafkas_format(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(tmp_path / "orders-3", compact_config(), clock=clock)
    fill(log, clock, 60)
    cleaner = inline_cleaner(log, clock)
    assert await cleaner.clean_once()
    text = (tmp_path / CLEANER_CHECKPOINT).read_text()
    assert text == f"0\n1\norders 3 {log.active_segment.base_offset}\n"
    reloaded = inline_cleaner(log, clock)
    await reloaded.startup([tmp_path])
    assert reloaded.checkpoint(TopicPartition("orders", 3)) == log.active_segment.base_offset
    assert not await reloaded.clean_once()  # nothing dirty: nothing to do
    log.close()


async def test_tombstones_stay_for_delete_retention_ms_after_cleaning_then_go(
    tmp_path: Path,
) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=DAY), clock=clock)
    append_keyed(log, [(b"a", b"1"), (b"b", b"1")], timestamp=clock.milliseconds())
    append_keyed(log, [(b"a", None)], timestamp=clock.milliseconds())
    fill(log, clock, 40, keys=3)  # other keys, enough to roll past the tombstone
    cleaner = inline_cleaner(log, clock)
    assert await cleaner.clean_once()
    assert (2, b"a", None) in records_of(log)
    assert not any(key == b"a" and value is not None for _, key, value in records_of(log))
    clock.advance(DAY - 1)
    assert not await cleaner.clean_once()  # nothing dirty, horizon not reached
    assert (2, b"a", None) in records_of(log)
    clock.advance(1)
    assert await cleaner.clean_once()  # the horizon alone makes the log cleanable
    assert not any(key == b"a" for _, key, _ in records_of(log))
    assert (1, b"b", b"1") in records_of(log)
    check_files_with_independent_reader(log.dir)
    log.close()


async def test_the_last_batch_of_a_producer_survives_as_an_empty_batch(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    config = compact_config()
    log = open_log(tmp_path / "t-0", config, clock=clock)
    append_keyed(log, [(b"k", b"old")], timestamp=NOW, producer=(7, 0, 0))
    append_keyed(log, [(b"k", b"x"), (b"j", b"x")], timestamp=NOW, producer=(7, 0, 1))
    fill(log, clock, 40, keys=2, seed=3)  # keys key-0, key-1 only
    append_keyed(log, [(b"k", b"new"), (b"j", b"new")], timestamp=NOW)
    log.roll()
    cleaner = inline_cleaner(log, clock)
    assert await cleaner.clean_once()
    batches = [b for b in _all_batches(log) if b.producer_id == 7]
    assert [(b.base_offset, b.last_offset, b.record_count, b.base_sequence) for b in batches] == [
        (1, 2, 0, 1)
    ]
    log.close()
    # Without snapshots the producer's state is rebuilt from the log: from the empty batch.
    for snapshot in log.dir.glob("*.snapshot"):
        snapshot.unlink()
    log = open_log(log.dir, config, clock=clock)
    entry = log.producer_state.last_entry(7)
    assert entry is not None and entry.last_sequence == 2 and entry.last_data_offset == 2
    log.close()


def _all_batches(log: Log) -> list[RecordBatch]:
    return read_all(log)


async def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(tmp_path / "t-0", compact_config(min_compaction_lag_ms=60_000), clock=clock)
    fill(log, clock, 80)
    cleaner = inline_cleaner(log, clock)
    assert not await cleaner.clean_once()  # every record is younger than the lag
    clock.advance(60_001)
    assert await cleaner.clean_once()
    log.close()


async def test_max_compaction_lag_cleans_whatever_the_ratio(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    config = compact_config(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=3_600_000)
    log = open_log(tmp_path / "t-0", config, clock=clock)
    fill(log, clock, 80)
    cleaner = inline_cleaner(log, clock)
    assert await cleaner.clean_once()  # all dirty: ratio 1.0 > 0.99
    fill(log, clock, 12, seed=5)
    log.roll()
    assert not await cleaner.clean_once()  # a little dirty, below the ratio
    clock.advance(3_600_001)
    assert await cleaner.clean_once()
    log.close()


async def test_small_cleaned_segments_are_grouped_into_one(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(tmp_path / "t-0", compact_config(segment_bytes=600), clock=clock)
    fill(log, clock, 120, keys=3)
    cleaner = inline_cleaner(log, clock)
    assert await cleaner.clean_once()
    segments_after_first = len(log.log_segments())
    fill(log, clock, 30, keys=3, seed=9)
    log.roll()
    assert await cleaner.clean_once()
    # The first cleaning groups by the old sizes (each near segment.bytes); the second sees
    # small cleaned segments and merges them.
    assert len(log.log_segments()) < segments_after_first
    assert all(s.size() <= 600 for s in log.log_segments())
    check_files_with_independent_reader(log.dir)
    log.close()


def test_grouping_respects_size_index_and_offset_limits() -> None:
    segments = [SegmentSnapshot(i * 10, i * 10 + 10, 100) for i in range(6)]
    assert group_segments_by_size(
        segments, max_size=250, max_index_size=1000, index_sizes=[(8, 12)] * 6
    ) == [[0, 1], [2, 3], [4, 5]]
    assert group_segments_by_size(
        segments, max_size=10_000, max_index_size=20, index_sizes=[(8, 12)] * 6
    ) == [[0], [1], [2], [3], [4], [5]]
    wide = [SegmentSnapshot(0, 10, 1), SegmentSnapshot(10, 1 << 32, 1)]
    assert group_segments_by_size(
        wide, max_size=100, max_index_size=100, index_sizes=[(0, 0)] * 2
    ) == [[0], [1]]


async def test_a_log_changed_under_the_cleaner_is_left_alone(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(tmp_path / "t-0", compact_config(), clock=clock)
    fill(log, clock, 100)
    before = records_of(log)
    cleaner = inline_cleaner(log, clock)
    original = log.replace_segments

    def truncated_meanwhile(base_offset, old_segments, old_sizes, **kwargs):  # type: ignore[no-untyped-def]
        log.truncate_to(old_segments[-1].base_offset)
        return original(base_offset, old_segments, old_sizes, **kwargs)

    log.replace_segments = truncated_meanwhile  # type: ignore[method-assign]
    assert not await cleaner.clean_once()
    assert not list(log.dir.glob("*.cleaned"))
    assert records_of(log) == [r for r in before if r[0] < log.log_end_offset]
    assert cleaner.checkpoint(TopicPartition("t", 0)) is None
    log.close()


async def test_a_full_offset_map_cleans_part_and_leaves_the_rest_dirty(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(tmp_path / "t-0", compact_config(), clock=clock)
    latest = fill(log, clock, 300, keys=40)
    # Room for 10 keys: each cleaning maps part of the dirty section.
    cleaner = inline_cleaner(log, clock, dedupe_buffer_size=10 * 24, io_buffer_load_factor=1.0)
    checkpoints = []
    while await cleaner.clean_once():
        checkpoints.append(cleaner.checkpoint(TopicPartition("t", 0)))
    assert len(checkpoints) > 2 and checkpoints == sorted(checkpoints)
    assert checkpoints[-1] == log.active_segment.base_offset
    final = {key: (offset, value) for offset, key, value in records_of(log)}
    assert final == latest
    log.close()


def test_a_compacted_topic_refuses_records_without_a_key(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compact_config())
    for compression in (Compression.NONE, Compression.GZIP):
        builder = BatchBuilder(compression=compression)
        builder.append(b"k", b"v", timestamp=NOW)
        builder.append(None, b"v", timestamp=NOW)
        with pytest.raises(InvalidRecordError, match="without key"):
            log.append_as_leader(builder.build(), 0)
    assert log.log_end_offset == 0
    delete_log = open_log(tmp_path / "u-0", small_config())
    builder = BatchBuilder()
    builder.append(None, b"v", timestamp=NOW)
    delete_log.append_as_leader(builder.build(), 0)
    assert delete_log.log_end_offset == 1
    log.close()
    delete_log.close()


def test_the_throttler_sleeps_to_keep_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds * 1000

    throttler = Throttler(1000.0, clock_ms=lambda: now[0], sleep_s=sleep, check_interval_ms=100)
    throttler.maybe_throttle(500)  # no time has passed: not checked yet
    assert slept == []
    now[0] += 100
    throttler.maybe_throttle(0)  # 500 bytes in 100 ms is 5000 B/s: sleep until 500 ms
    assert slept == [pytest.approx(0.4)]
    now[0] += 1000
    throttler.maybe_throttle(100)  # 100 B/s: under the rate
    assert len(slept) == 1


# -- the property ------------------------------------------------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.lists(
                st.tuples(st.integers(0, 12), st.booleans(), st.integers(0, 40)),
                min_size=1,
                max_size=5,
            ),
            st.sampled_from([Compression.NONE, Compression.GZIP]),
        ),
        st.tuples(st.just("clean"), st.none(), st.none()),
        st.tuples(st.just("wait"), st.integers(0, 2 * DAY), st.none()),
        st.tuples(st.just("roll"), st.none(), st.none()),
    ),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=operations,
    # At least the largest batch the operations can build (5 records of 40-byte values, ~340
    # bytes, a little more gzipped): a smaller segment refuses the append, as Kafka does.
    segment_bytes=st.integers(400, 3000),
    map_keys=st.sampled_from([3, 1000]),
    retention=st.sampled_from([DAY, 10 * DAY]),
)
async def test_property_cleaning_keeps_exactly_the_latest_per_key(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[str, object, object]],
    segment_bytes: int,
    map_keys: int,
    retention: int,
) -> None:
    directory = tmp_path_factory.mktemp("clean") / "t-0"
    clock = ManualClock(wall_ms=NOW)
    config = compact_config(
        segment_bytes=segment_bytes, delete_retention_ms=retention, segment_index_bytes=8192
    )
    log = open_log(directory, config, clock=clock)
    cleaner = inline_cleaner(
        log, clock, dedupe_buffer_size=map_keys * 24, io_buffer_load_factor=1.0
    )
    written: list[tuple[int, bytes, bytes | None]] = []
    # When each offset's tombstone may go at the earliest: its first cleaning + retention.
    tombstone_cleaned_at: dict[int, int] = {}
    for op, arg, extra in ops:
        if op == "append":
            entries = [
                (f"k{key}".encode(), None if dead else b"v" * size)
                for key, dead, size in arg  # type: ignore[union-attr]
            ]
            first, _ = append_keyed(log, entries, timestamp=clock.milliseconds(), compression=extra)  # type: ignore[arg-type]
            written.extend((first + i, key, value) for i, (key, value) in enumerate(entries))
        elif op == "clean":
            await cleaner.clean_once()
            for batch in _all_batches(log):
                if batch.has_delete_horizon:
                    for record in iter_records(batch):
                        if record.value is None:
                            tombstone_cleaned_at.setdefault(record.offset, clock.milliseconds())
        elif op == "wait":
            clock.advance(arg)  # type: ignore[arg-type]
        else:
            log.roll()
        _check(log, written, cleaner, tombstone_cleaned_at, clock.milliseconds(), retention)
    check_files_with_independent_reader(log.dir)
    log.close()


def _check(log, written, cleaner, tombstone_cleaned_at, now, retention) -> None:  # type: ignore[no-untyped-def]
    present = records_of(log)
    offsets = [r[0] for r in present]
    assert offsets == sorted(set(offsets)), "offsets must increase"
    assert set(present) <= set(written), "a record the producer never wrote"
    latest: dict[bytes, tuple[int, bytes, bytes | None]] = {}
    for record in written:
        latest[record[1]] = record
    present_set = set(present)
    for key, record in latest.items():
        offset, _, value = record
        if value is not None:
            assert record in present_set, f"latest value of {key!r} lost"
        elif record not in present_set:
            # Only a tombstone whose horizon passed may go.
            cleaned_at = tombstone_cleaned_at.get(offset)
            assert cleaned_at is not None and now >= cleaned_at + retention, (
                f"tombstone of {key!r} at {offset} removed too early"
            )
    # A consumer from 0 ends on each key's latest value (or nothing after its tombstone).
    seen: dict[bytes, tuple[int, bytes, bytes | None]] = {}
    for record in present:
        seen[record[1]] = record
    for key, record in latest.items():
        if record[2] is not None:
            assert seen[key] == record
        else:
            assert key not in seen or seen[key] == record
    # The cleaned section holds each key once at most.
    checkpoint = cleaner.checkpoint(TopicPartition("t", 0)) or 0
    clean_keys = [key for offset, key, _ in present if offset < checkpoint]
    assert len(clean_keys) == len(set(clean_keys)), "a key twice in the cleaned section"
    for batch in _all_batches(log):
        list(iter_records(batch))  # every batch reads back


async def test_aborted_records_neither_hide_committed_ones_nor_survive_a_cleaning(
    tmp_path: Path,
) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(tmp_path / "t-0", compact_config(), clock=clock)
    append_keyed(log, [(b"k", b"committed")], timestamp=NOW)
    builder = BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    builder.append(b"k", b"aborted", timestamp=NOW)
    builder.append(b"other", b"aborted too", timestamp=NOW)
    aborted_first = log.append_as_leader(builder.build(), 0).first_offset
    log.update_high_watermark(log.log_end_offset)
    marker = log.append_txn_marker(TxnMarker(7, 0, 0, committed=False), 0).first_offset
    log.update_high_watermark(log.log_end_offset)
    fill(log, clock, 60, keys=3, seed=1)  # other keys, enough to roll past the transaction
    assert log.active_segment.base_offset > marker
    cleaner = inline_cleaner(log, clock)
    assert await cleaner.clean_once()
    after = records_of(log)
    assert (0, b"k", b"committed") in after
    assert not [r for r in after if r[2] in (b"aborted", b"aborted too")]
    markers = [b for b in read_all(log) if b.is_control]
    assert [m.base_offset for m in markers] == [marker]
    # The index still says what was aborted (a reader of the old records would need it).
    aborted = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in aborted] == [
        (7, aborted_first, marker)
    ]
    check_files_with_independent_reader(log.dir)
    log.close()
