"""The admin client against a real broker: topics, partitions, configs, offsets, records,
the cluster, and typed errors for what the broker refuses."""

from __future__ import annotations

import pytest
from broker_process import BrokerProcess
from client_helpers import BASE_TIMESTAMP_MS, make_messages, unique_topic
from client_suite import produce

from josefk.client import AIOAdmin, NewTopic, ResourceType, TopicPartition
from josefk.client.errors import (
    InvalidPartitionsError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)


async def test_topic_life_cycle(broker: BrokerProcess) -> None:
    topic = unique_topic("admin-topic")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        result = await admin.create_topics([NewTopic(topic, 3, 1, {"retention.ms": "3600000"})])
        assert result == {topic: None}
        with pytest.raises(TopicAlreadyExistsError) as info:
            await admin.create_topic(topic, 1)
        assert info.value.code == 36 and info.value.name == "TOPIC_ALREADY_EXISTS"
        assert topic in await admin.list_topics()
        (described,) = await admin.describe_topics([topic])
        assert [p.partition for p in described.partitions] == [0, 1, 2]
        assert all(p.leader >= 0 and p.replicas == (p.leader,) for p in described.partitions)
        assert described.topic_id is not None
        assert await admin.create_partitions({topic: 5}) == {topic: None}
        (described,) = await admin.describe_topics([topic])
        assert len(described.partitions) == 5
        errors = await admin.create_partitions({topic: 2})
        assert isinstance(errors[topic], InvalidPartitionsError)
        assert await admin.delete_topics([topic]) == {topic: None}
        assert topic not in await admin.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin.describe_topics([topic])
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin.delete_topic(topic)


async def test_validate_only_creates_nothing(broker: BrokerProcess) -> None:
    topic = unique_topic("admin-validate")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        assert await admin.create_topics([NewTopic(topic, 2)], validate_only=True) == {topic: None}
        assert topic not in await admin.list_topics()


async def test_describe_and_incrementally_alter_configs(broker: BrokerProcess) -> None:
    topic = unique_topic("admin-configs")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, 1, configs={"retention.ms": "3600000"})
        configs = await admin.describe_topic_configs(topic)
        assert configs["retention.ms"].value == "3600000"
        assert not configs["retention.ms"].is_default
        assert configs["segment.bytes"].is_default
        await admin.alter_configs(
            (ResourceType.TOPIC, topic), {"segment.bytes": "1048576", "retention.ms": None}
        )
        configs = await admin.describe_topic_configs(topic)
        assert configs["segment.bytes"].value == "1048576"
        assert configs["retention.ms"].is_default
        cluster = await admin.describe_cluster()
        broker_id = str(cluster.brokers[0].node_id)
        found = await admin.describe_configs([(ResourceType.BROKER, broker_id)])
        assert "num.partitions" in found[(ResourceType.BROKER, broker_id)]


async def test_cluster_offsets_and_delete_records(broker: BrokerProcess) -> None:
    topic = unique_topic("admin-offsets")
    await produce(broker.bootstrap, topic, make_messages(20, timestamp_step=1000))
    tp = TopicPartition(topic, 0)
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        cluster = await admin.describe_cluster()
        assert cluster.cluster_id
        assert [(b.host, b.port) for b in cluster.brokers] == [(broker.host, broker.port)]
        assert cluster.controller_id == cluster.brokers[0].node_id
        earliest = await admin.list_offsets({tp: admin.EARLIEST})
        latest = await admin.list_offsets({tp: admin.LATEST})
        by_time = await admin.list_offsets({tp: BASE_TIMESTAMP_MS + 5_000})
        assert earliest[tp] is not None and earliest[tp].offset == 0
        assert latest[tp] is not None and latest[tp].offset == 20
        assert by_time[tp] is not None and by_time[tp].offset == 5
        assert by_time[tp].timestamp == BASE_TIMESTAMP_MS + 5_000
        assert await admin.delete_records({tp: 8}) == {tp: 8}
        earliest = await admin.list_offsets({tp: admin.EARLIEST})
        assert earliest[tp] is not None and earliest[tp].offset == 8


async def test_groups_listing_of_an_unknown_group(broker: BrokerProcess) -> None:
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.list_groups()
        (described,) = await admin.describe_groups(["no-such-group"])
        assert described.state in ("Dead", "")
        assert described.members == []
        result = await admin.delete_groups(["no-such-group"])
        assert result["no-such-group"] is not None
        assert result["no-such-group"].name in ("GROUP_ID_NOT_FOUND", "NON_EMPTY_GROUP")
