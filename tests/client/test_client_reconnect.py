"""The client across a broker restart: a producer keeps sending while the broker stops and
starts again, a consumer keeps reading, and every acknowledged record is there afterwards
at the offset its delivery future reported."""

from __future__ import annotations

import asyncio

from broker_process import BrokerFactory
from client_helpers import unique_topic
from client_suite import TIMEOUT_S

from josefk.client import (
    AIOAdmin,
    AIOConsumer,
    AIOProducer,
    ConsumerRecord,
    RecordMetadata,
    TopicPartition,
)

RESTART_TIMEOUT_S = 60.0


async def test_producer_and_consumer_recover_from_a_restart(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    topic = unique_topic("restart")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=2)
    settings = {
        "bootstrap_servers": broker.bootstrap,
        "request_timeout_ms": 5_000,
        "reconnect_backoff_ms": 20,
        "reconnect_backoff_max_ms": 200,
        "retry_backoff_ms": 20,
    }
    producer = AIOProducer(
        linger_ms=2, delivery_timeout_ms=int(RESTART_TIMEOUT_S * 1000), **settings
    )
    consumer = AIOConsumer(auto_offset_reset="earliest", fetch_max_wait_ms=100, **settings)
    await producer.start()
    await consumer.start()
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    consumer.assign(tps)
    consumed: list[ConsumerRecord] = []
    stop_consuming = asyncio.Event()
    progress = asyncio.Event()

    async def consume_all() -> None:
        while not stop_consuming.is_set():
            for records in (await consumer.getmany(timeout_ms=100)).values():
                consumed.extend(records)
                progress.set()

    reader = asyncio.create_task(consume_all())
    try:
        futures: list[asyncio.Future[RecordMetadata]] = []
        values: list[bytes] = []

        async def send(count: int) -> None:
            for _ in range(count):
                value = f"v{len(values)}".encode()
                values.append(value)
                futures.append(await producer.send(topic, value, partition=len(values) % 2))

        await send(200)
        await asyncio.gather(*futures)
        restart = asyncio.create_task(asyncio.to_thread(broker.restart))
        await send(300)
        async with asyncio.timeout(RESTART_TIMEOUT_S):
            await restart
            await send(100)
            delivered = await asyncio.gather(*futures)
        assert broker.bootstrap == settings["bootstrap_servers"], "the broker changed port"
        # Every acknowledged record is where its future said, in send order per partition.
        by_position: dict[tuple[int, int], bytes] = {}
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                progress.clear()
                by_position = {(r.partition, r.offset): r.value or b"" for r in consumed}
                if all((d.partition, d.offset) in by_position for d in delivered):
                    break
                await progress.wait()
        for value, meta in zip(values, delivered, strict=True):
            assert by_position[(meta.partition, meta.offset)] == value
        for partition in (0, 1):
            offsets = [r.offset for r in consumed if r.partition == partition]
            assert offsets == sorted(set(offsets)), "the consumer skipped back or repeated"
            assert offsets[0] == 0 and offsets == list(range(len(offsets)))
    finally:
        stop_consuming.set()
        await reader
        await producer.close()
        await consumer.close()


async def test_group_member_recovers_from_a_restart(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings=["group.initial.rebalance.delay.ms=0"])
    topic = unique_topic("restart-group")
    group = unique_topic("g")
    settings = {
        "bootstrap_servers": broker.bootstrap,
        "request_timeout_ms": 5_000,
        "reconnect_backoff_ms": 20,
        "reconnect_backoff_max_ms": 200,
        "retry_backoff_ms": 20,
    }
    async with AIOProducer(linger_ms=1, **settings) as producer:
        first = [await producer.send(topic, f"a{i}".encode(), partition=0) for i in range(50)]
        await asyncio.gather(*first)
    consumer = AIOConsumer(
        topic,
        group_id=group,
        auto_offset_reset="earliest",
        heartbeat_interval_ms=100,
        session_timeout_ms=10_000,
        fetch_max_wait_ms=100,
        enable_auto_commit=False,
        **settings,
    )
    await consumer.start()
    try:
        got: list[ConsumerRecord] = []
        async with asyncio.timeout(TIMEOUT_S):
            while len(got) < 50:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(records)
        await consumer.commit()
        await asyncio.to_thread(broker.restart)
        async with AIOProducer(linger_ms=1, **settings) as producer:
            second = [await producer.send(topic, f"b{i}".encode(), partition=0) for i in range(50)]
            await asyncio.gather(*second)
        async with asyncio.timeout(RESTART_TIMEOUT_S):
            while len(got) < 100:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(records)
        # The member rejoined if it had to and resumed from its committed offset: every
        # record once, in order.
        assert [r.offset for r in got] == list(range(100))
        assert [r.value for r in got[50:]] == [f"b{i}".encode() for i in range(50)]
        assert consumer.assignment() == {TopicPartition(topic, 0)}
        await consumer.commit()
        assert await consumer.committed(TopicPartition(topic, 0)) == 100
    finally:
        await consumer.close()
