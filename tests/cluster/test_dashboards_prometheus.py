"""Every panel of every dashboard in deploy/grafana returns data from a real Prometheus
scraping a real three-broker cluster under load: a producer, a consumer group that
commits, a refused request, and a leader killed so that the controller elects others.

The expressions are read from the dashboards' JSON (template variables as "All"), sent to
Prometheus' HTTP API, and polled until each answers a non-empty vector, with a deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD
from etcd_server import SKIP_REASON as ETCD_SKIP
from prometheus_server import (
    PROMETHEUS,
    PrometheusServer,
    dashboard_queries,
    variable_queries,
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


class Load:
    """A paced producer (a small batch every 50 ms) and a subscribed consumer in a group
    with auto-commit, each on its own thread until ``stop``."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self._stop = threading.Event()
        self.errors: list[str] = []
        self.consumed = 0
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def _produce(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self._bootstrap, "acks": "all", "linger.ms": 5, "log_level": 3}
        )
        n = 0
        while not self._stop.is_set():
            for _ in range(20):
                producer.produce(TOPIC, value=b"record-%d" % n, partition=n % 3)
                n += 1
            producer.poll(0)
            self._stop.wait(0.05)  # pacing the load, not waiting for a state
        producer.flush(30)

    def _consume(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self._bootstrap,
                "group.id": GROUP,
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 500,
                "log_level": 3,
            }
        )
        consumer.subscribe([TOPIC])
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    self.consumed += 1
        except KafkaException as exc:
            self.errors.append(str(exc))
        finally:
            consumer.close()

    def start(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, metrics=True, session_timeout_ms=3000) as running:
        yield running


def create_topic(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, 3, replication_factor=3)]).values():
        future.result(timeout=30)


def test_every_panel_returns_data(cluster: LocalCluster, tmp_path: Path) -> None:
    prometheus = PrometheusServer(
        tmp_path / "prometheus",
        [f"{b.host}:{b.metrics_port}" for b in cluster.brokers.values()],
    )
    prometheus.start()
    load: Load | None = None
    try:
        create_topic(cluster)
        wait_for(
            "every partition led with a full ISR",
            lambda: all(
                leader > 0 and len(isr) == 3
                for leader, _, isr in cluster.partition_states(TOPIC).values()
            ),
        )
        load = Load(cluster.bootstrap).start()
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
        waiting = {(name, title, expr) for name, title, expr in queries}
        waiting |= {(name, f"variable {var}", expr) for name, var, expr in variable_queries()}

        def all_answered() -> bool:
            for entry in list(waiting):
                if prometheus.query(entry[2]):
                    waiting.discard(entry)
            return not waiting

        try:
            wait_for("data for every panel", all_answered, timeout=PANELS_DEADLINE_S)
        except AssertionError:
            missing = "\n".join(f"{n}: {t}: {e}" for n, t, e in sorted(waiting))
            raise AssertionError(
                f"panels with no data after {PANELS_DEADLINE_S:.0f}s:\n{missing}\n"
                f"prometheus log:\n{prometheus.log_tail()}"
            ) from None
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
