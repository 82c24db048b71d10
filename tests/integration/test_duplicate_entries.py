"""A request that names the same topic, partition or config resource more than once, against
a real ``josefk serve``: refused as Kafka refuses it, and the rest of the request carried out.

- CreateTopics, DeleteTopics (by name or by id) and CreatePartitions: the topic is answered
  once, INVALID_REQUEST "Duplicate topic name." (or id), and left as it was (Kafka's
  controller);
- ListOffsets: each place of a partition asked twice is INVALID_REQUEST (KafkaApis);
- AlterConfigs and IncrementalAlterConfigs: each place of a resource named twice is
  INVALID_REQUEST, none altered, and so is a resource naming a key twice
  (ConfigAdminManager).

A lax broker would hide such a request from a client's tests; these are the answers a client
meets against Apache Kafka.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_process import BrokerProcess
from client_helpers import (
    assert_delivered,
    ck_create_topic,
    ck_describe_configs,
    ck_produce,
    make_messages,
    unique_topic,
)
from confluent_kafka.admin import ConfigResource
from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

CreateTopics = request_class(ApiKey.CREATE_TOPICS)
DeleteTopics = request_class(ApiKey.DELETE_TOPICS)
CreatePartitions = request_class(ApiKey.CREATE_PARTITIONS)
ListOffsets = request_class(ApiKey.LIST_OFFSETS)
AlterConfigs = request_class(ApiKey.ALTER_CONFIGS)
IncrementalAlterConfigs = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
TOPIC_RESOURCE = 2
LATEST = -1
SET = 0


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    raw = RawClient(broker.bootstrap)
    yield raw
    raw.close()


def partition_counts(client: RawClient, names: list[str]) -> dict[str, int | None]:
    """Each topic's partition count from Metadata, None when the broker does not know it."""
    response = client.call(
        ApiKey.METADATA,
        12,
        topics=[request_class(ApiKey.METADATA).MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return {
        t.name: len(t.partitions) if t.error_code == ErrorCode.NONE else None
        for t in response.topics
    }


def test_create_topics_answers_a_topic_named_twice_once_and_creates_the_others(
    client: RawClient,
) -> None:
    twice, once = unique_topic("dup-create"), unique_topic("dup-create-once")
    response = client.call(
        ApiKey.CREATE_TOPICS,
        7,
        topics=[
            CreateTopics.CreatableTopic(name=twice, num_partitions=1, replication_factor=1),
            CreateTopics.CreatableTopic(name=once, num_partitions=2, replication_factor=1),
            CreateTopics.CreatableTopic(name=twice, num_partitions=3, replication_factor=1),
        ],
        timeout_ms=30_000,
    )
    got = [(t.name, t.error_code, t.error_message) for t in response.topics]
    assert got == [
        (twice, ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        (once, ErrorCode.NONE, None),
    ]
    assert partition_counts(client, [twice, once]) == {twice: None, once: 2}


def test_delete_topics_answers_a_topic_named_or_identified_twice_once_and_keeps_it(
    broker: BrokerProcess, client: RawClient
) -> None:
    by_name, by_id, deleted = (unique_topic(f"dup-delete-{n}") for n in ("name", "id", "other"))
    for name in (by_name, by_id, deleted):
        ck_create_topic(broker.bootstrap, name)
    metadata = client.call(
        ApiKey.METADATA,
        12,
        topics=[request_class(ApiKey.METADATA).MetadataRequestTopic(name=by_id)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    topic_id = metadata.topics[0].topic_id
    State = DeleteTopics.DeleteTopicState
    response = client.call(
        ApiKey.DELETE_TOPICS,
        6,
        topics=[
            State(name=by_name),
            State(topic_id=topic_id),
            State(name=deleted),
            State(name=by_name),
            State(topic_id=topic_id),
        ],
        timeout_ms=30_000,
    )
    got = sorted(
        (r.name or "", str(r.topic_id), r.error_code, r.error_message)
        for r in response.responses
        if r.name != deleted
    )
    zero = "00000000-0000-0000-0000-000000000000"
    assert got == [
        ("", str(topic_id), ErrorCode.INVALID_REQUEST, "Duplicate topic id."),
        (by_name, zero, ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
    ]
    [other] = [r for r in response.responses if r.name == deleted]
    assert other.error_code == ErrorCode.NONE
    assert partition_counts(client, [by_name, by_id, deleted]) == {
        by_name: 1,
        by_id: 1,
        deleted: None,
    }
    # Before v6 topics are named only; the rule is the same.
    old = client.call(ApiKey.DELETE_TOPICS, 5, topic_names=[by_name, by_name], timeout_ms=30_000)
    assert [(r.name, r.error_code) for r in old.responses] == [(by_name, ErrorCode.INVALID_REQUEST)]
    assert partition_counts(client, [by_name]) == {by_name: 1}


def test_create_partitions_answers_a_topic_named_twice_once_and_grows_the_others(
    broker: BrokerProcess, client: RawClient
) -> None:
    twice, once = unique_topic("dup-grow"), unique_topic("dup-grow-once")
    for name in (twice, once):
        ck_create_topic(broker.bootstrap, name)
    Topic = CreatePartitions.CreatePartitionsTopic
    response = client.call(
        ApiKey.CREATE_PARTITIONS,
        3,
        topics=[
            Topic(name=twice, count=3, assignments=None),
            Topic(name=once, count=2, assignments=None),
            Topic(name=twice, count=4, assignments=None),
        ],
        timeout_ms=30_000,
        validate_only=False,
    )
    got = [(r.name, r.error_code, r.error_message) for r in response.results]
    assert got == [
        (twice, ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        (once, ErrorCode.NONE, None),
    ]
    assert partition_counts(client, [twice, once]) == {twice: 1, once: 2}


def test_list_offsets_refuses_each_place_of_a_partition_asked_twice(
    broker: BrokerProcess, client: RawClient
) -> None:
    topic = unique_topic("dup-list-offsets")
    ck_create_topic(broker.bootstrap, topic, partitions=2)
    assert_delivered(ck_produce(broker.bootstrap, topic, make_messages(3), partition=1))
    Partition = ListOffsets.ListOffsetsPartition
    response = client.call(
        ApiKey.LIST_OFFSETS,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsets.ListOffsetsTopic(
                name=topic,
                partitions=[
                    Partition(partition_index=0, timestamp=LATEST),
                    Partition(partition_index=1, timestamp=LATEST),
                ],
            ),
            # The same partition 0 again, under a second entry of the topic.
            ListOffsets.ListOffsetsTopic(
                name=topic, partitions=[Partition(partition_index=0, timestamp=LATEST)]
            ),
        ],
    )
    got = [
        (p.partition_index, p.error_code, p.offset) for t in response.topics for p in t.partitions
    ]
    assert got == [
        (0, ErrorCode.INVALID_REQUEST, -1),
        (1, ErrorCode.NONE, 3),
        (0, ErrorCode.INVALID_REQUEST, -1),
    ]


@pytest.mark.parametrize("incremental", [False, True], ids=["AlterConfigs", "Incremental"])
def test_alter_configs_refuses_a_resource_named_twice_and_a_key_named_twice(
    broker: BrokerProcess, client: RawClient, incremental: bool
) -> None:
    twice, keys_twice, altered = (unique_topic(f"dup-configs-{n}") for n in ("r", "k", "ok"))
    for name in (twice, keys_twice, altered):
        ck_create_topic(broker.bootstrap, name)

    def resource(name: str, *values: str) -> object:
        if incremental:
            Incremental = IncrementalAlterConfigs.AlterConfigsResource
            return Incremental(
                resource_type=TOPIC_RESOURCE,
                resource_name=name,
                configs=[
                    Incremental.AlterableConfig(name="retention.ms", config_operation=SET, value=v)
                    for v in values
                ],
            )
        Plain = AlterConfigs.AlterConfigsResource
        return Plain(
            resource_type=TOPIC_RESOURCE,
            resource_name=name,
            configs=[Plain.AlterableConfig(name="retention.ms", value=v) for v in values],
        )

    response = client.call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS if incremental else ApiKey.ALTER_CONFIGS,
        1 if incremental else 2,
        resources=[
            resource(twice, "1000"),
            resource(keys_twice, "2000", "3000"),
            resource(altered, "4000"),
            resource(twice, "5000"),
        ],
        validate_only=False,
    )
    once = "Each resource must appear at most once."
    got = [(r.resource_name, r.error_code, r.error_message) for r in response.responses]
    assert got == [
        (twice, ErrorCode.INVALID_REQUEST, once),
        (keys_twice, ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"),
        (altered, ErrorCode.NONE, None),
        (twice, ErrorCode.INVALID_REQUEST, once),
    ]
    retention = {
        name: ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, name)[
            "retention.ms"
        ].value
        for name in (twice, keys_twice, altered)
    }
    assert retention == {twice: "604800000", keys_twice: "604800000", altered: "4000"}
