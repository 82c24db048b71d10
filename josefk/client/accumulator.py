"""The producer's record accumulator: open batches per partition, closed batches waiting to
be sent, and the handles ``send`` returns.

Owns ``RecordAccumulator`` (as Kafka's RecordAccumulator), ``ProducerBatch`` and
``DeliveryFuture``. A record is appended to its partition's open batch (one
``RecordWriter.append`` in C, no future); a batch closes when it holds ``batch_size``
bytes, when ``linger_ms`` has passed since it opened (one timer serves all open batches),
or when someone asks (``flush``, an epoch bump, a transaction's end). Closing builds the v2
batch once (compressed, CRC computed) and queues it on its partition's ``ready`` deque,
where the sender takes it. The accumulator also keeps the ``buffer_memory`` accounting
(``space``, ``accepting``), the count of batches not yet done (``idle``), and each
partition's next sequence number for an idempotent producer.

It knows nothing of brokers, requests or retries (sender.py), nor of the producer's life
cycle and transactions (producer.py). Imports josefk.records and josefk.client types only;
never josefk.client.sender, josefk.client.producer, the connection, josefk.storage or
josefk.broker.
"""

from __future__ import annotations

import asyncio
import collections
import struct
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from contextvars import Context
from typing import TYPE_CHECKING, Any, Final

from josefk.client.types import RecordMetadata, TopicPartition
from josefk.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchBuilder,
    Compression,
    RecordBatch,
)
from josefk.records.batch import CRC_OFFSET, PRODUCER_ID_OFFSET
from josefk.records.builder import PyRecordWriter

# Producer id (int64), epoch (int16) and base sequence (int32) sit together in the v2 header.
_PRODUCER_FIELDS: Final = struct.Struct(">qhi")
_CRC: Final = struct.Struct(">I")
INT32_MAX: Final = 0x7FFFFFFF
_perf_counter = time.perf_counter
_new_handle = object.__new__

CallbackEntry = tuple["DeliveryFuture", Callable[["DeliveryFuture"], object], Context | None]
Callbacks = list[CallbackEntry]


def _run_callbacks(callbacks: Iterable[CallbackEntry]) -> None:
    """A done batch's callbacks, in order; one that raises is reported as asyncio reports a
    failed callback, and the others still run."""
    for handle, fn, context in callbacks:
        try:
            if context is None:
                fn(handle)
            else:
                context.run(fn, handle)
        except Exception as exc:  # noqa: BLE001  reported, as asyncio's Handle._run does
            asyncio.get_running_loop().call_exception_handler(
                {
                    "message": f"Exception in callback {fn!r}",
                    "exception": exc,
                    "future": handle,
                }
            )


class ProducerBatch:
    """One partition's batch: open (builder accepting records) then closed (bytes built),
    then done: ``outcome`` holds ``(base_offset, log_append_time)`` or the error.

    Records have no future of their own until someone asks (``DeliveryFuture``): the batch
    keeps each record's timestamp, ``waiting`` the few real futures that were made, and
    ``callbacks`` the done callbacks given to handles without a real future; when the batch
    is done one ``call_soon`` runs them all, in the order they were added.
    """

    __slots__ = (
        "attempts",
        "base_sequence",
        "buffered",
        "builder",
        "callbacks",
        "create_future",
        "data",
        "deadline",
        "done_at",
        "limit",
        "linger_until",
        "outcome",
        "partition",
        "record_count",
        "records",
        "size",
        "topic",
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
        # tp's fields as plain slots: the accumulator compares them per record.
        self.topic = tp.topic
        self.partition = tp.partition
        self.builder: BatchBuilder | None = builder
        # The builder's records, kept once the batch is built (the builder is not): each
        # record's timestamp and the perf_counter() of its send, for RecordMetadata and
        # latency() (the builder must be made with keep_times).
        self.records: PyRecordWriter = builder.records  # or its C twin
        self.create_future = create_future
        # perf_counter() of the batch's outcome: latency().
        self.done_at = 0.0
        self.waiting: dict[int, asyncio.Future[RecordMetadata]] = {}
        # A list only once a callback comes: most producers add none, and an empty list per
        # batch is one more object for the garbage collector to walk while it is in flight.
        self.callbacks: Callbacks | tuple[()] = ()
        self.outcome: tuple[int, int] | BaseException | None = None
        self.data: bytes | bytearray = b""
        self.record_count = 0
        self.size = 0
        self.buffered = 0
        # Bytes at which it closes: batch_size, or more while a request of its partition is
        # in flight (RecordAccumulator.full).
        self.limit = 0
        self.attempts = 0
        self.deadline = deadline
        self.base_sequence = base_sequence
        # The event loop's time at which linger_ms has passed since the batch opened.
        self.linger_until = 0.0

    def metadata(self, index: int) -> RecordMetadata:
        """The delivered record's metadata; call only after ``complete``."""
        outcome = self.outcome
        assert isinstance(outcome, tuple), "metadata of a batch not delivered"
        base_offset, log_append_time = outcome
        return RecordMetadata(
            self.tp.topic,
            self.tp.partition,
            base_offset + index if base_offset >= 0 else -1,
            log_append_time if log_append_time >= 0 else self.records.timestamp(index),
        )

    def future(self, index: int) -> asyncio.Future[RecordMetadata]:
        """The real future of one record, made on first request and resolved with the batch.

        Done callbacks the record's handle held on the batch move to it, in order."""
        future = self.waiting.get(index)
        if future is None:
            future = self.waiting[index] = self.create_future()
            outcome = self.outcome
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
                future.exception()
            elif outcome is not None:
                future.set_result(self.metadata(index))
            if self.callbacks:
                kept: Callbacks = []
                for entry in self.callbacks:
                    handle, fn, context = entry
                    if handle._index == index:
                        future.add_done_callback(_CallWithHandle(fn, handle), context=context)
                    else:
                        kept.append(entry)
                self.callbacks = kept or ()
        return future

    def add_callback(
        self,
        handle: DeliveryFuture,
        fn: Callable[[DeliveryFuture], object],
        context: Context | None,
    ) -> None:
        """A done callback of a record without a real future: kept on the batch (one list
        entry instead of a future per record), or scheduled at once when the batch is done."""
        if self.outcome is None:
            callbacks = self.callbacks
            if isinstance(callbacks, list):
                callbacks.append((handle, fn, context))
            else:
                self.callbacks = [(handle, fn, context)]
        else:
            asyncio.get_running_loop().call_soon(fn, handle, context=context)

    def remove_callbacks(self, index: int, fn: Callable[[DeliveryFuture], object]) -> int:
        before = len(self.callbacks)
        kept = [entry for entry in self.callbacks if entry[0]._index != index or entry[1] != fn]
        self.callbacks = kept or ()
        return before - len(kept)

    def _schedule_callbacks(self) -> None:
        if self.callbacks:
            callbacks, self.callbacks = self.callbacks, ()
            asyncio.get_running_loop().call_soon(_run_callbacks, callbacks)

    def complete(self, base_offset: int, log_append_time: int) -> None:
        if self.outcome is not None:
            return
        self.outcome = (base_offset, log_append_time)
        self.done_at = _perf_counter()
        # The records' handles keep the batch, not its bytes.
        self.data = b""
        self.records.release()
        for index, future in self.waiting.items():
            if not future.done():
                future.set_result(self.metadata(index))
        self._schedule_callbacks()

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
        self.done_at = _perf_counter()
        self.data = b""
        self.records.release()
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(error)
                # Nobody may be awaiting this record; the error still reaches flush().
                future.exception()
        self._schedule_callbacks()


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
    that is awaited or cancelled (``ProducerBatch.future``); done callbacks wait on the batch
    and run together when it is done (each still called with its handle, through the loop,
    as asyncio runs a future's callbacks).
    """

    __slots__ = ("_batch", "_index")

    # asyncio.isfuture() recognises the contract by this attribute being not None. The
    # handle itself is never yielded to a task (``__await__`` yields the real future), so
    # it is never True.
    _asyncio_future_blocking = False

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def _future(self) -> asyncio.Future[RecordMetadata]:
        return self._batch.future(self._index)

    def _made(self) -> asyncio.Future[RecordMetadata] | None:
        waiting = self._batch.waiting
        return waiting.get(self._index) if waiting else None

    def latency(self) -> float | None:
        """Seconds from ``send`` to this record's acknowledgement (or failure), as
        librdkafka's ``Message.latency()``; None until then. Taken when the response is
        handled, before any callback runs, so callbacks and awaiting add nothing to it."""
        batch = self._batch
        if batch.outcome is None:
            return None
        return batch.done_at - batch.records.appended_at(self._index)

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
        future = self._made()
        if future is None:
            self._batch.add_callback(self, fn, context)
        else:
            future.add_done_callback(_CallWithHandle(fn, self), context=context)

    def remove_done_callback(self, fn: Callable[[DeliveryFuture], object], /) -> int:
        removed = self._batch.remove_callbacks(self._index, fn) if self._batch.callbacks else 0
        future = self._made()
        if future is not None:
            removed += future.remove_done_callback(fn)  # type: ignore[arg-type]
        return removed

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


class RecordAccumulator:
    """Per-partition batches of one producer, from the first record to the sender's queue.

    ``append`` is the hot path of every ``send``; ``ready`` maps each partition to its
    closed batches in order (the sender pops from the left and puts retries back there);
    ``batch_done`` is called once for every batch that was opened, when it is delivered or
    failed for good, and tells ``on_done`` (when set) of each such batch that held records.
    ``on_close`` is told of each closed batch (the producer wakes its sender and tells the
    partitioner); ``on_open`` of each new one (a transaction adds the partition).
    """

    def __init__(
        self,
        *,
        batch_size: int,
        buffer_memory: int,
        linger_ms: float,
        delivery_timeout_ms: int,
        compression: Compression,
        compression_level: int | None,
        transactional: bool,
        on_open: Callable[[TopicPartition], None],
        on_close: Callable[[ProducerBatch], None],
    ) -> None:
        self.batch_size = batch_size
        # What an open batch may grow to while a request of its partition is in flight:
        # a Produce request carries one batch per partition (Kafka refuses more since v3),
        # so a partition keeps up with its records by sending a larger batch per round trip,
        # not several. Set by the producer (max_request_size, capped below the default
        # max.message.bytes), never below batch_size.
        self.grown_batch_size = batch_size
        # The partitions with a Produce request in flight: the sender's set, shared.
        self.in_flight: set[TopicPartition] = set()
        self.buffer_memory = buffer_memory
        self.linger_s = linger_ms / 1000
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.compression = compression
        self.compression_level = compression_level
        self.transactional = transactional
        self._on_open = on_open
        self._on_close = on_close
        self.on_done: Callable[[ProducerBatch], None] | None = None
        self.open: dict[TopicPartition, ProducerBatch] = {}
        # The batch the last record went to (open or not): append's first guess.
        self._last: ProducerBatch | None = None
        self.ready: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        self.next_sequence: dict[TopicPartition, int] = collections.defaultdict(int)
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.undelivered = 0
        self.buffered_bytes = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.space = asyncio.Event()
        self.space.set()
        # Whether the producer takes records at all (started, not closed): set by it.
        self.admitting = False
        # admitting and room in buffer_memory: send_nowait's one check.
        self.accepting = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # The loop's bound create_future, made once: a bound method per batch is one more
        # object for the garbage collector to walk while the batch is in flight.
        self._create_future: Callable[[], asyncio.Future[Any]] | None = None
        # One timer for all open batches' linger (see _linger_sweep), not one per batch.
        self._linger_timer: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._create_future = loop.create_future
        self.admitting = True
        self.accepting = self.space.is_set()

    def stop(self) -> None:
        self.admitting = False
        self.accepting = False

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        timestamp_ms: int,
        size: int,
    ) -> DeliveryFuture:
        """Add one record (``size``: its estimated bytes) to its partition's open batch."""
        # Most producers send to one partition for a while (an explicit partition, the
        # sticky partitioner): the last record's batch, while still open, is this one's
        # without building and hashing a (topic, partition) key. An open batch (builder
        # set) is always its partition's entry in ``open``.
        batch = self._last
        if (
            batch is None
            or batch.builder is None
            or batch.partition != partition
            or batch.topic != topic
        ):
            batch = self.open.get((topic, partition))  # type: ignore[call-overload]
            if batch is None:
                batch = self._new_batch(TopicPartition(topic, partition))
            self._last = batch
        if batch.buffered + size > batch.limit and batch.record_count and self.full(batch, size):
            batch = self._last = self._new_batch(batch.tp)
        index = batch.record_count
        # One C call encodes the record and keeps its timestamp and send time; the
        # builder's own append only for a record the writer declines (odd types), and it
        # raises what such a record deserves. An open batch always has its builder.
        if batch.records.append(key, value, headers, timestamp_ms) is None:
            batch.builder.append(key, value, headers, timestamp_ms)  # type: ignore[union-attr]
        batch.record_count = index + 1
        batch.buffered += size
        self.buffered_bytes += size
        if batch.buffered >= batch.limit:
            self.full(batch, 0)
        if self.buffered_bytes >= self.buffer_memory:
            self.space.clear()
            self.accepting = False
        # DeliveryFuture(batch, index) without its __init__'s Python frame: a third of the
        # handle's cost, per record.
        handle = _new_handle(DeliveryFuture)
        handle._batch = batch
        handle._index = index
        return handle

    def full(self, batch: ProducerBatch, size: int) -> bool:
        """``batch`` reached its limit (with ``size`` more bytes to come): closed, True; or,
        while a request of its partition is in flight and nothing of it waits closed, left
        open to grow up to ``grown_batch_size``, False (closed when the request is answered:
        ``close_grown``)."""
        if (
            batch.limit < self.grown_batch_size
            and batch.buffered + size < self.grown_batch_size
            and batch.tp in self.in_flight
            and not self.ready.get(batch.tp)
        ):
            batch.limit = self.grown_batch_size
            return False
        self.close_batch(batch)
        return True

    def close_grown(self, tp: TopicPartition) -> None:
        """The request in flight for ``tp`` was answered: its open batch, if it is past
        batch_size, goes now rather than at its linger."""
        batch = self.open.get(tp)
        if batch is not None and batch.buffered >= self.batch_size:
            self.close_batch(batch)

    def _new_batch(self, tp: TopicPartition) -> ProducerBatch:
        base_sequence = NO_SEQUENCE
        if self.producer_id >= 0:
            base_sequence = self.next_sequence[tp]
        builder = BatchBuilder(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=base_sequence,
            is_transactional=self.transactional,
            compression=self.compression,
            compression_level=self.compression_level,
            keep_times=True,
        )
        self._on_open(tp)
        deadline = time.monotonic() + self.delivery_timeout_s
        loop = self._loop
        assert loop is not None
        create_future = self._create_future
        assert create_future is not None
        batch = ProducerBatch(tp, builder, deadline, base_sequence, create_future)
        batch.limit = self.batch_size
        batch.linger_until = loop.time() + self.linger_s
        # Never already in ``open`` (append closed and removed its predecessor): inserted
        # last, so ``open`` stays in the order the batches opened, which the sweep needs.
        self.open[tp] = batch
        if self.undelivered == 0:
            self.idle.clear()
        self.undelivered += 1
        if self._linger_timer is None:
            self._linger_timer = loop.call_at(batch.linger_until, self._linger_sweep)
        return batch

    def _linger_sweep(self) -> None:
        """Close the open batches whose linger has passed, then wait for the next one.

        ``open`` holds the open batches in the order they opened, so their linger ends come
        in that order too: the sweep stops at the first batch that must wait and sets the
        one timer for it. A timer per batch (libuv's timer handle and a heap entry each)
        was a fifth of a producer's cost per batch when records spread over thousands of
        partitions, one or two to a batch; Kafka's accumulator likewise compares each
        partition's oldest batch with linger.ms instead of arming a timer for it."""
        self._linger_timer = None
        loop = self._loop
        assert loop is not None
        now = loop.time()
        expired = []
        waiting: ProducerBatch | None = None
        for batch in self.open.values():
            if batch.linger_until > now:
                waiting = batch
                break
            expired.append(batch)
        for batch in expired:
            self.close_batch(batch)
        if waiting is not None and self._linger_timer is None:
            self._linger_timer = loop.call_at(waiting.linger_until, self._linger_sweep)

    def close_batch(self, batch: ProducerBatch) -> None:
        """Build ``batch`` and queue it for the sender (nothing if already closed)."""
        builder = batch.builder
        if builder is None:
            return
        batch.builder = None
        if self.open.get(batch.tp) is batch:
            del self.open[batch.tp]
        if batch.record_count == 0:
            self.batch_done(batch)
            return
        batch.data = builder.build()
        batch.size = len(batch.data)
        if batch.base_sequence >= 0:
            self.next_sequence[batch.tp] = (batch.base_sequence + batch.record_count) & INT32_MAX
        queue = self.ready.get(batch.tp)
        if queue is None:
            queue = self.ready[batch.tp] = collections.deque()
        queue.append(batch)
        self._on_close(batch)

    def close_all(self) -> None:
        """Close every open batch (flush, an epoch bump, a transaction's end)."""
        for batch in list(self.open.values()):
            self.close_batch(batch)

    def requeue(self, tp: TopicPartition, batches: Sequence[ProducerBatch]) -> None:
        """Put ``batches`` (in order) back at the head of their partition's queue."""
        queue = self.ready.get(tp)
        if queue is None:
            queue = self.ready[tp] = collections.deque()
        queue.extendleft(reversed(batches))

    def batch_done(self, batch: ProducerBatch) -> None:
        """``batch`` is delivered or failed for good: its bytes leave buffer_memory."""
        self.undelivered -= 1
        self.buffered_bytes -= batch.buffered
        if self.undelivered == 0:
            self.buffered_bytes = 0
            self.idle.set()
        if self.buffered_bytes < self.buffer_memory:
            self.space.set()
            self.accepting = self.admitting
        if self.on_done is not None and batch.outcome is not None:
            self.on_done(batch)

    def fail_queued(self, error: BaseException) -> int:
        """Fail every closed batch still queued; how many there were."""
        failed = 0
        for queue in self.ready.values():
            while queue:
                batch = queue.popleft()
                failed += 1
                batch.fail(error)
                self.batch_done(batch)
        return failed

    def fail_all(self, error: BaseException) -> None:
        """The producer closed: whatever is open or queued fails (no accounting kept)."""
        for batch in list(self.open.values()):
            batch.fail(error)
        for queue in self.ready.values():
            for batch in queue:
                batch.fail(error)

    def renumber(self, producer_id: int, producer_epoch: int) -> None:
        """After an epoch bump: every open batch closed, every queued batch restamped with
        the new id and epoch and sequences from 0 per partition."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.close_all()
        for tp, queue in self.ready.items():
            sequence = 0
            for batch in queue:
                batch.restamp(producer_id, producer_epoch, sequence)
                sequence = (sequence + batch.record_count) & INT32_MAX
            self.next_sequence[tp] = sequence
        for tp in list(self.next_sequence):
            if tp not in self.ready:
                self.next_sequence[tp] = 0
