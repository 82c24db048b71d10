"""The PySpark source (real local[2] Spark) reads a topic whose three partitions are led by
three different brokers of a cluster on a real etcd: each Spark task fetches its partition
from that partition's leader, and the batch read holds exactly what was produced."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import Producer
from etcd_server import ETCD, SKIP_REASON

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
    pytest.mark.skipif(
        importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None,
        reason="pyspark or pyarrow is not installed (pip install 'josefk[spark]')",
    ),
]
TOPIC = "spread"
ASSIGNMENT = {0: [1, 2], 1: [2, 3], 2: [3, 1]}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, settings=["auto.leader.rebalance.enable=false"]) as running:
        yield running


def test_spark_reads_a_topic_led_by_three_brokers(cluster: LocalCluster) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, replica_assignments=ASSIGNMENT)])
    finally:
        admin.close()
    wait_for(
        "each partition led by its first replica",
        lambda: (
            {p: s[0] for p, s in cluster.partition_states(TOPIC).items()}
            == {p: r[0] for p, r in ASSIGNMENT.items()}
        ),
    )
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 3})
    sent = set()
    for i in range(600):
        partition = i % 3
        value = f"v{i}".encode()
        producer.produce(TOPIC, value, partition=partition)
        sent.add((partition, value))
    assert producer.flush(60) == 0

    from josefk.spark import local_session

    spark = local_session("josefk-cluster-tests")
    try:
        rows = (
            spark.read.format("josefk")
            .option("kafka.bootstrap.servers", cluster.bootstrap)
            .option("subscribe", TOPIC)
            .load()
            .select("partition", "offset", "value")
            .collect()
        )
    finally:
        spark.stop()
    assert {(r.partition, bytes(r.value)) for r in rows} == sent
    assert len(rows) == len(sent)
    for partition in range(3):
        offsets = sorted(r.offset for r in rows if r.partition == partition)
        assert offsets == list(range(200))
