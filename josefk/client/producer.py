"""The asyncio producer: its configuration, life cycle, partitioning, idempotence and
transactions, over an accumulator and a sender (as Kafka's Java producer).

Owns ``ProducerConfig`` and ``AIOProducer`` (``DeliveryFuture`` comes from accumulator.py and
is re-exported). How a record travels:

1. ``send()`` picks the partition (explicit, else ``DefaultPartitioner``: murmur2 of the key
   as the Java client, sticky for keyless records) and hands the record to the
   ``RecordAccumulator`` (accumulator.py), which appends it to the partition's open
   ``BatchBuilder`` (one encode per record) and returns its ``DeliveryFuture``, a two-field
   handle with asyncio.Future's interface (no asyncio future per record unless one is
   awaited; done callbacks wait on the batch).
2. A batch closes when it reaches ``batch_size`` bytes (uncompressed), when ``linger_ms``
   has passed since its first record, or on ``flush()``. Closing builds the v2 batch once
   (compressing it with ``compression_type``); the bytes are kept unchanged for retries.
3. The ``Sender`` (sender.py) groups the closed batches by partition leader and writes one
   Produce request per broker, up to ``max_in_flight_requests_per_connection`` requests per
   broker and one in flight per partition, so records of a partition stay in order across
   retries.
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

The producer is what the sender's ``ProducerHooks`` call back (sequence gaps, epoch bumps,
failed transactions). Imports josefk.protocol, josefk.records and josefk.client modules
(accumulator, sender, cluster, transactions...); never josefk.storage or josefk.broker, and
neither the accumulator nor the sender imports it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from josefk.client.accumulator import DeliveryFuture, ProducerBatch, RecordAccumulator
from josefk.client.cluster import ClientConfig, KafkaClient
from josefk.client.errors import (
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
from josefk.client.sender import Sender, SenderConfig, SenderMetrics, retry_backoff_s
from josefk.client.transactions import (
    PreparedTransaction,
    TransactionManager,
    TransactionState,
    offsets_by_partition,
)
from josefk.client.types import ConsumerGroupMetadata, RecordMetadata, TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.message_types import InitProducerIdRequest, InitProducerIdResponse
from josefk.records import Compression

log = logging.getLogger("josefk.client.producer")

_RECORD_OVERHEAD: Final = 12  # typical varints and attributes of one v2 record
# What a partition's batch may grow to while a request of it is in flight (see
# RecordAccumulator.full): librdkafka's batch.size default, under a topic's default
# max.message.bytes; and the room a request's own fields take besides one batch.
_GROWN_BATCH_CAP: Final = 1_000_000
_REQUEST_OVERHEAD: Final = 1024
_INT32_MAX: Final = 0x7FFFFFFF
_time_ns = time.time_ns

# Kept importable from here: the producer's names before the accumulator and the sender
# were split out.
_Batch = ProducerBatch
__all__ = [
    "AIOProducer",
    "DeliveryFuture",
    "HeadersInput",
    "ProducerConfig",
    "SenderMetrics",
    "parse_acks",
    "parse_compression",
    "retry_backoff_s",
]

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
        # A record of the open transaction was dropped or failed: its sequence numbers are
        # unknowable, so the next transaction starts under a bumped epoch.
        self._txn_dirty = False
        self._partitioner = config.partitioner or DefaultPartitioner(config.rng)
        self._accumulator = RecordAccumulator(
            batch_size=config.batch_size,
            buffer_memory=config.buffer_memory,
            linger_ms=config.linger_ms,
            delivery_timeout_ms=config.delivery_timeout_ms,
            compression=self.compression,
            compression_level=config.compression_level,
            transactional=self._txn is not None,
            on_open=self._batch_opened,
            on_close=self._batch_closed,
        )
        # Below a topic's default max.message.bytes (1 MB + 12) and the request's own limit.
        self._accumulator.grown_batch_size = max(
            config.batch_size, min(config.max_request_size - _REQUEST_OVERHEAD, _GROWN_BATCH_CAP)
        )
        self._sender = Sender(
            self._client,
            self._accumulator,
            SenderConfig(
                acks=self.acks,
                transactional_id=config.transactional_id,
                request_timeout_ms=config.request_timeout_ms,
                max_request_size=config.max_request_size,
                max_in_flight=config.max_in_flight_requests_per_connection,
                retries=config.retries,
                retry_backoff_ms=config.retry_backoff_ms,
                retry_backoff_max_ms=config.retry_backoff_max_ms,
            ),
            self,
            self._txn,
        )
        self._reset_task: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False
        self._max_request_size = config.max_request_size
        self._max_record_size = config.max_request_size - 61  # less one batch header

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        """Bootstrap, and set up idempotence if wanted and possible."""
        if self._started:
            return
        await self._client.start()
        if self._txn is None:  # a transactional producer gets its id in init_transactions()
            await self._init_idempotence()
        self._sender.start()
        self._accumulator.start(asyncio.get_running_loop())
        self._started = True

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
    def producer_id(self) -> int:
        return self._accumulator.producer_id

    @producer_id.setter
    def producer_id(self, value: int) -> None:
        self._accumulator.producer_id = value

    @property
    def producer_epoch(self) -> int:
        return self._accumulator.producer_epoch

    @producer_epoch.setter
    def producer_epoch(self, value: int) -> None:
        self._accumulator.producer_epoch = value

    @property
    def idempotent(self) -> bool:
        return self._accumulator.producer_id >= 0

    @property
    def request_metrics(self) -> SenderMetrics:
        """Counters of the Produce requests sent so far (``SenderMetrics``), with an
        optional per-request latency callback: what ``josefk perf produce`` compares with
        the broker's own request metrics."""
        return self._sender.metrics

    # ------------------------------------------------------------------ sender hooks

    @property
    def resetting(self) -> bool:
        return self._reset_task is not None

    def _batch_opened(self, tp: TopicPartition) -> None:
        if self._txn is not None:
            self._txn.add_partition(tp)

    def _batch_closed(self, batch: ProducerBatch) -> None:
        info = self._client.metadata.topics.get(batch.tp.topic)
        if info is not None:
            self._partitioner.batch_completed(
                batch.tp.topic, batch.tp.partition, info.partition_ids
            )
        self._sender.wakeup.set()

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
        self._accumulator.next_sequence.clear()

    async def _drop_transaction_records(self) -> None:
        error = TransactionAbortedError(transactional_id=self.config.transactional_id)
        self._accumulator.close_all()
        self.fail_transaction_queue(error)
        # A request in flight may have written its records: wait for its answer so that no
        # late response lands in the next transaction.
        await self._sender.wait_idle()
        self.fail_transaction_queue(error)  # retries put back by those answers

    def fail_transaction_queue(self, error: KafkaError) -> None:
        if self._accumulator.fail_queued(error):
            self._txn_dirty = True

    def transaction_failed(self, error: KafkaError) -> None:
        """A record of the transaction will never be written (or may have been, unknown)."""
        assert self._txn is not None
        self._txn_dirty = True
        self._txn.fail_with(error)

    async def __aenter__(self) -> AIOProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def flush(self, timeout_s: float | None = None) -> None:
        """Send every record sent so far and wait until each is delivered or failed."""
        self._check_open()
        self._accumulator.close_all()
        if timeout_s is None:
            await self._accumulator.idle.wait()
        else:
            try:
                async with asyncio.timeout(timeout_s):
                    await self._accumulator.idle.wait()
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
            self._accumulator.stop()
            self._accumulator.fail_all(KafkaTimeoutError("producer closed before delivery"))
            self._sender.stop()
            if self._reset_task is not None:
                self._reset_task.cancel()
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
        # send_nowait's body inlined for the common record (room in the buffer, no headers,
        # no transaction, the topic and partition in the metadata): the call with keywords
        # would cost about a tenth of the whole send. Anything else takes send_nowait.
        accumulator = self._accumulator
        if accumulator.accepting and headers is None and self._txn is None:
            info = self._client.metadata.topics.get(topic)
            if (
                info is not None
                and not info.error_code
                and info.partitions
                and (partition is None or partition in info.partitions)
            ):
                if partition is None:
                    ids = info.partition_ids
                    partition = self._partitioner(topic, key, ids, ids)
                size = _RECORD_OVERHEAD
                if value is not None:
                    size += len(value)
                if key is not None:
                    size += len(key)
                if size > self._max_record_size:
                    raise self._too_large(size)
                if timestamp_ms is None:
                    timestamp_ms = _time_ns() // 1_000_000
                return accumulator.append(topic, partition, key, value, (), timestamp_ms, size)
        future = self.send_nowait(
            topic, value, key, partition=partition, timestamp_ms=timestamp_ms, headers=headers
        )
        if future is not None:
            return future
        # Slow path: wait for buffer space, the topic's metadata or a new partition.
        if not self._accumulator.space.is_set():
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
        accumulator = self._accumulator
        if not accumulator.accepting:
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
            raise self._too_large(size)
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        return accumulator.append(topic, partition, key, value, header_list, timestamp_ms, size)

    def _too_large(self, size: int) -> KafkaError:
        return MessageTooLargeError(
            f"record of about {size} bytes exceeds max_request_size {self._max_request_size}"
        )

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
                await self._accumulator.space.wait()
        except TimeoutError:
            raise KafkaTimeoutError(
                f"buffer_memory full for {self.config.max_block_ms} ms"
            ) from None

    # ------------------------------------------------------------------ epoch bumps

    def sequence_gap(self, error: KafkaError) -> None:
        """A batch with sequence numbers will never be written: later batches of its
        partition would be refused as out of order, so renumber everything (KIP-360). In a
        transaction, the transaction must abort instead (the epoch is bumped after it)."""
        if self._txn is not None:
            self.transaction_failed(error)
        elif self.idempotent:
            self.request_reset()

    def request_reset(self) -> None:
        if self._reset_task is None and not self._closed:
            self._reset_task = asyncio.ensure_future(self._reset_sequences())

    async def _reset_sequences(self) -> None:
        """Bump the epoch (InitProducerId with the current id and epoch), then renumber
        every queued batch from sequence 0 per partition under the new epoch.

        The sender sends nothing meanwhile; in-flight requests finish first so that no
        response about an old sequence arrives after the renumbering.
        """
        try:
            self._accumulator.close_all()
            while self._sender.in_flight:
                await self._sender.in_flight_done.wait()
                self._sender.in_flight_done.clear()
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
            # Batches opened while waiting carry the old epoch: closed and renumbered too.
            # Nothing awaits in there, so later batches open under the new epoch.
            self._accumulator.renumber(self.producer_id, self.producer_epoch)
        except asyncio.CancelledError:
            raise
        except KafkaError as exc:
            log.error("epoch bump failed (%s): failing the queued records", exc)
            self._accumulator.fail_queued(exc)
        finally:
            self._reset_task = None
            self._sender.wakeup.set()
