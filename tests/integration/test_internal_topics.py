"""The broker protects its internal topics: ``__consumer_offsets`` cannot be deleted (by name
or by id), given partitions, truncated with DeleteRecords, reconfigured, written or made by a
client; each attempt is refused with INVALID_TOPIC_EXCEPTION (17), and after a restart the
topic and every committed offset are still there. Describing and reading it stay allowed.

Driven with confluent-kafka's AdminClient, kafka-python's admin, and josefk's own protocol
connection where no other client can send the request (DeleteTopics by topic id).
"""

from __future__ import annotations

import base64
import time
import uuid
import warnings
from typing import Any

import pytest
from broker_process import BrokerProcess
from client_helpers import (
    CLIENT_TIMEOUT_S,
    assert_delivered,
    ck_admin,
    ck_config,
    ck_consumer,
    ck_create_topic,
    ck_produce,
    ck_topic_id,
    ck_watermarks,
    make_messages,
    unique_topic,
)
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.errors import InvalidTopicError

from josefk.client.connection import BrokerConnection
from josefk.protocol.api import ApiKey, request_class

pytestmark = pytest.mark.timeout(240)

T = CLIENT_TIMEOUT_S
OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 3
INVALID_TOPIC = KafkaError.TOPIC_EXCEPTION  # 17
TOPIC_ALREADY_EXISTS = KafkaError.TOPIC_ALREADY_EXISTS  # 36
DeleteTopicsRequest = request_class(ApiKey.DELETE_TOPICS)


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = ck_consumer(bootstrap, group_id=group)
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = ck_consumer(bootstrap, group_id=group)
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=T)
        return int(tp.offset)
    finally:
        consumer.close()


def refused_code(future: Any) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=T)
    error = info.value.args[0]
    assert isinstance(error, KafkaError)
    return int(error.code())


def refused_message(future: Any) -> str:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=T)
    return str(info.value.args[0].str())


def offsets_watermarks(bootstrap: str) -> list[tuple[int, int]]:
    return [ck_watermarks(bootstrap, OFFSETS, p) for p in range(OFFSETS_PARTITIONS)]


def read_offsets_topic(bootstrap: str, wanted: int) -> int:
    """Read ``__consumer_offsets`` like any topic until ``wanted`` records came back."""
    consumer: Consumer = ck_consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(OFFSETS, p, 0) for p in range(OFFSETS_PARTITIONS)])
        got = 0
        deadline = time.monotonic() + T
        while got < wanted and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=0.5):
                if msg.error() is None:
                    got += 1
                elif msg.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(msg.error())
        return got
    finally:
        consumer.close()


async def delete_by_topic_id(broker: BrokerProcess, topic_id: uuid.UUID) -> Any:
    conn = await BrokerConnection.open(
        broker.host, broker.port, node_id=-1, client_id="internal-test", timeout_s=10
    )
    try:
        body = DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=topic_id)],
            timeout_ms=10_000,
        )
        response = await conn.request(ApiKey.DELETE_TOPICS, body, version=6)
    finally:
        conn.close()
    [result] = response.responses
    return result


def attempt_with_confluent(bootstrap: str) -> None:
    admin = ck_admin(bootstrap)
    deleted = admin.delete_topics([OFFSETS], operation_timeout=T, request_timeout=T)
    assert refused_code(deleted[OFFSETS]) == INVALID_TOPIC

    grown = admin.create_partitions(
        [NewPartitions(OFFSETS, OFFSETS_PARTITIONS + 5)], operation_timeout=T, request_timeout=T
    )
    assert "internal topic" in refused_message(grown[OFFSETS])

    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        OFFSETS,
        set_config={"cleanup.policy": "delete", "retention.ms": "1"},
    )
    # The legacy AlterConfigs on purpose (tools still send it); librdkafka's binding warns.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        [altered] = admin.alter_configs([resource], request_timeout=T).values()
    assert refused_code(altered) == INVALID_TOPIC

    incremental = ConfigResource(
        ConfigResource.Type.TOPIC,
        OFFSETS,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    [altered] = admin.incremental_alter_configs([incremental], request_timeout=T).values()
    assert refused_code(altered) == INVALID_TOPIC

    truncated = admin.delete_records(
        [TopicPartition(OFFSETS, p, -1) for p in range(OFFSETS_PARTITIONS)], request_timeout=T
    )
    for future in truncated.values():
        assert refused_code(future) == INVALID_TOPIC

    # The transaction log is internal too, and the broker made it at start-up (with the
    # configs it needs): a client's create finds it there, as on Kafka.
    made = admin.create_topics(
        [NewTopic("__transaction_state", num_partitions=1, replication_factor=1)],
        operation_timeout=T,
        request_timeout=T,
    )
    assert refused_code(made["__transaction_state"]) == TOPIC_ALREADY_EXISTS

    # A plain producer cannot write (a tombstone would erase a group's offsets).
    producer = Producer(ck_config(bootstrap, message_timeout_ms=10_000, retries=0))
    errors: list[KafkaError] = []
    producer.produce(
        OFFSETS, value=b"garbage", partition=0, on_delivery=lambda err, _msg: errors.append(err)
    )
    assert producer.flush(T) == 0
    assert [e.code() for e in errors] == [INVALID_TOPIC]


def attempt_with_kafka_python(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(T * 1000))
    try:
        with pytest.raises(InvalidTopicError):
            admin.delete_topics([OFFSETS])
        with pytest.raises(InvalidTopicError):
            admin.create_partitions({OFFSETS: KpNewPartitions(OFFSETS_PARTITIONS + 1)})
        with pytest.raises(InvalidTopicError):
            admin.delete_records({KpTopicPartition(OFFSETS, 0): -1})
        result = admin.alter_configs(
            [
                KpConfigResource(
                    KpConfigResourceType.TOPIC, OFFSETS, configs={"cleanup.policy": "delete"}
                )
            ]
        )
        assert "INVALID_TOPIC" in repr(result) or "17" in repr(result)
    finally:
        admin.close()


async def test_internal_topic_survives_every_attempt_to_destroy_it(broker_factory: Any) -> None:
    broker = broker_factory(settings=[f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}"])
    topic = unique_topic("guarded")
    ck_create_topic(broker.bootstrap, topic)
    assert_delivered(ck_produce(broker.bootstrap, topic, make_messages(5)))
    commit(broker.bootstrap, "keeper", topic, 4)
    assert committed(broker.bootstrap, "keeper", topic) == 4
    offsets_id = ck_topic_id(broker.bootstrap, OFFSETS)
    before = offsets_watermarks(broker.bootstrap)

    attempt_with_confluent(broker.bootstrap)
    attempt_with_kafka_python(broker.bootstrap)
    by_id = await delete_by_topic_id(broker, uuid.UUID(bytes=_decode_id(offsets_id)))
    assert by_id.error_code == INVALID_TOPIC
    assert "internal topic" in by_id.error_message

    # Describing and reading stay allowed.
    admin = ck_admin(broker.bootstrap)
    [described] = admin.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)], request_timeout=T
    ).values()
    assert described.result(timeout=T)["cleanup.policy"].value == "compact"
    assert read_offsets_topic(broker.bootstrap, 1) >= 1

    broker.restart()
    assert committed(broker.bootstrap, "keeper", topic) == 4
    assert ck_topic_id(broker.bootstrap, OFFSETS) == offsets_id
    assert offsets_watermarks(broker.bootstrap) == before
    admin = ck_admin(broker.bootstrap)
    metadata = admin.list_topics(timeout=T)
    assert len(metadata.topics[OFFSETS].partitions) == OFFSETS_PARTITIONS
    # The broker's own transaction log, as it made it (no client's attempt changed it).
    assert len(metadata.topics["__transaction_state"].partitions) == 50
    [described] = admin.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)], request_timeout=T
    ).values()
    assert described.result(timeout=T)["cleanup.policy"].value == "compact"


def _decode_id(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_ordinary_topics_are_still_deleted(broker: BrokerProcess) -> None:
    """The guard is for internal topics only."""
    topic = unique_topic("plain")
    ck_create_topic(broker.bootstrap, topic, partitions=2)
    admin = ck_admin(broker.bootstrap)
    admin.delete_topics([topic], operation_timeout=T, request_timeout=T)[topic].result(timeout=T)
    assert topic not in admin.list_topics(timeout=T).topics
