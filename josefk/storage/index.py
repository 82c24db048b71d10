"""The sparse indexes of a segment: OffsetIndex (.index) and TimeIndex (.timeindex).

Owns the byte layout and the mmap handling of both index files. Imports only
``josefk.storage.errors`` and ``josefk.fileio`` (the maps); never josefk.records,
josefk.protocol or josefk.broker.

Both files are arrays of fixed-size big-endian entries, preallocated to ``max_index_size``
rounded down to a whole number of entries (sparse zeros on disk) while their segment is
active, and trimmed to exactly ``entries * entry_size`` bytes when it stops being active or
closes. That is why opening an existing file counts its entries from its length. Nothing is
checksummed: an index found wrong after a crash is rebuilt from the .log by recovery.

.index (OffsetIndex), 8 bytes per entry::

    offset  size  field
         0     4  relative_offset   int32: offset - base_offset of the *last* offset of a batch
         4     4  position          int32: file position in the .log where that batch starts

.timeindex (TimeIndex), 12 bytes per entry::

    offset  size  field
         0     8  timestamp         int64: the largest timestamp seen in the segment so far
         8     4  relative_offset   int32: offset - base_offset of the batch holding it

Entries strictly increase in offset (both files) and in timestamp (.timeindex).

Indexes open lazily: building the object touches nothing on disk, the first use opens and
maps the file. A broker with 10,000 segments thus maps only the ones it reads.

Maps come from ``josefk.fileio.map_file``: with the C extension a map holds no file
descriptor (as the JVM's maps that Kafka's indexes use); without it, Python's mmap keeps a
duplicate descriptor per map, so 10,000 active segments would hold 20,000 descriptors for
their two indexes besides the 10,000 of their .log files. Either way maps are bounded
process-wide (``set_index_map_limit``: the broker derives the bound from
``vm.max_map_count``, or from the open file limit when maps hold descriptors). Past the
limit, the index mapped longest ago
is *parked*: unmapped without trimming, its entry count kept, and mapped again on its next
read or write of entries (an open, an fstat and an mmap; nothing is read); its counts
(``entries``, ``is_full``, which every append asks) are answered without mapping it. Only the thread that set the limit (the
broker's event loop) parks indexes, and only indexes it opened itself, so an index in use by
a worker thread (the cleaner's output, a flush) is never unmapped under it.

Concurrency: single writer; a method never awaits, so an asyncio task sees each append,
truncation or resize whole. Lookups may run in a worker thread while the loop appends (as in
Kafka, a reader sees a consistent prefix because ``_entries`` grows after the bytes land).
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import threading
from pathlib import Path
from typing import ClassVar, Final, NamedTuple, cast

from josefk.fileio import map_file
from josefk.storage.errors import (
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
    KafkaStorageError,
    PartitionIoError,
)

NO_TIMESTAMP: Final = -1
INT32_MAX: Final = 0x7FFFFFFF
DEFAULT_MAX_INDEX_SIZE: Final = 10 * 1024 * 1024  # segment.index.bytes

# Lookups first search the last 8 KiB of entries. Why: the index is appended at its end, and
# nearly every lookup (consumers and followers at the tail, the append path) targets the most
# recent entries. A plain binary search over a 10 MiB index starts in the middle and touches
# pages at 1/2, 1/4, 3/8, ... of the file: pages no tail reader has used for a long time, which
# the OS may have evicted, so a lookup can stall on a page fault to disk. Worked example with
# 8-byte entries: 1,310,720 slots; a lookup of the newest offset probes slots 655,360, then
# 983,040, 1,146,880, ... ~20 pages, most of them cold. With the warm section (8192 / 8 = 1024
# entries, at most 3 pages of 4 KiB as the section need not be page-aligned) the same lookup
# first compares against the section's first entry, finds the target is newer, and searches
# only those 3 pages, which every tail lookup and every append keep hot. 8 KiB of offset
# index covers about 4 MiB of log at the default index.interval.bytes of 4096, enough for
# in-sync followers and caught-up consumers. Lookups of older offsets fall back to the whole
# cold part, as before.
WARM_SECTION_BYTES: Final = 8192
# Above this an index is sanity-checked through its map rather than read whole: a clean
# shutdown trims the active segment's indexes to their entries, normally a few KiB.
_UNMAPPED_CHECK_MAX_BYTES: Final = 64 * 1024

_INT32_PAIR = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


def _io_error(cause: OSError, message: str, *, path: str | Path) -> KafkaStorageError:
    """The storage error for an index's OSError: ENOMEM (an index that cannot be mapped:
    address space, overcommit) fails that operation only (PartitionIoError); anything else
    is the disk's (KafkaStorageError: the log dir goes offline)."""
    if cause.errno == errno.ENOMEM:
        return PartitionIoError(message, path=path)
    return KafkaStorageError(message, path=path)


class _MapBudget:
    """The process-wide bound on index maps held at once (see the module docstring)."""

    def __init__(self) -> None:
        self.limit: int | None = None
        self._owner: int | None = None
        # Insertion-ordered: the first key is the index mapped longest ago.
        self._open: dict[int, AbstractIndex] = {}
        self.parked_total = 0

    def configure(self, limit: int | None) -> None:
        self.limit = limit
        self._owner = threading.get_ident() if limit is not None else None
        self._open.clear()

    def opened(self, index: AbstractIndex) -> None:
        if self.limit is None or threading.get_ident() != self._owner:
            return
        held = self._open
        held[id(index)] = index
        while len(held) > self.limit:
            victim = held.pop(next(iter(held)))
            victim._park()
            self.parked_total += 1

    def closed(self, index: AbstractIndex) -> None:
        if self._open and threading.get_ident() == self._owner:
            # Another thread's close leaves the entry: parking a closed index does nothing.
            self._open.pop(id(index), None)

    @property
    def held(self) -> int:
        return len(self._open)


_BUDGET = _MapBudget()


def set_index_map_limit(limit: int | None) -> None:
    """Bound the index maps held at once across the process (None: unbounded). Call from
    the thread that uses the indexes (the broker's event loop); see the module docstring."""
    if limit is not None and limit < 2:
        raise ValueError("the index map limit must be at least 2")
    _BUDGET.configure(limit)


def index_maps_held() -> int:
    """How many index maps the bound counts now (0 when unbounded)."""
    return _BUDGET.held


class OffsetPosition(NamedTuple):
    """An offset (absolute) and the .log position of the batch that ends at it."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A timestamp and the (absolute) offset of the batch that holds it."""

    timestamp: int
    offset: int


def round_down_to_exact_multiple(number: int, factor: int) -> int:
    """``round_down_to_exact_multiple(67, 8) == 64``."""
    return factor * (number // factor)


class AbstractIndex:
    """What both indexes share: the file, the mmap, the entry count, resizing, the search.

    Subclasses set ``ENTRY_SIZE`` and say how to read an entry's key (what lookups search
    by) and value (the other column, also searchable).
    """

    ENTRY_SIZE: ClassVar[int] = 0
    KIND: ClassVar[str] = "index"

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        *,
        writable: bool = True,
    ) -> None:
        # Kept as given and made a Path on first use: start-up builds tens of thousands.
        self._path: str | Path = path if isinstance(path, (str, Path)) else Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._mmap: mmap.mmap | None = None
        self._opened = False
        # Unmapped by the map bound while in use; entry counts kept (the file may be
        # preallocated past its entries, so its length does not count them).
        self._parked = False
        self._length = 0
        self._entries = 0
        self._max_entries = 0

    # -- lazy opening -----------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Whether the file has been opened and mapped (False until first use)."""
        return self._opened

    def _ensure_open(self) -> None:
        if not self._opened:
            self._open()

    def _open(self) -> None:
        if self._parked:
            self._unpark()
            return
        path = self._path
        try:
            newly_created = not os.path.exists(path)
            if newly_created and not self.writable:
                raise KafkaStorageError(f"{self.KIND} file does not exist", path=path)
            fd = os.open(path, (os.O_RDWR | os.O_CREAT) if self.writable else os.O_RDONLY, 0o644)
            try:
                if newly_created:
                    size = round_down_to_exact_multiple(self.max_index_size, self.ENTRY_SIZE)
                    os.ftruncate(fd, size)
                    if size:
                        # The same zeros the file already reads as, written through the
                        # file rather than the map: the first write fault on a map of a
                        # never-written file costs milliseconds on ext4 (measured 4-7 ms
                        # under load, µs after this write), and a broker creating or
                        # first producing to 10,000 partitions pays it 20,000 times.
                        os.pwrite(fd, bytes(self.ENTRY_SIZE), 0)
                length = os.fstat(fd).st_size
                self._mmap = self._map(fd, length)
            finally:
                os.close(fd)
        except OSError as e:
            raise _io_error(e, f"cannot open {self.KIND} file: {e}", path=path) from e
        self._length = length
        # A new file has no entries; an existing one was trimmed to its entries when its
        # segment stopped being active, so its length counts them.
        self._entries = 0 if newly_created else length // self.ENTRY_SIZE
        self._max_entries = length // self.ENTRY_SIZE
        self._opened = True
        self._after_entries_changed()
        _BUDGET.opened(self)

    def park(self) -> None:
        """Unmap, keeping the entry count, to be mapped again on the next use (its file
        untouched: an active segment's index stays preallocated). Nothing if not mapped."""
        if not self._opened:
            return
        self._unmap()
        self._opened = False
        self._parked = True
        _BUDGET.closed(self)

    def _park(self) -> None:
        # The bound's eviction (the bound already forgot this index).
        if not self._opened:
            return
        self._unmap()
        self._opened = False
        self._parked = True

    def _unpark(self) -> None:
        path = self._path
        try:
            fd = os.open(path, os.O_RDWR if self.writable else os.O_RDONLY)
            try:
                length = os.fstat(fd).st_size
                self._mmap = self._map(fd, length)
            finally:
                os.close(fd)
        except OSError as e:
            raise _io_error(e, f"cannot open {self.KIND} file: {e}", path=path) from e
        if length != self._length:
            self._unmap()
            raise KafkaStorageError(
                f"{self.KIND} file changed length while unmapped ({self._length} -> {length})",
                path=path,
            )
        self._parked = False
        self._opened = True
        _BUDGET.opened(self)

    def _map(self, fd: int, length: int) -> mmap.mmap | None:
        if length == 0:
            return None  # mmap cannot map an empty file; an empty index needs no map
        # A FileMap where the C extension is built: it behaves as the mmap it is typed as
        # for every use here (buffer, slices, flush, close).
        return cast("mmap.mmap", map_file(fd, length, writable=self.writable))

    def _after_entries_changed(self) -> None:
        """Hook for subclasses caching their last entry."""

    # -- sizes ----------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        path = self._path
        if not isinstance(path, Path):
            path = self._path = Path(path)
        return path

    def _ensure_counted(self) -> None:
        # The counts without the map: a parked index keeps them (its file is untouched
        # while parked), so only a never-opened one must be opened to learn them. The append
        # path asks for them on every append (``is_full``); with more active segments than
        # the map bound, mapping for that unparked one index and parked another per append.
        if not self._opened and not self._parked:
            self._open()

    @property
    def entries(self) -> int:
        self._ensure_counted()
        return self._entries

    @property
    def max_entries(self) -> int:
        self._ensure_counted()
        return self._max_entries

    @property
    def length(self) -> int:
        """The file's length in bytes (preallocated or trimmed)."""
        self._ensure_open()
        return self._length

    def size_in_bytes(self) -> int:
        """Bytes used by entries."""
        return self.entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        self._ensure_counted()
        return self._entries >= self._max_entries

    # -- resizing ---------------------------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries.

        Used to trim an index (``trim_to_valid_size``) and to give room back to the index of
        a segment that becomes active again (``reset``, after truncation). Returns whether the
        length changed. The entry count never exceeds the new capacity.
        """
        rounded = round_down_to_exact_multiple(new_size, self.ENTRY_SIZE)
        if self._parked and rounded >= self._entries * self.ENTRY_SIZE:
            return self._resize_parked(rounded)
        self._ensure_open()
        if rounded == self._length:
            return False
        self._unmap()
        try:
            fd = os.open(self._path, os.O_RDWR)
            try:
                os.ftruncate(fd, rounded)
                self._mmap = self._map(fd, rounded)
            finally:
                os.close(fd)
        except OSError as e:
            raise _io_error(e, f"cannot resize {self.KIND} file: {e}", path=self._path) from e
        self._length = rounded
        self._max_entries = rounded // self.ENTRY_SIZE
        if self._entries > self._max_entries:
            self._entries = self._max_entries
        self._after_entries_changed()
        return True

    def rewrite(self, data: bytes) -> None:
        """Replace the file's content with ``data`` (whole entries, in order), trimmed to
        them, and leave the index parked: unmapped, its entries counted, mapped on its next
        use. Recovery rebuilds an index this way, without mapping the file a crash left
        behind (reading the last slot of a preallocated file, a hole, faults a page in)."""
        size = self.ENTRY_SIZE
        if len(data) % size:
            raise ValueError(f"{len(data)} bytes are not whole {self.KIND} entries")
        self.close_handler()
        path = self._path
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                written = 0
                while written < len(data):
                    written += os.pwrite(fd, data[written:], written)
                os.ftruncate(fd, len(data))
            finally:
                os.close(fd)
        except OSError as e:
            raise _io_error(e, f"cannot write {self.KIND} file: {e}", path=path) from e
        entries = len(data) // size
        self._length = len(data)
        self._entries = entries
        self._max_entries = entries
        self._set_last_entry(data[-size:] if entries else None)
        self._parked = True

    def _set_last_entry(self, raw: bytes | None) -> None:
        """Hook: cache the last entry from its bytes (None: no entry), as
        ``_after_entries_changed`` does from the map."""

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when the file cannot be this index (subclasses)."""

    def sanity_check_unmapped(self) -> None:
        """``sanity_check`` from the file's bytes, read once, leaving the index parked
        (unmapped, its entries counted) for its first use to map.

        Start-up checks the active segment's indexes of every partition; mapping two files
        per partition for that (then unmapping them, as a worker thread must) was a large
        share of a clean start at 10,000 partitions. The checks are the same, over the same
        bytes. An index already in use, a file that is missing (the mapped path creates
        it, as before) or one larger than ``_UNMAPPED_CHECK_MAX_BYTES`` is checked mapped.
        """
        if self._opened or self._parked or not self.writable:
            self.sanity_check()
            return
        path = self._path
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            self.sanity_check()
            return
        except OSError as e:
            raise _io_error(e, f"cannot open {self.KIND} file: {e}", path=path) from e
        try:
            length = os.fstat(fd).st_size
            data = os.pread(fd, length, 0) if length <= _UNMAPPED_CHECK_MAX_BYTES else None
        except OSError as e:
            raise _io_error(e, f"cannot read {self.KIND} file: {e}", path=path) from e
        finally:
            os.close(fd)
        if data is None:
            self.sanity_check()
            return
        if len(data) != length:
            raise KafkaStorageError(f"{self.KIND} file shrank while read", path=path)
        # The checks read entries through ``_mmap``; the bytes stand in for the map while
        # they run (read-only: nothing is written during the check).
        self._length = length
        self._entries = self._max_entries = length // self.ENTRY_SIZE
        self._mmap = cast("mmap.mmap", data)
        self._opened = True
        try:
            self._after_entries_changed()
            self.sanity_check()
        except BaseException:
            # Back to never opened: the recovery that follows opens it as before.
            self._mmap = None
            self._length = self._entries = self._max_entries = 0
            self._after_entries_changed()
            raise
        finally:
            self._mmap = None
            self._opened = False
        self._parked = True

    def _resize_parked(self, rounded: int) -> bool:
        """``resize`` of a parked index that keeps all its entries: the file's length
        changes and the index stays unmapped (loading gives the active segment's indexes
        their room back this way, then hands them over unmapped)."""
        if rounded == self._length:
            return False
        used = self._entries * self.ENTRY_SIZE
        try:
            fd = os.open(self._path, os.O_RDWR)
            try:
                os.ftruncate(fd, rounded)
                if rounded > used >= self._length:
                    # The slot the next entry goes to, written as the zeros it reads as:
                    # the first write fault through a map on a hole costs milliseconds
                    # (see ``_open``).
                    os.pwrite(fd, bytes(self.ENTRY_SIZE), used)
            finally:
                os.close(fd)
        except OSError as e:
            raise _io_error(e, f"cannot resize {self.KIND} file: {e}", path=self._path) from e
        self._length = rounded
        self._max_entries = rounded // self.ENTRY_SIZE
        return True

    def trim_to_valid_size(self) -> None:
        """Cut the preallocated tail: the file keeps exactly its entries."""
        self.resize(self.ENTRY_SIZE * self.entries)

    def reset(self) -> None:
        """Remove every entry and preallocate again (recovery starts from here)."""
        self.truncate()
        self.resize(self.max_index_size)

    def truncate(self) -> None:
        """Remove every entry (the file keeps its length)."""
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, entries: int) -> None:
        self._ensure_open()
        self._entries = entries
        self._after_entries_changed()

    def _last_entry_bytes(self) -> bytes | None:
        """The last entry's bytes without mapping the file; None if it has none or is missing.

        The load-time consistency check reads one entry of every segment's indexes; mapping
        thousands of files for that would cost more than the check. An open index answers
        from its map (its file may be preallocated past the entries), a parked one from
        its file at the counted entry.
        """
        size = self.ENTRY_SIZE
        if self._opened:
            if self._entries == 0 or self._mmap is None:
                return None
            return bytes(self._mmap[(self._entries - 1) * size : self._entries * size])
        parked = self._parked
        if parked and self._entries == 0:
            return None
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise _io_error(e, f"cannot open {self.KIND} file: {e}", path=self._path) from e
        try:
            # A parked index knows its count (its file may be preallocated past it).
            entries = self._entries if parked else os.fstat(fd).st_size // size
            return os.pread(fd, size, (entries - 1) * size) if entries else None
        except OSError as e:
            raise KafkaStorageError(f"cannot read {self.KIND} file: {e}", path=self._path) from e
        finally:
            os.close(fd)

    # -- lifecycle --------------------------------------------------------------------------

    def flush(self) -> None:
        buffer = self._mmap
        try:
            if buffer is not None:
                try:
                    buffer.flush()
                    return
                except ValueError:
                    pass  # parked by the loop meanwhile (a flush runs in the executor)
            if self._parked or (buffer is not None and self._mmap is None):
                # Pages written through a map that is gone are still the file's dirty pages.
                fd = os.open(self._path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as e:
            raise KafkaStorageError(f"cannot flush {self.KIND}: {e}", path=self._path) from e

    def close(self) -> None:
        """Trim to the entries and unmap; the object may be opened again by a later use."""
        if self._opened or self._parked:
            if self.writable:
                self.trim_to_valid_size()
            self.close_handler()

    def close_handler(self) -> None:
        """Unmap without trimming (the dir went offline, or the file is being deleted)."""
        self._unmap()
        self._opened = False
        self._parked = False
        _BUDGET.closed(self)

    def _unmap(self) -> None:
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                # A lookup result never keeps a view of the map, so this means a bug; the map
                # stays valid until the last view goes, which is safe if wasteful.
                pass
            self._mmap = None

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Rename the file (for .deleted, .cleaned, .swap); works whether open or not."""
        new_path = Path(path)
        try:
            os.replace(self._path, new_path)
        except FileNotFoundError:
            pass  # an index that was never written (lazy, segment empty) has no file
        except OSError as e:
            raise KafkaStorageError(f"cannot rename {self.KIND}: {e}", path=self._path) from e
        self._path = new_path

    def delete_if_exists(self) -> bool:
        self.close_handler()
        try:
            os.unlink(self._path)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise KafkaStorageError(f"cannot delete {self.KIND}: {e}", path=self._path) from e
        return True

    # -- search -----------------------------------------------------------------------------

    # Where the searchable columns are: (struct of the field, its offset in an entry, whether
    # it is stored relative to base_offset). Subclasses fill these in.
    _KEY_FIELD: ClassVar[tuple[struct.Struct, int, bool]]
    _VALUE_FIELD: ClassVar[tuple[struct.Struct, int, bool]]

    def _index_slot_range_for(self, target: int, by_value: bool) -> tuple[int, int]:
        """(largest slot with entry <= target, smallest slot with entry >= target); -1 = none.

        With entries [1, 4, 6, 8]: 0 -> (-1, 0); 3 -> (0, 1); 4 -> (1, 1); 9 -> (3, -1).
        Searches the warm section (the last WARM_SECTION_BYTES of entries) first, see above.
        The loop is written out (no helper calls per probe): lookups are on the fetch path.
        """
        self._ensure_open()
        entries = self._entries
        buffer = self._mmap
        if entries == 0 or buffer is None:
            return -1, -1
        field, field_offset, relative = self._VALUE_FIELD if by_value else self._KEY_FIELD
        if relative:
            target -= self.base_offset
        unpack = field.unpack_from
        stride = self.ENTRY_SIZE
        first_hot_entry = max(0, entries - 1 - WARM_SECTION_BYTES // stride)
        if unpack(buffer, first_hot_entry * stride + field_offset)[0] < target:
            lo, hi = first_hot_entry, entries - 1
        elif unpack(buffer, field_offset)[0] > target:
            return -1, 0
        else:
            lo, hi = 0, first_hot_entry
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = unpack(buffer, mid * stride + field_offset)[0]
            if found > target:
                hi = mid - 1
            elif found < target:
                lo = mid
            else:
                return mid, mid
        # ``lo`` may be the untested start of the range and equal to the target.
        if unpack(buffer, lo * stride + field_offset)[0] == target:
            return lo, lo
        return lo, (-1 if lo == entries - 1 else lo + 1)

    def largest_lower_bound_slot_for(self, target: int, *, by_value: bool = False) -> int:
        return self._index_slot_range_for(target, by_value)[0]

    def smallest_upper_bound_slot_for(self, target: int, *, by_value: bool = False) -> int:
        return self._index_slot_range_for(target, by_value)[1]

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``, checked to fit the int32 of an entry."""
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise InvalidOffsetError(
                f"offset {offset} is not in [{self.base_offset}, "
                f"{self.base_offset + INT32_MAX}] of the segment",
                path=self._path,
            )
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def _writable_map(self) -> mmap.mmap:
        self._ensure_open()
        if self._entries >= self._max_entries or self._mmap is None:
            raise IndexFullError(
                f"attempt to append to a full {self.KIND} ({self._entries} entries)",
                path=self._path,
            )
        return self._mmap

    def __repr__(self) -> str:
        state = (
            f"entries={self._entries}"
            if self._opened
            else ("parked" if self._parked else "not opened")
        )
        return f"{type(self).__name__}(path={os.fspath(self._path)!r}, {state})"


class OffsetIndex(AbstractIndex):
    """Maps offsets to .log positions, one entry per ``index.interval.bytes`` of batches.

    An entry (relative_offset, position) says: the batch starting at ``position`` ends at
    offset ``base_offset + relative_offset``. A lookup gives the position of the largest
    entry <= the target, from which a short scan of the .log finds the batch.
    """

    ENTRY_SIZE = 8
    KIND = "offset index"

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        *,
        writable: bool = True,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable=writable)
        self._last_offset = base_offset
        # The last entry's position (0 with no entry): with ``_last_offset``, the last entry
        # without the map (a parked index answers ``last_entry`` from these).
        self._last_position = 0

    _KEY_FIELD = (_INT32, 0, True)
    _VALUE_FIELD = (_INT32, 4, False)

    def _after_entries_changed(self) -> None:
        self._last_offset, self._last_position = self._last_entry()

    def _set_last_entry(self, raw: bytes | None) -> None:
        if raw is None:
            self._last_offset, self._last_position = self.base_offset, 0
        else:
            relative, position = _INT32_PAIR.unpack(raw)
            self._last_offset, self._last_position = self.base_offset + relative, position

    def _last_entry(self) -> OffsetPosition:
        if self._entries == 0 or self._mmap is None:
            return OffsetPosition(self.base_offset, 0)
        relative, position = _INT32_PAIR.unpack_from(self._mmap, (self._entries - 1) * 8)
        return OffsetPosition(self.base_offset + relative, position)

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when there is none."""
        if not self._parked:
            self._ensure_open()
        return self._last_offset

    def last_entry(self) -> OffsetPosition:
        """The last entry, or (base_offset, 0) when there is none; a parked index answers
        without mapping its file."""
        if not self._parked:
            self._ensure_open()
        return OffsetPosition(self._last_offset, self._last_position)

    def peek_last_entry(self) -> OffsetPosition | None:
        """The last entry as the file holds it, without mapping it; None when there is none."""
        raw = self._last_entry_bytes()
        if raw is None or len(raw) < self.ENTRY_SIZE:
            return None
        relative, position = _INT32_PAIR.unpack(raw)
        return OffsetPosition(self.base_offset + relative, position)

    def entry(self, n: int) -> OffsetPosition:
        """The n-th entry, with its absolute offset."""
        self._ensure_open()
        if not 0 <= n < self._entries or self._mmap is None:
            raise IndexError(f"entry {n} is out of range of {self._entries} entries")
        relative, position = _INT32_PAIR.unpack_from(self._mmap, n * 8)
        return OffsetPosition(self.base_offset + relative, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry whose offset is <= ``target_offset``; (base_offset, 0) if none."""
        slot = self.largest_lower_bound_slot_for(target_offset)
        if slot == -1:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(slot)

    def fetch_upper_bound_offset(
        self, fetch_offset: OffsetPosition, fetch_size: int
    ) -> OffsetPosition | None:
        """The first entry at or after position ``fetch_offset.position + fetch_size``."""
        slot = self.smallest_upper_bound_slot_for(fetch_offset.position + fetch_size, by_value=True)
        if slot == -1:
            return None
        return self.entry(slot)

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must strictly increase.

        Raises InvalidOffsetError for an offset not above the last entry or not relative to
        this segment, IndexFullError when no slot is free.
        """
        buffer = self._writable_map()
        if self._entries != 0 and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} to position {self._entries} no larger "
                f"than the last offset appended ({self._last_offset})",
                path=self._path,
            )
        relative = self.relative_offset(offset)
        if not 0 <= position <= INT32_MAX:
            raise InvalidOffsetError(
                f"position {position} of offset {offset} does not fit an int32", path=self._path
            )
        _INT32_PAIR.pack_into(buffer, self._entries * 8, relative, position)
        self._entries += 1
        self._last_offset = offset
        self._last_position = position

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        self._ensure_open()
        slot = self.largest_lower_bound_slot_for(offset)
        if slot < 0:
            new_entries = 0
        elif self.entry(slot).offset == offset:
            new_entries = slot
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when the file cannot be this segment's offset index."""
        self._ensure_open()
        if self._entries != 0 and self._last_offset < self.base_offset:
            raise CorruptIndexError(
                f"corrupt offset index: last offset {self._last_offset} is below the base "
                f"offset {self.base_offset}",
                path=self._path,
            )
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"offset index length {self._length} is not a multiple of {self.ENTRY_SIZE}",
                path=self._path,
            )
        previous = -1
        # Entries are checked for order only at their ends and in the warm section, which is
        # what a crash can leave wrong; a full scan would make start-up O(index size).
        start = max(0, self._entries - WARM_SECTION_BYTES // self.ENTRY_SIZE)
        for n in range(start, self._entries):
            offset = self.entry(n).offset
            if offset <= previous:
                raise CorruptIndexError(
                    f"corrupt offset index: entry {n} (offset {offset}) does not increase",
                    path=self._path,
                )
            previous = offset


class TimeIndex(AbstractIndex):
    """Maps timestamps to offsets: entry (timestamp, relative_offset) says the records up to
    ``base_offset + relative_offset`` include one with ``timestamp``, the largest so far.

    An entry is added only when the largest timestamp grows. One slot is always kept free for
    the entry written when the segment stops being active (the "roll entry", carrying the
    segment's max timestamp), which is why ``is_full`` says full one slot early.
    """

    ENTRY_SIZE = 12
    KIND = "time index"

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        *,
        writable: bool = True,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable=writable)
        self._last = TimestampOffset(NO_TIMESTAMP, base_offset)

    _KEY_FIELD = (_INT64, 0, False)
    _VALUE_FIELD = (_INT32, 8, True)

    def _after_entries_changed(self) -> None:
        if self._entries == 0 or self._mmap is None:
            self._last = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        else:
            timestamp, relative = _TIME_ENTRY.unpack_from(self._mmap, (self._entries - 1) * 12)
            self._last = TimestampOffset(timestamp, self.base_offset + relative)

    def _set_last_entry(self, raw: bytes | None) -> None:
        if raw is None:
            self._last = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        else:
            timestamp, relative = _TIME_ENTRY.unpack(raw)
            self._last = TimestampOffset(timestamp, self.base_offset + relative)

    def is_full(self) -> bool:
        self._ensure_counted()
        return self._entries >= self._max_entries - 1

    def last_entry(self) -> TimestampOffset:
        """The last entry, or (NO_TIMESTAMP, base_offset) when there is none."""
        self._ensure_open()
        return self._last

    def peek_last_entry(self) -> TimestampOffset | None:
        """The last entry as the file holds it, without mapping it; None when there is none."""
        raw = self._last_entry_bytes()
        if raw is None or len(raw) < self.ENTRY_SIZE:
            return None
        timestamp, relative = _TIME_ENTRY.unpack(raw)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def entry(self, n: int) -> TimestampOffset:
        self._ensure_open()
        if not 0 <= n < self._entries or self._mmap is None:
            raise IndexError(f"entry {n} is out of range of {self._entries} entries")
        timestamp, relative = _TIME_ENTRY.unpack_from(self._mmap, n * 12)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if ``timestamp`` is larger than the last entry's.

        ``skip_full_check`` lets the roll entry use the slot kept for it. Raises
        InvalidOffsetError when ``offset`` goes backwards, or the timestamp does.
        """
        self._ensure_open()
        if not skip_full_check and self.is_full():
            raise IndexFullError(
                f"attempt to append to a full time index ({self._entries} entries)",
                path=self._path,
            )
        last = self._last
        if self._entries != 0 and offset < last.offset:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} to slot {self._entries} no larger than "
                f"the last offset appended ({last.offset})",
                path=self._path,
            )
        if self._entries != 0 and timestamp < last.timestamp:
            raise InvalidOffsetError(
                f"attempt to append timestamp {timestamp} to slot {self._entries} no larger "
                f"than the last timestamp appended ({last.timestamp})",
                path=self._path,
            )
        if timestamp > last.timestamp:
            if self._mmap is None or self._entries >= self._max_entries:
                raise IndexFullError(
                    f"no slot left in the time index ({self._entries} entries)", path=self._path
                )
            relative = self.relative_offset(offset)
            _TIME_ENTRY.pack_into(self._mmap, self._entries * 12, timestamp, relative)
            self._entries += 1
            self._last = TimestampOffset(timestamp, offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The largest entry whose timestamp is <= target; (NO_TIMESTAMP, base_offset) if none.

        Every record up to that entry's offset has a timestamp <= the entry's, hence <= the
        target, so the first record at or after the target is found by scanning the .log
        from the batch holding that offset.
        """
        slot = self.largest_lower_bound_slot_for(target_timestamp)
        if slot == -1:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        self._ensure_open()
        slot = self.largest_lower_bound_slot_for(offset, by_value=True)
        if slot < 0:
            new_entries = 0
        elif self.entry(slot).offset == offset:
            new_entries = slot
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)

    def sanity_check(self) -> None:
        self._ensure_open()
        last = self._last
        if self._entries != 0 and last.timestamp < self.entry(0).timestamp:
            raise CorruptIndexError(
                f"corrupt time index: last timestamp {last.timestamp} is below the first "
                f"{self.entry(0).timestamp}",
                path=self._path,
            )
        if self._entries != 0 and last.offset < self.base_offset:
            raise CorruptIndexError(
                f"corrupt time index: last offset {last.offset} is below the base offset "
                f"{self.base_offset}",
                path=self._path,
            )
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"time index length {self._length} is not a multiple of {self.ENTRY_SIZE}",
                path=self._path,
            )
