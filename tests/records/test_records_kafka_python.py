"""Cross-check with an independent implementation of the v2 format: kafka-python's.

kafka-python reads the batches josefk builds, and josefk reads the batches kafka-python
builds, with keys, values, headers and timestamps intact, for every codec kafka-python has
installed (gzip always; snappy, lz4 and zstd when python-snappy, lz4 and zstandard are).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from records_strategies import InputRecord, header_keys, payloads

from josefk.records import (
    BatchBuilder,
    Compression,
    ControlRecordType,
    RecordBatch,
    TimestampType,
    build_control_batch,
    split_batches,
)
from josefk.records.record import iter_records

_AVAILABLE = {
    Compression.NONE: True,
    Compression.GZIP: kafka_codec.has_gzip(),
    Compression.SNAPPY: kafka_codec.has_snappy(),
    Compression.LZ4: kafka_codec.has_lz4(),
    Compression.ZSTD: kafka_codec.has_zstd(),
}
CODECS = [
    pytest.param(
        codec,
        id=codec.name.lower(),
        marks=pytest.mark.skipif(
            not available, reason=f"kafka-python has no {codec.name} codec installed"
        ),
    )
    for codec, available in _AVAILABLE.items()
]

# kafka-python's builder does not write null header values, so headers carry bytes here.
_headers = st.lists(st.tuples(header_keys, st.binary(max_size=50)), max_size=3).map(tuple)
_records = st.lists(
    st.builds(
        InputRecord,
        payloads,
        payloads,
        _headers,
        st.integers(min_value=0, max_value=(1 << 50)),
    ),
    min_size=1,
    max_size=20,
)


def _as_tuples(records: list[InputRecord], base_offset: int) -> list[tuple[object, ...]]:
    return [
        (base_offset + i, r.timestamp, r.key, r.value, list(r.headers))
        for i, r in enumerate(records)
    ]


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40)
@given(records=_records, base_offset=st.integers(min_value=0, max_value=(1 << 40)))
def test_kafka_python_reads_josefk_batches(
    codec: Compression, records: list[InputRecord], base_offset: int
) -> None:
    builder = BatchBuilder(
        base_offset=base_offset,
        compression=codec,
        producer_id=77,
        producer_epoch=2,
        base_sequence=10,
        is_transactional=True,
    )
    for r in records:
        builder.append(r.key, r.value, r.headers, r.timestamp)
    raw = bytes(builder.build())
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc()
    assert theirs.base_offset == base_offset
    assert theirs.compression_type == codec
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (77, 2, 10)
    assert theirs.is_transactional
    assert theirs.max_timestamp == max(r.timestamp for r in records)
    got = [(m.offset, m.timestamp, m.key, m.value, list(m.headers)) for m in theirs]
    assert got == _as_tuples(records, base_offset)


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40)
@given(records=_records)
def test_josefk_reads_kafka_python_batches(codec: Compression, records: list[InputRecord]) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
        batch_size=1 << 24,
    )
    for offset, r in enumerate(records):
        builder.append(offset, r.timestamp, r.key, r.value, list(r.headers))
    raw = bytes(builder.build())
    (batch,) = split_batches(raw)
    batch.ensure_valid_from_producer()
    # kafka-python sends a batch uncompressed when compressing would not make it smaller.
    assert batch.compression in (codec, Compression.NONE)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (5, 1, 0)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in iter_records(batch)]
    assert got == _as_tuples(records, 0)


@pytest.mark.parametrize("codec", CODECS)
def test_memory_records_reads_a_log_of_josefk_batches(codec: Compression) -> None:
    stream = bytearray()
    offset = 0
    for batch_index in range(5):
        builder = BatchBuilder(base_offset=offset, compression=codec, partition_leader_epoch=3)
        for i in range(batch_index + 1):
            builder.append(f"k{offset + i}".encode(), b"v" * 100 * i, (("n", b"1"),), 1000 + i)
        raw = builder.build()
        offset += batch_index + 1
        RecordBatch(memoryview(raw)).set_log_append_time(9999)
        stream += raw
    records = MemoryRecords(bytes(stream))
    seen = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        seen.extend((m.offset, m.key, m.timestamp) for m in batch)
    assert seen == [(i, f"k{i}".encode(), 9999) for i in range(offset)]


def test_josefk_reads_kafka_python_stream_with_a_truncated_tail() -> None:
    stream = bytearray()
    for base in range(3):
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
        builder.append(0, 1, b"key", b"value%d" % base, [])
        raw = builder.build()
        RecordBatch(memoryview(raw)).set_base_offset(base)
        stream += raw
    batches = list(split_batches(stream[:-5]))
    assert [b.base_offset for b in batches] == [0, 1]
    assert [next(iter(iter_records(b))).value for b in batches] == [b"value0", b"value1"]


def test_kafka_python_reads_a_control_batch() -> None:
    raw = build_control_batch(
        ControlRecordType.COMMIT, producer_id=9, producer_epoch=1, coordinator_epoch=4, timestamp=7
    )
    theirs = DefaultRecordBatch(bytes(raw))
    assert theirs.validate_crc()
    assert theirs.is_control_batch and theirs.is_transactional
    (record,) = list(theirs)
    assert record.key == b"\x00\x00\x00\x01"
