"""Building v2 record batches: BatchBuilder, recompression and transaction marker batches.

Owns writing the header and record layouts that ``records.batch`` and ``records.record``
read. Imports nothing from josefk but ``records.batch``, ``records.compression``,
``records.record`` (for the control record formats), ``records.varint``,
``records.errors`` and, when built, the C helper ``records._crecords``.

A batch's record bytes and counts live in a ``RecordWriter``: ``_crecords.RecordWriter``
(C, built by setup.py when a compiler is there) or its Python twin ``PyRecordWriter``
(without the extension, or with ``JOSEFK_PURE_PYTHON=1``). The writer appends a record at
the next offset in one call: the C one writes it straight into the bytearray with no
intermediate bytes, the twin joins a record without headers in one piece from precomputed
varint encodings (``varint.SMALL_UVARINTS``). A producer calls the writer directly, which
also keeps each record's timestamp and send time (``keep_times``). Any other record (explicit
offsets, and any the writer declines) is encoded field by field by ``_encode_record_python``,
which checks every field: its size is computed first, so the length prefix goes out before
the fields. All paths write the same bytes. An uncompressed batch is built in place behind a
reserved 61-byte header; a compressed one compresses its record bytes once in ``build``.
"""

from __future__ import annotations

import importlib
import os
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from crc32c import crc32c

from josefk.records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_OFFSET,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    Compression,
    RecordBatch,
    TimestampType,
)
from josefk.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Buffer, compress, decompress
from josefk.records.record import (
    CONTROL_KEY,
    CONTROL_KEY_VERSION,
    END_TXN_MARKER,
    END_TXN_MARKER_VERSION,
    ControlRecordType,
    RecordSpan,
    max_timestamp_delta,
)
from josefk.records.varint import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    SMALL_UVARINTS,
    write_varint,
    write_varlong,
)

BytesLike = bytes | bytearray | memoryview
HeaderInput = tuple[str, BytesLike | None]

_UINT32 = struct.Struct(">I")


# Pieces of ``PyRecordWriter.append``'s one-piece join.
_NO_ATTRIBUTES: Final = b"\x00"  # record attributes: unused by v2
_NULL: Final = b"\x01"  # zig-zag -1: a null key or value
_NO_HEADERS: Final = b"\x00"
_join = b"".join


def _load_crecords() -> Any:
    """The C helper module, or None without the extension or with JOSEFK_PURE_PYTHON=1."""
    if os.environ.get("JOSEFK_PURE_PYTHON") == "1":
        return None
    try:
        return importlib.import_module("josefk.records._crecords")
    except ImportError:
        return None


_crecords: Final = _load_crecords()
# append_record(out, offset_delta, timestamp_delta, key, value, headers) -> bool: True when
# it appended the record, False (``out`` untouched) for one it leaves to Python.
_append_record: Final[Callable[..., bool] | None] = getattr(_crecords, "append_record", None)
C_APPEND_AVAILABLE: Final = _append_record is not None


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _uvarint_size(value: int) -> int:
    if value < 0x80:
        return 1
    if value < 0x4000:
        return 2
    if value < 0x200000:
        return 3
    if value < 0x10000000:
        return 4
    size = 5
    value >>= 35
    while value:
        value >>= 7
        size += 1
    return size


def _put_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _encode_record_python(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: BytesLike | None,
    value: BytesLike | None,
    headers: Sequence[HeaderInput],
) -> None:
    """Append one record to ``out``: length varint, attributes, timestamp delta, offset
    delta, key, value, headers (the layout in records/record.py).

    The Python twin of ``_crecords.append_record``, and the path for every record that one
    declines. Raises ValueError for a number outside its field; ``out`` is only written once
    every field is checked.
    """
    if not 0 <= offset_delta <= INT32_MAX:
        raise ValueError(f"offset delta {offset_delta} does not fit int32")
    if not INT64_MIN <= timestamp_delta <= INT64_MAX:
        raise ValueError(f"timestamp delta {timestamp_delta} does not fit int64")

    # Zig-zag encodings, computed once and used for both the size and the bytes.
    zz_timestamp = ((timestamp_delta << 1) ^ (timestamp_delta >> 63)) & 0xFFFFFFFFFFFFFFFF
    zz_offset = offset_delta << 1  # offset_delta >= 0
    if key is None:
        key_length = 0
        zz_key = 1  # zig-zag of -1
    else:
        key_length = len(key)
        zz_key = key_length << 1
    if value is None:
        value_length = 0
        zz_value = 1
    else:
        value_length = len(value)
        zz_value = value_length << 1
    body = (
        1
        + _uvarint_size(zz_timestamp)
        + _uvarint_size(zz_offset)
        + _uvarint_size(zz_key)
        + key_length
        + _uvarint_size(zz_value)
        + value_length
        + _uvarint_size(len(headers) << 1)
    )
    encoded_headers: list[tuple[bytes, BytesLike | None]] = []
    for header_key, header_value in headers:
        encoded_key = header_key.encode("utf-8")
        body += _uvarint_size(len(encoded_key) << 1) + len(encoded_key)
        if header_value is None:
            body += 1
        else:
            body += _uvarint_size(len(header_value) << 1) + len(header_value)
        encoded_headers.append((encoded_key, header_value))
    if body > INT32_MAX:
        raise ValueError(f"record of {body} bytes does not fit a v2 batch")

    _put_uvarint(out, body << 1)
    out.append(0)  # record attributes: unused
    _put_uvarint(out, zz_timestamp)
    _put_uvarint(out, zz_offset)
    _put_uvarint(out, zz_key)
    if key is not None:
        out += key
    _put_uvarint(out, zz_value)
    if value is not None:
        out += value
    _put_uvarint(out, len(encoded_headers) << 1)
    for encoded_key, header_value in encoded_headers:
        _put_uvarint(out, len(encoded_key) << 1)
        out += encoded_key
        if header_value is None:
            out.append(1)
        else:
            _put_uvarint(out, len(header_value) << 1)
            out += header_value


class PyRecordWriter:
    """A batch's record bytes and what ``build`` needs to know of them, as records are
    appended at the next offset or written by the caller; the Python twin of
    ``_crecords.RecordWriter`` (``RecordWriter`` below is whichever is in use).

    ``buffer`` starts with ``header_size`` zero bytes (the batch header's room).
    ``append(key, value, headers, timestamp)`` encodes a record at the next offset and
    returns its offset delta, or None, with nothing changed, for a record it leaves to the
    caller's general path (here: any record with headers or a null value, a timestamp that is
    no int or, for a first record, outside int64, deltas past the varint table; the C writer
    declines odd types only). ``note(offset_delta, timestamp)`` counts a record the caller
    wrote into ``buffer`` itself. With ``keep_times`` each record's timestamp and the
    ``time.perf_counter()`` of its append are kept (the producer's RecordMetadata and
    ``latency()``), and outlive ``release()``, which drops the bytes.
    """

    __slots__ = (
        "_appended_at",
        "_buffer",
        "_keep_times",
        "_timestamps",
        "base_timestamp",
        "last_offset_delta",
        "max_timestamp",
        "record_count",
    )

    def __init__(self, header_size: int, *, keep_times: bool = False) -> None:
        if header_size < 0:
            raise ValueError("header_size must not be negative")
        self._buffer: bytearray | None = bytearray(header_size)
        self.record_count = 0
        self.base_timestamp = NO_TIMESTAMP
        self.max_timestamp = NO_TIMESTAMP
        self.last_offset_delta = -1
        self._keep_times = keep_times
        self._timestamps: list[int] = []
        self._appended_at: list[float] = []

    @property
    def buffer(self) -> bytearray:
        if self._buffer is None:
            raise ValueError("RecordWriter: the records were released")
        return self._buffer

    def append(
        self,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[HeaderInput],
        timestamp: int,
    ) -> int | None:
        # The record joined in one piece from precomputed varints (about a third of the
        # general path's cost); a number outside the table (IndexError) or an input of the
        # wrong type (TypeError) goes back to the caller, nothing written.
        out = self.buffer
        if value is None or headers or type(timestamp) is not int:
            return None
        count = self.record_count
        if count:
            delta = timestamp - self.base_timestamp
        elif INT64_MIN <= timestamp <= INT64_MAX:
            delta = 0
        else:
            return None
        offset_delta = self.last_offset_delta + 1
        try:
            if key is None:
                record = _join(
                    (
                        _NO_ATTRIBUTES,
                        SMALL_UVARINTS[delta << 1 if delta >= 0 else (-delta << 1) - 1],
                        SMALL_UVARINTS[offset_delta << 1],
                        _NULL,
                        SMALL_UVARINTS[len(value) << 1],
                        value,
                        _NO_HEADERS,
                    )
                )
            else:
                record = _join(
                    (
                        _NO_ATTRIBUTES,
                        SMALL_UVARINTS[delta << 1 if delta >= 0 else (-delta << 1) - 1],
                        SMALL_UVARINTS[offset_delta << 1],
                        SMALL_UVARINTS[len(key) << 1],
                        key,
                        SMALL_UVARINTS[len(value) << 1],
                        value,
                        _NO_HEADERS,
                    )
                )
            length = SMALL_UVARINTS[len(record) << 1]
        except (IndexError, TypeError):
            return None
        out += length
        out += record
        self.note(offset_delta, timestamp)
        return offset_delta

    def note(self, offset_delta: int, timestamp: int) -> None:
        self.buffer  # noqa: B018  raises once released
        if offset_delta <= self.last_offset_delta or offset_delta > INT32_MAX:
            raise ValueError(
                f"offset delta {offset_delta} does not follow {self.last_offset_delta}"
            )
        if self._keep_times:
            self._timestamps.append(timestamp)
            self._appended_at.append(time.perf_counter())
        if self.record_count == 0:
            self.base_timestamp = self.max_timestamp = timestamp
        elif timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        self.record_count += 1
        self.last_offset_delta = offset_delta

    def timestamp(self, index: int) -> int:
        return self._timestamps[self._index(index)]

    def appended_at(self, index: int) -> float:
        return self._appended_at[self._index(index)]

    def latencies(self, until: float) -> list[float]:
        """Each record's seconds from its append to ``until`` (a perf_counter time)."""
        if not self._keep_times:
            raise ValueError("RecordWriter made without keep_times")
        return [until - at for at in self._appended_at]

    def _index(self, index: int) -> int:
        if not self._keep_times:
            raise ValueError("RecordWriter made without keep_times")
        if not 0 <= index < self.record_count:
            raise IndexError("record index out of range")
        return index

    def release(self) -> None:
        self._buffer = None


# The C writer when built (same bytes, same counts, one call a record), else the twin.
RecordWriter: type[PyRecordWriter] = getattr(_crecords, "RecordWriter", PyRecordWriter)


class BatchBuilder:
    """Accumulates records and builds one v2 batch with a correct CRC32C.

    Offsets are consecutive from ``base_offset`` unless ``append`` is given explicit,
    increasing offsets (as a log cleaner rewriting a batch does). Timestamps default to the
    injected ``clock`` (milliseconds). ``build`` may be called once; the builder is closed
    afterwards because an uncompressed batch is returned without a copy.

    The record bytes and counts live in ``records`` (a ``RecordWriter``): a producer appends
    through it directly, one C call a record, and comes back to ``append`` only for a record
    the writer declines. ``keep_times`` keeps each record's timestamp and append time there.

    Not safe for concurrent use; nothing here awaits.
    """

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_clock",
        "_closed",
        "_compression",
        "_compression_level",
        "_is_control",
        "_is_transactional",
        "_log_append_time",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_timestamp_type",
        "records",
    )

    def __init__(
        self,
        *,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        compression: Compression = Compression.NONE,
        compression_level: int | None = None,
        log_append_time: int | None = None,
        clock: Callable[[], int] = _wall_clock_ms,
        keep_times: bool = False,
    ) -> None:
        self._base_offset = base_offset
        self._partition_leader_epoch = partition_leader_epoch
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional
        self._is_control = is_control
        # Enum calls only for plain ints: a call on a member costs a µs a batch, and a
        # producer spread over thousands of partitions builds a batch every few records.
        self._timestamp_type = (
            timestamp_type
            if type(timestamp_type) is TimestampType
            else TimestampType(timestamp_type)
        )
        self._compression = (
            compression if type(compression) is Compression else Compression(compression)
        )
        self._compression_level = compression_level
        self._log_append_time = log_append_time
        self._clock = clock
        self.records = RecordWriter(HEADER_SIZE, keep_times=keep_times)
        self._closed = False

    # -- state ---------------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def record_count(self) -> int:
        return self.records.record_count

    @property
    def next_offset(self) -> int:
        """The offset the next ``append`` without an explicit offset gets."""
        return self._base_offset + self.records.last_offset_delta + 1

    @property
    def uncompressed_size(self) -> int:
        """Bytes of the batch so far without compression: header plus encoded records.

        A producer compares this with its batch.size; the compressed batch is smaller.
        """
        return len(self.records.buffer)

    def __len__(self) -> int:
        return self.records.record_count

    # -- appending -----------------------------------------------------------------------

    def append(
        self,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[HeaderInput] = (),
        timestamp: int | None = None,
        *,
        offset: int | None = None,
    ) -> int:
        """Encode one record into the batch and return its offset.

        Raises ValueError for values a v2 record cannot carry (an offset that does not
        increase, a timestamp outside int64, a delta outside its varint).
        """
        if timestamp is None:
            timestamp = self._clock()
        if self._closed:
            raise ValueError("BatchBuilder.append after build")
        records = self.records
        if offset is None:
            offset_delta = records.append(key, value, headers, timestamp)
            if offset_delta is not None:
                return self._base_offset + offset_delta
            # Declined: the general path below checks and encodes every field, and raises
            # what the record deserves. Nothing changed before the record is whole.
            offset_delta = records.last_offset_delta + 1
        else:
            offset_delta = offset - self._base_offset
            if offset_delta <= records.last_offset_delta:
                raise ValueError(
                    f"offset {offset} does not follow "
                    f"{self._base_offset + records.last_offset_delta}"
                )
        if not INT64_MIN <= timestamp <= INT64_MAX:
            raise ValueError(f"timestamp {timestamp} does not fit int64")
        _encode_record_python(
            records.buffer,
            offset_delta,
            timestamp - (records.base_timestamp if records.record_count else timestamp),
            key,
            value,
            headers,
        )
        records.note(offset_delta, timestamp)
        return self._base_offset + offset_delta

    # -- building ------------------------------------------------------------------------

    def build(self) -> bytearray:
        """The finished batch: header, CRC32C and the (possibly compressed) records."""
        if self._closed:
            raise ValueError("BatchBuilder.build called twice")
        records = self.records
        if records.record_count == 0:
            raise ValueError("a batch needs at least one record")
        self._closed = True
        out = records.buffer
        if self._compression != Compression.NONE:
            with memoryview(out) as whole:
                compressed = compress(
                    self._compression, whole[HEADER_SIZE:], level=self._compression_level
                )
            out = bytearray(HEADER_SIZE)
            out += compressed
        attributes = int(self._compression)
        if self._timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_BIT
        if self._is_transactional:
            attributes |= TRANSACTIONAL_BIT
        if self._is_control:
            attributes |= CONTROL_BIT
        max_timestamp = records.max_timestamp
        if (
            self._timestamp_type == TimestampType.LOG_APPEND_TIME
            and self._log_append_time is not None
        ):
            max_timestamp = self._log_append_time
        HEADER_STRUCT.pack_into(
            out,
            0,
            self._base_offset,
            len(out) - LOG_OVERHEAD,
            self._partition_leader_epoch,
            MAGIC,
            0,  # crc, filled in below once the rest of the header is in place
            attributes,
            records.last_offset_delta,
            records.base_timestamp,
            max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            records.record_count,
        )
        _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
        return out


def recompress_batch(
    batch: RecordBatch,
    codec: Compression,
    *,
    level: int | None = None,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytearray:
    """A new batch holding ``batch``'s records compressed with ``codec`` (NONE: plain).

    What a broker does for a topic whose ``compression.type`` differs from the producer's:
    every header field is kept but the codec bits of the attributes, the batch length, the
    max timestamp (computed from the records, as ``records.record.batch_max_timestamp``
    does; kept under LogAppendTime) and the CRC. The record bytes are carried over as they
    are, only decompressed and compressed again; their framing is checked on the way
    (CorruptRecordError, as for bad codec data). ``level`` applies to gzip and zstd.
    """
    header = batch.header()
    data: Buffer = batch.records_buffer()
    source = batch.compression
    if source != Compression.NONE and (header.record_count or len(data)):
        data = decompress(source, data, max_size=max_decompressed_size)
    delta = max_timestamp_delta(data, header.record_count, header.base_offset)
    max_timestamp = header.max_timestamp
    if not header.attributes & TIMESTAMP_TYPE_BIT:
        max_timestamp = (
            NO_TIMESTAMP if delta is None else max(header.base_timestamp + delta, NO_TIMESTAMP)
        )
    out = bytearray(HEADER_SIZE)
    if codec == Compression.NONE or not len(data):
        out += data
    else:
        out += compress(codec, data, level=level)
    _seal(
        out,
        header,
        attributes=(header.attributes & ~COMPRESSION_MASK) | int(codec),
        base_timestamp=header.base_timestamp,
        max_timestamp=max_timestamp,
        record_count=header.record_count,
    )
    return out


def _seal(
    out: bytearray,
    header: BatchHeader,
    *,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    record_count: int,
) -> None:
    """Write the header of a batch rebuilt from ``header`` (base offset, last offset delta,
    leader epoch and producer fields kept) in front of its records, length and CRC last."""
    HEADER_STRUCT.pack_into(
        out,
        0,
        header.base_offset,
        len(out) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        MAGIC,
        0,  # crc, computed below over the finished bytes
        attributes,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        record_count,
    )
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))


def build_retained_batch(
    batch: RecordBatch,
    data: Buffer,
    retained: Sequence[RecordSpan],
    *,
    delete_horizon_ms: int | None = None,
    compression_level: int | None = None,
) -> bytearray:
    """``batch`` with only the ``retained`` records, as a log cleaner rewrites it.

    ``data`` is the batch's record bytes (decompressed) and ``retained`` spans into it, in
    order. Kept as they were: base offset, last offset delta (so the producer's last
    sequence survives, as Kafka's cleaner keeps it), partition leader epoch, producer id,
    epoch, base sequence, the transactional and control bits, the timestamp type and the
    codec (the records are compressed again with it). Recomputed: record count, max
    timestamp (under CreateTime, from the retained records), length and CRC. A retained
    record's bytes are copied as they are unless ``delete_horizon_ms`` is given: then the
    delete-horizon attribute bit is set and the base timestamp field holds the horizon
    (KIP-534), so each record's timestamp delta is encoded again against it, keeping its
    absolute timestamp. No record retained: an empty batch (count 0, no record bytes,
    base and max timestamp the original max), the header a producer's state needs.
    """
    header = batch.header()
    attributes = header.attributes
    codec = Compression(attributes & COMPRESSION_MASK)
    log_append_time = bool(attributes & TIMESTAMP_TYPE_BIT)
    old_base_timestamp = header.base_timestamp
    base_timestamp = old_base_timestamp
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
        base_timestamp = delete_horizon_ms
    out = bytearray(HEADER_SIZE)
    max_timestamp = header.max_timestamp
    if not retained:
        attributes &= ~COMPRESSION_MASK
        base_timestamp = max_timestamp
    else:
        records = bytearray()
        view = memoryview(data)
        shift = old_base_timestamp - base_timestamp
        newest = NO_TIMESTAMP
        for span in retained:
            if not log_append_time:
                timestamp = old_base_timestamp + span.timestamp_delta
                if timestamp > newest:
                    newest = timestamp
            if shift == 0:
                records += view[span.start : span.end]
                continue
            body = bytearray(b"\x00")  # record attributes: unused by v2
            write_varlong(body, span.timestamp_delta + shift)
            body += view[span.body : span.end]
            write_varint(records, len(body))
            records += body
        if not log_append_time:
            max_timestamp = newest
        if codec == Compression.NONE:
            out += records
        else:
            out += compress(codec, records, level=compression_level)
    _seal(
        out,
        header,
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        record_count=len(retained),
    )
    return out


def build_control_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """A transaction marker: a transactional control batch with one COMMIT or ABORT record.

    Key: version int16 (0) and type int16. Value: version int16 (0) and the transaction
    coordinator's epoch int32. Markers carry no sequence number.
    """
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"{control_type!r} is not a transaction marker")
    builder = BatchBuilder(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )
    builder.append(
        CONTROL_KEY.pack(CONTROL_KEY_VERSION, int(control_type)),
        END_TXN_MARKER.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
        (),
        timestamp,
    )
    return builder.build()
