"""Consumer groups on a three-broker cluster whose topics are not on every broker.

A group's coordinator is the leader of its ``__consumer_offsets`` partition; the topics the
group consumes may live on other brokers entirely (replication factor 1 or 2 of three). Kafka's
coordinator checks a committed partition against the cluster's metadata, so OffsetCommit,
OffsetFetch, TxnOffsetCommit and OffsetDelete work for any partition that exists, whoever leads
it. Before, josefk checked the coordinator's own replicas and answered
UNKNOWN_TOPIC_OR_PARTITION to every group whose coordinator did not host the partition
(librdkafka's tests 0020, 0030, 0060 and 0099 failed on three brokers for that reason).

Every group here is chosen so that its coordinator hosts none of its topic's partitions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from etcd_server import ETCD, SKIP_REASON
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import NoError

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]
# Placed by hand: each RF=1 topic on one broker, the RF=2 topic on brokers 1 and 2 only.
PLACEMENTS: dict[str, list[list[int]]] = {
    "solo-on-1": [[1]],
    "solo-on-2": [[2]],
    "solo-on-3": [[3]],
    "pair-on-1-2": [[1, 2], [2, 1]],
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, settings=["offsets.topic.num.partitions=6"]) as running:
        wait_for(
            "__consumer_offsets led on every broker",
            lambda: {leader for leader, _, _ in offsets_partitions(running).values()} == {1, 2, 3},
        )
        yield running


def offsets_partitions(cluster: LocalCluster) -> dict[int, tuple[int, list[int], list[int]]]:
    try:
        return cluster.partition_states("__consumer_offsets")
    except KeyError:
        return {}


def create(admin: AdminClient, placements: dict[str, list[list[int]]]) -> None:
    topics = [NewTopic(name, len(a), replica_assignment=a) for name, a in placements.items()]
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(30)


def coordinator(admin: AdminClient, group: str) -> int:
    """The group's coordinator, asked again while the answer is a retriable coordinator
    error: librdkafka's describe hands NOT_COORDINATOR to the caller instead of retrying, and
    a coordinator named by FindCoordinator may not have taken its offsets partition yet."""

    def describe() -> int:
        (future,) = admin.describe_consumer_groups([group], request_timeout=20).values()
        return int(future.result(30).coordinator.id)

    return wait_for(f"the coordinator of {group}", describe)


def group_away_from(admin: AdminClient, hosts: set[int], prefix: str) -> str:
    """A group id whose coordinator is none of ``hosts``."""
    for n in range(200):
        group = f"{prefix}-{n}"
        if coordinator(admin, group) not in hosts:
            return group
    raise AssertionError(f"no group of 200 is coordinated away from {sorted(hosts)}")


def produce(cluster: LocalCluster, topic: str, partitions: int, count: int, start: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 3})
    for i in range(start, start + count):
        producer.produce(topic, f"{topic}-{i}".encode(), partition=i % partitions)
    assert producer.flush(60) == 0


def consumer(cluster: LocalCluster, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "log_level": 3,
        }
    )


def read(reader: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []

    def more() -> bool:
        for message in reader.consume(count - len(values), 0.5):
            error = message.error()
            assert error is None or error.retriable() or "EOF" in error.name(), error
            if error is None:
                values.append(message.value())
        return len(values) >= count

    wait_for(f"{count} records", more)
    return values


def committed(admin: AdminClient, group: str, partitions: list[TopicPartition]) -> list[int]:
    request = ConsumerGroupTopicPartitions(group, partitions)
    (future,) = admin.list_consumer_group_offsets([request], request_timeout=20).values()
    answered = future.result(30).topic_partitions
    assert all(tp.error is None for tp in answered), answered
    return [int(tp.offset) for tp in answered]


def test_groups_commit_and_resume_where_their_coordinator_hosts_nothing(
    cluster: LocalCluster,
) -> None:
    admin = cluster.admin()
    create(admin, PLACEMENTS)
    for topic, assignment in PLACEMENTS.items():
        hosts = {b for replicas in assignment for b in replicas}
        partitions = len(assignment)
        group = group_away_from(admin, hosts, f"g-{topic}")
        produce(cluster, topic, partitions, 10, 0)

        first = consumer(cluster, group)
        first.subscribe([topic])
        assert len(read(first, 10)) == 10
        answered = first.commit(asynchronous=False)
        assert answered is not None
        assert [tp.error for tp in answered] == [None] * partitions, (topic, group, answered)
        first.close()

        asked = [TopicPartition(topic, p) for p in range(partitions)]
        assert sum(committed(admin, group, asked)) == 10, (topic, group)
        produce(cluster, topic, partitions, 5, 10)
        second = consumer(cluster, group)
        second.subscribe([topic])
        resumed = read(second, 5)
        # The committed offsets, not the beginning: only the five new records come back.
        assert sorted(resumed) == sorted(f"{topic}-{i}".encode() for i in range(10, 15))
        assert len(second.consume(10, 1.0)) == 0
        second.close()


def test_transactional_commit_and_offset_delete_away_from_the_topic(
    cluster: LocalCluster,
) -> None:
    admin = cluster.admin()
    topic = "solo-on-2"
    create(admin, {topic: PLACEMENTS[topic]})
    group = group_away_from(admin, {2}, "txn")
    produce(cluster, topic, 1, 4, 0)

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": "tx-1", "log_level": 3}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"inside")
    reader = consumer(cluster, group)
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, 3)], reader.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    reader.close()
    # The COMMIT marker reaches the offsets partition after EndTxn is answered, as in Kafka.
    wait_for(
        "the transactional offset committed",
        lambda: committed(admin, group, [TopicPartition(topic, 0)]) == [3],
    )

    # OffsetDelete through kafka-python (confluent-kafka's AdminClient has no call for it).
    kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        deleted = kafka_admin.delete_group_offsets(group, [KafkaTopicPartition(topic, 0)])
    finally:
        kafka_admin.close()
    assert deleted == {KafkaTopicPartition(topic, 0): NoError}
    assert committed(admin, group, [TopicPartition(topic, 0)]) == [-1001]


def test_commit_to_a_topic_created_a_moment_ago_through_another_broker(
    cluster: LocalCluster,
) -> None:
    """The topic is created through broker 3 and placed there; the group's coordinator is
    another broker, whose view of the cluster may not have the topic yet when the commit
    arrives. The commit is not refused: the coordinator waits for its view to catch up."""
    admin = cluster.admin()
    through_3 = AdminClient({"bootstrap.servers": cluster.brokers[3].bootstrap, "log_level": 3})
    groups = [group_away_from(admin, {3}, f"fresh-{n}") for n in range(3)]
    for n, group in enumerate(groups):
        topic = f"fresh-{n}"
        create(through_3, {topic: [[3]]})
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 7)])
        (future,) = admin.alter_consumer_group_offsets([request], request_timeout=20).values()
        try:
            (answered,) = future.result(30).topic_partitions
        except KafkaException as exc:
            raise AssertionError(f"commit to {topic} via {group} refused: {exc}") from exc
        assert answered.error is None, (topic, group, answered.error)
        assert committed(admin, group, [TopicPartition(topic, 0)]) == [7]
