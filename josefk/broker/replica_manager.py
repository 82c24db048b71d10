"""The replica manager: every partition this broker hosts, and the data path through them.

Owns the map of ``Partition`` objects, the purgatories (fetches, acks=all produces, and
DeleteRecords waiting for the low watermark), and the apply side of topic changes: host
partitions (their logs made), give them a role, apply configs to hosted logs, stop hosting
and delete them. Deciding those changes is not its part, as Kafka keeps its ReplicaManager to
applying them: the topic catalog is written by the single node's topic admin
(josefk.broker.topic_admin: create, grow, reconfigure, delete, all or nothing) or, in a
cluster, mirrored from etcd by the cluster node. Handlers call it with whole requests' worth
of partitions; it never sees protocol classes.

Imports josefk.storage, josefk.config and the broker's catalog/partition/purgatory; must not
import josefk.protocol or the handlers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Container, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

from josefk.broker.catalog import (
    TopicCatalog,
    TopicInfo,
    partition_metadata_is_current,
    write_partition_metadata,
)
from josefk.broker.errors import UnknownTopicOrPartitionError as UnknownTopicOrPartitionError
from josefk.broker.partition import (
    NotLeaderOrFollowerError,
    Partition,
    PartitionRead,
    ReplicaProgress,
    RequestTimedOutError,
    TopicPartition,
)
from josefk.broker.purgatory import OffsetPurgatory, Purgatory, Waiter
from josefk.cluster.values import PartitionState
from josefk.config.topic import LogConfig
from josefk.records.compression import DecompressionBudget
from josefk.records.errors import RecordsError
from josefk.storage.errors import OffsetOutOfRangeError, StorageError
from josefk.storage.log import Log
from josefk.storage.manager import LogManager
from josefk.storage.offsets import AppendOrigin, FetchIsolation, LogAppendInfo, TxnMarker
from josefk.util.clock import Clock, SystemClock

logger = logging.getLogger(__name__)

# Partitions a creation prepares at once (their files fsynced side by side in the executor).
_CREATION_WINDOW: Final = 32


class _PartitionMap(dict[TopicPartition, Partition]):
    """The hosted partitions, counting every change of which are hosted (``changes``):
    every mutating method of dict is overridden, so no way of adding or removing a
    partition goes uncounted. Reads are dict's own."""

    changes: int = 0

    def __setitem__(self, key: TopicPartition, value: Partition) -> None:
        self.changes += 1
        super().__setitem__(key, value)

    def __delitem__(self, key: TopicPartition) -> None:
        self.changes += 1
        super().__delitem__(key)

    def pop(self, key: TopicPartition, *default: Any) -> Any:
        self.changes += 1
        return super().pop(key, *default)

    def popitem(self) -> tuple[TopicPartition, Partition]:
        self.changes += 1
        return super().popitem()

    def setdefault(self, key: TopicPartition, default: Partition) -> Partition:  # type: ignore[override]
        self.changes += 1
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.changes += 1
        super().update(*args, **kwargs)

    def clear(self) -> None:
        self.changes += 1
        super().clear()

    def __ior__(self, other: Any) -> _PartitionMap:  # type: ignore[override,misc]
        self.changes += 1
        return super().__ior__(other)  # type: ignore[return-value]


class _Awaiting(Protocol):
    """An outcome that may wait in an offset purgatory: its partition and offset."""

    @property
    def tp(self) -> TopicPartition: ...

    @property
    def required_offset(self) -> int: ...


_Parked = TypeVar("_Parked", bound=_Awaiting)


@dataclass(frozen=True, slots=True)
class _HighWatermarkKey:
    """The fetch purgatory's key for a partition's high watermark moves."""

    tp: TopicPartition


async def _park_until(
    purgatory: OffsetPurgatory,
    outcomes: Sequence[_Parked],
    waits: Callable[[_Parked], bool],
    timeout_ms: int,
) -> list[_Parked]:
    """Park the outcomes that ``waits`` (each on its partition's required offset) until
    none does or ``timeout_ms`` passes; the ones still waiting then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_ms, 0) / 1000
    while True:
        waiting = [o for o in outcomes if waits(o)]
        if not waiting:
            return []
        remaining = deadline - loop.time()
        if remaining <= 0 or not await purgatory.wait(
            [(o.tp, o.required_offset) for o in waiting], remaining
        ):
            return [o for o in waiting if waits(o)]


def topic_log_config(catalog: TopicCatalog, defaults: LogConfig, topic: str) -> LogConfig:
    """The broker's topic defaults with the topic's own overrides on top."""
    info = catalog.get(topic)
    if info is None or not info.configs:
        return defaults
    return defaults.with_overrides(info.configs, ignore_unknown=True)


@dataclass(slots=True)
class AppendOutcome:
    """One partition's part of a produce: what was appended, or why not."""

    tp: TopicPartition
    info: LogAppendInfo | None = None
    error: BaseException | None = None

    @property
    def required_offset(self) -> int:
        """The high watermark an acks=all produce waits for: past its last offset."""
        return self.info.last_offset + 1 if self.info is not None else -1


@dataclass(slots=True)
class FetchPartition:
    """One partition of a fetch. ``log_start_offset`` is the fetching follower's own (-1
    for consumers)."""

    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    # In an incremental fetch session (KIP-227): the (high watermark, last stable offset, log
    # start offset) the fetcher was last told. A partition with nothing past the fetch offset
    # and these offsets unchanged is not read at all (its outcome says ``unchanged``).
    known_offsets: tuple[int, int, int] | None = None


@dataclass(frozen=True, slots=True)
class QuietPartition:
    """A fetch session's partition found with nothing to answer, and what must still hold
    for it to have nothing: its log unchanged (``Log.change_count``), the partition's state
    unchanged (``Partition.state_version``: its leader, epoch and ISR), no partition hosted
    or dropped since (the replica manager's count of such changes, so a partition deleted
    and made again is not taken for the old one) and the same isolation (LOG_END for a
    follower). ``progress``: the fetching follower's, else None; while the stamp holds, each
    fetch of the session counts as one more of that follower at the leader's log end offset
    (its caught-up and fetch times are now). Compared, not looked up, by the fetch handler
    (``_session_news``): a follower's session of thousands of idle partitions costs a few
    attribute reads per partition per fetch."""

    tp: TopicPartition
    partition: Partition
    change_count: int
    state_version: int
    hosting: int
    isolation: FetchIsolation
    progress: ReplicaProgress | None


@dataclass(slots=True)
class FetchOutcome:
    """What a fetch found for one partition: data, or the error (with the offsets an
    OFFSET_OUT_OF_RANGE answer carries)."""

    read: PartitionRead | None = None
    error: BaseException | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    # Nothing new for a fetcher that knows ``FetchPartition.known_offsets``; no read made.
    unchanged: bool = False


@dataclass(slots=True)
class DeleteRecordsOutcome:
    """One partition's part of a DeleteRecords: the offset asked for (the high watermark
    resolved), the low watermark to answer with, or why not. ``pending`` while the leader
    has moved its log start offset but a live follower has not yet reported reaching it."""

    tp: TopicPartition
    required_offset: int = -1
    low_watermark: int = -1
    error: BaseException | None = None
    pending: bool = False


# DeleteRecords' offset for "up to the high watermark".
DELETE_TO_HIGH_WATERMARK = -1

# Told of each transaction marker this broker wrote as leader (after the append, before its
# replication): the group coordinator completes transactional offset commits with it.
TxnMarkerListener = Callable[[TopicPartition, TxnMarker], None]

# A leader's proposal of a new ISR for a partition (cluster mode: an AlterPartition through
# etcd). Single node: none, and the ISR never changes.
IsrProposer = Callable[[Partition, list[int]], None]


class ReplicaManager:
    """All partitions of this broker. Runs on the event loop thread; only the waits (fetch,
    acks=all, the low watermark) and ``*_off_loop`` methods await, each saying what may
    change meanwhile."""

    def __init__(
        self,
        log_manager: LogManager,
        catalog: TopicCatalog,
        *,
        broker_id: int,
        default_log_config: LogConfig,
        clock: Clock | None = None,
    ) -> None:
        self._logs = log_manager
        self.catalog = catalog
        self.broker_id = broker_id
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._default_log_config = default_log_config
        self._partitions = _PartitionMap()
        # Fetches wait on a partition (woken by appends) and consumers' fetches also on its
        # high watermark key (woken by its moves): a follower, which reads to the log end,
        # is not woken by the high watermark its own fetches move.
        self.fetch_purgatory = Purgatory("Fetch")
        # acks=all produces waiting for the high watermark to pass their offsets; woken
        # when it does, or when the ISR or leadership of one of their partitions changes.
        self.produce_purgatory = OffsetPurgatory("Produce")
        # DeleteRecords waiting for a partition's low watermark (the smallest log start
        # offset of its live replicas) to reach their offsets; advanced by follower fetches
        # that report a new log start offset, woken when leadership, the replicas or the
        # live brokers change.
        self.delete_records_purgatory = OffsetPurgatory("DeleteRecords")
        # The broker ids registered in the cluster (cluster mode: the metadata's live
        # brokers). None on a single node: every replica counts as live.
        self.live_brokers: Callable[[], Container[int]] | None = None
        self.isr_proposer: IsrProposer | None = None
        self.txn_marker_listeners: list[TxnMarkerListener] = []
        # Called with a topic's name once it is deleted (the group coordinator drops the
        # topic's committed offsets, as Kafka does).
        self.topic_deleted_listeners: list[Callable[[str], None]] = []

    # -- start-up -------------------------------------------------------------------------

    def load(self, *, only: Collection[str] | None = None) -> None:
        """Open a Partition for every partition the catalog knows (of ``only`` those
        topics, in a cluster, where the rest come from the cluster's metadata), creating the
        logs that are missing (a topic whose creation a crash interrupted is completed
        here). A partition whose log cannot be opened or created is left out, with the
        reason logged: Metadata reports it unavailable and the broker serves the others."""
        for info in self.catalog.topics():
            if only is not None and info.name not in only:
                continue
            config = self.log_config_for(info.name)
            for index in range(info.partitions):
                try:
                    self._open_partition(info, index, config)
                except StorageError as exc:
                    logger.error("partition %s-%d is unavailable: %s", info.name, index, exc)

    async def load_off_loop(self, *, only: Collection[str] | None = None) -> None:
        """``load`` with the leader epoch checkpoints it changes written in the executor,
        side by side, instead of one fsync after another on the loop. Becoming leader
        assigns the epoch at the log end offset; for an empty log, whose entry the load's
        truncation removed (as Kafka's does), that is a write and two fsyncs per partition,
        which at thousands of empty partitions (every broker has 150 internal ones) held
        the loop for seconds. Nothing else runs meanwhile (the listeners are not
        accepting yet); a partition whose checkpoint cannot be written is left out, as
        ``load`` leaves out one it cannot open."""
        deferred: list[TopicPartition] = []
        topics = [info for info in self.catalog.topics() if only is None or info.name in only]
        topic_ids = {info.name: info.topic_id for info in topics}
        # Each loaded log's partition.metadata is read in the executor, side by side; only
        # one that is missing or stale is written, on the loop as before (at 10,000
        # partitions reading them on the loop took about a second).
        current = await self._logs.select_log_dirs(
            [TopicPartition(info.name, i) for info in topics for i in range(info.partitions)],
            lambda tp, directory: partition_metadata_is_current(directory, topic_ids[tp.topic]),
        )
        for info in topics:
            config = self.log_config_for(info.name)
            for index in range(info.partitions):
                tp = TopicPartition(info.name, index)
                try:
                    self._open_partition(
                        info,
                        index,
                        config,
                        defer_epoch_saves=True,
                        metadata_current=tp in current,
                    )
                except StorageError as exc:
                    logger.error("partition %s-%d is unavailable: %s", info.name, index, exc)
                    continue
                deferred.append(tp)
        logs = [self._partitions[tp].log for tp in deferred]
        failures = await self._logs.write_deferred_leader_epochs(logs)
        for tp, failure in zip(deferred, failures, strict=True):
            if failure is not None:
                self._partitions.pop(tp, None)
                logger.error("partition %s is unavailable: %s", tp, failure)

    def _open_partition(
        self,
        info: TopicInfo,
        index: int,
        config: LogConfig,
        *,
        defer_epoch_saves: bool = False,
        metadata_current: bool = False,
    ) -> None:
        """``metadata_current``: the log exists and its partition.metadata was just found
        current (``partition_metadata_is_current``), so it is not checked again."""
        tp = TopicPartition(info.name, index)
        topic_id = info.topic_id
        log = self._logs.get_or_create_log(
            tp,
            config,
            prepare=None
            if metadata_current
            else lambda directory: write_partition_metadata(directory, topic_id),
        )
        if defer_epoch_saves:
            log.leader_epoch_cache.defer_saves()
        try:
            partition = Partition(tp, log, local_broker_id=self.broker_id, clock=self._clock)
        except BaseException:
            if defer_epoch_saves:
                log.leader_epoch_cache.end_deferral()
            raise
        self._partitions[tp] = partition

    # -- lookups --------------------------------------------------------------------------

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get(TopicPartition(topic, partition))

    def partitions(self) -> Iterator[Partition]:
        return iter(self._partitions.values())

    def state_generation(self) -> int:
        """A number that changes whenever what ``get_partition`` finds may report something
        else: a partition hosted or dropped, any partition's new state (leader, epochs,
        replicas, ISR), any log gone offline. Equal numbers mean nothing of that changed;
        it may also change when nothing here did (the last two count process-wide). Each
        term only grows, so their sum changes whenever one does."""
        return self._partitions.changes + Partition.state_changes + Log.offline_transitions

    def log_config_for(self, topic: str) -> LogConfig:
        return topic_log_config(self.catalog, self._default_log_config, topic)

    @property
    def default_log_config(self) -> LogConfig:
        return self._default_log_config

    # -- hosting and removing partitions (the apply side of topic changes) ----------------
    #
    # The topic's catalog entry is its caller's: on a single node the topic admin
    # (josefk.broker.topic_admin) writes it and calls these; in a cluster the cluster node
    # mirrors etcd into it. These only make, reconfigure and remove the logs and Partitions.

    def host_partitions(self, info: TopicInfo, indexes: range) -> None:
        """Host the partitions ``indexes`` of ``info``, their logs created if missing, on the
        loop. Raises StorageError (LogCreationError, KafkaStorageError) at the first that
        cannot be made; the ones made before stay hosted (``remove_new_partitions`` undoes)."""
        config = self.log_config_for(info.name)
        for index in indexes:
            self._open_partition(info, index, config)

    async def host_partitions_off_loop(
        self, info: TopicInfo, indexes: range, *, wanted: Callable[[], bool]
    ) -> None:
        """``host_partitions`` with each partition's files written and fsynced in the
        executor, so hosting thousands of partitions does not hold the loop. After each
        window of partitions ``wanted()`` says whether the topic is still wanted (not deleted
        meanwhile): if not, that window's partitions are removed again and no more are made."""
        config = self.log_config_for(info.name)
        topic_id = info.topic_id

        def write_metadata(directory: Path) -> None:
            write_partition_metadata(directory, topic_id)

        # Partitions in windows: each partition's fsyncs (partition.metadata and the leader
        # epoch checkpoint, file and directory) run side by side in the executor, where the
        # filesystem's journal commits them together; one at a time, 10,000 partitions
        # took minutes.
        for start in range(indexes.start, indexes.stop, _CREATION_WINDOW):
            window = range(start, min(start + _CREATION_WINDOW, indexes.stop))
            made = []
            for index in window:
                tp = TopicPartition(info.name, index)
                # An empty log is a mkdir and empty files; its fsyncs leave the loop.
                log = self._logs.get_or_create_log(tp, config)
                log.leader_epoch_cache.defer_saves()
                self._partitions[tp] = Partition(
                    tp, log, local_broker_id=self.broker_id, clock=self._clock
                )
                made.append((tp, log))
            results = await asyncio.gather(
                *(self._logs.prepare_log_off_loop(log, write_metadata) for _, log in made),
                return_exceptions=True,
            )
            for result in results:
                if isinstance(result, BaseException):
                    raise result
            if not wanted():
                # Deleted while being created: what was made before the deletion went with
                # it; this window's go now, and no more are made.
                for tp, _ in made:
                    if self._partitions.pop(tp, None) is not None:
                        self._logs.delete_log(tp)
                logger.info("topic %s was deleted while its partitions were created", info.name)
                return

    def remove_new_partitions(self, info: TopicInfo, indexes: range) -> bool:
        """Undo a hosting that failed part way: remove the partitions of ``indexes`` made so
        far. False (and nothing removed) when one of them is in an offline log dir: its
        directory cannot be removed, so the catalog must keep naming it."""
        made = [
            TopicPartition(info.name, index)
            for index in indexes
            if TopicPartition(info.name, index) in self._partitions
        ]
        if any(self._partitions[tp].log.is_offline for tp in made):
            logger.error(
                "topic %s keeps %d partitions: a log dir failed while it was created; "
                "the next start completes it",
                info.name,
                indexes.stop,
            )
            return False
        for tp in made:
            del self._partitions[tp]
            try:
                self._logs.remove_new_log(tp)
            except StorageError as exc:
                logger.error("could not remove the new log of %s: %s", tp, exc)
                return False
        return True

    def update_default_log_config(self, defaults: LogConfig) -> None:
        """The broker's topic defaults changed (a dynamic broker config, KIP-226): every
        hosted log takes them under its topic's own overrides, from its next append, roll
        or retention pass, as Kafka's DynamicLogConfig does."""
        self._default_log_config = defaults
        for partition in self._partitions.values():
            partition.log.update_config(self.log_config_for(partition.tp.topic))

    def topic_configs_changed(self, name: str) -> None:
        """The catalog holds new overrides for ``name`` (written by the single node's topic
        admin, or in a cluster mirrored from etcd): the topic's hosted logs take them."""
        config = self.log_config_for(name)
        for partition in self._partitions.values():
            if partition.tp.topic == name:
                partition.log.update_config(config)

    def remove_topic(self, name: str, partitions: int) -> None:
        """Stop hosting partitions ``0 .. partitions - 1`` of ``name``, a topic gone from the
        catalog, and delete their logs; then tell ``topic_deleted_listeners``. Every partition
        is deleted even if one fails (its StorageError is raised after): one partition's file
        trouble must not leave the others behind, adopted at restart."""
        failed: StorageError | None = None
        for index in range(partitions):
            tp = TopicPartition(name, index)
            self._partitions.pop(tp, None)
            try:
                self._logs.delete_log(tp)
            except StorageError as exc:
                failed = failed or exc
            self.partition_changed(tp)
        logger.info("deleted topic %s", name)
        for listener in self.topic_deleted_listeners:
            listener(name)
        if failed is not None:
            raise failed

    # -- roles from the cluster's metadata -------------------------------------------------

    def apply_partition_state(self, tp: TopicPartition, state: PartitionState) -> Partition:
        """Host ``tp`` (creating its log if needed) in the role ``state`` gives this broker:
        leader or follower. Produces and fetches waiting on it are woken to re-check."""
        partition = self._partitions.get(tp)
        if partition is None:
            info = self.catalog.get(tp.topic)
            topic_id = info.topic_id if info is not None else None
            log = self._logs.get_or_create_log(
                tp,
                self.log_config_for(tp.topic),
                prepare=None
                if topic_id is None
                else lambda directory: write_partition_metadata(directory, topic_id),
            )
            partition = Partition(
                tp, log, local_broker_id=self.broker_id, clock=self._clock, state=state
            )
            self._partitions[tp] = partition
        elif state.leader == self.broker_id:
            partition.make_leader(state)
        else:
            partition.make_follower(state)
        self.partition_changed(tp)
        return partition

    async def host_partition_off_loop(self, tp: TopicPartition, state: PartitionState) -> Partition:
        """``apply_partition_state`` for a partition this broker does not host yet (a
        cluster's new topic or partition, or a replica moved here), its files made as
        ``host_partitions_off_loop`` makes them: the log on the loop (a mkdir and empty files),
        ``partition.metadata`` written and fsynced in the executor, so that a topic of
        thousands of partitions does not hold the loop. The partition is hosted, in its role,
        from before the await. Raises StorageError as ``get_or_create_log`` does."""
        if tp in self._partitions:
            return self.apply_partition_state(tp, state)
        info = self.catalog.get(tp.topic)
        log = self._logs.get_or_create_log(tp, self.log_config_for(tp.topic))
        partition = Partition(
            tp, log, local_broker_id=self.broker_id, clock=self._clock, state=state
        )
        self._partitions[tp] = partition
        self.partition_changed(tp)
        if info is not None:
            topic_id = info.topic_id
            await self._logs.prepare_log_off_loop(
                log, lambda directory: write_partition_metadata(directory, topic_id)
            )
        return partition

    def remove_partition(self, tp: TopicPartition, *, delete: bool) -> None:
        """Stop hosting ``tp`` (its topic was deleted, or the replica moved away)."""
        if self._partitions.pop(tp, None) is None:
            return
        if delete:
            self._logs.delete_log(tp)
        self.partition_changed(tp)

    # -- data path ------------------------------------------------------------------------

    def append_to_leader(
        self,
        partition: Partition,
        records: memoryview,
        *,
        acks: int = 1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        info = partition.append_records_to_leader(records, acks=acks, origin=origin)
        # Fetches parked on this partition may now have enough bytes.
        self.fetch_purgatory.notify(partition.tp)
        return info

    def append_records(
        self, entries: Sequence[tuple[TopicPartition, memoryview]], *, acks: int
    ) -> list[AppendOutcome]:
        """Append a produce request's batches, partition by partition; a failure of one
        partition does not stop the others. Never awaits: for acks=all, whether the result
        must wait is ``must_wait_for_acks``, and the waiting is ``wait_for_acks``.

        The request's compressed batches share one decompression budget. A refused
        partition's error is kept without its traceback: the frames of a failed validation
        hold its buffers (a batch decompressed up to its bound), and the outcome lives until
        the answer is built, acks=all waits included."""
        outcomes = []
        budget = DecompressionBudget.for_request(sum(len(records) for _, records in entries))
        for tp, records in entries:
            outcome = AppendOutcome(tp)
            partition = self._partitions.get(tp)
            if partition is None:
                outcome.error = UnknownTopicOrPartitionError(f"{tp} is not hosted here")
            else:
                try:
                    outcome.info = partition.append_records_to_leader(
                        records, acks=acks, budget=budget
                    )
                except (RecordsError, StorageError) as exc:  # expected: Kafka's error codes
                    outcome.error = _detached(exc)
                except Exception as exc:  # noqa: BLE001  per partition, as Kafka answers it
                    outcome.error = exc
                else:
                    self.fetch_purgatory.notify(tp)
            outcomes.append(outcome)
        return outcomes

    def append_txn_markers(
        self, entries: Sequence[tuple[TopicPartition, TxnMarker]]
    ) -> list[AppendOutcome]:
        """Write transaction markers (WriteTxnMarkers), one outcome per entry; a failure of
        one partition does not stop the others. Markers are acks=all appends: the caller
        waits with ``wait_for_acks``. Consumers parked on a partition are woken (its last
        stable offset may have moved) and the marker listeners told."""
        outcomes = []
        for tp, marker in entries:
            outcome = AppendOutcome(tp)
            partition = self._partitions.get(tp)
            if partition is None:
                outcome.error = UnknownTopicOrPartitionError(f"{tp} is not hosted here")
            else:
                try:
                    outcome.info = partition.append_txn_marker(marker)
                except Exception as exc:  # noqa: BLE001  per partition, as Kafka answers it
                    outcome.error = exc
                else:
                    self.fetch_purgatory.notify(tp)
                    for listener in self.txn_marker_listeners:
                        try:
                            listener(tp, marker)
                        except Exception:
                            logger.exception("transaction marker listener failed for %s", tp)
            outcomes.append(outcome)
        return outcomes

    def must_wait_for_acks(self, outcomes: Sequence[AppendOutcome]) -> bool:
        """Whether any appended partition's high watermark is still short of the append."""
        return any(
            o.info is not None and not self._acks_satisfied(o) and o.error is None for o in outcomes
        )

    async def wait_for_acks(self, outcomes: Sequence[AppendOutcome], timeout_ms: int) -> None:
        """acks=all: wait (in the produce purgatory, woken by follower fetches and ISR
        changes, never polling) until every appended partition's high watermark passes its
        append; partitions still short at ``timeout_ms`` get RequestTimedOutError."""
        late = await _park_until(
            self.produce_purgatory,
            outcomes,
            lambda o: o.info is not None and o.error is None and not self._acks_satisfied(o),
            timeout_ms,
        )
        for outcome in late:
            outcome.error = RequestTimedOutError(
                f"{outcome.tp}: acks=all not satisfied within {timeout_ms} ms"
            )

    def _acks_satisfied(self, outcome: AppendOutcome) -> bool:
        partition = self._partitions.get(outcome.tp)
        try:
            if partition is None:
                raise NotLeaderOrFollowerError(f"{outcome.tp} is no longer hosted here")
            return partition.acks_all_satisfied(outcome.required_offset)
        except Exception as exc:  # noqa: BLE001  the produce is answered with whatever stopped it
            outcome.error = exc
            return True

    def visibility_keys(self, tp: TopicPartition) -> list[Hashable]:
        """The fetch purgatory's keys that wake a consumer-side reader of ``tp`` (an append,
        a high watermark move): for readers that wait in the purgatory themselves (share
        fetches)."""
        return [tp, _HighWatermarkKey(tp)]

    def high_watermark_moved(self, tp: TopicPartition) -> None:
        """A follower's fetch moved ``tp``'s high watermark (or, on a follower, the leader's
        answer did): consumers and the acks=all produces it passed may proceed."""
        self.fetch_purgatory.notify(_HighWatermarkKey(tp))
        partition = self._partitions.get(tp)
        if partition is not None and partition.is_leader:
            self.produce_purgatory.advance(tp, partition.log.high_watermark)
        else:
            self.produce_purgatory.notify(tp)

    def partition_changed(self, tp: TopicPartition) -> None:
        """``tp``'s role, leader epoch or ISR changed (or it went): every fetch, produce and
        DeleteRecords waiting on it re-checks."""
        self.fetch_purgatory.notify(tp)
        self.fetch_purgatory.notify(_HighWatermarkKey(tp))
        self.produce_purgatory.notify(tp)
        self.delete_records_purgatory.notify(tp)

    def live_brokers_changed(self) -> None:
        """A broker registered or went away: a follower on a broker that died no longer
        holds back its partitions' low watermarks, so every DeleteRecords re-checks."""
        self.delete_records_purgatory.notify_all()

    # -- DeleteRecords -----------------------------------------------------------------------

    def delete_records(
        self, entries: Sequence[tuple[TopicPartition, int]]
    ) -> list[DeleteRecordsOutcome]:
        """Move each partition's log start offset (as leader) to its offset
        (``DELETE_TO_HIGH_WATERMARK``: the high watermark) and drop the segments wholly below
        it; a failure of one partition does not stop the others. Never awaits: an outcome
        whose low watermark is still short is ``pending``, and the waiting is
        ``wait_for_low_watermark``. Errors per partition: UnknownTopicOrPartitionError,
        NotLeaderOrFollowerError, OffsetOutOfRangeError (below 0 or past the high
        watermark, as Kafka refuses it), and the log's own."""
        live = self._live_brokers()
        outcomes = []
        for tp, offset in entries:
            outcome = DeleteRecordsOutcome(tp)
            partition = self._partitions.get(tp)
            try:
                if partition is None:
                    raise UnknownTopicOrPartitionError(f"{tp} is not hosted here")
                if not partition.is_leader:
                    # A follower must not move its own log start: the leader's reaches it
                    # with the leader's fetch responses.
                    raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {tp}")
                log = partition.log
                high_watermark = log.high_watermark
                wanted = high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
                if wanted < 0 or wanted > high_watermark:
                    raise OffsetOutOfRangeError(
                        f"{tp}: cannot delete records below {offset}: the high watermark "
                        f"is {high_watermark}"
                    )
                log.delete_records(wanted)
                outcome.required_offset = wanted
                outcome.low_watermark = partition.low_watermark(live)
                outcome.pending = outcome.low_watermark < wanted
            except Exception as exc:  # noqa: BLE001  per partition, as Kafka answers it
                outcome.error = exc
            outcomes.append(outcome)
        return outcomes

    async def wait_for_low_watermark(
        self, outcomes: Sequence[DeleteRecordsOutcome], timeout_ms: int
    ) -> None:
        """Wait (in the DeleteRecords purgatory, woken by follower fetches and by changes of
        leadership, replicas or live brokers, never polling) until every pending partition's
        low watermark reaches its offset (Kafka's DelayedDeleteRecords). Partitions still
        short at ``timeout_ms`` get RequestTimedOutError and keep the low watermark they had
        when deleted; one whose leadership moved meanwhile gets NotLeaderOrFollowerError."""
        late = await _park_until(
            self.delete_records_purgatory,
            outcomes,
            lambda o: o.pending and not self._low_watermark_reached(o, self._live_brokers()),
            timeout_ms,
        )
        for outcome in late:
            outcome.pending = False
            outcome.error = RequestTimedOutError(
                f"{outcome.tp}: the low watermark did not reach "
                f"{outcome.required_offset} within {timeout_ms} ms"
            )

    def _low_watermark_reached(
        self, outcome: DeleteRecordsOutcome, live: Container[int] | None
    ) -> bool:
        """Whether ``outcome`` is answered: its low watermark reached its offset (taken as
        the answer), or leadership moved away (the answer is that error)."""
        partition = self._partitions.get(outcome.tp)
        if partition is None or not partition.is_leader:
            outcome.error = NotLeaderOrFollowerError(
                f"leadership of {outcome.tp} moved while waiting for its low watermark"
            )
            outcome.low_watermark = -1
        else:
            low_watermark = partition.low_watermark(live)
            if low_watermark < outcome.required_offset:
                return False
            outcome.low_watermark = low_watermark
        outcome.pending = False
        return True

    def _live_brokers(self) -> Container[int] | None:
        return None if self.live_brokers is None else self.live_brokers()

    async def fetch(
        self,
        partitions: Sequence[FetchPartition],
        *,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation: FetchIsolation,
        record: bool = True,
    ) -> list[FetchOutcome]:
        """Read every partition at once; park in the fetch purgatory (woken by appends and
        high watermark moves) until ``min_bytes`` are there or ``max_wait_ms`` passes.

        ``replica_id`` >= 0 is a follower: it reads up to the log end offset of the leader
        (never the high watermark), and its fetch offset is its log end offset, which may
        move the high watermark and bring it back into the ISR. Everyone else reads from the
        leader only, up to the high watermark (or the last stable offset). ``record``
        False: a request already counted as the follower's fetch (read again after a wait).
        """
        if replica_id >= 0:
            isolation = FetchIsolation.LOG_END
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000
        keys: list[Hashable] = [p.tp for p in partitions]
        if replica_id < 0:
            keys += [_HighWatermarkKey(p.tp) for p in partitions]
        outcomes, total, failed = self._read_all(partitions, isolation, max_bytes)
        if replica_id >= 0 and record:
            self._record_follower_fetches(replica_id, partitions)
        while total < min_bytes and not failed and keys:
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self.fetch_purgatory.wait(keys, remaining):
                outcomes, _, _ = self._read_all(partitions, isolation, max_bytes)
                break
            outcomes, total, failed = self._read_all(partitions, isolation, max_bytes)
        return outcomes

    async def wait_for_news(
        self,
        tps: Sequence[TopicPartition],
        *,
        replica_id: int,
        timeout_s: float,
        waiter: asyncio.Future[None] | None = None,
    ) -> bool:
        """Wait, as ``fetch`` does, until one of ``tps`` may have something new for a
        fetch (an append; for a consumer also a high watermark move; a change of role):
        True when woken, False at the timeout or when the broker is stopping. ``waiter``:
        the future to park, when standing watches (``watch_for_news``) may wake it too."""
        keys: list[Hashable] = list(tps)
        if replica_id < 0:
            keys += [_HighWatermarkKey(tp) for tp in tps]
        return await self.fetch_purgatory.wait(keys, timeout_s, waiter=waiter)

    def watch_for_news(
        self, tp: TopicPartition, watcher: Waiter, *, replica_id: int
    ) -> Callable[[], None]:
        """Keep ``watcher`` in the fetch purgatory, standing, under what would wake a fetch
        of ``tp`` (as ``wait_for_news``) until it fires once; the function that drops it."""
        purgatory = self.fetch_purgatory
        cancel = purgatory.watch(tp, watcher)
        if replica_id >= 0:
            return cancel
        cancel_high_watermark = purgatory.watch(_HighWatermarkKey(tp), watcher)

        def cancel_both() -> None:
            cancel()
            cancel_high_watermark()

        return cancel_both

    def _read_all(
        self, partitions: Sequence[FetchPartition], isolation: FetchIsolation, max_bytes: int
    ) -> tuple[list[FetchOutcome], int, bool]:
        """One pass: (outcomes, bytes found, whether any partition failed). Limits as Kafka
        sets them: each partition's max bytes and the request's, except that the first batch
        of the first partition with data is returned whole (KIP-74)."""
        remaining = max(max_bytes, 0)
        min_one_message = True
        total = 0
        failed = False
        outcomes = []
        for wanted in partitions:
            outcome = FetchOutcome()
            partition = self._partitions.get(wanted.tp)
            try:
                if partition is None:
                    raise UnknownTopicOrPartitionError(f"{wanted.tp} is not hosted here")
                partition.check_leader_epoch(wanted.current_leader_epoch)
                if not partition.is_leader:
                    raise NotLeaderOrFollowerError(
                        f"broker {self.broker_id} does not lead {wanted.tp}"
                    )
                known = wanted.known_offsets
                if known is not None and partition.nothing_new(
                    wanted.fetch_offset, isolation, known
                ):
                    outcome.unchanged = True
                    outcomes.append(outcome)
                    continue
                read = partition.read(
                    wanted.fetch_offset,
                    min(max(wanted.max_bytes, 0), remaining),
                    isolation,
                    min_one_message=min_one_message,
                )
            except OffsetOutOfRangeError as exc:
                assert partition is not None
                outcome.error = exc
                outcome.high_watermark = partition.log.high_watermark
                outcome.log_start_offset = partition.log.log_start_offset
            except Exception as exc:  # noqa: BLE001  per partition, as Kafka answers it
                outcome.error = exc
            else:
                outcome.read = read
                size = read.info.size
                if size:
                    min_one_message = False
                    remaining = max(remaining - size, 0)
                    total += size
            failed = failed or outcome.error is not None
            outcomes.append(outcome)
        return outcomes, total, failed

    def _record_follower_fetches(
        self, replica_id: int, partitions: Sequence[FetchPartition]
    ) -> None:
        for wanted in partitions:
            partition = self._partitions.get(wanted.tp)
            if partition is not None and partition.is_leader:
                self._record_follower_fetch(
                    replica_id, partition, wanted.fetch_offset, wanted.log_start_offset
                )

    def _record_follower_fetch(
        self, replica_id: int, partition: Partition, fetch_offset: int, log_start_offset: int
    ) -> None:
        """A follower fetched ``partition`` (which this broker leads) from ``fetch_offset``."""
        log_start_moved = False
        # Only while a DeleteRecords waits does a follower's log start offset matter here.
        if self.delete_records_purgatory.size > 0:
            progress = partition.progress(replica_id)
            log_start_moved = progress is not None and progress.log_start_offset != log_start_offset
        if partition.update_follower_fetch_state(replica_id, fetch_offset, log_start_offset):
            self.high_watermark_moved(partition.tp)
        if log_start_moved:
            self.delete_records_purgatory.advance(
                partition.tp, partition.low_watermark(self._live_brokers())
            )
        proposer = self.isr_proposer
        if proposer is not None:
            isr = partition.isr_expansion(replica_id)
            if isr is not None:
                proposer(partition, isr)

    def session_partition_quiet(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        current_leader_epoch: int,
        log_start_offset: int,
        known: tuple[int, int, int],
        *,
        replica_id: int,
        isolation: FetchIsolation,
        record: bool = True,
    ) -> QuietPartition | None:
        """Whether an incremental fetch session's partition has nothing to answer: this
        broker leads it in the epoch asked for, nothing lies past ``fetch_offset`` and the
        offsets ``known`` (last answered) still hold. Then a ``QuietPartition`` to compare
        at the session's next fetches, else None. A follower's fetch of
        such a partition is recorded here (it keeps the follower in the ISR), so the fetch
        can leave the partition out of everything else it does (``record`` False: this
        request's fetch is already recorded; a request is counted once, however often its
        wait is woken)."""
        partition = self._partitions.get(tp)
        if partition is None or not partition.is_leader:
            return None
        if current_leader_epoch >= 0 and current_leader_epoch != partition.leader_epoch:
            return None
        if replica_id >= 0:
            isolation = FetchIsolation.LOG_END
        if not partition.nothing_new(fetch_offset, isolation, known):
            return None
        # Taken before the follower's fetch is recorded: when that moves the high watermark,
        # the partition has news for the next fetch.
        change_count = partition.log.change_count
        progress = None
        if replica_id >= 0:
            if record:
                self._record_follower_fetch(replica_id, partition, fetch_offset, log_start_offset)
            progress = partition.progress(replica_id)
            if progress is None or replica_id not in partition.isr:
                # Quiet now, but looked at again at the next fetch: an out-of-sync
                # follower's fetch is what may propose its ISR expansion.
                change_count = -1
        return QuietPartition(
            tp,
            partition,
            change_count,
            partition.state_version,
            self._partitions.changes,
            isolation,
            progress,
        )

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def hosting_changes(self) -> int:
        """How many times a partition was hosted or dropped here (``QuietPartition.hosting``)."""
        return self._partitions.changes

    def end_offset_for_leader_epoch(
        self, tp: TopicPartition, *, current_leader_epoch: int, leader_epoch: int, replica_id: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch for one partition: (epoch, end offset) as the leader's
        leader-epoch cache answers it. Only the leader answers (Kafka's "debug consumer",
        replica id -2 from an old client... is the default of consumers too, so it is not
        singled out). Raises UnknownTopicOrPartitionError, NotLeaderOrFollowerError,
        FencedLeaderEpochError, UnknownLeaderEpochError."""
        partition = self._partitions.get(tp)
        if partition is None:
            raise UnknownTopicOrPartitionError(f"{tp} is not hosted here")
        partition.check_leader_epoch(current_leader_epoch)
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {tp}")
        return partition.log.end_offset_for_epoch(leader_epoch)


def _detached(exc: BaseException) -> BaseException:
    """``exc`` without its traceback and chained exceptions (whose frames may hold large
    buffers), for an error that is only ever turned into an error code and message."""
    exc.__traceback__ = None
    exc.__context__ = None
    exc.__cause__ = None
    return exc
