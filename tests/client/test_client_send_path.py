"""The producer's per-record path: ``send``'s inlined common case queues exactly what
``send_nowait`` queues, and the accumulator's guess of the open batch (the last record's)
never puts a record in another partition's batch or in a closed one.

The accumulator tests drive a bare ``RecordAccumulator`` (no broker); the ``send`` tests a
real ``josefk serve``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from broker_process import BrokerProcess
from client_helpers import unique_topic

from josefk.client import AIOAdmin, AIOProducer, TopicPartition
from josefk.client.accumulator import DeliveryFuture, ProducerBatch, RecordAccumulator
from josefk.client.errors import KafkaError, MessageTooLargeError, UnknownTopicOrPartitionError
from josefk.protocol import ApiKey
from josefk.records import Compression, RecordBatch, iter_records


def _accumulator(
    batch_size: int = 1000, *, linger_ms: float = 60_000, loop: Any = None
) -> tuple[RecordAccumulator, list[ProducerBatch]]:
    closed: list[ProducerBatch] = []
    accumulator = RecordAccumulator(
        batch_size=batch_size,
        buffer_memory=1 << 30,
        linger_ms=linger_ms,
        delivery_timeout_ms=120_000,
        compression=Compression.NONE,
        compression_level=None,
        transactional=False,
        on_open=lambda _tp: None,
        on_close=closed.append,
    )
    accumulator.start(loop if loop is not None else asyncio.get_running_loop())
    return accumulator, closed


def _values(batch: ProducerBatch) -> list[bytes | None]:
    return [record.value for record in iter_records(RecordBatch(memoryview(batch.data)))]


async def test_records_to_interleaved_partitions_land_in_their_own_batches() -> None:
    accumulator, closed = _accumulator()
    sent: dict[TopicPartition, list[bytes]] = {}
    handles: list[tuple[TopicPartition, DeliveryFuture]] = []
    order = [("a", 0), ("a", 0), ("a", 1), ("b", 0), ("a", 0), ("b", 0), ("a", 1), ("a", 1)]
    for n, (topic, partition) in enumerate(order * 3):
        value = b"%d" % n
        tp = TopicPartition(topic, partition)
        sent.setdefault(tp, []).append(value)
        handle = accumulator.append(topic, partition, None, value, (), 1000 + n, 20)
        assert type(handle) is DeliveryFuture
        handles.append((tp, handle))
    assert not closed  # 20 bytes a record: nothing is full
    accumulator.close_all()
    by_tp = {batch.tp: batch for batch in closed}
    assert set(by_tp) == set(sent)
    for tp, values in sent.items():
        assert _values(by_tp[tp]) == values
    for tp, handle in handles:
        assert handle._batch is by_tp[tp]
    # Each record's index in its batch is its place among its partition's records.
    for tp in sent:
        assert [h._index for t, h in handles if t == tp] == list(range(len(sent[tp])))


async def test_a_closed_batch_is_never_appended_to() -> None:
    accumulator, closed = _accumulator(batch_size=100)
    first = accumulator.append("a", 0, None, b"1", (), 1, 60)
    second = accumulator.append("a", 0, None, b"2", (), 2, 60)  # 120 > 100: a new batch
    assert first._batch is not second._batch and closed == [first._batch]
    accumulator.close_batch(second._batch)  # as linger_ms or flush would
    third = accumulator.append("a", 0, None, b"3", (), 3, 10)
    assert third._batch is not second._batch and third._index == 0
    other = accumulator.append("a", 1, None, b"x", (), 4, 10)
    fourth = accumulator.append("a", 0, None, b"4", (), 5, 10)
    assert fourth._batch is third._batch and other._batch is not third._batch
    accumulator.close_all()
    assert [_values(batch) for batch in closed] == [[b"1"], [b"2"], [b"3", b"4"], [b"x"]]
    assert [batch.tp for batch in closed][-2:] == [("a", 0), ("a", 1)]


class _ManualClock:
    """The accumulator's view of its event loop, with time moved by hand: the loop's clock
    (``time``), ``call_at`` recorded instead of armed, real futures."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.now = 1000.0
        self.timers: list[tuple[float, Any]] = []
        self.create_future = loop.create_future

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Any, *args: Any) -> object:
        self.timers.append((when, callback))
        return object()

    def fire_due(self) -> None:
        due = [t for t in self.timers if t[0] <= self.now]
        self.timers = [t for t in self.timers if t[0] > self.now]
        for _, callback in due:
            callback()


async def test_one_timer_closes_batches_in_the_order_their_linger_ends() -> None:
    clock = _ManualClock(asyncio.get_running_loop())
    accumulator, closed = _accumulator(linger_ms=5, loop=clock)
    for step, partition in enumerate((0, 1, 2)):
        clock.now = 1000.0 + step * 0.002
        accumulator.append("t", partition, None, b"v", (), 1, 20)
    # Three batches open, one timer: at the first one's linger end.
    assert [when for when, _ in clock.timers] == [1000.005]
    clock.now = 1000.005
    clock.fire_due()
    assert [b.partition for b in closed] == [0]
    assert [when for when, _ in clock.timers] == [pytest.approx(1000.007)]
    # A batch that fills up closes at once; the timer still serves the others.
    accumulator.append("t", 1, None, b"v" * 990, (), 1, 990)
    assert [b.partition for b in closed] == [0, 1]
    clock.now = 1000.009
    clock.fire_due()
    assert [b.partition for b in closed] == [0, 1, 2]
    # partition 1's new batch (opened with the big record) lingers on by itself.
    assert [when for when, _ in clock.timers] == [pytest.approx(1000.005 + 0.005)]
    clock.now = 1000.010
    clock.fire_due()
    assert [b.partition for b in closed] == [0, 1, 2, 1]
    assert not accumulator.open and not clock.timers


async def test_send_and_send_nowait_queue_the_same_records(broker: BrokerProcess) -> None:
    topic = unique_topic("send-path")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=3)
    cases: list[dict[str, object]] = [
        {},
        {"key": b"k1"},
        {"partition": 2},
        {"key": b"k2", "timestamp_ms": 1_700_000_000_000},
        {"headers": {"h": b"v"}},
        {"headers": [("h", None)], "partition": 1},
        {"value": None, "key": b"tombstone"},
    ]
    async with AIOProducer(bootstrap_servers=broker.bootstrap, linger_ms=1) as producer:
        await producer.partitions_for(topic)
        pairs = []
        for case in cases:
            kwargs = {"value": b"v", **case}
            inline = await producer.send(topic, **kwargs)  # type: ignore[arg-type]
            nowait = producer.send_nowait(topic, **kwargs)  # type: ignore[arg-type]
            assert nowait is not None
            pairs.append((inline, nowait))
        for inline, nowait in pairs:
            a, b = await inline, await nowait
            assert (a.topic, a.partition) == (b.topic, b.partition)
            assert b.offset == a.offset + 1
        assert pairs[2][0].result().partition == 2
        assert pairs[3][0].result().timestamp == 1_700_000_000_000
        assert pairs[5][0].result().partition == 1


async def test_an_answer_puts_the_partitions_next_request_on_the_wire_at_once(
    broker: BrokerProcess,
) -> None:
    """The sender drains in the same turn of the event loop as the answer that frees a
    partition: when the first batch is reported delivered, the partition's next batch is
    already written. Left to the sender task's next turn, the drain came after the producing
    coroutine had built its next megabyte, the connection idle meanwhile (a quarter of a
    one-partition producer's wall time)."""
    topic = unique_topic("send-path")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=1)
    async with AIOProducer(
        bootstrap_servers=broker.bootstrap, linger_ms=60_000, batch_size=1024, max_request_size=1100
    ) as producer:
        await producer.partitions_for(topic)
        client = producer._client
        start_request, request = client.start_request, client.request
        written: list[int] = []  # the Produce requests written, by node

        def spy_start(node_id: int, api_key: int, body: Any, **kwargs: Any) -> Any:
            started = start_request(node_id, api_key, body, **kwargs)
            if api_key == ApiKey.PRODUCE and started is not None:
                written.append(node_id)
            return started

        def spy_request(node_id: int, api_key: int, body: Any, **kwargs: Any) -> Any:
            if api_key == ApiKey.PRODUCE:
                written.append(node_id)
            return request(node_id, api_key, body, **kwargs)

        client.start_request = spy_start  # type: ignore[method-assign]
        client.request = spy_request  # type: ignore[method-assign]
        # 700 bytes a record against batches of 1024: a batch each, and a request each
        # (max_request_size); one request in flight for the partition at a time.
        handles = [producer.send_nowait(topic, b"x" * 700, partition=0) for _ in range(3)]
        written_when_first_delivered: list[int] = []
        first = handles[0]
        assert first is not None
        first.add_done_callback(lambda _h: written_when_first_delivered.append(len(written)))
        await producer.flush()
        offsets = [(await h).offset for h in handles if h is not None]
    assert len(written) == 3  # a request a batch
    assert written_when_first_delivered == [2]
    assert offsets == [offsets[0], offsets[0] + 1, offsets[0] + 2]


async def test_on_records_reports_each_batch_once_with_its_records_latencies(
    broker: BrokerProcess,
) -> None:
    topic = unique_topic("send-path")
    small = unique_topic("send-path-small")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=2)
        await admin.create_topic(small, num_partitions=1, configs={"max.message.bytes": "500"})
    reports: list[tuple[list[float], BaseException | None]] = []
    async with AIOProducer(
        bootstrap_servers=broker.bootstrap, linger_ms=1, batch_size=4096, retries=0
    ) as producer:
        producer.request_metrics.on_records = lambda seconds, error: reports.append(
            (seconds, error)
        )
        await producer.partitions_for(topic)
        handles = [await producer.send(topic, b"v" * 100, partition=n % 2) for n in range(300)]
        await producer.flush()
        delivered = sorted(h.latency() or -1.0 for h in handles)
        assert sorted(s for seconds, _ in reports for s in seconds) == delivered
        assert all(error is None for _, error in reports) and delivered[0] >= 0
        assert 300 * 100 // 4096 <= len(reports) < 300  # batches, not records
        reports.clear()
        refused = await producer.send(small, b"x" * 1000)
        with pytest.raises(KafkaError):
            await refused
    [(seconds, error)] = reports
    assert seconds == [refused.latency()]
    assert error is refused.exception()


async def test_requests_stay_within_max_request_size_and_take_turns(
    broker: BrokerProcess,
) -> None:
    """Batches of many partitions are drained into requests of at most max_request_size
    (Kafka's drain), as many as the connection has room in flight for; the partitions a
    full request left out come first in the next one. (All of them in one request had
    made a producer spread over 10,000 partitions send 20 MB requests.)"""
    topic = unique_topic("send-path")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=40)
    async with AIOProducer(
        bootstrap_servers=broker.bootstrap, linger_ms=60_000, max_request_size=8_000
    ) as producer:
        await producer.partitions_for(topic)
        client = producer._client
        start_request, request = client.start_request, client.request
        written: list[list[int]] = []  # each Produce request's partitions, in write order
        sizes: list[int] = []  # and its record bytes

        def note(body: Any) -> None:
            written.append([p.index for t in body.topic_data for p in t.partition_data])
            sizes.append(sum(len(p.records) for t in body.topic_data for p in t.partition_data))

        def spy_start(node_id: int, api_key: int, body: Any, **kwargs: Any) -> Any:
            started = start_request(node_id, api_key, body, **kwargs)
            if api_key == ApiKey.PRODUCE and started is not None:
                note(body)
            return started

        def spy_request(node_id: int, api_key: int, body: Any, **kwargs: Any) -> Any:
            if api_key == ApiKey.PRODUCE:
                note(body)
            return request(node_id, api_key, body, **kwargs)

        client.start_request = spy_start  # type: ignore[method-assign]
        client.request = spy_request  # type: ignore[method-assign]
        # One batch of about 1 KB in each of 40 partitions: 5 fit a request.
        handles = [producer.send_nowait(topic, b"x" * 900, partition=p) for p in range(40)]
        await producer.flush()
        offsets = [(await h).offset for h in handles if h is not None]
    assert len(offsets) == 40
    assert max(sizes) <= 8_000
    assert sorted(p for partitions in written for p in partitions) == list(range(40))
    assert all(len(partitions) <= 8 for partitions in written) and len(written) >= 5
    # In the order the partitions' batches closed: every request takes the next ones.
    assert [p for partitions in written for p in partitions] == list(range(40))


async def test_send_raises_as_send_nowait_does(broker: BrokerProcess) -> None:
    topic = unique_topic("send-errors")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=1)
    async with AIOProducer(
        bootstrap_servers=broker.bootstrap, max_request_size=2000, max_block_ms=2000
    ) as producer:
        await producer.partitions_for(topic)
        big = b"x" * 2000
        with pytest.raises(MessageTooLargeError):
            await producer.send(topic, big)
        with pytest.raises(MessageTooLargeError):
            producer.send_nowait(topic, big)
        with pytest.raises(MessageTooLargeError):
            await producer.send(topic, b"x", key=big)
        with pytest.raises(UnknownTopicOrPartitionError):
            await producer.send(topic, b"x", partition=5)
        assert producer.send_nowait(topic, b"x", partition=5) is None
        # Nothing of the refused records was queued.
        metadata = await (await producer.send(topic, b"ok"))
        assert metadata.offset == 0
