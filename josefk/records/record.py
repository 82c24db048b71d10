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

import array
import enum
import struct
import sys
from collections.abc import Iterator
from typing import Final, NamedTuple

from josefk.records.batch import (
    HEADER_SIZE,
    MAGIC,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    Compression,
    RecordBatch,
    TimestampType,
)
from josefk.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, decompress
from josefk.records.errors import CorruptRecordError
from josefk.records.varint import INT64_MIN, Buffer, decode_varint, decode_varlong

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


class RecordSpan(NamedTuple):
    """Where one record lies in a batch's (decompressed) record bytes, and what a log
    cleaner needs of it: its deltas, its key and whether it has a value.

    ``start`` is the position of the length varint, ``body`` that of the offset delta (the
    bytes from there to ``end`` do not depend on the batch's base timestamp, so a batch
    rebuilt with another base timestamp re-encodes only what comes before).
    """

    start: int
    body: int
    end: int
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    has_value: bool


def record_spans(data: Buffer, count: int, base_offset: int = 0) -> list[RecordSpan]:
    """The spans of the ``count`` records in ``data``, one pass, values and headers skipped.

    The log cleaner's reader: it needs every key but no value or header, and the record
    bytes to copy unchanged. Raises CorruptRecordError when a record overruns ``data`` or
    the records do not end exactly at its end.
    """
    spans: list[RecordSpan] = []
    append = spans.append
    end = len(data)
    position = 0
    for index in range(count):
        start = position
        try:
            length, position = decode_varint(data, position)
            record_end = position + length
            if length <= 0 or record_end > end:
                raise CorruptRecordError(
                    f"record {index} of the batch at offset {base_offset} claims {length} "
                    f"bytes at position {start}, {end - position} remain"
                )
            timestamp_delta, body = decode_varlong(data, position + 1)
            offset_delta, position = decode_varint(data, body)
            key_length, position = decode_varint(data, position)
            if key_length < 0:
                key = None
            else:
                key = bytes(data[position : position + key_length])
                position += key_length
            value_length, position = decode_varint(data, position)
        except IndexError:
            raise CorruptRecordError(
                f"record {index} of the batch at offset {base_offset} runs past the end of the "
                f"batch's {end} record bytes"
            ) from None
        if position > record_end or key_length < -1 or value_length < -1:
            raise CorruptRecordError(
                f"record {index} of the batch at offset {base_offset} has fields that overrun "
                "its length"
            )
        append(
            RecordSpan(
                start, body, record_end, offset_delta, timestamp_delta, key, value_length >= 0
            )
        )
        position = record_end
    if position != end:
        raise CorruptRecordError(
            f"batch at offset {base_offset} has {end - position} bytes after its {count} records"
        )
    return spans


def batch_record_data(
    batch: RecordBatch, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> Buffer:
    """The record bytes of ``batch``, decompressed once if its codec needs it."""
    data: Buffer = batch.records_buffer()
    codec = batch.compression
    if codec != Compression.NONE and (batch.record_count or len(data)):
        data = decompress(codec, data, max_size=max_decompressed_size)
    return data


# Finding the largest one-byte timestamp delta of a run of records without a Python step per
# record (``max()`` over bytes costs ~12 ns a byte, ``translate`` and ``in`` well under 1 ns):
# _AT_LEAST[k] maps a one-byte zig-zag varint to 1 when its value is >= k - 64, so a binary
# search over k with ``1 in column.translate(_AT_LEAST[k])`` finds the largest in 7 passes.
# _IS_LONG marks the first byte of a longer varint.
_AT_LEAST: Final = tuple(
    bytes(1 if byte >= 0x80 or ((byte >> 1) ^ -(byte & 1)) + 64 >= k else 0 for byte in range(256))
    for k in range(128)
)
_IS_LONG: Final = bytes(1 if byte >= 0x80 else 0 for byte in range(256))
_ODD: Final = bytes(byte & 1 for byte in range(256))
_LITTLE_ENDIAN: Final = sys.byteorder == "little"
# The smallest record: length is outside it, then attributes, timestamp delta, offset delta,
# key length, value length and header count, one byte each at least.
_MIN_RECORD_SIZE: Final = 6


def max_timestamp_delta(data: Buffer, count: int, base_offset: int = 0) -> int | None:
    """The largest ``timestamp_delta`` among the ``count`` records in ``data``; None if none.

    ``data`` is a batch's records, uncompressed. Reads each record's length and timestamp
    delta only, and checks the framing on the way: every record at least as long as the
    smallest record and within ``data``, exactly ``count`` of them, nothing after them
    (CorruptRecordError otherwise; ``base_offset`` only names the batch in the message).

    Consecutive records of one size (the common case: values of one size, and the varints
    of the deltas grow only at 64 and 8192) are read a column at a time: the length bytes
    at every ``stride`` position are compared with the first record's (a run ends at the
    first that differs), and the largest of the run's timestamp deltas is found with
    byte-string operations, so the work per record is done in C. A run is looked for after
    two records of one size in a row, in windows of doubling size, so records of
    ever-changing sizes cost no look at all and a short run one short look.
    """
    end = len(data)
    if count <= 0:
        if end:
            raise CorruptRecordError(
                f"batch at offset {base_offset} has {end} record bytes but claims no records"
            )
        return None
    view = data if isinstance(data, memoryview) else memoryview(data)
    best = INT64_MIN
    one_byte_deltas: list[bytes] = []
    position = 0
    index = 0
    previous_length = -1
    try:
        while index < count:
            lead = view[position]
            if lead < 0x80:
                length = (lead >> 1) ^ -(lead & 1)
                at = position + 1
            else:
                second = view[position + 1]
                if second < 0x80:  # two bytes: records of 64 B to 8 KiB
                    raw = (lead & 0x7F) | (second << 7)
                    length = (raw >> 1) ^ -(raw & 1)
                    at = position + 2
                else:
                    length, at = decode_varint(view, position)
            stop = at + length
            if length < _MIN_RECORD_SIZE or stop > end:
                raise CorruptRecordError(
                    f"record {index} of the batch at offset {base_offset} claims {length} "
                    f"bytes at position {at}, {end - at} remain"
                )
            byte = view[at + 1]
            delta = (byte >> 1) ^ -(byte & 1) if byte < 0x80 else decode_varlong(view, at + 1)[0]
            if delta > best:
                best = delta
            index += 1
            if length != previous_length:
                previous_length = length
                position = stop
                continue
            prefix = at - position
            if prefix > 2 or index == count:
                position = stop
                continue
            # Two records of one size in a row: a run may follow, record i of it at i * stride.
            stride = stop - position
            first = view[position : position + 1].tobytes()
            second_byte = view[position + 1 : position + 2].tobytes()
            position = stop
            window = 64
            while True:
                window = min(window, count - index, (end - position) // stride)
                if window <= 0:
                    break
                stop = position + window * stride
                column = view[position:stop:stride].tobytes()
                run = window - len(column.lstrip(first))
                if prefix == 2 and run:
                    column = view[position + 1 : position + run * stride : stride].tobytes()
                    run -= len(column.lstrip(second_byte))
                if run == 0:
                    break
                stop = position + run * stride
                at = position + prefix + 1
                lows = view[at:stop:stride].tobytes()
                if 1 not in lows.translate(_IS_LONG):
                    one_byte_deltas.append(lows)  # searched once, after the loop
                else:
                    two_byte = _max_two_byte_delta(lows, view[at + 1 : stop : stride].tobytes())
                    delta = (
                        max(decode_varlong(view, at)[0] for at in range(at, stop, stride))
                        if two_byte is None
                        else two_byte
                    )
                    if delta > best:
                        best = delta
                index += run
                position = stop
                if run < window:
                    break
                window *= 2
    except IndexError:
        raise CorruptRecordError(
            f"the records of the batch at offset {base_offset} run past its {end} bytes"
        ) from None
    if position != end:
        raise CorruptRecordError(
            f"batch at offset {base_offset} has {end - position} bytes after its {count} records"
        )
    if one_byte_deltas and best < 63:
        # The largest k in [best + 64, 127] with a delta >= k - 64 (best's own k needs no
        # test: the first record set best).
        deltas = b"".join(one_byte_deltas)
        low, high = max(best + 64, 0), 127
        while low < high:
            middle = (low + high + 1) >> 1
            if 1 in deltas.translate(_AT_LEAST[middle]):
                low = middle
            else:
                high = middle - 1
        best = max(best, low - 64)
    return best


def _max_two_byte_delta(lows: bytes, highs: bytes) -> int | None:
    """The largest delta of a run whose timestamp deltas are all two-byte varints >= 0.

    (Deltas of 64 ms to 8 s: records timestamped across a slow batch.) The pairs are
    interleaved into big-endian 16-bit words whose order is the varints' order, as the low
    byte's continuation bit is set in all of them. None when any delta is not a two-byte
    varint or is negative (odd zig-zag): the caller then decodes them one by one.
    """
    if min(lows) < 0x80 or max(highs) >= 0x80 or max(lows.translate(_ODD)) != 0:
        return None
    pairs = bytearray(2 * len(lows))
    pairs[0::2] = highs
    pairs[1::2] = lows
    words = array.array("H", pairs)
    if _LITTLE_ENDIAN:
        words.byteswap()
    top = max(words)
    return (((top >> 8) << 7) | (top & 0x7F)) >> 1


def batch_max_timestamp(
    batch: RecordBatch, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> int:
    """The batch's max timestamp computed from its records, as Kafka's validator does.

    The largest ``base_timestamp + timestamp_delta`` over the records, or NO_TIMESTAMP when
    no record has a timestamp >= 0 (records written with timestamp -1). Under
    LogAppendTime every record's timestamp is the header's, which is returned as it is. A
    compressed batch is decompressed for this; framing errors raise CorruptRecordError.
    """
    header = batch.header()
    if header.attributes & TIMESTAMP_TYPE_BIT:
        return int(header.max_timestamp)
    data: Buffer = batch.records_buffer()
    codec = batch.compression
    if codec != Compression.NONE and (header.record_count or len(data)):
        data = decompress(codec, data, max_size=max_decompressed_size)
    delta = max_timestamp_delta(data, header.record_count, header.base_offset)
    if delta is None:
        return NO_TIMESTAMP
    return max(header.base_timestamp + delta, NO_TIMESTAMP)


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
