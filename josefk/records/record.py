"""The records inside a v2 batch: the Record value, iteration and control records.

Owns the record layout and reading it; building records is ``records.builder``. Imports
nothing from josefk but ``records.batch``, ``records.compression``, ``records.varint`` and
``records.errors``.

Layout of one record, after the batch header (or after decompressing the batch's records)::

    length            varint   bytes after this field
    attributes        int8     unused, 0
    timestamp_delta   varlong  from the batch's base_timestamp
    offset_delta      varint   from the batch's base_offset
    key_length        varint   -1 for a null key
    key               bytes
    value_length      varint   -1 for a null value
    value             bytes
    header_count      varint
    headers           header_count times:
        key_length    varint   (never -1)
        key           UTF-8
        value_length  varint   -1 for a null value
        value         bytes

Reading is strict the way Kafka's reader is: a record must use exactly the bytes its length
claims, the batch must hold exactly record_count records and nothing after them, and every
failure is a CorruptRecordError (never IndexError or UnicodeDecodeError).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import Final, NamedTuple

from josefk.records.batch import HEADER_SIZE, MAGIC, Compression, RecordBatch, TimestampType
from josefk.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, decompress
from josefk.records.errors import CorruptRecordError
from josefk.records.varint import Buffer, decode_varint, decode_varlong

Header = tuple[str, bytes | None]


class Record(NamedTuple):
    """One record of a batch, with its absolute offset and timestamp resolved.

    An immutable value (a named tuple, because a consumer makes millions of them and tuple
    construction is the cheapest Python offers). ``offset_delta`` and ``timestamp_delta``
    are as stored; under LogAppendTime the ``timestamp`` is the batch's max_timestamp
    whatever the delta says.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0
    offset_delta: int = 0
    timestamp_delta: int = 0


def iter_records(
    batch: RecordBatch, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> Iterator[Record]:
    """An iterator over the records of ``batch``, decompressing its records once if needed.

    The batch is not CRC-checked here (call ``ensure_valid`` first where that matters), but
    any malformed content raises CorruptRecordError: a bad header or codec data at once,
    when this function is called; a bad record when iteration reaches it (records before it
    have been yielded by then). ``max_decompressed_size`` caps what a compressed batch may
    expand to. Keys and values are bytes of their own, so the batch's buffer may be reused
    once the records have been read.
    """
    buffer = batch.buffer
    if len(buffer) < HEADER_SIZE:
        raise CorruptRecordError(f"batch of {len(buffer)} bytes is shorter than a v2 header")
    header = batch.header()
    if header.magic != MAGIC:
        raise CorruptRecordError(f"magic {header.magic} is not supported, only v2")
    count = header.record_count
    if count < 0:
        raise CorruptRecordError(f"batch at offset {header.base_offset} claims {count} records")
    codec = batch.compression
    data: Buffer = batch.records_buffer()
    # An empty batch (what the log cleaner leaves to keep a producer's state) has no record
    # bytes at all, whatever codec its attributes name.
    if codec != Compression.NONE and (count or len(data)):
        data = decompress(codec, data, max_size=max_decompressed_size)
    log_append_time = (
        header.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    )
    return _read_records(data, count, header.base_offset, header.base_timestamp, log_append_time)


def _read_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
) -> Iterator[Record]:
    # The hot loop of every consumer: one-byte varints (deltas, short lengths, -1 for null)
    # are decoded inline, longer ones by the checked decoders. Inline indexing can run off
    # the end of a corrupt buffer, hence the IndexError handler around each record.
    end = len(data)
    position = 0
    new_record = Record
    for index in range(count):
        start = position
        try:
            byte = data[position]
            if byte < 0x80:
                length = (byte >> 1) ^ -(byte & 1)
                position += 1
            else:
                length, position = decode_varint(data, position)
            record_end = position + length
            if length <= 0 or record_end > end:
                raise CorruptRecordError(
                    f"record {index} of the batch at offset {base_offset} claims {length} "
                    f"bytes at position {start}, {end - position} remain"
                )
            attributes = data[position]
            byte = data[position + 1]
            if byte < 0x80:
                timestamp_delta = (byte >> 1) ^ -(byte & 1)
                position += 2
            else:
                timestamp_delta, position = decode_varlong(data, position + 1)
            byte = data[position]
            if byte < 0x80:
                offset_delta = (byte >> 1) ^ -(byte & 1)
                position += 1
            else:
                offset_delta, position = decode_varint(data, position)

            byte = data[position]
            if byte < 0x80:
                key_length = (byte >> 1) ^ -(byte & 1)
                position += 1
            else:
                key_length, position = decode_varint(data, position)
            if key_length < 0:
                if key_length != -1:
                    raise CorruptRecordError(f"key length {key_length} at position {position}")
                key = None
            else:
                stop = position + key_length
                if stop > record_end:
                    raise CorruptRecordError(
                        f"key of {key_length} bytes at position {position} overruns its record"
                    )
                key = bytes(data[position:stop])
                position = stop

            byte = data[position]
            if byte < 0x80:
                value_length = (byte >> 1) ^ -(byte & 1)
                position += 1
            else:
                value_length, position = decode_varint(data, position)
            if value_length < 0:
                if value_length != -1:
                    raise CorruptRecordError(f"value length {value_length} at position {position}")
                value = None
            else:
                stop = position + value_length
                if stop > record_end:
                    raise CorruptRecordError(
                        f"value of {value_length} bytes at position {position} overruns its record"
                    )
                value = bytes(data[position:stop])
                position = stop

            byte = data[position]
            if byte < 0x80:
                header_count = (byte >> 1) ^ -(byte & 1)
                position += 1
            else:
                header_count, position = decode_varint(data, position)
        except IndexError:
            raise CorruptRecordError(
                f"record {index} of the batch at offset {base_offset} runs past the end of the "
                f"batch's {end} record bytes"
            ) from None
        headers: tuple[Header, ...] = ()
        if header_count:
            if header_count < 0:
                raise CorruptRecordError(
                    f"record at offset {base_offset + offset_delta} claims {header_count} headers"
                )
            headers = _read_headers(data, position, record_end, header_count)
        elif position != record_end:
            raise CorruptRecordError(
                f"record at offset {base_offset + offset_delta} ends at position {record_end} "
                f"but its fields end at {position}"
            )
        position = record_end
        yield new_record(
            base_offset + offset_delta,
            base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
            key,
            value,
            headers,
            attributes,
            offset_delta,
            timestamp_delta,
        )
    if position != end:
        raise CorruptRecordError(
            f"batch at offset {base_offset} has {end - position} bytes after its {count} records"
        )


def _read_bytes(data: Buffer, position: int, limit: int, what: str) -> tuple[bytes | None, int]:
    length, position = decode_varint(data, position)
    if length == -1:
        return None, position
    stop = position + length
    if length < -1 or stop > limit:
        raise CorruptRecordError(
            f"{what} of {length} bytes at position {position} overruns its record"
        )
    return bytes(data[position:stop]), stop


def _read_headers(data: Buffer, position: int, limit: int, count: int) -> tuple[Header, ...]:
    # Each header takes at least two bytes, which bounds a hostile count before the loop.
    if count > (limit - position) // 2:
        raise CorruptRecordError(
            f"record claims {count} headers in {limit - position} bytes at position {position}"
        )
    headers: list[Header] = []
    for _ in range(count):
        key_length, position = decode_varint(data, position)
        key_end = position + key_length
        if key_length < 0 or key_end > limit:
            raise CorruptRecordError(
                f"header key of {key_length} bytes at position {position} overruns its record"
            )
        try:
            key = str(data[position:key_end], "utf-8")
        except UnicodeDecodeError as error:
            raise CorruptRecordError(f"header key at position {position}: {error}") from None
        value, position = _read_bytes(data, key_end, limit, "header value")
        headers.append((key, value))
    if position != limit:
        raise CorruptRecordError(
            f"record ending at position {limit} has fields ending at {position}"
        )
    return tuple(headers)


# -- control records -----------------------------------------------------------------------


class ControlRecordType(enum.IntEnum):
    """The ``type`` in a control record's key; transaction markers are ABORT and COMMIT."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2


CONTROL_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0
CONTROL_KEY = struct.Struct(">hh")  # version, type
END_TXN_MARKER = struct.Struct(">hi")  # version, coordinator epoch


def decode_control_type(key: bytes | None) -> ControlRecordType:
    """The type a control record's key names; UNKNOWN for a type josefk does not know."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptRecordError(f"control record key {key!r} is shorter than 4 bytes")
    _version, code = CONTROL_KEY.unpack_from(key, 0)
    try:
        return ControlRecordType(code)
    except ValueError:
        return ControlRecordType.UNKNOWN


def decode_end_txn_marker(value: bytes | None) -> int:
    """The coordinator epoch in the value of a COMMIT or ABORT marker."""
    if value is None or len(value) < END_TXN_MARKER.size:
        raise CorruptRecordError(f"transaction marker value {value!r} is shorter than 6 bytes")
    _version, coordinator_epoch = END_TXN_MARKER.unpack_from(value, 0)
    return int(coordinator_epoch)
