"""Topics auto-created by Metadata in a cluster are cluster topics: whichever broker a
producer asks, the controller creates the topic in etcd with ``default.replication.factor``
replicas and every broker hosts its share. Before, the asked broker created it in its own
catalog only: a one-replica topic the other brokers never heard of."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import Producer
from etcd_server import ETCD, SKIP_REASON

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path, settings=["default.replication.factor=3", "num.partitions=2"]
    ) as running:
        yield running


def test_a_producer_auto_creates_a_replicated_topic_through_any_broker(
    cluster: LocalCluster,
) -> None:
    controller = cluster.admin().list_topics(timeout=10).controller_id
    asked = next(b for b in sorted(cluster.brokers) if b != controller)
    producer = Producer(
        {
            "bootstrap.servers": cluster.brokers[asked].bootstrap,
            "acks": "all",
            "message.timeout.ms": 60_000,
            "log_level": 3,
        }
    )
    delivered: list[object] = []
    for i in range(10):
        producer.produce(
            "auto-made", f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err)
        )
    assert producer.flush(60) == 0
    assert delivered == [None] * 10

    states = cluster.partition_states("auto-made")
    assert sorted(states) == [0, 1]
    for _, replicas, _ in states.values():
        assert sorted(replicas) == [1, 2, 3]
    for broker in cluster.brokers.values():
        for partition in (0, 1):
            directory = broker.data_dir / f"auto-made-{partition}"
            wait_for(f"{directory} hosted", directory.exists)
