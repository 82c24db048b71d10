"""Variable-length integers of the Kafka formats: zig-zag varint/varlong and unsigned varints.

Owns the encodings used inside v2 records (zig-zag, as protobuf's sint32/sint64) and the
unsigned varints of flexible protocol versions. Imports nothing from josefk but
``records.errors``.

Every decoder takes a buffer (bytes, bytearray or a byte memoryview) and a position, and
returns ``(value, next_position)``. Whatever the bytes, a decoder raises only
CorruptRecordError: on a buffer that ends inside a varint, and on a varint longer than its
type allows (5 bytes for 32-bit values, 10 for 64-bit), which is how a reader notices garbage
instead of looping over it. Encoders raise ValueError for a value outside the type's range,
which is a programming error, never bad input.

Zig-zag maps signed to unsigned so that small magnitudes stay short::

    0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, ... , 2**31 - 1 -> 2**32 - 2, -2**31 -> 2**32 - 1
"""

from __future__ import annotations

from typing import Final

from josefk.records.errors import CorruptRecordError

Buffer = bytes | bytearray | memoryview

INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
UINT32_MAX: Final = (1 << 32) - 1
UINT64_MAX: Final = (1 << 64) - 1

MAX_VARINT_BYTES: Final = 5
MAX_VARLONG_BYTES: Final = 10

# Encodings of one and two bytes (unsigned values below 2**14) cover nearly every varint a
# record carries: offset and timestamp deltas within a batch, key and value lengths up to
# 8 KiB as zig-zag, -1 for null. Encoders look them up instead of looping byte by byte
# (a few hundred KB, built once at import in about 2 ms).
SMALL_UVARINT_LIMIT: Final = 1 << 14
SMALL_UVARINTS: Final[tuple[bytes, ...]] = tuple(
    [bytes((i,)) for i in range(0x80)]
    + [bytes(((i & 0x7F) | 0x80, i >> 7)) for i in range(0x80, SMALL_UVARINT_LIMIT)]
)


# -- sizes ---------------------------------------------------------------------------------


def size_of_unsigned_varint(value: int) -> int:
    """Bytes the unsigned varint encoding of a non-negative value takes."""
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def size_of_varint(value: int) -> int:
    """Bytes the zig-zag encoding of a 32-bit signed value takes."""
    return size_of_unsigned_varint(((value << 1) ^ (value >> 31)) & UINT32_MAX)


def size_of_varlong(value: int) -> int:
    """Bytes the zig-zag encoding of a 64-bit signed value takes."""
    return size_of_unsigned_varint(((value << 1) ^ (value >> 63)) & UINT64_MAX)


# -- encoding ------------------------------------------------------------------------------


def write_unsigned_varint(out: bytearray, value: int) -> None:
    """Append the unsigned varint encoding of ``value`` (no range check: callers check)."""
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append the zig-zag encoding of a 32-bit signed value."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"{value} does not fit a varint (int32)")
    write_unsigned_varint(out, ((value << 1) ^ (value >> 31)) & UINT32_MAX)


def write_varlong(out: bytearray, value: int) -> None:
    """Append the zig-zag encoding of a 64-bit signed value."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} does not fit a varlong (int64)")
    write_unsigned_varint(out, ((value << 1) ^ (value >> 63)) & UINT64_MAX)


def encode_unsigned_varint(value: int) -> bytes:
    """The unsigned varint encoding of a value in [0, 2**32)."""
    if not 0 <= value <= UINT32_MAX:
        raise ValueError(f"{value} does not fit an unsigned varint (uint32)")
    if value < SMALL_UVARINT_LIMIT:
        return SMALL_UVARINTS[value]
    out = bytearray()
    write_unsigned_varint(out, value)
    return bytes(out)


def encode_unsigned_varlong(value: int) -> bytes:
    """The unsigned varint encoding of a value in [0, 2**64)."""
    if not 0 <= value <= UINT64_MAX:
        raise ValueError(f"{value} does not fit an unsigned varlong (uint64)")
    out = bytearray()
    write_unsigned_varint(out, value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """The zig-zag encoding of a 32-bit signed value."""
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    """The zig-zag encoding of a 64-bit signed value."""
    out = bytearray()
    write_varlong(out, value)
    return bytes(out)


# -- decoding ------------------------------------------------------------------------------


def _read_unsigned(buffer: Buffer, position: int, max_bytes: int, limit: int) -> tuple[int, int]:
    end = len(buffer)
    if position < 0:
        raise CorruptRecordError(f"varint at negative position {position}")
    value = 0
    shift = 0
    for index in range(position, min(position + max_bytes, end)):
        byte = buffer[index]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > limit:
                raise CorruptRecordError(
                    f"varint at position {position} encodes {value}, more than {limit}"
                )
            return value, index + 1
        shift += 7
    if position + max_bytes <= end:
        raise CorruptRecordError(f"varint at position {position} is longer than {max_bytes} bytes")
    raise CorruptRecordError(f"buffer of {end} bytes ends inside the varint at position {position}")


def decode_unsigned_varint(buffer: Buffer, position: int = 0) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes whose value fits 32 bits."""
    if 0 <= position < len(buffer):
        byte = buffer[position]
        if byte < 0x80:
            return byte, position + 1
    return _read_unsigned(buffer, position, MAX_VARINT_BYTES, UINT32_MAX)


def decode_unsigned_varlong(buffer: Buffer, position: int = 0) -> tuple[int, int]:
    """Read an unsigned varint of at most 10 bytes whose value fits 64 bits."""
    if 0 <= position < len(buffer):
        byte = buffer[position]
        if byte < 0x80:
            return byte, position + 1
    return _read_unsigned(buffer, position, MAX_VARLONG_BYTES, UINT64_MAX)


def decode_varint(buffer: Buffer, position: int = 0) -> tuple[int, int]:
    """Read a zig-zag varint (int32)."""
    if 0 <= position < len(buffer):
        byte = buffer[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
        if position + 1 < len(buffer):
            # Two bytes cover record lengths up to 8 KiB, the next most common case.
            second = buffer[position + 1]
            if second < 0x80:
                raw = (byte & 0x7F) | (second << 7)
                return (raw >> 1) ^ -(raw & 1), position + 2
    raw, position = _read_unsigned(buffer, position, MAX_VARINT_BYTES, UINT32_MAX)
    return (raw >> 1) ^ -(raw & 1), position


def decode_varlong(buffer: Buffer, position: int = 0) -> tuple[int, int]:
    """Read a zig-zag varlong (int64)."""
    if 0 <= position < len(buffer):
        byte = buffer[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
        if position + 1 < len(buffer):
            # Two bytes cover record lengths up to 8 KiB, the next most common case.
            second = buffer[position + 1]
            if second < 0x80:
                raw = (byte & 0x7F) | (second << 7)
                return (raw >> 1) ^ -(raw & 1), position + 2
    raw, position = _read_unsigned(buffer, position, MAX_VARLONG_BYTES, UINT64_MAX)
    return (raw >> 1) ^ -(raw & 1), position
