"""The share coordinator (KIP-932): the durable state of share partitions, kept in the internal
topic ``__share_group_state``.

Owns ``ShareCoordinator`` (Kafka's ShareCoordinatorService and shards in one), ``StateLog``
(what it needs of the topic) with ``TopicStateLog`` (the real one, on the replica manager) and
``MemoryStateLog`` (unit tests), and ``share_state_partition`` (which partition holds a key).

The state of a share partition (group, topic id, partition) lives in the topic partition
``abs(javaHash("group:topicId:partition")) % partitions``; the leader of that partition is its
share coordinator (FindCoordinator key type 2 answers it). A coordinator keeps the state of the
keys of the partitions it leads in memory (``ShareState``) and changes it only by appending a
record: a ShareSnapshot (the whole state: on initialisation and after
``share.coordinator.snapshot.update.records.per.snapshot`` updates) or a ShareUpdate (the
batches that changed). An append is written with acks=all and ``write`` returns only once the
in-sync replicas hold it (on one node at once), so a share partition that answers an
acknowledgement after ``write`` knows it survives a crash of either broker. Loading a partition
(at start-up on one node, on becoming its leader in a cluster) replays its log: a snapshot
replaces a key's state, an update merges into it, a tombstone deletes it.

Fencing, as Kafka's: a write or read with a leader epoch below the one kept is refused with
FENCED_LEADER_EPOCH (a former share-partition leader cannot overwrite its successor's state);
a read with a higher leader epoch records it first (a ShareUpdate with no batches).

Concurrency: event loop thread only. Appends of one partition are made in call order; a
write awaits only its own replication, after its record is in the log and in memory.

Imports the replica manager, josefk.records, the group store's batch builder and reader and
the share records; must not import handlers or the share partition manager.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from josefk.broker.errors import error_code_for
from josefk.broker.group.offsets_schema import coordinator_partition
from josefk.broker.group.store import build_batch, keyed_records
from josefk.broker.replica_manager import AppendOutcome, ReplicaManager
from josefk.broker.share.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    UNCHANGED_START_OFFSET,
    ShareRecordError,
    ShareState,
    ShareStateKey,
    ShareUpdateValue,
    StateBatch,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
)
from josefk.broker.topic_admin import LocalTopicAdmin
from josefk.protocol.errors import ErrorCode
from josefk.storage.offsets import AppendOrigin
from josefk.util.clock import Clock

logger = logging.getLogger(__name__)

SHARE_STATE_TOPIC: Final = "__share_group_state"

KeyValue = tuple[bytes, bytes | None]


def share_state_partition(key: ShareStateKey, partitions: int) -> int:
    """The ``__share_group_state`` partition of a share partition's state, as Kafka maps
    its coordinator key (``Utils.abs(key.hashCode()) % partitions``)."""
    return coordinator_partition(key.coordinator_key(), partitions)


class StateLogError(Exception):
    """An append to ``__share_group_state`` failed; ``error`` is the code to answer."""

    def __init__(self, message: str, *, error: ErrorCode) -> None:
        super().__init__(message)
        self.error = error


class StateLog(Protocol):
    @property
    def partition_count(self) -> int: ...

    def append(self, partition: int, records: Sequence[KeyValue], now_ms: int) -> AppendOutcome:
        """Write the records as one batch (acks=all). Raises StateLogError."""
        ...

    async def replicated(self, outcome: AppendOutcome) -> ErrorCode:
        """Wait until the in-sync replicas hold the append; its error code (NONE: held)."""
        ...

    def read(self, partition: int) -> Iterator[KeyValue]:
        """Every record of the partition from its log start offset, in offset order."""
        ...


class TopicStateLog:
    """``__share_group_state`` as a topic of this broker."""

    def __init__(
        self, replicas: ReplicaManager, *, partitions: int, ack_timeout_ms: int = 30_000
    ) -> None:
        """``partitions``: the count until the topic exists (in a cluster the controller
        creates it); an existing topic keeps its own."""
        self._replicas = replicas
        self._partitions = partitions
        self._ack_timeout_ms = ack_timeout_ms

    @staticmethod
    def ensure_topic(
        replicas: ReplicaManager,
        topics: LocalTopicAdmin,
        *,
        partitions: int,
        segment_bytes: int,
    ) -> TopicStateLog:
        """Create the topic as Kafka does (compacted, internal) unless it exists."""
        topics.ensure_coordinator_topic(SHARE_STATE_TOPIC, partitions, segment_bytes)
        return TopicStateLog(replicas, partitions=partitions)

    @property
    def partition_count(self) -> int:
        info = self._replicas.catalog.get(SHARE_STATE_TOPIC)
        return info.partitions if info is not None else self._partitions

    def append(self, partition: int, records: Sequence[KeyValue], now_ms: int) -> AppendOutcome:
        target = self._replicas.get_partition(SHARE_STATE_TOPIC, partition)
        if target is None or not target.is_leader:
            raise StateLogError(
                f"{SHARE_STATE_TOPIC}-{partition} is not led here", error=ErrorCode.NOT_COORDINATOR
            )
        batch = build_batch(records, now_ms)
        try:
            info = self._replicas.append_to_leader(
                target, memoryview(batch), acks=-1, origin=AppendOrigin.COORDINATOR
            )
        except Exception as exc:
            code = error_code_for(exc)
            logger.warning("append to %s-%d failed: %s", SHARE_STATE_TOPIC, partition, exc)
            raise StateLogError(str(exc), error=_coordinator_error(code)) from exc
        return AppendOutcome(target.tp, info)

    async def replicated(self, outcome: AppendOutcome) -> ErrorCode:
        replicas = self._replicas
        if replicas.must_wait_for_acks([outcome]):
            await replicas.wait_for_acks([outcome], self._ack_timeout_ms)
        if outcome.error is not None:
            return _coordinator_error(error_code_for(outcome.error))
        return ErrorCode.NONE

    def read(self, partition: int) -> Iterator[KeyValue]:
        return keyed_records(self._replicas, SHARE_STATE_TOPIC, partition)


def _coordinator_error(code: ErrorCode) -> ErrorCode:
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


class MemoryStateLog:
    """A ``__share_group_state`` in memory, for unit tests: every append is replicated."""

    def __init__(self, partition_count: int = 50) -> None:
        self._partition_count = partition_count
        self.log: dict[int, list[KeyValue]] = {}
        self.appends = 0
        self.fail_with: ErrorCode | None = None

    @property
    def partition_count(self) -> int:
        return self._partition_count

    def append(self, partition: int, records: Sequence[KeyValue], now_ms: int) -> AppendOutcome:
        if self.fail_with is not None:
            raise StateLogError("injected failure", error=self.fail_with)
        self.log.setdefault(partition, []).extend(records)
        self.appends += 1
        from josefk.storage.offsets import TopicPartition

        return AppendOutcome(TopicPartition(SHARE_STATE_TOPIC, partition))

    async def replicated(self, outcome: AppendOutcome) -> ErrorCode:
        return ErrorCode.NONE

    def read(self, partition: int) -> Iterator[KeyValue]:
        return iter(list(self.log.get(partition, [])))


@dataclass(frozen=True, slots=True)
class ReadResult:
    error: ErrorCode
    state: ShareState | None = None


class ShareCoordinator:
    """The share-partition states of the ``__share_group_state`` partitions led here."""

    def __init__(self, log: StateLog, clock: Clock, *, updates_per_snapshot: int = 500) -> None:
        self._log = log
        self._clock = clock
        self.updates_per_snapshot = updates_per_snapshot
        self.states: dict[ShareStateKey, ShareState] = {}
        # None: every partition is coordinated here (one node); else those led here.
        self._owned: set[int] | None = None
        # The broker's ShareProbe (josefk.metrics.share), when metrics are on.
        self.probe: Any = None

    # -- ownership ------------------------------------------------------------------------

    @property
    def partition_count(self) -> int:
        return self._log.partition_count

    def partition_for(self, key: ShareStateKey) -> int:
        return share_state_partition(key, self._log.partition_count)

    def coordinate_by_leadership(self) -> None:
        self._owned = set()

    def owns(self, key: ShareStateKey) -> bool:
        return self._owned is None or self.partition_for(key) in self._owned

    def load(self, partitions: Sequence[int] | None = None) -> None:
        """Replay ``partitions`` (all by default) of the topic into the states."""
        if partitions is None:
            partitions = range(self._log.partition_count)
        for partition in partitions:
            loaded = 0
            for raw_key, raw_value in self._log.read(partition):
                try:
                    record_type, key = decode_key(raw_key)
                    if raw_value is None:
                        self.states.pop(key, None)
                    elif record_type == SHARE_SNAPSHOT:
                        self.states[key] = ShareState.from_snapshot(decode_snapshot(raw_value))
                    else:
                        update = decode_update(raw_value)
                        state = self.states.get(key)
                        if state is not None and update.snapshot_epoch == state.snapshot_epoch:
                            state.apply_update(update)
                    loaded += 1
                except ShareRecordError as exc:
                    logger.warning("skipping a %s record: %s", SHARE_STATE_TOPIC, exc)
            if loaded:
                logger.info("loaded %d records of %s-%d", loaded, SHARE_STATE_TOPIC, partition)

    def load_partition(self, partition: int) -> None:
        if self._owned is None or partition in self._owned:
            return
        self._owned.add(partition)
        for key in [k for k in self.states if self.partition_for(k) == partition]:
            del self.states[key]
        self.load([partition])

    def unload_partition(self, partition: int) -> None:
        if self._owned is None or partition not in self._owned:
            return
        self._owned.discard(partition)
        for key in [k for k in self.states if self.partition_for(k) == partition]:
            del self.states[key]

    # -- the persister's calls --------------------------------------------------------------

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ReadResult:
        """ReadShareGroupState: the key's state (None: never written), after recording a
        higher ``leader_epoch`` (-1: do not)."""
        if not self.owns(key):
            return ReadResult(ErrorCode.NOT_COORDINATOR)
        state = self.states.get(key)
        if state is None:
            return ReadResult(ErrorCode.NONE)
        if leader_epoch >= 0 and leader_epoch < state.leader_epoch:
            return ReadResult(ErrorCode.FENCED_LEADER_EPOCH)
        if leader_epoch > state.leader_epoch:
            error = await self._append_update(
                key, state, ShareUpdateValue(state.snapshot_epoch, leader_epoch, -1, ())
            )
            if error:
                return ReadResult(error)
        return ReadResult(ErrorCode.NONE, state)

    async def write(
        self,
        key: ShareStateKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> ErrorCode:
        """WriteShareGroupState: a new state (a snapshot) for a key not known, else an update
        with these batches; answered once the record is replicated."""
        began = self._clock.monotonic_ms()
        error = await self._write(
            key,
            state_epoch=state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            batches=batches,
        )
        if self.probe is not None and not error:
            self.probe.state_written(self._clock.monotonic_ms() - began)
        return error

    async def _write(
        self,
        key: ShareStateKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> ErrorCode:
        if not self.owns(key):
            return ErrorCode.NOT_COORDINATOR
        state = self.states.get(key)
        if state is not None:
            if leader_epoch >= 0 and leader_epoch < state.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if state_epoch < state.state_epoch:
                return ErrorCode.FENCED_STATE_EPOCH
        if state is None or state_epoch > state.state_epoch:
            fresh = ShareState(
                state_epoch=state_epoch,
                leader_epoch=max(leader_epoch, -1 if state is None else state.leader_epoch),
                start_offset=max(start_offset, 0),
                snapshot_epoch=0 if state is None else state.snapshot_epoch + 1,
            )
            fresh.batches = [b for b in batches if b.last_offset >= fresh.start_offset]
            return await self._append_snapshot(key, fresh)
        return await self._append_update(
            key,
            state,
            ShareUpdateValue(
                state.snapshot_epoch,
                max(leader_epoch, state.leader_epoch),
                start_offset,
                tuple(batches),
            ),
        )

    async def delete(self, key: ShareStateKey) -> ErrorCode:
        """DeleteShareGroupState: a tombstone for both record types of the key."""
        if not self.owns(key):
            return ErrorCode.NOT_COORDINATOR
        if key not in self.states:
            return ErrorCode.NONE
        partition = self.partition_for(key)
        try:
            outcome = self._log.append(
                partition,
                [(encode_key(SHARE_SNAPSHOT, key), None), (encode_key(SHARE_UPDATE, key), None)],
                self._clock.milliseconds(),
            )
        except StateLogError as exc:
            return exc.error
        self.states.pop(key, None)
        return await self._log.replicated(outcome)

    # -- appends ----------------------------------------------------------------------------

    async def _append_snapshot(self, key: ShareStateKey, state: ShareState) -> ErrorCode:
        now = self._clock.milliseconds()
        value = state.snapshot(state.snapshot_epoch, now)
        state.create_timestamp = value.create_timestamp
        try:
            outcome = self._log.append(
                self.partition_for(key),
                [(encode_key(SHARE_SNAPSHOT, key), encode_snapshot(value))],
                now,
            )
        except StateLogError as exc:
            return exc.error
        self.states[key] = state
        return await self._log.replicated(outcome)

    async def _append_update(
        self, key: ShareStateKey, state: ShareState, update: ShareUpdateValue
    ) -> ErrorCode:
        if state.updates_since_snapshot >= self.updates_per_snapshot:
            # Time for a snapshot: the merged state as one record, a new snapshot epoch.
            merged = ShareState(
                state_epoch=state.state_epoch,
                leader_epoch=state.leader_epoch,
                start_offset=state.start_offset,
                snapshot_epoch=state.snapshot_epoch + 1,
                batches=list(state.batches),
                create_timestamp=state.create_timestamp,
            )
            merged.apply_update(update)
            merged.updates_since_snapshot = 0
            return await self._append_snapshot(key, merged)
        try:
            outcome = self._log.append(
                self.partition_for(key),
                [(encode_key(SHARE_UPDATE, key), encode_update(update))],
                self._clock.milliseconds(),
            )
        except StateLogError as exc:
            return exc.error
        state.apply_update(update)
        return await self._log.replicated(outcome)


__all__ = [
    "SHARE_STATE_TOPIC",
    "UNCHANGED_START_OFFSET",
    "MemoryStateLog",
    "ReadResult",
    "ShareCoordinator",
    "StateLog",
    "StateLogError",
    "TopicStateLog",
    "share_state_partition",
]
