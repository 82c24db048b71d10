"""LogSegment: append with sparse indexes, reads as slices, roll conditions, truncation, files."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from segment_helpers import append_batch, make_batch, read_with_kafka_python

from josefk.records import Compression
from josefk.storage.errors import LogSegmentOffsetOverflowError
from josefk.storage.index import NO_TIMESTAMP, OffsetPosition, TimestampOffset
from josefk.storage.segment import (
    LogOffsetMetadata,
    LogSegment,
    RollParams,
    TimestampAndOffset,
    filename_prefix_from_offset,
    log_file,
    offset_from_file_name,
    offset_index_file,
    time_index_file,
)
from josefk.util.clock import JitterSource, ManualClock

NOW = 1_700_000_000_000


def open_segment(directory: Path, base_offset: int = 0, **kwargs: object) -> LogSegment:
    options: dict[str, object] = {"index_interval_bytes": 100, "max_index_size": 4096}
    options.update(kwargs)
    return LogSegment.open(directory, base_offset, **options)  # type: ignore[arg-type]


def test_file_names_are_twenty_digit_base_offsets(tmp_path: Path) -> None:
    assert filename_prefix_from_offset(12345) == "00000000000000012345"
    assert log_file(tmp_path, 7).name == "00000000000000000007.log"
    assert offset_index_file(tmp_path, 7).name == "00000000000000000007.index"
    assert time_index_file(tmp_path, 7, ".deleted").name == "00000000000000000007.timeindex.deleted"
    assert offset_from_file_name("00000000000000012345.log.deleted") == 12345
    with pytest.raises(ValueError):
        offset_from_file_name("leader-epoch-checkpoint")


def test_an_existing_segment_maps_its_indexes_only_when_used(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, 40)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000040.index",
        "00000000000000000040.log",
        "00000000000000000040.timeindex",
    ]
    append_batch(segment, make_batch(40, 3))
    segment.close()
    again = open_segment(tmp_path, 40, file_already_exists=True)
    assert not again.offset_index.is_open and not again.time_index.is_open
    assert again.read(45, 100) is None
    assert again.offset_index.is_open
    again.close()


def test_append_then_read_returns_a_slice_of_the_batch(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, 100)
    first = append_batch(segment, make_batch(100, 5))
    second = append_batch(segment, make_batch(105, 5))
    info = segment.read(107, 10_000)
    assert info is not None and info.records is not None
    assert info.fetch_offset_metadata == LogOffsetMetadata(107, 100, first.size_in_bytes)
    assert info.records.position == first.size_in_bytes
    assert info.records.read() == bytes(second.buffer)
    assert not info.first_entry_incomplete
    segment.close()


def test_read_limits_max_size_max_position_and_min_one_message(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    a = append_batch(segment, make_batch(0, 2, value_size=50))
    b = append_batch(segment, make_batch(2, 2, value_size=50))
    size_a, size_b = a.size_in_bytes, b.size_in_bytes

    info = segment.read(0, 10)
    assert info is not None and info.size == 10 and info.first_entry_incomplete
    info = segment.read(0, 10, min_one_message=True)
    assert info is not None and info.size == size_a and not info.first_entry_incomplete
    info = segment.read(0, 10_000, max_position=size_a)
    assert info is not None and info.size == size_a
    info = segment.read(2, 0)
    assert info is not None and info.size == 0
    assert info.fetch_offset_metadata.relative_position_in_segment == size_a
    info = segment.read(3, 10_000)
    assert info is not None and info.size == size_b
    assert segment.read(4, 10_000) is None
    with pytest.raises(ValueError):
        segment.read(0, -1)
    segment.close()


def test_an_index_entry_every_index_interval_bytes(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, index_interval_bytes=250)
    positions = []
    for offset in range(10):
        positions.append(segment.size())
        append_batch(segment, make_batch(offset, 1, value_size=60, timestamp=offset))
    batch_size = positions[1]
    entries = [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)]
    # A batch gets an entry once more than 250 bytes went by without one.
    expected, since = [], 0
    for n, position in enumerate(positions):
        if since > 250:
            expected.append(OffsetPosition(n, position))
            since = 0
        since += batch_size
    assert entries == expected
    times = [segment.time_index.entry(n) for n in range(segment.time_index.entries)]
    assert times == [TimestampOffset(e.offset, e.offset) for e in expected]
    segment.close()


def test_append_rejects_offsets_that_do_not_fit_the_segment(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, 1000)
    batch = make_batch(1000 + 2**31, 1)
    with pytest.raises(LogSegmentOffsetOverflowError) as raised:
        append_batch(segment, batch)
    assert raised.value.base_offset == 1000 and raised.value.offset == 1000 + 2**31
    assert segment.size() == 0
    append_batch(segment, make_batch(1000 + 2**31 - 1, 1))
    segment.close()


def test_read_next_offset_and_largest_timestamp(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, 10)
    assert segment.read_next_offset() == 10
    for base in range(10, 60, 5):
        append_batch(segment, make_batch(base, 5, timestamp=base * 100))
    assert segment.read_next_offset() == 60
    assert segment.largest_timestamp() == 55 * 100 + 4
    assert segment.max_timestamp_and_offset_so_far() == TimestampOffset(5504, 59)
    segment.close()


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, 0, index_interval_bytes=1)
    for base in range(0, 100, 4):
        append_batch(segment, make_batch(base, 4, timestamps=[base * 10 + i for i in range(4)]))
    assert segment.find_offset_by_timestamp(0) == TimestampAndOffset(0, 0)
    assert segment.find_offset_by_timestamp(555) == TimestampAndOffset(560, 56)
    assert segment.find_offset_by_timestamp(561) == TimestampAndOffset(561, 57)
    assert segment.find_offset_by_timestamp(100, starting_offset=50) == TimestampAndOffset(482, 50)
    assert segment.find_offset_by_timestamp(10_000) is None
    segment.close()


def test_find_offset_by_timestamp_in_a_compressed_batch(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    append_batch(
        segment, make_batch(0, 5, timestamps=[10, 50, 20, 60, 30], compression=Compression.GZIP)
    )
    assert segment.find_offset_by_timestamp(55) == TimestampAndOffset(60, 3)
    segment.close()


def test_truncate_to_removes_whole_batches_and_index_entries(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    segment = open_segment(tmp_path, 0, index_interval_bytes=1, clock=clock)
    sizes = []
    for base in range(0, 50, 5):
        sizes.append(append_batch(segment, make_batch(base, 5, timestamp=base)).size_in_bytes)
    total = segment.size()
    # Offset 22 is inside batch 20..24: that batch goes whole.
    assert segment.truncate_to(22) == total - sum(sizes[:4])
    assert segment.read_next_offset() == 20
    assert segment.offset_index.last_offset < 20
    assert segment.time_index.last_entry().offset < 20
    assert segment.max_timestamp_and_offset_so_far() == TimestampOffset(19, 19)
    assert segment.truncate_to(1_000) == 0
    clock.advance(5_000)
    assert segment.truncate_to(0) == sum(sizes[:4])
    assert segment.size() == 0 and segment.created == NOW + 5_000
    append_batch(segment, make_batch(0, 1))
    assert segment.read_next_offset() == 1
    segment.close()


def test_close_writes_the_roll_entry_and_reopening_finds_the_max_timestamp(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, 0, index_interval_bytes=10_000)
    append_batch(segment, make_batch(0, 3, timestamps=[5, 900, 7]))
    append_batch(segment, make_batch(3, 1, timestamp=100))
    assert segment.time_index.entries == 0
    segment.close()
    assert (tmp_path / "00000000000000000000.timeindex").read_bytes() == struct.pack(">qi", 900, 2)
    assert (tmp_path / "00000000000000000000.index").stat().st_size == 0
    again = open_segment(tmp_path, 0, index_interval_bytes=10_000, file_already_exists=True)
    again.sanity_check()
    assert again.largest_timestamp() == 900
    assert again.read_next_offset() == 4
    again.close()


def test_a_segment_without_timestamps_reports_its_mtime(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    append_batch(segment, make_batch(0, 1, timestamp=NO_TIMESTAMP))
    segment.set_last_modified(NOW)
    assert segment.largest_timestamp() == NOW
    segment.close()


def test_on_becoming_inactive_trims_and_adds_the_roll_entry(tmp_path: Path) -> None:
    segment = open_segment(
        tmp_path, 0, index_interval_bytes=1, preallocate=True, init_file_size=1 << 16
    )
    append_batch(segment, make_batch(0, 2, timestamps=[3, 8]))
    append_batch(segment, make_batch(2, 2, timestamps=[4, 5]))
    segment.on_becoming_inactive_segment()
    assert segment.offset_index.length == 8 * segment.offset_index.entries
    assert segment.time_index.length == 12 * segment.time_index.entries
    assert segment.time_index.last_entry() == TimestampOffset(8, 1)
    assert segment.path.stat().st_size == segment.size()
    segment.close()


def test_change_file_suffixes_and_delete(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, 5)
    append_batch(segment, make_batch(5, 2))
    segment.change_file_suffixes("", ".deleted")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "00000000000000000005.index.deleted",
        "00000000000000000005.log.deleted",
        "00000000000000000005.timeindex.deleted",
    ]
    assert segment.has_suffix(".deleted")
    info = segment.read(5, 1000)  # reads still work through the renamed files
    assert info is not None and info.size == segment.size()
    segment.delete_if_exists()
    assert list(tmp_path.iterdir()) == []


def test_files_parse_with_kafka_python(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, 0)
    append_batch(segment, make_batch(0, 3))
    append_batch(segment, make_batch(3, 2, compression=Compression.GZIP))
    append_batch(segment, make_batch(5, 4, compression=Compression.LZ4, offset_step=2))
    segment.close()
    assert read_with_kafka_python(tmp_path / "00000000000000000000.log") == [
        (0, 2, 3),
        (3, 4, 2),
        (5, 11, 4),
    ]


# -- rolling --------------------------------------------------------------------------------


def roll(segment: LogSegment, **overrides: int) -> bool:
    params = {
        "max_segment_bytes": 1 << 30,
        "max_segment_ms": 7 * 24 * 3600 * 1000,
        "max_timestamp_in_messages": NOW,
        "max_offset_in_messages": segment.base_offset,
        "messages_size": 100,
        "now": NOW,
    }
    params.update(overrides)
    return segment.should_roll(RollParams(**params))


def test_roll_by_size(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    append_batch(segment, make_batch(0, 1, value_size=100, timestamp=NOW))
    size = segment.size()
    assert not roll(segment, max_segment_bytes=size + 100, messages_size=100)
    assert roll(segment, max_segment_bytes=size + 99, messages_size=100)
    segment.close()


def test_roll_by_time_uses_the_first_batch_timestamp_minus_jitter(tmp_path: Path) -> None:
    jitter = JitterSource(seed=7).segment_jitter_ms(segment_jitter_ms=1_000, segment_ms=10_000)
    assert 0 <= jitter < 1_000
    segment = open_segment(tmp_path, rolling_jitter_ms=jitter, clock=ManualClock(NOW))
    assert not roll(segment, max_segment_ms=10_000, now=NOW + 10**9)  # empty: never by time
    append_batch(segment, make_batch(0, 1, timestamp=NOW))
    deadline = NOW + 10_000 - jitter
    assert not roll(segment, max_segment_ms=10_000, max_timestamp_in_messages=deadline)
    assert roll(segment, max_segment_ms=10_000, max_timestamp_in_messages=deadline + 1)
    segment.close()
    # After a restart the first batch's timestamp, not the reopening time, still counts.
    again = open_segment(tmp_path, rolling_jitter_ms=jitter, clock=ManualClock(NOW + 10**6))
    assert roll(again, max_segment_ms=10_000, max_timestamp_in_messages=deadline + 1)
    again.close()


def test_jitter_spreads_rolls_of_segments_created_together(tmp_path: Path) -> None:
    source = JitterSource(seed=1)
    jitters = [source.segment_jitter_ms(60_000, 3_600_000) for _ in range(20)]
    rolled_at = []
    for n, jitter in enumerate(jitters):
        (tmp_path / str(n)).mkdir()
        segment = open_segment(tmp_path / str(n), rolling_jitter_ms=jitter, clock=ManualClock(NOW))
        append_batch(segment, make_batch(0, 1, timestamp=NOW))
        first = next(
            t
            for t in range(NOW, NOW + 3_600_001, 1_000)
            if roll(segment, max_segment_ms=3_600_000, max_timestamp_in_messages=t)
        )
        rolled_at.append(first)
        segment.close()
    assert len(set(rolled_at)) > 10


def test_roll_by_creation_time_when_batches_have_no_timestamp(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    segment = open_segment(tmp_path, clock=clock)
    append_batch(segment, make_batch(0, 1, timestamp=NO_TIMESTAMP))
    assert not roll(segment, max_segment_ms=1_000, now=NOW + 1_000)
    assert roll(segment, max_segment_ms=1_000, now=NOW + 1_001)
    segment.close()


def test_roll_when_an_index_is_full_or_offsets_overflow(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, index_interval_bytes=1, max_index_size=24)
    append_batch(segment, make_batch(0, 1, timestamp=NOW))
    assert not roll(segment)
    append_batch(segment, make_batch(1, 1, timestamp=NOW + 1))
    assert roll(segment)  # the time index keeps its last slot for the roll entry
    segment.close()
    (tmp_path / "x").mkdir()
    other = open_segment(tmp_path / "x", 10)
    assert not roll(other, max_offset_in_messages=10 + 2**31 - 1)
    assert roll(other, max_offset_in_messages=10 + 2**31)
    other.close()
