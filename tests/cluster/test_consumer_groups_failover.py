"""KIP-848 consumer groups in a three-broker cluster: SIGKILL of the group's coordinator.

The group's records (epochs, target and current assignments) and its commits live in its
``__consumer_offsets`` partition (replication factor 3); the follower that becomes leader
loads them, so the members carry on at their epochs with the partitions they had, and
nothing committed is read again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_helpers import commit_record
from cluster_process import LocalCluster, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from etcd_server import ETCD, SKIP_REASON

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]
TOPIC = "orders"
GROUP = "billing-848"
PARTITIONS = 4


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    settings = [
        "offsets.topic.num.partitions=6",
        "group.consumer.heartbeat.interval.ms=500",
        "group.consumer.min.heartbeat.interval.ms=100",
        "group.consumer.session.timeout.ms=30000",
        "group.consumer.min.session.timeout.ms=1000",
    ]
    with LocalCluster(tmp_path, settings=settings) as running:
        yield running


class Member:
    def __init__(self, cluster: LocalCluster) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.revoked: list[TopicPartition] = []
        self.records: list[tuple[int, int]] = []
        self.consumer.subscribe([TOPIC], on_revoke=lambda c, tps: self.revoked.extend(tps))

    def partitions(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is not None and message.error() is None:
            self.records.append((message.partition(), message.offset()))
            commit_record(self.consumer, message)


def pump(members: list[Member], until: object, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if until():  # type: ignore[operator]
            return
    raise AssertionError(f"not reached: {[sorted(m.partitions()) for m in members]}")


def produce(cluster: LocalCluster, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(start, start + count):
        producer.produce(TOPIC, f"r{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def coordinator_of(cluster: LocalCluster) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (future,) = admin.describe_consumer_groups([GROUP]).values()
    return int(future.result(30).coordinator.id)


def test_the_group_survives_its_coordinators_death(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=3)]).values():
        future.result(30)
    wait_for(
        "__consumer_offsets created by the controller",
        lambda: cluster.partition_states("__consumer_offsets"),
    )
    produce(cluster, 0, 40)
    members = [Member(cluster), Member(cluster)]
    try:

        def settled() -> bool:
            held = [m.partitions() for m in members]
            return all(held) and held[0].isdisjoint(held[1]) and len(held[0] | held[1]) == 4

        pump(members, lambda: settled() and sum(len(m.records) for m in members) >= 40)
        before = [m.partitions() for m in members]
        for m in members:
            m.revoked.clear()
        coordinator = coordinator_of(cluster)
        cluster.brokers[coordinator].kill()
        wait_for("a new coordinator", lambda: coordinator_of(cluster) not in (coordinator, -1))
        produce(cluster, 40, 40)
        pump(members, lambda: sum(len(m.records) for m in members) >= 80)
        assert [m.partitions() for m in members] == before
        assert not any(m.revoked for m in members), "a member lost partitions in the failover"
    finally:
        for m in members:
            m.consumer.close()
    records = [r for m in members for r in m.records]
    assert len(records) == len(set(records)) == 80, "a committed record was read again"


def test_group_configs_set_through_one_broker_reach_the_coordinator(cluster: LocalCluster) -> None:
    """A GROUP config altered through one broker is kept in etcd: every broker describes it
    and the group's coordinator (whichever broker that is) answers heartbeats with it."""
    from raw_client import RawClient

    from josefk.protocol.api import ApiKey, request_class

    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3)]).values():
        future.result(30)
    wait_for(
        "__consumer_offsets created by the controller",
        lambda: cluster.partition_states("__consumer_offsets"),
    )
    alter_cls = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    describe_cls = request_class(ApiKey.DESCRIBE_CONFIGS)
    ids = sorted(cluster.brokers)
    first = RawClient(cluster.brokers[ids[0]].bootstrap)
    try:
        response = first.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                alter_cls.AlterConfigsResource(
                    resource_type=32,
                    resource_name=GROUP,
                    configs=[
                        alter_cls.AlterConfigsResource.AlterableConfig(
                            name="consumer.heartbeat.interval.ms", config_operation=0, value="900"
                        )
                    ],
                )
            ],
            validate_only=False,
        )
        assert response.responses[0].error_code == 0, response.responses[0].error_message
    finally:
        first.close()

    def described_by(broker_id: int) -> str | None:
        client = RawClient(cluster.brokers[broker_id].bootstrap)
        try:
            response = client.call(
                ApiKey.DESCRIBE_CONFIGS,
                4,
                resources=[
                    describe_cls.DescribeConfigsResource(
                        resource_type=32, resource_name=GROUP, configuration_keys=None
                    )
                ],
                include_synonyms=False,
                include_documentation=False,
            )
        finally:
            client.close()
        found = {c.name: c.value for c in response.results[0].configs}
        return found.get("consumer.heartbeat.interval.ms")

    for broker_id in ids:
        wait_for(
            f"broker {broker_id} sees the group config",
            lambda b=broker_id: described_by(b) == "900",
        )
    member = Member(cluster)
    try:
        pump([member], lambda: bool(member.partitions()))
        coordinator = coordinator_of(cluster)
        client = RawClient(cluster.brokers[coordinator].bootstrap)
        try:
            joined = client.call(
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                1,
                group_id=GROUP,
                member_id="raw-member",
                member_epoch=0,
                rebalance_timeout_ms=30000,
                subscribed_topic_names=[TOPIC],
                topic_partitions=[],
            )
        finally:
            client.close()
        assert joined.error_code == 0 and joined.heartbeat_interval_ms == 900
    finally:
        member.consumer.close()
