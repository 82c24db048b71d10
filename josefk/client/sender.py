"""The producer's sender: closed batches to Produce requests, responses to delivered or
retried batches.

Owns ``Sender`` (as Kafka's Sender) and ``SenderMetrics``. One task drains the
accumulator's ready queues whenever it is woken: the closed batches are grouped by partition
leader into Produce requests of at most ``max_request_size`` bytes each (as Kafka's drain),
up to ``max_in_flight_requests_per_connection`` requests per broker (pipelined on one
connection, as librdkafka's max.in.flight) and one in flight per partition, so records of a
partition stay in order across retries. A partition's queued batches go in one request, as
many as fit: while a request is in flight the next one fills up. Partitions served go to the
back of the queue order, so that when requests fill up the others come first next time.
The record bytes are handed to the connection as they are (never copied into the frame).

A drain never awaits: a request whose connection is open is written in the drain itself
(``KafkaClient.start_request``), and the drain runs again as soon as an answer has been
settled, in the same turn of the event loop. A producer's ``send`` rarely awaits, so the
task that produces holds the loop for as long as it has room in ``buffer_memory``; an answer
that made room used to wake the sender only after that task had filled the room again, with
the connection idle meanwhile (about a quarter of a one-partition producer's wall time).

A response resolves each batch once. Retriable errors (NOT_LEADER_OR_FOLLOWER, lost
connections, timeouts...) refresh the metadata and put the batches back at the head of their
partition with KIP-580's backoff, until ``delivery_timeout_ms``; a partition whose leader
changed is retried at once on the new one (KIP-951). Other errors fail the batches with the
typed KafkaError. What idempotence and transactions make of an error (an epoch bump, an
abortable transaction) is the producer's business: the sender tells it through the
``ProducerHooks`` it was given.

Imports josefk.protocol and josefk.client (cluster, errors, accumulator, transactions, types);
never josefk.client.producer (the hooks are a Protocol), josefk.storage or josefk.broker.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, Protocol

from josefk.client.accumulator import ProducerBatch, RecordAccumulator
from josefk.client.cluster import METADATA_ERRORS, KafkaClient, StartedRequest
from josefk.client.errors import (
    AbortableTransactionError,
    FatalTransactionError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for,
)
from josefk.client.transactions import FATAL_CODES, TransactionManager, TransactionState
from josefk.client.types import TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import ProduceRequest, ProduceResponse

log = logging.getLogger("josefk.client.producer")

SEQUENCE_ERRORS: Final = frozenset(
    {
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.INVALID_PRODUCER_EPOCH,
    }
)


def retry_backoff_s(attempts: int, base_ms: int, max_ms: int) -> float:
    """KIP-580's exponential backoff before retry number ``attempts`` (1 for the first):
    ``base_ms`` doubled per attempt, never above ``max_ms`` (nor below ``base_ms``)."""
    return float(min(base_ms * 2 ** (attempts - 1), max(max_ms, base_ms))) / 1000


class ProducerHooks(Protocol):
    """What the sender asks of its producer about idempotence and transactions."""

    @property
    def idempotent(self) -> bool: ...

    @property
    def resetting(self) -> bool:
        """An epoch bump is renumbering the queued batches: send nothing."""
        ...

    def sequence_gap(self, error: KafkaError) -> None:
        """A batch with sequence numbers will never be written."""

    def request_reset(self) -> None:
        """The broker refuses this producer's sequences: bump the epoch."""

    def transaction_failed(self, error: KafkaError) -> None:
        """A record of the transaction failed (or may have)."""

    def fail_transaction_queue(self, error: KafkaError) -> None:
        """Fail the records queued in a doomed transaction."""


@dataclass
class SenderMetrics:
    """Counters of the Produce requests this producer sent, for tools that compare them
    with the broker's own (``josefk perf produce``): requests answered, the record-batch
    bytes and records they carried, and ``on_request`` (when set) called with each
    answered request's seconds from being written to its response being read.

    ``on_records`` (when set) is called once per batch when it is delivered or fails for
    good, with each of its records' seconds from ``send`` to that outcome (what
    ``DeliveryFuture.latency()`` gives, for a batch at once) and the batch's error, None
    when delivered: a tool that wants every record's latency need not hold a handle per
    record."""

    requests: int = 0
    request_bytes: int = 0
    records: int = 0
    on_request: Callable[[float], None] | None = None
    on_records: Callable[[list[float], BaseException | None], None] | None = None


@dataclass(frozen=True, slots=True)
class SenderConfig:
    acks: int
    transactional_id: str | None
    request_timeout_ms: int
    max_request_size: int
    max_in_flight: int
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int


class Sender:
    """Drains ``accumulator`` into Produce requests through ``client``; see the module."""

    def __init__(
        self,
        client: KafkaClient,
        accumulator: RecordAccumulator,
        config: SenderConfig,
        hooks: ProducerHooks,
        txn: TransactionManager | None,
    ) -> None:
        self._client = client
        self._accumulator = accumulator
        accumulator.on_done = self._batch_done
        self.config = config
        self.acks = config.acks
        self._hooks = hooks
        self._txn = txn
        self.metrics = SenderMetrics()
        self._busy_partitions: set[TopicPartition] = set()
        # The accumulator grows a busy partition's open batch instead of queueing another.
        accumulator.in_flight = self._busy_partitions
        self._retry_after: dict[TopicPartition, float] = {}
        # The leader each backed-off partition failed on.
        self._retry_leader: dict[TopicPartition, int | None] = {}
        self._node_in_flight: dict[int, int] = collections.defaultdict(int)
        self.wakeup = asyncio.Event()
        # Set whenever a request finishes: for waiters on "nothing in flight".
        self.in_flight_done = asyncio.Event()
        self.adding_partitions: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.ensure_future(self._run())

    def stop(self) -> None:
        """Cancel the sender task and every request task of its."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
        for task in list(self._tasks):
            task.cancel()

    @property
    def in_flight(self) -> bool:
        return any(self._node_in_flight.values())

    async def wait_idle(self) -> None:
        """Until no Produce request (and no AddPartitionsToTxn) is in flight."""
        while self.in_flight or self.adding_partitions is not None:
            if self.adding_partitions is not None:
                await asyncio.shield(self.adding_partitions)
                continue
            await self.in_flight_done.wait()
            self.in_flight_done.clear()

    def _batch_done(self, batch: ProducerBatch) -> None:
        report = self.metrics.on_records
        if report is not None:
            outcome = batch.outcome
            try:
                report(
                    batch.records.latencies(batch.done_at),
                    outcome if isinstance(outcome, BaseException) else None,
                )
            except Exception:  # a tool's callback must not stop the sender
                log.exception("SenderMetrics.on_records failed")

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        while True:
            await self.wakeup.wait()
            self.wakeup.clear()
            self._drain_safely()

    def _drain_safely(self) -> None:
        try:
            self._drain()
        except Exception:  # the sender must survive anything a drain meets
            log.exception("producer sender failed a drain; retrying")
            self._wake_later(self.config.retry_backoff_ms / 1000)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _wake_later(self, delay_s: float) -> None:
        assert self._loop is not None
        self._loop.call_later(delay_s, self.wakeup.set)

    def _drain(self) -> None:
        """Send what is ready, one request per leader with room in flight. Never awaits:
        a request goes out in this call when its connection takes it (else its task opens
        or waits for the connection), so the drain run on an answer (``_produce``) has the
        next request on the wire before the records that answer made room for are built."""
        now = time.monotonic()
        if self._client.metadata_stale:
            # Old metadata (metadata_max_age_ms) or marked stale after an error: refresh in
            # the background and drain again when it is in.
            self.spawn(self._refresh_then_wake())
        if self._hooks.resetting:
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
            self._accumulator.close_all()
            self._hooks.fail_transaction_queue(error)
            return
        need_partitions = False
        need_metadata = False
        metadata = self._client.metadata
        accumulator = self._accumulator
        max_in_flight = self.config.max_in_flight
        max_request_size = self.config.max_request_size
        # Requests per leader, each up to max_request_size (Kafka's drain), as many as the
        # leader has room in flight for: a producer spread over many partitions keeps the
        # broker's pipeline full instead of sending all its batches in one request and
        # waiting for the answer to free any partition.
        requests: dict[int, list[dict[TopicPartition, list[ProducerBatch]]]] = {}
        request_size: dict[int, int] = {}  # bytes in each leader's last request
        served: list[TopicPartition] = []
        emptied: list[TopicPartition] = []
        # Leaders with no room in flight left: once every broker is one, the partitions
        # still to look at can only wait (a drain must not walk thousands of them for
        # nothing on every answer).
        full: set[int] = set()
        brokers = max(len(metadata.brokers), 1)
        ready = accumulator.ready
        for tp, queue in ready.items():
            if not queue:
                emptied.append(tp)
                continue
            if tp in self._busy_partitions:
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
                self._hooks.sequence_gap(timeout)
                expired.fail(timeout)
                accumulator.batch_done(expired)
            if not queue:
                emptied.append(tp)
                continue
            leader = metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                need_metadata = True
                continue
            if leader in full:
                continue
            leader_requests = requests.get(leader)
            size = request_size.get(leader, 0)
            if leader_requests is None or size + queue[0].size > max_request_size:
                opened = len(leader_requests) if leader_requests is not None else 0
                if self._node_in_flight[leader] + opened >= max_in_flight:
                    full.add(leader)
                    if len(full) >= brokers:
                        break
                    continue
                if leader_requests is None:
                    leader_requests = requests[leader] = []
                leader_requests.append({})
                size = 0
            # One batch per partition and request: Kafka refuses more since Produce v3
            # (ProduceRequest.validateRecords); the next waits for this one's answer, and
            # meanwhile the accumulator grows the partition's open batch (``full``).
            taken = [queue.popleft()]
            size += taken[0].size
            leader_requests[-1][tp] = taken
            request_size[leader] = size
            served.append(tp)
        # Served partitions go to the back: when requests fill up, the partitions left out
        # this time come first next time (Kafka's drain rotates its starting partition).
        for tp in served:
            ready[tp] = ready.pop(tp)
        for tp in emptied:
            if not ready[tp]:
                del ready[tp]
        for node_id, leader_requests in requests.items():
            for batches in leader_requests:
                self._send(node_id, batches)
        if need_metadata:
            self._client.invalidate()
            self.spawn(self._refresh_then_wake())
        if need_partitions and self.adding_partitions is None:
            self.adding_partitions = asyncio.ensure_future(self._add_partitions())

    def _send(self, node_id: int, batches: dict[TopicPartition, list[ProducerBatch]]) -> None:
        """One Produce request to ``node_id``: written now when its connection takes it,
        its answer awaited (or, failing that, the request sent) by a task of its own."""
        self._node_in_flight[node_id] += 1
        self._busy_partitions.update(batches)
        body: ProduceRequest | None = None
        started_request: StartedRequest | None = None
        try:
            body = self._produce_request(batches)
            started_request = self._client.start_request(
                node_id, ApiKey.PRODUCE, body, expect_response=self.acks != 0
            )
        except Exception:  # noqa: BLE001  the request's task meets it again and settles
            started_request = None
        self.spawn(self._produce(node_id, batches, body, started_request, time.perf_counter()))

    async def _add_partitions(self) -> None:
        assert self._txn is not None
        try:
            await self._txn.add_pending_partitions()
        except Exception as exc:  # a bug must not leave the records waiting forever
            log.exception("AddPartitionsToTxn failed")
            self._txn.abortable(KafkaError(f"AddPartitionsToTxn failed: {exc!r}"))
        finally:
            self.adding_partitions = None
            self.wakeup.set()

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
        self.wakeup.set()

    # ------------------------------------------------------------------ requests

    def _produce_request(
        self, batches: dict[TopicPartition, list[ProducerBatch]]
    ) -> ProduceRequest:
        req = ProduceRequest
        topics: dict[str, list[ProduceRequest.TopicProduceData.PartitionProduceData]] = {}
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

    async def _produce(
        self,
        node_id: int,
        batches: dict[TopicPartition, list[ProducerBatch]],
        body: ProduceRequest | None,
        started_request: StartedRequest | None,
        started: float,
    ) -> None:
        """Await the answer of ``body`` (already written when ``started_request`` is given,
        else built if need be and sent here) and settle its batches; then drain at once."""
        accumulator = self._accumulator
        try:
            if body is None:
                body = self._produce_request(batches)
            try:
                response: ProduceResponse | None = await (
                    self._client.request(
                        node_id, ApiKey.PRODUCE, body, expect_response=self.acks != 0
                    )
                    if started_request is None
                    else self._client.wait_response(started_request)
                )
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                for tp, taken in batches.items():
                    self._retry_or_fail(tp, taken, exc)
                return
            except KafkaError as exc:
                for taken in batches.values():
                    for batch in taken:
                        batch.fail(exc)
                        accumulator.batch_done(batch)
                if self._txn is not None:
                    self._hooks.transaction_failed(exc)
                return
            self._count(batches, time.perf_counter() - started)
            if response is None:  # acks=0: nothing comes back
                for taken in batches.values():
                    for batch in taken:
                        batch.complete(-1, -1)
                        accumulator.batch_done(batch)
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
            for tp in batches:
                accumulator.close_grown(tp)
            self.in_flight_done.set()
            if not self._stopped:
                self._drain_safely()

    def _count(self, batches: dict[TopicPartition, list[ProducerBatch]], seconds: float) -> None:
        metrics = self.metrics
        metrics.requests += 1
        for taken in batches.values():
            for batch in taken:
                metrics.request_bytes += batch.size
                metrics.records += batch.record_count
        if metrics.on_request is not None:
            metrics.on_request(seconds)

    def _handle_partition(
        self,
        tp: TopicPartition,
        taken: list[ProducerBatch],
        part: ProduceResponse.TopicProduceResponse.PartitionProduceResponse,
    ) -> None:
        accumulator = self._accumulator
        code = part.error_code
        if code == 0 or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            base = part.base_offset if code == 0 else -1
            for batch in taken:
                batch.complete(base, part.log_append_time_ms)
                if base >= 0:
                    base += batch.record_count
                accumulator.batch_done(batch)
            return
        error = error_for(code, part.error_message, topic=tp.topic, partition=tp.partition)
        if self._txn is not None and (code in FATAL_CODES or code in SEQUENCE_ERRORS):
            # Fenced (a newer epoch exists) ends the producer; a sequence the broker will not
            # take ends the transaction: renumbering inside it could reorder its records.
            for batch in taken:
                batch.fail(error)
                accumulator.batch_done(batch)
            self._hooks.transaction_failed(error)
            return
        if code in SEQUENCE_ERRORS and self._hooks.idempotent:
            # The broker lost or rejects this producer's state: bump the epoch, renumber,
            # and send these batches again first.
            log.info("%s: %s; bumping the producer epoch", tp, error)
            accumulator.requeue(tp, taken)
            self._hooks.request_reset()
            return
        if code in METADATA_ERRORS:
            self._client.invalidate()
        self._retry_or_fail(tp, taken, error)

    def _retry_or_fail(
        self, tp: TopicPartition, taken: list[ProducerBatch], error: KafkaError
    ) -> None:
        now = time.monotonic()
        accumulator = self._accumulator
        retry: list[ProducerBatch] = []
        for batch in taken:
            batch.attempts += 1
            if error.retriable and batch.attempts <= self.config.retries and batch.deadline > now:
                retry.append(batch)
            else:
                batch.fail(error)
                accumulator.batch_done(batch)
                self._hooks.sequence_gap(error)
        if retry:
            log.debug("retrying %d batches of %s after %s", len(retry), tp, error)
            accumulator.requeue(tp, retry)
            self._client.invalidate()
            backoff = retry_backoff_s(
                retry[0].attempts, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
            )
            self._retry_after[tp] = now + backoff
            self._retry_leader[tp] = self._client.metadata.leader_for(tp.topic, tp.partition)
            self.spawn(self._refresh_then_wake())
            self._wake_later(backoff)
