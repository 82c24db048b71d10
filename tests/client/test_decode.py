"""The consumer's record decoder reads every batch exactly as josefk.records does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.client.decode import decode_records
from josefk.records import (
    BatchBuilder,
    Compression,
    CorruptRecordError,
    TimestampType,
    iter_records,
    split_batches,
)

values = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3)
records = st.lists(
    st.tuples(values, values, headers, st.integers(min_value=0, max_value=2**45)),
    min_size=1,
    max_size=30,
)


def _build(
    batches: list[list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]],
    codec: Compression,
    log_append: bool,
) -> bytes:
    out = bytearray()
    base = 0
    for recs in batches:
        builder = BatchBuilder(
            base_offset=base,
            compression=codec,
            timestamp_type=TimestampType.LOG_APPEND_TIME
            if log_append
            else TimestampType.CREATE_TIME,
            log_append_time=1_700_000_000_000 if log_append else None,
        )
        for key, value, hdrs, ts in recs:
            builder.append(key, value, hdrs, ts)
        out += builder.build()
        base += len(recs)
    return bytes(out)


@given(
    st.lists(records, min_size=1, max_size=4),
    st.sampled_from(list(Compression)),
    st.booleans(),
    st.integers(0, 40),
)
def test_decode_matches_iter_records(
    batches: list[list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]],
    codec: Compression,
    log_append: bool,
    fetch_offset: int,
) -> None:
    data = _build(batches, codec, log_append)
    expected = [
        (r.offset, r.timestamp, batch.timestamp_type, r.key, r.value, r.headers)
        for batch in split_batches(data)
        for r in iter_records(batch)
        if r.offset >= fetch_offset
    ]
    got, next_offset = decode_records("t", 3, memoryview(data), fetch_offset)
    assert [
        (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) for r in got
    ] == expected
    assert all(r.topic == "t" and r.partition == 3 for r in got)
    assert next_offset == max(sum(len(b) for b in batches), fetch_offset)


def test_truncated_tail_is_left_for_the_next_fetch() -> None:
    data = _build([[(b"k", b"v", [], 1)], [(b"k2", b"v2", [], 2)]], Compression.NONE, False)
    got, next_offset = decode_records("t", 0, data[:-3], 0)
    assert [r.offset for r in got] == [0] and next_offset == 1


def test_malformed_records_raise_corrupt_record_error() -> None:
    data = bytearray(_build([[(b"key", b"value", [("h", b"x")], 1)]], Compression.NONE, False))
    data[-4] = 0x7E  # the header key length (zig-zag 63) runs past the record's end
    with pytest.raises(CorruptRecordError):
        decode_records("t", 0, bytes(data), 0)
