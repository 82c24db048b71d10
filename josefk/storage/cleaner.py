"""The log cleaner's work on files: one compaction of one log's inactive segments.

Owns what one cleaning does, as Kafka's ``Cleaner`` does it: build the offset map (each key's
latest offset) over the dirty section, group the segments to clean by size, and write each
group's retained batches into a new segment under the ``.cleaned`` suffix, fsynced. It is a
function of plain data (``CleanerJob`` in, ``CleanerResult`` out, both picklable) so that it
runs in a worker process, off the broker's event loop and its GIL. It never touches a live
``Log``: swapping the cleaned segments in is ``Log.replace_segments``'s, deciding what to clean
and when is ``josefk.storage.log_cleaner``'s.

What a record keeps (Kafka's rules, KIP-534 for tombstones):

- a record past the map's latest offset (not yet deduplicated) stays;
- a record without a key goes (a compacted topic refuses them on produce; one that got in
  anyway, say before the policy changed, cannot be compacted);
- a record whose key has a later offset in the map goes;
- a tombstone (null value) stays until its batch's delete horizon: the first cleaning that
  keeps it writes ``now + delete.retention.ms`` into the batch (the delete-horizon bit and
  the base timestamp field), a cleaning after that horizon drops it.

A batch all of whose records stay, and that needs no horizon, is copied byte for byte; any
other is rebuilt with the kept records (``records.build_retained_batch``: same base offset,
last offset delta, producer fields, codec). A batch that loses every record is dropped unless
it is its producer's last batch, which stays as an empty batch so the producer's sequence
state survives.

Transactions: the cleaning stops at the last stable offset (the first uncleanable offset is
below it), so every transaction it sees is complete. The records of aborted transactions
(known from every ``.txnindex`` of the partition) are neither mapped, so that they cannot hide
a committed record of the same key, nor kept. Control batches (transaction markers) are kept
as they are, and the ``.txnindex`` entries of the segments cleaned are carried over (Kafka
drops a marker once its transaction's records are gone and its delete horizon passed; josefk
keeps them, a few dozen bytes each).

Imports josefk.records and josefk.storage's segment, file records and errors; never the Log,
josefk.protocol, josefk.broker or josefk.metrics.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from josefk.records.batch import (
    CONTROL_BIT,
    NO_TIMESTAMP,
    TRANSACTIONAL_BIT,
    BatchHeader,
    RecordBatch,
)
from josefk.records.builder import build_retained_batch
from josefk.records.record import RecordSpan, batch_record_data, record_spans
from josefk.storage.file_records import FileRecords
from josefk.storage.offsets import AbortedTxn
from josefk.storage.segment import (
    CLEANED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    LogSegment,
    filename_prefix_from_offset,
    txn_index_file,
)
from josefk.storage.txn_index import TransactionIndex, decode_entries

INT32_MAX: Final = (1 << 31) - 1
# Kafka sizes its offset map at 24 bytes an entry (a 16-byte MD5 of the key and an 8-byte
# offset) filled to log.cleaner.io.buffer.load.factor; josefk derives its entry bound the same
# way from log.cleaner.dedupe.buffer.size, so the setting means what it means in Kafka.
MAP_ENTRY_BYTES: Final = 24
# Kafka's default for log.cleaner.io.max.bytes.per.second is Double.MAX_VALUE: no limit.
_UNLIMITED: Final = sys.float_info.max
# Output is appended to the cleaned segment in chunks of about this size.
_WRITE_CHUNK: Final = 1 << 20
_PR_SET_PDEATHSIG: Final = 1
# Steps at which a crash test may have the broker killed (``CleanerJob.crash_point``).
CRASH_WHILE_WRITING_CLEANED: Final = "writing-cleaned"


def die_with_parent() -> None:
    """Initializer of a cleaner worker process: the kernel kills it when the broker dies
    (Linux's PR_SET_PDEATHSIG), so a SIGKILLed broker leaves no worker writing into its log
    dirs, or holding its stdout open, after it is gone."""
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the broker died before prctl took effect
        os._exit(1)


def map_capacity(dedupe_buffer_bytes: int, threads: int, load_factor: float) -> int:
    """How many keys one cleaning may hold: the buffer shared by the cleaner threads."""
    per_thread = dedupe_buffer_bytes // max(threads, 1)
    return max(int(per_thread * load_factor) // MAP_ENTRY_BYTES, 1)


@dataclass(frozen=True, slots=True)
class SegmentSnapshot:
    """An inactive segment as the job sees it: where it is and where its offsets end."""

    base_offset: int
    next_base_offset: int  # the base offset of the segment after it
    size: int


@dataclass(frozen=True, slots=True)
class CleanerJob:
    """One cleaning of one log. ``segments``: the log's segments from its first up to the
    one holding ``first_uncleanable_offset`` (exclusive), in order, none of them active."""

    directory: str
    segments: tuple[SegmentSnapshot, ...]
    first_dirty_offset: int
    first_uncleanable_offset: int
    producer_last_offsets: Mapping[int, int]  # producer id -> last offset it wrote
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    max_index_bytes: int
    index_interval_bytes: int
    map_capacity: int
    max_io_bytes_per_second: float = math.inf
    max_batch_bytes: int | None = None
    # For crash tests: the step at which the worker kills ``broker_pid`` and itself.
    crash_point: str | None = None
    broker_pid: int = 0


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    """A ``.cleaned`` segment written for ``old_base_offsets`` (whose sizes were
    ``old_sizes`` when read); its base offset is the first of them."""

    base_offset: int
    old_base_offsets: tuple[int, ...]
    old_sizes: tuple[int, ...]
    size: int


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    map_records: int = 0
    invalid_records: int = 0
    map_bytes_read: int = 0


@dataclass(frozen=True, slots=True)
class CleanerResult:
    groups: tuple[CleanedGroup, ...]
    end_offset: int  # everything below it is clean now: the next first dirty offset
    # The earliest delete horizon among the tombstones kept, None when none is kept: a later
    # cleaning after it can drop them even if nothing else is dirty.
    delete_horizon_ms: int | None
    map_size: int
    stats: CleanerStats = field(default_factory=CleanerStats)


class OffsetMap:
    """Key -> latest offset, bounded to ``capacity`` keys.

    Keys are kept whole (a dict of bytes), so there are no hash collisions to reason about;
    the bound is the number of keys, derived from log.cleaner.dedupe.buffer.size as Kafka
    derives it.
    """

    __slots__ = ("_offsets", "capacity", "latest_offset")

    def __init__(self, capacity: int, latest_offset: int = -1) -> None:
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        # The last offset the map has seen: records after it are not deduplicated yet.
        self.latest_offset = latest_offset

    def __len__(self) -> int:
        return len(self._offsets)

    def get(self, key: bytes) -> int | None:
        return self._offsets.get(key)

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[key] = offset

    def utilization(self) -> float:
        return len(self._offsets) / self.capacity


class Throttler:
    """Keeps a rate of bytes per second by sleeping (log.cleaner.io.max.bytes.per.second).

    Checks every ``check_interval_ms`` of the injected clock; above the rate it sleeps as
    long as the bytes observed should have taken at the rate, less the time they took.
    """

    def __init__(
        self,
        bytes_per_second: float,
        *,
        clock_ms: Callable[[], float] = lambda: time.monotonic() * 1000,
        sleep_s: Callable[[float], None] = time.sleep,
        check_interval_ms: float = 300,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self._clock_ms = clock_ms
        self._sleep_s = sleep_s
        self._check_interval_ms = check_interval_ms
        self._period_start = clock_ms()
        self._observed = 0.0
        self.slept_ms = 0.0

    def maybe_throttle(self, nbytes: int) -> None:
        if self.bytes_per_second >= _UNLIMITED:
            return
        self._observed += nbytes
        now = self._clock_ms()
        elapsed = now - self._period_start
        if elapsed < self._check_interval_ms or self._observed <= 0:
            return
        if self._observed * 1000 / elapsed > self.bytes_per_second:
            wanted = self._observed * 1000 / self.bytes_per_second
            pause = wanted - elapsed
            if pause > 0:
                self.slept_ms += pause
                self._sleep_s(pause / 1000)
        self._period_start = self._clock_ms()
        self._observed = 0


def group_segments_by_size(
    segments: Sequence[SegmentSnapshot],
    *,
    max_size: int,
    max_index_size: int,
    index_sizes: Sequence[tuple[int, int]],
) -> list[list[int]]:
    """Kafka's ``groupSegmentsBySize``: runs of consecutive segments (as positions into
    ``segments``) that fit one segment, by log size, by each index's size
    (``index_sizes``: offset and time index bytes per segment) and by relative offsets."""
    groups: list[list[int]] = []
    position = 0
    while position < len(segments):
        group = [position]
        log_size = segments[position].size
        offset_index, time_index = index_sizes[position]
        base = segments[position].base_offset
        position += 1
        while position < len(segments):
            candidate = segments[position]
            next_offset_index, next_time_index = index_sizes[position]
            if (
                log_size + candidate.size > max_size
                or offset_index + next_offset_index > max_index_size
                or time_index + next_time_index > max_index_size
                or candidate.next_base_offset - 1 - base > INT32_MAX
            ):
                break
            group.append(position)
            log_size += candidate.size
            offset_index += next_offset_index
            time_index += next_time_index
            position += 1
        groups.append(group)
    return groups


def clean_log(job: CleanerJob) -> CleanerResult:
    """Clean one log: returns the ``.cleaned`` segments written, ready to swap in.

    Blocking and CPU-bound; a worker process runs it. Raises StorageError (or OSError, or
    a records error for a corrupt batch) when a file cannot be read or written; the
    ``.cleaned`` files of the group being written are removed first.
    """
    stats = CleanerStats()
    throttler = Throttler(job.max_io_bytes_per_second)
    offset_map = OffsetMap(job.map_capacity, latest_offset=job.first_dirty_offset - 1)
    aborted = _aborted_transactions(Path(job.directory))
    _build_offset_map(job, offset_map, stats, throttler, _AbortedBatches(aborted))
    end_offset = offset_map.latest_offset + 1
    to_clean = [s for s in job.segments if s.base_offset < end_offset]
    directory = Path(job.directory)
    index_sizes = [_index_sizes(directory, s.base_offset) for s in to_clean]
    groups: list[CleanedGroup] = []
    horizon = _Horizon()
    aborted_batches = _AbortedBatches(aborted)
    for positions in group_segments_by_size(
        to_clean,
        max_size=job.segment_bytes,
        max_index_size=job.max_index_bytes,
        index_sizes=index_sizes,
    ):
        members = [to_clean[p] for p in positions]
        groups.append(
            _clean_group(
                job, directory, members, offset_map, stats, throttler, horizon, aborted_batches
            )
        )
    return CleanerResult(
        groups=tuple(groups),
        end_offset=end_offset,
        delete_horizon_ms=horizon.earliest,
        map_size=len(offset_map),
        stats=stats,
    )


def _index_sizes(directory: Path, base_offset: int) -> tuple[int, int]:
    prefix = directory / filename_prefix_from_offset(base_offset)
    sizes = []
    for suffix in (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX):
        try:
            sizes.append(os.stat(f"{prefix}{suffix}").st_size)
        except FileNotFoundError:
            sizes.append(0)
    return sizes[0], sizes[1]


def _open_records(directory: Path, base_offset: int) -> FileRecords:
    path = directory / f"{filename_prefix_from_offset(base_offset)}{LOG_FILE_SUFFIX}"
    return FileRecords.open(path, file_already_exists=True)


def _aborted_transactions(directory: Path) -> list[AbortedTxn]:
    """Every aborted transaction the partition's ``.txnindex`` files list, the active
    segment's too (an abort marker may sit past the section being cleaned). Read, never
    repaired: the broker may be appending to the active one."""
    aborted: list[AbortedTxn] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(TXN_INDEX_FILE_SUFFIX):
                with contextlib.suppress(FileNotFoundError), open(entry.path, "rb") as file:
                    aborted.extend(decode_entries(file.read()))
    return sorted(aborted, key=lambda txn: txn.first_offset)


class _AbortedBatches:
    """Tells, batch by batch in offset order, whether a batch belongs to an aborted
    transaction (the rule a read_committed consumer applies): a producer is aborting from
    the first offset of one of its aborted transactions until its next control batch."""

    __slots__ = ("_active", "_pending")

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._pending = collections.deque(aborted)
        self._active: set[int] = set()

    def is_aborted(self, header: BatchHeader) -> bool:
        pending = self._pending
        last_offset = header.base_offset + header.last_offset_delta
        while pending and pending[0].first_offset <= last_offset:
            txn = pending.popleft()
            if txn.last_offset >= header.base_offset:
                self._active.add(txn.producer_id)
        producer_id = header.producer_id
        if producer_id < 0 or producer_id not in self._active:
            return False
        if header.attributes & CONTROL_BIT:
            self._active.discard(producer_id)
            return False
        return bool(header.attributes & TRANSACTIONAL_BIT)


def _build_offset_map(
    job: CleanerJob,
    offset_map: OffsetMap,
    stats: CleanerStats,
    throttler: Throttler,
    aborted_batches: _AbortedBatches,
) -> None:
    """Fill the map from the dirty section, batch by batch, until the first uncleanable
    offset or until the next batch might not fit (the map then covers less: the rest stays
    dirty for the next cleaning). Aborted transactions' records are left out: they must not
    hide a committed record of the same key."""
    first_dirty, uncleanable = job.first_dirty_offset, job.first_uncleanable_offset
    directory = Path(job.directory)
    for snapshot in job.segments:
        if snapshot.next_base_offset <= first_dirty:
            continue
        if snapshot.base_offset >= uncleanable:
            return
        records = _open_records(directory, snapshot.base_offset)
        try:
            for file_batch in records.batches_from(
                0, end=snapshot.size, max_batch_size=job.max_batch_bytes, reuse_buffer=True
            ):
                batch = file_batch.batch
                header = batch.header()
                last_offset = header.base_offset + header.last_offset_delta
                if last_offset < first_dirty:
                    continue
                if header.base_offset >= uncleanable:
                    return
                size = header.batch_length + 12
                stats.map_bytes_read += size
                throttler.maybe_throttle(size)
                aborted = aborted_batches.is_aborted(header)
                if not batch.is_control and header.record_count and not aborted:
                    if (
                        len(offset_map)
                        and len(offset_map) + header.record_count > offset_map.capacity
                    ):
                        return  # full: what is mapped so far gets cleaned
                    base = header.base_offset
                    data = batch_record_data(batch)
                    for span in record_spans(data, header.record_count, base):
                        offset = base + span.offset_delta
                        if span.key is not None and first_dirty <= offset < uncleanable:
                            offset_map.put(span.key, offset)
                            stats.map_records += 1
                offset_map.latest_offset = max(
                    offset_map.latest_offset, min(last_offset, uncleanable - 1)
                )
        finally:
            records.close()


class _Horizon:
    __slots__ = ("earliest",)

    def __init__(self) -> None:
        self.earliest: int | None = None

    def saw(self, horizon_ms: int) -> None:
        if self.earliest is None or horizon_ms < self.earliest:
            self.earliest = horizon_ms


def _clean_group(
    job: CleanerJob,
    directory: Path,
    members: Sequence[SegmentSnapshot],
    offset_map: OffsetMap,
    stats: CleanerStats,
    throttler: Throttler,
    horizon: _Horizon,
    aborted_batches: _AbortedBatches,
) -> CleanedGroup:
    base_offset = members[0].base_offset
    remove_cleaned_files(directory, base_offset)
    cleaned = LogSegment.open(
        directory,
        base_offset,
        index_interval_bytes=job.index_interval_bytes,
        max_index_size=job.max_index_bytes,
        file_suffix=CLEANED_FILE_SUFFIX,
    )
    try:
        pending = bytearray()
        pending_last_offset = -1
        halfway = sum(m.size for m in members) // 2
        written_so_far = 0
        for member in members:
            records = _open_records(directory, member.base_offset)
            try:
                for file_batch in records.batches_from(
                    0, end=member.size, max_batch_size=job.max_batch_bytes, reuse_buffer=True
                ):
                    batch = file_batch.batch
                    size = batch.size_in_bytes
                    stats.bytes_read += size
                    throttler.maybe_throttle(size)
                    aborted = aborted_batches.is_aborted(batch.header())
                    kept = _filter_batch(batch, job, offset_map, stats, horizon, aborted)
                    if kept is None:
                        continue
                    pending += kept
                    pending_last_offset = batch.last_offset
                    if len(pending) >= _WRITE_CHUNK:
                        written_so_far += _append(cleaned, pending, pending_last_offset, stats)
                        throttler.maybe_throttle(len(pending))
                        pending = bytearray()
                        if job.crash_point == CRASH_WHILE_WRITING_CLEANED and (
                            written_so_far >= halfway
                        ):
                            _crash(job)
            finally:
                records.close()
        if pending:
            _append(cleaned, pending, pending_last_offset, stats)
        # Aborted transactions' records are kept by the rules above, so their entries must
        # stay for read_committed readers to drop them.
        for member in members:
            old_index = TransactionIndex(
                txn_index_file(directory, member.base_offset), member.base_offset
            )
            for txn in old_index.entries:
                cleaned.txn_index.append(txn)
        if job.crash_point == CRASH_WHILE_WRITING_CLEANED:
            _crash(job)
        cleaned.on_becoming_inactive_segment()
        cleaned.flush()
        size = cleaned.size()
        cleaned.close()
    except BaseException:
        with contextlib.suppress(Exception):
            cleaned.close_handlers()
        remove_cleaned_files(directory, base_offset)
        raise
    return CleanedGroup(
        base_offset=base_offset,
        old_base_offsets=tuple(m.base_offset for m in members),
        old_sizes=tuple(m.size for m in members),
        size=size,
    )


def _append(cleaned: LogSegment, pending: bytearray, last_offset: int, stats: CleanerStats) -> int:
    cleaned.append(last_offset, NO_TIMESTAMP, -1, memoryview(pending))
    stats.bytes_written += len(pending)
    return len(pending)


def _filter_batch(
    batch: RecordBatch,
    job: CleanerJob,
    offset_map: OffsetMap,
    stats: CleanerStats,
    horizon: _Horizon,
    aborted: bool = False,
) -> bytes | bytearray | memoryview | None:
    """The bytes to write for ``batch``: itself, a rebuilt batch, or None to drop it. The
    records of an ``aborted`` transaction's batch all go (Kafka's cleaner discards them);
    markers stay."""
    if batch.is_control:
        return batch.buffer
    header = batch.header()
    count = header.record_count
    stats.records_read += count
    base = header.base_offset
    data = batch_record_data(batch)
    spans = record_spans(data, count, base)
    latest = offset_map.latest_offset
    now = job.now_ms
    has_horizon = batch.has_delete_horizon
    # Under a delete horizon the base timestamp field holds the horizon (KIP-534).
    tombstones_expire = has_horizon and now >= header.base_timestamp
    retained: list[RecordSpan] = []
    tombstones = False
    for span in () if aborted else spans:
        offset = base + span.offset_delta
        if offset <= latest:
            key = span.key
            if key is None:
                stats.invalid_records += 1
                continue
            found = offset_map.get(key)
            if found is not None and offset < found:
                continue
            if not span.has_value and tombstones_expire:
                continue
        retained.append(span)
        if not span.has_value:
            tombstones = True
    needs_horizon = tombstones and not has_horizon
    if tombstones:
        horizon.saw(header.base_timestamp if has_horizon else now + job.delete_retention_ms)
    if len(retained) == count and not needs_horizon:
        stats.records_written += count
        return batch.buffer
    last_of_producer = (
        header.producer_id >= 0
        and job.producer_last_offsets.get(header.producer_id) == header.last_offset
    )
    if not retained and not last_of_producer:
        return None
    stats.records_written += len(retained)
    return build_retained_batch(
        batch,
        data,
        retained,
        delete_horizon_ms=now + job.delete_retention_ms if needs_horizon else None,
    )


def remove_cleaned_files(directory: Path, base_offset: int) -> None:
    prefix = directory / filename_prefix_from_offset(base_offset)
    for suffix in (
        LOG_FILE_SUFFIX,
        INDEX_FILE_SUFFIX,
        TIME_INDEX_FILE_SUFFIX,
        TXN_INDEX_FILE_SUFFIX,
    ):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{prefix}{suffix}{CLEANED_FILE_SUFFIX}")


def _crash(job: CleanerJob) -> None:
    # A crash test's SIGKILL of the broker at this step; the worker goes with it so that it
    # writes nothing after the broker is gone.
    if job.broker_pid:
        os.kill(job.broker_pid, signal.SIGKILL)
    os._exit(1)


__all__ = [
    "CRASH_WHILE_WRITING_CLEANED",
    "CleanedGroup",
    "CleanerJob",
    "CleanerResult",
    "CleanerStats",
    "OffsetMap",
    "SegmentSnapshot",
    "Throttler",
    "clean_log",
    "die_with_parent",
    "group_segments_by_size",
    "map_capacity",
    "remove_cleaned_files",
]
