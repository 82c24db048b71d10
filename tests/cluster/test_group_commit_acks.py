"""A group's offset commit in a three-broker cluster counts only once the in-sync replicas of
its ``__consumer_offsets`` partition hold it, as in Kafka.

With ``min.insync.replicas=3`` and one broker dead (out of the ISR), a commit is refused
(COORDINATOR_NOT_AVAILABLE, nothing written) and OffsetFetch keeps answering the previous
offset; before, the coordinator's cache took the new offset at append time and served it
although the commit had failed. Once the broker is back in the ISR, commits count again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from etcd_server import ETCD, SKIP_REASON

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]
TOPIC = "orders"
GROUP = "billing"
OFFSETS_TOPIC = "__consumer_offsets"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    settings = [
        "offsets.topic.num.partitions=3",
        "min.insync.replicas=3",
        "replica.lag.time.max.ms=2000",
        "offsets.commit.timeout.ms=3000",
    ]
    with LocalCluster(tmp_path, settings=settings) as running:
        yield running


def alter(admin: AdminClient, offset: int) -> str | None:
    """Commit ``offset`` for the group's partition 0 (OffsetCommit of an empty group); the
    error it was answered, None when it was accepted."""
    request = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, 0, offset)])
    (future,) = admin.alter_consumer_group_offsets([request], request_timeout=20).values()
    try:
        result = future.result(30)
    except KafkaException as exc:
        return str(exc.args[0])
    errors = [str(tp.error) for tp in result.topic_partitions if tp.error is not None]
    return errors[0] if errors else None


def committed(admin: AdminClient) -> int:
    request = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, 0)])
    (future,) = admin.list_consumer_group_offsets([request], request_timeout=20).values()
    (tp,) = future.result(30).topic_partitions
    assert tp.error is None, tp.error
    return int(tp.offset)


def coordinator_of(admin: AdminClient) -> int:
    (future,) = admin.describe_consumer_groups([GROUP], request_timeout=20).values()
    return int(future.result(30).coordinator.id)


def isr_sizes(cluster: LocalCluster) -> set[int]:
    return {len(isr) for _, _, isr in cluster.partition_states(OFFSETS_TOPIC).values()}


def test_a_commit_the_isr_cannot_hold_keeps_the_previous_offset(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3)]).values():
        future.result(30)
    wait_for("__consumer_offsets with a full ISR", lambda: isr_sizes(cluster) == {3})
    wait_for("the first commit", lambda: alter(admin, 10) is None)
    assert committed(admin) == 10

    coordinator = coordinator_of(admin)
    follower = next(b for b in cluster.brokers if b != coordinator)
    cluster.brokers[follower].kill()
    admin = cluster.admin()  # bootstrap without the dead broker
    wait_for("the dead follower out of the ISR", lambda: isr_sizes(cluster) == {2})

    error = alter(admin, 20)
    assert error is not None and "COORDINATOR_NOT_AVAILABLE" in error, error
    assert committed(admin) == 10
    assert coordinator_of(admin) == coordinator

    cluster.brokers[follower].restart()
    admin = cluster.admin()
    wait_for("the follower back in the ISR", lambda: isr_sizes(cluster) == {3})
    wait_for("a commit with the ISR whole", lambda: alter(admin, 30) is None)
    assert committed(admin) == 30
