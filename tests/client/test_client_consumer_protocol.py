"""josefk's own consumer with Kafka 4's consumer group protocol (``group_protocol=
"consumer"``, KIP-848) against a real broker: members share partitions, a newcomer takes its
share by incremental revocation (the others keep theirs), a confluent-kafka member of the
same protocol joins the same group, and no record is consumed twice with per-batch commits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from broker_process import BrokerProcess
from client_helpers import commit_record, unique_topic
from client_suite import TIMEOUT_S, start_module_broker
from confluent_kafka import Consumer

from josefk.client import (
    AIOAdmin,
    AIOConsumer,
    AIOProducer,
    ConsumerRebalanceListener,
    TopicPartition,
)

PARTITIONS = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from start_module_broker(
        tmp_path_factory,
        "kip848-client",
        [
            "group.consumer.heartbeat.interval.ms=200",
            "group.consumer.min.heartbeat.interval.ms=100",
            "group.consumer.session.timeout.ms=4000",
            "group.consumer.min.session.timeout.ms=1000",
        ],
    )


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.revoked: list[tuple[set[TopicPartition], set[TopicPartition]]] = []
        self.consumer: AIOConsumer | None = None

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        assert self.consumer is not None
        self.revoked.append((set(revoked), self.consumer.assignment()))


def member(bootstrap: str, group: str, topic: str) -> tuple[AIOConsumer, Recorder]:
    recorder = Recorder()
    consumer = AIOConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        group_protocol="consumer",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        rebalance_listener=recorder,
    )
    recorder.consumer = consumer
    return consumer, recorder


async def test_members_share_and_a_newcomer_takes_its_share_incrementally(
    broker: BrokerProcess,
) -> None:
    topic = unique_topic("kip848-own")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=PARTITIONS)
    total = 120
    async with AIOProducer(bootstrap_servers=broker.bootstrap) as producer:
        sent = [
            await producer.send(topic, f"{i}".encode(), partition=i % PARTITIONS)
            for i in range(total)
        ]
        await asyncio.gather(*sent)
    group = unique_topic("g")
    pairs = [member(broker.bootstrap, group, topic) for _ in range(2)]
    consumers = [c for c, _ in pairs]
    seen: list[tuple[int, int]] = []

    async def poll_all() -> None:
        results = await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
        for consumer, batch in zip(consumers, results, strict=True):
            for records in batch.values():
                seen.extend((r.partition, r.offset) for r in records)
            if batch:
                await consumer.commit()

    def settled(expected: int) -> bool:
        parts = [c.assignment() for c in consumers]
        flat = [tp for p in parts for tp in p]
        balanced = all(len(p) == PARTITIONS // expected for p in parts)
        return balanced and len(flat) == len(set(flat)) == PARTITIONS and len(parts) == expected

    for consumer in consumers:
        await consumer.start()
    confluent: Consumer | None = None
    try:
        async with asyncio.timeout(TIMEOUT_S):
            while not (settled(2) and len(seen) >= 40):
                await poll_all()
        before = [c.assignment() for c in consumers]
        for _, recorder in pairs:
            recorder.revoked.clear()
        third, recorder3 = member(broker.bootstrap, group, topic)
        await third.start()
        consumers.append(third)
        pairs.append((third, recorder3))
        async with asyncio.timeout(TIMEOUT_S):
            while not settled(3):
                await poll_all()
        for consumer, had in zip(consumers[:2], before, strict=True):
            assert consumer.assignment() < had
        for _, recorder in pairs[:2]:
            for revoked, held in recorder.revoked:
                assert revoked < held, "a revocation took all of a member's partitions"
        # A confluent-kafka member of the same protocol joins the same group.
        confluent = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
            }
        )
        confluent.subscribe([topic])

        def confluent_holds() -> bool:
            return bool(confluent.assignment()) if confluent is not None else False

        async with asyncio.timeout(TIMEOUT_S):
            while True:
                await poll_all()
                await asyncio.to_thread(confluent.poll, 0.05)
                mine = {tp for c in consumers for tp in c.assignment()}
                theirs = {TopicPartition(tp.topic, tp.partition) for tp in confluent.assignment()}
                if confluent_holds() and not mine & theirs and len(mine | theirs) == PARTITIONS:
                    break
        async with asyncio.timeout(TIMEOUT_S):
            while len(seen) < total:
                await poll_all()
                message = await asyncio.to_thread(confluent.poll, 0.05)
                if message is not None and message.error() is None:
                    seen.append((message.partition(), message.offset()))
                    await asyncio.to_thread(commit_record, confluent, message)
    finally:
        if confluent is not None:
            await asyncio.to_thread(confluent.close)
        for consumer in consumers:
            await consumer.close()
    assert len(seen) == len(set(seen)) == total, "a record was consumed twice"


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
async def test_assigned_partitions_are_auto_committed_under_either_protocol(
    broker: BrokerProcess, group_protocol: str
) -> None:
    # A consumer that assigns its partitions itself commits with generation -1 whatever its
    # group protocol; the KIP-848 member once skipped the commit for want of a member epoch.
    topic = unique_topic("kip848-assign")
    tp = TopicPartition(topic, 0)
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=1)
    async with AIOProducer(bootstrap_servers=broker.bootstrap) as producer:
        await asyncio.gather(
            *[await producer.send(topic, b"%d" % i, partition=0) for i in range(5)]
        )
    group = unique_topic("g-assign")
    consumer = AIOConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        group_protocol=group_protocol,
        auto_offset_reset="earliest",
        enable_auto_commit=True,
    )
    await consumer.start()
    consumed = 0
    try:
        consumer.assign([tp])
        async with asyncio.timeout(TIMEOUT_S):
            while consumed < 5:
                batch = await consumer.getmany(timeout_ms=50)
                consumed += sum(len(records) for records in batch.values())
    finally:
        await consumer.close()
    async with AIOConsumer(
        bootstrap_servers=broker.bootstrap, group_id=group, group_protocol=group_protocol
    ) as reader:
        assert await reader.committed(tp) == 5
