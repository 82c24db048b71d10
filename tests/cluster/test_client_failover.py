"""kafka-python, aiokafka and josefk's own client fail over without restarts: each produces
with acks=all to an RF=3 topic while the leader of a partition is SIGKILLed, then a group of
the same client reads the topic from the beginning. Every acknowledged record must be read,
once, in the order of its partition's acknowledgements (librdkafka's failover is in
test_replication_e2e.py; the history check is history.py's)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD, SKIP_REASON
from history import History

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]
PARTITIONS = 3
PER_PHASE = 150


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("failover"),
        settings=["replica.lag.time.max.ms=3000", "offsets.topic.num.partitions=6"],
    ) as running:
        yield running


def new_topic(cluster: LocalCluster) -> str:
    name = f"failover-{uuid.uuid4().hex[:8]}"
    topic = NewTopic(
        name,
        num_partitions=PARTITIONS,
        replication_factor=3,
        config={"min.insync.replicas": "2"},
    )
    admin = cluster.admin()
    for future in admin.create_topics([topic]).values():
        future.result(timeout=30)
    wait_for(
        "every partition led with a full ISR",
        lambda: all(
            leader > 0 and len(isr) == 3
            for leader, _, isr in cluster.partition_states(name).values()
        ),
    )
    return name


def kill_leader(cluster: LocalCluster, topic: str) -> int:
    leader = cluster.leader_of(topic, 0)
    cluster.brokers[leader].kill()
    wait_for(
        "a new leader of partition 0",
        lambda: cluster.leader_of(topic, 0) not in (leader, -1),
    )
    return leader


def run_scenario(
    cluster: LocalCluster,
    produce: Callable[[str, list[tuple[int, bytes]]], list[tuple[int, int, bytes]]],
    consume: Callable[[str, int], list[tuple[int, int, bytes]]],
) -> History:
    """Produce a phase, kill partition 0's leader, produce another, restart it, read all."""
    topic = new_topic(cluster)
    history = History()

    def phase(label: str) -> None:
        records = [(i % PARTITIONS, f"{label}-{i}".encode()) for i in range(PER_PHASE)]
        history.sent.extend(value for _, value in records)
        history.acked.extend(produce(topic, records))

    phase("before")
    killed = kill_leader(cluster, topic)
    phase("leader-killed")
    cluster.brokers[killed].start()
    history.polled.extend(consume(topic, len(history.acked)))
    return history


# -- kafka-python ------------------------------------------------------------------------


def test_kafka_python_fails_over(cluster: LocalCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    def produce(topic: str, records: list[tuple[int, bytes]]) -> list[tuple[int, int, bytes]]:
        producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap.split(","),
            acks="all",
            retries=50,
            retry_backoff_ms=200,
            request_timeout_ms=10_000,
        )
        futures = [(value, producer.send(topic, value, partition=p)) for p, value in records]
        acked = []
        for value, future in futures:
            try:
                metadata = future.get(timeout=120)
            except Exception:  # noqa: BLE001  an unacknowledged record is allowed to fail
                continue
            acked.append((metadata.partition, metadata.offset, value))
        producer.close()
        return acked

    def consume(topic: str, count: int) -> list[tuple[int, int, bytes]]:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=cluster.bootstrap.split(","),
            group_id=f"kp-{uuid.uuid4().hex[:6]}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        polled: list[tuple[int, int, bytes]] = []
        try:
            wait_for(
                f"{count} records",
                lambda: (
                    polled.extend(
                        (r.partition, r.offset, r.value)
                        for records in consumer.poll(timeout_ms=500).values()
                        for r in records
                    )
                    or len(polled) >= count
                ),
                timeout=120,
            )
        finally:
            consumer.close()
        return polled

    run_scenario(cluster, produce, consume).check()


async def _acked(futures: list[tuple[bytes, Any]]) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of each delivery future that succeeds within its timeout."""
    acked = []
    for value, future in futures:
        try:
            metadata = await asyncio.wait_for(asyncio.ensure_future(future), 120)
        except Exception:  # noqa: BLE001  an unacknowledged record is allowed to fail
            continue
        acked.append((metadata.partition, metadata.offset, value))
    return acked


async def _drain(consumer: Any, count: int) -> list[tuple[int, int, bytes]]:
    """``getmany`` (aiokafka's and josefk's alike) until ``count`` records came back."""
    polled: list[tuple[int, int, bytes]] = []
    async with asyncio.timeout(120):
        while len(polled) < count:
            batches = await consumer.getmany(timeout_ms=500)
            polled.extend((r.partition, r.offset, r.value) for rs in batches.values() for r in rs)
    return polled


# -- aiokafka ------------------------------------------------------------------------------


def test_aiokafka_fails_over(cluster: LocalCluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def produce_async(
        topic: str, records: list[tuple[int, bytes]]
    ) -> list[tuple[int, int, bytes]]:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap, acks="all", request_timeout_ms=10_000
        )
        await producer.start()
        try:
            return await _acked(
                [(v, await producer.send(topic, v, partition=p)) for p, v in records]
            )
        finally:
            await producer.stop()

    async def consume_async(topic: str, count: int) -> list[tuple[int, int, bytes]]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=cluster.bootstrap,
            group_id=f"aio-{uuid.uuid4().hex[:6]}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            return await _drain(consumer, count)
        finally:
            await consumer.stop()

    run_scenario(
        cluster,
        lambda topic, records: asyncio.run(produce_async(topic, records)),
        lambda topic, count: asyncio.run(consume_async(topic, count)),
    ).check()


# -- josefk's own client -------------------------------------------------------------------


def test_josefk_client_fails_over(cluster: LocalCluster) -> None:
    from josefk.client import AIOConsumer, AIOProducer

    async def produce_async(
        topic: str, records: list[tuple[int, bytes]]
    ) -> list[tuple[int, int, bytes]]:
        producer = AIOProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        await producer.start()
        try:
            return await _acked(
                [(v, await producer.send(topic, v, partition=p)) for p, v in records]
            )
        finally:
            await producer.close()

    async def consume_async(topic: str, count: int) -> list[tuple[int, int, bytes]]:
        consumer = AIOConsumer(
            bootstrap_servers=cluster.bootstrap,
            group_id=f"jk-{uuid.uuid4().hex[:6]}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        consumer.subscribe([topic])
        try:
            return await _drain(consumer, count)
        finally:
            await consumer.close()

    run_scenario(
        cluster,
        lambda topic, records: asyncio.run(produce_async(topic, records)),
        lambda topic, count: asyncio.run(consume_async(topic, count)),
    ).check()
