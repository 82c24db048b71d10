"""BatchBuilder.append's fast path (next offset, no headers) writes the same bytes as its
general path, and as kafka-python's builder, around every boundary of its varint table.

The general path runs when ``append`` gets an explicit offset, so building the same records
once with and once without offsets compares the two paths byte for byte, header and CRC
included. Timestamps stay close to the first one (deltas of either sign across the one-
and two-byte varint limits), lengths straddle 64 and 8192 bytes, where varints grow.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.records import HEADER_SIZE, BatchBuilder, RecordBatch, iter_records

_BASE_TIMESTAMP = 1_763_800_000_000
_sizes = st.one_of(
    st.integers(min_value=0, max_value=130),
    st.integers(min_value=8180, max_value=8200),
)
_payloads = st.one_of(
    st.none(), _sizes.map(lambda n: bytes(range(256)) * (n // 256) + b"v" * (n % 256))
)
_deltas = st.one_of(
    st.integers(min_value=-70, max_value=70),
    st.integers(min_value=-8200, max_value=8200),
    st.integers(min_value=-(1 << 40), max_value=1 << 40),
)
_headers = st.one_of(
    st.just(()),
    st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2).map(
        tuple
    ),
)
_records = st.lists(st.tuples(_payloads, _payloads, _headers, _deltas), min_size=1, max_size=12)


def _build(
    records: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
    *,
    base_offset: int,
    explicit_offsets: bool,
) -> bytes:
    builder = BatchBuilder(
        base_offset=base_offset, producer_id=3, producer_epoch=1, base_sequence=0
    )
    for i, (key, value, headers, delta) in enumerate(records):
        offset = base_offset + i if explicit_offsets else None
        assert (
            builder.append(key, value, headers, _BASE_TIMESTAMP + delta, offset=offset)
            == base_offset + i
        )
    return bytes(builder.build())


@settings(max_examples=200)
@given(records=_records, base_offset=st.integers(min_value=0, max_value=1 << 40))
def test_fast_path_bytes_equal_the_general_path(
    records: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
    base_offset: int,
) -> None:
    fast = _build(records, base_offset=base_offset, explicit_offsets=False)
    general = _build(records, base_offset=base_offset, explicit_offsets=True)
    assert fast == general
    batch = RecordBatch(memoryview(fast))
    batch.ensure_valid_from_producer()
    assert [(r.key, r.value, r.timestamp) for r in iter_records(batch)] == [
        (k, v, _BASE_TIMESTAMP + d) for k, v, _, d in records
    ]


@settings(max_examples=100)
@given(records=_records)
def test_fast_path_records_equal_kafka_python_records(
    records: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
) -> None:
    records = [(k, v, (), d) for k, v, _, d in records]
    ours = _build(records, base_offset=0, explicit_offsets=False)
    theirs = DefaultRecordBatchBuilder(2, 0, False, 3, 1, 0, 1 << 30)
    for offset, (key, value, _, delta) in enumerate(records):
        theirs.append(offset, _BASE_TIMESTAMP + delta, key, value, [])
    assert ours[HEADER_SIZE:] == bytes(theirs.build())[HEADER_SIZE:]


def test_many_records_past_the_table_use_the_general_path() -> None:
    # 9000 offset deltas: zig-zag values past 2**14 after offset delta 8191.
    builder = BatchBuilder()
    for i in range(9000):
        builder.append(None, b"x", (), _BASE_TIMESTAMP + i % 3)
    batch = RecordBatch(memoryview(builder.build()))
    batch.ensure_valid_from_producer()
    offsets = [r.offset for r in iter_records(batch)]
    assert offsets == list(range(9000))
    assert batch.max_timestamp == _BASE_TIMESTAMP + 2


def test_a_first_timestamp_outside_int64_is_refused_by_the_fast_path() -> None:
    builder = BatchBuilder()
    try:
        builder.append(None, b"x", (), 1 << 63)
    except ValueError:
        pass
    else:
        raise AssertionError("a timestamp of 2**63 was accepted")
    assert builder.record_count == 0
