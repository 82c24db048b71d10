"""Consumer groups in a three-broker cluster: each group is coordinated by the leader of its
``__consumer_offsets`` partition (created by the controller with replication factor 3), and
committed offsets survive the coordinator's death, as in Kafka.

Before, the lowest live broker id coordinated every group from its own unreplicated offsets
topic: killing it handed the group to a broker that had never seen its commits, and a
restarted consumer read the topic again from the beginning."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from etcd_server import ETCD, SKIP_REASON

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]
TOPIC = "orders"
GROUP = "billing"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, settings=["offsets.topic.num.partitions=6"]) as running:
        yield running


def consumer(cluster: LocalCluster) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )


def read(consumer: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    wait_for(
        f"{count} records",
        lambda: (
            values.extend(
                m.value() for m in consumer.consume(count - len(values), 0.5) if m.error() is None
            )
            or len(values) >= count
        ),
    )
    return values


def coordinator_of(cluster: LocalCluster) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (future,) = admin.describe_consumer_groups([GROUP]).values()
    return int(future.result(30).coordinator.id)


def test_committed_offsets_survive_the_coordinators_death(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3)]).values():
        future.result(30)
    offsets_topic = wait_for(
        "__consumer_offsets created by the controller",
        lambda: cluster.partition_states("__consumer_offsets"),
    )
    assert all(len(replicas) == 3 for _, replicas, _ in offsets_topic.values())

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(TOPIC, f"r{i}".encode())
    assert producer.flush(60) == 0

    first = consumer(cluster)
    first.subscribe([TOPIC])
    assert read(first, 10) == [f"r{i}".encode() for i in range(10)]
    first.commit(asynchronous=False)
    coordinator = coordinator_of(cluster)
    first.close()

    # The coordinator dies without a word; the group's partition fails over to a follower
    # that holds the commit, which becomes the group's coordinator.
    cluster.brokers[coordinator].kill()
    wait_for(
        "a new coordinator",
        lambda: coordinator_of(cluster) not in (coordinator, -1),
    )
    second = consumer(cluster)
    second.subscribe([TOPIC])
    try:
        assert read(second, 10) == [f"r{i}".encode() for i in range(10, 20)]
    finally:
        second.close()
