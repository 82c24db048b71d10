"""Corrupted batches: validation and iteration raise only the records errors, whatever the bytes.

Mutations with the CRC left alone must be caught by ``ensure_valid``; mutations sealed with a
fresh CRC (and a fixed batch_length) get past it and exercise the record parser and the
decompressors, which must still raise nothing but CorruptRecordError.
"""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from records_strategies import batch_specs, build

from josefk.records import (
    HEADER_SIZE,
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatch,
    compress,
    iter_records,
    split_batches,
)
from josefk.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET

_MAX = 1 << 20


def _reseal(raw: bytearray) -> bytearray:
    """Fix batch_length and the CRC so the batch passes ensure_valid's size and CRC checks."""
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    batch = RecordBatch(memoryview(raw))
    struct.pack_into(">I", raw, CRC_OFFSET, batch.compute_crc())
    return raw


def _exercise(raw: bytes | bytearray) -> None:
    """Validate, split and iterate: only the records errors may come out."""
    try:
        batches = list(split_batches(raw))
    except CorruptRecordError:
        batches = []
    for batch in [*batches, RecordBatch(memoryview(raw))]:
        try:
            batch.ensure_valid_from_producer()
        except (CorruptRecordError, InvalidRecordError):
            pass
        try:
            for record in iter_records(batch, max_decompressed_size=_MAX):
                assert record.key is None or isinstance(record.key, bytes)
        except CorruptRecordError:
            pass
        assert repr(batch).startswith("RecordBatch(")


def _flip(raw: bytearray, data: st.DataObject, start: int) -> None:
    for _ in range(data.draw(st.integers(1, 6), label="flips")):
        index = data.draw(st.integers(start, len(raw) - 1), label="index")
        raw[index] ^= data.draw(st.integers(1, 255), label="xor")


@given(batch_specs, st.data())
def test_unsealed_flips_are_caught_by_ensure_valid(spec: object, data: st.DataObject) -> None:
    raw = build(spec)  # type: ignore[arg-type]
    original = bytes(raw)
    _flip(raw, data, ATTRIBUTES_OFFSET)  # everything the CRC covers
    if raw == original:  # two flips of the same bit cancel out
        return
    batch = RecordBatch(memoryview(raw))
    try:
        batch.ensure_valid()
    except CorruptRecordError:
        pass
    else:
        raise AssertionError("a changed byte under the CRC went unnoticed")
    _exercise(raw)


@given(batch_specs, st.data())
def test_sealed_flips_in_the_records(spec: object, data: st.DataObject) -> None:
    raw = build(spec)  # type: ignore[arg-type]
    if len(raw) > HEADER_SIZE:
        _flip(raw, data, HEADER_SIZE)
    _exercise(_reseal(raw))


@given(batch_specs, st.data())
def test_sealed_flips_in_the_header(spec: object, data: st.DataObject) -> None:
    raw = build(spec)  # type: ignore[arg-type]
    _flip(raw, data, 0)
    _exercise(raw)
    _exercise(_reseal(raw))


@settings(max_examples=60)
@given(
    batch_specs.filter(lambda s: s.compression == Compression.NONE),
    st.sampled_from(list(Compression)),
    st.data(),
)
def test_sealed_flips_under_compression(
    spec: object, codec: Compression, data: st.DataObject
) -> None:
    """Corrupt the record bytes first, then compress them: the parser sees the damage."""
    raw = build(spec)  # type: ignore[arg-type]
    records = bytearray(raw[HEADER_SIZE:])
    if records:
        _flip(records, data, 0)
    cut = data.draw(st.integers(0, len(records)), label="cut")
    sealed = bytearray(raw[:HEADER_SIZE]) + compress(codec, records[:cut])
    attributes = struct.unpack_from(">h", sealed, ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", sealed, ATTRIBUTES_OFFSET, (attributes & ~7) | codec)
    _exercise(_reseal(sealed))


@given(batch_specs, st.data())
def test_truncated_and_extended_records(spec: object, data: st.DataObject) -> None:
    raw = build(spec)  # type: ignore[arg-type]
    cut = data.draw(st.integers(0, len(raw)), label="cut")
    tail = data.draw(st.binary(max_size=20), label="tail")
    _exercise(bytes(raw[:cut]))
    if cut >= HEADER_SIZE:
        _exercise(_reseal(bytearray(raw[:cut]) + tail))


@given(
    batch_specs,
    st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1),
    st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1),
)
def test_lying_counts_and_deltas(spec: object, record_count: int, last_offset_delta: int) -> None:
    raw = build(spec)  # type: ignore[arg-type]
    struct.pack_into(">i", raw, 57, record_count)
    struct.pack_into(">i", raw, 23, last_offset_delta)
    _exercise(_reseal(raw))


@given(st.binary(max_size=200))
def test_random_bytes(garbage: bytes) -> None:
    _exercise(garbage)
    if len(garbage) >= HEADER_SIZE:
        sealed = bytearray(garbage)
        sealed[16] = 2
        _exercise(_reseal(sealed))


def test_unknown_codec_is_corrupt() -> None:
    raw = build(next(iter([_one_record_spec()])))
    struct.pack_into(">h", raw, ATTRIBUTES_OFFSET, 6)
    batch = RecordBatch(memoryview(_reseal(raw)))
    for check in (batch.ensure_valid, lambda: list(iter_records(batch))):
        try:
            check()
        except CorruptRecordError:
            continue
        raise AssertionError("codec 6 accepted")


def _one_record_spec() -> object:
    from records_strategies import BatchSpec, InputRecord

    from josefk.records import TimestampType

    return BatchSpec(
        base_offset=0,
        partition_leader_epoch=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        is_transactional=False,
        timestamp_type=TimestampType.CREATE_TIME,
        compression=Compression.NONE,
        records=[InputRecord(b"k", b"v", (), 1)],
    )
