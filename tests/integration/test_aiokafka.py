"""aiokafka against a real ``josefk serve``: producer per codec, assign/seek consumer, admin."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from broker_process import BrokerProcess
from client_helpers import (
    BASE_TIMESTAMP_MS,
    CODECS,
    TestMessage,
    assert_same_messages,
    ck_consume,
    from_confluent,
    make_messages,
    unique_topic,
)

pytestmark = pytest.mark.timeout(120)

TIMEOUT_S = 20.0
TIMEOUT_MS = int(TIMEOUT_S * 1000)


async def aio_produce(
    broker: BrokerProcess,
    topic: str,
    messages: list[TestMessage],
    *,
    acks: int | str = 1,
    codec: str = "none",
) -> list[int]:
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap,
        enable_idempotence=False,
        acks=acks,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        request_timeout_ms=TIMEOUT_MS,
    )
    await asyncio.wait_for(producer.start(), TIMEOUT_S)
    try:
        futures = [
            await producer.send(
                topic,
                key=m.key,
                value=m.value,
                partition=0,
                timestamp_ms=m.timestamp,
                headers=list(m.headers),
            )
            for m in messages
        ]
        metadata = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
        # With acks=0 there is no answer to carry an offset.
        return [-1 if md is None else md.offset for md in metadata]
    finally:
        await asyncio.wait_for(producer.stop(), TIMEOUT_S)


async def aio_consume(
    broker: BrokerProcess, topic: str, *, count: int, offset: int | None = None
) -> list[TestMessage]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=TIMEOUT_MS + 5000,
    )
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        if offset is None:
            await asyncio.wait_for(consumer.seek_to_beginning(tp), TIMEOUT_S)
        else:
            consumer.seek(tp, offset)
        got: list[TestMessage] = []

        async def read() -> None:
            while len(got) < count:
                batches = await consumer.getmany(tp, timeout_ms=500)
                for records in batches.values():
                    got.extend(
                        TestMessage(r.key, r.value, tuple(r.headers), r.timestamp) for r in records
                    )

        try:
            await asyncio.wait_for(read(), TIMEOUT_S)
        except TimeoutError:
            pytest.fail(f"aiokafka consumed {len(got)} of {count} from {topic}")
        return got
    finally:
        await asyncio.wait_for(consumer.stop(), TIMEOUT_S)


async def test_admin_create_topic(broker: BrokerProcess) -> None:
    topic = unique_topic("aio-admin")
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    await asyncio.wait_for(admin.start(), TIMEOUT_S)
    try:
        await asyncio.wait_for(
            admin.create_topics(
                [NewTopic(topic, num_partitions=2, replication_factor=1)], timeout_ms=TIMEOUT_MS
            ),
            TIMEOUT_S,
        )
        topics = await asyncio.wait_for(admin.list_topics(), TIMEOUT_S)
        assert topic in topics
        await asyncio.wait_for(admin.delete_topics([topic], timeout_ms=TIMEOUT_MS), TIMEOUT_S)
        topics = await asyncio.wait_for(admin.list_topics(), TIMEOUT_S)
        assert topic not in topics
    finally:
        await admin.close()


@pytest.mark.parametrize("codec", CODECS)
async def test_produce_codec_and_consume(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"aio-{codec}")
    sent = make_messages(200, tag=f"aio{codec}", value_size=250)
    offsets = await aio_produce(broker, topic, sent, acks="all", codec=codec)
    assert offsets == list(range(200))
    assert_same_messages(await aio_consume(broker, topic, count=200), sent)
    got = await asyncio.to_thread(ck_consume, broker.bootstrap, topic, count=200)
    assert_same_messages([from_confluent(m) for m in got], sent)


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks(broker: BrokerProcess, acks: int | str) -> None:
    topic = unique_topic(f"aio-acks{acks}")
    sent = make_messages(30, tag=f"aioacks{acks}")
    offsets = await aio_produce(broker, topic, sent, acks=acks)
    if acks != 0:
        assert offsets == list(range(30))
    assert_same_messages(await aio_consume(broker, topic, count=30), sent)


async def test_seek_and_offsets_for_times(broker: BrokerProcess) -> None:
    topic = unique_topic("aio-seek")
    sent = make_messages(25)
    await aio_produce(broker, topic, sent)
    assert_same_messages(await aio_consume(broker, topic, offset=12, count=13), sent[12:])
    consumer = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS + 5000
    )
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    try:
        tp = TopicPartition(topic, 0)
        found = await asyncio.wait_for(
            consumer.offsets_for_times({tp: BASE_TIMESTAMP_MS + 4_000}), TIMEOUT_S
        )
        assert found[tp] is not None and found[tp].offset == 4
        assert await asyncio.wait_for(consumer.end_offsets([tp]), TIMEOUT_S) == {tp: 25}
        assert await asyncio.wait_for(consumer.beginning_offsets([tp]), TIMEOUT_S) == {tp: 0}
    finally:
        await asyncio.wait_for(consumer.stop(), TIMEOUT_S)


async def test_admin_configs_partitions_and_delete_records(broker: BrokerProcess) -> None:
    topic = unique_topic("aio-admin-more")
    sent = make_messages(10)
    await aio_produce(broker, topic, sent)
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    await asyncio.wait_for(admin.start(), TIMEOUT_S)
    try:
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "3600000"})
        (altered,) = await asyncio.wait_for(admin.alter_configs([resource]), TIMEOUT_S)
        assert all(r[0] == 0 for r in altered.resources), altered
        (described,) = await asyncio.wait_for(
            admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]), TIMEOUT_S
        )
        assert "retention.ms" in repr(described) and "3600000" in repr(described)
        await asyncio.wait_for(
            admin.create_partitions({topic: NewPartitions(total_count=2)}), TIMEOUT_S
        )
        topics = await asyncio.wait_for(admin.describe_topics([topic]), TIMEOUT_S)
        assert len(topics[0]["partitions"]) == 2
        tp = TopicPartition(topic, 0)
        low = await asyncio.wait_for(
            admin.delete_records({tp: RecordsToDelete(before_offset=4)}), TIMEOUT_S
        )
        assert low == {tp: 4}
    finally:
        await admin.close()
    assert_same_messages(await aio_consume(broker, topic, count=6), sent[4:])
