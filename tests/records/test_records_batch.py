"""Building batches and reading them back: round trips, rewrites, control batches, splitting."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from records_strategies import BatchSpec, InputRecord, batch_specs, build, record_lists

from josefk.records import (
    HEADER_SIZE,
    BatchBuilder,
    Compression,
    ControlRecordType,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordBatch,
    TimestampType,
    build_control_batch,
    decode_control_type,
    decode_end_txn_marker,
    iter_records,
    peek_batch_size,
    split_batches,
)


def _expected(spec: BatchSpec, log_append_time: int | None = None) -> list[tuple[object, ...]]:
    if spec.timestamp_type == TimestampType.LOG_APPEND_TIME:
        stamp = (
            log_append_time
            if log_append_time is not None
            else max(r.timestamp for r in spec.records)
        )
    return [
        (
            spec.base_offset + index,
            stamp if spec.timestamp_type == TimestampType.LOG_APPEND_TIME else r.timestamp,
            r.key,
            r.value,
            r.headers,
        )
        for index, r in enumerate(spec.records)
    ]


def _observed(records: list[Record]) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


@given(batch_specs)
def test_round_trip(spec: BatchSpec) -> None:
    raw = build(spec)
    (batch,) = split_batches(raw)
    batch.ensure_valid()
    batch.ensure_valid_from_producer()
    header = batch.header()
    assert header.base_offset == spec.base_offset
    assert header.partition_leader_epoch == spec.partition_leader_epoch
    assert header.producer_id == spec.producer_id
    assert header.producer_epoch == spec.producer_epoch
    assert header.base_sequence == spec.base_sequence
    assert header.record_count == len(spec.records)
    assert header.last_offset_delta == len(spec.records) - 1
    assert header.base_timestamp == spec.records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in spec.records)
    assert batch.compression == spec.compression
    assert batch.timestamp_type == spec.timestamp_type
    assert batch.is_transactional == spec.is_transactional
    assert not batch.is_control
    assert _observed(list(iter_records(batch))) == _expected(spec)
    assert _observed(list(iter_records(batch))) == _expected(spec)


@given(batch_specs, st.integers(min_value=0, max_value=(1 << 62)))
def test_log_append_time_from_the_builder(spec: BatchSpec, log_append_time: int) -> None:
    (batch,) = split_batches(build(spec, log_append_time=log_append_time))
    batch.ensure_valid()
    if spec.timestamp_type == TimestampType.LOG_APPEND_TIME:
        assert batch.max_timestamp == log_append_time
    assert _observed(list(iter_records(batch))) == _expected(spec, log_append_time)


@given(batch_specs, st.integers(min_value=0, max_value=(1 << 62)), st.integers(0, (1 << 31) - 1))
def test_in_place_rewrites_keep_the_crc_valid(
    spec: BatchSpec, new_base_offset: int, epoch: int
) -> None:
    raw = build(spec)
    (batch,) = split_batches(raw)
    crc = batch.crc
    batch.set_base_offset(new_base_offset)
    batch.set_partition_leader_epoch(epoch)
    assert batch.crc == crc  # both fields lie before the CRC'd range
    batch.ensure_valid()
    assert batch.base_offset == new_base_offset
    assert batch.partition_leader_epoch == epoch
    assert [r.offset for r in iter_records(batch)] == [
        new_base_offset + i for i in range(len(spec.records))
    ]
    batch.set_log_append_time(1_700_000_000_123)
    batch.ensure_valid()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 1_700_000_000_123
    assert {r.timestamp for r in iter_records(batch)} == {1_700_000_000_123}
    assert [r.value for r in iter_records(batch)] == [r.value for r in spec.records]


def test_null_and_empty_keys_values_and_headers() -> None:
    builder = BatchBuilder(base_offset=10)
    builder.append(None, None, (), 5)
    builder.append(b"", b"", [("", b""), ("h", None), ("ü", b"\x00")], 6)
    (batch,) = split_batches(builder.build())
    first, second = iter_records(batch)
    assert (first.key, first.value, first.headers) == (None, None, ())
    assert (second.key, second.value) == (b"", b"")
    assert second.headers == (("", b""), ("h", None), ("ü", b"\x00"))
    assert (first.offset, second.offset) == (10, 11)


def test_explicit_offsets_leave_gaps() -> None:
    builder = BatchBuilder(base_offset=100)
    assert builder.append(b"a", b"1", (), 1, offset=100) == 100
    assert builder.append(b"b", b"2", (), 2, offset=105) == 105
    assert builder.append(b"c", b"3", (), 3) == 106
    with pytest.raises(ValueError):
        builder.append(b"d", b"4", (), 4, offset=106)
    (batch,) = split_batches(builder.build())
    batch.ensure_valid()
    assert batch.last_offset == 106
    assert batch.record_count == 3
    assert [r.offset for r in iter_records(batch)] == [100, 105, 106]
    with pytest.raises(InvalidRecordError):
        batch.ensure_valid_from_producer()


def test_timestamps_default_to_the_injected_clock() -> None:
    ticks = iter([1000, 999, 1500])
    builder = BatchBuilder(clock=lambda: next(ticks))
    for _ in range(3):
        builder.append(None, b"v")
    (batch,) = split_batches(builder.build())
    assert (batch.base_timestamp, batch.max_timestamp) == (1000, 1500)
    assert [r.timestamp for r in iter_records(batch)] == [1000, 999, 1500]
    assert [r.timestamp_delta for r in iter_records(batch)] == [0, -1, 500]


def test_builder_misuse() -> None:
    builder = BatchBuilder()
    with pytest.raises(ValueError):
        builder.build()  # no records
    builder.append(None, b"v", (), 1)
    builder.build()
    with pytest.raises(ValueError):
        builder.append(None, b"v", (), 1)
    with pytest.raises(ValueError):
        builder.build()
    with pytest.raises(ValueError):
        BatchBuilder().append(None, b"v", (), 1 << 63)


def test_uncompressed_size_tracks_appends() -> None:
    builder = BatchBuilder()
    assert builder.uncompressed_size == HEADER_SIZE
    builder.append(b"k", b"v" * 100, (), 0)
    size = builder.uncompressed_size
    assert len(builder) == builder.record_count == 1
    assert builder.next_offset == 1
    assert len(builder.build()) == size


@pytest.mark.parametrize("control_type", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_control_batches(control_type: ControlRecordType) -> None:
    raw = build_control_batch(
        control_type,
        producer_id=42,
        producer_epoch=3,
        coordinator_epoch=7,
        timestamp=1234,
        base_offset=50,
        partition_leader_epoch=2,
    )
    (batch,) = split_batches(raw)
    batch.ensure_valid_from_producer()
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, -1)
    assert (batch.base_offset, batch.partition_leader_epoch) == (50, 2)
    (record,) = iter_records(batch)
    assert record.key == b"\x00\x00" + int(control_type).to_bytes(2, "big")
    assert record.value == b"\x00\x00\x00\x00\x00\x07"
    assert decode_control_type(record.key) is control_type
    assert decode_end_txn_marker(record.value) == 7
    with pytest.raises(ValueError):
        build_control_batch(
            ControlRecordType.LEADER_CHANGE,
            producer_id=1,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp=0,
        )


def test_control_record_decoding_edges() -> None:
    assert decode_control_type(b"\x00\x00\x00\x63") is ControlRecordType.UNKNOWN
    assert decode_control_type(b"\x00\x00\x00\x02") is ControlRecordType.LEADER_CHANGE
    for key in (None, b"", b"\x00\x00\x00"):
        with pytest.raises(CorruptRecordError):
            decode_control_type(key)
    for value in (None, b"\x00\x00\x00"):
        with pytest.raises(CorruptRecordError):
            decode_end_txn_marker(value)


@settings(max_examples=50)
@given(st.lists(batch_specs, min_size=1, max_size=4), st.data())
def test_split_batches_stops_at_a_truncated_tail(
    specs: list[BatchSpec], data: st.DataObject
) -> None:
    built = [build(spec) for spec in specs]
    stream = b"".join(built)
    assert [bytes(b.buffer) for b in split_batches(stream)] == [bytes(b) for b in built]
    cut = data.draw(st.integers(min_value=0, max_value=len(stream)))
    whole = []
    position = 0
    for batch in built:
        if position + len(batch) <= cut:
            whole.append(bytes(batch))
        position += len(batch)
    found = list(split_batches(memoryview(stream)[:cut]))
    assert [bytes(b.buffer) for b in found] == whole
    for batch in found:
        batch.ensure_valid()


def test_peek_batch_size() -> None:
    assert peek_batch_size(b"") is None
    builder = BatchBuilder()
    builder.append(None, b"v", (), 0)
    raw = bytes(builder.build())
    assert peek_batch_size(raw) == len(raw)
    assert peek_batch_size(raw[:11]) is None
    bad = bytearray(raw)
    bad[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        peek_batch_size(bad)
    with pytest.raises(CorruptRecordError):
        list(split_batches(bad))


@given(record_lists)
def test_every_codec_yields_the_same_records(records: list[InputRecord]) -> None:
    results = []
    for codec in Compression:
        builder = BatchBuilder(compression=codec)
        for r in records:
            builder.append(r.key, r.value, r.headers, r.timestamp)
        raw = builder.build()
        batch = RecordBatch(memoryview(raw))
        batch.ensure_valid()
        results.append(list(iter_records(batch)))
    assert all(result == results[0] for result in results)


def test_decompressed_size_cap_applies_to_iteration() -> None:
    builder = BatchBuilder(compression=Compression.ZSTD)
    builder.append(None, bytes(2 << 20), (), 0)
    batch = RecordBatch(memoryview(builder.build()))
    batch.ensure_valid()
    with pytest.raises(CorruptRecordError):
        list(iter_records(batch, max_decompressed_size=1 << 20))
    assert len(next(iter(iter_records(batch))).value or b"") == 2 << 20


@pytest.mark.parametrize("codec", list(Compression))
def test_empty_batch_left_by_the_cleaner(codec: Compression) -> None:
    builder = BatchBuilder(base_offset=7, compression=codec, producer_id=3, producer_epoch=0)
    builder.append(None, b"v", (), 1)
    raw = bytearray(builder.build()[:HEADER_SIZE])
    # No records, but the offset range and the producer state stay.
    raw[57:61] = (0).to_bytes(4, "big")
    raw[8:12] = (HEADER_SIZE - 12).to_bytes(4, "big")
    batch = RecordBatch(memoryview(raw))
    raw[17:21] = batch.compute_crc().to_bytes(4, "big")
    batch.ensure_valid()
    assert list(iter_records(batch)) == []
    assert (batch.base_offset, batch.producer_id) == (7, 3)


@pytest.mark.parametrize("codec", list(Compression))
def test_lengths_across_varint_size_boundaries(codec: Compression) -> None:
    """Record lengths of one to four varint bytes: the builder's size arithmetic must hold."""
    sizes = [0, 1, 55, 56, 63, 64, 127, 128, 8000, 8191, 8192, 8193, 1 << 20, (1 << 20) + 3]
    builder = BatchBuilder(compression=codec)
    for size in sizes:
        builder.append(
            b"k" * (size % 300), b"\xab" * size, [("h" * (size % 70), b"x" * size)], size
        )
    (batch,) = split_batches(builder.build())
    batch.ensure_valid()
    got = [(len(r.key or b""), len(r.value or b""), r.timestamp) for r in iter_records(batch)]
    assert got == [(size % 300, size, size) for size in sizes]
