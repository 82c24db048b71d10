"""Primitive types of the Kafka protocol: the building blocks the compiled codecs call.

Owns the precompiled ``struct.Struct`` objects for fixed-size types, unsigned and zig-zag
varints, (compact, nullable) strings and bytes, array length prefixes, the tagged-field
section and records kept as a zero-copy memoryview. Every reader takes ``(buf, pos)`` with
``buf`` a memoryview of unsigned bytes and returns ``(value, new_pos)``; every writer appends
to a bytearray. Readers raise only ``josefk.protocol.errors.ProtocolDecodeError`` subclasses
for bad input, and check a claimed length against the bytes left *before* allocating.
Imports only josefk.protocol.errors; must not import the compiler, messages or anything doing
I/O.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

from josefk.protocol.errors import (
    BufferUnderflow,
    InvalidLength,
    InvalidString,
    InvalidVarint,
    UnexpectedNull,
)

INT8: Final = struct.Struct(">b")
INT16: Final = struct.Struct(">h")
UINT16: Final = struct.Struct(">H")
INT32: Final = struct.Struct(">i")
UINT32: Final = struct.Struct(">I")
INT64: Final = struct.Struct(">q")
FLOAT64: Final = struct.Struct(">d")
BOOL: Final = struct.Struct(">?")
UUID_STRUCT: Final = struct.Struct(">16s")

#: struct format character and size of each fixed-size primitive.
FIXED_FORMATS: Final[dict[str, tuple[str, int]]] = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "uuid": ("16s", 16),
}

ZERO_UUID: Final = uuid.UUID(int=0)

#: Bytes of the empty tagged-field section (a varint count of zero).
EMPTY_TAGGED_FIELDS: Final = b"\x00"

_UVARINT_CACHE: Final = [bytes([n]) for n in range(128)]


# -- varints -----------------------------------------------------------------------------------


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (32 bits), as Kafka uses for lengths and tags."""
    try:
        byte = buf[pos]
        if byte < 0x80:
            return byte, pos + 1
        value = byte & 0x7F
        shift = 7
        for i in range(1, 5):
            byte = buf[pos + i]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                if i == 4 and byte > 0x0F:
                    raise InvalidVarint("unsigned varint exceeds 32 bits")
                return value, pos + i + 1
            shift += 7
    except IndexError:
        raise BufferUnderflow("input ended inside a varint") from None
    raise InvalidVarint("unsigned varint longer than 5 bytes")


def read_uvarlong(buf: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 10 bytes (64 bits)."""
    value = 0
    shift = 0
    try:
        for i in range(10):
            byte = buf[pos + i]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                if value >= 1 << 64:
                    raise InvalidVarint("unsigned varlong exceeds 64 bits")
                return value, pos + i + 1
            shift += 7
    except IndexError:
        raise BufferUnderflow("input ended inside a varlong") from None
    raise InvalidVarint("varlong longer than 10 bytes")


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag encoded signed 32-bit varint."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag encoded signed 64-bit varint."""
    raw, pos = read_uvarlong(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def uvarint_bytes(value: int) -> bytes:
    """The unsigned varint encoding of ``value`` (0 <= value < 2**64)."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"unsigned varint cannot hold {value}")
        return _UVARINT_CACHE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint(out: bytearray, value: int) -> None:
    if 0 <= value < 0x80:
        out.append(value)
    else:
        out += uvarint_bytes(value)


def write_varint(out: bytearray, value: int) -> None:
    """Zig-zag signed 32-bit varint."""
    if not -(1 << 31) <= value < 1 << 31:
        raise ValueError(f"varint out of range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Zig-zag signed 64-bit varint."""
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"varlong out of range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


# -- fixed size ------------------------------------------------------------------------------


def read_int8(buf: memoryview, pos: int) -> tuple[int, int]:
    if pos + 1 > len(buf):
        raise BufferUnderflow("int8")
    return INT8.unpack_from(buf, pos)[0], pos + 1


def read_int16(buf: memoryview, pos: int) -> tuple[int, int]:
    if pos + 2 > len(buf):
        raise BufferUnderflow("int16")
    return INT16.unpack_from(buf, pos)[0], pos + 2


def read_int32(buf: memoryview, pos: int) -> tuple[int, int]:
    if pos + 4 > len(buf):
        raise BufferUnderflow("int32")
    return INT32.unpack_from(buf, pos)[0], pos + 4


def read_int64(buf: memoryview, pos: int) -> tuple[int, int]:
    if pos + 8 > len(buf):
        raise BufferUnderflow("int64")
    return INT64.unpack_from(buf, pos)[0], pos + 8


def read_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    if pos + 16 > len(buf):
        raise BufferUnderflow("uuid")
    return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def uuid_bytes(value: uuid.UUID) -> bytes:
    return value.bytes


# -- strings, bytes, records -------------------------------------------------------------------


def _length(buf: memoryview, pos: int, compact: bool, wide: bool) -> tuple[int, int]:
    """A length prefix: -1 means null. ``wide`` picks int32 over int16 for non-compact."""
    if compact:
        raw, pos = read_uvarint(buf, pos)
        return raw - 1, pos
    if wide:
        return read_int32(buf, pos)
    return read_int16(buf, pos)


def _checked(buf: memoryview, pos: int, size: int, what: str) -> int:
    if size < 0:
        raise InvalidLength(f"negative {what} length {size}")
    end = pos + size
    if end > len(buf):
        raise BufferUnderflow(f"{what} of {size} bytes but only {len(buf) - pos} left")
    return end


def read_string(
    buf: memoryview, pos: int, *, compact: bool = False, nullable: bool = False
) -> tuple[str | None, int]:
    size, pos = _length(buf, pos, compact, wide=False)
    if size == -1:
        if not nullable:
            raise UnexpectedNull("null string where the field is not nullable")
        return None, pos
    end = _checked(buf, pos, size, "string")
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise InvalidString(str(exc)) from None


def read_bytes(
    buf: memoryview, pos: int, *, compact: bool = False, nullable: bool = False
) -> tuple[bytes | None, int]:
    size, pos = _length(buf, pos, compact, wide=True)
    if size == -1:
        if not nullable:
            raise UnexpectedNull("null bytes where the field is not nullable")
        return None, pos
    end = _checked(buf, pos, size, "bytes")
    return bytes(buf[pos:end]), end


def read_records(
    buf: memoryview, pos: int, *, compact: bool = False, nullable: bool = True
) -> tuple[memoryview | None, int]:
    """Record data as a memoryview slice of ``buf``: zero copy, never parsed here."""
    size, pos = _length(buf, pos, compact, wide=True)
    if size == -1:
        if not nullable:
            raise UnexpectedNull("null records where the field is not nullable")
        return None, pos
    end = _checked(buf, pos, size, "records")
    return buf[pos:end], end


def read_array_length(
    buf: memoryview, pos: int, min_element_size: int, *, compact: bool = False
) -> tuple[int, int]:
    """An array's element count (-1 for null), rejected if the bytes left cannot hold it."""
    size, pos = _length(buf, pos, compact, wide=True)
    if size < -1:
        raise InvalidLength(f"negative array length {size}")
    if size > 0 and size * max(min_element_size, 1) > len(buf) - pos:
        raise InvalidLength(
            f"array of {size} elements cannot fit in the {len(buf) - pos} bytes left"
        )
    return size, pos


def write_string(out: bytearray, value: str | None, *, compact: bool = False) -> None:
    if value is None:
        out += b"\x00" if compact else b"\xff\xff"
        return
    data = value.encode()
    if compact:
        write_uvarint(out, len(data) + 1)
    else:
        out += INT16.pack(len(data))
    out += data


def write_bytes(
    out: bytearray, value: bytes | bytearray | memoryview | None, *, compact: bool = False
) -> None:
    if value is None:
        out += b"\x00" if compact else b"\xff\xff\xff\xff"
        return
    size = memoryview(value).nbytes
    if compact:
        write_uvarint(out, size + 1)
    else:
        out += INT32.pack(size)
    out += value


def write_array_length(out: bytearray, length: int | None, *, compact: bool = False) -> None:
    if compact:
        write_uvarint(out, 0 if length is None else length + 1)
    else:
        out += INT32.pack(-1 if length is None else length)


# -- tagged fields -----------------------------------------------------------------------------


def read_tagged_fields(buf: memoryview, pos: int) -> tuple[dict[int, memoryview], int]:
    """The raw tagged-field section: tag -> the field's bytes (a slice of ``buf``)."""
    count, pos = read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise InvalidLength(f"{count} tagged fields cannot fit in {len(buf) - pos} bytes")
    fields: dict[int, memoryview] = {}
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = _checked(buf, pos, size, "tagged field")
        fields[tag] = buf[pos:end]
        pos = end
    return fields, pos


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    return read_tagged_fields(buf, pos)[1]


def write_tagged_fields(out: bytearray, fields: dict[int, bytes] | None = None) -> None:
    if not fields:
        out.append(0)
        return
    write_uvarint(out, len(fields))
    for tag in sorted(fields):
        data = fields[tag]
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
