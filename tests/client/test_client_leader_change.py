"""Leader changes: a producer and a consumer whose partition leader moves to another broker
get NOT_LEADER_OR_FOLLOWER, refresh the metadata and carry on with the new leader, losing
and repeating nothing. Runs against the scripted two-broker FakeCluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from fake_cluster import FakeCluster

from josefk.client import AIOConsumer, AIOProducer, ConsumerRecord, TopicPartition
from josefk.protocol import ApiKey

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
