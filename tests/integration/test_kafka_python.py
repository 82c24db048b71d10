"""kafka-python 3.x against a real ``josefk serve``: producer, assign/seek consumer, admin.

kafka-python negotiates versions from ApiVersions and uses flexible versions everywhere it can,
so it exercises a different slice of the protocol than librdkafka.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from broker_process import BrokerProcess
from client_helpers import (
    BASE_TIMESTAMP_MS,
    CODECS,
    TestMessage,
    assert_same_messages,
    ck_consume,
    ck_create_topic,
    ck_produce,
    from_confluent,
    make_messages,
    unique_topic,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

pytestmark = pytest.mark.timeout(120)

TIMEOUT_S = 20.0
TIMEOUT_MS = int(TIMEOUT_S * 1000)


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS, client_id="kp-admin"
    )
    yield client
    client.close()


def kp_produce(
    broker: BrokerProcess,
    topic: str,
    messages: list[TestMessage],
    *,
    acks: int | str = 1,
    codec: str = "none",
    partition: int = 0,
) -> list[int]:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        enable_idempotence=False,
        acks=acks,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        request_timeout_ms=TIMEOUT_MS,
        max_block_ms=TIMEOUT_MS,
    )
    try:
        futures = [
            producer.send(
                topic,
                key=m.key,
                value=m.value,
                headers=list(m.headers),
                partition=partition,
                timestamp_ms=m.timestamp,
            )
            for m in messages
        ]
        producer.flush(timeout=TIMEOUT_S)
        return [future.get(timeout=TIMEOUT_S).offset for future in futures]
    finally:
        producer.close(timeout=TIMEOUT_S)


def kp_consume(
    broker: BrokerProcess, topic: str, *, count: int, offset: int | None = None, partition: int = 0
) -> list[TestMessage]:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=TIMEOUT_MS + 5000,
        fetch_max_wait_ms=100,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if offset is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, offset)
        got: list[TestMessage] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [TestMessage(r.key, r.value, tuple(r.headers), r.timestamp) for r in records]
        assert len(got) == count, f"kafka-python consumed {len(got)} of {count} from {topic}"
        return got
    finally:
        consumer.close()


def test_admin_create_describe_delete(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic = unique_topic("kp-admin")
    admin.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=2,
                replication_factor=1,
                topic_configs={"retention.ms": "7200000", "cleanup.policy": "delete"},
            )
        ],
        timeout_ms=TIMEOUT_MS,
    )
    assert topic in admin.list_topics()
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
    )
    text = repr(described)
    assert "retention.ms" in text and "7200000" in text
    admin.create_partitions({topic: NewPartitions(total_count=3)})
    # Confirmed through librdkafka's view of the metadata.
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(
        topic=topic, timeout=TIMEOUT_S
    )
    assert len(metadata.topics[topic].partitions) == 3
    admin.delete_topics([topic], timeout_ms=TIMEOUT_MS)
    assert topic not in admin.list_topics()


def test_admin_describe_cluster_and_log_dirs(
    broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    topic = unique_topic("kp-logdirs")
    ck_create_topic(broker.bootstrap, topic)
    kp_produce(broker, topic, make_messages(10))
    cluster = admin.describe_cluster()
    assert [b["broker_id"] for b in cluster["brokers"]] == [1]
    assert cluster["controller_id"] == 1
    log_dirs = admin.describe_log_dirs()
    text = repr(log_dirs)
    assert topic in text
    assert str(broker.data_dir) in text


@pytest.mark.parametrize("codec", CODECS)
def test_produce_codec_and_consume(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"kp-{codec}")
    ck_create_topic(broker.bootstrap, topic)
    sent = make_messages(200, tag=f"kp{codec}", value_size=250)
    offsets = kp_produce(broker, topic, sent, acks="all", codec=codec)
    assert offsets == list(range(200))
    assert_same_messages(kp_consume(broker, topic, count=200), sent)
    # librdkafka decodes kafka-python's batches to the same records.
    assert_same_messages(
        [from_confluent(m) for m in ck_consume(broker.bootstrap, topic, count=200)], sent
    )


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_acks(broker: BrokerProcess, acks: int) -> None:
    topic = unique_topic(f"kp-acks{acks}")
    ck_create_topic(broker.bootstrap, topic)
    sent = make_messages(50, tag=f"acks{acks}")
    offsets = kp_produce(broker, topic, sent, acks=acks)
    if acks != 0:
        assert offsets == list(range(50))
    assert_same_messages(kp_consume(broker, topic, count=50), sent)


def test_seek_to_offset_and_timestamp(broker: BrokerProcess) -> None:
    topic = unique_topic("kp-seek")
    sent = make_messages(40)
    kp_produce(broker, topic, sent)
    assert_same_messages(kp_consume(broker, topic, offset=33, count=7), sent[33:])
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS + 5000
    )
    try:
        tp = TopicPartition(topic, 0)
        found = consumer.offsets_for_times({tp: BASE_TIMESTAMP_MS + 20_500})[tp]
        assert found is not None and found.offset == 21
        assert found.timestamp == BASE_TIMESTAMP_MS + 21_000
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 40}
    finally:
        consumer.close()


def test_incremental_fetch_sessions_across_partitions(broker: BrokerProcess) -> None:
    """kafka-python uses KIP-227 fetch sessions: partitions with new data appear in
    incremental fetches while the others stay in the session; nothing is lost or repeated."""
    topic = unique_topic("kp-sessions")
    ck_create_topic(broker.bootstrap, topic, partitions=3)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=200,
        request_timeout_ms=TIMEOUT_MS + 5000,
    )
    expected: dict[int, list[TestMessage]] = {0: [], 1: [], 2: []}
    got: dict[int, list[TestMessage]] = {0: [], 1: [], 2: []}
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        for round_ in range(9):
            partition = (round_ * 2) % 3
            batch = make_messages(10, tag=f"r{round_}", base_timestamp=BASE_TIMESTAMP_MS + round_)
            ck_produce(broker.bootstrap, topic, batch, partition=partition)
            expected[partition] += batch
            deadline = time.monotonic() + TIMEOUT_S
            while got != expected and time.monotonic() < deadline:
                for tp, records in consumer.poll(timeout_ms=500).items():
                    got[tp.partition] += [
                        TestMessage(r.key, r.value, tuple(r.headers), r.timestamp) for r in records
                    ]
            for p in range(3):
                assert_same_messages(got[p], expected[p])
    finally:
        consumer.close()


def test_admin_alter_configs_and_delete_records(
    broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    topic = unique_topic("kp-alter")
    sent = make_messages(12)
    kp_produce(broker, topic, sent)
    admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "5400000"})]
    )
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert "5400000" in repr(described)
    admin.delete_records({TopicPartition(topic, 0): 5})
    assert_same_messages(kp_consume(broker, topic, count=7), sent[5:])
