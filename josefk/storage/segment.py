"""LogSegment: one segment of a partition log, the .log file and its indexes together.

Owns the segment's files and their names, appending with sparse index entries, reading as
file slices, recovery (validate batches, rebuild indexes, truncate the invalid tail),
truncation, the roll conditions and offset/timestamp lookups within one segment. Imports
``josefk.records`` and the rest of ``josefk.storage``'s lower half (errors, file_records,
index) and ``josefk.util.clock``; never josefk.protocol, josefk.broker or josefk.metrics.

A segment of base offset B is three files in the partition directory, named by B as 20
zero-padded digits (``00000000000000012345.log`` for B = 12345)::

    <B>.log        FileRecords: v2 record batches back to back, nothing else
    <B>.index      OffsetIndex: 8-byte entries (int32 offset - B, int32 .log position)
    <B>.timeindex  TimeIndex: 12-byte entries (int64 max timestamp so far, int32 offset - B)
    <B>.txnindex   TransactionIndex: the aborted transactions whose ABORT marker is here;
                   made on its first entry, absent from most segments

plus a suffix (``.deleted``, ``.cleaned``, ``.swap``) while the segment is being removed or
replaced. Invariant: B <= every offset in the segment, and B > every offset in earlier
segments; every offset in it is <= B + 2**31 - 1 (indexes store int32 relative offsets).

Concurrency: a segment has one writer. No method awaits, so an asyncio task always sees an
append, truncation or recovery whole; recovery and flush are blocking and belong in a
worker thread while no task appends to the same segment.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from josefk.records.batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    Compression,
    RecordBatch,
)
from josefk.records.errors import RecordsError
from josefk.storage.errors import (
    CorruptRecordsError,
    IndexFullError,
    InvalidOffsetError,
    KafkaStorageError,
    LogSegmentOffsetOverflowError,
    StorageError,
)
from josefk.storage.file_records import (
    FileBatch,
    FileRecords,
    FileSlice,
    LogOffsetPosition,
    TimestampAndOffset,
)
from josefk.storage.index import (
    DEFAULT_MAX_INDEX_SIZE,
    INT32_MAX,
    NO_TIMESTAMP,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)
from josefk.storage.txn_index import TransactionIndex
from josefk.util.clock import Clock, SystemClock

__all__ = [
    "CLEANED_FILE_SUFFIX",
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "DELETED_FILE_SUFFIX",
    "INDEX_FILE_SUFFIX",
    "LOG_FILE_SUFFIX",
    "PRODUCER_SNAPSHOT_FILE_SUFFIX",
    "SWAP_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "TXN_INDEX_FILE_SUFFIX",
    "UNKNOWN_OFFSET",
    "UNKNOWN_POSITION",
    "FetchDataInfo",
    "FileSlice",
    "LogOffsetMetadata",
    "LogOffsetPosition",
    "LogSegment",
    "OffsetPosition",
    "RollParams",
    "TimestampAndOffset",
    "TimestampOffset",
    "filename_prefix_from_offset",
    "log_file",
    "offset_from_file_name",
    "offset_index_file",
    "time_index_file",
    "txn_index_file",
]

LOG_FILE_SUFFIX: Final = ".log"
INDEX_FILE_SUFFIX: Final = ".index"
TIME_INDEX_FILE_SUFFIX: Final = ".timeindex"
TXN_INDEX_FILE_SUFFIX: Final = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX: Final = ".snapshot"
DELETED_FILE_SUFFIX: Final = ".deleted"
CLEANED_FILE_SUFFIX: Final = ".cleaned"
SWAP_FILE_SUFFIX: Final = ".swap"

DEFAULT_INDEX_INTERVAL_BYTES: Final = 4096  # index.interval.bytes

# base_offset, batch_length, last_offset_delta (at 23) and max_timestamp (at 35) of a header.
_APPEND_FIELDS: Final = struct.Struct(">qi11xi8xq")
# base_offset, magic (16), crc (17), attributes (21), last_offset_delta (23), max_timestamp (35).
_RECOVERY_FIELDS: Final = struct.Struct(">q8xbIhi8xq")
# An offset index entry (relative offset, position) and a time index entry (timestamp,
# relative offset), as index.py lays them out.
_OFFSET_ENTRY: Final = struct.Struct(">ii")
_TIME_ENTRY: Final = struct.Struct(">qi")
_MAX_COMPRESSION_CODEC: Final = max(Compression)

# The "not loaded yet" value of a segment's max timestamp, distinct from NO_TIMESTAMP.
_UNKNOWN: Final = TimestampOffset(NO_TIMESTAMP, -1)


# -- file names ---------------------------------------------------------------------------


def filename_prefix_from_offset(offset: int) -> str:
    """``12345 -> '00000000000000012345'``: the 20 digits every segment file name starts with."""
    return f"{offset:020d}"


def _as_path(directory: str | os.PathLike[str]) -> Path:
    # Path(Path) re-parses every part; start-up names tens of thousands of files.
    return directory if isinstance(directory, Path) else Path(directory)


def log_file(directory: str | os.PathLike[str], offset: int, suffix: str = "") -> Path:
    return _as_path(directory) / f"{filename_prefix_from_offset(offset)}{LOG_FILE_SUFFIX}{suffix}"


def offset_index_file(directory: str | os.PathLike[str], offset: int, suffix: str = "") -> Path:
    return _as_path(directory) / f"{filename_prefix_from_offset(offset)}{INDEX_FILE_SUFFIX}{suffix}"


def time_index_file(directory: str | os.PathLike[str], offset: int, suffix: str = "") -> Path:
    name = f"{filename_prefix_from_offset(offset)}{TIME_INDEX_FILE_SUFFIX}{suffix}"
    return _as_path(directory) / name


def txn_index_file(directory: str | os.PathLike[str], offset: int, suffix: str = "") -> Path:
    name = f"{filename_prefix_from_offset(offset)}{TXN_INDEX_FILE_SUFFIX}{suffix}"
    return _as_path(directory) / name


def offset_from_file_name(name: str | os.PathLike[str]) -> int:
    """The base offset a segment file's name starts with (``'…012345.log.deleted' -> 12345``)."""
    # A bare name (as the loader lists them) needs no Path: this runs per segment file.
    base = os.path.basename(name) if isinstance(name, str) else Path(name).name
    prefix = base.split(".", 1)[0]
    if not prefix.isdigit():
        raise ValueError(f"{base!r} is not named after an offset")
    return int(prefix)


# -- values -------------------------------------------------------------------------------


UNKNOWN_OFFSET: Final = -1
UNKNOWN_POSITION: Final = -1


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """An offset plus where it is: the base offset of its segment and its byte position there.

    The position lets a fetch count the bytes between two offsets of the same segment
    (delayed fetch's min_bytes) without touching the index. ``message_offset_only`` metadata
    (segment unknown, e.g. a high watermark restored from a checkpoint) cannot be compared by
    position; the log resolves it on demand.
    """

    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = UNKNOWN_POSITION

    @property
    def message_offset_only(self) -> bool:
        return (
            self.segment_base_offset == UNKNOWN_OFFSET
            and self.relative_position_in_segment == UNKNOWN_POSITION
        )

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        """Whether this offset's segment is older than ``that``'s (both must know theirs)."""
        if self.message_offset_only or that.message_offset_only:
            raise ValueError(f"{self} cannot compare its segment with {that}")
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        if self.message_offset_only or that.message_offset_only:
            raise ValueError(f"{self} cannot compare its segment with {that}")
        return self.segment_base_offset == that.segment_base_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes from ``that`` to this offset; both must lie on the same segment."""
        if not self.on_same_segment(that):
            raise ValueError(f"{self} and {that} are on different segments")
        return self.relative_position_in_segment - that.relative_position_in_segment


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """What a read returns: where it started and the slice of the .log to send, not bytes.

    ``first_entry_incomplete`` is set when ``max_size`` cut the first batch short (a
    consumer then needs a larger fetch size, or ``min_one_message``).
    """

    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice | None
    first_entry_incomplete: bool = False

    @property
    def size(self) -> int:
        return 0 if self.records is None else self.records.size


@dataclass(frozen=True, slots=True)
class RollParams:
    """What ``should_roll`` weighs for the next append."""

    max_segment_bytes: int
    max_segment_ms: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


# -- the segment --------------------------------------------------------------------------


class LogSegment:
    """A .log file with its offset and time index.

    Build one with ``LogSegment.open``; the constructor composes existing parts.
    """

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        base_offset: int,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        rolling_jitter_ms: int = 0,
        clock: Clock | None = None,
        txn_index: TransactionIndex | None = None,
    ) -> None:
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        # Beside the .log, with the same suffix (.cleaned, .swap, .deleted) if any.
        self.txn_index = (
            txn_index
            if txn_index is not None
            else TransactionIndex(
                log.path.with_name(
                    log.path.name.replace(LOG_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX, 1)
                ),
                base_offset,
            )
        )
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.rolling_jitter_ms = rolling_jitter_ms
        self._clock: Clock = clock if clock is not None else SystemClock()
        # Creation time: the roll clock of a segment whose batches carry no timestamps.
        self.created = self._clock.milliseconds()
        # Timestamp of the first batch appended; segment.ms is measured from it.
        self._rolling_based_timestamp: int | None = None
        self._bytes_since_last_index_entry = 0
        # The largest batch max timestamp and the last offset of its batch; loaded lazily
        # from the time index so that opening a segment reads nothing.
        self._max_timestamp_and_offset_so_far = _UNKNOWN
        # Whether the last ``recover`` found a control batch (a transaction marker): only
        # then can the rebuild of its .txnindex write anything.
        self.recovered_control_batches = False

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        base_offset: int,
        *,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        rolling_jitter_ms: int = 0,
        clock: Clock | None = None,
        file_suffix: str = "",
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
    ) -> LogSegment:
        """Open the segment of ``base_offset`` in ``directory``, creating its .log if needed.

        For an existing segment (``file_already_exists``, as at start-up) only the .log is
        opened; its indexes are mapped on first use, so loading thousands of segments reads
        no index. A new segment's indexes are created and preallocated right away, so the
        directory always holds all three files.
        """
        # Plain string joins: this runs once per segment at start-up.
        prefix = os.path.join(os.fspath(directory), filename_prefix_from_offset(base_offset))
        log = FileRecords.open(
            f"{prefix}{LOG_FILE_SUFFIX}{file_suffix}",
            file_already_exists=file_already_exists,
            init_file_size=init_file_size,
            preallocate=preallocate,
        )
        segment = cls(
            log,
            OffsetIndex(f"{prefix}{INDEX_FILE_SUFFIX}{file_suffix}", base_offset, max_index_size),
            TimeIndex(
                f"{prefix}{TIME_INDEX_FILE_SUFFIX}{file_suffix}", base_offset, max_index_size
            ),
            base_offset,
            index_interval_bytes,
            rolling_jitter_ms,
            clock,
            TransactionIndex(f"{prefix}{TXN_INDEX_FILE_SUFFIX}{file_suffix}", base_offset),
        )
        if not file_already_exists:
            segment.offset_index.entries  # noqa: B018 - first use opens and preallocates
            segment.time_index.entries  # noqa: B018
        return segment

    # -- sizes and simple facts -----------------------------------------------------------

    def size(self) -> int:
        """Bytes of batches in the .log."""
        return self.log.size_in_bytes()

    @property
    def path(self) -> Path:
        return self.log.path

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise LogSegmentOffsetOverflowError(
                f"offset {offset} does not fit segment of base offset {self.base_offset} "
                f"(relative offsets are int32)",
                base_offset=self.base_offset,
                offset=offset,
                path=self.log.path,
            )

    def max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        if self._max_timestamp_and_offset_so_far is _UNKNOWN:
            # A segment closed cleanly wrote its max timestamp as the last time index entry.
            self._max_timestamp_and_offset_so_far = self.time_index.last_entry()
        return self._max_timestamp_and_offset_so_far

    def max_timestamp_so_far(self) -> int:
        return self.max_timestamp_and_offset_so_far().timestamp

    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        return self.max_timestamp_and_offset_so_far().offset

    def largest_timestamp(self) -> int:
        """The largest record timestamp in the segment, or the .log's mtime if it has none.

        Retention by ``retention.ms`` compares against this.
        """
        max_timestamp = self.max_timestamp_so_far()
        if max_timestamp >= 0:
            return max_timestamp
        return self.log.last_modified_ms()

    def last_modified(self) -> int:
        return self.log.last_modified_ms()

    def set_last_modified(self, timestamp_ms: int) -> None:
        self.log.set_last_modified_ms(timestamp_ms)

    # -- append ---------------------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        shallow_offset_of_max_timestamp: int,
        records: memoryview | bytes | bytearray,
    ) -> None:
        """Append whole batches whose offsets are already assigned.

        ``largest_offset`` (the last offset of the last batch) is checked to fit the segment
        (LogSegmentOffsetOverflowError otherwise; nothing is written). Index entries are
        placed per batch, as recovery places them, so a recovered segment gets byte-identical
        indexes: an offset index entry (the batch's last offset, its position) for the first
        batch after more than ``index_interval_bytes`` without one, with a time index entry
        for the max timestamp so far when it grew. ``largest_timestamp`` and
        ``shallow_offset_of_max_timestamp`` describe the whole append (as Kafka's signature
        has them); the per-batch headers give the same facts batch by batch.
        """
        view = records if isinstance(records, memoryview) else memoryview(records)
        total = view.nbytes
        if total == 0:
            return
        # Walk the headers before writing anything, so that a malformed buffer leaves the
        # segment untouched: one unpack per batch, no per-record work.
        batches: list[tuple[int, int, int]] = []  # (size, last offset, max timestamp)
        position = 0
        while position < total:
            if total - position < HEADER_SIZE:
                raise CorruptRecordsError(
                    f"append of {total} bytes ends with {total - position} bytes that are not "
                    "a whole batch",
                    path=self.log.path,
                )
            base_offset, batch_length, last_offset_delta, max_timestamp = (
                _APPEND_FIELDS.unpack_from(view, position)
            )
            size = batch_length + LOG_OVERHEAD
            if size < HEADER_SIZE or position + size > total:
                raise CorruptRecordsError(
                    f"batch at {position} of the append claims {size} bytes of {total}",
                    path=self.log.path,
                )
            batches.append((size, base_offset + last_offset_delta, max_timestamp))
            position += size
        log = self.log
        physical_position = log.size_in_bytes()
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        self._ensure_offset_in_range(largest_offset)
        log.append(view)
        max_so_far = self._max_timestamp_and_offset_so_far
        if max_so_far is _UNKNOWN:
            max_so_far = self.max_timestamp_and_offset_so_far()
        interval = self.index_interval_bytes
        since = self._bytes_since_last_index_entry
        for size, last_offset, max_timestamp in batches:
            if max_timestamp > max_so_far.timestamp:
                max_so_far = TimestampOffset(max_timestamp, last_offset)
                self._max_timestamp_and_offset_so_far = max_so_far
            if since > interval:
                self.offset_index.append(last_offset, physical_position)
                self.time_index.maybe_append(max_so_far.timestamp, max_so_far.offset)
                since = 0
            physical_position += size
            since += size
        self._bytes_since_last_index_entry = since
        if largest_timestamp > max_so_far.timestamp:
            # Only when the caller knows better than the headers (it never should for v2).
            self._max_timestamp_and_offset_so_far = TimestampOffset(
                largest_timestamp, shallow_offset_of_max_timestamp
            )

    # -- read -----------------------------------------------------------------------------

    def translate_offset(
        self, offset: int, starting_file_position: int = 0
    ) -> LogOffsetPosition | None:
        """The batch holding ``offset`` (or the first after it): its last offset, position, size.

        The offset index gives a position at most ``index_interval_bytes`` before it; a
        short scan of batch headers does the rest. None when the segment ends before it.
        """
        mapping = self.offset_index.lookup(offset)
        return self.log.search_for_offset_with_size(
            offset, max(mapping.position, starting_file_position)
        )

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Slice the .log from the batch holding ``start_offset``, never reading bytes.

        At most ``max_size`` bytes and never past ``max_position`` (default: the size; the
        Log passes the high watermark's position for consumers). With ``min_one_message``
        the first batch is returned whole even if larger than ``max_size`` (KIP-74), so a
        consumer never starves. None when ``start_offset`` is past the segment's end.

        Example: batches at positions 0 (offsets 0-9, 100 bytes) and 100 (offsets 10-19,
        100 bytes); read(15, 150) starts at position 100 and returns 100 bytes, the batch
        holding offset 15 whole; the client skips offsets 10-14 itself.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a read of {self.log.path}")
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        start_position = start.position
        offset_metadata = LogOffsetMetadata(start_offset, self.base_offset, start_position)
        adjusted_max_size = max(max_size, start.size) if min_one_message else max_size
        if adjusted_max_size == 0:
            return FetchDataInfo(offset_metadata, self.log.slice(start_position, 0))
        if max_position is None:
            max_position = self.size()
        fetch_size = max(0, min(max_position - start_position, adjusted_max_size))
        return FetchDataInfo(
            offset_metadata,
            self.log.slice(start_position, fetch_size),
            first_entry_incomplete=adjusted_max_size < start.size,
        )

    def batches(self, position: int = 0) -> Iterator[FileBatch]:
        """Every batch from ``position`` (headers not validated)."""
        return self.log.batches_from(position)

    def read_next_offset(self) -> int:
        """The offset after the last batch: scans the headers from the last offset index
        entry's batch (which holds that entry's offset) to the end of the .log. A parked
        index gives its last entry without mapping (start-up asks every log this)."""
        next_offset = self.base_offset
        for header in self.log.batch_headers_from(self.offset_index.last_entry().position):
            next_offset = header.last_offset + 1
        return next_offset

    def has_overflow(self) -> bool:
        """Whether the .log holds an offset the indexes could not store (left by old bugs)."""
        next_offset = self.read_next_offset()
        return next_offset > self.base_offset and not self.can_convert_to_relative_offset(
            next_offset - 1
        )

    # -- lookups by time ------------------------------------------------------------------

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with a timestamp >= ``timestamp``.

        The time index narrows the scan to the batches after its largest entry <= target.
        """
        if starting_offset is None:
            starting_offset = self.base_offset
        time_entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(time_entry.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """How long this segment has been filling, for ``segment.ms``.

        Measured from the first batch's timestamp when there is one (so a restart does not
        reset the clock), else from the segment's creation.
        """
        self._load_first_batch_timestamp()
        first = self._rolling_based_timestamp
        if first is not None and first >= 0:
            return message_timestamp - first
        return now - self.created

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            for header in self.log.batch_headers_from(0):
                self._rolling_based_timestamp = header.max_timestamp
                break

    def get_first_batch_timestamp(self) -> int:
        """The first batch's max timestamp, or Long.MAX_VALUE when the segment is empty."""
        self._load_first_batch_timestamp()
        first = self._rolling_based_timestamp
        if first is not None and first >= 0:
            return first
        return (1 << 63) - 1

    # -- rolling --------------------------------------------------------------------------

    def should_roll(self, params: RollParams) -> bool:
        """Whether the Log must roll a new segment before appending.

        True when the append would pass ``max_segment_bytes``; when the segment is not empty
        and has been filling longer than ``segment.ms`` minus this segment's jitter; when an
        index is full; or when the append's last offset would not fit a relative int32.
        """
        return self.should_roll_for(
            params.max_segment_bytes,
            params.max_segment_ms,
            params.max_timestamp_in_messages,
            params.max_offset_in_messages,
            params.messages_size,
            params.now,
        )

    def should_roll_for(
        self,
        max_segment_bytes: int,
        max_segment_ms: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        messages_size: int,
        now: int,
    ) -> bool:
        """``should_roll`` with the parameters given one by one: the append path asks it for
        every append, and a produce spread over thousands of partitions appends thousands
        of times per request."""
        size = self.log.size_in_bytes()
        return (
            size > max_segment_bytes - messages_size
            or (
                size > 0
                and self.time_waited_for_roll(now, max_timestamp_in_messages)
                > max_segment_ms - self.rolling_jitter_ms
            )
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not 0 <= max_offset_in_messages - self.base_offset <= INT32_MAX
        )

    def on_becoming_inactive_segment(self) -> None:
        """Called when a newer segment takes over: write the roll entry, trim files."""
        self._append_roll_entry(self.max_timestamp_and_offset_so_far())
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()

    def _append_roll_entry(self, max_so_far: TimestampOffset) -> None:
        """Write the segment's max timestamp as the time index's last entry if it is new.

        The time index keeps a slot for it, but a trimmed index (a segment reopened and not
        resized) has none; grow it by one entry rather than fail a close.
        """
        time_index = self.time_index
        if max_so_far.timestamp <= time_index.last_entry().timestamp:
            return
        if time_index.entries >= time_index.max_entries:
            time_index.resize((time_index.entries + 1) * time_index.ENTRY_SIZE)
        time_index.maybe_append(max_so_far.timestamp, max_so_far.offset, skip_full_check=True)

    def resize_indexes(self, size: int) -> None:
        """Give the indexes room again (the last segment after loading becomes active)."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def sanity_check(self, time_index_file_newly_created: bool = False) -> None:
        """Raise CorruptIndexError if an index is unusable; the caller then recovers.

        A missing .index means the segment was never indexed; raises StorageError.
        """
        if not self.offset_index.path.exists():
            raise StorageError("offset index file does not exist", path=self.offset_index.path)
        if time_index_file_newly_created:
            self.time_index.reset()
        # Read, not mapped: the load hands the indexes over parked (see
        # ``AbstractIndex.sanity_check_unmapped``).
        self.offset_index.sanity_check_unmapped()
        self.time_index.sanity_check_unmapped()

    def check_files_agree(self) -> str | None:
        """Whether the .log and its indexes agree, cheaply; what is wrong, or None.

        Run at load for every segment, whatever the clean-shutdown marker says: a file cut
        short while the broker was down (a disk or copy accident) leaves indexes pointing
        past the end of the .log, or a .log ending inside a batch, and the segment would
        otherwise be served as if it ended before its last index entry. Reads the last entry
        of each index (without mapping the files) and the batch headers from the offset
        index's last entry to the end of the .log (about ``index.interval.bytes``; from the
        start when the index is empty): the batch there must hold the entry's offset, the
        headers must end exactly at the end of the file, and the time index's last entry
        must not name an offset past the last batch. CRCs are not checked here (recovery
        does that). The caller recovers a segment that fails.
        """
        size = self.log.size_in_bytes()
        entry = self.offset_index.peek_last_entry()
        start = 0
        if entry is not None:
            if entry.position >= size:
                return (
                    f"the last offset index entry points at position {entry.position}, "
                    f"past the end of the {size}-byte log"
                )
            start = entry.position
        end, last_offset = start, self.base_offset - 1
        try:
            for header in self.log.batch_headers_from(start):
                if (
                    end == start
                    and entry is not None
                    and not (header.base_offset <= entry.offset <= header.last_offset)
                ):
                    return (
                        f"the last offset index entry names offset {entry.offset} at position "
                        f"{entry.position}, where the log holds offsets "
                        f"{header.base_offset}..{header.last_offset}"
                    )
                end = header.position + header.size
                last_offset = header.last_offset
        except (CorruptRecordsError, RecordsError) as exc:
            return f"the log's batches after position {start} are unreadable: {exc}"
        if end != size:
            return (
                f"the log does not end on a batch boundary: its last whole batch ends at "
                f"position {end} of {size} bytes"
            )
        time_entry = self.time_index.peek_last_entry()
        if time_entry is not None and time_entry.offset > last_offset:
            return (
                f"the last time index entry names offset {time_entry.offset}, past the log's "
                f"last offset {last_offset}"
            )
        return None

    # -- recovery and truncation -------------------------------------------------------------

    def recover(
        self,
        max_message_size: int,
        on_batch: Callable[[RecordBatch], None] | None = None,
    ) -> int:
        """Rebuild the indexes from the .log and cut the invalid tail; returns bytes cut.

        Every batch is validated (size, magic, CRC, size <= ``max_message_size``, offsets
        increasing from the base offset and in range); the first invalid or incomplete batch
        ends the valid prefix. Index entries are placed exactly as ``append`` places them.
        ``on_batch`` sees each valid batch in order (producer state, leader epoch cache); the
        batch's view is only valid during the call. A LogSegmentOffsetOverflowError is
        raised, not swallowed: such a segment must be split by the Log.

        Example: batches of 5000 bytes at positions 0, 5000, 10000 and garbage from 15000
        to 15100 with index.interval.bytes 4096: the index gets entries for the batches at
        5000 and 10000, and recover returns 100.
        """
        # The entries are gathered here and written once at the end (``rewrite``), not
        # through the indexes' maps: the old files were left preallocated by the crash, and
        # mapping them, reading their last slot (a hole), resetting, trimming and growing
        # them again cost about 2 ms of page faults and ftruncates per segment, most of a
        # 10,000-partition restart after SIGKILL. The capacity checks are the maps' own.
        offset_index, time_index = self.offset_index, self.time_index
        offset_capacity = offset_index.max_index_size // OffsetIndex.ENTRY_SIZE
        # The time index keeps its last slot for the roll entry (TimeIndex.is_full).
        time_capacity = time_index.max_index_size // TimeIndex.ENTRY_SIZE - 1
        offset_entries = bytearray()
        time_entries = bytearray()
        offset_count = time_count = 0
        last_indexed_timestamp = NO_TIMESTAMP
        base = self.base_offset
        pack_offset_entry = _OFFSET_ENTRY.pack
        pack_time_entry = _TIME_ENTRY.pack
        # Rebuilt by the Log from the producer state it replays over this segment.
        self.txn_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, -1
        self._max_timestamp_and_offset_so_far = TimestampOffset(NO_TIMESTAMP, -1)
        control_batches = False
        try:
            next_offset = self.base_offset
            for position, batch in self.log.batches_from(
                0, max_batch_size=max_message_size, reuse_buffer=True
            ):
                # RecordBatch.ensure_valid's checks from one header unpack (this loop runs
                # 65,536 times for a 1 GiB segment of 16 KiB batches). The size is right by
                # construction: batches_from cut the view at batch_length + 12.
                (base_offset, magic, stored_crc, attributes, last_offset_delta, max_ts) = (
                    _RECOVERY_FIELDS.unpack_from(batch.buffer)
                )
                if magic != MAGIC:
                    raise CorruptRecordsError(
                        f"batch at position {position} has magic {magic}, only v2 is supported",
                        path=self.log.path,
                        position=position,
                    )
                if batch.compute_crc() != stored_crc:
                    raise CorruptRecordsError(
                        f"batch at position {position} fails its CRC", path=self.log.path
                    )
                if attributes & COMPRESSION_MASK > _MAX_COMPRESSION_CODEC:
                    raise CorruptRecordsError(
                        f"batch at position {position} names compression codec "
                        f"{attributes & COMPRESSION_MASK}",
                        path=self.log.path,
                    )
                last_offset = base_offset + last_offset_delta
                # base_offset is outside the CRC, so check it is plausible: offsets only grow.
                if base_offset < next_offset or last_offset < base_offset:
                    raise InvalidOffsetError(
                        f"batch at position {position} has offsets {base_offset}..{last_offset}"
                        f" below the next expected offset {next_offset}",
                        path=self.log.path,
                    )
                self._ensure_offset_in_range(last_offset)
                next_offset = last_offset + 1
                if attributes & CONTROL_BIT:
                    control_batches = True
                if max_ts > max_timestamp:
                    max_timestamp, offset_of_max_timestamp = max_ts, last_offset
                if valid_bytes - last_index_entry > self.index_interval_bytes:
                    # As OffsetIndex.append and TimeIndex.maybe_append would place them;
                    # offsets and timestamps only grow here, so their order checks hold.
                    if offset_count >= offset_capacity:
                        raise IndexFullError(
                            f"attempt to append to a full offset index ({offset_count} entries)",
                            path=offset_index.path,
                        )
                    offset_entries += pack_offset_entry(last_offset - base, valid_bytes)
                    offset_count += 1
                    if time_count >= time_capacity:
                        raise IndexFullError(
                            f"attempt to append to a full time index ({time_count} entries)",
                            path=time_index.path,
                        )
                    if max_timestamp > last_indexed_timestamp:
                        time_entries += pack_time_entry(
                            max_timestamp, offset_of_max_timestamp - base
                        )
                        time_count += 1
                        last_indexed_timestamp = max_timestamp
                    last_index_entry = valid_bytes
                valid_bytes = position + batch.size_in_bytes
                if on_batch is not None:
                    on_batch(batch)  # the view is reused after the call returns
        except (CorruptRecordsError, InvalidOffsetError, RecordsError):
            pass  # the valid prefix ends here; everything after it is cut below
        truncated = self.log.size_in_bytes() - valid_bytes
        self.log.truncate_to(valid_bytes)
        self.recovered_control_batches = control_batches
        self._max_timestamp_and_offset_so_far = TimestampOffset(
            max_timestamp, offset_of_max_timestamp
        )
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        self._rolling_based_timestamp = None
        # A segment closed cleanly ends its time index with its max timestamp (the roll
        # entry, ``_append_roll_entry``); do the same.
        if max_timestamp > last_indexed_timestamp:
            time_entries += pack_time_entry(max_timestamp, offset_of_max_timestamp - base)
        # Both files trimmed to their entries and left unmapped (parked, counts known).
        offset_index.rewrite(bytes(offset_entries))
        time_index.rewrite(bytes(time_entries))
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset``; returns bytes removed.

        Works at batch granularity: the batch holding ``offset`` goes whole (its offsets
        below ``offset`` too), as Kafka's truncation does; the Log truncates at batch
        boundaries. An offset past the end removes nothing. The indexes get their
        preallocated room back, as the segment becomes (or stays) the active one.
        """
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        bytes_truncated = 0 if mapping is None else self.log.truncate_to(mapping.position)
        if self.log.size_in_bytes() == 0:
            self.created = self._clock.milliseconds()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far() >= 0:
            self._load_largest_timestamp()
        return bytes_truncated

    def _load_largest_timestamp(self) -> None:
        """Reload the max timestamp from the time index and the batches after its last entry."""
        last_time_entry = self.time_index.last_entry()
        self._max_timestamp_and_offset_so_far = last_time_entry
        position = self.offset_index.lookup(last_time_entry.offset).position
        after = self.log.largest_timestamp_after(position)
        if after.timestamp > last_time_entry.timestamp:
            self._max_timestamp_and_offset_so_far = TimestampOffset(after.timestamp, after.offset)

    # -- durability and lifecycle ---------------------------------------------------------

    def flush(self) -> None:
        """fsync the .log and both indexes (blocking: run it in a worker thread)."""
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Write the roll entry (if the max timestamp is known), trim and close every file."""
        try:
            if self._max_timestamp_and_offset_so_far is not _UNKNOWN:
                self._append_roll_entry(self._max_timestamp_and_offset_so_far)
        finally:
            self.offset_index.close()
            self.time_index.close()
            self.txn_index.close()
            self.log.close()

    def close_handlers(self) -> None:
        """Release descriptors and maps without writing (the log dir went offline)."""
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.txn_index.close_handler()
        self.log.close_handlers()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all files, e.g. ("", ".deleted") before asynchronous deletion."""

        def renamed(path: Path) -> Path:
            name = path.name
            if old_suffix and name.endswith(old_suffix):
                name = name[: -len(old_suffix)]
            return path.with_name(name + new_suffix)

        self.log.rename_to(renamed(self.log.path))
        self.offset_index.rename_to(renamed(self.offset_index.path))
        self.time_index.rename_to(renamed(self.time_index.path))
        self.txn_index.rename_to(renamed(self.txn_index.path))

    def has_suffix(self, suffix: str) -> bool:
        return self.log.path.name.endswith(suffix)

    def delete_if_exists(self) -> None:
        """Delete the files (blocking: large files take time; run in a worker thread)."""
        errors: list[KafkaStorageError] = []
        for delete in (
            self.log.delete_if_exists,
            self.offset_index.delete_if_exists,
            self.time_index.delete_if_exists,
            self.txn_index.delete_if_exists,
        ):
            try:
                delete()
            except KafkaStorageError as e:
                errors.append(e)
        if errors:
            raise errors[0]

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, size={self.size()}, "
            f"path={str(self.log.path)!r})"
        )
