"""Where the group coordinator's records live: the ``__consumer_offsets`` topic.

Owns ``OffsetsStore`` (what the coordinator needs: append keyed records to one partition as
one batch, plain or transactional, and read a partition back batch by batch from its log start
offset, with each batch's producer id, transactional bit and, for a control batch, its marker
type), ``StoredBatch``, ``TopicOffsetsStore`` (the real one, on the broker's replica manager:
the topic is created at start-up when missing, with ``cleanup.policy=compact``) and
``MemoryOffsetsStore`` (for unit tests; it keeps what was appended, markers included, so a test
can restart a coordinator on it). ``build_batch`` and ``keyed_records`` (a partition read back
as key-value pairs) also serve the transaction and share coordinators' topics.

Transactional offset commits (TxnOffsetCommit) are batches with the producer's id and epoch,
the transactional bit and no sequence, appended with ``AppendOrigin.COORDINATOR``: the log's
producer state opens the producer's transaction on the partition and refuses an epoch older
than the producer's (INVALID_PRODUCER_EPOCH). The transaction's COMMIT or ABORT marker is
written by the transaction coordinator (WriteTxnMarkers), never through this store.

An append goes into the partition's log before ``append`` returns (the page cache, as every
produce), so a committed offset answered to a client survives a SIGKILL of the broker. In a
cluster the append may not be replicated yet: ``append`` then returns the ``AppendOutcome`` to
wait on (``StoreWrite.awaiting``), which the handler waits for (``take_appends``) and hands
back to the coordinator once settled; on a single node (the in-sync replicas are the leader)
it is None and nothing waits.

Imports josefk.records, josefk.storage, the replica manager and josefk.protocol.errors (the
error codes only); must not import the protocol codec or the handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from josefk.broker.errors import error_code_for
from josefk.broker.replica_manager import AppendOutcome, ReplicaManager
from josefk.broker.topic_admin import LocalTopicAdmin
from josefk.protocol.errors import ErrorCode
from josefk.records import BatchBuilder, CorruptRecordError
from josefk.records.record import ControlRecordType, decode_control_type, iter_records
from josefk.storage.offsets import AppendOrigin, TopicPartition, TxnMarker

logger = logging.getLogger(__name__)

OFFSETS_TOPIC: Final = "__consumer_offsets"
_LOAD_CHUNK_BYTES: Final = 1 << 20
# Appends nobody took (group changes, whose answers do not wait) are not kept forever.
_KEPT_APPENDS: Final = 64

KeyValue = tuple[bytes, bytes | None]

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One batch of the offsets topic as the coordinator replays it.

    ``control`` is None for a data batch, else the marker type (COMMIT or ABORT) of the
    producer's transaction; a control batch has no ``records``. ``base_offset`` orders
    commits by log position (Kafka's rule for a transactional commit completed after a later
    plain one)."""

    base_offset: int
    producer_id: int
    producer_epoch: int
    is_transactional: bool
    control: ControlRecordType | None
    records: tuple[KeyValue, ...]


@dataclass(frozen=True, slots=True)
class StoreWrite:
    """One append to the offsets topic. ``awaiting`` is the outcome to wait on while the
    in-sync replicas do not all hold the batch yet (or the wait already failed: its
    ``error`` is set); None when the batch was replicated as it was written."""

    base_offset: int
    awaiting: AppendOutcome | None = None


class StoreAppendError(Exception):
    """An append to the offsets topic failed; ``error`` is the Kafka error code to answer."""

    def __init__(self, message: str, *, error: int) -> None:
        super().__init__(message)
        self.error = error


class OffsetsStore(Protocol):
    @property
    def partition_count(self) -> int: ...

    def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp: int,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> StoreWrite:
        """Write the records as one batch; with a producer id the batch is transactional
        (that producer's transaction). Raises StoreAppendError."""
        ...

    def read(self, partition: int) -> Iterator[StoredBatch]:
        """Every batch of the partition from its log start offset, in offset order."""
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
    if append_error in _PRODUCER_ERRORS:
        # A transactional commit the partition's producer state refused: the producer is
        # told, as Kafka passes these through (it is fenced; retrying cannot help).
        return append_error
    return ErrorCode.NOT_COORDINATOR


def replication_error(failure: BaseException) -> ErrorCode:
    """What a client is told when an append was written but its replication failed (timed
    out, the ISR shrank below min.insync.replicas, leadership moved), as Kafka's coordinator
    translates the delayed append's error."""
    error = error_code_for(failure)
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


_PRODUCER_ERRORS: Final = frozenset(
    {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_TXN_STATE}
)


def build_batch(
    records: Sequence[KeyValue],
    timestamp: int,
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
) -> bytearray:
    builder = BatchBuilder(
        clock=lambda: timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=producer_id >= 0,
    )
    for key, value in records:
        builder.append(key, value, timestamp=timestamp)
    return builder.build()


def keyed_records(replicas: ReplicaManager, topic: str, partition: int) -> Iterator[KeyValue]:
    """Every keyed data record of a coordinator topic's partition hosted here, from its log
    start offset, in offset order (none when the partition is not hosted): what the
    transaction and share coordinators replay, which, unlike the group coordinator, write no
    transactional batches."""
    target = replicas.get_partition(topic, partition)
    if target is None:
        return
    log = target.log
    start = log.log_start_offset
    for batch in log.read_batches_to_end(_LOAD_CHUNK_BYTES):
        if batch.is_control:
            continue
        for record in iter_records(batch):
            if record.offset >= start and record.key is not None:
                yield record.key, record.value


class MemoryOffsetsStore:
    """An offsets topic in memory; ``batches`` counts appends (one per coordinator write).

    It keeps each producer's epoch per partition and refuses an older one (transactional
    commits and markers), as the log's producer state does; ``write_marker`` stands in for
    the transaction coordinator's WriteTxnMarkers. With ``hold_acks`` each append is
    written but not replicated, as in a cluster: its outcome is returned and handed out by
    ``take_appends``, and a test settles it (an ``error`` on it for a failed replication)."""

    def __init__(self, partition_count: int = 50) -> None:
        self._partition_count = partition_count
        self.log: dict[int, list[StoredBatch]] = {}
        self.batches = 0
        self.fail_with: int | None = None
        self.hold_acks = False
        self._held: list[AppendOutcome] = []
        self._epochs: dict[tuple[int, int], int] = {}

    @property
    def partition_count(self) -> int:
        return self._partition_count

    @property
    def records(self) -> dict[int, list[KeyValue]]:
        """The data records of each partition, in offset order (markers left out)."""
        return {
            partition: [kv for batch in batches for kv in batch.records]
            for partition, batches in self.log.items()
        }

    def _next_offset(self, partition: int) -> int:
        batches = self.log.get(partition)
        if not batches:
            return 0
        last = batches[-1]
        return last.base_offset + max(len(last.records), 1)

    def _check_epoch(self, partition: int, producer_id: int, producer_epoch: int) -> None:
        current = self._epochs.get((partition, producer_id), NO_PRODUCER_EPOCH)
        if producer_epoch < current:
            raise StoreAppendError(
                f"epoch {producer_epoch} of producer {producer_id} is older than {current}",
                error=ErrorCode.INVALID_PRODUCER_EPOCH,
            )
        self._epochs[(partition, producer_id)] = producer_epoch

    def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp: int,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> StoreWrite:
        if self.fail_with is not None:
            raise StoreAppendError("injected failure", error=self.fail_with)
        if producer_id >= 0:
            self._check_epoch(partition, producer_id, producer_epoch)
        base_offset = self._next_offset(partition)
        self.log.setdefault(partition, []).append(
            StoredBatch(
                base_offset, producer_id, producer_epoch, producer_id >= 0, None, tuple(records)
            )
        )
        self.batches += 1
        if not self.hold_acks:
            return StoreWrite(base_offset)
        outcome = AppendOutcome(TopicPartition(OFFSETS_TOPIC, partition))
        self._held.append(outcome)
        return StoreWrite(base_offset, outcome)

    def write_marker(self, partition: int, marker: TxnMarker) -> int:
        """Append a COMMIT/ABORT control batch, as WriteTxnMarkers does; its offset."""
        self._check_epoch(partition, marker.producer_id, marker.producer_epoch)
        base_offset = self._next_offset(partition)
        self.log.setdefault(partition, []).append(
            StoredBatch(
                base_offset,
                marker.producer_id,
                marker.producer_epoch,
                True,
                ControlRecordType.COMMIT if marker.committed else ControlRecordType.ABORT,
                (),
            )
        )
        return base_offset

    def read(self, partition: int) -> Iterator[StoredBatch]:
        return iter(list(self.log.get(partition, [])))

    def take_appends(self) -> list[AppendOutcome]:
        appends, self._held = self._held, []
        return appends


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
        replicas: ReplicaManager,
        topics: LocalTopicAdmin,
        *,
        partitions: int,
        segment_bytes: int,
    ) -> TopicOffsetsStore:
        """Create the topic as Kafka does (compacted, internal) unless it exists; an
        existing topic keeps its partition count, which then decides coordinator partitions."""
        topics.ensure_coordinator_topic(OFFSETS_TOPIC, partitions, segment_bytes)
        return TopicOffsetsStore(replicas)

    @property
    def partition_count(self) -> int:
        # An existing topic keeps its partition count, which decides coordinator partitions.
        info = self._replicas.catalog.get(OFFSETS_TOPIC)
        if info is not None:
            return info.partitions
        assert self._default_partitions is not None
        return self._default_partitions

    def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp: int,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> StoreWrite:
        target = self._replicas.get_partition(OFFSETS_TOPIC, partition)
        if target is None:
            raise StoreAppendError(
                f"{OFFSETS_TOPIC}-{partition} is missing", error=ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
        batch = build_batch(
            records, timestamp, producer_id=producer_id, producer_epoch=producer_epoch
        )
        try:
            # The coordinator origin: a transactional batch without sequences is ours. acks=-1
            # as Kafka's coordinator: with the ISR below min.insync.replicas nothing is
            # written (NOT_ENOUGH_REPLICAS), so no refused commit is in the log to reload.
            info = self._replicas.append_to_leader(
                target, memoryview(batch), acks=-1, origin=AppendOrigin.COORDINATOR
            )
        except Exception as exc:
            code = error_code_for(exc)
            if code in _PRODUCER_ERRORS:
                # A fenced producer is the producer's problem, not the broker's.
                logger.info(
                    "transactional commit to %s-%d refused: %s", OFFSETS_TOPIC, partition, exc
                )
            else:
                logger.error("append to %s-%d failed: %s", OFFSETS_TOPIC, partition, exc)
            raise StoreAppendError(str(exc), error=coordinator_error(code)) from exc
        outcome = AppendOutcome(target.tp, info)
        # One look at the high watermark: on a single node it has passed the batch already,
        # and there is nothing to wait for (the check sets ``error`` when the ISR is already
        # below min.insync.replicas: that append is failed, not replicated).
        if not self._replicas.must_wait_for_acks([outcome]) and outcome.error is None:
            return StoreWrite(info.first_offset)
        self._appends.append(outcome)
        del self._appends[:-_KEPT_APPENDS]
        return StoreWrite(info.first_offset, outcome)

    def take_appends(self) -> list[AppendOutcome]:
        """The appends since the last call that were not replicated as they were written:
        a handler that wants its commit replicated (as Kafka's acks=-1 for the offsets
        topic) takes them right after the coordinator call that made them, before anything
        else runs, waits on them and hands them back (``GroupCoordinator.appends_settled``)."""
        appends, self._appends = self._appends, []
        return appends

    def read(self, partition: int) -> Iterator[StoredBatch]:
        target = self._replicas.get_partition(OFFSETS_TOPIC, partition)
        if target is None:
            return
        log = target.log
        start = log.log_start_offset
        for batch in log.read_batches_to_end(_LOAD_CHUNK_BYTES):
            control: ControlRecordType | None = None
            records: list[KeyValue] = []
            for record in iter_records(batch):
                if batch.is_control:
                    control = _control_type(record.key)
                elif record.offset >= start and record.key is not None:
                    records.append((record.key, record.value))
            if not batch.is_control or control is not None:
                yield StoredBatch(
                    batch.base_offset,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.is_transactional,
                    control,
                    tuple(records),
                )


def _control_type(key: bytes | None) -> ControlRecordType | None:
    """COMMIT or ABORT; None for a control record the coordinator has no use for (or cannot
    read), which is then skipped rather than failing the load."""
    try:
        control = decode_control_type(key)
    except CorruptRecordError:
        return None
    return control if control in (ControlRecordType.COMMIT, ControlRecordType.ABORT) else None
