"""A three-broker cluster's dashboard series: exactly one active controller, the followers'
fetcher lag, and the leader elections the controller makes when a leader dies."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD, SKIP_REASON

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]
TOPIC = "watched"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, metrics=True) as running:
        yield running


def series(samples: dict[str, float], name: str) -> dict[str, float]:
    return {k: v for k, v in samples.items() if re.fullmatch(rf"{name}(\{{.*\}})?", k)}


def test_controller_fetcher_lag_and_elections(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, 3, replication_factor=3)]).values():
        future.result(timeout=30)
    wait_for(
        "every partition led with a full ISR",
        lambda: all(
            leader > 0 and len(isr) == 3
            for leader, _, isr in cluster.partition_states(TOPIC).values()
        ),
    )
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(300):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % 3)
    assert producer.flush(60) == 0

    scrapes = {b: cluster.scrape(b) for b in cluster.brokers}
    active = [s["kafka_controller_kafkacontroller_activecontrollercount"] for s in scrapes.values()]
    assert sorted(active) == [0, 0, 1]
    # Each partition is reported once, by its leader, under kafka_exporter's names.
    offsets = [
        k
        for s in scrapes.values()
        for k in series(s, "kafka_topic_partition_current_offset")
        if f'topic="{TOPIC}"' in k
    ]
    assert len(offsets) == 3

    def caught_up() -> dict[int, dict[str, float]] | None:
        found = {b: cluster.scrape(b) for b in cluster.brokers}
        lags = [
            v
            for s in found.values()
            for k, v in series(s, "kafka_server_fetcherlagmetrics_consumerlag").items()
            if f'topic="{TOPIC}"' in k
        ]
        # Three partitions, two followers each.
        return found if len(lags) == 6 and set(lags) == {0} else None

    found = wait_for("every follower's fetcher lag reported and 0", caught_up)
    for samples in found.values():
        assert samples['kafka_server_replicafetchermanager_maxlag{clientId="Replica"}'] == 0

    controller = next(
        b
        for b, s in scrapes.items()
        if s["kafka_controller_kafkacontroller_activecontrollercount"] == 1
    )
    victim = next(
        leader for leader, _, _ in cluster.partition_states(TOPIC).values() if leader != controller
    )
    led_by_victim = [
        p for p, (leader, _, _) in cluster.partition_states(TOPIC).items() if leader == victim
    ]
    cluster.brokers[victim].kill()
    wait_for(
        "new leaders for the dead broker's partitions",
        lambda: all(
            cluster.partition_states(TOPIC)[p][0] not in (-1, victim) for p in led_by_victim
        ),
    )
    elections = wait_for(
        "the controller to count its elections",
        lambda: (
            n
            if (
                n := cluster.scrape(controller)[
                    "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
                ]
            )
            >= len(led_by_victim)
            else None
        ),
    )
    assert elections >= len(led_by_victim)
    after = cluster.scrape(controller)
    assert after["kafka_controller_controllerstats_uncleanleaderelections_total"] == 0
    assert 'kafka_controller_controllerstats_leaderelectionrateandtimems{quantile="0.99"}' in after
