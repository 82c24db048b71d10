"""The asyncio producer: per-partition batching, delivery futures, retries, idempotence.

Owns ``ProducerConfig``, ``AIOProducer`` and ``DeliveryFuture``. How a record travels:

1. ``send()`` picks the partition (explicit, else ``DefaultPartitioner``: murmur2 of the key
   as the Java client, sticky for keyless records), appends the record to the partition's
   open ``BatchBuilder`` (one encode per record) and returns its ``DeliveryFuture``, a
   two-field handle with asyncio.Future's interface (no asyncio future per record unless
   one is awaited or given a callback).
2. A batch closes when it reaches ``batch_size`` bytes (uncompressed), when ``linger_ms``
   has passed since its first record, or on ``flush()``. Closing builds the v2 batch once
   (compressing it with ``compression_type``); the bytes are kept unchanged for retries.
3. The sender task groups the closed batches by partition leader and writes one Produce
   request per broker, up to ``max_in_flight_requests_per_connection`` requests per broker
   and one in flight per partition, so records of a partition stay in order across retries.
   All closed batches of a partition go in one request (concatenated, up to
   ``max_request_size``): while a request is in flight the next one fills up.
4. The response resolves the batch once, and so each record's future, with
   ``RecordMetadata(topic, partition, offset, timestamp)``. Retriable errors
   (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, lost connections, timeouts...)
   refresh the metadata and requeue the batch at the head of its partition until
   ``delivery_timeout_ms``; other errors fail the futures with the typed KafkaError.

Idempotence (``enable_idempotence``; None means "on when the broker supports InitProducerId
and acks is all"): the producer gets a producer id and epoch with InitProducerId and numbers
each partition's batches with consecutive sequences fixed when the batch opens, so a batch
resent after a lost response is recognised by the broker as a duplicate instead of written
twice. When the broker lacks InitProducerId the producer logs one line and goes on without.
A sequence the broker will not accept (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID,
INVALID_PRODUCER_EPOCH), or a batch that fails for good and so leaves a gap, makes the
producer bump its epoch (KIP-360: InitProducerId with its current id and epoch) once nothing
is in flight, and renumber every queued batch from sequence 0 in place (header fields and
CRC rewritten, records untouched).

Transactions (``transactional_id``, KIP-98; transactions.py keeps the state machine):
``init_transactions()`` once, then ``begin_transaction()``, sends,
``send_offsets_to_transaction()`` and ``commit_transaction()`` or ``abort_transaction()``.
Batches are flagged transactional; a partition's batches wait in the queue until
AddPartitionsToTxn has added the partition (the sender asks for all new partitions in one
request). A fencing answer (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH...) makes the producer
fatal; any other failed record makes the transaction abortable, and the sender fails the
records still queued. Since records dropped by an abort leave sequence numbers that the
broker never saw, an abort that dropped or lost records is followed by an epoch bump
(InitProducerId with the current id and epoch), after which every partition starts at 0.

``send_nowait`` is ``send`` without the awaits, for callers on the loop that cannot await
(the sync facade): it returns None when the record would have to wait.

Imports josefk.protocol, josefk.records and josefk.client modules; never josefk.storage or
josefk.broker.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
import time
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from contextvars import Context
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from josefk.client.cluster import METADATA_ERRORS, ClientConfig, KafkaClient
from josefk.client.errors import (
    AbortableTransactionError,
    FatalTransactionError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    TransactionAbortedError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for,
)
from josefk.client.partitioner import DefaultPartitioner
from josefk.client.transactions import (
    FATAL_CODES,
    PreparedTransaction,
    TransactionManager,
    TransactionState,
    offsets_by_partition,
)
from josefk.client.types import ConsumerGroupMetadata, RecordMetadata, TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from josefk.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchBuilder,
    Compression,
    RecordBatch,
)
from josefk.records.batch import CRC_OFFSET, PRODUCER_ID_OFFSET

log = logging.getLogger("josefk.client.producer")

_RECORD_OVERHEAD: Final = 12  # typical varints and attributes of one v2 record
# Producer id (int64), epoch (int16) and base sequence (int32) sit together in the v2 header.
_PRODUCER_FIELDS: Final = struct.Struct(">qhi")
_CRC: Final = struct.Struct(">I")
_SEQUENCE_ERRORS: Final = frozenset(
    {
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.INVALID_PRODUCER_EPOCH,
    }
)
_INT32_MAX: Final = 0x7FFFFFFF
_time_ns = time.time_ns

HeadersInput = Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None


def parse_acks(acks: int | str) -> int:
    if acks in ("all", "-1", -1):
        return -1
    value = int(acks)
    if value not in (0, 1):
        raise ValueError(f"acks must be 0, 1 or all (-1), not {acks!r}")
    return value


def parse_compression(codec: str | Compression | None) -> Compression:
    if codec is None:
        return Compression.NONE
    if isinstance(codec, Compression):
        return codec
    try:
        return Compression[codec.strip().upper()]
    except KeyError:
        raise ValueError(f"unknown compression type {codec!r}") from None


@dataclass(kw_only=True)
class ProducerConfig(ClientConfig):
    """Producer settings, with Kafka's names and defaults where Kafka has them."""

    acks: int | str = "all"
    linger_ms: float = 5.0
    batch_size: int = 16_384
    compression_type: str | Compression | None = "none"
    compression_level: int | None = None
    max_request_size: int = 1_048_576
    buffer_memory: int = 33_554_432
    delivery_timeout_ms: int = 120_000
    retries: int = _INT32_MAX
    max_in_flight_requests_per_connection: int = 5
    enable_idempotence: bool | None = None
    max_block_ms: int = 60_000
    partitioner: DefaultPartitioner | None = None
    # A transactional producer (KIP-98): implies idempotence and acks=all.
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000


def retry_backoff_s(attempts: int, base_ms: int, max_ms: int) -> float:
    """KIP-580's exponential backoff before retry number ``attempts`` (1 for the first):
    ``base_ms`` doubled per attempt, never above ``max_ms`` (nor below ``base_ms``)."""
    return float(min(base_ms * 2 ** (attempts - 1), max(max_ms, base_ms))) / 1000


class _Batch:
    """One partition's batch: open (builder accepting records) then closed (bytes built),
    then done: ``outcome`` holds ``(base_offset, log_append_time)`` or the error.

    Records have no future of their own until someone asks (``DeliveryFuture``): the batch
    keeps each record's timestamp, and ``waiting`` the few real futures that were made.
    """

    __slots__ = (
        "attempts",
        "base_sequence",
        "buffered",
        "builder",
        "create_future",
        "data",
        "deadline",
        "outcome",
        "record_count",
        "size",
        "timestamps",
        "tp",
        "waiting",
    )

    def __init__(
        self,
        tp: TopicPartition,
        builder: BatchBuilder,
        deadline: float,
        base_sequence: int,
        create_future: Callable[[], asyncio.Future[Any]],
    ) -> None:
        self.tp = tp
        self.builder: BatchBuilder | None = builder
        self.create_future = create_future
        self.timestamps: list[int] = []
        self.waiting: dict[int, asyncio.Future[RecordMetadata]] = {}
        self.outcome: tuple[int, int] | BaseException | None = None
        self.data: bytes | bytearray = b""
        self.record_count = 0
        self.size = 0
        self.buffered = 0
        self.attempts = 0
        self.deadline = deadline
        self.base_sequence = base_sequence

    def metadata(self, index: int) -> RecordMetadata:
        """The delivered record's metadata; call only after ``complete``."""
        outcome = self.outcome
        assert isinstance(outcome, tuple), "metadata of a batch not delivered"
        base_offset, log_append_time = outcome
        return RecordMetadata(
            self.tp.topic,
            self.tp.partition,
            base_offset + index if base_offset >= 0 else -1,
            log_append_time if log_append_time >= 0 else self.timestamps[index],
        )

    def future(self, index: int) -> asyncio.Future[RecordMetadata]:
        """The real future of one record, made on first request and resolved with the batch."""
        future = self.waiting.get(index)
        if future is None:
            future = self.waiting[index] = self.create_future()
            outcome = self.outcome
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
                future.exception()
            elif outcome is not None:
                future.set_result(self.metadata(index))
        return future

    def complete(self, base_offset: int, log_append_time: int) -> None:
        if self.outcome is not None:
            return
        self.outcome = (base_offset, log_append_time)
        self.data = b""  # the records' handles keep the batch, not its bytes
        for index, future in self.waiting.items():
            if not future.done():
                future.set_result(self.metadata(index))

    def restamp(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Give the built batch a new producer id, epoch and base sequence (new CRC)."""
        data = self.data if isinstance(self.data, bytearray) else bytearray(self.data)
        _PRODUCER_FIELDS.pack_into(
            data, PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence
        )
        view = RecordBatch(memoryview(data))
        _CRC.pack_into(data, CRC_OFFSET, view.compute_crc())
        self.data = data
        self.base_sequence = base_sequence

    def fail(self, error: BaseException) -> None:
        if self.outcome is not None:
            return
        self.outcome = error
        self.data = b""
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(error)
                # Nobody may be awaiting this record; the error still reaches flush().
                future.exception()


if TYPE_CHECKING:
    _FutureInterface = asyncio.Future[RecordMetadata]
else:
    _FutureInterface = object


class DeliveryFuture(_FutureInterface):
    """The delivery of one record: what ``send`` returns, with asyncio.Future's interface.

    Await it (or ``result()`` once ``done()``) for the record's ``RecordMetadata``; it works
    with ``asyncio.gather``, ``wait``, ``wait_for`` and ``shield``, done callbacks (called
    with this object) and ``cancel``. It is no ``asyncio.Future`` subclass at run time (the
    type checker is told it is one, since it keeps that contract; it cannot be resolved by
    its user: ``set_result`` and ``set_exception`` raise InvalidStateError).

    Why not a real future per record: making and resolving one costs about as much as
    encoding a small record, and most are never looked at. This handle is two references;
    the batch resolves once for all its records, and a real future is made only for a record
    that is awaited, cancelled or given a callback (``_Batch.future``).
    """

    __slots__ = ("_batch", "_index")

    # asyncio.isfuture() recognises the contract by this attribute being not None. The
    # handle itself is never yielded to a task (``__await__`` yields the real future), so
    # it is never True.
    _asyncio_future_blocking = False

    def __init__(self, batch: _Batch, index: int) -> None:
        self._batch = batch
        self._index = index

    def _future(self) -> asyncio.Future[RecordMetadata]:
        return self._batch.future(self._index)

    def _made(self) -> asyncio.Future[RecordMetadata] | None:
        waiting = self._batch.waiting
        return waiting.get(self._index) if waiting else None

    def done(self) -> bool:
        future = self._made()
        if future is not None:
            return future.done()
        return self._batch.outcome is not None

    def cancelled(self) -> bool:
        future = self._made()
        return future is not None and future.cancelled()

    def result(self) -> RecordMetadata:
        future = self._made()
        if future is not None:
            return future.result()
        outcome = self._batch.outcome
        if outcome is None:
            raise asyncio.InvalidStateError("Result is not set.")
        if isinstance(outcome, BaseException):
            raise outcome
        return self._batch.metadata(self._index)

    def exception(self) -> BaseException | None:
        future = self._made()
        if future is not None:
            return future.exception()
        outcome = self._batch.outcome
        if outcome is None:
            raise asyncio.InvalidStateError("Exception is not set.")
        return outcome if isinstance(outcome, BaseException) else None

    def cancel(self, msg: Any | None = None) -> bool:
        # The record stays in its batch (it may be on the wire already); only the waiting
        # ends, as with a cancelled asyncio future.
        return self._future().cancel(msg)

    def add_done_callback(
        self, fn: Callable[[DeliveryFuture], object], /, *, context: Context | None = None
    ) -> None:
        self._future().add_done_callback(_CallWithHandle(fn, self), context=context)

    def remove_done_callback(self, fn: Callable[[DeliveryFuture], object], /) -> int:
        future = self._made()
        return 0 if future is None else future.remove_done_callback(fn)  # type: ignore[arg-type]

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._future().get_loop()

    def set_result(self, result: RecordMetadata, /) -> None:
        raise asyncio.InvalidStateError("a delivery future is resolved by its producer")

    def set_exception(self, exception: type | BaseException, /) -> None:
        raise asyncio.InvalidStateError("a delivery future is resolved by its producer")

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self._future().__await__()

    __iter__ = __await__

    # Read by asyncio.gather for cancelled children.
    @property
    def _cancel_message(self) -> Any:
        future = self._made()
        return None if future is None else future._cancel_message  # type: ignore[attr-defined]

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        return self._future()._make_cancelled_error()  # type: ignore[attr-defined,no-any-return]

    def __repr__(self) -> str:
        topic, partition = self._batch.tp
        state = "pending" if not self.done() else "cancelled" if self.cancelled() else "done"
        return f"<DeliveryFuture {topic}-{partition} record {self._index} of its batch {state}>"


class _CallWithHandle:
    """A done callback of the real future that hands the ``DeliveryFuture`` to the user's
    function, and compares equal to that function so that ``remove_done_callback`` finds
    it."""

    __slots__ = ("callback", "handle")

    def __init__(self, callback: Callable[[DeliveryFuture], object], handle: DeliveryFuture):
        self.callback = callback
        self.handle = handle

    def __call__(self, _future: object) -> None:
        self.callback(self.handle)

    def __eq__(self, other: object) -> bool:
        return other is self or self.callback == other

    def __hash__(self) -> int:
        return id(self)


class AIOProducer:
    """An asyncio Kafka producer.

    Usage::

        async with AIOProducer(bootstrap_servers="127.0.0.1:9092") as producer:
            future = await producer.send("events", b"value", key=b"k")
            metadata = await future            # RecordMetadata(topic, partition, offset, ts)
            await producer.send_and_wait("events", b"other")

    ``send`` only awaits when the topic's metadata is unknown or more than ``buffer_memory``
    bytes are waiting; it returns the delivery future at once otherwise. Methods must be
    called on the loop that ran ``start``.
    """

    def __init__(self, config: ProducerConfig | None = None, **settings: Any) -> None:
        if config is None:
            config = ProducerConfig(**settings)
        elif settings:
            raise TypeError("pass either a ProducerConfig or keyword settings, not both")
        self.config = config
        self.acks = parse_acks(config.acks)
        self.compression = parse_compression(config.compression_type)
        self._client = KafkaClient(config)
        self._txn: TransactionManager | None = None
        if config.transactional_id is not None:
            if config.enable_idempotence is False:
                raise ValueError("transactional_id needs idempotence (enable_idempotence)")
            if self.acks != -1:
                raise ValueError("transactional_id needs acks=all")
            self._txn = TransactionManager(
                self._client,
                config.transactional_id,
                transaction_timeout_ms=config.transaction_timeout_ms,
                max_block_ms=config.max_block_ms,
                retry_backoff_ms=config.retry_backoff_ms,
                retry_backoff_max_ms=config.retry_backoff_max_ms,
                clock=config.clock,
            )
        self._adding_partitions: asyncio.Task[None] | None = None
        # A record of the open transaction was dropped or failed: its sequence numbers are
        # unknowable, so the next transaction starts under a bumped epoch.
        self._txn_dirty = False
        self._partitioner = config.partitioner or DefaultPartitioner(config.rng)
        self._open: dict[TopicPartition, _Batch] = {}
        self._ready: dict[TopicPartition, collections.deque[_Batch]] = {}
        self._busy_partitions: set[TopicPartition] = set()
        self._retry_after: dict[TopicPartition, float] = {}
        # The leader each backed-off partition failed on.
        self._retry_leader: dict[TopicPartition, int | None] = {}
        self._node_in_flight: dict[int, int] = collections.defaultdict(int)
        self._undelivered = 0
        self._buffered_bytes = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._space = asyncio.Event()
        self._space.set()
        self._wakeup = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._next_sequence: dict[TopicPartition, int] = collections.defaultdict(int)
        self._reset_task: asyncio.Task[None] | None = None
        self._in_flight_done = asyncio.Event()
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._started = False
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # Started, not closed and with room in buffer_memory: send_nowait's one check.
        self._accepting = False
        self._batch_size = config.batch_size
        self._max_request_size = config.max_request_size
        self._max_record_size = config.max_request_size - 61  # less one batch header
        self._buffer_memory = config.buffer_memory

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        """Bootstrap, and set up idempotence if wanted and possible."""
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        await self._client.start()
        if self._txn is None:  # a transactional producer gets its id in init_transactions()
            await self._init_idempotence()
        self._sender = asyncio.ensure_future(self._run_sender())
        self._started = True
        self._accepting = self._space.is_set()

    async def _init_idempotence(self) -> None:
        wanted = self.config.enable_idempotence
        if wanted is False:
            return
        if self.acks != -1:
            if wanted:
                raise ValueError("enable_idempotence needs acks=all")
            return
        node_id = self._client.least_loaded_node()
        conn = await self._client.connection(node_id)
        if not conn.supports(ApiKey.INIT_PRODUCER_ID):
            if wanted:
                raise UnsupportedVersionError(f"{conn} does not support InitProducerId")
            log.info("broker %s has no InitProducerId: producing without idempotence", conn)
            return
        req_cls = InitProducerIdRequest
        body = req_cls(transactional_id=None, transaction_timeout_ms=_INT32_MAX)
        response: InitProducerIdResponse = await self._client.request(
            conn.node_id, ApiKey.INIT_PRODUCER_ID, body
        )
        if response.error_code:
            err = error_for(response.error_code)
            if wanted:
                raise err
            log.info("InitProducerId failed (%s): producing without idempotence", err)
            return
        self.producer_id = response.producer_id
        self.producer_epoch = response.producer_epoch
        log.info("idempotent producer id %d epoch %d", self.producer_id, self.producer_epoch)

    @property
    def idempotent(self) -> bool:
        return self.producer_id >= 0

    # ------------------------------------------------------------------ transactions

    def _transactions(self) -> TransactionManager:
        self._check_open()
        if self._txn is None:
            raise IllegalStateError("this producer has no transactional_id")
        return self._txn

    @property
    def transaction_state(self) -> TransactionState | None:
        """Where the transactional producer stands (None without a transactional_id)."""
        return None if self._txn is None else self._txn.state

    async def init_transactions(self) -> None:
        """Register the transactional id with its coordinator (FindCoordinator, then
        InitProducerId): an older producer with the same id is fenced and its open
        transaction aborted. Call once, before the first ``begin_transaction``."""
        txn = self._transactions()
        producer_id, producer_epoch = await txn.init()
        self._set_producer(producer_id, producer_epoch)

    def begin_transaction(self) -> None:
        """Start a transaction: records sent until commit or abort belong to it."""
        self._transactions().begin()
        self._txn_dirty = False

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int] | Sequence[tuple[TopicPartition, int]],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit a consumer group's offsets as part of the transaction (consume-transform-
        produce): visible to the group only if the transaction commits. ``offsets`` are the
        next offsets to consume; ``group_metadata`` is the consumer's ``group_metadata()``
        (a bare group id skips KIP-447's generation check)."""
        txn = self._transactions()
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        await txn.send_offsets(offsets_by_partition(offsets), group_metadata)

    async def commit_transaction(self) -> None:
        """Deliver every record of the transaction, then commit it (EndTxn). Raises
        AbortableTransactionError when a record failed (then abort_transaction()),
        FatalTransactionError when the producer was fenced; KafkaTimeoutError leaves the
        transaction committing, and commit_transaction() may be called again."""
        txn = self._transactions()
        if txn.state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            txn.check_can_send()  # raises the right error
        txn.start_commit()
        await self.flush()
        if txn.state is not TransactionState.COMMITTING:
            txn.check_can_send()
        await txn.end(commit=True)

    async def abort_transaction(self) -> None:
        """Abort the transaction: records not yet sent fail with TransactionAbortedError,
        requests in flight are awaited, then EndTxn(abort) makes the coordinator write abort
        markers so that read_committed consumers skip what was written."""
        txn = self._transactions()
        txn.start_abort()
        await self._drop_transaction_records()
        if txn.state is TransactionState.FATAL_ERROR:  # fenced while waiting
            txn.check_can_send()
        await txn.end(commit=False)
        if self._txn_dirty:
            producer_id, producer_epoch = await txn.bump_epoch()
            self._set_producer(producer_id, producer_epoch)
            self._txn_dirty = False

    async def prepare_transaction(self) -> PreparedTransaction:
        """Deliver every record of the transaction and hand it over instead of ending it:
        whoever gets the returned ``PreparedTransaction`` commits or aborts it with
        ``complete_transaction`` (the Spark sink's driver does, for all its tasks at once).
        After this the producer can only be closed (which leaves the transaction open); the
        coordinator aborts it if nobody ends it within ``transaction_timeout_ms``."""
        txn = self._transactions()
        if txn.state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            txn.check_can_send()
        txn.start_commit()
        await self.flush()
        if txn.state is not TransactionState.COMMITTING:
            txn.check_can_send()
        prepared = PreparedTransaction(
            txn.transactional_id, self.producer_id, self.producer_epoch, txn.started_on_coordinator
        )
        txn.state = TransactionState.PREPARED
        return prepared

    def _set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id or epoch: sequence numbers start from 0 on every partition."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self._next_sequence.clear()

    async def _drop_transaction_records(self) -> None:
        error = TransactionAbortedError(transactional_id=self.config.transactional_id)
        for batch in list(self._open.values()):
            self._close_batch(batch)
        self._fail_queued(error)
        # A request in flight may have written its records: wait for its answer so that no
        # late response lands in the next transaction.
        while any(self._node_in_flight.values()) or self._adding_partitions is not None:
            if self._adding_partitions is not None:
                await asyncio.shield(self._adding_partitions)
                continue
            await self._in_flight_done.wait()
            self._in_flight_done.clear()
        self._fail_queued(error)  # retries put back by those answers

    def _fail_queued(self, error: KafkaError) -> None:
        for queue in self._ready.values():
            while queue:
                batch = queue.popleft()
                self._txn_dirty = True
                batch.fail(error)
                self._batch_done(batch)

    def _transaction_failed(self, error: KafkaError) -> None:
        """A record of the transaction will never be written (or may have been, unknown)."""
        assert self._txn is not None
        self._txn_dirty = True
        self._txn.fail_with(error)

    async def _add_partitions(self) -> None:
        assert self._txn is not None
        try:
            await self._txn.add_pending_partitions()
        except Exception as exc:  # a bug must not leave the records waiting forever
            log.exception("AddPartitionsToTxn failed")
            self._txn.abortable(KafkaError(f"AddPartitionsToTxn failed: {exc!r}"))
        finally:
            self._adding_partitions = None
            self._wakeup.set()

    async def __aenter__(self) -> AIOProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def flush(self, timeout_s: float | None = None) -> None:
        """Send every record sent so far and wait until each is delivered or failed."""
        self._check_open()
        for batch in list(self._open.values()):
            self._close_batch(batch)
        if timeout_s is None:
            await self._idle.wait()
        else:
            try:
                async with asyncio.timeout(timeout_s):
                    await self._idle.wait()
            except TimeoutError:
                raise KafkaTimeoutError(f"flush did not finish in {timeout_s}s") from None

    async def close(self, timeout_s: float | None = None) -> None:
        """Flush (within ``timeout_s``), then stop the sender and close the connections.

        Records still undelivered after the timeout fail with KafkaTimeoutError.
        """
        if self._closed:
            return
        if self._txn is not None and self._started and self._txn.in_transaction:
            # Best effort, as librdkafka does: the coordinator would abort it at its timeout.
            try:
                async with asyncio.timeout(timeout_s):
                    await self.abort_transaction()
            except (KafkaError, TimeoutError) as exc:
                log.warning("could not abort the open transaction on close: %s", exc)
        try:
            if self._started:
                await self.flush(timeout_s)
        except KafkaTimeoutError:
            pass
        finally:
            self._closed = True
            self._accepting = False
            error = KafkaTimeoutError("producer closed before delivery")
            for batch in list(self._open.values()):
                batch.fail(error)
            for queue in self._ready.values():
                for batch in queue:
                    batch.fail(error)
            if self._sender is not None:
                self._sender.cancel()
            if self._reset_task is not None:
                self._reset_task.cancel()
            for task in list(self._tasks):
                task.cancel()
            await self._client.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("producer is closed")
        if not self._started:
            raise IllegalStateError("producer not started: call await start() first")

    # ------------------------------------------------------------------ sending

    async def partitions_for(self, topic: str) -> list[int]:
        info = await self._client.wait_for_topic(topic, timeout_s=self.config.max_block_ms / 1000)
        return sorted(info.partitions)

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: HeadersInput = None,
    ) -> DeliveryFuture:
        """Queue one record; return the future of its ``RecordMetadata``.

        Raises MessageTooLargeError for a record larger than ``max_request_size``, and
        UnknownTopicOrPartitionError when the topic has no metadata within ``max_block_ms``
        (or the partition does not exist). Does not await when the topic's metadata is known
        and the buffer has room.
        """
        future = self.send_nowait(
            topic, value, key, partition=partition, timestamp_ms=timestamp_ms, headers=headers
        )
        if future is not None:
            return future
        # Slow path: wait for buffer space, the topic's metadata or a new partition.
        if not self._space.is_set():
            await self._wait_for_space()
        info = self._client.metadata.topics.get(topic)
        if info is None or info.error_code or not info.partitions:
            info = await self._client.wait_for_topic(
                topic, timeout_s=self.config.max_block_ms / 1000
            )
        if partition is not None and partition not in info.partitions:
            # The topic may have grown since the metadata was fetched: look once more.
            await self._client.refresh_metadata([topic])
            info = self._client.metadata.topics.get(topic) or info
            if partition not in info.partitions:
                raise UnknownTopicOrPartitionError(topic=topic, partition=partition)
        future = self.send_nowait(
            topic, value, key, partition=partition, timestamp_ms=timestamp_ms, headers=headers
        )
        if future is None:  # the buffer filled up again meanwhile
            await self._wait_for_space()
            future = self.send_nowait(
                topic, value, key, partition=partition, timestamp_ms=timestamp_ms, headers=headers
            )
        if future is None:
            raise KafkaTimeoutError(f"could not queue a record for {topic} in time")
        return future

    def send_nowait(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: HeadersInput = None,
    ) -> DeliveryFuture | None:
        """``send`` without waiting: the delivery future, or None when the record cannot be
        queued right now (topic or partition not in the metadata yet, buffer full); then
        use ``send``. Raises as ``send`` does for records that can never be sent."""
        # The hot path of every producer: one flag, one dict lookup for the topic, one for
        # the open batch (a plain tuple finds the TopicPartition key), one
        # BatchBuilder.append, one small handle.
        if not self._accepting:
            self._check_open()
            return None  # buffer_memory is full
        if self._txn is not None:
            self._txn.check_can_send()
        info = self._client.metadata.topics.get(topic)
        if info is None or info.error_code or not info.partitions:
            return None
        if partition is None:
            ids = info.partition_ids
            partition = self._partitioner(topic, key, ids, ids)
        elif partition not in info.partitions:
            return None
        size = _RECORD_OVERHEAD
        if value is not None:
            size += len(value)
        if key is not None:
            size += len(key)
        if headers is None:
            header_list: Sequence[tuple[str, bytes | None]] = ()
        else:
            header_list = list(headers.items()) if isinstance(headers, Mapping) else headers
            size += sum(len(k) + (len(v) if v is not None else 0) + 4 for k, v in header_list)
        if size > self._max_record_size:
            raise MessageTooLargeError(
                f"record of about {size} bytes exceeds max_request_size {self._max_request_size}"
            )
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        batch = self._open.get((topic, partition))  # type: ignore[call-overload]
        if batch is None:
            batch = self._new_batch(TopicPartition(topic, partition))
        elif batch.buffered + size > self._batch_size and batch.record_count:
            self._close_batch(batch)
            batch = self._new_batch(batch.tp)
        index = batch.record_count
        # An open batch always has its builder.
        batch.builder.append(key, value, header_list, timestamp_ms)  # type: ignore[union-attr]
        batch.timestamps.append(timestamp_ms)
        batch.record_count = index + 1
        batch.buffered += size
        self._buffered_bytes += size
        if batch.buffered >= self._batch_size:
            self._close_batch(batch)
        if self._buffered_bytes >= self._buffer_memory:
            self._space.clear()
            self._accepting = False
        return DeliveryFuture(batch, index)

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: HeadersInput = None,
    ) -> RecordMetadata:
        """``send`` and wait for the delivery."""
        future = await self.send(
            topic, value, key, partition=partition, timestamp_ms=timestamp_ms, headers=headers
        )
        return await future

    async def _wait_for_space(self) -> None:
        try:
            async with asyncio.timeout(self.config.max_block_ms / 1000):
                await self._space.wait()
        except TimeoutError:
            raise KafkaTimeoutError(
                f"buffer_memory full for {self.config.max_block_ms} ms"
            ) from None

    def _new_batch(self, tp: TopicPartition) -> _Batch:
        base_sequence = NO_SEQUENCE
        if self.producer_id >= 0:
            base_sequence = self._next_sequence[tp]
        builder = BatchBuilder(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=base_sequence,
            is_transactional=self._txn is not None,
            compression=self.compression,
            compression_level=self.config.compression_level,
        )
        if self._txn is not None:
            self._txn.add_partition(tp)
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        assert self._loop is not None
        batch = _Batch(tp, builder, deadline, base_sequence, self._loop.create_future)
        self._open[tp] = batch
        if self._undelivered == 0:
            self._idle.clear()
        self._undelivered += 1
        if self.config.linger_ms <= 0:
            self._loop.call_soon(self._linger_expired, batch)
        else:
            self._loop.call_later(self.config.linger_ms / 1000, self._linger_expired, batch)
        return batch

    def _linger_expired(self, batch: _Batch) -> None:
        if batch.builder is not None and self._open.get(batch.tp) is batch:
            self._close_batch(batch)

    def _close_batch(self, batch: _Batch) -> None:
        builder = batch.builder
        if builder is None:
            return
        batch.builder = None
        if self._open.get(batch.tp) is batch:
            del self._open[batch.tp]
        if batch.record_count == 0:
            self._batch_done(batch)
            return
        batch.data = builder.build()
        batch.size = len(batch.data)
        if batch.base_sequence >= 0:
            self._next_sequence[batch.tp] = (batch.base_sequence + batch.record_count) & _INT32_MAX
        queue = self._ready.get(batch.tp)
        if queue is None:
            queue = self._ready[batch.tp] = collections.deque()
        queue.append(batch)
        info = self._client.metadata.topics.get(batch.tp.topic)
        if info is not None:
            self._partitioner.batch_completed(
                batch.tp.topic, batch.tp.partition, info.partition_ids
            )
        self._wakeup.set()

    def _batch_done(self, batch: _Batch) -> None:
        self._undelivered -= 1
        self._buffered_bytes -= batch.buffered
        if self._undelivered == 0:
            self._buffered_bytes = 0
            self._idle.set()
        if self._buffered_bytes < self.config.buffer_memory:
            self._space.set()
            self._accepting = self._started and not self._closed

    # ------------------------------------------------------------------ the sender

    async def _run_sender(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self._drain()
            except asyncio.CancelledError:
                raise
            except Exception:  # the sender must survive anything a drain meets
                log.exception("producer sender failed a drain; retrying")
                self._wake_later(self.config.retry_backoff_ms / 1000)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _wake_later(self, delay_s: float) -> None:
        assert self._loop is not None
        self._loop.call_later(delay_s, self._wakeup.set)

    async def _drain(self) -> None:
        now = time.monotonic()
        if self._client.metadata_stale:
            # Old metadata (metadata_max_age_ms) or marked stale after an error: refresh in
            # the background and drain again when it is in.
            self._spawn(self._refresh_then_wake())
        if self._reset_task is not None:
            return  # sequences are being renumbered; the reset wakes the sender when done
        txn = self._txn
        if txn is not None and txn.state in (
            TransactionState.ABORTABLE_ERROR,
            TransactionState.FATAL_ERROR,
        ):
            # As Kafka's sender: nothing more of a doomed transaction goes out.
            assert txn.error is not None
            error: KafkaError = (
                FatalTransactionError(cause=txn.error)
                if txn.state is TransactionState.FATAL_ERROR
                else AbortableTransactionError(cause=txn.error)
            )
            for batch in list(self._open.values()):
                self._close_batch(batch)
            self._fail_queued(error)
            return
        need_partitions = False
        by_node: dict[int, dict[TopicPartition, list[_Batch]]] = {}
        need_metadata = False
        metadata = self._client.metadata
        for tp, queue in self._ready.items():
            if not queue or tp in self._busy_partitions:
                continue
            if txn is not None and not txn.is_added(tp):
                need_partitions = True  # AddPartitionsToTxn must come first
                continue
            not_before = self._retry_after.get(tp)
            if not_before is not None:
                if not_before > now:
                    continue
                del self._retry_after[tp]
                self._retry_leader.pop(tp, None)
            while queue and queue[0].deadline <= now:
                expired = queue.popleft()
                timeout = KafkaTimeoutError(
                    "delivery_timeout_ms expired", topic=tp.topic, partition=tp.partition
                )
                self._sequence_gap(timeout)
                expired.fail(timeout)
                self._batch_done(expired)
            if not queue:
                continue
            leader = metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                need_metadata = True
                continue
            if self._node_in_flight[leader] >= self.config.max_in_flight_requests_per_connection:
                continue
            taken = [queue.popleft()]
            total = taken[0].size
            while queue and total + queue[0].size <= self.config.max_request_size:
                total += queue[0].size
                taken.append(queue.popleft())
            by_node.setdefault(leader, {})[tp] = taken
        for node_id, batches in by_node.items():
            self._node_in_flight[node_id] += 1
            self._busy_partitions.update(batches)
            self._spawn(self._produce(node_id, batches))
        if need_metadata:
            self._client.invalidate()
            self._spawn(self._refresh_then_wake())
        if need_partitions and self._adding_partitions is None:
            self._adding_partitions = asyncio.ensure_future(self._add_partitions())

    async def _refresh_then_wake(self) -> None:
        try:
            metadata = await self._client.refresh_metadata()
        except KafkaError as exc:
            log.debug("metadata refresh failed: %s", exc)
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        else:
            # A partition whose leader changed since its failure is retried at once on the
            # new leader (KIP-951): the backoff was for the old one.
            for tp, failed_on in list(self._retry_leader.items()):
                leader = metadata.leader_for(tp.topic, tp.partition)
                if leader is not None and leader != failed_on:
                    self._retry_after.pop(tp, None)
                    del self._retry_leader[tp]
        self._wakeup.set()

    def _produce_request(self, batches: dict[TopicPartition, list[_Batch]]) -> Any:
        req = ProduceRequest
        topics: dict[str, list[Any]] = {}
        for tp, taken in batches.items():
            data: bytes | bytearray = (
                taken[0].data if len(taken) == 1 else b"".join(b.data for b in taken)
            )
            topics.setdefault(tp.topic, []).append(
                req.TopicProduceData.PartitionProduceData(index=tp.partition, records=data)
            )
        return req(
            transactional_id=self.config.transactional_id,
            acks=self.acks,
            timeout_ms=self.config.request_timeout_ms,
            topic_data=[
                req.TopicProduceData(name=name, partition_data=parts)
                for name, parts in topics.items()
            ],
        )

    async def _produce(self, node_id: int, batches: dict[TopicPartition, list[_Batch]]) -> None:
        try:
            body = self._produce_request(batches)
            try:
                response: ProduceResponse | None = await self._client.request(
                    node_id, ApiKey.PRODUCE, body, expect_response=self.acks != 0
                )
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                for tp, taken in batches.items():
                    self._retry_or_fail(tp, taken, exc)
                return
            except KafkaError as exc:
                for taken in batches.values():
                    for batch in taken:
                        batch.fail(exc)
                        self._batch_done(batch)
                if self._txn is not None:
                    self._transaction_failed(exc)
                return
            if response is None:  # acks=0: nothing comes back
                for taken in batches.values():
                    for batch in taken:
                        batch.complete(-1, -1)
                        self._batch_done(batch)
                return
            answered: set[TopicPartition] = set()
            for topic in response.responses:
                for part in topic.partition_responses:
                    tp = TopicPartition(topic.name, part.index)
                    taken_or_none = batches.get(tp)
                    if taken_or_none is None:
                        continue
                    answered.add(tp)
                    self._handle_partition(tp, taken_or_none, part)
            for tp, taken in batches.items():
                if tp not in answered:
                    self._retry_or_fail(
                        tp, taken, KafkaConnectionError("partition missing from produce response")
                    )
        finally:
            self._node_in_flight[node_id] -= 1
            self._busy_partitions.difference_update(batches)
            self._in_flight_done.set()
            self._wakeup.set()

    def _handle_partition(self, tp: TopicPartition, taken: list[_Batch], part: Any) -> None:
        code = part.error_code
        if code == 0 or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            base = part.base_offset if code == 0 else -1
            for batch in taken:
                batch.complete(base, part.log_append_time_ms)
                if base >= 0:
                    base += batch.record_count
                self._batch_done(batch)
            return
        error = error_for(code, part.error_message, topic=tp.topic, partition=tp.partition)
        if self._txn is not None and (code in FATAL_CODES or code in _SEQUENCE_ERRORS):
            # Fenced (a newer epoch exists) ends the producer; a sequence the broker will not
            # take ends the transaction: renumbering inside it could reorder its records.
            for batch in taken:
                batch.fail(error)
                self._batch_done(batch)
            self._transaction_failed(error)
            return
        if code in _SEQUENCE_ERRORS and self.idempotent:
            # The broker lost or rejects this producer's state: bump the epoch, renumber,
            # and send these batches again first.
            log.info("%s: %s; bumping the producer epoch", tp, error)
            queue = self._ready.setdefault(tp, collections.deque())
            queue.extendleft(reversed(taken))
            self._request_reset()
            return
        if code in METADATA_ERRORS:
            self._client.invalidate()
        self._retry_or_fail(tp, taken, error)

    def _retry_or_fail(self, tp: TopicPartition, taken: list[_Batch], error: KafkaError) -> None:
        now = time.monotonic()
        queue = self._ready.setdefault(tp, collections.deque())
        retry: list[_Batch] = []
        for batch in taken:
            batch.attempts += 1
            if error.retriable and batch.attempts <= self.config.retries and batch.deadline > now:
                retry.append(batch)
            else:
                batch.fail(error)
                self._batch_done(batch)
                self._sequence_gap(error)
        if retry:
            log.debug("retrying %d batches of %s after %s", len(retry), tp, error)
            queue.extendleft(reversed(retry))
            self._client.invalidate()
            backoff = retry_backoff_s(
                retry[0].attempts, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
            )
            self._retry_after[tp] = now + backoff
            self._retry_leader[tp] = self._client.metadata.leader_for(tp.topic, tp.partition)
            self._spawn(self._refresh_then_wake())
            self._wake_later(backoff)

    # ------------------------------------------------------------------ epoch bumps

    def _sequence_gap(self, error: KafkaError) -> None:
        """A batch with sequence numbers will never be written: later batches of its
        partition would be refused as out of order, so renumber everything (KIP-360). In a
        transaction, the transaction must abort instead (the epoch is bumped after it)."""
        if self._txn is not None:
            self._transaction_failed(error)
        elif self.idempotent:
            self._request_reset()

    def _request_reset(self) -> None:
        if self._reset_task is None and not self._closed:
            self._reset_task = asyncio.ensure_future(self._reset_sequences())

    async def _reset_sequences(self) -> None:
        """Bump the epoch (InitProducerId with the current id and epoch), then renumber
        every queued batch from sequence 0 per partition under the new epoch.

        The sender sends nothing meanwhile; in-flight requests finish first so that no
        response about an old sequence arrives after the renumbering.
        """
        try:
            for batch in list(self._open.values()):
                self._close_batch(batch)
            while any(self._node_in_flight.values()):
                await self._in_flight_done.wait()
                self._in_flight_done.clear()
            req_cls = InitProducerIdRequest
            for attempt in range(10):
                node_id = self._client.least_loaded_node()
                try:
                    body = req_cls(
                        transactional_id=None,
                        transaction_timeout_ms=_INT32_MAX,
                        producer_id=self.producer_id,
                        producer_epoch=self.producer_epoch,
                    )
                    response: InitProducerIdResponse = await self._client.request(
                        node_id, ApiKey.INIT_PRODUCER_ID, body
                    )
                except (KafkaConnectionError, KafkaTimeoutError):
                    await asyncio.sleep(self.config.retry_backoff_ms / 1000 * 2**attempt)
                    continue
                if response.error_code == 0:
                    self.producer_id = response.producer_id
                    self.producer_epoch = response.producer_epoch
                    break
                error = error_for(response.error_code)
                if not error.retriable:
                    raise error
                await asyncio.sleep(self.config.retry_backoff_ms / 1000 * 2**attempt)
            else:
                raise KafkaTimeoutError("InitProducerId did not answer for the epoch bump")
            log.info("producer id %d now at epoch %d", self.producer_id, self.producer_epoch)
            # Batches opened while waiting carry the old epoch: close them to renumber them
            # too. Nothing below awaits, so later batches open under the new epoch.
            for batch in list(self._open.values()):
                self._close_batch(batch)
            for tp, queue in self._ready.items():
                sequence = 0
                for batch in queue:
                    batch.restamp(self.producer_id, self.producer_epoch, sequence)
                    sequence = (sequence + batch.record_count) & _INT32_MAX
                self._next_sequence[tp] = sequence
            for tp in list(self._next_sequence):
                if tp not in self._ready:
                    self._next_sequence[tp] = 0
        except asyncio.CancelledError:
            raise
        except KafkaError as exc:
            log.error("epoch bump failed (%s): failing the queued records", exc)
            for queue in self._ready.values():
                while queue:
                    batch = queue.popleft()
                    batch.fail(exc)
                    self._batch_done(batch)
        finally:
            self._reset_task = None
            self._wakeup.set()
