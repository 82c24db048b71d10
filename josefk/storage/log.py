"""The partition log: the segments of one ``<topic>-<partition>`` directory and its offsets.

Owns ``Log``: the sorted map of segments (loaded from a partition directory by
josefk.storage.log_loader: leftover files, recovery of an unclean tail, producer state), the
key offsets (log start offset, high watermark, recovery point, log end offset), appends as
leader (the batches checked by josefk.storage.log_validator) and as follower, reads with
isolation, rolling, truncation, prefix deletion (DeleteRecords, retention) and offset lookups
by timestamp; plus the errors only the log raises. Idempotent and transactional producers'
state (josefk.storage.producer_state) is checked before offsets are assigned, updated after
each append, snapshotted at roll and close, and rebuilt at load and after truncation; it
gives the last stable offset (the first offset of the oldest open transaction, or the high
watermark), where read_committed reads stop. Transaction markers come from the coordinator
through ``append_txn_marker``; each aborted transaction is written to the ``.txnindex`` of
the segment holding its marker, and read_committed fetches collect them
(``collect_aborted_transactions``). Imports josefk.records, josefk.config.topic and the rest
of josefk.storage; never josefk.protocol, josefk.broker or josefk.metrics.

The key offsets, in the order they must always keep::

    log_start_offset <= high_watermark <= log_end_offset
    recovery_point <= log_end_offset

    offsets:  0 ........ 100 ....... 180 ........... 250 ......... 300
              |          |           |               |             |
        first segment  log_start   recovery_point  high_watermark  log_end_offset (LEO)
        base offset    (visible     (everything     (replicated;    (the next offset
                       from here)   below is        consumers see   to assign; no record
                                    fsynced)        below it)       is at the LEO itself)

Segments are kept by base offset: each segment's base offset is <= every offset in it and >
every offset in earlier segments, so the segment holding offset O is the one with the
greatest base offset <= O (``floor_segment``).

Concurrency contract: a Log lives on one asyncio event loop and every method but one is
synchronous: none of them awaits, so no task ever sees half an append, roll, truncation or
deletion, and none of them may be changed to await in the middle of a state change. The one
``async`` method, ``flush_async``, splits its work into three steps: choose the segments on
the loop, fsync them in an executor thread (touching only bytes already written), then move
the recovery point back on the loop, re-checked against the LEO of that moment. Deleted
segments' files are removed the same way, by a scheduler task in the executor, after they
left the segment map. ``Log.load`` is blocking and runs before the log is shared (the
LogManager runs many loads in a thread pool). Writes to the page cache (appends) stay on
the loop: they do not wait for the disk.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import contextlib
import errno
import functools
import logging
import os
import signal
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Final

from josefk.config.topic import LogConfig
from josefk.records.batch import (
    NO_TIMESTAMP,
    RecordBatch,
    peek_batch_size,
    split_batches,
)
from josefk.records.builder import build_control_batch
from josefk.records.compression import DecompressionBudget
from josefk.records.record import (
    ControlRecordType,
)
from josefk.storage.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    PartitionIoError,
    RecordTooLargeError,
    StorageError,
)
from josefk.storage.file_records import TimestampAndOffset
from josefk.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from josefk.storage.log_loader import (
    load_segments,
    open_segment,
    rebuild_producer_state,
    release_indexes,
)
from josefk.storage.log_validator import InvalidTimestampError, validate_batches
from josefk.storage.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AbortedTxn,
    AppendOrigin,
    FetchIsolation,
    LogAppendInfo,
    TopicPartition,
    TxnMarker,
)
from josefk.storage.producer_state import (
    BatchMetadata,
    CompletedTxn,
    ProducerStateManager,
    decode_marker,
    fsync_file,
)
from josefk.storage.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    FetchDataInfo,
    LogOffsetMetadata,
    LogSegment,
    log_file,
    offset_index_file,
    time_index_file,
)
from josefk.util.clock import Clock, JitterSource, SystemClock
from josefk.util.frozen import fast_constructor
from josefk.util.scheduler import Scheduler

_log = logging.getLogger(__name__)

LONG_MAX: Final = (1 << 63) - 1

IoErrorHandler = Callable[[Path, BaseException], None]


# -- errors only the log raises ---------------------------------------------------------------


class RecordBatchTooLargeError(RecordTooLargeError):
    """An append larger than ``segment.bytes``: no segment could ever hold it."""


class UnexpectedAppendOffsetError(StorageError):
    """A follower append starts below the log end offset (the follower must truncate first)."""

    def __init__(self, message: str, *, first_offset: int, last_offset: int, path: Path) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        super().__init__(message, path=path)


class OffsetsOutOfOrderError(StorageError):
    """A follower append whose batches' offsets do not strictly increase."""


class LogClosedError(StorageError):
    """The log was closed or deleted, or its log dir went offline."""


# Every produce append returns one (a request spread over thousands of partitions makes
# thousands): built without the frozen __init__'s per-field object.__setattr__.
_new_append_info = fast_constructor(LogAppendInfo)


# -- the log ----------------------------------------------------------------------------------


class Log:
    """One partition's log: segments by base offset, key offsets, append, read, retention.

    Build with ``Log.load``. See the module docstring for the offsets' invariants and the
    concurrency contract.
    """

    # How many logs of this process have gone offline, ever: what reports a partition
    # (the broker's metadata) compares it to know whether any ``is_offline`` may have changed
    # without asking every log. Process-wide, so another broker's failure in the same process
    # (tests) only makes such a reader look again.
    offline_transitions: ClassVar[int] = 0

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        topic_partition: TopicPartition,
        segments: Sequence[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        clock: Clock,
        jitter: JitterSource,
        scheduler: Scheduler | None,
        executor: concurrent.futures.Executor | None,
        on_io_error: IoErrorHandler | None,
        producer_state: ProducerStateManager | None = None,
    ) -> None:
        if not segments:
            raise ValueError("a log has at least one segment")
        self._dir = directory
        # The log dir holding this partition's dir (Kafka's parentDir), made once: the
        # checkpoints group every log by it every few seconds, and a Path's parent and hash
        # cost µs each, tens of ms a pass at 10,000 partitions.
        self._parent_dir = directory.parent
        self._config = config
        self.topic_partition = topic_partition
        self._clock = clock
        self._jitter = jitter
        self._scheduler = scheduler
        self._executor = executor
        self._on_io_error = on_io_error
        # The guard of every produce append (stateless, so one serves them all).
        self._appending_guard = _IoGuard(self, "appending")
        self._segments: dict[int, LogSegment] = {s.base_offset: s for s in segments}
        self._base_offsets: list[int] = sorted(self._segments)
        self._closed = False
        self._offline = False
        self.last_flush_time_ms = clock.milliseconds()
        # Moves with every change a fetch can see: the log end offset, the high watermark
        # (and with them the last stable offset), the log start offset. A fetch session's
        # idle partition stays idle while it holds (josefk.broker.fetch_session).
        self.change_count = 0
        active = self.active_segment
        self._next_offset_metadata = LogOffsetMetadata(
            active.read_next_offset(), active.base_offset, active.size()
        )
        self._log_start_offset = max(log_start_offset, self._base_offsets[0])
        self._recovery_point = min(recovery_point, self.log_end_offset)
        self._high_watermark_metadata = LogOffsetMetadata(self._log_start_offset)
        self._producer_state = (
            producer_state
            if producer_state is not None
            else ProducerStateManager(directory, name=str(topic_partition))
        )
        # Which leader epoch began at which offset (KIP-101); ``load`` reads the checkpoint.
        self._leader_epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        # Where the last stable offset is, when it is below the high watermark; dropped by
        # anything that moves segment positions (truncation, compaction swaps).
        self._lso_metadata: LogOffsetMetadata | None = None

    # -- loading ------------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = False,
        clock: Clock | None = None,
        jitter: JitterSource | None = None,
        scheduler: Scheduler | None = None,
        executor: concurrent.futures.Executor | None = None,
        on_io_error: IoErrorHandler | None = None,
        producer_id_expiration_ms: int = 86_400_000,
    ) -> Log:
        """Open (creating if needed) the partition directory and load its segments.

        Blocking: run it in a worker thread when on the event loop. The directory is
        cleaned up, its segments opened and recovered by ``storage.log_loader.load_segments``
        (leftovers of interrupted operations handled as Kafka does; every segment past the
        recovery point recovered after an unclean shutdown, and any whose files disagree);
        then the producer state is rebuilt (``log_loader.rebuild_producer_state``: the newest
        snapshot at or below the log end offset, then the batch headers after it;
        ``producer_id_expiration_ms``: producer.id.expiration.ms) and the leader-epoch
        checkpoint is read.

        Raises KafkaStorageError (naming the path) on an I/O error.
        """
        # Path(a Path) parses it again; the log manager passes one per partition.
        path = directory if isinstance(directory, Path) else Path(directory)
        clock = clock if clock is not None else SystemClock()
        jitter = jitter if jitter is not None else JitterSource()
        topic_partition = TopicPartition.from_dir_name(path.name)
        try:
            segments, recovered, snapshot_names = load_segments(
                path,
                config,
                topic_partition=topic_partition,
                log_start_offset=log_start_offset,
                recovery_point=recovery_point,
                had_clean_shutdown=had_clean_shutdown,
                clock=clock,
                jitter=jitter,
            )
            log = cls(
                path,
                config,
                topic_partition=topic_partition,
                segments=segments,
                log_start_offset=log_start_offset,
                recovery_point=recovery_point,
                clock=clock,
                jitter=jitter,
                scheduler=scheduler,
                executor=executor,
                on_io_error=on_io_error,
                producer_state=ProducerStateManager(
                    path,
                    producer_id_expiration_ms=producer_id_expiration_ms,
                    name=str(topic_partition),
                    file_names=snapshot_names,
                ),
            )
            log._rebuild_producer_state(rebuild_txn_indexes=recovered)
            log._load_leader_epochs()
        except OSError as exc:
            raise KafkaStorageError(f"error while loading log: {exc}", path=path) from exc
        if had_clean_shutdown:
            log._recovery_point = log.log_end_offset
        return log

    # -- simple accessors -----------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def parent_dir(self) -> Path:
        """The log dir this partition's dir is in."""
        return self._parent_dir

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Swap in a new topic config; it applies from the next append or roll."""
        self._config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._next_offset_metadata

    @property
    def high_watermark(self) -> int:
        return self._high_watermark_metadata.message_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def last_stable_offset(self) -> int:
        """The first offset a read_committed consumer may not see yet: the first offset of
        the oldest transaction still open (or complete but with its marker not yet under
        the high watermark), else the high watermark."""
        first_unstable = self._producer_state.first_unstable_offset
        high_watermark = self.high_watermark
        if first_unstable is not None and first_unstable < high_watermark:
            # Retention or DeleteRecords may have removed the start of an open transaction
            # (Kafka deletes by the high watermark alone); nothing below the log start
            # offset can be read, so the bound is no lower than it.
            return max(first_unstable, self._log_start_offset)
        return high_watermark

    def _last_stable_offset_metadata(self) -> LogOffsetMetadata:
        """The last stable offset with its segment and position (cached: a read_committed
        fetch asks for it on every poll while a transaction is open)."""
        offset = self.last_stable_offset
        if offset == self.high_watermark:
            return self.fetch_high_watermark_metadata()
        cached = self._lso_metadata
        if cached is None or cached.message_offset != offset:
            cached = self.convert_to_offset_metadata(offset)
            self._lso_metadata = cached
        return cached

    def _on_high_watermark_changed(self) -> None:
        self.change_count += 1
        self._producer_state.on_high_watermark_updated(self.high_watermark)

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._leader_epochs

    def _load_leader_epochs(self) -> None:
        # The checkpoint may be ahead of a log recovered or truncated after a crash, or
        # behind a log start offset moved by retention: trim it to what the log holds.
        cache = LeaderEpochCache.load_file(self._leader_epochs.path)
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self._log_start_offset)
        self._leader_epochs = cache

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """A new leader epoch begins at ``start_offset`` (this replica became its leader)."""
        latest = self._leader_epochs.latest_epoch
        if leader_epoch >= 0 and (latest is None or leader_epoch > latest):
            self._leader_epochs.assign(leader_epoch, start_offset)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= ``leader_epoch``, where it ended) or
        (-1, -1) for an epoch this log has not seen."""
        return self._leader_epochs.end_offset_for(leader_epoch, self.log_end_offset)

    def remove_expired_producers(self) -> int:
        """Forget producers idle for producer.id.expiration.ms (the LogManager's periodic
        check); returns how many."""
        self._check_usable()
        return self._producer_state.remove_expired_producers(self._clock.milliseconds())

    def _rebuild_producer_state(self, rebuild_txn_indexes: Collection[int] = ()) -> None:
        """Load the newest snapshot at or below the LEO and replay the batch headers after
        it (all of the log without one). Blocking: at load and after a truncation.

        ``rebuild_txn_indexes``: base offsets of segments just recovered, whose
        ``.txnindex`` was emptied. Each entry needs the producer state as of its marker, so
        a separate replay, from a snapshot at or below the first of them, writes them back
        (Kafka rebuilds them the same way); the state kept is the one from the newest
        snapshot, as after any restart."""
        rebuild_producer_state(
            self._producer_state,
            self.segments_in_range,
            first_base_offset=self._base_offsets[0],
            directory=self._dir,
            name=str(self.topic_partition),
            end=self.log_end_offset,
            now=self._clock.milliseconds(),
            rebuild_txn_indexes=rebuild_txn_indexes,
        )
        self._lso_metadata = None

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self._recovery_point

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[self._base_offsets[-1]]

    @property
    def num_segments(self) -> int:
        return len(self._base_offsets)

    def log_segments(self) -> list[LogSegment]:
        """Every segment, oldest first (a copy: callers may hold it across appends)."""
        return [self._segments[b] for b in self._base_offsets]

    def segments_in_range(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """Segments that may hold offsets in [from_offset, to_offset), oldest first."""
        if from_offset > to_offset:
            raise ValueError(f"invalid range [{from_offset}, {to_offset})")
        first = max(bisect.bisect_right(self._base_offsets, from_offset) - 1, 0)
        end = bisect.bisect_left(self._base_offsets, to_offset)
        return [self._segments[b] for b in self._base_offsets[first:end]]

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the greatest base offset <= ``offset``."""
        position = bisect.bisect_right(self._base_offsets, offset)
        return self._segments[self._base_offsets[position - 1]] if position else None

    def higher_segment(self, base_offset: int) -> LogSegment | None:
        """The first segment with a base offset > ``base_offset``."""
        position = bisect.bisect_right(self._base_offsets, base_offset)
        if position < len(self._base_offsets):
            return self._segments[self._base_offsets[position]]
        return None

    def size(self) -> int:
        """Bytes of all segments' .log files."""
        return sum(s.size() for s in self._segments.values())

    @property
    def is_offline(self) -> bool:
        return self._offline

    def __repr__(self) -> str:
        return (
            f"Log({self.topic_partition}, start={self._log_start_offset}, "
            f"hw={self.high_watermark}, leo={self.log_end_offset}, "
            f"segments={len(self._base_offsets)})"
        )

    # -- I/O error handling ------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._offline:
            raise KafkaStorageError(
                f"log {self.topic_partition} is unavailable: its log dir is offline",
                path=self._dir,
            )
        if self._closed:
            raise LogClosedError(f"log {self.topic_partition} is closed", path=self._dir)

    def _io(self, what: str) -> _IoGuard:
        """Turn an I/O error into KafkaStorageError and report the log dir as failed.

        A plain object rather than a generator-based context manager: it wraps every append,
        where contextlib's overhead would show.
        """
        self._check_usable()
        return _IoGuard(self, what)

    def _report_io_error(self, error: BaseException) -> None:
        self._go_offline()
        if self._on_io_error is not None:
            self._on_io_error(self._parent_dir, error)

    def _go_offline(self) -> None:
        """The one place ``_offline`` becomes True (``offline_transitions`` counts it)."""
        if not self._offline:
            self._offline = True
            Log.offline_transitions += 1

    def mark_offline(self) -> None:
        """The log dir failed: every later call raises KafkaStorageError. Closes the fds."""
        if self._offline:
            return
        self._go_offline()
        for segment in self._segments.values():
            with contextlib.suppress(Exception):
                segment.close_handlers()

    # -- high watermark ----------------------------------------------------------------------------

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the high watermark, clamped to [log start offset, log end offset]; returns it.

        Followers call this with the leader's high watermark, which may be ahead of their own
        log end offset or behind their log start offset, hence the clamp. The position is
        kept only when the HW lands on the LEO (otherwise it is resolved lazily on read).
        """
        if high_watermark < self._log_start_offset:
            new = self._log_start_offset
        elif high_watermark > self.log_end_offset:
            new = self.log_end_offset
        else:
            new = high_watermark
        if new == self.log_end_offset:
            self._high_watermark_metadata = self._next_offset_metadata
        else:
            self._high_watermark_metadata = LogOffsetMetadata(new)
        self._on_high_watermark_changed()
        return new

    def maybe_increment_high_watermark(
        self, new_high_watermark: LogOffsetMetadata
    ) -> LogOffsetMetadata | None:
        """Advance the high watermark (leader side); it never moves back.

        Returns the old value when it moved, else None. The same offset on a newer segment
        also counts as a move, so that the stored position stays valid after a roll. Raises
        ValueError past the log end offset.
        """
        if new_high_watermark.message_offset > self.log_end_offset:
            raise ValueError(
                f"high watermark {new_high_watermark} update exceeds the log end offset "
                f"{self._next_offset_metadata} of {self.topic_partition}"
            )
        old = self._high_watermark_metadata
        if old.message_offset < new_high_watermark.message_offset or (
            old.message_offset == new_high_watermark.message_offset
            and not old.message_offset_only
            and not new_high_watermark.message_offset_only
            and old.on_older_segment(new_high_watermark)
        ):
            self._high_watermark_metadata = new_high_watermark
            self._on_high_watermark_changed()
            return old
        return None

    def fetch_high_watermark_metadata(self) -> LogOffsetMetadata:
        """The high watermark with its segment and position, resolving them if unknown."""
        self._check_usable()
        metadata = self._high_watermark_metadata
        if metadata.message_offset_only:
            resolved = self.convert_to_offset_metadata(metadata.message_offset)
            self._high_watermark_metadata = resolved
            if resolved.message_offset != metadata.message_offset:
                # A truncation inside a batch can leave the HW on no batch: resolved, it
                # lands on the next one, a move that fetch sessions must hear of.
                self._on_high_watermark_changed()
            metadata = resolved
        return metadata

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """The segment and position of the batch holding ``offset`` (OffsetOutOfRange if none)."""
        if offset == self.log_end_offset:
            return self._next_offset_metadata
        info = self.read(offset, 1, FetchIsolation.LOG_END, min_one_message=False)
        return info.fetch_offset_metadata

    def _update_log_end_offset(self, offset: int) -> None:
        self.change_count += 1
        active = self.active_segment
        self._next_offset_metadata = LogOffsetMetadata(offset, active.base_offset, active.size())
        if self.high_watermark >= offset:
            self._high_watermark_metadata = self._next_offset_metadata
            self._on_high_watermark_changed()
        if self._recovery_point > offset:
            self._recovery_point = offset

    def _update_log_start_offset(self, offset: int) -> None:
        self.change_count += 1
        self._log_start_offset = offset
        self._leader_epochs.truncate_from_start(offset)
        if self.high_watermark < offset:
            self.update_high_watermark(offset)
        if self._recovery_point < offset:
            self._recovery_point = offset

    # -- append -------------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: memoryview | bytearray,
        leader_epoch: int,
        *,
        validate_timestamps: bool = True,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        budget: DecompressionBudget | None = None,
    ) -> LogAppendInfo:
        """Validate the producer's batches, assign their offsets in place and append them.

        The twelve steps of Kafka's append, per batch and never per record: validate every
        batch (``storage.log_validator``: size, magic, CRC, record count, keys on compacted
        topics, ``max.message.bytes``, the topic's codec, the max timestamp from the records,
        timestamp bounds under CreateTime), check the producer state, then have the validated
        batches write into the caller's buffer the base offset (from the LEO), the partition
        leader epoch and, under LogAppendTime, the broker's time with the CRC recomputed;
        roll when a roll condition holds; append to the active segment; advance the LEO;
        flush when ``flush.messages`` unflushed records have built up. Batches rebuilt in the
        topic's codec go out in a new buffer; every other batch is appended from the caller's
        buffer without a copy.

        Control batches are refused (InvalidRecordError): transaction markers are the
        coordinator's, through ``append_txn_marker``. ``origin`` COORDINATOR is the group
        coordinator's transactional offset commits: a producer id without sequences.

        ``records`` must be writable (a bytearray or a writable memoryview), as the offsets
        are assigned in it. Nothing is written to disk if any batch is invalid. Raises
        CorruptRecordError / InvalidRecordError (records layer), RecordTooLargeError,
        RecordBatchTooLargeError, InvalidTimestampError, KafkaStorageError.
        """
        view = records if isinstance(records, memoryview) else memoryview(records)
        if view.readonly:
            raise ValueError("append_as_leader needs a writable buffer to assign offsets in")
        self._check_usable()
        with self._appending_guard:
            config = self._config
            now = self._clock.milliseconds()
            log_append_time = config.log_append_time
            validated = validate_batches(
                view,
                config,
                topic_partition=self.topic_partition,
                directory=self._dir,
                now=now,
                validate_timestamps=validate_timestamps,
                budget=budget,
            )
            producer_state = self._producer_state
            if validated.has_producer_id:
                # Before any offset is assigned: a rejected or duplicate append writes nothing.
                duplicate = producer_state.check_append(validated.headers, origin)
                if duplicate is not None:
                    return self._duplicate_append_info(duplicate, log_append_time)
            assigned = validated.apply(
                self.log_end_offset, leader_epoch, now, log_append_time=log_append_time
            )
            view = validated.view
            batch_count = validated.batch_count
            self._append_to_segment(
                view,
                assigned.first_offset,
                assigned.last_offset,
                assigned.max_timestamp,
                assigned.offset_of_max_timestamp,
                batch_count,
                now,
            )
            if validated.has_producer_id:
                producer_state.on_leader_append(
                    validated.headers, assigned.base_offsets, now if log_append_time else None
                )
            self.maybe_assign_epoch_start_offset(leader_epoch, assigned.first_offset)
            return _new_append_info(
                first_offset=assigned.first_offset,
                last_offset=assigned.last_offset,
                max_timestamp=assigned.max_timestamp,
                offset_of_max_timestamp=assigned.offset_of_max_timestamp,
                log_append_time=now if log_append_time else -1,
                log_start_offset=self._log_start_offset,
                record_count=validated.record_count,
                batch_count=batch_count,
                valid_bytes=view.nbytes,
                last_offset_of_first_batch=assigned.last_offset_of_first_batch,
            )

    def _duplicate_append_info(
        self, duplicate: BatchMetadata, log_append_time: bool
    ) -> LogAppendInfo:
        # What Kafka answers a retried batch: its first append's offsets and timestamp, and
        # nothing counted as appended now.
        return LogAppendInfo(
            first_offset=duplicate.first_offset,
            last_offset=duplicate.last_offset,
            max_timestamp=duplicate.timestamp,
            offset_of_max_timestamp=duplicate.last_offset,
            log_append_time=duplicate.timestamp if log_append_time else -1,
            log_start_offset=self._log_start_offset,
            record_count=0,
            batch_count=0,
            valid_bytes=0,
            last_offset_of_first_batch=duplicate.last_offset,
        )

    def append_txn_marker(self, marker: TxnMarker, leader_epoch: int) -> LogAppendInfo:
        """Write a COMMIT or ABORT marker for one producer's transaction (the coordinator's
        WriteTxnMarkers, as Kafka's leader appends it with the coordinator origin).

        The producer's open transaction, if any, completes at the marker's offset; an
        aborted one is added to the ``.txnindex`` of the segment the marker went into, with
        the last stable offset of that moment. Raises InvalidProducerEpochError or
        TransactionCoordinatorFencedError (nothing written), KafkaStorageError.
        """
        with self._io("writing a transaction marker"):
            state = self._producer_state
            state.check_marker(marker)
            now = self._clock.milliseconds()
            offset = self.log_end_offset
            batch = build_control_batch(
                ControlRecordType.COMMIT if marker.committed else ControlRecordType.ABORT,
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                coordinator_epoch=marker.coordinator_epoch,
                timestamp=now,
                base_offset=offset,
                partition_leader_epoch=leader_epoch,
            )
            self._append_to_segment(memoryview(batch), offset, offset, now, offset, 1)
            completed = state.on_marker_append(marker, offset, now)
            if completed is not None and completed.is_aborted:
                self._index_aborted(self.active_segment, completed)
            self.maybe_assign_epoch_start_offset(leader_epoch, offset)
            return LogAppendInfo(
                first_offset=offset,
                last_offset=offset,
                max_timestamp=now,
                offset_of_max_timestamp=offset,
                log_append_time=-1,
                log_start_offset=self._log_start_offset,
                record_count=1,
                batch_count=1,
                valid_bytes=len(batch),
                last_offset_of_first_batch=offset,
            )

    def _index_aborted(self, segment: LogSegment, completed: CompletedTxn) -> None:
        segment.txn_index.append(
            AbortedTxn(
                completed.producer_id,
                completed.first_offset,
                completed.last_offset,
                self._producer_state.last_stable_offset_after(completed),
            )
        )

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions overlapping [``start_offset``, ``upper_bound_offset``),
        from the ``.txnindex`` of the segment holding ``start_offset`` and those after it,
        until an entry shows that no later one can overlap (Kafka's search)."""
        self._check_usable()
        segment = self.floor_segment(start_offset)
        if segment is None:
            segment = self._segments[self._base_offsets[0]]
        found: list[AbortedTxn] = []
        with self._io("reading the transaction index"):
            while segment is not None:
                entries, complete = segment.txn_index.collect(start_offset, upper_bound_offset)
                found.extend(entries)
                if complete:
                    break
                segment = self.higher_segment(segment.base_offset)
        return found

    def aborted_transactions_for_read(self, info: FetchDataInfo) -> list[AbortedTxn]:
        """What a read_committed fetch returns beside ``info``: the aborted transactions that
        may overlap its batches (bounded by the next segment's base, or the log end, as
        Kafka's fallback bound)."""
        start = info.fetch_offset_metadata
        following = self.higher_segment(start.segment_base_offset)
        upper = following.base_offset if following is not None else self.log_end_offset
        return self.collect_aborted_transactions(start.message_offset, upper)

    def append_as_follower(self, records: memoryview | bytes | bytearray) -> LogAppendInfo:
        """Append batches whose offsets the leader assigned (replication, not producers).

        A partial batch at the end (a fetch response cut at its size limit) is dropped. The
        batches' offsets must strictly increase and the first must not be below the log end
        offset; a gap above it is allowed, as compaction leaves gaps. Raises
        OffsetsOutOfOrderError, UnexpectedAppendOffsetError, CorruptRecordError,
        RecordTooLargeError, KafkaStorageError. An empty buffer appends nothing.
        """
        view = records if isinstance(records, memoryview) else memoryview(records)
        with self._io("appending as follower"):
            batches, valid_bytes = _split_valid_prefix(view)
            if not batches:
                leo = self.log_end_offset
                return LogAppendInfo(
                    leo, leo - 1, NO_TIMESTAMP, -1, -1, self._log_start_offset, 0, 0, 0, -1
                )
            max_bytes = self._config.max_message_bytes
            previous_last = -1
            max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, -1
            record_count = 0
            for batch in batches:
                batch.ensure_valid()
                if batch.size_in_bytes > max_bytes:
                    raise RecordTooLargeError(
                        f"batch of {batch.size_in_bytes} bytes exceeds max.message.bytes "
                        f"{max_bytes} of {self.topic_partition}",
                        path=self._dir,
                    )
                base, last = batch.base_offset, batch.last_offset
                if base <= previous_last or last < base:
                    raise OffsetsOutOfOrderError(
                        f"out of order offsets in append to {self.topic_partition}: batch "
                        f"{base}-{last} after offset {previous_last}",
                        path=self._dir,
                    )
                previous_last = last
                if batch.max_timestamp > max_timestamp:
                    max_timestamp, offset_of_max_timestamp = batch.max_timestamp, last
                record_count += batch.record_count
            first_offset = batches[0].base_offset
            if first_offset < self.log_end_offset:
                raise UnexpectedAppendOffsetError(
                    f"unexpected offset in append to {self.topic_partition}: first offset "
                    f"{first_offset} is below the log end offset {self.log_end_offset}",
                    first_offset=first_offset,
                    last_offset=previous_last,
                    path=self._dir,
                )
            self._append_to_segment(
                view[:valid_bytes],
                first_offset,
                previous_last,
                max_timestamp,
                offset_of_max_timestamp,
                len(batches),
            )
            producer_state = self._producer_state
            for batch in batches:
                if batch.producer_id >= 0:
                    marker = decode_marker(batch) if batch.is_control else None
                    completed = producer_state.replay(batch.header(), marker)
                    if completed is not None and completed.is_aborted:
                        self._index_aborted(self.active_segment, completed)
                # The leader's epochs, as it stamped them: a follower's cache mirrors its.
                self.maybe_assign_epoch_start_offset(
                    batch.partition_leader_epoch, batch.base_offset
                )
            return LogAppendInfo(
                first_offset=first_offset,
                last_offset=previous_last,
                max_timestamp=max_timestamp,
                offset_of_max_timestamp=offset_of_max_timestamp,
                log_append_time=-1,
                log_start_offset=self._log_start_offset,
                record_count=record_count,
                batch_count=len(batches),
                valid_bytes=valid_bytes,
                last_offset_of_first_batch=batches[0].last_offset,
            )

    def _append_to_segment(
        self,
        view: memoryview,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        batch_count: int,
        now: int | None = None,
    ) -> None:
        size = view.nbytes
        if size > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"append of {size} bytes to {self.topic_partition} exceeds segment.bytes "
                f"{self._config.segment_bytes}",
                path=self._dir,
            )
        segment = self._maybe_roll(size, batch_count, first_offset, last_offset, max_timestamp, now)
        segment.append(
            largest_offset=last_offset,
            largest_timestamp=max_timestamp,
            shallow_offset_of_max_timestamp=offset_of_max_timestamp,
            records=view,
        )
        self._update_log_end_offset(last_offset + 1)
        # unflushed_messages, inline: every append asks.
        if last_offset + 1 - self._recovery_point >= self._config.flush_messages:
            self.flush()

    # -- roll -----------------------------------------------------------------------------------------

    def _maybe_roll(
        self,
        messages_size: int,
        batch_count: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        now: int | None = None,
    ) -> LogSegment:
        segment = self.active_segment
        config = self._config
        if segment.should_roll_for(
            config.segment_bytes,
            config.segment_ms,
            max_timestamp,
            last_offset,
            messages_size,
            self._clock.milliseconds() if now is None else now,
        ) or not _index_room_for(segment, batch_count, messages_size, config.index_interval_bytes):
            return self.roll(first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, LEO); returns it.

        The old active segment gets its final time index entry and trimmed files, and is
        flushed in the background (an executor thread) when a scheduler is present. Rolling
        an empty active segment at its own base offset is a no-op.
        """
        with self._io("rolling"):
            new_offset = max(expected_next_offset or 0, self.log_end_offset)
            active = self.active_segment
            if active.base_offset == new_offset and active.size() == 0:
                return active
            if new_offset in self._segments:
                raise StorageError(
                    f"cannot roll {self.topic_partition} to {new_offset}: a segment with that "
                    f"base offset already exists",
                    path=self._dir,
                )
            for stale in (
                log_file(self._dir, new_offset),
                offset_index_file(self._dir, new_offset),
                time_index_file(self._dir, new_offset),
            ):
                if stale.exists():
                    _log.warning("deleting stale file %s before rolling", stale)
                    stale.unlink()
            active.on_becoming_inactive_segment()
            segment = open_segment(
                self._dir, new_offset, self._config, self._clock, self._jitter, exists=False
            )
            self._add_segment(segment)
            self._update_log_end_offset(self.log_end_offset)
            # The producer state as of the new segment's base, so that a restart replays
            # from here instead of from the start of the log.
            snapshot = self._producer_state.take_snapshot(new_offset, sync=False)
            if self._scheduler is not None:
                self._scheduler.schedule(
                    f"flush-log-{self.topic_partition}",
                    lambda: self.flush_async(new_offset),
                )
                if snapshot is not None:
                    self._scheduler.schedule_blocking(
                        f"flush-producer-snapshot-{self.topic_partition}",
                        lambda: fsync_file(snapshot),
                        self._executor,
                    )
            return segment

    def _add_segment(self, segment: LogSegment) -> None:
        base = segment.base_offset
        if base not in self._segments:
            bisect.insort(self._base_offsets, base)
        self._segments[base] = segment

    # -- compaction ------------------------------------------------------------------------------------

    def replace_segments(
        self,
        base_offset: int,
        old_segments: Sequence[LogSegment],
        old_sizes: Sequence[int],
        *,
        crash_point: str | None = None,
    ) -> bool:
        """Swap the cleaned segment ``<base_offset>.log.cleaned`` (and its indexes) in for the
        segments it was made from, as Kafka's ``replaceSegments`` does; True when done.

        The renames keep every crash recoverable (``log_loader.remove_temp_files_and_complete_swaps``):
        the cleaned files become ``.swap`` first (a crash now: the swap is completed at load,
        replacing what its offsets cover), the old segments leave the map and become
        ``.deleted`` (their files are removed after ``file.delete.delay.ms``, so reads of
        their slices in flight still work), then the ``.swap`` files lose their suffix. Nothing
        awaits in between. When the log changed while the cleaner read it (an old segment
        gone, grown, truncated, or now the active one; the log closed or offline) nothing is
        swapped, the cleaned files are deleted and the answer is False.
        """
        active_base = self._base_offsets[-1] if self._base_offsets else None
        if (
            self._closed
            or self._offline
            or not old_segments
            or old_segments[0].base_offset != base_offset
            or any(
                self._segments.get(segment.base_offset) is not segment
                or segment.size() != size
                or segment.base_offset == active_base
                for segment, size in zip(old_segments, old_sizes, strict=True)
            )
        ):
            _delete_cleaned_files(self._dir, base_offset)
            return False
        old = list(old_segments)
        with self._io("swapping in a cleaned segment"):
            cleaned = LogSegment.open(
                self._dir,
                base_offset,
                index_interval_bytes=self._config.index_interval_bytes,
                max_index_size=self._config.segment_index_bytes,
                clock=self._clock,
                file_suffix=CLEANED_FILE_SUFFIX,
                file_already_exists=True,
            )
            cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
            _maybe_crash(crash_point, CRASH_AFTER_SWAP_RENAME)
            self._remove_and_delete_segments(old, delete_snapshots=False)
            _maybe_crash(crash_point, CRASH_DURING_SWAP)
            cleaned.change_file_suffixes(SWAP_FILE_SUFFIX, "")
            self._add_segment(cleaned)
            release_indexes(cleaned)
        return True

    # -- read -----------------------------------------------------------------------------------------

    def read_batches_to_end(self, chunk_bytes: int) -> Iterator[RecordBatch]:
        """Every batch from the one holding the log start offset to the log end, read
        ``chunk_bytes`` at a time: how a coordinator loads its internal topic's partition.
        Up to the log end, not the high watermark, as Kafka loads: after a crash the high
        watermark comes from a checkpoint that may lag what the log holds. The first batch
        may begin below the log start offset; its records there are the caller's to skip."""
        offset = self.log_start_offset
        while offset < self.log_end_offset:
            info = self.read(offset, chunk_bytes, FetchIsolation.LOG_END, min_one_message=True)
            data = info.records.read() if info.records is not None else b""
            if not data:
                return
            next_offset = offset
            for batch in split_batches(data):
                if batch.next_offset > offset:
                    yield batch
                next_offset = max(next_offset, batch.next_offset)
            if next_offset <= offset:
                return
            offset = next_offset

    def read(
        self,
        start_offset: int,
        max_length: int,
        isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
        *,
        min_one_message: bool = False,
    ) -> FetchDataInfo:
        """Slice up to ``max_length`` bytes of whole batches starting with the one holding
        ``start_offset``, up to the limit ``isolation`` sets.

        The slice begins at the batch holding ``start_offset``, which may start before it:
        the reader skips the offsets below the one it asked for. With ``min_one_message`` the
        first batch comes whole even if larger than ``max_length`` (KIP-74). Reading exactly
        at the limit (the LEO, HW or LSO) returns an empty slice.

        Raises OffsetOutOfRangeError below the log start offset or above the LEO.
        """
        self._check_usable()
        end = self._next_offset_metadata
        segment = self.floor_segment(start_offset)
        if (
            start_offset > end.message_offset
            or start_offset < self._log_start_offset
            or (segment is None)
        ):
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is out of range for {self.topic_partition}: "
                f"log start offset {self._log_start_offset}, log end offset "
                f"{end.message_offset}",
                path=self._dir,
            )
        if isolation is FetchIsolation.LOG_END:
            max_metadata = end
        elif isolation is FetchIsolation.TXN_COMMITTED:
            max_metadata = self._last_stable_offset_metadata()
        else:
            max_metadata = self.fetch_high_watermark_metadata()
        if start_offset == max_metadata.message_offset:
            return self._empty_read(max_metadata)
        if start_offset > max_metadata.message_offset:
            return self._empty_read(self.convert_to_offset_metadata(start_offset))
        with self._io("reading"):
            while segment is not None:
                if max_metadata.segment_base_offset == segment.base_offset:
                    max_position = max_metadata.relative_position_in_segment
                else:
                    max_position = segment.size()
                info = segment.read(start_offset, max_length, max_position, min_one_message)
                if info is not None:
                    return info
                segment = self.higher_segment(segment.base_offset)
            return self._empty_read(self._next_offset_metadata)

    def _empty_read(self, metadata: LogOffsetMetadata) -> FetchDataInfo:
        segment = self._segments.get(metadata.segment_base_offset, self.active_segment)
        position = max(metadata.relative_position_in_segment, 0)
        return FetchDataInfo(metadata, segment.log.slice(position, 0))

    # -- offsets by timestamp ----------------------------------------------------------------------------

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: earliest (-2), latest (-1), max timestamp (-3) or the first record
        with a timestamp >= ``target_timestamp``; None when no record is that recent.

        Segments are searched by their largest timestamp, then within the one found
        through its time index.
        """
        self._check_usable()
        if target_timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self._log_start_offset)
        if target_timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self.log_end_offset)
        with self._io("looking up an offset by timestamp"):
            segments = self.log_segments()
            if target_timestamp == MAX_TIMESTAMP:
                best: LogSegment | None = None
                for segment in segments:
                    if best is None or segment.max_timestamp_so_far() > best.max_timestamp_so_far():
                        best = segment
                if best is None or best.max_timestamp_so_far() < 0:
                    return None
                found = best.find_offset_by_timestamp(best.max_timestamp_so_far(), best.base_offset)
                if found is None:
                    return TimestampAndOffset(
                        best.max_timestamp_so_far(), best.shallow_offset_of_max_timestamp_so_far()
                    )
                return found
            if target_timestamp < 0:
                raise ValueError(f"invalid target timestamp {target_timestamp}")
            for segment in segments:
                if segment.largest_timestamp() >= target_timestamp:
                    found = segment.find_offset_by_timestamp(
                        target_timestamp, max(self._log_start_offset, segment.base_offset)
                    )
                    if found is not None:
                        return found
            return None

    # -- flush --------------------------------------------------------------------------------------------

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, up_to_offset) (default:
        the LEO) and move the recovery point there. Blocking; see ``flush_async``."""
        target = self.log_end_offset if up_to_offset is None else up_to_offset
        if target <= self._recovery_point:
            return
        with self._io("flushing"):
            segments = self.segments_in_range(self._recovery_point, target)
            for segment in segments:
                segment.flush()
            self._mark_flushed(target)
            self._release_inactive_indexes(segments)

    async def flush_async(self, up_to_offset: int | None = None) -> None:
        """``flush`` with the fsyncs in the executor, keeping the event loop free.

        The segments are chosen on the loop, flushed in a thread (appends may go on: the
        fsyncs touch only bytes already written) and the recovery point moves back on the
        loop, never past the LEO of that moment (a truncation may have happened meanwhile).
        """
        if self._closed or self._offline:
            return
        target = self.log_end_offset if up_to_offset is None else up_to_offset
        if target <= self._recovery_point:
            return
        segments = self.segments_in_range(self._recovery_point, target)
        loop = asyncio.get_running_loop()
        failures = await loop.run_in_executor(self._executor, _try_flush_segments, segments)
        if self._closed or self._offline:
            return  # closed or deleted while the fsyncs ran: their errors mean nothing now
        for segment, error in failures:
            if self._segments.get(segment.base_offset) is segment:
                with self._io("flushing"):
                    raise error
            # A segment deleted meanwhile (retention, truncation) may fail its fsync.
        self._mark_flushed(target)
        self._release_inactive_indexes(segments)

    def release_index_maps(self) -> int:
        """Unmap every inactive segment's indexes that a lookup mapped again; returns how many
        segments had any. Called by the LogManager's periodic pass: ListOffsets by timestamp
        and reads of old data map indexes on demand, and they would otherwise stay mapped."""
        self._check_usable()
        released = 0
        active = self.active_segment
        for segment in self._segments.values():
            if segment is not active and (
                segment.offset_index.is_open or segment.time_index.is_open
            ):
                with self._io("releasing index maps"):
                    release_indexes(segment)
                released += 1
        return released

    def park_index_maps(self) -> None:
        """Unmap every index this log holds mapped, the active segment's included (entry
        counts kept; each maps again on first use). Start-up loads logs in worker threads,
        where the process's bound on index maps does not act; a log handed to the loop
        holding none keeps a broker of 10,000 partitions within its file descriptors."""
        for segment in self._segments.values():
            segment.offset_index.park()
            segment.time_index.park()

    def _release_inactive_indexes(self, segments: Sequence[LogSegment]) -> None:
        """Unmap the (flushed) indexes of segments that are no longer active.

        A log that kept every index mapped would hold two maps per segment (and, without
        the C extension, two file descriptors besides the .log's) and run out of them
        long before Kafka's thousands of segments. A released index is mapped again on
        its next lookup.
        """
        active = self.active_segment
        for segment in segments:
            if segment is not active and self._segments.get(segment.base_offset) is segment:
                release_indexes(segment)

    def _mark_flushed(self, target: int) -> None:
        target = min(target, self.log_end_offset)
        if target > self._recovery_point:
            self._recovery_point = target
        self.last_flush_time_ms = self._clock.milliseconds()

    # -- truncation ---------------------------------------------------------------------------------------

    def truncate_to(self, target_offset: int) -> bool:
        """Remove every batch at or after ``target_offset``; True if anything was removed.

        Used by followers to cut a divergent tail. Truncation works on whole batches: the
        batch holding ``target_offset`` goes whole, so callers pass a batch boundary (a
        leader epoch's end offset). Later segments are deleted (asynchronously); the high
        watermark and recovery point come down with the LEO.

        Example: segments at 0 (offsets 0-99) and 100 (100-149); truncate_to(80) deletes
        segment 100, cuts segment 0 before the batch holding 80, and sets the LEO to 80.
        """
        if target_offset < 0:
            raise ValueError(f"cannot truncate {self.topic_partition} to {target_offset}")
        with self._io("truncating"):
            if target_offset >= self.log_end_offset:
                return False
            if self._base_offsets[0] > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            doomed = [self._segments[b] for b in self._base_offsets if b > target_offset]
            self._remove_and_delete_segments(doomed)
            self.active_segment.truncate_to(target_offset)
            self._update_log_end_offset(target_offset)
            self._log_start_offset = min(target_offset, self._log_start_offset)
            self._rebuild_producer_state()
            self._leader_epochs.truncate_from_end(target_offset)
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at ``new_offset`` (log start = HW = LEO)."""
        if new_offset < 0:
            raise ValueError(f"cannot start {self.topic_partition} at {new_offset}")
        with self._io("truncating fully"):
            self._remove_and_delete_segments(self.log_segments())
            self._producer_state.truncate_fully()
            self._leader_epochs.clear()
            segment = open_segment(
                self._dir, new_offset, self._config, self._clock, self._jitter, exists=False
            )
            self._add_segment(segment)
            self._update_log_end_offset(new_offset)
            self._log_start_offset = new_offset
            self._high_watermark_metadata = self._next_offset_metadata
            self._recovery_point = min(self._recovery_point, new_offset)

    # -- prefix deletion: DeleteRecords and retention -------------------------------------------------------

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """Raise the log start offset (DeleteRecords); True if it moved. It never moves back.

        Raises OffsetOutOfRangeError past the high watermark: records consumers may not see
        yet cannot be deleted. Segments wholly below the new start go at the next retention
        check (or at once through ``delete_records``).
        """
        self._check_usable()
        if new_log_start_offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot increment the log start offset of {self.topic_partition} to "
                f"{new_log_start_offset}: it is above the high watermark {self.high_watermark}",
                path=self._dir,
            )
        if new_log_start_offset > self._log_start_offset:
            self._update_log_start_offset(new_log_start_offset)
            return True
        return False

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to ``offset`` and drop the segments now
        wholly below it; returns the (new) log start offset."""
        self.maybe_increment_log_start_offset(offset)
        self.delete_log_start_offset_breached_segments()
        return self._log_start_offset

    def delete_old_segments(self) -> int:
        """Apply retention; returns how many segments were deleted.

        With ``cleanup.policy`` containing ``delete``: segments older than ``retention.ms``
        (by their largest timestamp), segments beyond ``retention.bytes`` (oldest first) and
        segments below the log start offset; otherwise only the last. A segment is deleted
        only if all of it is below the high watermark, and the active segment never while
        empty; if every segment goes, a new empty one is rolled first.
        """
        if self._config.delete_enabled:
            return (
                self.delete_retention_ms_breached_segments()
                + self.delete_retention_size_breached_segments()
                + self.delete_log_start_offset_breached_segments()
            )
        return self.delete_log_start_offset_breached_segments()

    def delete_retention_ms_breached_segments(self) -> int:
        retention_ms = self._config.retention_ms
        if retention_ms < 0:
            return 0
        now = self._clock.milliseconds()

        def breached(segment: LogSegment, next_segment: LogSegment | None) -> bool:
            return now - segment.largest_timestamp() > retention_ms

        return self._delete_old_segments(breached, f"retention.ms {retention_ms}")

    def delete_retention_size_breached_segments(self) -> int:
        retention_bytes = self._config.retention_bytes
        if retention_bytes < 0:
            return 0
        excess = self.size() - retention_bytes
        if excess <= 0:
            return 0

        def breached(segment: LogSegment, next_segment: LogSegment | None) -> bool:
            nonlocal excess
            size = segment.size()
            if excess - size >= 0:
                excess -= size
                return True
            return False

        return self._delete_old_segments(breached, f"retention.bytes {retention_bytes}")

    def delete_log_start_offset_breached_segments(self) -> int:
        start = self._log_start_offset

        def breached(segment: LogSegment, next_segment: LogSegment | None) -> bool:
            return next_segment is not None and next_segment.base_offset <= start

        return self._delete_old_segments(breached, f"log start offset {start}")

    def deletable_segments(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool]
    ) -> list[LogSegment]:
        """The oldest segments, in order, while ``predicate`` holds, all of each segment is
        below the high watermark, and the segment is not the empty active one."""
        result: list[LogSegment] = []
        high_watermark = self.high_watermark
        bases = self._base_offsets
        for position, base in enumerate(bases):
            segment = self._segments[base]
            if position + 1 < len(bases):
                next_segment: LogSegment | None = self._segments[bases[position + 1]]
                upper_bound = bases[position + 1]
                last_and_empty = False
            else:
                next_segment = None
                upper_bound = self.log_end_offset
                last_and_empty = segment.size() == 0
            if (
                high_watermark >= upper_bound
                and not last_and_empty
                and predicate(segment, next_segment)
            ):
                result.append(segment)
            else:
                break
        return result

    def _delete_old_segments(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], reason: str
    ) -> int:
        with self._io("deleting segments"):
            deletable = self.deletable_segments(predicate)
            if not deletable:
                return 0
            _log.info(
                "%s: deleting segments %s (%s)",
                self.topic_partition,
                [s.base_offset for s in deletable],
                reason,
            )
            if len(deletable) == len(self._base_offsets):
                self.roll()
            self._remove_and_delete_segments(deletable)
            first = self._base_offsets[0]
            if first > self._log_start_offset:
                self._update_log_start_offset(first)
            return len(deletable)

    def _remove_and_delete_segments(
        self, segments: Sequence[LogSegment], *, delete_snapshots: bool = True
    ) -> None:
        """Take segments out of the map, rename them ``.deleted`` and delete their files
        after ``file.delete.delay.ms`` (so in-flight fetches of their slices still work).
        Producer snapshots named after them go too, unless the segments were replaced by a
        cleaned one (their offsets are still in the log)."""
        if not segments:
            return
        for segment in segments:
            if self._segments.get(segment.base_offset) is segment:
                del self._segments[segment.base_offset]
                index = bisect.bisect_left(self._base_offsets, segment.base_offset)
                del self._base_offsets[index]
        self._lso_metadata = None
        hw = self._high_watermark_metadata
        if not hw.message_offset_only and hw.segment_base_offset not in self._segments:
            # The HW's cached position pointed into a segment that is going away.
            self._high_watermark_metadata = LogOffsetMetadata(hw.message_offset)
        snapshots: list[Path] = []
        for segment in segments:
            segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
            if not delete_snapshots:
                continue
            # A snapshot named after a deleted segment goes with it, as in Kafka.
            snapshot = self._producer_state.mark_snapshot_for_deletion(segment.base_offset)
            if snapshot is not None:
                snapshots.append(snapshot)
        doomed = list(segments)
        if self._scheduler is not None:
            self._scheduler.schedule_blocking(
                f"delete-file-{self.topic_partition}",
                lambda: _delete_segment_files(doomed, snapshots),
                self._executor,
                delay_ms=self._config.file_delete_delay_ms,
            )
        else:
            _delete_segment_files(doomed, snapshots)

    # -- lifecycle ------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Write the producer state snapshot at the LEO, close every segment (writing their roll
        entries). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._offline:
            return
        errors: list[BaseException] = []
        try:
            # Kafka's clean shutdown: the next load starts from this and replays nothing.
            self._producer_state.take_snapshot(self.log_end_offset, sync=True)
        except OSError as exc:
            errors.append(exc)
        for segment in self.log_segments():
            try:
                segment.close()
            except (OSError, StorageError) as exc:
                errors.append(exc)
        if errors:
            error = KafkaStorageError(
                f"error while closing {self.topic_partition}: {errors[0]}", path=self._dir
            )
            self._report_io_error(error)
            raise error from errors[0]

    async def snapshot_for_shutdown(self) -> None:
        """Write the clean-shutdown producer snapshot in the executor, ahead of ``close``.

        A broker of thousands of partitions would otherwise fsync one snapshot after another
        on the event loop at shutdown; here the manager runs them side by side. Only for
        shutdown: nothing may append to the log meanwhile. A failure is left to ``close``,
        which tries again and reports it with the log's path.
        """
        if self._closed or self._offline:
            return
        offset = self.log_end_offset
        loop = asyncio.get_running_loop()
        with contextlib.suppress(OSError):
            await loop.run_in_executor(
                self._executor,
                functools.partial(self._producer_state.take_snapshot, offset, sync=True),
            )

    def close_handlers(self) -> None:
        """Release every fd and map without writing (the log dir failed)."""
        self._closed = True
        for segment in self.log_segments():
            with contextlib.suppress(Exception):
                segment.close_handlers()

    def delete(self) -> None:
        """Close the log and delete its directory with every file in it. Blocking."""
        segments = self.log_segments()
        self._closed = True
        for segment in segments:
            with contextlib.suppress(Exception):
                segment.close_handlers()
        self._segments.clear()
        self._base_offsets.clear()
        try:
            remove_tree(self._dir)
        except OSError as exc:
            error = KafkaStorageError(f"error while deleting log: {exc}", path=self._dir)
            self._report_io_error(error)
            raise error from exc


# -- helpers ----------------------------------------------------------------------------------------------


class _IoGuard:
    __slots__ = ("log", "what")

    def __init__(self, log: Log, what: str) -> None:
        self.log = log
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            return
        log = self.log
        if isinstance(exc, PartitionIoError):
            return  # this operation's failure only (an inner guard made it one)
        if isinstance(exc, KafkaStorageError):
            log._report_io_error(exc)
        elif isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
            # mmap of an index refused (address space, overcommit): not the disk's failure.
            raise PartitionIoError(
                f"error while {self.what} for {log.topic_partition}: {exc.strerror or exc}",
                path=log.dir,
            ) from exc
        elif isinstance(exc, OSError):
            error = KafkaStorageError(
                f"error while {self.what} for {log.topic_partition}: {exc.strerror or exc}",
                path=log.dir,
            )
            log._report_io_error(error)
            raise error from exc


def _index_room_for(
    segment: LogSegment, batch_count: int, messages_size: int, index_interval_bytes: int
) -> bool:
    """Whether the segment's indexes can take the entries an append may add.

    The segment indexes per batch (so that recovery rebuilds identical indexes), so one
    multi-batch append may add several entries: at most one per batch and one per
    ``index.interval.bytes`` written. ``should_roll`` only asks "is the index full now?",
    which is enough for one entry per append, as in Kafka, but not here.
    """
    if batch_count <= 1:
        return True
    needed = min(batch_count, messages_size // (index_interval_bytes + 1) + 1)
    offset_index, time_index = segment.offset_index, segment.time_index
    # The time index keeps its last slot for the entry written when the segment rolls.
    return (
        offset_index.max_entries - offset_index.entries >= needed
        and time_index.max_entries - 1 - time_index.entries >= needed
    )


def _split_valid_prefix(view: memoryview) -> tuple[list[RecordBatch], int]:
    """Whole batches at the start of ``view`` and their total size; a partial tail is cut."""
    batches: list[RecordBatch] = []
    position, end = 0, view.nbytes
    while position < end:
        size = peek_batch_size(view, position)
        if size is None or position + size > end:
            break
        batches.append(RecordBatch(view[position : position + size]))
        position += size
    return batches, position


def _delete_cleaned_files(directory: Path, base_offset: int) -> None:
    for path in (
        log_file(directory, base_offset, CLEANED_FILE_SUFFIX),
        offset_index_file(directory, base_offset, CLEANED_FILE_SUFFIX),
        time_index_file(directory, base_offset, CLEANED_FILE_SUFFIX),
    ):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


# Steps of ``replace_segments`` at which a crash test may have the broker killed.
CRASH_AFTER_SWAP_RENAME: Final = "after-swap-rename"
CRASH_DURING_SWAP: Final = "during-swap"


def _maybe_crash(crash_point: str | None, step: str) -> None:
    if crash_point == step:
        os.kill(os.getpid(), signal.SIGKILL)


def _try_flush_segments(
    segments: Sequence[LogSegment],
) -> list[tuple[LogSegment, BaseException]]:
    """fsync each segment (in a worker thread); the failures go back to the loop to judge."""
    failures: list[tuple[LogSegment, BaseException]] = []
    for segment in segments:
        try:
            segment.flush()
        except (OSError, StorageError, ValueError) as exc:
            # ValueError: a map closed under us by a concurrent close or deletion.
            failures.append((segment, exc))
    return failures


def _delete_segment_files(segments: Sequence[LogSegment], snapshots: Sequence[Path] = ()) -> None:
    for segment in segments:
        try:
            segment.close_handlers()
            segment.delete_if_exists()
        except (OSError, StorageError):
            _log.exception("error while deleting the files of %s", segment)
    for snapshot in snapshots:
        try:
            snapshot.unlink(missing_ok=True)
        except OSError:
            _log.exception("error while deleting %s", snapshot)


def remove_tree(directory: Path) -> None:
    """Delete a directory and everything in it (blocking; symlinks are not followed)."""
    if not directory.exists():
        return
    for child in directory.iterdir():
        if child.is_dir() and not child.is_symlink():
            remove_tree(child)
        else:
            child.unlink(missing_ok=True)
    directory.rmdir()


__all__ = [
    "FetchDataInfo",
    "FetchIsolation",
    "InvalidTimestampError",
    "Log",
    "LogAppendInfo",
    "LogClosedError",
    "LogOffsetMetadata",
    "OffsetsOutOfOrderError",
    "RecordBatchTooLargeError",
    "UnexpectedAppendOffsetError",
]
