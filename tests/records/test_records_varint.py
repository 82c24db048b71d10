"""Zig-zag and unsigned varints: known encodings, round trips, boundaries, bad input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.util import decode_varint as kafka_decode_varint
from kafka.record.util import encode_varint as kafka_encode_varint

from josefk.records.errors import CorruptRecordError
from josefk.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    UINT32_MAX,
    UINT64_MAX,
    decode_unsigned_varint,
    decode_unsigned_varlong,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_unsigned_varlong,
    encode_varint,
    encode_varlong,
    size_of_unsigned_varint,
    size_of_varint,
    size_of_varlong,
)

KNOWN_VARINTS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (150, "ac02"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]

KNOWN_UNSIGNED = [
    (0, "00"),
    (127, "7f"),
    (128, "8001"),
    (300, "ac02"),
    (16383, "ff7f"),
    (16384, "808001"),
    (UINT32_MAX, "ffffffff0f"),
]


def _boundaries(bits: int, signed: bool) -> list[int]:
    values = {0, 1, -1} if signed else {0, 1}
    for k in range(1, bits):
        for base in (1 << k, -(1 << k)) if signed else (1 << k,):
            values.update({base - 1, base, base + 1})
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return sorted(v for v in values | {low, high} if low <= v <= high)


@pytest.mark.parametrize(("value", "encoded"), KNOWN_VARINTS)
def test_known_zigzag_encodings(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert encode_varlong(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)
    assert decode_varlong(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


@pytest.mark.parametrize(("value", "encoded"), KNOWN_UNSIGNED)
def test_known_unsigned_encodings(value: int, encoded: str) -> None:
    assert encode_unsigned_varint(value).hex() == encoded
    assert decode_unsigned_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


def test_varlong_extremes() -> None:
    assert encode_varlong(INT64_MAX).hex() == "feffffffffffffffff01"
    assert encode_varlong(INT64_MIN).hex() == "ffffffffffffffffff01"
    assert decode_varlong(encode_varlong(INT64_MIN)) == (INT64_MIN, 10)
    assert decode_unsigned_varlong(encode_unsigned_varlong(UINT64_MAX)) == (UINT64_MAX, 10)


@pytest.mark.parametrize("value", _boundaries(32, signed=True))
def test_varint_boundaries(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value) <= 5
    assert decode_varint(b"\xaa" + encoded + b"\x00", 1) == (value, 1 + len(encoded))


@pytest.mark.parametrize("value", _boundaries(64, signed=True))
def test_varlong_boundaries(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == size_of_varlong(value) <= 10
    assert decode_varlong(encoded) == (value, len(encoded))
    # kafka-python's varint is the 64-bit zig-zag one: an independent check of the bytes.
    out = bytearray()
    kafka_encode_varint(value, out.append)
    assert bytes(out) == encoded
    assert kafka_decode_varint(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize("value", _boundaries(32, signed=False))
def test_unsigned_varint_boundaries(value: int) -> None:
    encoded = encode_unsigned_varint(value)
    assert len(encoded) == size_of_unsigned_varint(value) <= 5
    assert decode_unsigned_varint(encoded) == (value, len(encoded))
    assert decode_unsigned_varlong(encoded) == (value, len(encoded))


@given(st.integers(min_value=INT32_MIN, max_value=INT32_MAX), st.binary(max_size=3))
def test_varint_round_trip(value: int, prefix: bytes) -> None:
    encoded = encode_varint(value)
    assert decode_varint(memoryview(prefix + encoded + b"\x7f"), len(prefix)) == (
        value,
        len(prefix) + len(encoded),
    )


@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert decode_varlong(bytearray(encoded)) == (value, len(encoded))
    assert size_of_varlong(value) == len(encoded)


@given(st.integers(min_value=0, max_value=UINT64_MAX))
def test_unsigned_varlong_round_trip(value: int) -> None:
    encoded = encode_unsigned_varlong(value)
    assert decode_unsigned_varlong(encoded) == (value, len(encoded))


@pytest.mark.parametrize(
    ("encode", "value"),
    [
        (encode_varint, INT32_MAX + 1),
        (encode_varint, INT32_MIN - 1),
        (encode_varlong, INT64_MAX + 1),
        (encode_varlong, INT64_MIN - 1),
        (encode_unsigned_varint, -1),
        (encode_unsigned_varint, UINT32_MAX + 1),
        (encode_unsigned_varlong, UINT64_MAX + 1),
    ],
)
def test_out_of_range_values_are_programming_errors(encode: object, value: int) -> None:
    with pytest.raises(ValueError):
        encode(value)  # type: ignore[operator]


@pytest.mark.parametrize(
    "decode", [decode_varint, decode_varlong, decode_unsigned_varint, decode_unsigned_varlong]
)
def test_truncated_and_empty_buffers(decode: object) -> None:
    for data, position in [(b"", 0), (b"\x80", 0), (b"\xff\xff", 0), (b"\x01", 1), (b"\x01", 5)]:
        with pytest.raises(CorruptRecordError):
            decode(data, position)  # type: ignore[operator]


def test_over_long_varints() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        decode_varint(b"\x80\x80\x80\x80\x80\x01")
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        decode_unsigned_varint(b"\xff" * 5 + b"\x00")
    with pytest.raises(CorruptRecordError, match="longer than 10"):
        decode_varlong(b"\x80" * 10 + b"\x01")
    # Five bytes, but a value past 32 bits.
    with pytest.raises(CorruptRecordError, match="more than"):
        decode_varint(b"\xff\xff\xff\xff\x1f")
    with pytest.raises(CorruptRecordError, match="more than"):
        decode_varlong(b"\xff" * 9 + b"\x02")


@given(st.binary(max_size=16), st.integers(min_value=-2, max_value=18))
def test_garbage_raises_only_corrupt_record_error(data: bytes, position: int) -> None:
    for decode in (decode_varint, decode_varlong, decode_unsigned_varint, decode_unsigned_varlong):
        try:
            value, end = decode(data, position)
        except CorruptRecordError:
            continue
        assert position < end <= len(data)
        assert isinstance(value, int)
