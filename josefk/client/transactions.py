"""The transactional producer's state machine and its talks with the coordinators.

Owns ``TransactionState`` and ``TransactionManager``: what a producer with a
``transactional_id`` may do next, and the requests of KIP-98 / KIP-447 that move it along.
The producer (producer.py) owns the records; this module never touches a batch. It only says
which partitions the coordinator already knows (``is_added``), which still wait for
AddPartitionsToTxn (``pending``), and whether a transaction can still commit.

States, as Kafka's clients have them::

    UNINITIALIZED --init--> READY --begin--> IN_TRANSACTION --commit--> COMMITTING --> READY
                                                   |  \\--abort--> ABORTING --> READY
                                     (record failed) v                 ^
                                             ABORTABLE_ERROR --abort---/
    any state --(fenced, not authorised...)--> FATAL_ERROR (only close() is left)

Coordinator requests retry, with KIP-580 backoff until ``max_block_ms`` runs out, on the
answers that mean "wait" (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, a lost
connection, a timeout) or "ask someone else" (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE:
the coordinator is looked up again with FindCoordinator).

Imports josefk.protocol and josefk.client modules; never josefk.storage or josefk.broker.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple, TypeVar

from josefk.client.cluster import (
    COORDINATOR_GROUP,
    COORDINATOR_TRANSACTION,
    KafkaClient,
    find_coordinator,
)
from josefk.client.errors import (
    AbortableTransactionError,
    FatalTransactionError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for,
)
from josefk.client.types import ConsumerGroupMetadata, TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

log = logging.getLogger("josefk.client.transactions")

# The response a coordinator request's check reads, and what the check returns.
_Response = TypeVar("_Response")
_Checked = TypeVar("_Checked")


class TransactionState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"
    # Records flushed and the transaction handed to someone else to end (the Spark sink's
    # driver): this producer only closes, without aborting.
    PREPARED = "prepared"


class PreparedTransaction(NamedTuple):
    """A transaction whose records are all written, to be ended by whoever holds this
    (``complete_transaction``): EndTxn needs only the transactional id, producer id and
    epoch, not the producer's connection. ``started`` is False when nothing reached the
    coordinator (no records, no offsets): then there is nothing to end."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    started: bool


# The producer can never recover from these: another producer owns the transactional id
# now, or this one is not allowed to use it.
FATAL_CODES: Final = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    }
)
# Ask FindCoordinator again, then retry.
_REFIND_CODES: Final = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
# The coordinator is busy (markers of the previous transaction in flight, log loading): wait.
_WAIT_CODES: Final = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    }
)

Sleep = Callable[[float], Awaitable[None]]


class _Retry(Exception):
    """Internal: the attempt should be repeated (``refind``: after a new FindCoordinator)."""

    def __init__(self, error: KafkaError, *, refind: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.refind = refind


class TransactionManager:
    """One transactional id's state and its coordinator conversations.

    Not safe across threads; on one event loop the public coroutines may interleave only as
    the producer calls them (it serialises begin/commit/abort). ``clock`` (monotonic seconds)
    and ``sleep`` are injectable so that the retry loops can be tested without waiting.
    """

    def __init__(
        self,
        client: KafkaClient,
        transactional_id: str,
        *,
        transaction_timeout_ms: int,
        max_block_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        clock: Callable[[], float],
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not transactional_id:
            raise ValueError("transactional_id must not be empty")
        self.client = client
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.max_block_ms = max_block_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.clock = clock
        self.sleep = sleep
        self.state = TransactionState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self.error: KafkaError | None = None
        self.coordinator: int | None = None
        # Partitions the coordinator has recorded for the current transaction.
        self.partitions: set[TopicPartition] = set()
        # Partitions with records in this transaction that AddPartitionsToTxn has not added.
        self.pending: set[TopicPartition] = set()
        # AddOffsetsToTxn succeeded: EndTxn is needed even with no partition of our own.
        self.offsets_added = False

    # ------------------------------------------------------------------ state checks

    @property
    def in_transaction(self) -> bool:
        return self.state in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR)

    @property
    def started_on_coordinator(self) -> bool:
        """Whether the coordinator knows of this transaction, so that EndTxn is needed."""
        return bool(self.partitions) or self.offsets_added

    def check_can_send(self) -> None:
        """Raise unless a record may be added to the current transaction."""
        if self.state is TransactionState.IN_TRANSACTION:
            return
        self._raise_if_failed()
        raise IllegalStateError(
            f"cannot send in state {self.state.value}: call begin_transaction() first",
            transactional_id=self.transactional_id,
        )

    def _raise_if_failed(self) -> None:
        if self.state is TransactionState.FATAL_ERROR:
            raise FatalTransactionError(cause=self.error, transactional_id=self.transactional_id)
        if self.state is TransactionState.ABORTABLE_ERROR:
            raise AbortableTransactionError(
                f"the transaction must be aborted: {self.error}",
                cause=self.error,
                transactional_id=self.transactional_id,
            )

    def _require(self, *states: TransactionState, action: str) -> None:
        if self.state in states:
            return
        if self.state is TransactionState.FATAL_ERROR:
            self._raise_if_failed()
        raise IllegalStateError(
            f"{action} is not allowed in state {self.state.value}",
            transactional_id=self.transactional_id,
        )

    def fatal(self, error: KafkaError) -> None:
        if self.state is not TransactionState.FATAL_ERROR:
            log.error("transactional id %s: fatal error %s", self.transactional_id, error)
            self.state = TransactionState.FATAL_ERROR
            self.error = error

    def abortable(self, error: KafkaError) -> None:
        """A record of the transaction failed, or the coordinator refused a step: the
        transaction can only be aborted now."""
        if self.state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING):
            log.info("transactional id %s: must abort (%s)", self.transactional_id, error)
            self.state = TransactionState.ABORTABLE_ERROR
            self.error = error

    def fail_with(self, error: KafkaError) -> None:
        """Route a broker error: fatal codes end the producer, others the transaction."""
        if error.code in FATAL_CODES:
            self.fatal(error)
        else:
            self.abortable(error)

    # ------------------------------------------------------------------ transitions

    async def init(self) -> tuple[int, int]:
        """InitProducerId with the transactional id: the coordinator fences any older
        producer of the id (aborting its open transaction) and hands out the producer id and
        the next epoch. Returns them."""
        self._require(TransactionState.UNINITIALIZED, action="init_transactions")
        self.state = TransactionState.INITIALIZING
        try:
            await self._init_producer_id(-1, -1)
        except KafkaError as exc:
            if self.state is not TransactionState.FATAL_ERROR:
                self.state = TransactionState.UNINITIALIZED
            if isinstance(exc, FatalTransactionError):
                raise
            if exc.code in FATAL_CODES:
                self.fatal(exc)
                raise FatalTransactionError(
                    cause=exc, transactional_id=self.transactional_id
                ) from exc
            raise
        self.state = TransactionState.READY
        return self.producer_id, self.producer_epoch

    async def bump_epoch(self) -> tuple[int, int]:
        """KIP-360: InitProducerId with the current id and epoch, so that sequence numbers
        start again from 0 after an abort left some unknowable (records dropped or failed)."""
        await self._init_producer_id(self.producer_id, self.producer_epoch)
        return self.producer_id, self.producer_epoch

    async def _init_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        req = InitProducerIdRequest

        def build(version: int) -> InitProducerIdRequest:
            return req(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.transaction_timeout_ms,
                producer_id=producer_id if version >= 3 else -1,
                producer_epoch=producer_epoch if version >= 3 else -1,
            )

        def check(response: InitProducerIdResponse) -> InitProducerIdResponse:
            self._check_code(response.error_code, "InitProducerId")
            return response

        response = await self._with_coordinator(ApiKey.INIT_PRODUCER_ID, build, check)
        self.producer_id = response.producer_id
        self.producer_epoch = response.producer_epoch
        log.info(
            "transactional id %s: producer id %d epoch %d",
            self.transactional_id,
            self.producer_id,
            self.producer_epoch,
        )

    def begin(self) -> None:
        self._require(TransactionState.READY, action="begin_transaction")
        self.partitions.clear()
        self.pending.clear()
        self.offsets_added = False
        self.error = None
        self.state = TransactionState.IN_TRANSACTION

    def add_partition(self, tp: TopicPartition) -> None:
        """Note that records for ``tp`` are coming (called when the producer opens a batch)."""
        if tp not in self.partitions:
            self.pending.add(tp)

    def is_added(self, tp: TopicPartition) -> bool:
        return tp in self.partitions

    async def add_pending_partitions(self) -> None:
        """AddPartitionsToTxn for every pending partition. Errors put the manager in the
        abortable or fatal state instead of raising: the producer fails the records."""
        if not self.pending or self.state not in (
            TransactionState.IN_TRANSACTION,
            TransactionState.COMMITTING,  # commit_transaction() flushes the last records
        ):
            return
        adding = set(self.pending)
        req = AddPartitionsToTxnRequest
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(adding):
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def build(version: int) -> AddPartitionsToTxnRequest:
            topics = [
                req.AddPartitionsToTxnTopic(name=name, partitions=parts)
                for name, parts in by_topic.items()
            ]
            return req(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.producer_epoch,
                v3_and_below_topics=topics,
            )

        def check(response: AddPartitionsToTxnResponse) -> None:
            first: KafkaError | None = None
            retry_code = 0
            for topic in response.results_by_topic_v3_and_below:
                for part in topic.results_by_partition:
                    code = part.partition_error_code
                    if code in (0, ErrorCode.OPERATION_NOT_ATTEMPTED):
                        continue
                    if code in _REFIND_CODES or code in _WAIT_CODES:
                        retry_code = retry_code or code
                        continue
                    first = first or error_for(
                        code, topic=topic.name, partition=part.partition_index
                    )
            if first is not None:
                raise first
            if retry_code:
                self._check_code(retry_code, "AddPartitionsToTxn")

        try:
            await self._with_coordinator(ApiKey.ADD_PARTITIONS_TO_TXN, build, check)
        except FatalTransactionError:
            return  # the state is FATAL_ERROR already
        except KafkaError as exc:
            self.fail_with(exc)
            return
        self.pending -= adding
        self.partitions |= adding

    async def send_offsets(
        self, offsets: Mapping[TopicPartition, int], group_metadata: ConsumerGroupMetadata
    ) -> None:
        """AddOffsetsToTxn (the group's offsets partition joins the transaction), then
        TxnOffsetCommit to the group coordinator with the member's generation, member id and
        instance id (KIP-447). The offsets become the group's only if the transaction
        commits. Offsets are the next record to consume, as with commit()."""
        self._require(TransactionState.IN_TRANSACTION, action="send_offsets_to_transaction")
        group_id = group_metadata.group_id
        add_req = AddOffsetsToTxnRequest

        def build_add(version: int) -> AddOffsetsToTxnRequest:
            return add_req(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                group_id=group_id,
            )

        def check_add(response: AddOffsetsToTxnResponse) -> None:
            self._check_code(response.error_code, "AddOffsetsToTxn")

        await self._step(self._with_coordinator(ApiKey.ADD_OFFSETS_TO_TXN, build_add, check_add))
        self.offsets_added = True
        await self._step(self._txn_offset_commit(offsets, group_metadata))

    async def _txn_offset_commit(
        self, offsets: Mapping[TopicPartition, int], group_metadata: ConsumerGroupMetadata
    ) -> None:
        req = TxnOffsetCommitRequest
        by_topic: dict[str, list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                req.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata="",
                )
            )

        def build(version: int) -> TxnOffsetCommitRequest:
            return req(
                transactional_id=self.transactional_id,
                group_id=group_metadata.group_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                generation_id=group_metadata.generation_id,
                member_id=group_metadata.member_id,
                group_instance_id=group_metadata.group_instance_id,
                topics=[
                    req.TxnOffsetCommitRequestTopic(name=name, partitions=parts)
                    for name, parts in by_topic.items()
                ],
            )

        def check(response: TxnOffsetCommitResponse) -> None:
            for topic in response.topics:
                for part in topic.partitions:
                    if part.error_code:
                        self._check_code(
                            part.error_code,
                            "TxnOffsetCommit",
                            topic=topic.name,
                            partition=part.partition_index,
                        )

        await self._with_coordinator(
            ApiKey.TXN_OFFSET_COMMIT,
            build,
            check,
            key=group_metadata.group_id,
            key_type=COORDINATOR_GROUP,
        )

    async def _step(self, step: Awaitable[None]) -> None:
        """Run a coordinator step of the open transaction; its failure is the transaction's."""
        try:
            await step
        except FatalTransactionError:
            raise
        except KafkaTimeoutError:
            raise  # the step may be retried by the caller
        except KafkaError as exc:
            self.fail_with(exc)
            self._raise_if_failed()
            raise

    def start_commit(self) -> None:
        self._require(
            TransactionState.IN_TRANSACTION,
            TransactionState.COMMITTING,
            action="commit_transaction",
        )
        self.state = TransactionState.COMMITTING

    def start_abort(self) -> None:
        self._require(
            TransactionState.IN_TRANSACTION,
            TransactionState.ABORTABLE_ERROR,
            TransactionState.ABORTING,
            action="abort_transaction",
        )
        self.state = TransactionState.ABORTING

    async def end(self, *, commit: bool) -> None:
        """EndTxn (when the coordinator knows the transaction), then READY. A timeout leaves
        the state as it is so that the same commit or abort can be called again."""
        if self.started_on_coordinator:
            req = EndTxnRequest

            def build(version: int) -> EndTxnRequest:
                return req(
                    transactional_id=self.transactional_id,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    committed=commit,
                )

            def check(response: EndTxnResponse) -> None:
                self._check_code(response.error_code, "EndTxn")

            try:
                await self._with_coordinator(ApiKey.END_TXN, build, check)
            except FatalTransactionError:
                raise
            except KafkaTimeoutError:
                raise
            except KafkaError as exc:
                if commit:
                    self.fail_with(exc)
                    self._raise_if_failed()
                else:
                    self.fatal(exc)
                    self._raise_if_failed()
                raise
        self.partitions.clear()
        self.pending.clear()
        self.offsets_added = False
        self.error = None
        self.state = TransactionState.READY

    # ------------------------------------------------------------------ requests

    def _check_code(self, code: int, what: str, **context: Any) -> None:
        if not code:
            return
        error = error_for(code, transactional_id=self.transactional_id, request=what, **context)
        if code in _REFIND_CODES:
            raise _Retry(error, refind=True)
        if code in _WAIT_CODES or error.retriable:
            raise _Retry(error)
        if code in FATAL_CODES:
            self.fatal(error)
            raise FatalTransactionError(cause=error, transactional_id=self.transactional_id)
        raise error

    async def _with_coordinator(
        self,
        api_key: int,
        build: Callable[[int], object],
        check: Callable[[_Response], _Checked],
        *,
        key: str | None = None,
        key_type: int = COORDINATOR_TRANSACTION,
    ) -> _Checked:
        """Send to the coordinator of ``key`` (the transactional id by default) until the
        answer is final or ``max_block_ms`` has passed; return ``check(response)``."""
        deadline = self.clock() + self.max_block_ms / 1000
        own = key is None
        lookup_key = self.transactional_id if key is None else key
        node_id = self.coordinator if own else None
        attempt = 0
        last: KafkaError | None = None
        while True:
            if attempt:
                delay = (
                    min(
                        self.retry_backoff_ms * 2 ** (attempt - 1),
                        max(self.retry_backoff_max_ms, self.retry_backoff_ms),
                    )
                    / 1000
                )
                if self.clock() + delay > deadline:
                    raise KafkaTimeoutError(
                        f"{ApiKey(api_key).name} did not succeed in {self.max_block_ms} ms"
                        f" (last: {last})",
                        transactional_id=self.transactional_id,
                    )
                await self.sleep(delay)
            attempt += 1
            try:
                if node_id is None:
                    node_id = await find_coordinator(self.client, lookup_key, key_type=key_type)
                    if own:
                        self.coordinator = node_id
                response = await self.client.request(node_id, api_key, build)
                return check(response)
            except _Retry as retry:
                last = retry.error
                log.debug("%s: %s; retrying", ApiKey(api_key).name, retry.error)
                if retry.refind:
                    node_id = None
                    if own:
                        self.coordinator = None
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
                node_id = None
                if own:
                    self.coordinator = None
            except KafkaError as exc:
                if exc.retriable and not isinstance(exc, FatalTransactionError):
                    last = exc
                    node_id = None
                    continue
                raise


async def complete_transaction(
    client: KafkaClient,
    prepared: PreparedTransaction,
    *,
    commit: bool,
    max_block_ms: int = 60_000,
    retry_backoff_ms: int = 100,
    retry_backoff_max_ms: int = 1_000,
    clock: Callable[[], float] | None = None,
) -> None:
    """End a transaction another producer prepared: EndTxn with its id and epoch. Raises
    FatalTransactionError when a newer producer has taken the transactional id over (the
    transaction was aborted by it), and the coordinator's error otherwise."""
    if not prepared.started:
        return
    manager = TransactionManager(
        client,
        prepared.transactional_id,
        transaction_timeout_ms=0,
        max_block_ms=max_block_ms,
        retry_backoff_ms=retry_backoff_ms,
        retry_backoff_max_ms=retry_backoff_max_ms,
        clock=clock or client.config.clock,
    )
    manager.producer_id = prepared.producer_id
    manager.producer_epoch = prepared.producer_epoch
    manager.offsets_added = True  # the coordinator knows the transaction: EndTxn is due
    manager.state = TransactionState.COMMITTING if commit else TransactionState.ABORTING
    await manager.end(commit=commit)


def offsets_by_partition(
    offsets: Mapping[TopicPartition, int] | Iterable[tuple[TopicPartition, int]],
) -> dict[TopicPartition, int]:
    """Normalise the offsets argument of send_offsets_to_transaction (a mapping or pairs of
    ``TopicPartition``/``(topic, partition)`` and the next offset to consume)."""
    items = offsets.items() if isinstance(offsets, Mapping) else offsets
    result: dict[TopicPartition, int] = {}
    for tp, offset in items:
        result[TopicPartition(*tp)] = int(offset)
    return result


__all__ = [
    "FATAL_CODES",
    "PreparedTransaction",
    "TransactionManager",
    "TransactionState",
    "complete_transaction",
    "offsets_by_partition",
]
