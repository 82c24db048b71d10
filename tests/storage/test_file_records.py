"""FileRecords: appends, slices without reads, chunked batch scans, searches, truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from segment_helpers import make_batch, read_with_kafka_python

from josefk.records import RecordBatch, split_batches
from josefk.storage.errors import CorruptRecordsError, KafkaStorageError, StorageError
from josefk.storage.file_records import FileRecords, TimestampAndOffset


def write_batches(records: FileRecords, sizes: list[tuple[int, int]], start: int = 0) -> list[int]:
    """Append batches of (count, value_size); returns each batch's position."""
    positions, offset = [], start
    for count, value_size in sizes:
        positions.append(records.size_in_bytes())
        batch = make_batch(offset, count, value_size=value_size, timestamp=offset * 10)
        assert records.append(memoryview(batch)) == len(batch)
        offset += count
    return positions


def test_append_grows_the_file_and_reopening_finds_the_size(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    records = FileRecords.open(path)
    assert records.size_in_bytes() == 0
    write_batches(records, [(3, 10), (2, 100)])
    size = records.size_in_bytes()
    assert path.stat().st_size == size
    records.close()
    reopened = FileRecords.open(path, file_already_exists=True)
    assert reopened.size_in_bytes() == size
    assert [b.batch.base_offset for b in reopened.batches_from(0)] == [0, 3]
    reopened.close()


def test_slice_reads_nothing_and_clips_to_the_end(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    write_batches(records, [(1, 10), (1, 10)])
    size = records.size_in_bytes()
    whole = records.read(0, size)
    piece = records.slice(10, 1_000_000)
    assert (piece.position, piece.size) == (10, size - 10)
    assert piece.fd == records.fd and piece.path == records.path
    assert piece.read() == whole[10:]
    assert records.slice(size + 5, 10).size == 0
    with pytest.raises(StorageError):
        records.slice(-1, 10)
    records.close()


def test_read_into_fills_a_buffer(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    write_batches(records, [(2, 30)])
    buffer = bytearray(records.size_in_bytes() + 100)
    n = records.read_into(buffer, 0)
    assert n == records.size_in_bytes()
    assert bytes(buffer[:n]) == records.read(0, n)
    records.close()


@given(
    sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 300)), min_size=1, max_size=12),
    chunk_size=st.integers(1, 2000),
    start_batch=st.integers(0, 11),
)
def test_batches_from_agrees_with_split_batches_whatever_the_chunk(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[tuple[int, int]],
    chunk_size: int,
    start_batch: int,
) -> None:
    records = FileRecords.open(tmp_path_factory.mktemp("fr") / "a.log")
    positions = write_batches(records, sizes)
    start_batch = min(start_batch, len(positions) - 1)
    whole = records.read(0, records.size_in_bytes())
    expected = [bytes(b.buffer) for b in split_batches(whole[positions[start_batch] :])]
    found = list(records.batches_from(positions[start_batch], chunk_size=chunk_size))
    assert [bytes(b.batch.buffer) for b in found] == expected
    assert [b.position for b in found] == positions[start_batch:]
    # With a reused buffer each view is valid until the next step, so copy as we go.
    reused = [
        (b.position, bytes(b.batch.buffer))
        for b in records.batches_from(
            positions[start_batch], chunk_size=chunk_size, reuse_buffer=True
        )
    ]
    assert reused == [(b.position, bytes(b.batch.buffer)) for b in found]
    records.close()


def test_batches_from_stops_at_an_incomplete_tail(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    write_batches(records, [(1, 10), (1, 10)])
    partial = make_batch(2, 1, value_size=10)
    records.append(memoryview(partial)[: len(partial) - 3])
    assert [b.batch.base_offset for b in records.batches_from(0)] == [0, 1]
    assert [b.batch.base_offset for b in records.batches_from(0, chunk_size=7)] == [0, 1]
    records.close()


def test_batches_from_stops_at_a_cut_length_prefix(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    write_batches(records, [(1, 10), (1, 10)])
    records.append(make_batch(2)[:5])  # shorter than the 12-byte length prefix
    assert [b.batch.base_offset for b in records.batches_from(0, chunk_size=7)] == [0, 1]
    records.close()


def test_batches_from_raises_on_an_impossible_length(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    positions = write_batches(records, [(1, 10)])
    records.append(b"\x00" * 40)  # batch_length 0: no v2 batch is that short
    with pytest.raises(CorruptRecordsError) as raised:
        list(records.batches_from(0))
    assert raised.value.position == records.size_in_bytes() - 40
    assert str(records.path) in str(raised.value)
    with pytest.raises(CorruptRecordsError):
        list(records.batches_from(positions[0], max_batch_size=20))
    records.close()


def test_search_for_offset_with_size(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log", file_already_exists=False)
    positions = write_batches(records, [(5, 10), (5, 10), (5, 10)])
    sizes = [b.batch.size_in_bytes for b in records.batches_from(0)]
    found = records.search_for_offset_with_size(7, 0)
    assert found is not None
    assert (found.offset, found.position, found.size) == (9, positions[1], sizes[1])
    # Starting from a later position skips earlier batches, as an index lookup does.
    assert records.search_for_offset_with_size(0, positions[2]) == (14, positions[2], sizes[2])
    assert records.search_for_offset_with_size(15, 0) is None
    records.close()


def test_search_for_timestamp_looks_inside_the_batch(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    records.append(make_batch(0, 3, timestamps=[100, 300, 200]))
    records.append(make_batch(3, 3, timestamps=[400, 500, 600]))
    assert records.search_for_timestamp(250, 0, 0) == TimestampAndOffset(300, 1)
    assert records.search_for_timestamp(450, 0, 0) == TimestampAndOffset(500, 4)
    assert records.search_for_timestamp(100, 0, 2) == TimestampAndOffset(200, 2)
    assert records.search_for_timestamp(700, 0, 0) is None
    assert records.largest_timestamp_after(0) == TimestampAndOffset(600, 5)
    records.close()


def test_truncate_to(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    positions = write_batches(records, [(1, 10), (1, 10), (1, 10)])
    end = records.size_in_bytes()
    assert records.truncate_to(positions[1]) == end - positions[1]
    assert records.size_in_bytes() == positions[1] == records.path.stat().st_size
    with pytest.raises(StorageError):
        records.truncate_to(end)
    assert records.truncate_to(positions[1]) == 0
    records.close()


def test_preallocated_file_starts_empty_and_is_trimmed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    records = FileRecords.open(path, init_file_size=1 << 20, preallocate=True)
    assert records.size_in_bytes() == 0
    assert path.stat().st_size == 1 << 20
    write_batches(records, [(2, 10)])
    records.flush()
    size = records.size_in_bytes()
    records.close()
    assert path.stat().st_size == size


def test_rename_keeps_the_descriptor_and_delete_removes(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    write_batches(records, [(1, 10)])
    target = tmp_path / "a.log.deleted"
    records.rename_to(target)
    assert records.path == target and target.exists() and not (tmp_path / "a.log").exists()
    assert len(list(records.batches_from(0))) == 1
    assert records.delete_if_exists() is True
    assert not target.exists()
    assert records.delete_if_exists() is False


def test_io_errors_become_storage_errors_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "a.log"
    with pytest.raises(KafkaStorageError) as raised:
        FileRecords.open(missing)
    assert raised.value.path == missing
    assert isinstance(raised.value.__cause__, OSError)


def test_append_after_close_is_a_storage_error(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    os.close(records.fd)  # simulate the descriptor going bad under us
    with pytest.raises(KafkaStorageError):
        records.append(make_batch(0))
    records.close_handlers()


def test_kafka_python_reads_the_file(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    write_batches(records, [(3, 10), (1, 0), (7, 200)], start=42)
    records.close()
    assert read_with_kafka_python(tmp_path / "a.log") == [(42, 44, 3), (45, 45, 1), (46, 52, 7)]
    views = [RecordBatch(memoryview(make_batch(0)))]
    assert views[0].is_valid()


@given(
    sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 300)), min_size=1, max_size=12),
    chunk_size=st.integers(1, 2000),
)
def test_batch_headers_agree_with_whole_batches(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[tuple[int, int]], chunk_size: int
) -> None:
    records = FileRecords.open(tmp_path_factory.mktemp("fr") / "a.log")
    write_batches(records, sizes)
    records.append(make_batch(1000, 2)[:70])  # an incomplete tail is not reported
    headers = list(records.batch_headers_from(0, chunk_size=chunk_size))
    batches = list(records.batches_from(0))
    assert [
        (h.position, h.size, h.base_offset, h.last_offset, h.max_timestamp) for h in headers
    ] == [
        (
            b.position,
            b.batch.size_in_bytes,
            b.batch.base_offset,
            b.batch.last_offset,
            b.batch.max_timestamp,
        )
        for b in batches
    ]
    records.close()


def test_offset_search_reads_headers_not_large_bodies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = FileRecords.open(tmp_path / "a.log")
    for base in range(0, 40, 10):
        records.append(make_batch(base, 10, value_size=100_000))  # ~1 MB batches
    read_bytes: list[int] = []
    original = records.read

    def counting_read(position: int, size: int) -> bytes:
        data = original(position, size)
        read_bytes.append(len(data))
        return data

    monkeypatch.setattr(records, "read", counting_read)
    found = records.search_for_offset_with_size(35, 0)
    assert found is not None and found.offset == 39
    assert sum(read_bytes) <= 4 * 8192
    records.close()
