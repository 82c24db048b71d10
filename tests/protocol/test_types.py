"""Primitive types: varints, strings, bytes, records, arrays, tagged fields."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.protocol import types as t
from josefk.protocol.errors import (
    BufferUnderflow,
    InvalidLength,
    InvalidString,
    InvalidVarint,
    ProtocolDecodeError,
    UnexpectedNull,
)


@given(st.integers(0, (1 << 32) - 1))
def test_uvarint_round_trip(value: int) -> None:
    out = bytearray()
    t.write_uvarint(out, value)
    assert len(out) == t.uvarint_size(value)
    assert t.read_uvarint(memoryview(bytes(out)), 0) == (value, len(out))


@given(st.integers(-(1 << 31), (1 << 31) - 1))
def test_varint_zigzag_round_trip(value: int) -> None:
    out = bytearray()
    t.write_varint(out, value)
    assert t.read_varint(memoryview(bytes(out)), 0) == (value, len(out))


@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varlong_zigzag_round_trip(value: int) -> None:
    out = bytearray()
    t.write_varlong(out, value)
    assert t.read_varlong(memoryview(bytes(out)), 0) == (value, len(out))


def test_known_encodings() -> None:
    # Values from the protocol guide's description of zig-zag: 0->0, -1->1, 1->2, -2->3.
    for value, raw in ((0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03")):
        out = bytearray()
        t.write_varint(out, value)
        assert bytes(out) == raw
    assert t.uvarint_bytes(300) == b"\xac\x02"


def test_varint_errors() -> None:
    with pytest.raises(BufferUnderflow):
        t.read_uvarint(memoryview(b"\x80\x80"), 0)
    with pytest.raises(InvalidVarint):
        t.read_uvarint(memoryview(b"\xff\xff\xff\xff\xff\xff"), 0)
    with pytest.raises(InvalidVarint):
        t.read_uvarint(memoryview(b"\xff\xff\xff\xff\x7f"), 0)
    with pytest.raises(InvalidVarint):
        t.read_uvarlong(memoryview(b"\xff" * 11), 0)


@given(st.one_of(st.none(), st.text(max_size=40)), st.booleans())
def test_string_round_trip(value: str | None, compact: bool) -> None:
    out = bytearray()
    t.write_string(out, value, compact=compact)
    assert t.read_string(memoryview(bytes(out)), 0, compact=compact, nullable=True) == (
        value,
        len(out),
    )


@given(st.one_of(st.none(), st.binary(max_size=40)), st.booleans())
def test_bytes_and_records_round_trip(value: bytes | None, compact: bool) -> None:
    out = bytearray()
    t.write_bytes(out, value, compact=compact)
    data = memoryview(bytes(out))
    assert t.read_bytes(data, 0, compact=compact, nullable=True) == (value, len(out))
    records, end = t.read_records(data, 0, compact=compact)
    assert end == len(out)
    if value is None:
        assert records is None
    else:
        assert isinstance(records, memoryview)
        assert records.obj is data.obj  # a slice of the input, not a copy
        assert records == value


def test_string_errors() -> None:
    with pytest.raises(UnexpectedNull):
        t.read_string(memoryview(b"\xff\xff"), 0)
    with pytest.raises(InvalidLength):
        t.read_string(memoryview(b"\xff\xfe"), 0, nullable=True)
    with pytest.raises(BufferUnderflow):
        t.read_string(memoryview(b"\x00\x05abc"), 0)
    with pytest.raises(InvalidString):
        t.read_string(memoryview(b"\x00\x02\xff\xfe"), 0)
    with pytest.raises(BufferUnderflow):
        t.read_bytes(memoryview(b"\x7f\xff\xff\xff"), 0)


def test_array_length_rejected_before_allocating() -> None:
    # Claims 2**31-1 int32 elements with 4 bytes left.
    with pytest.raises(InvalidLength):
        t.read_array_length(memoryview(b"\x7f\xff\xff\xff" + b"\x00" * 4), 0, 4)
    with pytest.raises(InvalidLength):
        t.read_array_length(memoryview(b"\xff\xff\xff\xfe"), 0, 4)
    assert t.read_array_length(memoryview(b"\xff\xff\xff\xff"), 0, 4) == (-1, 4)
    assert t.read_array_length(memoryview(b"\x03\x00\x00"), 0, 1, compact=True) == (2, 1)


def test_tagged_fields_round_trip_and_bounds() -> None:
    out = bytearray()
    t.write_tagged_fields(out, {5: b"xyz", 1: b""})
    fields, end = t.read_tagged_fields(memoryview(bytes(out)), 0)
    assert end == len(out)
    assert {tag: bytes(v) for tag, v in fields.items()} == {1: b"", 5: b"xyz"}
    with pytest.raises(ProtocolDecodeError):
        t.read_tagged_fields(memoryview(b"\x01\x00\x09ab"), 0)
    with pytest.raises(InvalidLength):
        t.read_tagged_fields(memoryview(b"\x7f"), 0)


def test_fixed_size_readers_underflow() -> None:
    for reader in (t.read_int8, t.read_int16, t.read_int32, t.read_int64, t.read_uuid):
        with pytest.raises(BufferUnderflow):
            reader(memoryview(b""), 0)
