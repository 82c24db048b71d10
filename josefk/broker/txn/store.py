"""Where the transaction coordinator's records live: the ``__transaction_state`` topic.

Owns ``TxnStore`` (what the coordinator needs: write one keyed record to a partition and wait
until it is replicated as acks=all, read a partition back, the partition's coordinator
epoch), ``TopicTxnStore`` (the real one, on the broker's replica manager; on the single node
the topic is created at start-up when missing, compacted) and ``MemoryTxnStore`` (unit tests:
it keeps what was written so a test can restart a coordinator on it, and can fail on demand).

Imports josefk.records, josefk.storage, the replica manager, the group store's log reader and
the broker's error table (error codes only); must not import the protocol codec or the handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Final, Protocol

from josefk.broker.errors import error_code_for
from josefk.broker.group.store import keyed_records
from josefk.broker.replica_manager import AppendOutcome, ReplicaManager
from josefk.broker.topic_admin import LocalTopicAdmin
from josefk.protocol.errors import ErrorCode
from josefk.records import BatchBuilder

logger = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC: Final = "__transaction_state"

KeyValue = tuple[bytes, bytes | None]


class TxnStoreError(Exception):
    """A write to the transaction log failed; ``error`` is the code the coordinator answers
    (Kafka's translation of the append error)."""

    def __init__(self, message: str, *, error: ErrorCode) -> None:
        super().__init__(message)
        self.error = error


def coordinator_error(append_error: ErrorCode) -> ErrorCode:
    """What a client is told when a transition could not be written, as Kafka's coordinator
    translates the append error: retriable COORDINATOR_NOT_AVAILABLE for a log that cannot
    take it now, NOT_COORDINATOR when this broker no longer leads the partition."""
    if append_error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if append_error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


class TxnStore(Protocol):
    @property
    def partition_count(self) -> int: ...

    async def write(self, partition: int, key: bytes, value: bytes | None, timestamp: int) -> None:
        """Append one record and wait for it as acks=all; raises TxnStoreError."""
        ...

    def read(self, partition: int) -> Iterator[KeyValue]:
        """Every record of the partition from its log start offset, in offset order."""
        ...

    def coordinator_epoch(self, partition: int) -> int:
        """The leader epoch of the partition: the markers' coordinator epoch."""
        ...


class MemoryTxnStore:
    """A transaction log in memory; ``writes`` counts records written."""

    def __init__(self, partition_count: int = 50) -> None:
        self._partition_count = partition_count
        self.records: dict[int, list[KeyValue]] = {}
        self.writes = 0
        self.fail_with: ErrorCode | None = None
        self.epoch = 0

    @property
    def partition_count(self) -> int:
        return self._partition_count

    async def write(self, partition: int, key: bytes, value: bytes | None, timestamp: int) -> None:
        if self.fail_with is not None:
            raise TxnStoreError("injected failure", error=self.fail_with)
        self.records.setdefault(partition, []).append((key, value))
        self.writes += 1

    def read(self, partition: int) -> Iterator[KeyValue]:
        return iter(list(self.records.get(partition, [])))

    def coordinator_epoch(self, partition: int) -> int:
        return self.epoch


class TopicTxnStore:
    """``__transaction_state`` as a topic of this broker."""

    def __init__(
        self, replicas: ReplicaManager, *, partitions: int, ack_timeout_ms: int = 30_000
    ) -> None:
        """``partitions``: the count to use until the topic exists (in a cluster the
        controller creates it); an existing topic's own count wins."""
        self._replicas = replicas
        self._default_partitions = partitions
        self._ack_timeout_ms = ack_timeout_ms

    @staticmethod
    def ensure_topic(
        replicas: ReplicaManager,
        topics: LocalTopicAdmin,
        *,
        partitions: int,
        segment_bytes: int,
    ) -> TopicTxnStore:
        """Create the topic as Kafka does (compacted, internal) unless it exists."""
        topics.ensure_coordinator_topic(TRANSACTION_STATE_TOPIC, partitions, segment_bytes)
        return TopicTxnStore(replicas, partitions=partitions)

    @property
    def partition_count(self) -> int:
        info = self._replicas.catalog.get(TRANSACTION_STATE_TOPIC)
        return info.partitions if info is not None else self._default_partitions

    async def write(self, partition: int, key: bytes, value: bytes | None, timestamp: int) -> None:
        target = self._replicas.get_partition(TRANSACTION_STATE_TOPIC, partition)
        if target is None:
            raise TxnStoreError(
                f"{TRANSACTION_STATE_TOPIC}-{partition} is not hosted here",
                error=ErrorCode.NOT_COORDINATOR,
            )
        builder = BatchBuilder(clock=lambda: timestamp)
        builder.append(key, value, timestamp=timestamp)
        try:
            info = self._replicas.append_to_leader(target, memoryview(builder.build()))
        except Exception as exc:
            logger.error("append to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, exc)
            raise TxnStoreError(str(exc), error=coordinator_error(error_code_for(exc))) from exc
        outcome = AppendOutcome(target.tp, info)
        # Kafka appends transaction state with acks=-1: a transition is only applied once
        # the ISR has it, so a new leader never loads less than was answered.
        if self._replicas.must_wait_for_acks([outcome]):
            await self._replicas.wait_for_acks([outcome], self._ack_timeout_ms)
        if outcome.error is not None:
            raise TxnStoreError(
                str(outcome.error), error=coordinator_error(error_code_for(outcome.error))
            )

    def coordinator_epoch(self, partition: int) -> int:
        target = self._replicas.get_partition(TRANSACTION_STATE_TOPIC, partition)
        return max(target.leader_epoch, 0) if target is not None else 0

    def read(self, partition: int) -> Iterator[KeyValue]:
        return keyed_records(self._replicas, TRANSACTION_STATE_TOPIC, partition)
