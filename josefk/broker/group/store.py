"""Where the group coordinator's records live: the ``__consumer_offsets`` topic.

Owns ``OffsetsStore`` (what the coordinator needs: append keyed records to one partition,
read a partition back from its log start offset), ``TopicOffsetsStore`` (the real one, on the
broker's replica manager: the topic is created at start-up when missing, with
``cleanup.policy=compact``) and ``MemoryOffsetsStore`` (for unit tests; it keeps what was
appended so a test can restart a coordinator on it).

An append goes into the partition's log before ``append`` returns (the page cache, as every
produce), so a committed offset answered to a client survives a SIGKILL of the broker.

Imports josefk.records, josefk.storage, the replica manager and josefk.protocol.errors (the
error codes only); must not import the protocol codec or the handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Final, Protocol

from josefk.broker.errors import error_code_for
from josefk.broker.replica_manager import AppendOutcome, ReplicaManager
from josefk.protocol.errors import ErrorCode
from josefk.records import BatchBuilder, split_batches
from josefk.records.record import iter_records
from josefk.storage.offsets import FetchIsolation

logger = logging.getLogger(__name__)

OFFSETS_TOPIC: Final = "__consumer_offsets"
_LOAD_CHUNK_BYTES: Final = 1 << 20
# Appends nobody took (group changes, whose answers do not wait) are not kept forever.
_KEPT_APPENDS: Final = 64

KeyValue = tuple[bytes, bytes | None]


class StoreAppendError(Exception):
    """An append to the offsets topic failed; ``error`` is the Kafka error code to answer."""

    def __init__(self, message: str, *, error: int) -> None:
        super().__init__(message)
        self.error = error


class OffsetsStore(Protocol):
    @property
    def partition_count(self) -> int: ...

    def append(self, partition: int, records: Sequence[KeyValue], timestamp: int) -> None:
        """Write the records as one batch; raises StoreAppendError."""
        ...

    def read(self, partition: int) -> Iterator[KeyValue]:
        """Every record of the partition from its log start offset, in offset order."""
        ...

    def take_appends(self) -> list[AppendOutcome]:
        """The appends since the last call, for a caller that waits for their replication."""
        ...


def coordinator_error(append_error: ErrorCode) -> ErrorCode:
    """What a client is told when its commit or group change could not be written, as
    Kafka's coordinator translates the append error."""
    if append_error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    if append_error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NOT_COORDINATOR


def build_batch(records: Sequence[KeyValue], timestamp: int) -> bytearray:
    builder = BatchBuilder(clock=lambda: timestamp)
    for key, value in records:
        builder.append(key, value, timestamp=timestamp)
    return builder.build()


class MemoryOffsetsStore:
    """An offsets topic in memory; ``batches`` counts appends (one per coordinator write)."""

    def __init__(self, partition_count: int = 50) -> None:
        self._partition_count = partition_count
        self.records: dict[int, list[KeyValue]] = {}
        self.batches = 0
        self.fail_with: int | None = None

    @property
    def partition_count(self) -> int:
        return self._partition_count

    def append(self, partition: int, records: Sequence[KeyValue], timestamp: int) -> None:
        if self.fail_with is not None:
            raise StoreAppendError("injected failure", error=self.fail_with)
        self.records.setdefault(partition, []).extend(records)
        self.batches += 1

    def read(self, partition: int) -> Iterator[KeyValue]:
        return iter(list(self.records.get(partition, [])))

    def take_appends(self) -> list[AppendOutcome]:
        return []  # nothing to replicate in memory


class TopicOffsetsStore:
    """``__consumer_offsets`` as a topic of this broker."""

    def __init__(self, replicas: ReplicaManager, *, default_partitions: int | None = None) -> None:
        """``default_partitions``: in a cluster the topic may not exist yet (the controller
        creates it); until it does, groups map to partitions as if it had this many."""
        self._replicas = replicas
        self._default_partitions = default_partitions
        # Appends not yet handed to a caller that waits for their replication (take_appends).
        self._appends: list[AppendOutcome] = []
        if default_partitions is None and replicas.catalog.get(OFFSETS_TOPIC) is None:
            raise LookupError(f"{OFFSETS_TOPIC} does not exist; call ensure_topic first")

    @staticmethod
    def ensure_topic(
        replicas: ReplicaManager, *, partitions: int, segment_bytes: int
    ) -> TopicOffsetsStore:
        """Create the topic as Kafka does (compacted, internal) unless it exists; an
        existing topic keeps its partition count, which then decides coordinator partitions."""
        if replicas.catalog.get(OFFSETS_TOPIC) is None:
            replicas.create_topic(
                OFFSETS_TOPIC,
                partitions,
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(segment_bytes),
                    "compression.type": "producer",
                },
            )
        return TopicOffsetsStore(replicas)

    @property
    def partition_count(self) -> int:
        # An existing topic keeps its partition count, which decides coordinator partitions.
        info = self._replicas.catalog.get(OFFSETS_TOPIC)
        if info is not None:
            return info.partitions
        assert self._default_partitions is not None
        return self._default_partitions

    def append(self, partition: int, records: Sequence[KeyValue], timestamp: int) -> None:
        target = self._replicas.get_partition(OFFSETS_TOPIC, partition)
        if target is None:
            raise StoreAppendError(
                f"{OFFSETS_TOPIC}-{partition} is missing", error=ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
        batch = build_batch(records, timestamp)
        try:
            info = self._replicas.append_to_leader(target, memoryview(batch))
        except Exception as exc:
            logger.error("append to %s-%d failed: %s", OFFSETS_TOPIC, partition, exc)
            raise StoreAppendError(str(exc), error=coordinator_error(error_code_for(exc))) from exc
        self._appends.append(AppendOutcome(target.tp, info))
        del self._appends[:-_KEPT_APPENDS]

    def take_appends(self) -> list[AppendOutcome]:
        """The appends since the last call: a handler that wants its commit replicated (as
        Kafka's acks=-1 for the offsets topic) takes them right after the coordinator call
        that made them, before anything else runs, and waits on them."""
        appends, self._appends = self._appends, []
        return appends

    def read(self, partition: int) -> Iterator[KeyValue]:
        target = self._replicas.get_partition(OFFSETS_TOPIC, partition)
        if target is None:
            return
        log = target.log
        offset = log.log_start_offset
        # Up to the log end, as Kafka loads: after a crash the high watermark comes from a
        # checkpoint that may lag what the log holds.
        while offset < log.log_end_offset:
            info = log.read(offset, _LOAD_CHUNK_BYTES, FetchIsolation.LOG_END, min_one_message=True)
            data = info.records.read() if info.records is not None else b""
            if not data:
                break
            next_offset = offset
            for batch in split_batches(data):
                if batch.is_control or batch.next_offset <= offset:
                    next_offset = max(next_offset, batch.next_offset)
                    continue
                for record in iter_records(batch):
                    if record.offset >= offset and record.key is not None:
                        yield record.key, record.value
                next_offset = batch.next_offset
            if next_offset <= offset:
                break
            offset = next_offset
