"""Every panel of every dashboard in deploy/grafana returns data from a real Prometheus
scraping a real three-broker cluster under load: a producer, a consumer group that
commits, a refused request, and a leader killed so that the controller elects others.

The expressions are read from the dashboards' JSON (template variables as "All"), sent to
Prometheus' HTTP API, and polled until each answers a non-empty vector, with a deadline.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD
from etcd_server import SKIP_REASON as ETCD_SKIP
from prometheus_server import (
    PROMETHEUS,
    Load,
    PrometheusServer,
    dashboard_queries,
    variable_queries,
    wait_for_data,
)
from prometheus_server import SKIP_REASON as PROMETHEUS_SKIP

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=ETCD_SKIP),
    pytest.mark.skipif(PROMETHEUS is None, reason=PROMETHEUS_SKIP),
]
TOPIC = "dashboards"
GROUP = "dashboard-readers"
PANELS_DEADLINE_S = 120.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, metrics=True, session_timeout_ms=3000) as running:
        yield running


def create_topic(cluster: LocalCluster) -> None:
    admin = cluster.admin()  # kept alive until the futures resolve
    for future in admin.create_topics([NewTopic(TOPIC, 3, replication_factor=3)]).values():
        future.result(timeout=30)


def create_topic_once(cluster: LocalCluster) -> bool:
    """Create the topic; True once it exists. librdkafka may drop a request it sent to a
    bootstrap address when the metadata names the brokers (_DESTROY_BROKER): ask again."""
    try:
        create_topic(cluster)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    return True


def test_every_panel_returns_data(cluster: LocalCluster, tmp_path: Path) -> None:
    prometheus = PrometheusServer(
        tmp_path / "prometheus",
        [f"{b.host}:{b.metrics_port}" for b in cluster.brokers.values()],
    )
    prometheus.start()
    load: Load | None = None
    try:
        wait_for("the topic created", lambda: create_topic_once(cluster))
        wait_for(
            "every partition led with a full ISR",
            lambda: all(
                leader > 0 and len(isr) == 3
                for leader, _, isr in cluster.partition_states(TOPIC).values()
            ),
        )
        load = Load(cluster.bootstrap, TOPIC, GROUP, partitions=3).start()
        wait_for("the group consuming", lambda: load is not None and load.consumed > 100)

        # A leader dies: the controller (another broker) elects new leaders.
        scrapes = {b: cluster.scrape(b) for b in cluster.brokers}
        controller = next(
            b
            for b, s in scrapes.items()
            if s["kafka_controller_kafkacontroller_activecontrollercount"] == 1
        )
        victim = next(
            leader
            for leader, _, _ in cluster.partition_states(TOPIC).values()
            if leader != controller
        )
        cluster.brokers[victim].kill()
        wait_for(
            "new leaders for the killed broker's partitions",
            lambda: all(
                leader not in (-1, victim)
                for leader, _, _ in cluster.partition_states(TOPIC).values()
            ),
        )

        # A refused request, for the errors panel (on a broker that lives on): the topic
        # exists already (with a broker down, the replication factor is refused first).
        with pytest.raises(KafkaException):
            create_topic(cluster)

        queries = dashboard_queries()
        assert len(queries) >= 40
        wanted = set(queries)
        wanted |= {(name, f"variable {var}", expr) for name, var, expr in variable_queries()}
        wait_for_data(prometheus, wanted, PANELS_DEADLINE_S)
        assert load.errors == []
        # The values are the cluster's, not merely present.
        assert (
            prometheus.query("sum(kafka_controller_kafkacontroller_activecontrollercount)")[0][
                "value"
            ][1]
            == "1"
        )
        elections = prometheus.query(
            "sum(kafka_controller_controllerstats_leaderelectionrateandtimems_count)"
        )
        assert float(elections[0]["value"][1]) >= 1
    finally:
        if load is not None:
            load.stop()
        prometheus.close()
