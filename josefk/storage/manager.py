"""LogManager: every partition log of a broker across its log dirs, and their background work.

Owns the log dirs (``log.dirs``): loading every ``<topic>-<partition>`` directory at start-up
(recovering unclean ones, in a thread pool), the clean-shutdown marker, the three checkpoint
files per log dir, creating and deleting logs, the periodic retention, flush and checkpoint
tasks, the log cleaner (``josefk.storage.log_cleaner``), and taking a log dir offline after
an I/O error. Imports josefk.config.topic and the
rest of josefk.storage; never josefk.protocol, josefk.broker or josefk.metrics.

A log dir on disk::

    <log dir>/
        .kafka_cleanshutdown               present only between a clean shutdown and start-up
        recovery-point-offset-checkpoint   offsets below which each log is known flushed
        log-start-offset-checkpoint        each log's log start offset (if above its first segment)
        replication-offset-checkpoint      each log's high watermark
        cleaner-offset-checkpoint          each compacted log's first dirty offset
        meta.properties                    (the broker's, not touched here)
        orders-0/ orders-1/ ...            one directory per partition
        orders-2.<id>-delete/              a deleted partition waiting for removal (the topic
                                           part cut so the name fits 255 bytes, as Kafka does)

Concurrency: one event loop. Blocking work (loading and recovery, fsync, checkpoint writes,
removing deleted directories) runs in the ``executor`` passed in; everything that changes the
set of logs runs on the loop and never awaits halfway through. An I/O error in a log dir,
wherever it happens, calls ``_handle_log_dir_failure``: the dir goes offline, its logs become
unavailable (their methods raise KafkaStorageError) and the broker goes on with the others.
Exceptions: a log that cannot be created because of its own path (a file in the way, a name
the filesystem refuses, no memory to map its index; ``_PATH_ERRNOS``) fails alone with
LogCreationError, the dir online; a log that cannot be renamed for deletion for such a reason
fails that deletion alone (KafkaStorageError), the dir online; an index that cannot be mapped
(ENOMEM) fails that operation alone (PartitionIoError), whenever it happens.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from josefk.config.topic import LogConfig
from josefk.fileio import fsync_dir
from josefk.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from josefk.storage.errors import (
    KafkaStorageError,
    LogCreationError,
    LogNameRefusedError,
    StorageError,
)
from josefk.storage.log import Log, remove_tree
from josefk.storage.log_cleaner import CleanerConfig, LogCleaner
from josefk.storage.offsets import TopicPartition, is_legal_topic_name
from josefk.util.clock import Clock, JitterSource
from josefk.util.scheduler import ScheduledTask, Scheduler

_log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX: Final = "-delete"
FUTURE_DIR_SUFFIX: Final = "-future"
STRAY_DIR_SUFFIX: Final = "-stray"
LONG_MAX: Final = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    """The broker-level settings the LogManager uses, with Kafka's defaults.

    Field <- broker key: ``retention_check_interval_ms`` <- log.retention.check.interval.ms,
    ``flush_check_interval_ms`` <- log.flush.scheduler.interval.ms,
    ``recovery_point_checkpoint_interval_ms`` <- log.flush.offset.checkpoint.interval.ms,
    ``log_start_offset_checkpoint_interval_ms`` <-
    log.flush.start.offset.checkpoint.interval.ms, ``high_watermark_checkpoint_interval_ms``
    <- replica.high.watermark.checkpoint.interval.ms, ``initial_task_delay_ms`` <-
    log.initial.task.delay.ms, ``recovery_threads_per_data_dir`` <-
    num.recovery.threads.per.data.dir, ``producer_id_expiration_ms`` <- producer.id.expiration.ms,
    ``producer_id_expiration_check_interval_ms`` <- producer.id.expiration.check.interval.ms,
    ``cleaner`` <- the log.cleaner.* keys.
    """

    log_dirs: tuple[Path, ...]
    retention_check_interval_ms: int = 300_000
    flush_check_interval_ms: int = LONG_MAX
    recovery_point_checkpoint_interval_ms: int = 60_000
    log_start_offset_checkpoint_interval_ms: int = 60_000
    high_watermark_checkpoint_interval_ms: int = 5_000
    initial_task_delay_ms: int = 30_000
    recovery_threads_per_data_dir: int = 1
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000
    cleaner: CleanerConfig = field(default_factory=CleanerConfig)


# Logs loaded per executor call at start-up (``_load_log_dir``).
_LOAD_BATCH: Final = 32
# Directories per executor call of ``select_log_dirs`` (a read or two each).
_SELECT_BATCH: Final = 256

# A period this long means "never": Kafka's Long.MAX defaults for the flush scheduler.
_NEVER: Final = 1 << 62
# The periodic passes over every log (retention, producer expiry) give the event loop a turn
# after this many logs.
PASS_CHUNK: Final = 500


class LogManager:
    """All partition logs of the broker.

    Start with ``await startup()``, stop with ``await shutdown()``. ``topic_config`` gives a
    topic's LogConfig (the broker's defaults with the topic's overrides); it is asked when a
    log is loaded or created.
    """

    def __init__(
        self,
        config: LogManagerConfig,
        default_log_config: LogConfig,
        *,
        clock: Clock,
        scheduler: Scheduler,
        executor: concurrent.futures.Executor | None = None,
        topic_config: Callable[[str], LogConfig] | None = None,
        jitter: JitterSource | None = None,
        on_log_dir_failure: Callable[[Path, BaseException], None] | None = None,
    ) -> None:
        if not config.log_dirs:
            raise ValueError("at least one log dir is needed")
        resolved = [Path(d).absolute() for d in config.log_dirs]
        if len(set(resolved)) != len(resolved):
            raise ValueError(f"duplicate log dirs in {[str(d) for d in resolved]}")
        self._config = config
        self._log_dirs: tuple[Path, ...] = tuple(resolved)
        self._default_log_config = default_log_config
        self._topic_config = topic_config
        self._clock = clock
        self._scheduler = scheduler
        self._executor = executor
        self._jitter = jitter if jitter is not None else JitterSource()
        self._on_log_dir_failure = on_log_dir_failure
        self._logs: dict[TopicPartition, Log] = {}
        self._offline_dirs: dict[Path, BaseException] = {}
        self._tasks: list[ScheduledTask] = []
        self._started = False
        self._shut_down = False
        # What the last load found, for tests and the broker's log line.
        self.had_clean_shutdown: dict[Path, bool] = {}
        self.cleaner = LogCleaner(
            config.cleaner,
            logs=self.all_logs,
            clock=clock,
            scheduler=scheduler,
            io_executor=executor,
        )

    # -- accessors ----------------------------------------------------------------------------

    @property
    def log_dirs(self) -> tuple[Path, ...]:
        return self._log_dirs

    @property
    def live_log_dirs(self) -> list[Path]:
        return [d for d in self._log_dirs if d not in self._offline_dirs]

    @property
    def offline_log_dirs(self) -> dict[Path, BaseException]:
        return dict(self._offline_dirs)

    def get_log(self, topic_partition: TopicPartition) -> Log | None:
        """The partition's log, None if this broker has none. An offline log is returned (its
        operations raise KafkaStorageError) so the broker can answer KAFKA_STORAGE_ERROR."""
        return self._logs.get(topic_partition)

    def all_logs(self) -> list[Log]:
        """Every log in a live log dir."""
        return [log for log in self._logs.values() if not log.is_offline]

    def logs_by_dir(self) -> dict[Path, list[Log]]:
        result: dict[Path, list[Log]] = {d: [] for d in self.live_log_dirs}
        for log in self.all_logs():
            result.setdefault(log.parent_dir, []).append(log)
        return result

    def _config_for(self, topic: str) -> LogConfig:
        if self._topic_config is not None:
            return self._topic_config(topic)
        return self._default_log_config

    # -- start-up --------------------------------------------------------------------------------

    async def startup(self) -> None:
        """Load every log of every log dir, then start the periodic tasks."""
        if self._started:
            raise RuntimeError("LogManager already started")
        self._started = True
        await self.load_logs()
        self._schedule_tasks()
        await self.cleaner.startup(self.live_log_dirs)

    async def load_logs(self) -> None:
        """Load each live log dir's partitions (recovering them in the executor)."""
        loop = asyncio.get_running_loop()
        for log_dir in self._log_dirs:
            try:
                await self._load_log_dir(loop, log_dir)
            except (OSError, StorageError) as exc:
                self._handle_log_dir_failure(log_dir, exc)

    async def _load_log_dir(self, loop: asyncio.AbstractEventLoop, log_dir: Path) -> None:
        await loop.run_in_executor(self._executor, _ensure_dir, log_dir)
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[log_dir] = clean
        recovery_points, start_offsets, high_watermarks = await loop.run_in_executor(
            self._executor, _read_checkpoints, log_dir
        )
        to_load: list[tuple[TopicPartition, Path]] = []
        # A blocking listing on the loop, once per dir at start-up, before any listener
        # accepts. Names sorted, not Paths (Path comparison was 0.4 s of the loop at 10,000
        # partitions); the entry's type comes from the listing, without a stat.
        with os.scandir(log_dir) as listing:
            names = sorted(item.name for item in listing if item.is_dir())
        for name in names:
            entry = log_dir / name
            if name.endswith(DELETE_DIR_SUFFIX):
                self._schedule_dir_removal(entry, delay_ms=0)
                continue
            if name.endswith((FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                _log.warning("ignoring %s: future and stray replicas are not supported", entry)
                continue
            try:
                tp = TopicPartition.from_dir_name(name)
            except ValueError:
                _log.warning("ignoring %s: not a partition directory", entry)
                continue
            if tp in self._logs:
                raise KafkaStorageError(
                    f"duplicate log directories for {tp}: {self._logs[tp].dir} and {entry}",
                    path=entry,
                )
            to_load.append((tp, entry))

        limit = asyncio.Semaphore(max(1, self._config.recovery_threads_per_data_dir))

        def load_one(tp: TopicPartition, path: Path, config: LogConfig) -> Log:
            log = Log.load(
                path,
                config,
                log_start_offset=start_offsets.get(tp, 0),
                recovery_point=recovery_points.get(tp, 0),
                had_clean_shutdown=clean,
                clock=self._clock,
                jitter=self._jitter,
                scheduler=self._scheduler,
                executor=self._executor,
                on_io_error=self._handle_log_dir_failure,
                producer_id_expiration_ms=self._config.producer_id_expiration_ms,
            )
            # Loaded in a worker thread, where the bound on index maps does not act: the
            # loop gets the log with no index mapped (each maps on first use).
            log.park_index_maps()
            return log

        def load_many(batch: list[tuple[TopicPartition, Path, LogConfig]]) -> list[Log]:
            return [load_one(tp, path, config) for tp, path, config in batch]

        async def load(batch: list[tuple[TopicPartition, Path]]) -> list[Log]:
            work = [(tp, path, self._config_for(tp.topic)) for tp, path in batch]
            async with limit:
                return await loop.run_in_executor(self._executor, load_many, work)

        # A few dozen logs per executor call, not one: at 10,000 partitions the loop's
        # share (a task, a future and a wake-up per call) was a second of CPU.
        batches = [to_load[i : i + _LOAD_BATCH] for i in range(0, len(to_load), _LOAD_BATCH)]
        logs = [log for loaded in await asyncio.gather(*map(load, batches)) for log in loaded]
        for (tp, _), log in zip(to_load, logs, strict=True):
            hw = high_watermarks.get(tp)
            if hw is not None:
                log.update_high_watermark(hw)
            self._logs[tp] = log
        if clean:
            # The marker describes the previous run only: from now on a crash is unclean.
            await loop.run_in_executor(self._executor, _remove_marker, marker)
        if logs:
            _log.info(
                "loaded %d logs from %s (%s shutdown)",
                len(logs),
                log_dir,
                "clean" if clean else "unclean",
            )
        else:
            # A new data dir has no marker either; "unclean" would only alarm.
            _log.info("no logs in %s yet", log_dir)

    # -- creating and deleting logs ----------------------------------------------------------------

    def get_or_create_log(
        self,
        topic_partition: TopicPartition,
        config: LogConfig | None = None,
        *,
        prepare: Callable[[Path], None] | None = None,
    ) -> Log:
        """The partition's log, created in the live log dir holding the fewest partitions.

        ``prepare`` is called with the log's directory (new or not) to write the files the
        caller keeps there (the broker's ``partition.metadata``); its I/O errors are judged
        like the log's own. Blocking but short (a mkdir and an empty segment); runs on the
        loop like an append.

        A failure to create the log is judged by its errno (``_is_path_error``): a problem of
        this one path (a file in the way, a name the filesystem refuses, no permission, no
        file descriptors left) raises LogCreationError (LogNameRefusedError for the name) and
        leaves the log dir online, after removing whatever this call created; anything else
        is the disk failing: the log dir goes offline and KafkaStorageError is raised. Also
        KafkaStorageError if the log's dir is offline or no log dir is live.
        """
        existing = self._logs.get(topic_partition)
        if existing is not None:
            if existing.is_offline:
                raise KafkaStorageError(
                    f"log of {topic_partition} is in an offline log dir", path=existing.dir
                )
            if prepare is not None:
                try:
                    prepare(existing.dir)
                except OSError as exc:
                    raise self._creation_failed(
                        topic_partition, existing.dir, exc, created=None
                    ) from exc
            return existing
        if not is_legal_topic_name(topic_partition.topic) or topic_partition.partition < 0:
            raise ValueError(f"illegal topic partition {topic_partition!r}")
        live = self.live_log_dirs
        if not live:
            raise KafkaStorageError("no live log dir to create the log in")
        if len(live) == 1:
            # One dir: no count needed (counting walks every log, which made creating N
            # partitions cost N squared Path operations).
            log_dir = live[0]
        else:
            counts = {d: 0 for d in live}
            for log in self._logs.values():
                parent = log.parent_dir
                if parent in counts and not log.is_offline:
                    counts[parent] += 1
            log_dir = min(live, key=lambda d: (counts[d], live.index(d)))
        path = log_dir / topic_partition.dir_name
        is_new = not os.path.lexists(path)
        created: Log | None = None
        try:
            created = Log.load(
                path,
                config if config is not None else self._config_for(topic_partition.topic),
                had_clean_shutdown=True,
                clock=self._clock,
                jitter=self._jitter,
                scheduler=self._scheduler,
                executor=self._executor,
                on_io_error=self._handle_log_dir_failure,
                producer_id_expiration_ms=self._config.producer_id_expiration_ms,
            )
            if prepare is not None:
                prepare(path)
        except (OSError, KafkaStorageError) as exc:
            if created is not None:
                created.close_handlers()
            error = self._creation_failed(
                topic_partition, path, exc, created=path if is_new else None
            )
            if error is exc:
                raise
            raise error from exc
        self._logs[topic_partition] = created
        # Debug: a topic of 50 partitions is one line at info, from whoever created it.
        _log.debug("created log for %s in %s", topic_partition, log_dir)
        return created

    def _creation_failed(
        self,
        topic_partition: TopicPartition,
        path: Path,
        exc: BaseException,
        *,
        created: Path | None,
    ) -> StorageError:
        """The error to raise for a failed creation of ``path`` (see get_or_create_log);
        ``created`` is the directory this attempt made, removed on a path error."""
        log_dir = path.parent
        cause = _os_error_in(exc)
        if cause is not None and _is_path_error(cause) and log_dir.is_dir():
            if created is not None and os.path.isdir(created):
                try:
                    remove_tree(created)
                except OSError:
                    _log.exception("error while removing %s after a failed creation", created)
            reason = cause.strerror or str(cause)
            if cause.errno == errno.EEXIST and not path.is_dir():
                reason = "a file is in the way of the partition directory"
            message = f"cannot create the log of {topic_partition}: {reason}"
            if cause.errno in _NAME_ERRNOS:
                return LogNameRefusedError(message, path=path)
            return LogCreationError(message, path=path)
        error = (
            exc
            if isinstance(exc, KafkaStorageError)
            else KafkaStorageError(
                f"error while creating the log of {topic_partition}: {exc}", path=path
            )
        )
        self._handle_log_dir_failure(log_dir, error)
        return error

    async def prepare_log_off_loop(self, log: Log, prepare: Callable[[Path], None]) -> None:
        """Run ``prepare`` on a log just made by ``get_or_create_log`` in the executor (the
        caller's files there, e.g. ``partition.metadata``, written and fsynced without holding
        the loop); its I/O error is judged as ``get_or_create_log`` judges ``prepare``'s (a
        path error raises LogCreationError, anything else takes the log dir offline).

        A leader epoch entry the caller deferred (``LeaderEpochCache.defer_saves``, done
        while the partition became leader) is written in the same executor call, and the
        cache saves at once again afterwards."""
        loop = asyncio.get_running_loop()
        cache = log.leader_epoch_cache
        pending = cache.take_pending()

        def work(directory: Path) -> None:
            prepare(directory)
            if pending is not None:
                cache.write_text(pending)

        try:
            await loop.run_in_executor(self._executor, work, log.dir)
        except (OSError, KafkaStorageError) as exc:
            topic_partition = log.topic_partition
            if self._logs.get(topic_partition) is not log:
                return  # deleted meanwhile: its directory went, and the files with it
            raise self._creation_failed(topic_partition, log.dir, exc, created=None) from exc
        finally:
            if self._logs.get(log.topic_partition) is log and not log.is_offline:
                cache.end_deferral()

    async def select_log_dirs(
        self,
        topic_partitions: Sequence[TopicPartition],
        predicate: Callable[[TopicPartition, Path], bool],
    ) -> set[TopicPartition]:
        """Those of ``topic_partitions`` whose online log's directory passes ``predicate``,
        run in the executor a few hundred per call, the calls side by side: blocking checks
        of thousands of partitions' files (start-up's) off the loop. A predicate raising
        OSError counts as failing; a partition without a log, or offline, is left out."""
        loop = asyncio.get_running_loop()
        work = [
            (tp, log.dir)
            for tp in topic_partitions
            if (log := self._logs.get(tp)) is not None and not log.is_offline
        ]

        def select(batch: list[tuple[TopicPartition, Path]]) -> list[TopicPartition]:
            chosen = []
            for tp, directory in batch:
                try:
                    if predicate(tp, directory):
                        chosen.append(tp)
                except OSError:
                    pass
            return chosen

        batches = [work[i : i + _SELECT_BATCH] for i in range(0, len(work), _SELECT_BATCH)]
        results = await asyncio.gather(
            *(loop.run_in_executor(self._executor, select, batch) for batch in batches)
        )
        return {tp for chosen in results for tp in chosen}

    async def write_deferred_leader_epochs(self, logs: Sequence[Log]) -> list[BaseException | None]:
        """Write, in the executor and side by side, the leader epoch checkpoints of
        ``logs`` whose saves were deferred (``LeaderEpochCache.defer_saves``), then let each
        cache save at once again. Returns each log's write error (None: written or nothing
        to write); the caller decides what a failed partition becomes."""
        loop = asyncio.get_running_loop()
        pending = [(log, log.leader_epoch_cache.take_pending()) for log in logs]

        async def write(log: Log, text: str) -> BaseException | None:
            try:
                await loop.run_in_executor(self._executor, log.leader_epoch_cache.write_text, text)
            except (OSError, StorageError) as exc:
                return exc
            return None

        try:
            # A task only per checkpoint to write: at a start of 10,000 partitions most have
            # none, and a task each was a share of the loop's time.
            written = iter(
                await asyncio.gather(
                    *(write(log, text) for log, text in pending if text is not None)
                )
            )
            return [None if text is None else next(written) for _, text in pending]
        finally:
            for log in logs:
                if not log.is_offline:
                    with contextlib.suppress(StorageError):
                        log.leader_epoch_cache.end_deferral()

    def remove_new_log(self, topic_partition: TopicPartition) -> None:
        """Remove a log created moments ago that holds nothing yet (a topic creation rolled
        back): closed, renamed ``-delete`` (so that a crash part way leaves a directory that
        start-up removes, never a half-deleted partition) and removed at once. Raises
        KafkaStorageError, after taking its log dir offline, on an I/O error; a log in an
        offline dir cannot be removed and raises KafkaStorageError too."""
        log = self._logs.get(topic_partition)
        if log is None:
            return
        if log.is_offline:
            raise KafkaStorageError(
                f"log of {topic_partition} is in an offline log dir", path=log.dir
            )
        del self._logs[topic_partition]
        target = log.dir.with_name(deleted_dir_name(topic_partition))
        try:
            log.close_handlers()
            os.rename(log.dir, target)
            fsync_dir(log.parent_dir)
            remove_tree(target)
        except OSError as exc:
            error = KafkaStorageError(
                f"error while removing the new log of {topic_partition}: {exc}", path=log.dir
            )
            self._handle_log_dir_failure(log.parent_dir, error)
            raise error from exc

    def delete_log(self, topic_partition: TopicPartition) -> Log | None:
        """Remove the partition's log: closed and renamed ``<dir>.<id>-delete`` at once, its
        files removed off the loop after ``file.delete.delay.ms``. Returns the removed log."""
        log = self._logs.pop(topic_partition, None)
        if log is None:
            return None
        self.cleaner.forget(topic_partition)
        if log.is_offline:
            return log
        target = log.dir.with_name(deleted_dir_name(topic_partition))
        try:
            log.close()
            os.rename(log.dir, target)
            fsync_dir(log.parent_dir)
        except (OSError, StorageError) as exc:
            error = KafkaStorageError(
                f"error while deleting the log of {topic_partition}: {exc}", path=log.dir
            )
            cause = _os_error_in(exc)
            if cause is not None and _is_path_error(cause) and log.parent_dir.is_dir():
                # This partition's problem (its name, its permissions), not the disk's: the
                # log dir and every other partition in it stay online.
                _log.error("%s", error)
            else:
                self._handle_log_dir_failure(log.parent_dir, exc)
            raise error from exc
        self._schedule_dir_removal(target, delay_ms=log.config.file_delete_delay_ms)
        return log

    def _schedule_dir_removal(self, path: Path, *, delay_ms: int) -> None:
        def remove() -> None:
            try:
                remove_tree(path)
            except OSError:
                _log.exception("error while removing deleted log directory %s", path)

        if self._shut_down:
            return
        self._scheduler.schedule_blocking(
            f"delete-dir-{path.name}", remove, self._executor, delay_ms=delay_ms
        )

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Apply a changed topic config to the topic's existing logs."""
        for tp, log in self._logs.items():
            if tp.topic == topic:
                log.update_config(config)

    # -- periodic work -----------------------------------------------------------------------------

    def _schedule_tasks(self) -> None:
        config = self._config
        delay = config.initial_task_delay_ms

        def every(name: str, period: int, function: Callable[[], object]) -> None:
            if period >= _NEVER or period <= 0:
                return
            self._tasks.append(
                self._scheduler.schedule(
                    name,
                    function,  # type: ignore[arg-type]
                    delay_ms=min(delay, period),
                    period_ms=period,
                )
            )

        every("kafka-log-retention", config.retention_check_interval_ms, self.cleanup_logs)
        every("kafka-log-flusher", config.flush_check_interval_ms, self.flush_dirty_logs)
        every(
            "kafka-recovery-point-checkpoint",
            config.recovery_point_checkpoint_interval_ms,
            self.checkpoint_recovery_points,
        )
        every(
            "kafka-log-start-offset-checkpoint",
            config.log_start_offset_checkpoint_interval_ms,
            self.checkpoint_log_start_offsets,
        )
        every(
            "highwatermark-checkpoint",
            config.high_watermark_checkpoint_interval_ms,
            self.checkpoint_high_watermarks,
        )
        every(
            "PeriodicProducerExpirationCheck",
            config.producer_id_expiration_check_interval_ms,
            self.remove_expired_producers,
        )

    async def cleanup_logs(self) -> int:
        """One retention pass over every log; returns the number of segments deleted.

        The same pass unmaps the indexes of inactive segments that lookups mapped since, so
        the broker's maps stay bounded (each counts against vm.max_map_count and, without
        the C extension, holds a file descriptor). The pass gives the event loop a turn every
        ``PASS_CHUNK`` logs: at 10,000 partitions a pass in one go held the loop for tens of
        ms to 0.2 s (Kafka runs it on a scheduler thread); a log closed or taken offline
        meanwhile is skipped.
        """
        total = 0
        for i, log in enumerate(self.all_logs(), 1):
            try:
                total += log.delete_old_segments()
                log.release_index_maps()
            except StorageError:
                pass  # offline or closed meanwhile; the others go on
            if i % PASS_CHUNK == 0:
                await asyncio.sleep(0)
        return total

    async def remove_expired_producers(self) -> int:
        """Forget, in every log, producers idle for producer.id.expiration.ms (a turn of the
        loop every ``PASS_CHUNK`` logs, as ``cleanup_logs``)."""
        total = 0
        for i, log in enumerate(self.all_logs(), 1):
            with contextlib.suppress(StorageError):  # offline or closed meanwhile
                total += log.remove_expired_producers()
            if i % PASS_CHUNK == 0:
                await asyncio.sleep(0)
        return total

    async def flush_dirty_logs(self) -> None:
        """Flush every log whose last flush is older than its ``flush.ms``."""
        now = self._clock.milliseconds()
        for log in self.all_logs():
            if now - log.last_flush_time_ms >= log.config.flush_ms:
                with contextlib.suppress(KafkaStorageError):
                    await log.flush_async()

    async def checkpoint_recovery_points(self) -> None:
        await self._write_checkpoints(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point)

    async def checkpoint_log_start_offsets(self) -> None:
        # As Kafka: only logs whose start offset is above their first segment's base need it.
        await self._write_checkpoints(
            LOG_START_OFFSET_CHECKPOINT,
            lambda log: log.log_start_offset,
            only=lambda log: log.log_start_offset > log.log_segments()[0].base_offset,
        )

    async def checkpoint_high_watermarks(self) -> None:
        await self._write_checkpoints(REPLICATION_OFFSET_CHECKPOINT, lambda log: log.high_watermark)

    async def _write_checkpoints(
        self,
        file_name: str,
        value: Callable[[Log], int],
        *,
        only: Callable[[Log], bool] | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        for log_dir, logs in self.logs_by_dir().items():
            offsets = {
                log.topic_partition: value(log)
                for log in logs
                if not log.is_offline and (only is None or only(log))
            }
            checkpoint = OffsetCheckpointFile(log_dir / file_name)
            try:
                await loop.run_in_executor(self._executor, checkpoint.write, offsets)
            except (OSError, StorageError) as exc:
                self._handle_log_dir_failure(log_dir, exc)

    async def checkpoint_all(self) -> None:
        await self.checkpoint_recovery_points()
        await self.checkpoint_log_start_offsets()
        await self.checkpoint_high_watermarks()

    # -- failure and shutdown ----------------------------------------------------------------------

    def _handle_log_dir_failure(self, log_dir: Path, error: BaseException) -> None:
        log_dir = Path(log_dir).absolute()
        if log_dir in self._offline_dirs or log_dir not in self._log_dirs:
            return
        self._offline_dirs[log_dir] = error
        _log.error("log dir %s is offline: %s", log_dir, error)
        for log in self._logs.values():
            if log.parent_dir == log_dir:
                log.mark_offline()
        if self._on_log_dir_failure is not None:
            self._on_log_dir_failure(log_dir, error)

    async def shutdown(self) -> None:
        """Stop the tasks, flush every log, write the checkpoints, close the logs, then leave
        the clean-shutdown marker in every live log dir (so the next start skips recovery)."""
        if self._shut_down:
            return
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        await self.cleaner.shutdown()
        loop = asyncio.get_running_loop()
        logs = self.all_logs()
        # Side by side, not one after another: at thousands of partitions the fsyncs of a
        # sequential shutdown took most of a minute; the executor bounds how many run at once.
        await asyncio.gather(*(_flush_quietly(log) for log in logs))
        await self.checkpoint_all()
        await asyncio.gather(*(log.snapshot_for_shutdown() for log in logs))
        for log in logs:
            with contextlib.suppress(KafkaStorageError):
                log.close()
        self._shut_down = True
        for log_dir in self.live_log_dirs:
            try:
                await loop.run_in_executor(self._executor, _write_marker, log_dir)
            except OSError as exc:
                self._handle_log_dir_failure(log_dir, exc)

    def close_offline(self, logs: Iterable[Log] | None = None) -> None:
        """Release the fds of offline logs (after the broker has stopped serving them)."""
        for log in logs if logs is not None else list(self._logs.values()):
            if log.is_offline:
                log.close_handlers()


async def _flush_quietly(log: Log) -> None:
    # A log whose dir failed is already offline; shutdown goes on with the others.
    with contextlib.suppress(KafkaStorageError):
        await log.flush_async()


# Errors of one path or of the process, not of the disk: creating a log that fails with one of
# these fails that log only and leaves its log dir online. ENOTDIR and EEXIST: a file where a
# directory should be; ENAMETOOLONG, EINVAL, EILSEQ: a name the filesystem refuses; EACCES,
# EPERM: permissions of that path; EMFILE, ENFILE: no file descriptor left (the process's
# limit, not the disk's health); ENOMEM: an index that cannot be mapped. Every other errno (EIO, EROFS, ENOSPC, EDQUOT...) means the
# disk: the log dir goes offline, as Kafka takes it offline on any IOException.
_PATH_ERRNOS: Final = frozenset(
    {
        errno.ENOTDIR,
        errno.EEXIST,
        errno.EISDIR,
        errno.ELOOP,
        errno.ENAMETOOLONG,
        errno.EINVAL,
        errno.EILSEQ,
        errno.EACCES,
        errno.EPERM,
        errno.EMFILE,
        errno.ENFILE,
        # mmap of an index: the process's address space or overcommit, not the disk.
        errno.ENOMEM,
    }
)
_NAME_ERRNOS: Final = frozenset({errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ})


def deleted_dir_name(topic_partition: TopicPartition) -> str:
    """``<topic>-<partition>.<uuid>-delete``, the topic cut short so that the name fits the
    255 bytes a file name may have (Kafka's rule: a legal topic name has up to 249 characters,
    all ASCII). Start-up removes any directory ending ``-delete``."""
    suffix = f"-{topic_partition.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic_partition.topic[: _MAX_FILE_NAME - len(suffix)] + suffix


_MAX_FILE_NAME: Final = 255


def _is_path_error(error: OSError) -> bool:
    return error.errno in _PATH_ERRNOS


def _os_error_in(exc: BaseException) -> OSError | None:
    """The OSError behind ``exc`` (itself, or its cause or context, a few levels down)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, OSError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


# -- blocking helpers (run in the executor) ------------------------------------------------------


def _ensure_dir(log_dir: Path) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    if not os.access(log_dir, os.W_OK):
        raise KafkaStorageError("log dir is not writable", path=log_dir)


def _read_checkpoints(
    log_dir: Path,
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int], dict[TopicPartition, int]]:
    return (
        OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read(),
        OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read(),
        OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).read(),
    )


def _remove_marker(marker: Path) -> None:
    marker.unlink(missing_ok=True)
    fsync_dir(marker.parent)


def _write_marker(log_dir: Path) -> None:
    marker = log_dir / CLEAN_SHUTDOWN_FILE
    with open(marker, "wb") as handle:
        os.fsync(handle.fileno())
    fsync_dir(log_dir)


__all__: Sequence[str] = [
    "CLEAN_SHUTDOWN_FILE",
    "LogManager",
    "LogManagerConfig",
]
