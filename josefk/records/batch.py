"""The v2 record batch header (magic 2) as a zero-copy view, and splitting buffers of batches.

Owns the batch header layout; record bodies are handled in ``josefk.records.record``.
Imports nothing from josefk but ``records.errors``: the records of a batch are read by
``records.record.iter_records(batch)``, which builds on this module, never the other way.

Byte layout of a batch, all integers big-endian::

    offset  size  field
         0     8  base_offset
         8     4  batch_length           bytes after this field: total size = batch_length + 12
        12     4  partition_leader_epoch
        16     1  magic                  always 2 here
        17     4  crc                    CRC32C (unsigned) of bytes 21..end
        21     2  attributes             bits 0-2 compression, 3 timestamp type,
                                         4 transactional, 5 control, 6 delete horizon
        23     4  last_offset_delta
        27     8  base_timestamp
        35     8  max_timestamp
        43     8  producer_id
        51     2  producer_epoch
        53     4  base_sequence
        57     4  record_count
        61     -  records (compressed as a whole when the codec is not none)

The fields before ``attributes`` are outside the CRC, which is why the broker can assign
``base_offset`` and ``partition_leader_epoch`` in place without touching the checksum.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import Final

from crc32c import crc32c

from josefk.records.errors import CorruptRecordError, InvalidRecordError

MAGIC: Final = 2
LOG_OVERHEAD: Final = 12  # base_offset + batch_length, the part batch_length does not count
HEADER_SIZE: Final = 61
# Where each header field starts (the table in the module docstring); every module that reads
# or writes a header field by position takes its offset from here.
BASE_OFFSET_OFFSET: Final = 0
BATCH_LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PRODUCER_ID_OFFSET: Final = 43
PRODUCER_EPOCH_OFFSET: Final = 51
BASE_SEQUENCE_OFFSET: Final = 53
RECORD_COUNT_OFFSET: Final = 57
RECORDS_OFFSET: Final = HEADER_SIZE
# The smallest batch_length a header can claim: everything after batch_length up to records.
MIN_BATCH_LENGTH: Final = HEADER_SIZE - LOG_OVERHEAD

# The attribute bits (int16 at ATTRIBUTES_OFFSET).
COMPRESSION_MASK: Final = 0x07  # bits 0-2: the codec
TIMESTAMP_TYPE_BIT: Final = 0x08  # bit 3: set under LogAppendTime
TRANSACTIONAL_BIT: Final = 0x10  # bit 4
CONTROL_BIT: Final = 0x20  # bit 5: a control batch (transaction markers)
DELETE_HORIZON_BIT: Final = 0x40  # bit 6: KIP-534, base_timestamp is the delete horizon

NO_TIMESTAMP: Final = -1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

# The whole header in one unpack, fields in the order of the table above.
HEADER_STRUCT: Final = struct.Struct(">qiibIhiqqqhii")
_LENGTH_PREFIX = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
# base_offset, batch_length, partition_leader_epoch: the first 16 bytes of a header.
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_PRODUCER = struct.Struct(">qh")


class Compression(enum.IntEnum):
    """The codec named by attributes bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    """Attributes bit 3. Kafka's wire value for 'no timestamp type' is -1, never stored here."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class RecordBatch:
    """A view of one v2 batch over a memoryview of exactly its bytes; nothing is copied.

    Reading a field unpacks it from the buffer each time, so a view stays correct after the
    in-place setters run. The setters need a writable buffer (a bytearray or an mmap).
    """

    __slots__ = ("buffer",)

    def __init__(self, buffer: memoryview) -> None:
        self.buffer = buffer

    # -- header fields -------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return int(_INT64.unpack_from(self.buffer, BASE_OFFSET_OFFSET)[0])

    @property
    def batch_length(self) -> int:
        return int(_INT32.unpack_from(self.buffer, BATCH_LENGTH_OFFSET)[0])

    @property
    def size_in_bytes(self) -> int:
        return len(self.buffer)

    @property
    def partition_leader_epoch(self) -> int:
        return int(_INT32.unpack_from(self.buffer, PARTITION_LEADER_EPOCH_OFFSET)[0])

    @property
    def magic(self) -> int:
        return int(self.buffer[MAGIC_OFFSET])

    @property
    def crc(self) -> int:
        return int(_UINT32.unpack_from(self.buffer, CRC_OFFSET)[0])

    @property
    def attributes(self) -> int:
        return int(_INT16.unpack_from(self.buffer, ATTRIBUTES_OFFSET)[0])

    @property
    def compression(self) -> Compression:
        code = self.attributes & COMPRESSION_MASK
        try:
            return Compression(code)
        except ValueError:
            raise CorruptRecordError(f"unknown compression codec {code}") from None

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)

    @property
    def last_offset_delta(self) -> int:
        return int(_INT32.unpack_from(self.buffer, LAST_OFFSET_DELTA_OFFSET)[0])

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return int(_INT64.unpack_from(self.buffer, BASE_TIMESTAMP_OFFSET)[0])

    @property
    def max_timestamp(self) -> int:
        return int(_INT64.unpack_from(self.buffer, MAX_TIMESTAMP_OFFSET)[0])

    @property
    def producer_id(self) -> int:
        return int(_INT64.unpack_from(self.buffer, PRODUCER_ID_OFFSET)[0])

    @property
    def producer_epoch(self) -> int:
        return int(_INT16.unpack_from(self.buffer, PRODUCER_EPOCH_OFFSET)[0])

    @property
    def base_sequence(self) -> int:
        return int(_INT32.unpack_from(self.buffer, BASE_SEQUENCE_OFFSET)[0])

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record; sequences wrap at 2**31 as in Kafka."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)

    @property
    def record_count(self) -> int:
        return int(_INT32.unpack_from(self.buffer, RECORD_COUNT_OFFSET)[0])

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def header(self) -> BatchHeader:
        """All header fields in one unpack, for code that needs several of them."""
        return BatchHeader(*HEADER_STRUCT.unpack_from(self.buffer, 0))

    def records_buffer(self) -> memoryview:
        """The bytes after the header: the records, compressed if the codec is not none."""
        return self.buffer[HEADER_SIZE:]

    # -- checks --------------------------------------------------------------------------

    def compute_crc(self) -> int:
        return int(crc32c(self.buffer[ATTRIBUTES_OFFSET:]))

    def is_valid(self) -> bool:
        try:
            self.ensure_valid()
        except (CorruptRecordError, InvalidRecordError):
            return False
        return True

    def ensure_valid(self) -> BatchHeader:
        """Check what a reader of the log relies on: size, magic and CRC; returns the header
        (one unpack serves the checks and the caller).

        Raises CorruptRecordError naming the first thing that is wrong.
        """
        buffer = self.buffer
        size = len(buffer)
        if size < HEADER_SIZE:
            raise CorruptRecordError(f"batch of {size} bytes is shorter than a v2 header")
        header = BatchHeader(*HEADER_STRUCT.unpack_from(buffer, 0))
        batch_length = header.batch_length
        if batch_length + LOG_OVERHEAD != size:
            raise CorruptRecordError(
                f"batch_length {batch_length} does not match the {size} bytes of the batch"
            )
        if header.magic != MAGIC:
            raise CorruptRecordError(f"magic {self.magic} is not supported, only v2")
        stored, computed = header.crc, int(crc32c(buffer[ATTRIBUTES_OFFSET:]))
        if stored != computed:
            raise CorruptRecordError(
                f"CRC mismatch at base offset {header.base_offset}: "
                f"stored {stored:#010x}, computed {computed:#010x}"
            )
        attributes = header.attributes
        if attributes & COMPRESSION_MASK > Compression.ZSTD:
            raise CorruptRecordError(f"unknown compression codec {attributes & 7}")
        return header

    def ensure_valid_from_producer(self) -> BatchHeader:
        """``ensure_valid`` plus the rules Kafka applies to batches a producer sends; returns
        the header.

        A producer's batch numbers its records 0..count-1, so the count must be
        last_offset_delta + 1 (a compacted batch may have gaps, which is why the log's own
        reader does not ask this).
        """
        header = self.ensure_valid()
        count = header.record_count
        if count <= 0:
            raise InvalidRecordError(f"batch claims {count} records")
        if header.last_offset_delta != count - 1:
            raise InvalidRecordError(
                f"record count {count} disagrees with last offset delta {header.last_offset_delta}"
            )
        return header

    # -- in-place rewrite of broker-owned fields ------------------------------------------

    def set_base_offset(self, base_offset: int) -> None:
        """Assign the batch's offsets; base_offset is outside the CRC, so nothing else changes."""
        _INT64.pack_into(self.buffer, BASE_OFFSET_OFFSET, base_offset)

    def set_base_offset_and_epoch(self, base_offset: int, epoch: int) -> None:
        """``set_base_offset`` and ``set_partition_leader_epoch`` in one write (batch_length,
        between them, written back as it is): the leader does both to every batch."""
        _OFFSET_LENGTH_EPOCH.pack_into(
            self.buffer,
            BASE_OFFSET_OFFSET,
            base_offset,
            _INT32.unpack_from(self.buffer, BATCH_LENGTH_OFFSET)[0],
            epoch,
        )

    def set_partition_leader_epoch(self, epoch: int) -> None:
        _INT32.pack_into(self.buffer, PARTITION_LEADER_EPOCH_OFFSET, epoch)

    def set_max_timestamp(self, timestamp: int) -> None:
        """Write ``timestamp`` as the batch's max timestamp and recompute the CRC.

        The broker's validator does this when the header disagrees with the records (a
        client that writes 0 over records without timestamps); the timestamp type stays.
        """
        _INT64.pack_into(self.buffer, MAX_TIMESTAMP_OFFSET, timestamp)
        _UINT32.pack_into(self.buffer, CRC_OFFSET, self.compute_crc())

    def set_log_append_time(self, timestamp: int) -> None:
        """Stamp the batch with the broker's time (LogAppendTime) and recompute the CRC.

        Kafka sets the timestamp type bit and the max timestamp; readers then take every
        record's timestamp to be max_timestamp.
        """
        attributes = self.attributes | TIMESTAMP_TYPE_BIT
        _INT16.pack_into(self.buffer, ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(self.buffer, MAX_TIMESTAMP_OFFSET, timestamp)
        _UINT32.pack_into(self.buffer, CRC_OFFSET, self.compute_crc())

    def __repr__(self) -> str:
        # repr ends up in error messages about bad batches, so it must not fail on them.
        if len(self.buffer) < HEADER_SIZE:
            return f"RecordBatch(<{len(self.buffer)} bytes, shorter than a v2 header>)"
        codec = self.attributes & COMPRESSION_MASK
        name = Compression(codec).name if codec <= Compression.ZSTD else f"unknown({codec})"
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.record_count}, size={self.size_in_bytes}, "
            f"compression={name})"
        )


class BatchHeader:
    """The 61-byte header unpacked at once; a plain value, detached from the buffer."""

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    def __init__(
        self,
        base_offset: int,
        batch_length: int,
        partition_leader_epoch: int,
        magic: int,
        crc: int,
        attributes: int,
        last_offset_delta: int,
        base_timestamp: int,
        max_timestamp: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        record_count: int,
    ) -> None:
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.record_count = record_count

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD


def peek_attributes(buffer: memoryview | bytes | bytearray, position: int = 0) -> int:
    """The attributes of the batch at ``position``; 0 when the buffer is too short to hold
    them (such a buffer is refused later as a partial batch)."""
    if len(buffer) - position < ATTRIBUTES_OFFSET + 2:
        return 0
    return int(_INT16.unpack_from(buffer, position + ATTRIBUTES_OFFSET)[0])


def peek_producer(buffer: memoryview | bytes | bytearray, position: int = 0) -> tuple[int, int]:
    """(producer_id, producer_epoch) of the batch at ``position``, whose header must be whole."""
    producer_id, producer_epoch = _PRODUCER.unpack_from(buffer, position + PRODUCER_ID_OFFSET)
    return int(producer_id), int(producer_epoch)


def peek_batch_size(buffer: memoryview | bytes, position: int = 0) -> int | None:
    """Total size of the batch starting at ``position``, or None if the 12-byte prefix is cut.

    Raises CorruptRecordError when the prefix claims a length no v2 batch can have.
    """
    if len(buffer) - position < LOG_OVERHEAD:
        return None
    batch_length = int(_INT32.unpack_from(buffer, position + BATCH_LENGTH_OFFSET)[0])
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {position} claims batch_length {batch_length}, "
            f"less than the {MIN_BATCH_LENGTH} bytes of a header"
        )
    return batch_length + LOG_OVERHEAD


def split_batches(buffer: memoryview | bytes | bytearray) -> Iterator[RecordBatch]:
    """Yield a view of each whole batch in a buffer of concatenated batches.

    Stops cleanly at a truncated tail (a fetch response may end with a partial batch), and
    raises CorruptRecordError when a length prefix is impossible. Batches are not
    CRC-checked here; call ``ensure_valid`` where that matters.
    """
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    position, end = 0, len(view)
    while position < end:
        size = peek_batch_size(view, position)
        if size is None or position + size > end:
            return
        yield RecordBatch(view[position : position + size])
        position += size
