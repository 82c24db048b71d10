"""Leader changes: a producer and a consumer whose partition leader moves to another broker
get NOT_LEADER_OR_FOLLOWER, refresh the metadata and carry on with the new leader, losing
and repeating nothing. Runs against the scripted two-broker FakeCluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from fake_cluster import FakeCluster

from josefk.client import AIOConsumer, AIOProducer, ConsumerRecord, TopicPartition
from josefk.protocol import ApiKey, ErrorCode
from josefk.records import RecordBatch

TIMEOUT_S = 20.0


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    fake = FakeCluster("moving")
    await fake.start()
    yield fake
    await fake.close()


async def _read(consumer: AIOConsumer, count: int) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    async with asyncio.timeout(TIMEOUT_S):
        while len(got) < count:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(records)
    return got


async def test_producer_and_consumer_follow_the_leader(cluster: FakeCluster) -> None:
    settings = {"bootstrap_servers": cluster.bootstrap, "retry_backoff_ms": 10}
    async with (
        AIOProducer(linger_ms=1, **settings) as producer,
        AIOConsumer(auto_offset_reset="earliest", fetch_max_wait_ms=10, **settings) as consumer,
    ):
        consumer.assign([TopicPartition("moving", 0)])
        first = [await producer.send("moving", f"a{i}".encode(), partition=0) for i in range(10)]
        assert [m.offset for m in await asyncio.gather(*first)] == list(range(10))
        assert [r.value for r in await _read(consumer, 10)] == [f"a{i}".encode() for i in range(10)]
        assert {n for n, k in cluster.requests if k == ApiKey.PRODUCE} == {1}

        cluster.leader = 2
        second = [await producer.send("moving", f"b{i}".encode(), partition=0) for i in range(10)]
        assert [m.offset for m in await asyncio.gather(*second)] == list(range(10, 20))
        got = await _read(consumer, 10)
        assert [r.offset for r in got] == list(range(10, 20))
        assert [r.value for r in got] == [f"b{i}".encode() for i in range(10)]

    assert cluster.not_leader_answers >= 1
    assert (2, ApiKey.PRODUCE) in cluster.requests and (2, ApiKey.FETCH) in cluster.requests
    assert cluster.log_end_offset == 20


async def test_sequence_error_bumps_the_epoch_and_renumbers() -> None:
    cluster = FakeCluster("bumped", idempotent=True)
    await cluster.start()
    try:
        async with AIOProducer(
            bootstrap_servers=cluster.bootstrap, linger_ms=1, retry_backoff_ms=10
        ) as producer:
            assert (producer.producer_id, producer.producer_epoch) == (77, 0)
            first = [await producer.send("bumped", f"a{i}".encode(), partition=0) for i in range(5)]
            await asyncio.gather(*first)
            cluster.fail_next_produce = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            second = [
                await producer.send("bumped", f"b{i}".encode(), partition=0) for i in range(5)
            ]
            delivered = await asyncio.gather(*second)
            assert [m.offset for m in delivered] == list(range(5, 10))
            assert producer.producer_epoch == 1
            third = await producer.send_and_wait("bumped", b"c", partition=0)
            assert third.offset == 10
    finally:
        await cluster.close()
    headers = [RecordBatch(memoryview(b)) for b in cluster.batches]
    assert (headers[0].producer_id, headers[0].producer_epoch) == (77, 0)
    assert (headers[-1].producer_id, headers[-1].producer_epoch) == (77, 1)
    # Under the new epoch the sequences start again at 0 and follow on.
    renumbered = [h for h in headers if h.producer_epoch == 1]
    assert renumbered[0].base_sequence == 0
    expected = 0
    for h in renumbered:
        assert h.base_sequence == expected
        expected += h.record_count
    assert all(h.is_valid() for h in headers)


async def test_a_new_leader_is_tried_without_waiting_out_the_backoff(
    cluster: FakeCluster,
) -> None:
    # A backoff far longer than the test may run: only the leader change can release it
    # (KIP-951). Before, the producer waited it out on the new leader too.
    settings = {
        "bootstrap_servers": cluster.bootstrap,
        "retry_backoff_ms": 120_000,
        "retry_backoff_max_ms": 120_000,
    }
    async with AIOProducer(linger_ms=1, **settings) as producer:
        first = await producer.send_and_wait("moving", b"a", partition=0)
        assert first.offset == 0
        cluster.leader = 2
        async with asyncio.timeout(TIMEOUT_S):
            second = await producer.send_and_wait("moving", b"b", partition=0)
    assert second.offset == 1
    assert cluster.not_leader_answers >= 1


def test_retry_backoff_grows_to_its_maximum() -> None:
    from josefk.client.producer import retry_backoff_s

    assert [retry_backoff_s(n, 100, 1000) for n in range(1, 7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert retry_backoff_s(3, 500, 100) == 0.5  # a maximum below the base is the base
