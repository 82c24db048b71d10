"""OffsetIndex and TimeIndex: layout, lazy mmap, appends, lookups (warm section), truncation."""

from __future__ import annotations

import bisect
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.storage.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from josefk.storage.index import (
    NO_TIMESTAMP,
    WARM_SECTION_BYTES,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)

# -- OffsetIndex ----------------------------------------------------------------------------


def test_creating_the_object_touches_nothing_and_first_use_preallocates(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, base_offset=100, max_index_size=67)
    assert not path.exists() and not index.is_open
    assert index.entries == 0
    assert index.is_open
    assert path.stat().st_size == 64  # rounded down to whole 8-byte entries
    assert index.max_entries == 8
    index.close()


def test_entries_are_big_endian_relative_offset_and_position(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    index = OffsetIndex(path, base_offset=1000, max_index_size=1024)
    index.append(1003, 0)
    index.append(1010, 4200)
    index.close()
    assert path.read_bytes() == struct.pack(">iiii", 3, 0, 10, 4200)


def test_an_existing_file_counts_its_entries_from_its_length(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(struct.pack(">iiiiii", 1, 10, 5, 20, 9, 30))
    index = OffsetIndex(path, base_offset=50, max_index_size=1024)
    assert index.entries == 3
    assert index.last_offset == 59
    assert index.entry(1) == OffsetPosition(55, 20)
    assert index.is_full()  # an inactive segment's index is trimmed: no room
    index.resize(1024)
    assert not index.is_full() and index.entries == 3
    index.append(60, 40)
    index.close()
    assert path.stat().st_size == 32


def test_lookup_and_upper_bound(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", base_offset=0, max_index_size=1024)
    for offset, position in [(1, 100), (4, 400), (6, 600), (8, 800)]:
        index.append(offset, position)
    assert index.lookup(0) == OffsetPosition(0, 0)  # below the first entry: the base
    assert index.lookup(4) == OffsetPosition(4, 400)
    assert index.lookup(5) == OffsetPosition(4, 400)
    assert index.lookup(100) == OffsetPosition(8, 800)
    assert index.fetch_upper_bound_offset(OffsetPosition(4, 400), 150) == OffsetPosition(6, 600)
    assert index.fetch_upper_bound_offset(OffsetPosition(4, 400), 200) == OffsetPosition(6, 600)
    assert index.fetch_upper_bound_offset(OffsetPosition(8, 800), 1) is None
    index.close()


def test_empty_index_lookup_gives_the_base(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", base_offset=77, max_index_size=1024)
    assert index.lookup(1000) == OffsetPosition(77, 0)
    assert index.last_offset == 77
    index.close()


def test_append_must_strictly_increase_and_fit(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", base_offset=10, max_index_size=16)
    index.append(12, 0)
    with pytest.raises(InvalidOffsetError) as raised:
        index.append(12, 10)
    assert str(tmp_path / "a.index") in str(raised.value)
    with pytest.raises(InvalidOffsetError):
        index.append(9, 10)
    index.append(13, 10)
    assert index.is_full()
    with pytest.raises(IndexFullError):
        index.append(14, 20)
    index.close()


def test_relative_offset_must_fit_int32(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", base_offset=0, max_index_size=1024)
    with pytest.raises(InvalidOffsetError):
        index.append(2**31, 0)
    index.append(2**31 - 1, 0)
    index.close()


def test_truncate_to_removes_entries_at_or_after(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", base_offset=0, max_index_size=1024)
    for offset in (1, 4, 6, 8):
        index.append(offset, offset * 100)
    index.truncate_to(5)
    assert index.entries == 2 and index.last_offset == 4
    index.truncate_to(4)
    assert index.entries == 1 and index.last_offset == 1
    index.truncate_to(0)
    assert index.entries == 0 and index.last_offset == 0
    index.append(3, 300)  # the slots are reusable
    assert index.lookup(3) == OffsetPosition(3, 300)
    index.close()


def test_reset_and_trim(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    index = OffsetIndex(path, base_offset=0, max_index_size=800)
    index.append(1, 0)
    index.append(2, 10)
    index.trim_to_valid_size()
    assert path.stat().st_size == 16 and index.is_full()
    index.reset()
    assert index.entries == 0 and path.stat().st_size == 800
    index.close()
    assert path.stat().st_size == 0


def test_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(struct.pack(">ii", 1, 0) + b"\x00\x00\x00")
    index = OffsetIndex(path, base_offset=0, max_index_size=1024)
    with pytest.raises(CorruptIndexError) as raised:
        index.sanity_check()
    assert raised.value.path == path
    index.close_handler()

    path.write_bytes(struct.pack(">iiii", 5, 0, -3, 10))  # last offset below the base
    index = OffsetIndex(path, base_offset=100, max_index_size=1024)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close_handler()

    path.write_bytes(struct.pack(">iiii", 5, 0, 4, 10))  # offsets go backwards
    index = OffsetIndex(path, base_offset=100, max_index_size=1024)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close_handler()

    path.write_bytes(struct.pack(">iiii", 5, 0, 6, 10))
    OffsetIndex(path, base_offset=100, max_index_size=1024).sanity_check()


@pytest.mark.parametrize(
    ("content", "corrupt"),
    [
        (struct.pack(">ii", 1, 0) + b"\x00\x00\x00", True),  # not whole entries
        (struct.pack(">iiii", 5, 0, -3, 10), True),  # last offset below the base
        (struct.pack(">iiii", 5, 0, 4, 10), True),  # offsets go backwards
        (struct.pack(">iiii", 5, 0, 6, 10), False),
        (b"", False),
    ],
)
def test_unmapped_sanity_check_judges_as_the_mapped_one_and_leaves_the_index_parked(
    tmp_path: Path, content: bytes, corrupt: bool
) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(content)
    mapped = OffsetIndex(path, base_offset=100, max_index_size=1024)
    unmapped = OffsetIndex(path, base_offset=100, max_index_size=1024)
    if corrupt:
        with pytest.raises(CorruptIndexError):
            mapped.sanity_check()
        with pytest.raises(CorruptIndexError):
            unmapped.sanity_check_unmapped()
        # Left as never opened: recovery opens it as it did after the mapped check.
        assert not unmapped.is_open
        mapped.close_handler()
        return
    mapped.sanity_check()
    unmapped.sanity_check_unmapped()
    assert not unmapped.is_open
    assert unmapped.entries == mapped.entries == len(content) // 8
    assert unmapped.last_entry() == mapped.last_entry()
    mapped.close_handler()
    # The active segment gets its room back unmapped; appends then map it.
    unmapped.resize(1024)
    assert not unmapped.is_open and path.stat().st_size == 1024
    unmapped.append(107, 20)
    assert unmapped.is_open and unmapped.entries == len(content) // 8 + 1
    assert unmapped.lookup(107) == OffsetPosition(107, 20)
    unmapped.close()


def test_unmapped_time_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    path.write_bytes(struct.pack(">qiqi", 500, 1, 100, 2))  # last timestamp below the first
    index = TimeIndex(path, base_offset=0, max_index_size=1200)
    with pytest.raises(CorruptIndexError):
        index.sanity_check_unmapped()
    assert not index.is_open
    path.write_bytes(struct.pack(">qiqi", 100, 1, 500, 2))
    index = TimeIndex(path, base_offset=0, max_index_size=1200)
    index.sanity_check_unmapped()
    assert not index.is_open and index.entries == 2
    assert index.last_entry() == TimestampOffset(500, 2)


def test_rename_and_delete_work_before_and_after_opening(tmp_path: Path) -> None:
    never_used = OffsetIndex(tmp_path / "a.index", base_offset=0)
    never_used.rename_to(tmp_path / "a.index.deleted")
    assert never_used.delete_if_exists() is False
    index = OffsetIndex(tmp_path / "b.index", base_offset=0, max_index_size=64)
    index.append(1, 0)
    index.rename_to(tmp_path / "b.index.deleted")
    assert index.lookup(1) == OffsetPosition(1, 0)
    assert (tmp_path / "b.index.deleted").exists()
    assert index.delete_if_exists() is True
    assert not (tmp_path / "b.index.deleted").exists()


def test_a_closed_index_reopens_on_use(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", base_offset=0, max_index_size=64)
    index.append(1, 0)
    index.close()
    assert not index.is_open
    assert index.lookup(5) == OffsetPosition(1, 0)
    index.close()


@given(
    gaps=st.lists(st.integers(1, 50), min_size=0, max_size=3000),
    targets=st.lists(st.integers(-5, 80_000), min_size=1, max_size=30),
)
def test_lookups_agree_with_a_brute_force_scan(
    tmp_path_factory: pytest.TempPathFactory, gaps: list[int], targets: list[int]
) -> None:
    # Up to 3000 entries: more than the 1024 of the warm section, so both halves are searched.
    index = OffsetIndex(tmp_path_factory.mktemp("idx") / "a.index", 0, max_index_size=8 * 4000)
    offsets, offset = [], 0
    for gap in gaps:
        offset += gap
        offsets.append(offset)
        index.append(offset, offset * 3)
    for target in targets:
        i = bisect.bisect_right(offsets, target) - 1
        expected = OffsetPosition(offsets[i], offsets[i] * 3) if i >= 0 else OffsetPosition(0, 0)
        assert index.lookup(target) == expected
        j = bisect.bisect_left([o * 3 for o in offsets], target)
        upper = index.fetch_upper_bound_offset(OffsetPosition(0, 0), target)
        assert upper == (OffsetPosition(offsets[j], offsets[j] * 3) if j < len(offsets) else None)
    index.close()


def test_warm_section_is_eight_kib() -> None:
    assert WARM_SECTION_BYTES == 8192


# -- TimeIndex ------------------------------------------------------------------------------


def test_time_entries_are_int64_timestamp_and_int32_relative_offset(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    index = TimeIndex(path, base_offset=500, max_index_size=1200)
    assert path.exists() is False
    index.maybe_append(1_700_000_000_000, 510)
    index.close()
    assert path.read_bytes() == struct.pack(">qi", 1_700_000_000_000, 10)


def test_maybe_append_only_when_the_timestamp_grows(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "a.timeindex", base_offset=0, max_index_size=1200)
    assert index.last_entry() == TimestampOffset(NO_TIMESTAMP, 0)
    index.maybe_append(100, 3)
    index.maybe_append(100, 5)  # same timestamp: nothing new
    assert index.entries == 1
    index.maybe_append(200, 5)
    assert index.last_entry() == TimestampOffset(200, 5)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(300, 4)  # offset going back
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(150, 9)  # timestamp going back
    index.close()


def test_time_index_keeps_a_slot_for_the_roll_entry(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "a.timeindex", base_offset=0, max_index_size=36)
    index.maybe_append(1, 1)
    assert not index.is_full()
    index.maybe_append(2, 2)
    assert index.is_full()  # 3 slots, one kept free
    with pytest.raises(IndexFullError):
        index.maybe_append(3, 3)
    index.maybe_append(3, 3, skip_full_check=True)
    assert index.entries == 3
    index.close()


def test_time_lookup_and_truncate(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "a.timeindex", base_offset=10, max_index_size=1200)
    for timestamp, offset in [(100, 11), (200, 14), (300, 16), (400, 18)]:
        index.maybe_append(timestamp, offset)
    assert index.lookup(50) == TimestampOffset(NO_TIMESTAMP, 10)
    assert index.lookup(250) == TimestampOffset(200, 14)
    assert index.lookup(400) == TimestampOffset(400, 18)
    index.truncate_to(16)
    assert index.entries == 2 and index.last_entry() == TimestampOffset(200, 14)
    index.truncate_to(15)
    assert index.entries == 2
    index.truncate_to(0)
    assert index.entries == 0 and index.last_entry() == TimestampOffset(NO_TIMESTAMP, 10)
    index.close()


def test_time_index_reopened_reads_its_last_entry(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    index = TimeIndex(path, base_offset=0, max_index_size=1200)
    index.maybe_append(5, 1)
    index.maybe_append(9, 2)
    index.close()
    again = TimeIndex(path, base_offset=0, max_index_size=1200)
    assert again.entries == 2 and again.last_entry() == TimestampOffset(9, 2)
    again.sanity_check()
    again.close()


def test_time_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    path.write_bytes(struct.pack(">qiqi", 500, 1, 100, 2))  # last timestamp below the first
    index = TimeIndex(path, base_offset=0, max_index_size=1200)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close_handler()
    path.write_bytes(struct.pack(">qi", 500, 1) + b"\x01")
    index = TimeIndex(path, base_offset=0, max_index_size=1200)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close_handler()


@given(
    steps=st.lists(st.tuples(st.integers(0, 20), st.integers(1, 5)), max_size=1500),
    targets=st.lists(st.integers(-10, 40_000), min_size=1, max_size=20),
)
def test_time_lookups_agree_with_a_brute_force_scan(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[int, int]],
    targets: list[int],
) -> None:
    index = TimeIndex(tmp_path_factory.mktemp("tidx") / "a.timeindex", 0, 12 * 2000)
    entries: list[TimestampOffset] = []
    timestamp, offset = 0, 0
    for dt, doff in steps:
        timestamp += dt
        offset += doff
        index.maybe_append(timestamp, offset)
        if not entries or timestamp > entries[-1].timestamp:
            entries.append(TimestampOffset(timestamp, offset))
    assert index.entries == len(entries)
    for target in targets:
        below = [e for e in entries if e.timestamp <= target]
        expected = below[-1] if below else TimestampOffset(NO_TIMESTAMP, 0)
        assert index.lookup(target) == expected
    index.close()


def test_lookups_across_warm_and_cold_sections(tmp_path: Path) -> None:
    # 5000 entries: the warm section holds the last 1024, the rest is cold.
    index = OffsetIndex(tmp_path / "a.index", base_offset=1000, max_index_size=8 * 5000)
    offsets = [1000 + 3 * i + 1 for i in range(5000)]
    for n, offset in enumerate(offsets):
        index.append(offset, n * 10)
    for target in range(995, offsets[-1] + 5, 7):
        i = bisect.bisect_right(offsets, target) - 1
        expected = OffsetPosition(offsets[i], i * 10) if i >= 0 else OffsetPosition(1000, 0)
        assert index.lookup(target) == expected
    index.close()


def test_rewrite_leaves_the_index_parked_with_its_entries_and_resizing_keeps_it_unmapped(
    tmp_path: Path,
) -> None:
    """``rewrite`` (recovery's way of writing a rebuilt index) trims the file to the entries
    given, whatever it held, and leaves it unmapped; a parked index grows and shrinks without
    being mapped and answers its last entry from memory; mapped again, it reads the same."""
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(b"\xff" * 4096)  # a crash's leftovers
    index = OffsetIndex(path, 100, max_index_size=1024)
    entries = b"".join(
        struct.pack(">ii", relative, position)
        for relative, position in [(1, 0), (5, 100), (9, 250)]
    )
    index.rewrite(entries)
    assert path.read_bytes() == entries
    assert not index.is_open
    assert index.last_entry() == OffsetPosition(109, 250)
    assert index.last_offset == 109
    assert index.resize(1024)
    assert not index.is_open
    assert path.stat().st_size == 1024
    assert path.read_bytes()[: len(entries)] == entries
    assert index.last_entry() == OffsetPosition(109, 250)
    assert index.entries == 3 and index.max_entries == 128
    assert index.lookup(106) == OffsetPosition(105, 100)  # maps it again
    assert index.is_open
    index.append(120, 400)
    assert index.last_entry() == OffsetPosition(120, 400)
    index.close()
    assert path.stat().st_size == 32
    empty = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, max_index_size=1200)
    empty.rewrite(b"")
    assert empty.last_entry() == TimestampOffset(-1, 100)
    with pytest.raises(ValueError):
        empty.rewrite(b"\x00" * 5)
