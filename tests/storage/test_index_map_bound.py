"""The process-wide bound on index maps (each holds a file descriptor without the C extension,
and counts against vm.max_map_count with it): indexes
past the bound are parked (unmapped, entry count kept) and mapped again on their next use,
with the same entries and the same bytes on disk; and a new index file is written once
through the file before it is mapped (its first block allocated; contents unchanged)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from josefk.fileio import MAPS_HOLD_DESCRIPTORS
from josefk.storage.index import (
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
    index_maps_held,
    set_index_map_limit,
)


@pytest.fixture
def bound() -> Iterator[None]:
    set_index_map_limit(2)
    try:
        yield
    finally:
        set_index_map_limit(None)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# The descriptors two held maps keep open: Python's mmap keeps one each, the C extension's none.
HELD_FDS = 2 if MAPS_HOLD_DESCRIPTORS else 0


def test_indexes_past_the_bound_are_parked_and_come_back_whole(tmp_path: Path, bound: None) -> None:
    indexes = [OffsetIndex(tmp_path / f"{n:020d}.index", n * 100, 4096) for n in range(5)]
    before = open_fds()
    for n, index in enumerate(indexes):
        index.append(n * 100 + 1, 10)
        index.append(n * 100 + 5, 50)
    # Five maps made, two held: three parked, their descriptors (if any) closed.
    assert index_maps_held() == 2
    assert open_fds() - before == HELD_FDS
    assert [index.is_open for index in indexes] == [False, False, False, True, True]
    for n, index in enumerate(indexes):
        # A parked index still counts its entries (its file is preallocated to 4096 bytes,
        # so the length would say 512) and appends after them.
        assert index.entries == 2
        assert index.lookup(n * 100 + 4) == OffsetPosition(n * 100 + 1, 10)
        index.append(n * 100 + 9, 90)
        assert index.entries == 3
    assert open_fds() - before == HELD_FDS
    for n, index in enumerate(indexes):
        index.close()
        raw = (tmp_path / f"{n:020d}.index").read_bytes()
        assert raw == struct.pack(">iiiiii", 1, 10, 5, 50, 9, 90)  # trimmed to its entries
    assert index_maps_held() == 0


def test_a_parked_time_index_keeps_its_last_entry_and_flushes(tmp_path: Path, bound: None) -> None:
    time_index = TimeIndex(tmp_path / "0.timeindex", 0, 1200)
    time_index.maybe_append(1000, 3)
    others = [OffsetIndex(tmp_path / f"{n}.index", 0, 80) for n in range(2)]
    for other in others:
        other.append(1, 1)
    assert not time_index.is_open
    time_index.flush()  # fsyncs the file: the pages written through the old map are its own
    assert time_index.peek_last_entry() == TimestampOffset(1000, 3)
    assert time_index.last_entry() == TimestampOffset(1000, 3)
    time_index.maybe_append(2000, 7)
    time_index.close()
    assert (tmp_path / "0.timeindex").read_bytes() == struct.pack(">qiqi", 1000, 3, 2000, 7)
    for other in others:
        other.close()


def test_without_a_bound_nothing_is_parked(tmp_path: Path) -> None:
    indexes = [OffsetIndex(tmp_path / f"{n}.index", 0, 80) for n in range(4)]
    for index in indexes:
        index.append(1, 1)
    assert all(index.is_open for index in indexes)
    assert index_maps_held() == 0
    for index in indexes:
        index.close()


def test_a_new_index_file_has_its_first_block_written_and_reads_as_zeros(
    tmp_path: Path,
) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 1 << 20)
    assert index.entries == 0
    # The first entry's bytes were written through the file (allocating its first block,
    # so the first write through the map does not pay for the allocation); the file is
    # otherwise the sparse preallocated zeros it always was.
    assert path.stat().st_size == 1 << 20
    assert path.stat().st_blocks > 0
    with open(path, "rb") as handle:
        assert handle.read() == bytes(1 << 20)
    index.append(5, 0)
    index.close()
    assert path.read_bytes() == struct.pack(">ii", 5, 0)
