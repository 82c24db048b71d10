"""The consumer decoder's runs (records shaped as the one before them, checked a byte
position at a time for all of them) read exactly what field-by-field decoding reads.

Batches here are what producers send: many records of one value length, the same key or
none, timestamps a few milliseconds apart, with optional odd ones out (a tombstone, a
header, another key, a gap in the offsets as compaction leaves). Each batch is decoded
whole, from a fetch offset inside it, and with one byte changed anywhere in its records:
the decoder must then raise CorruptRecordError or return what
``josefk.records.iter_records`` returns (and nothing when that raises).
"""

from __future__ import annotations

import gc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.client.decode import decode_records
from josefk.records import (
    BatchBuilder,
    CorruptRecordError,
    TimestampType,
    iter_records,
    split_batches,
)

_BASE_TIMESTAMP = 1_763_800_000_000
_NUMBERED = b"#"  # as a spec's key: each record's key is its number, in 4 digits

Spec = tuple[
    int, int, bytes | None, list[tuple[int, int]], list[int], int, bool
]  # (count, value size, key, odd ones (index, kind), gaps, ms per tick, log append)


@st.composite
def batch_specs(draw: Any) -> Spec:
    count = draw(st.integers(min_value=1, max_value=200))
    size = draw(st.sampled_from([0, 1, 5, 50, 63, 64, 100, 300]))
    key = draw(st.sampled_from([None, b"k", b"same-key", _NUMBERED]))
    odd = draw(st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, 3)), max_size=4))
    gaps = draw(st.lists(st.integers(0, count - 1), max_size=3))
    tick = draw(st.sampled_from([1, 7, 40, 1000]))
    log_append = draw(st.booleans())
    return count, size, key, odd, gaps, tick, log_append


def _build(spec: Spec, base_offset: int = 100) -> bytes:
    count, size, key, odd, gaps, tick, log_append = spec
    builder = BatchBuilder(
        base_offset=base_offset,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        log_append_time=_BASE_TIMESTAMP + 5 if log_append else None,
    )
    kinds = dict(odd)
    offset = base_offset
    for i in range(count):
        if i in gaps:
            offset += 2  # compaction left a hole
        record_key: bytes | None = b"%04d" % i if key == _NUMBERED else key
        value: bytes | None = bytes([i % 256]) * size
        headers: tuple[tuple[str, bytes | None], ...] = ()
        kind = kinds.get(i)
        if kind == 1:
            value = None
        elif kind == 2:
            headers = (("h", b"x"),)
        elif kind == 3:
            record_key = b"other-%d" % i
        builder.append(record_key, value, headers, _BASE_TIMESTAMP + i // tick, offset=offset)
        offset += 1
    return bytes(builder.build())


def _expected(data: bytes, fetch_offset: int) -> list[tuple[object, ...]]:
    return [
        (r.offset, r.timestamp, batch.timestamp_type, r.key, r.value, r.headers)
        for batch in split_batches(data)
        for r in iter_records(batch)
        if r.offset >= fetch_offset
    ]


def _got(data: bytes, fetch_offset: int) -> list[tuple[object, ...]]:
    records, _ = decode_records("t", 1, memoryview(data), fetch_offset)
    assert all(r.topic == "t" and r.partition == 1 and r.leader_epoch == -1 for r in records)
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) for r in records]


@settings(max_examples=150)
@given(batch_specs(), st.integers(min_value=0, max_value=400))
def test_runs_decode_as_field_by_field(spec: Spec, fetch_delta: int) -> None:
    data = _build(spec) + _build(spec, base_offset=2000)
    assert _got(data, 0) == _expected(data, 0)
    assert _got(data, 100 + fetch_delta) == _expected(data, 100 + fetch_delta)


@settings(max_examples=300)
@given(batch_specs(), st.data())
def test_a_changed_byte_decodes_as_field_by_field_or_raises(
    spec: Spec, draw: st.DataObject
) -> None:
    data = bytearray(_build(spec))
    position = draw.draw(st.integers(min_value=61, max_value=len(data) - 1))
    data[position] = draw.draw(st.integers(0, 255))
    try:
        expected = _expected(bytes(data), 0)
    except CorruptRecordError:
        expected = None
    try:
        got = _got(bytes(data), 0)
    except CorruptRecordError:
        return  # stricter than iter_records is fine (a negative offset delta, say)
    assert got == expected


def test_a_long_run_across_the_two_byte_offset_deltas() -> None:
    builder = BatchBuilder(base_offset=7)
    for i in range(9000):
        builder.append(None, b"%05d" % i, (), _BASE_TIMESTAMP)
    data = bytes(builder.build())
    records, next_offset = decode_records("t", 0, data, 0)
    assert [r.offset for r in records] == list(range(7, 9007))
    assert [r.value for r in records] == [b"%05d" % i for i in range(9000)]
    assert next_offset == 9007


@pytest.mark.parametrize("key", [None, _NUMBERED])
@pytest.mark.parametrize("record_index", [1, 70, 150])
def test_every_byte_of_a_record_inside_a_run_is_checked(
    record_index: int, key: bytes | None
) -> None:
    # 200 records of 20 bytes (two-byte offset deltas from 64 on): change each byte of one
    # record in the middle of the run to a few other values.
    data = _build((200, 20, key, [], [], 1000, False), base_offset=0)
    # The record's bytes: its value (20 times its index), the at most 13 bytes before it
    # (from the previous record's header count on) and its own header count after it.
    start = data.index(bytes([record_index]) * 20, 61) - 13
    for position in range(start, start + 35):
        for replacement in (0x00, 0x01, 0x02, 0x80, 0xFF, data[position] ^ 0x02):
            changed = bytearray(data)
            changed[position] = replacement
            try:
                expected: list[tuple[object, ...]] | None = _expected(bytes(changed), 0)
            except CorruptRecordError:
                expected = None
            try:
                got = _got(bytes(changed), 0)
            except CorruptRecordError:
                continue
            assert got == expected, (position, replacement)


def test_the_garbage_collector_is_paused_only_during_the_call() -> None:
    data = _build((50, 10, None, [], [], 1000, False))
    assert gc.isenabled()
    decode_records("t", 0, data, 0)
    assert gc.isenabled()
    with pytest.raises(CorruptRecordError):
        decode_records("t", 0, data[:-1] + b"\x07", 0)
    assert gc.isenabled()
    gc.disable()
    try:
        decode_records("t", 0, data, 0)
        assert not gc.isenabled()  # not this call's pause to lift
    finally:
        gc.enable()
