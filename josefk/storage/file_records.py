"""FileRecords: the .log file of a segment, a plain concatenation of v2 record batches.

Owns the file I/O of .log files: appending batches, slicing without reading (the broker hands
a ``FileSlice`` to ``os.sendfile``), scanning batches in large chunks, truncating, flushing,
renaming and deleting. Imports ``josefk.records`` and ``josefk.storage.errors`` only; never
josefk.protocol or josefk.broker.

Byte layout of a .log file::

    position 0            batch 0 (LOG_OVERHEAD + batch_length bytes, see records/batch.py)
    position size(b0)     batch 1
    ...                   ... up to ``size_in_bytes``; nothing else: no header, no footer

The file holds the batches byte for byte as the producer sent them (with the broker-owned
fields set), which is why Kafka's own tools read josefk's files and the other way round.
When ``preallocate`` is on, the file is grown to its final size up front and the bytes past
``size_in_bytes`` are zeros until written; ``trim`` cuts them off when the segment closes.

Concurrency: one writer; an asyncio task must not await between a write and the size
update (nothing here awaits). Reads (``read_into``, ``batches_from``, slices) use ``pread``
and may run in a worker thread alongside appends, as they never look past the size they read.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

from josefk.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    RecordBatch,
)
from josefk.records.errors import RecordsError
from josefk.records.record import iter_records
from josefk.storage.errors import CorruptRecordsError, KafkaStorageError, StorageError

# Reading batches 4 MiB at a time keeps the syscalls per batch far below one for the usual
# 16 KiB to 1 MiB batches, while a chunk still fits comfortably in L2/L3-friendly sizes.
DEFAULT_READ_CHUNK: Final = 4 * 1024 * 1024
# Header scans start from an index entry, at most index.interval.bytes (4 KiB by default)
# before the batch sought: 8 KiB usually covers it in one read.
HEADER_SCAN_CHUNK: Final = 8 * 1024
# base_offset, batch_length, last_offset_delta (at 23) and max_timestamp (at 35).
_SEARCH_FIELDS: Final = struct.Struct(">qi11xi8xq")
_INT32: Final = struct.Struct(">i")
NO_TIMESTAMP: Final = -1


@dataclass(frozen=True, slots=True)
class FileSlice:
    """A byte range of a .log file, not yet read: what a fetch sends with ``os.sendfile``.

    ``fd`` is the open descriptor of the FileRecords (valid while the segment is open; a
    segment renamed to .deleted keeps it valid until ``file.delete.delay.ms`` passes).
    """

    path: Path
    fd: int
    position: int
    size: int

    def read(self) -> bytes:
        """The bytes of the slice (tools and tests; the fetch path uses sendfile instead)."""
        return os.pread(self.fd, self.size, self.position) if self.size else b""

    def __len__(self) -> int:
        return self.size

    def uses_codec(self, codec: int) -> bool:
        """Whether a whole batch of the slice is compressed with ``codec``: reads each
        batch's length and attributes only (a fetch before v10 may not carry zstd)."""
        header = ATTRIBUTES_OFFSET + 2
        position = 0
        while position + header <= self.size:
            head = os.pread(self.fd, header, self.position + position)
            if len(head) < header:
                break
            if head[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK == codec:
                return True
            length = int.from_bytes(head[BATCH_LENGTH_OFFSET : BATCH_LENGTH_OFFSET + 4], "big")
            position += LOG_OVERHEAD + length
        return False


class FileBatch(NamedTuple):
    """A batch found in a .log file and the file position where it starts."""

    position: int
    batch: RecordBatch


class BatchPosition(NamedTuple):
    """A batch's place and the header fields a search needs, read without its body."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


class LogOffsetPosition(NamedTuple):
    """Where a batch is: its last offset, its file position and its size in bytes."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """A ListOffsets answer: the timestamp that matched, its offset and the batch's leader
    epoch (-1 when unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int = -1


class FileRecords:
    """The .log file of one segment.

    ``size_in_bytes`` counts the bytes of whole batches written so far; appends go there with
    ``pwrite`` (not O_APPEND) so that a preallocated file works the same way.
    """

    def __init__(self, path: str | Path, fd: int, size: int, *, preallocate: bool = False) -> None:
        # Kept as given and made a Path on first use: start-up opens tens of thousands of
        # segments, and building Path objects was most of the cost of opening one.
        self._path: str | Path = path
        self._fd = fd
        self._size = size
        self._preallocate = preallocate
        self._closed = False

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
        mutable: bool = True,
    ) -> FileRecords:
        """Open (creating if needed) a .log file.

        An existing file's size is its length on disk, unless the file was just created and
        preallocated to ``init_file_size``, when it is 0 (as Kafka does). A preallocated file
        left by a crash is full of zeros past the last batch; recovery truncates them.
        """
        file_path = path if isinstance(path, (str, Path)) else Path(path)
        flags = (os.O_RDWR | os.O_CREAT) if mutable else os.O_RDONLY
        try:
            fd = os.open(file_path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise KafkaStorageError(f"cannot open log file: {e}", path=file_path) from e
        try:
            length = os.fstat(fd).st_size
            if preallocate and mutable and not file_already_exists and length == 0:
                if init_file_size > 0:
                    _grow(fd, init_file_size)
                size = 0
            else:
                size = length
        except OSError as e:
            os.close(fd)
            raise KafkaStorageError(f"cannot size log file: {e}", path=file_path) from e
        return cls(file_path, fd, size, preallocate=preallocate)

    # -- properties ------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        path = self._path
        if not isinstance(path, Path):
            path = self._path = Path(path)
        return path

    @property
    def fd(self) -> int:
        return self._fd

    def size_in_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return self._closed

    def last_modified_ms(self) -> int:
        try:
            return os.stat(self._path).st_mtime_ns // 1_000_000
        except OSError as e:
            raise KafkaStorageError(f"cannot stat log file: {e}", path=self._path) from e

    def set_last_modified_ms(self, timestamp_ms: int) -> None:
        ns = timestamp_ms * 1_000_000
        try:
            os.utime(self._path, ns=(ns, ns))
        except OSError as e:
            raise KafkaStorageError(f"cannot touch log file: {e}", path=self._path) from e

    # -- writing ---------------------------------------------------------------------------

    def append(self, records: memoryview | bytes | bytearray) -> int:
        """Write ``records`` (whole batches) at the end; returns the bytes written.

        Size policy (``segment.bytes``, ``max.message.bytes``) belongs to the Log; here only
        the 2 GiB limit of int32 positions is enforced. KafkaStorageError on an I/O error.
        """
        view = records if isinstance(records, memoryview) else memoryview(records)
        total = view.nbytes
        if total == 0:
            return 0
        if self._size + total > 0x7FFFFFFF:
            # Positions are int32 in the offset index; Kafka refuses such appends too.
            raise StorageError(
                f"append of {total} bytes would make the segment larger than 2 GiB "
                f"(size {self._size})",
                path=self._path,
            )
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        position, written = self._size, 0
        try:
            while written < total:
                n = os.pwrite(self._fd, view[written:], position + written)
                if n == 0:
                    raise OSError(errno.EIO, "pwrite wrote nothing")
                written += n
        except OSError as e:
            raise KafkaStorageError(f"cannot append to log file: {e}", path=self._path) from e
        self._size += total
        return total

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size`` bytes (a batch boundary); returns bytes removed."""
        if target_size < 0 or target_size > self._size:
            raise StorageError(
                f"cannot truncate to {target_size}: size is {self._size}", path=self._path
            )
        removed = self._size - target_size
        try:
            # A preallocated file is cut too: recovery's truncation must leave no garbage.
            if removed or os.fstat(self._fd).st_size != target_size:
                os.ftruncate(self._fd, target_size)
        except OSError as e:
            raise KafkaStorageError(f"cannot truncate log file: {e}", path=self._path) from e
        self._size = target_size
        return removed

    def trim(self) -> None:
        """Drop the preallocated zeros past the last batch (when the segment stops growing)."""
        try:
            if os.fstat(self._fd).st_size != self._size:
                os.ftruncate(self._fd, self._size)
        except OSError as e:
            raise KafkaStorageError(f"cannot trim log file: {e}", path=self._path) from e

    def flush(self) -> None:
        """fsync the file (data and metadata, since the size changed)."""
        try:
            os.fsync(self._fd)
        except OSError as e:
            raise KafkaStorageError(f"cannot fsync log file: {e}", path=self._path) from e

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._preallocate:
                self.trim()
        finally:
            try:
                os.close(self._fd)
            except OSError as e:
                raise KafkaStorageError(f"cannot close log file: {e}", path=self._path) from e

    def close_handlers(self) -> None:
        """Close the descriptor without trimming (the log dir is going offline)."""
        if not self._closed:
            self._closed = True
            try:
                os.close(self._fd)
            except OSError:
                pass

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Rename the file (for example to add .deleted); the open descriptor stays valid."""
        new_path = Path(path)
        try:
            os.replace(self._path, new_path)
        except OSError as e:
            raise KafkaStorageError(
                f"cannot rename log file to {new_path}: {e}", path=self._path
            ) from e
        self._path = new_path

    def delete_if_exists(self) -> bool:
        """Close and remove the file; False if it was already gone."""
        self.close_handlers()
        try:
            os.unlink(self._path)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise KafkaStorageError(f"cannot delete log file: {e}", path=self._path) from e
        return True

    # -- reading ---------------------------------------------------------------------------

    def slice(self, position: int, size: int) -> FileSlice:
        """A view of ``size`` bytes from ``position``, clipped to the end; reads nothing."""
        if position < 0:
            raise StorageError(f"invalid slice position {position}", path=self._path)
        if size < 0:
            raise StorageError(f"invalid slice size {size}", path=self._path)
        end = min(self._size, position + size)
        return FileSlice(self.path, self._fd, min(position, self._size), max(0, end - position))

    def read(self, position: int, size: int) -> bytes:
        """Read up to ``size`` bytes from ``position`` (never past the end of the batches)."""
        size = max(0, min(size, self._size - position))
        if size == 0:
            return b""
        try:
            data = os.pread(self._fd, size, position)
        except OSError as e:
            raise KafkaStorageError(f"cannot read log file: {e}", path=self._path) from e
        return data

    def read_into(self, buffer: bytearray | memoryview, position: int) -> int:
        """Fill ``buffer`` from ``position``; returns the bytes read (short at the end)."""
        view = memoryview(buffer).cast("B")
        want = max(0, min(len(view), self._size - position))
        done = 0
        try:
            while done < want:
                n = os.preadv(self._fd, [view[done:want]], position + done)
                if n == 0:
                    break
                done += n
        except OSError as e:
            raise KafkaStorageError(f"cannot read log file: {e}", path=self._path) from e
        return done

    def batches_from(
        self,
        position: int = 0,
        *,
        end: int | None = None,
        max_batch_size: int | None = None,
        chunk_size: int = DEFAULT_READ_CHUNK,
        reuse_buffer: bool = False,
    ) -> Iterator[FileBatch]:
        """Yield each whole batch from ``position`` up to ``end`` (default: the size).

        Reads ``chunk_size`` bytes at a time (more when one batch is bigger), so scanning
        costs one syscall per chunk, not per batch. Each yielded batch is a view into a
        chunk of its own (read-only bytes), valid after the iteration moves on. With
        ``reuse_buffer`` every chunk is read into one buffer instead (no fresh memory to
        fault in per chunk, which is most of the cost of a scan of a large file): a batch
        is then valid only until the iteration moves on. Recovery scans that way.

        Stops silently at an incomplete tail (a partial batch at the end). Raises
        CorruptRecordsError for a length prefix no v2 batch can have, or larger than
        ``max_batch_size`` (Kafka's check against ``max.message.bytes`` during recovery).
        Batch contents (magic, CRC) are not checked here.
        """
        limit = self._size if end is None else min(end, self._size)
        buffer = bytearray()
        unpack_length = _INT32.unpack_from
        while position < limit:
            want = min(max(chunk_size, LOG_OVERHEAD), limit - position)
            if reuse_buffer:
                if len(buffer) < want:
                    buffer = bytearray(want)
                chunk = memoryview(buffer)[: self.read_into(memoryview(buffer)[:want], position)]
            else:
                chunk = memoryview(self.read(position, want))
            offset, available = 0, len(chunk)
            while available - offset >= LOG_OVERHEAD:
                batch_length = unpack_length(chunk, offset + 8)[0]
                size = batch_length + LOG_OVERHEAD
                if batch_length < MIN_BATCH_LENGTH:
                    raise CorruptRecordsError(
                        f"batch at position {position + offset} claims batch_length "
                        f"{batch_length}, less than a v2 header",
                        path=self._path,
                        position=position + offset,
                    )
                if max_batch_size is not None and size > max_batch_size:
                    raise CorruptRecordsError(
                        f"batch at position {position + offset} has size {size}, larger than "
                        f"the largest allowed {max_batch_size}",
                        path=self._path,
                        position=position + offset,
                    )
                if offset + size > available:
                    break
                yield FileBatch(position + offset, RecordBatch(chunk[offset : offset + size]))
                offset += size
            if offset == 0:
                # Not even one whole batch in this chunk: either the tail is incomplete, or the
                # batch is bigger than a chunk and needs a read of its own size.
                if available < LOG_OVERHEAD:
                    return
                size = unpack_length(chunk, 8)[0] + LOG_OVERHEAD
                if position + size > limit:
                    return
                chunk_size = size
                continue
            position += offset

    def batch_headers_from(
        self, position: int = 0, *, end: int | None = None, chunk_size: int = HEADER_SCAN_CHUNK
    ) -> Iterator[BatchPosition]:
        """Each batch's position, size, offsets and max timestamp, reading headers only.

        Reads ``chunk_size`` bytes at a time and jumps over batch bodies that do not fit a
        chunk, so finding a batch after 1 MiB batches reads a few KiB, not the batches.
        Stops at an incomplete tail; raises CorruptRecordsError for an impossible length.
        """
        limit = self._size if end is None else min(end, self._size)
        header_size = _SEARCH_FIELDS.size
        chunk, chunk_start = b"", position
        while position < limit:
            relative = position - chunk_start
            if relative + header_size > len(chunk):
                chunk = self.read(position, min(max(chunk_size, header_size), limit - position))
                chunk_start, relative = position, 0
                if len(chunk) < header_size:
                    return  # too short for a header: an incomplete tail
            base_offset, batch_length, last_offset_delta, max_timestamp = (
                _SEARCH_FIELDS.unpack_from(chunk, relative)
            )
            if batch_length < MIN_BATCH_LENGTH:
                raise CorruptRecordsError(
                    f"batch at position {position} claims batch_length {batch_length}, less "
                    "than a v2 header",
                    path=self._path,
                    position=position,
                )
            size = batch_length + LOG_OVERHEAD
            if position + size > limit:
                return
            yield BatchPosition(
                position, size, base_offset, base_offset + last_offset_delta, max_timestamp
            )
            position += size

    def search_for_offset_with_size(
        self, target_offset: int, starting_position: int
    ) -> LogOffsetPosition | None:
        """The first batch from ``starting_position`` whose last offset is >= target.

        ``starting_position`` comes from the offset index, so the scan is short (about
        ``index.interval.bytes``) and reads headers only. None when no such batch exists.
        """
        for header in self.batch_headers_from(starting_position):
            if header.last_offset >= target_offset:
                return LogOffsetPosition(header.last_offset, header.position, header.size)
        return None

    def search_for_timestamp(
        self, target_timestamp: int, starting_position: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record with timestamp >= target and offset >= ``starting_offset``.

        Batches whose max timestamp is below the target are skipped by their header alone;
        only the batch that holds the answer has its records read.
        """
        for header in self.batch_headers_from(starting_position):
            if header.max_timestamp < target_timestamp or header.last_offset < starting_offset:
                continue
            data = self.read(header.position, header.size)
            found = _first_record_at_or_after(
                RecordBatch(memoryview(data)), target_timestamp, starting_offset
            )
            if found is not None:
                return found
        return None

    def largest_timestamp_after(self, starting_position: int) -> TimestampAndOffset:
        """The largest batch max timestamp from ``starting_position`` on, with its offset."""
        max_timestamp, offset_of_max = NO_TIMESTAMP, -1
        for header in self.batch_headers_from(starting_position, chunk_size=DEFAULT_READ_CHUNK):
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
        return TimestampAndOffset(max_timestamp, offset_of_max)

    def __repr__(self) -> str:
        return f"FileRecords(path={os.fspath(self._path)!r}, size={self._size})"


def _grow(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
    except (AttributeError, OSError):
        os.ftruncate(fd, size)


def _first_record_at_or_after(
    batch: RecordBatch, target_timestamp: int, starting_offset: int
) -> TimestampAndOffset | None:
    """The first record of ``batch`` with timestamp >= target and offset >= starting_offset.

    A batch that cannot be decoded (corrupt, or a codec that fails) answers by its header:
    its max timestamp is >= target, so its first offset at or after ``starting_offset`` is
    where a consumer must start.
    """
    epoch = batch.partition_leader_epoch
    try:
        for record in iter_records(batch):
            if record.timestamp >= target_timestamp and record.offset >= starting_offset:
                return TimestampAndOffset(record.timestamp, record.offset, epoch)
    except RecordsError:
        return TimestampAndOffset(
            batch.max_timestamp, max(batch.base_offset, starting_offset), epoch
        )
    return None
