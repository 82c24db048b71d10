"""The dashboards in deploy/grafana against a real Prometheus scraping one real broker under
load: every panel returns data except the few that only a cluster can fill (a follower's
lag, the time of leader elections), which stay empty on a single node.

tests/cluster/test_dashboards_prometheus.py fills those too, on three brokers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, free_port
from client_helpers import ck_create_topic, unique_topic
from confluent_kafka import KafkaException
from prometheus_server import (
    PROMETHEUS,
    SKIP_REASON,
    Load,
    PrometheusServer,
    dashboard_queries,
    variable_queries,
    wait_for_data,
)

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(PROMETHEUS is None, reason=SKIP_REASON),
]
DEADLINE_S = 120.0
# Series a single node never has: it follows no leader and elects nobody.
CLUSTER_ONLY = (
    "kafka_server_fetcherlagmetrics_consumerlag",
    "josefk_replica_follower_lag_messages",
    "kafka_controller_controllerstats_leaderelectionrateandtimems{quantile",
)


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", metrics_port=free_port())
    try:
        broker.start()
        yield broker
        broker.stop()
    finally:
        broker.close()


def test_every_panel_returns_data_from_one_broker(metered: BrokerProcess, tmp_path: Path) -> None:
    topic = unique_topic("dashboards")
    ck_create_topic(metered.bootstrap, topic, partitions=2)
    prometheus = PrometheusServer(tmp_path / "prometheus", [f"127.0.0.1:{metered.metrics_port}"])
    prometheus.start()
    load = Load(metered.bootstrap, topic, f"group-{topic}", partitions=2).start()
    try:
        with pytest.raises(KafkaException):  # a refused request, for the errors panel
            ck_create_topic(metered.bootstrap, topic)
        queries = dashboard_queries()
        cluster_only = [q for q in queries if any(name in q[2] for name in CLUSTER_ONLY)]
        assert len(cluster_only) == 4
        wanted = {q for q in queries if q not in cluster_only}
        wanted |= {(n, f"variable {v}", e) for n, v, e in variable_queries()}
        wait_for_data(prometheus, wanted, DEADLINE_S)
        for name, title, expr in cluster_only:
            assert prometheus.query(expr) == [], f"{name}: {title} has data on a single node"
        assert load.errors == []
        answer = prometheus.query("sum(kafka_controller_kafkacontroller_activecontrollercount)")
        assert answer[0]["value"][1] == "1"
    finally:
        load.stop()
        prometheus.close()
