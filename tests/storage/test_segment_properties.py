"""Property tests of LogSegment: random operation sequences keep the invariants, and recovery
after truncating or corrupting bytes keeps exactly the valid prefix with identical indexes."""

from __future__ import annotations

import bisect
import itertools
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from segment_helpers import append_batch, make_batch, read_with_kafka_python

from josefk.records import RecordBatch
from josefk.storage.index import OffsetPosition, TimestampOffset
from josefk.storage.segment import LogSegment
from josefk.util.clock import ManualClock

BASE = 1_000
INTERVAL = 200
MAX_INDEX = 8 * 12 * 40  # room for 480 offset entries, 320 time entries


@dataclass
class ModelBatch:
    base_offset: int
    last_offset: int
    position: int
    data: bytes
    max_timestamp: int
    count: int


class Model:
    def __init__(self) -> None:
        self.batches: list[ModelBatch] = []

    @property
    def size(self) -> int:
        return sum(len(b.data) for b in self.batches)

    @property
    def next_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else BASE

    def first_at_or_after(self, offset: int) -> ModelBatch | None:
        return next((b for b in self.batches if b.last_offset >= offset), None)


def open_segment(directory: Path, *, exists: bool = False) -> LogSegment:
    return LogSegment.open(
        directory,
        BASE,
        index_interval_bytes=INTERVAL,
        max_index_size=MAX_INDEX,
        clock=ManualClock(),
        file_already_exists=exists,
    )


def check_invariants(segment: LogSegment, model: Model, targets: list[int]) -> None:
    assert segment.size() == model.size
    assert segment.path.read_bytes()[: model.size] == b"".join(b.data for b in model.batches)
    assert segment.read_next_offset() == model.next_offset
    by_position = {b.position: b for b in model.batches}

    offset_index = segment.offset_index
    entries = [offset_index.entry(n) for n in range(offset_index.entries)]
    for earlier, later in itertools.pairwise(entries):
        assert earlier.offset < later.offset and earlier.position < later.position
    for entry in entries:
        assert entry.position in by_position
        assert by_position[entry.position].last_offset == entry.offset

    time_index = segment.time_index
    times = [time_index.entry(n) for n in range(time_index.entries)]
    for earlier, later in itertools.pairwise(times):
        assert earlier.timestamp < later.timestamp and earlier.offset <= later.offset
    for entry in times:
        seen = [b.max_timestamp for b in model.batches if b.last_offset <= entry.offset]
        assert seen and max(seen) == entry.timestamp

    offsets = [e.offset for e in entries]
    stamps = [t.timestamp for t in times]
    for target in targets:
        i = bisect.bisect_right(offsets, target) - 1
        assert offset_index.lookup(target) == (entries[i] if i >= 0 else OffsetPosition(BASE, 0))
        j = bisect.bisect_right(stamps, target) - 1
        expected_time = times[j] if j >= 0 else TimestampOffset(-1, BASE)
        assert time_index.lookup(target) == expected_time

        found = model.first_at_or_after(target)
        info = segment.read(target, 300)
        if found is None:
            assert info is None
        else:
            assert info is not None and info.records is not None
            assert info.records.position == found.position
            assert info.size == min(300, model.size - found.position)
            assert info.first_entry_incomplete == (len(found.data) > 300)


appends = st.tuples(
    st.just("append"),
    st.integers(0, 3),  # offset gap before the batch (compaction leaves gaps)
    st.integers(1, 6),  # records
    st.integers(0, 120),  # value size
    st.lists(st.integers(0, 5_000), min_size=6, max_size=6),  # timestamps
)
operations = st.lists(
    st.one_of(
        appends,
        appends,
        appends,
        st.tuples(st.just("truncate"), st.integers(BASE - 2, BASE + 200)),
        st.tuples(st.just("reopen"), st.booleans()),
    ),
    max_size=40,
)


@settings(max_examples=60)
@given(ops=operations, targets=st.lists(st.integers(BASE - 3, BASE + 250), max_size=8))
def test_random_append_truncate_reopen_keeps_the_invariants(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[object, ...]], targets: list[int]
) -> None:
    directory = tmp_path_factory.mktemp("seg")
    segment = open_segment(directory)
    model = Model()
    for op in ops:
        if op[0] == "append":
            _, gap, count, value_size, timestamps = op
            assert isinstance(gap, int) and isinstance(count, int) and isinstance(value_size, int)
            assert isinstance(timestamps, list)
            data = bytes(
                make_batch(
                    model.next_offset + gap, count, timestamps=timestamps, value_size=value_size
                )
            )
            view = RecordBatch(memoryview(data))
            model.batches.append(
                ModelBatch(
                    view.base_offset,
                    view.last_offset,
                    model.size,
                    data,
                    view.max_timestamp,
                    view.record_count,
                )
            )
            append_batch(segment, data)
        elif op[0] == "truncate":
            offset = op[1]
            assert isinstance(offset, int)
            keep = [b for b in model.batches if b.last_offset < offset]
            removed = model.size - sum(len(b.data) for b in keep)
            assert segment.truncate_to(offset) == removed
            model.batches = keep
        else:
            clean = op[1]
            if clean:
                segment.close()
                segment = open_segment(directory, exists=True)
                segment.sanity_check()
                segment.resize_indexes(MAX_INDEX)  # it is the active segment again
            else:
                segment.flush()
                segment.close_handlers()  # a crash: no roll entry, indexes left preallocated
                segment = open_segment(directory, exists=True)
                assert segment.recover(1 << 20) == 0
                segment.resize_indexes(MAX_INDEX)
        check_invariants(segment, model, targets)
    segment.close()
    assert read_with_kafka_python(segment.path) == [
        (b.base_offset, b.last_offset, b.count) for b in model.batches
    ]


# -- recovery -------------------------------------------------------------------------------

batch_specs = st.lists(
    st.tuples(st.integers(1, 5), st.integers(0, 150), st.integers(0, 10_000)),
    min_size=1,
    max_size=25,
)


def build(directory: Path, specs: list[tuple[int, int, int]]) -> tuple[LogSegment, list[bytes]]:
    segment = open_segment(directory)
    batches, offset = [], BASE
    for count, value_size, timestamp in specs:
        data = bytes(make_batch(offset, count, value_size=value_size, timestamp=timestamp))
        append_batch(segment, data)
        batches.append(data)
        offset += count
    return segment, batches


def reference_indexes(directory: Path, specs: list[tuple[int, int, int]]) -> tuple[bytes, bytes]:
    """The index files of a segment that only ever held ``specs``, once inactive."""
    segment, _ = build(directory, specs)
    segment.on_becoming_inactive_segment()
    segment.close()
    return (
        segment.offset_index.path.read_bytes(),
        segment.time_index.path.read_bytes(),
    )


def recover_damaged(
    tmp: Path, specs: list[tuple[int, int, int]], damage: object
) -> tuple[LogSegment, int, list[bytes]]:
    directory = tmp / "damaged"
    directory.mkdir()
    segment, batches = build(directory, specs)
    segment.close_handlers()
    data = bytearray(segment.path.read_bytes())
    assert callable(damage)
    damage(data)
    segment.path.write_bytes(bytes(data))
    recovered = open_segment(directory, exists=True)
    truncated = recovered.recover(max_message_size=1 << 20)
    return recovered, truncated, batches


def assert_recovered_to(
    tmp: Path,
    recovered: LogSegment,
    truncated: int,
    damaged_size: int,
    specs: list[tuple[int, int, int]],
    batches: list[bytes],
    keep: int,
) -> None:
    prefix = b"".join(batches[:keep])
    assert truncated == damaged_size - len(prefix)
    assert recovered.size() == len(prefix)
    assert recovered.read_next_offset() == BASE + sum(c for c, _, _ in specs[:keep])
    recovered.close()
    assert recovered.path.read_bytes() == prefix
    reference = tmp / "reference"
    reference.mkdir()
    offset_bytes, time_bytes = reference_indexes(reference, specs[:keep])
    assert recovered.offset_index.path.read_bytes() == offset_bytes
    assert recovered.time_index.path.read_bytes() == time_bytes


@settings(max_examples=60)
@given(specs=batch_specs, cut=st.floats(0, 1))
def test_recovery_after_truncation_keeps_the_whole_batches(
    tmp_path_factory: pytest.TempPathFactory, specs: list[tuple[int, int, int]], cut: float
) -> None:
    tmp = tmp_path_factory.mktemp("rec")
    total = sum(len(make_batch(0, c, value_size=v)) for c, v, _ in specs)
    at = int(total * cut)

    def damage(data: bytearray) -> None:
        del data[at:]

    recovered, truncated, batches = recover_damaged(tmp, specs, damage)
    ends = [sum(len(b) for b in batches[: i + 1]) for i in range(len(batches))]
    keep = sum(1 for end in ends if end <= at)
    assert_recovered_to(tmp, recovered, truncated, at, specs, batches, keep)


@settings(max_examples=60)
@given(
    specs=batch_specs,
    which=st.integers(0, 24),
    where=st.floats(0, 1),
    flip=st.integers(1, 255),
)
def test_recovery_after_a_corrupt_byte_keeps_the_batches_before_it(
    tmp_path_factory: pytest.TempPathFactory,
    specs: list[tuple[int, int, int]],
    which: int,
    where: float,
    flip: int,
) -> None:
    tmp = tmp_path_factory.mktemp("rec")
    which = min(which, len(specs) - 1)
    size_holder: list[int] = []

    def damage(data: bytearray) -> None:
        starts, position = [], 0
        for batch in batch_sizes(data):
            starts.append(position)
            position += batch
        start, size = starts[which], batch_sizes(data)[which]
        # Bytes the format can check: the length, the magic and everything under the CRC.
        # (base_offset and partition_leader_epoch are outside the CRC, as in Kafka.)
        checked = [8, 9, 10, 11, *range(16, size)]
        data[start + checked[int(where * (len(checked) - 1))]] ^= flip
        size_holder.append(len(data))

    recovered, truncated, batches = recover_damaged(tmp, specs, damage)
    assert_recovered_to(tmp, recovered, truncated, size_holder[0], specs, batches, which)


def batch_sizes(data: bytearray) -> list[int]:
    sizes, position = [], 0
    while position < len(data):
        size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
        sizes.append(size)
        position += size
    return sizes


def test_recovery_cuts_preallocated_zeros(tmp_path: Path) -> None:
    specs = [(3, 50, 10), (2, 50, 20)]
    recovered, truncated, batches = recover_damaged(
        tmp_path, specs, lambda data: data.extend(b"\x00" * 4096)
    )
    total = sum(len(b) for b in batches)
    assert_recovered_to(tmp_path, recovered, truncated, total + 4096, specs, batches, 2)


def test_recovery_reports_each_valid_batch(tmp_path: Path) -> None:
    segment, _ = build(tmp_path, [(2, 10, 5), (3, 10, 6)])
    seen: list[int] = []
    assert segment.recover(1 << 20, on_batch=lambda b: seen.append(b.base_offset)) == 0
    assert seen == [BASE, BASE + 2]
    segment.close()
    shutil.rmtree(tmp_path)


@settings(max_examples=40)
@given(specs=batch_specs, more=batch_specs, garbage=st.binary(min_size=1, max_size=64))
def test_recovery_rebuilds_indexes_unmapped_over_a_crashs_leftovers_and_appends_go_on(
    tmp_path_factory: pytest.TempPathFactory,
    specs: list[tuple[int, int, int]],
    more: list[tuple[int, int, int]],
    garbage: bytes,
) -> None:
    """Recovery writes its indexes once, without mapping the files the crash left (here
    preallocated with garbage past their entries); they come back parked with their entries
    counted, and a segment given its room again (as the active one is) takes further appends
    exactly as a segment that never crashed."""
    tmp = tmp_path_factory.mktemp("rec")
    directory = tmp / "crashed"
    directory.mkdir()
    segment, _ = build(directory, specs)
    segment.close_handlers()
    for path in (segment.offset_index.path, segment.time_index.path):
        with open(path, "r+b") as handle:
            handle.seek(len(path.read_bytes()) - len(garbage))
            handle.write(garbage)
    recovered = open_segment(directory, exists=True)
    assert recovered.recover(max_message_size=1 << 20) == 0
    assert not recovered.offset_index.is_open and not recovered.time_index.is_open
    recovered.resize_indexes(MAX_INDEX)
    assert recovered.read_next_offset() == BASE + sum(c for c, _, _ in specs)
    assert not recovered.offset_index.is_open and not recovered.time_index.is_open
    reference_dir = tmp / "reference"
    reference_dir.mkdir()
    reference, _ = build(reference_dir, specs)
    offset = BASE + sum(c for c, _, _ in specs)
    for count, value_size, timestamp in more:
        data = bytes(make_batch(offset, count, value_size=value_size, timestamp=timestamp))
        for target in (recovered, reference):
            append_batch(target, data)
        offset += count
    # The reference's bytes-since-last-entry count restarts at recovery, as in Kafka, so
    # compare the lookups each offset gets, and the whole files after the roll entry.
    for probe in range(BASE, offset):
        found = recovered.translate_offset(probe)
        expected = reference.translate_offset(probe)
        assert (found is None) == (expected is None)
        if found is not None and expected is not None:
            assert found.offset == expected.offset and found.position == expected.position
    assert recovered.read_next_offset() == reference.read_next_offset() == offset
    recovered.close()
    reference.close()
    assert recovered.path.read_bytes() == reference.path.read_bytes()
