"""Computing a batch's max timestamp from its records, and rebuilding a batch in another codec.

The broker does both on append: Kafka's validator recomputes each batch's max timestamp from
the records (clients such as librdkafka write 0 over records without timestamps), and a topic
whose ``compression.type`` names a codec gets every batch in that codec.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from records_strategies import BatchSpec, InputRecord, batch_specs, build, record_lists

from josefk.records import (
    NO_TIMESTAMP,
    BatchBuilder,
    Compression,
    CorruptRecordError,
    RecordBatch,
    TimestampType,
    batch_max_timestamp,
    max_timestamp_delta,
    recompress_batch,
)
from josefk.records.record import iter_records

_INT64 = struct.Struct(">q")


def expected_max(spec_timestamps: list[int]) -> int:
    return max(max(spec_timestamps), NO_TIMESTAMP)


@settings(max_examples=300, deadline=None)
@given(spec=batch_specs)
def test_max_timestamp_is_the_largest_record_timestamp(spec: BatchSpec) -> None:
    batch = RecordBatch(memoryview(build(spec)))
    if spec.timestamp_type == TimestampType.LOG_APPEND_TIME:
        assert batch_max_timestamp(batch) == batch.max_timestamp
    else:
        assert batch_max_timestamp(batch) == expected_max([r.timestamp for r in spec.records])


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=20_000),
    value_size=st.integers(min_value=0, max_value=200),
    step=st.sampled_from([1, 3, 50, 1000, 70_000]),
    negative=st.booleans(),
)
def test_runs_of_same_size_records(count: int, value_size: int, step: int, negative: bool) -> None:
    # Long runs of same-size records take the column-wise path; the varint widths of the
    # offset and timestamp deltas change inside the batch (at 64, 8192, ...).
    builder = BatchBuilder()
    base = 1_700_000_000_000
    timestamps = [base + (-(i // step) if negative and i else i // step) for i in range(count)]
    for timestamp in timestamps:
        builder.append(None, b"v" * value_size, timestamp=timestamp)
    data = builder.build()
    records = memoryview(data)[61:]
    assert max_timestamp_delta(records, count) == max(timestamps) - base


def test_records_without_timestamps_have_no_max() -> None:
    # What librdkafka sends for messages produced with timestamp -1: base -1, deltas 0, and
    # a header max of 0. The records say there is no timestamp at all.
    builder = BatchBuilder()
    for i in range(100):
        builder.append(b"k", b"v" * i, timestamp=NO_TIMESTAMP)
    data = builder.build()
    _INT64.pack_into(data, 35, 0)
    batch = RecordBatch(memoryview(data))
    assert batch.max_timestamp == 0
    assert batch_max_timestamp(batch) == NO_TIMESTAMP


@pytest.mark.parametrize("codec", list(Compression))
def test_compressed_batch_is_decompressed_for_its_max(codec: Compression) -> None:
    builder = BatchBuilder(compression=codec)
    for i in range(10):
        builder.append(None, b"x" * 20, timestamp=1000 + (i * 7) % 5)
    data = builder.build()
    _INT64.pack_into(data, 35, 0)
    assert batch_max_timestamp(RecordBatch(memoryview(data))) == 1004


def test_set_max_timestamp_rewrites_the_crc() -> None:
    builder = BatchBuilder()
    builder.append(None, b"x", timestamp=NO_TIMESTAMP)
    data = builder.build()
    batch = RecordBatch(memoryview(data))
    batch.set_max_timestamp(12345)
    assert batch.max_timestamp == 12345
    batch.ensure_valid()


def framed(values: list[bytes]) -> tuple[bytes, int]:
    builder = BatchBuilder()
    for value in values:
        builder.append(None, value, timestamp=5)
    return bytes(builder.build()[61:]), len(values)


@pytest.mark.parametrize(
    "values", [[b"a" * 10] * 100, [b"a" * (i % 7) for i in range(100)], [b"z" * 300]]
)
def test_framing_errors_are_corrupt_records(values: list[bytes]) -> None:
    data, count = framed(values)
    assert max_timestamp_delta(data, count) == 0
    for bad, bad_count in (
        (data[:-1], count),  # cut short
        (data + b"\x00", count),  # trailing bytes
        (data, count + 1),  # claims one more record
        (data, count - 1),  # claims one fewer: bytes left over
        (b"\x02" + data[1:], count),  # the first record claims 1 byte
    ):
        with pytest.raises(CorruptRecordError):
            max_timestamp_delta(bad, bad_count)
    assert max_timestamp_delta(b"", 0) is None
    with pytest.raises(CorruptRecordError):
        max_timestamp_delta(b"\x00", 0)


@settings(max_examples=150, deadline=None)
@given(spec=batch_specs, target=st.sampled_from(list(Compression)))
def test_recompress_keeps_header_and_records(spec: BatchSpec, target: Compression) -> None:
    original = RecordBatch(memoryview(build(spec)))
    rebuilt = RecordBatch(memoryview(recompress_batch(original, target)))
    rebuilt.ensure_valid()
    assert rebuilt.compression == target
    before, after = original.header(), rebuilt.header()
    for field in (
        "base_offset",
        "partition_leader_epoch",
        "last_offset_delta",
        "base_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "record_count",
    ):
        assert getattr(after, field) == getattr(before, field), field
    assert after.attributes & ~0x07 == before.attributes & ~0x07
    assert after.max_timestamp == batch_max_timestamp(original)
    assert list(iter_records(rebuilt)) == list(iter_records(original))


@given(records=record_lists)
@settings(max_examples=50, deadline=None)
def test_recompress_to_the_same_codec_is_a_valid_copy(records: list[InputRecord]) -> None:
    builder = BatchBuilder(compression=Compression.GZIP)
    for record in records:
        builder.append(record.key, record.value, record.headers, record.timestamp)
    original = RecordBatch(memoryview(builder.build()))
    rebuilt = RecordBatch(memoryview(recompress_batch(original, Compression.GZIP, level=1)))
    rebuilt.ensure_valid()
    assert list(iter_records(rebuilt)) == list(iter_records(original))


def test_recompress_rejects_corrupt_codec_data() -> None:
    builder = BatchBuilder(compression=Compression.ZSTD)
    builder.append(None, b"x" * 100, timestamp=1)
    data = builder.build()
    data[70:80] = b"\xff" * 10
    with pytest.raises(CorruptRecordError):
        recompress_batch(RecordBatch(memoryview(data)), Compression.GZIP)
