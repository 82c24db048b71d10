"""The consumer's record decoder reads every batch exactly as josefk.records does, and drops
aborted transactions under read_committed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.client.decode import decode_records
from josefk.records import (
    BatchBuilder,
    Compression,
    ControlRecordType,
    CorruptRecordError,
    TimestampType,
    build_control_batch,
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


def test_read_committed_drops_aborted_transactions() -> None:
    def txn(base: int, pid: int, values: list[bytes]) -> bytes:
        builder = BatchBuilder(
            base_offset=base,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
        for v in values:
            builder.append(None, v, (), 1)
        return bytes(builder.build())

    def plain(base: int, value: bytes) -> bytes:
        builder = BatchBuilder(base_offset=base)
        builder.append(None, value, (), 1)
        return bytes(builder.build())

    def marker(base: int, pid: int, kind: ControlRecordType) -> bytes:
        return bytes(
            build_control_batch(
                kind,
                producer_id=pid,
                producer_epoch=0,
                coordinator_epoch=0,
                timestamp=1,
                base_offset=base,
            )
        )

    data = (
        txn(0, 7, [b"aborted-1", b"aborted-2"])
        + plain(2, b"plain")
        + marker(3, 7, ControlRecordType.ABORT)
        + txn(4, 8, [b"committed-1", b"committed-2"])
        + marker(6, 8, ControlRecordType.COMMIT)
        + txn(7, 7, [b"later"])
    )
    everything, next_offset = decode_records("t", 0, data, 0)
    assert [r.value for r in everything] == [
        b"aborted-1",
        b"aborted-2",
        b"plain",
        b"committed-1",
        b"committed-2",
        b"later",
    ]
    committed, next_committed = decode_records("t", 0, data, 0, aborted_transactions=[(7, 0)])
    assert [r.value for r in committed] == [b"plain", b"committed-1", b"committed-2", b"later"]
    assert next_offset == next_committed == 8


@given(records, st.data())
def test_mutated_records_raise_only_corrupt_record_error(
    recs: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    data: st.DataObject,
) -> None:
    batch = bytearray(_build([recs], Compression.NONE, False))
    position = data.draw(st.integers(min_value=61, max_value=len(batch) - 1))
    batch[position] = data.draw(st.integers(0, 255))
    try:
        decode_records("t", 0, bytes(batch), 0)
    except CorruptRecordError:
        pass


def test_check_crcs_catches_a_flipped_value_byte() -> None:
    data = bytearray(_build([[(b"key", b"value", [], 1)]], Compression.NONE, False))
    data[-3] ^= 0x01  # inside the value: the record still parses, the CRC does not match
    got, _ = decode_records("t", 0, bytes(data), 0)
    assert got[0].value != b"value"
    with pytest.raises(CorruptRecordError):
        decode_records("t", 0, bytes(data), 0, check_crcs=True)
