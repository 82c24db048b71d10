"""LogCleaner: which compacted log to clean next, running it off the loop, swapping it in.

Owns what Kafka splits between ``LogCleaner`` and ``LogCleanerManager``: the per-log-dir
``cleaner-offset-checkpoint`` (each compacted log's first dirty offset, Kafka's text format),
choosing the dirtiest log whose dirty ratio passes ``min.cleanable.dirty.ratio`` (or whose
oldest dirty record is older than ``max.compaction.lag.ms``, or whose kept tombstones passed
their delete horizon), handing the work to worker processes (``josefk.storage.cleaner``, one
per ``log.cleaner.threads``, so the broker's event loop and GIL stay free), swapping the
result in (``Log.replace_segments``) and the figures Kafka's cleaner metrics report.

The section of a log that may be cleaned::

    log start        first dirty offset       first uncleanable offset      active segment
    |  clean (done)  |  dirty: mapped, then   |  too new: min.compaction.lag.ms,  |
    |                |  cleaned with the rest |  above the last stable offset,    |
                                              |  or in the active segment         |

Concurrency: one event loop. Choosing a log, taking its snapshot and swapping the result in
run on the loop without awaiting in between (the Log's contract); only the cleaning itself
runs elsewhere, reading segments the Log no longer appends to. A Log changed meanwhile
(retention, truncation, deletion) makes ``replace_segments`` refuse the result, and the next
run starts afresh.

Imports josefk.config.topic and the rest of josefk.storage; never josefk.protocol,
josefk.broker or josefk.metrics.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import math
import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from josefk.storage.checkpoint import OffsetCheckpointFile
from josefk.storage.cleaner import (
    CleanerJob,
    CleanerResult,
    SegmentSnapshot,
    clean_log,
    die_with_parent,
    map_capacity,
    remove_cleaned_files,
)
from josefk.storage.errors import StorageError
from josefk.storage.log import Log
from josefk.storage.offsets import TopicPartition
from josefk.storage.segment import LogSegment
from josefk.util.clock import Clock
from josefk.util.scheduler import ScheduledTask, Scheduler

_log = logging.getLogger(__name__)

CLEANER_CHECKPOINT: Final = "cleaner-offset-checkpoint"
LONG_MAX: Final = (1 << 63) - 1
# For crash tests: the step of cleaning at which the broker is SIGKILLed (see
# ``josefk.storage.cleaner`` and ``Log.replace_segments`` for the steps).
# Not JOSEFK_*: that prefix is the broker's configuration.
CRASH_POINT_ENV: Final = "JOSEFKTEST_CLEANER_CRASH_POINT"


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings, with Kafka's defaults."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134_217_728
    io_buffer_load_factor: float = 0.9
    io_max_bytes_per_second: float = math.inf
    backoff_ms: int = 15_000


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log's sections at one moment, and whether it may be cleaned now."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool  # max.compaction.lag.ms passed for its oldest dirty record
    tombstones_expired: bool  # kept tombstones passed their delete horizon

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def eligible(self) -> bool:
        if self.cleanable_bytes > 0 and (
            self.needs_compaction_now
            or self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio
        ):
            return True
        return self.tombstones_expired


@dataclass(slots=True)
class CleanerStatus:
    """What the cleaner metrics report (Kafka's names in comments)."""

    max_dirty_percent: float = 0.0  # LogCleanerManager max-dirty-percent
    recopy_percent: float = 0.0  # LogCleaner cleaner-recopy-percent (last run)
    max_clean_time_secs: float = 0.0  # LogCleaner max-clean-time-secs (last run)
    max_buffer_utilization_percent: float = 0.0  # LogCleaner max-buffer-utilization-percent
    last_run_ms: int | None = None  # for LogCleanerManager time-since-last-run-ms
    uncleanable_partitions: int = 0  # LogCleanerManager uncleanable-partitions-count
    runs: int = 0
    bytes_read: int = 0
    bytes_written: int = 0


def log_to_clean(log: Log, checkpoint_offset: int | None, now_ms: int) -> LogToClean:
    """The sections of ``log`` now, as Kafka's ``LogCleanerManager.cleanableOffsets`` finds
    them: a checkpoint outside [log start, log end] (truncated, deleted records) restarts
    from the log start offset."""
    config = log.config
    segments = log.log_segments()
    log_start = log.log_start_offset
    first_dirty = log_start
    if checkpoint_offset is not None and log_start <= checkpoint_offset <= log.log_end_offset:
        first_dirty = checkpoint_offset
    uncleanable = min(segments[-1].base_offset, log.last_stable_offset)
    inactive = segments[:-1]
    if config.min_compaction_lag_ms > 0:
        for segment in inactive:
            if segment.base_offset >= uncleanable:
                break
            if segment.largest_timestamp() > now_ms - config.min_compaction_lag_ms:
                uncleanable = min(uncleanable, max(segment.base_offset, first_dirty))
                break
    uncleanable = max(uncleanable, first_dirty)
    clean_bytes = cleanable_bytes = 0
    first_dirty_segment: LogSegment | None = None
    for position, segment in enumerate(inactive):
        next_base = segments[position + 1].base_offset
        if next_base <= first_dirty:
            clean_bytes += segment.size()
        elif segment.base_offset < uncleanable:
            cleanable_bytes += segment.size()
            if first_dirty_segment is None:
                first_dirty_segment = segment
    needs_now = False
    if config.max_compaction_lag_ms < LONG_MAX and first_dirty_segment is not None:
        first_timestamp = first_dirty_segment.get_first_batch_timestamp()
        needs_now = first_timestamp >= 0 and now_ms - first_timestamp > config.max_compaction_lag_ms
    return LogToClean(
        log=log,
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=uncleanable,
        clean_bytes=clean_bytes,
        cleanable_bytes=cleanable_bytes,
        needs_compaction_now=needs_now,
        tombstones_expired=False,
    )


class LogCleaner:
    """Cleans the compacted logs of a broker, ``log.cleaner.threads`` at a time.

    ``startup`` reads the checkpoints and schedules a pass every ``log.cleaner.backoff.ms``;
    a pass cleans logs until none is eligible. ``clean_once`` is one round (tests call it).
    ``executor`` runs ``clean_log``: by default a pool of worker processes started on first
    use; tests may give a thread pool.
    """

    def __init__(
        self,
        config: CleanerConfig,
        *,
        logs: Callable[[], Iterable[Log]],
        clock: Clock,
        scheduler: Scheduler | None = None,
        io_executor: concurrent.futures.Executor | None = None,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        self._config = config
        self._logs = logs
        self._clock = clock
        self._scheduler = scheduler
        self._io_executor = io_executor
        self._executor = executor
        self._own_executor = executor is None
        self._checkpoints: dict[TopicPartition, int] = {}
        # Logs being cleaned now; the delete horizon of each log's kept tombstones.
        self._in_progress: set[TopicPartition] = set()
        self._delete_horizons: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()
        self._task: ScheduledTask | None = None
        self._pass: asyncio.Task[None] | None = None
        self._stopped = False
        self.status = CleanerStatus()
        self._crash_point = os.environ.get(CRASH_POINT_ENV) or None

    # -- lifecycle ------------------------------------------------------------------------------

    async def startup(self, log_dirs: Sequence[Path]) -> None:
        loop = asyncio.get_running_loop()
        for log_dir in log_dirs:
            checkpoint = OffsetCheckpointFile(Path(log_dir) / CLEANER_CHECKPOINT)
            try:
                offsets = await loop.run_in_executor(self._io_executor, checkpoint.read)
            except StorageError as exc:
                # Losing it costs a full re-clean, never data: start from the log start.
                _log.warning("ignoring %s: %s", checkpoint.path, exc)
                continue
            self._checkpoints.update(offsets)
        if self._config.enable and self._scheduler is not None and self._config.backoff_ms > 0:
            self._task = self._scheduler.schedule(
                "kafka-log-cleaner",
                self._tick,
                delay_ms=self._config.backoff_ms,
                period_ms=self._config.backoff_ms,
            )

    @property
    def config(self) -> CleanerConfig:
        return self._config

    def reconfigure(self, config: CleanerConfig) -> None:
        """Take new settings (dynamic broker configs) without a restart. ``enable`` stays
        as started. A new thread count takes a new worker pool from the next cleaning on
        (cleanings under way finish in the old one); a new backoff reschedules the passes;
        the other settings are read by each cleaning."""
        old = self._config
        self._config = dataclasses.replace(config, enable=old.enable)
        if config.threads != old.threads and self._own_executor and self._executor is not None:
            executor = self._executor
            self._executor = None
            executor.shutdown(wait=False)
        if config.backoff_ms != old.backoff_ms and self._task is not None:
            self._task.cancel()
            self._task = None
            if self._scheduler is not None and config.backoff_ms > 0 and not self._stopped:
                self._task = self._scheduler.schedule(
                    "kafka-log-cleaner",
                    self._tick,
                    delay_ms=config.backoff_ms,
                    period_ms=config.backoff_ms,
                )

    async def shutdown(self) -> None:
        """Stop cleaning: a cleaning under way is abandoned (its ``.cleaned`` files are
        removed at the next load), the checkpoints stay as last written."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
        if self._pass is not None and not self._pass.done():
            self._pass.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._pass
        if self._own_executor and self._executor is not None:
            executor = self._executor
            self._executor = None
            if isinstance(executor, concurrent.futures.ProcessPoolExecutor):
                # A worker in the middle of a large log would hold the shutdown up.
                for process in list(getattr(executor, "_processes", {}).values()):
                    with contextlib.suppress(Exception):
                        process.kill()
            executor.shutdown(wait=False, cancel_futures=True)

    def _tick(self) -> None:
        if self._stopped or (self._pass is not None and not self._pass.done()):
            return
        self._pass = asyncio.get_running_loop().create_task(self._run_pass())

    async def _run_pass(self) -> None:
        while not self._stopped and await self.clean_once():
            pass

    # -- state ----------------------------------------------------------------------------------

    def checkpoint(self, topic_partition: TopicPartition) -> int | None:
        return self._checkpoints.get(topic_partition)

    def forget(self, topic_partition: TopicPartition) -> None:
        """A log was deleted: drop its checkpoint entry and state."""
        self._checkpoints.pop(topic_partition, None)
        self._delete_horizons.pop(topic_partition, None)
        self._uncleanable.discard(topic_partition)

    def compacted_logs(self) -> list[Log]:
        return [log for log in self._logs() if log.config.compact_enabled and not log.is_offline]

    def candidates(self) -> list[LogToClean]:
        """Every compacted log's sections now; updates the max dirty percent."""
        now = self._clock.milliseconds()
        result = []
        for log in self.compacted_logs():
            tp = log.topic_partition
            candidate = log_to_clean(log, self._checkpoints.get(tp), now)
            horizon = self._delete_horizons.get(tp)
            if horizon is not None and horizon <= now and len(log.log_segments()) > 1:
                candidate = dataclasses.replace(candidate, tombstones_expired=True)
            result.append(candidate)
        self.status.max_dirty_percent = 100 * max((c.cleanable_ratio for c in result), default=0.0)
        return result

    # -- cleaning ---------------------------------------------------------------------------------

    async def clean_once(self) -> bool:
        """Clean the dirtiest eligible logs, up to ``log.cleaner.threads`` at once; False
        when none was eligible."""
        if not self._config.enable or self._stopped:
            return False
        chosen = sorted(
            (
                c
                for c in self.candidates()
                if c.eligible
                and c.log.topic_partition not in self._in_progress
                and c.log.topic_partition not in self._uncleanable
            ),
            key=lambda c: c.cleanable_ratio,
            reverse=True,
        )[: max(self._config.threads, 1)]
        if not chosen:
            return False
        self.status.last_run_ms = self._clock.milliseconds()
        started = self._clock.monotonic_ms()
        results = await asyncio.gather(*(self._clean(c) for c in chosen))
        elapsed_s = (self._clock.monotonic_ms() - started) / 1000
        self.status.max_clean_time_secs = elapsed_s
        self.status.runs += 1
        read = sum(r.stats.bytes_read for r in results if r is not None)
        written = sum(r.stats.bytes_written for r in results if r is not None)
        self.status.recopy_percent = 100 * written / read if read else 0.0
        return any(r is not None for r in results)

    async def _clean(self, candidate: LogToClean) -> CleanerResult | None:
        log = candidate.log
        tp = log.topic_partition
        segments = log.log_segments()
        taken = [
            (segment, segments[position + 1].base_offset, segment.size())
            for position, segment in enumerate(segments[:-1])
            if segment.base_offset < candidate.first_uncleanable_offset
        ]
        if not taken:
            return None
        config = log.config
        job = CleanerJob(
            directory=str(log.dir),
            segments=tuple(SegmentSnapshot(s.base_offset, nxt, size) for s, nxt, size in taken),
            first_dirty_offset=candidate.first_dirty_offset,
            first_uncleanable_offset=candidate.first_uncleanable_offset,
            producer_last_offsets={
                pid: entry.last_data_offset for pid, entry in log.producer_state.producers.items()
            },
            now_ms=self._clock.milliseconds(),
            delete_retention_ms=config.delete_retention_ms,
            segment_bytes=config.segment_bytes,
            max_index_bytes=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
            map_capacity=map_capacity(
                self._config.dedupe_buffer_size,
                self._config.threads,
                self._config.io_buffer_load_factor,
            ),
            max_io_bytes_per_second=self._config.io_max_bytes_per_second,
            max_batch_bytes=None,
            crash_point=self._crash_point,
            broker_pid=os.getpid(),
        )
        self._in_progress.add(tp)
        try:
            loop = asyncio.get_running_loop()
            try:
                result = await loop.run_in_executor(self._worker_pool(), clean_log, job)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001  logged; the partition becomes uncleanable
                # Kafka marks such a partition uncleanable and goes on with the others.
                _log.error("%s: cleaning failed, not cleaning it again: %s", tp, exc)
                self._uncleanable.add(tp)
                self.status.uncleanable_partitions = len(self._uncleanable)
                return None
            by_base = {segment.base_offset: (segment, size) for segment, _, size in taken}
            for position, group in enumerate(result.groups):
                old = [by_base[base] for base in group.old_base_offsets]
                swapped = log.replace_segments(
                    group.base_offset,
                    [segment for segment, _ in old],
                    [size for _, size in old],
                    crash_point=self._crash_point,
                )
                if not swapped:
                    _log.info("%s changed while it was cleaned; cleaning again later", tp)
                    for later in result.groups[position + 1 :]:
                        remove_cleaned_files(log.dir, later.base_offset)
                    return None
            self._checkpoints[tp] = result.end_offset
            if result.delete_horizon_ms is None:
                self._delete_horizons.pop(tp, None)
            else:
                self._delete_horizons[tp] = result.delete_horizon_ms
            stats = result.stats
            self.status.bytes_read += stats.bytes_read
            self.status.bytes_written += stats.bytes_written
            self.status.max_buffer_utilization_percent = 100 * result.map_size / job.map_capacity
            _log.info(
                "%s: cleaned offsets %d-%d: %d segments into %d, %d of %d records kept, "
                "%.1f MB read, %.1f MB written",
                tp,
                candidate.first_dirty_offset,
                result.end_offset,
                len(taken),
                len(result.groups),
                stats.records_written,
                stats.records_read,
                stats.bytes_read / 1e6,
                stats.bytes_written / 1e6,
            )
            await self._write_checkpoint(log.parent_dir)
            return result
        finally:
            self._in_progress.discard(tp)

    def _worker_pool(self) -> concurrent.futures.Executor:
        if self._executor is None:
            # Spawned, not forked: the broker has threads (executors, the event loop's) that
            # a fork would copy in an unknown state.
            self._executor = concurrent.futures.ProcessPoolExecutor(
                max_workers=max(self._config.threads, 1),
                mp_context=multiprocessing.get_context("spawn"),
                initializer=die_with_parent,
            )
        return self._executor

    async def _write_checkpoint(self, log_dir: Path) -> None:
        offsets = {
            log.topic_partition: self._checkpoints[log.topic_partition]
            for log in self._logs()
            if log.parent_dir == log_dir and log.topic_partition in self._checkpoints
        }
        checkpoint = OffsetCheckpointFile(log_dir / CLEANER_CHECKPOINT)
        try:
            await asyncio.get_running_loop().run_in_executor(
                self._io_executor, checkpoint.write, offsets
            )
        except StorageError as exc:
            # The checkpoint only saves work; a stale one makes the next cleaning redo some.
            _log.warning("cannot write %s: %s", checkpoint.path, exc)


__all__ = [
    "CLEANER_CHECKPOINT",
    "CRASH_POINT_ENV",
    "CleanerConfig",
    "CleanerStatus",
    "LogCleaner",
    "LogToClean",
    "log_to_clean",
]
