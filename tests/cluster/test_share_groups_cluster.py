"""KIP-932 share groups in a three-broker cluster with confluent-kafka's ShareConsumer.

The share partition lives on the leader of its topic partition; its state lives in
``__share_group_state`` (replicated, acks=all) on the share coordinator, the leader of the
state partition that the key ``group:topicId:partition`` hashes to. SIGKILL of the leader of
the share partition, and SIGKILL of the share coordinator: every record is still delivered
(none lost), and no record whose acknowledgement the broker confirmed is delivered again.
SIGKILL of the group's coordinator: the new one restores the group from __consumer_offsets and
its member heartbeats on at its epoch.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from client_helpers import ck_topic_id
from cluster_process import LocalCluster, wait_for
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD, SKIP_REASON
from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class

pytestmark = [
    pytest.mark.timeout(420),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]
RECORDS = 120
HALF = RECORDS // 2
ACCEPT = 1
STATE_TOPIC = "__share_group_state"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path,
        settings=[
            "offsets.topic.num.partitions=3",
            "transaction.state.log.num.partitions=3",
            "share.coordinator.state.topic.num.partitions=3",
            "group.share.heartbeat.interval.ms=300",
            "group.share.session.timeout.ms=4000",
            "group.share.record.lock.duration.ms=4000",
        ],
    ) as running:
        yield running


def _raw(cluster: LocalCluster, api: ApiKey, version: int, **fields: object) -> Any:
    """One request to the first live broker that answers; None when none does."""
    for broker in cluster.brokers.values():
        if not broker.is_alive():
            continue
        try:
            client = RawClient(broker.bootstrap)
        except OSError:
            continue
        try:
            return client.call(api, version, **fields)
        except OSError:
            continue
        finally:
            client.close()
    return None


def set_earliest(cluster: LocalCluster, group: str) -> None:
    request = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    response = _raw(
        cluster,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[
            request.AlterConfigsResource(
                resource_type=32,
                resource_name=group,
                configs=[
                    request.AlterableConfig(
                        name="share.auto.offset.reset", config_operation=0, value="earliest"
                    )
                ],
            )
        ],
        validate_only=False,
    )
    assert response is not None and response.responses[0].error_code == 0


def share_coordinator(cluster: LocalCluster, group: str, topic: str) -> int:
    """The broker FindCoordinator (key type 2) names for the topic's partition 0 (-1: none)."""
    raw = ck_topic_id(cluster.bootstrap, topic)
    response = _raw(
        cluster, ApiKey.FIND_COORDINATOR, 6, key_type=2, coordinator_keys=[f"{group}:{raw}:0"]
    )
    if response is None:
        return -1
    found = response.coordinators[0]
    return int(found.node_id) if found.error_code == 0 else -1


def setup_topic(cluster: LocalCluster, topic: str) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(topic, 1, replication_factor=3)]).values():
        future.result(30)
    wait_for(
        "__share_group_state created by the controller",
        lambda: (s := cluster.partition_states(STATE_TOPIC)) and all(v[0] >= 0 for v in s.values()),
    )
    wait_for("a leader for the topic", lambda: cluster.leader_of(topic, 0) >= 0)
    produce(cluster, topic, range(HALF))


def produce(cluster: LocalCluster, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 3})
    for i in values:
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(60) == 0


class Run:
    """One share group read by one explicit-mode member at a time; what was delivered and
    what the broker confirmed as acknowledged."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str) -> None:
        self.cluster = cluster
        self.group = group
        self.topic = topic
        self.delivered: list[int] = []
        self.confirmed: set[int] = set()
        self.after_kill: list[int] = []
        self.killed = False

    def member(self) -> ShareConsumer:
        consumer = ShareConsumer(
            {
                "bootstrap.servers": self.cluster.bootstrap,
                "group.id": self.group,
                "share.acknowledgement.mode": "explicit",
                "log_level": 3,
            }
        )
        consumer.subscribe([self.topic])
        return consumer

    def consume(self, consumer: ShareConsumer, until: int, timeout_s: float = 120.0) -> None:
        """Poll, accept and commit until ``until`` distinct offsets were confirmed."""
        deadline = time.monotonic() + timeout_s
        while len(self.confirmed) < until:
            assert time.monotonic() < deadline, (
                f"only {len(self.confirmed)} of {until} confirmed; delivered "
                f"{sorted(set(self.delivered))[-5:]}"
            )
            polled = []
            for message in consumer.poll(0.5):
                if message.error() is not None:
                    continue
                offset = message.offset()
                assert offset is not None
                self.delivered.append(offset)
                if self.killed:
                    self.after_kill.append(offset)
                consumer.acknowledge(message, ACCEPT)
                polled.append(offset)
            if not polled:
                continue
            try:
                results = consumer.commit_sync(30)
            except Exception:  # noqa: BLE001  not confirmed: these may come again
                continue
            if results and all(error is None for error in results.values()):
                self.confirmed.update(polled)

    def check(self) -> None:
        # Nothing lost: every offset was delivered and confirmed at last.
        assert self.confirmed == set(range(RECORDS))
        # No confirmed acknowledgement undone: what was confirmed before the kill never
        # came again after it.
        redelivered = self.before_kill & set(self.after_kill)
        assert not redelivered, f"acknowledged records delivered again: {sorted(redelivered)}"
        # The kill happened halfway: the second half was delivered after it.
        assert len(self.before_kill) == HALF
        assert set(self.after_kill) >= set(range(HALF, RECORDS))

    def kill(self, broker_id: int) -> None:
        self.before_kill = set(self.confirmed)
        self.killed = True
        self.cluster.brokers[broker_id].kill()


def test_sigkill_of_the_share_partition_leader(cluster: LocalCluster) -> None:
    topic, group = "queue-leader", "share-leader"
    setup_topic(cluster, topic)
    set_earliest(cluster, group)
    run = Run(cluster, group, topic)
    first = run.member()
    try:
        run.consume(first, HALF)
        # The second half is produced before the kill: some of it may be in flight (held
        # by the member, not yet acknowledged) when the leader dies.
        produce(cluster, topic, range(HALF, RECORDS))
        leader = cluster.leader_of(topic, 0)
        run.kill(leader)
        wait_for("a new leader", lambda: cluster.leader_of(topic, 0) not in (leader, -1))
        run.consume(first, RECORDS)
    finally:
        first.close()
    run.check()


def test_sigkill_of_the_share_coordinator(cluster: LocalCluster) -> None:
    topic, group = "queue-coordinator", "share-coordinator"
    setup_topic(cluster, topic)
    set_earliest(cluster, group)
    run = Run(cluster, group, topic)
    first = run.member()
    try:
        run.consume(first, HALF)
        produce(cluster, topic, range(HALF, RECORDS))
        coordinator = wait_for(
            "the share coordinator",
            lambda: (c := share_coordinator(cluster, group, topic)) > 0 and c,
        )
        run.kill(coordinator)
        wait_for(
            "another share coordinator",
            lambda: share_coordinator(cluster, group, topic) not in (coordinator, -1),
        )
        run.consume(first, RECORDS)
    finally:
        first.close()
    run.check()


def group_coordinator(cluster: LocalCluster, group: str) -> int:
    """The broker FindCoordinator (key type 0) names for the group (-1: none)."""
    response = _raw(cluster, ApiKey.FIND_COORDINATOR, 6, key_type=0, coordinator_keys=[group])
    if response is None:
        return -1
    found = response.coordinators[0]
    return int(found.node_id) if found.error_code == 0 else -1


def heartbeat(cluster: LocalCluster, broker_id: int, group: str, member: str, **fields: Any) -> Any:
    client = RawClient(cluster.brokers[broker_id].bootstrap)
    try:
        return client.call(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            1,
            group_id=group,
            member_id=member,
            rack_id=None,
            **{"subscribed_topic_names": None, **fields},
        )
    finally:
        client.close()


def test_sigkill_of_the_group_coordinator_keeps_the_membership(cluster: LocalCluster) -> None:
    """The share group's records in __consumer_offsets (replicated before the heartbeat is
    answered): the new coordinator restores the group, and the member heartbeats on at its
    epoch and gets its assignment again, as after a coordinator move in Kafka."""
    topic, group = "queue-members", "share-members"
    setup_topic(cluster, topic)
    coordinator = wait_for(
        "the group coordinator", lambda: (c := group_coordinator(cluster, group)) > 0 and c
    )
    joined = heartbeat(
        cluster, coordinator, group, "m1", member_epoch=0, subscribed_topic_names=[topic]
    )
    assert (joined.error_code, joined.member_epoch) == (0, 1)
    cluster.brokers[coordinator].kill()
    successor = wait_for(
        "another group coordinator",
        lambda: (c := group_coordinator(cluster, group)) not in (coordinator, -1) and c,
    )
    # Until the new coordinator has loaded the partition it answers NOT_COORDINATOR or
    # COORDINATOR_LOAD_IN_PROGRESS; then the member is known, at its epoch.
    after = wait_for(
        "the member heartbeating on the new coordinator",
        lambda: (
            (h := heartbeat(cluster, successor, group, "m1", member_epoch=1)).error_code in (0, 25)
            and h
        ),
    )
    assert (after.error_code, after.member_epoch) == (0, 1)  # 25: UNKNOWN_MEMBER_ID
    assert [p for t in after.assignment.topic_partitions for p in t.partitions] == [0]
