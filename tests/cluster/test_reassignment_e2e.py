"""Moving replicas between brokers (AlterPartitionReassignments / ListPartitionReassignments,
KIP-455) in a three-broker cluster on a real etcd.

A partition on brokers 1 and 2 moves to 3 and 2 while an idempotent acks=all producer keeps
producing: broker 3 copies the log and joins the ISR, then broker 1 (the leader) leaves, hands
leadership to 3 and deletes its copy; every acknowledged record is read back once, and 2 and 3
hold the same bytes. A move towards a broker that cannot catch up (frozen with SIGSTOP) stays
listed with its adding replica until it is cancelled, which restores the original replicas;
invalid targets and unknown partitions are refused per partition.
Driven with josefk's command line and kafka-python's admin client (confluent-kafka has no
reassignment API). Before, josefk did not speak either API.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import SOURCE_DIR
from cluster_process import BackgroundProducer, LocalCluster, read_all, wait_for
from etcd_server import ETCD, SKIP_REASON

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path,
        settings=["auto.leader.rebalance.enable=false", "replica.lag.time.max.ms=3000"],
    ) as running:
        yield running


def create_on(cluster: LocalCluster, topic: str, replicas: list[int]) -> None:
    from kafka.admin import NewTopic

    admin = kafka_python_admin(cluster)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments={0: replicas})])
    finally:
        admin.close()
    wait_for(
        f"{topic}-0 led by {replicas[0]} with ISR {replicas}",
        lambda: cluster.partition_states(topic)[0] == (replicas[0], replicas, replicas),
    )


def josefk(cluster: LocalCluster, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "josefk", *args, "--json", "-b", cluster.bootstrap],
        capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": str(SOURCE_DIR)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def kafka_python_admin(cluster: LocalCluster) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)


def test_a_moved_partition_copies_then_drops_replicas_under_load(cluster: LocalCluster) -> None:
    topic = "moving"
    create_on(cluster, topic, [1, 2])
    producer = BackgroundProducer(cluster.bootstrap, topic, 1).start()
    try:
        wait_for("records acknowledged before the move", lambda: producer.acked_count() > 500)
        moved = josefk(cluster, "cluster", "reassign", f"{topic}:0=3,2", "--wait")
        assert moved == [{"topic": topic, "partition": 0, "replicas": [3, 2], "result": "done"}]
        before = producer.acked_count()
        wait_for("records acknowledged after the move", lambda: producer.acked_count() > before)
    finally:
        producer.stop()
    assert producer.failed == []

    leader, replicas, isr = cluster.partition_states(topic)[0]
    assert (leader, replicas, sorted(isr)) == (3, [3, 2], [2, 3])
    assert josefk(cluster, "cluster", "reassignments") == []

    records = read_all(cluster, topic, 1)[0]
    assert [offset for offset, _ in records] == list(range(len(records)))
    consumed = dict(records)
    assert {o: v for (_, o), v in producer.acked.items() if consumed.get(o) != v} == {}

    # Broker 1 deleted its copy; 2 and 3 hold the same bytes; DescribeLogDirs says so.
    old_copy = cluster.brokers[1].data_dir / f"{topic}-0"
    wait_for("broker 1's copy deleted", lambda: not old_copy.exists())

    def log_bytes(broker_id: int) -> bytes:
        directory = cluster.brokers[broker_id].data_dir / f"{topic}-0"
        return b"".join(f.read_bytes() for f in sorted(directory.glob("*.log")))

    wait_for("identical replicas on 2 and 3", lambda: log_bytes(2) == log_bytes(3))
    holders = {
        row["broker"]
        for row in josefk(cluster, "cluster", "log-dirs")
        for p in row["partitions"]
        if p["topic"] == topic
    }
    assert holders == {2, 3}
    admin = kafka_python_admin(cluster)
    try:
        described = admin.describe_log_dirs(brokers=[3])
        assert topic in json.dumps(described, default=str)
    finally:
        admin.close()


def test_a_stuck_move_is_listed_until_cancelled(cluster: LocalCluster) -> None:
    from kafka import TopicPartition
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    topic = "stuck"
    controller = cluster.admin().list_topics(timeout=10).controller_id
    frozen_id = max(b for b in cluster.brokers if b != controller)
    original = sorted(b for b in cluster.brokers if b != frozen_id)
    create_on(cluster, topic, original)
    tp = TopicPartition(topic, 0)
    admin = kafka_python_admin(cluster)
    assert admin.list_partition_reassignments() == {}  # the admin now talks to the controller
    frozen = cluster.brokers[frozen_id]
    target = [*original, frozen_id]
    try:
        # The frozen broker is still registered (its lease outlives the freeze by seconds)
        # but can never fetch: the move cannot finish.
        frozen.send_signal(signal.SIGSTOP)
        assert admin.alter_partition_reassignments({tp: target}) == {tp: None}
        listed = admin.list_partition_reassignments()
        assert listed == {
            tp: {"replicas": target, "adding_replicas": [frozen_id], "removing_replicas": []}
        }
        assert josefk(cluster, "cluster", "reassignments") == [
            {"topic": topic, "partition": 0, "replicas": target, "adding": [frozen_id],
             "removing": []}
        ]  # fmt: skip
        assert cluster.partition_states(topic)[0] == (original[0], target, original)

        # Bad requests are refused per partition and change nothing.
        refused = admin.alter_partition_reassignments(
            {TopicPartition(topic, 0): [1, 99], TopicPartition("absent", 0): [1]}
        )
        assert refused[tp] is InvalidReplicationAssignmentError
        assert refused[TopicPartition("absent", 0)] is UnknownTopicOrPartitionError
        assert admin.list_partition_reassignments()[tp]["replicas"] == target

        assert josefk(cluster, "cluster", "reassign", "--cancel", f"{topic}:0") == [
            {"topic": topic, "partition": 0, "replicas": None, "result": "cancelled"}
        ]
        assert admin.list_partition_reassignments() == {}
        assert cluster.partition_states(topic)[0] == (original[0], original, original)
        assert admin.alter_partition_reassignments({tp: None}) == {
            tp: NoReassignmentInProgressError
        }
    finally:
        frozen.send_signal(signal.SIGCONT)
        admin.close()
    stray = frozen.data_dir / f"{topic}-0"
    wait_for(
        f"broker {frozen_id} back, holding no copy",
        lambda: frozen_id in _live(cluster) and not stray.exists(),
    )


def _live(cluster: LocalCluster) -> set[int]:
    return set(cluster.admin().list_topics(timeout=10).brokers)
