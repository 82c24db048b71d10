"""Probes and collectors update the series their docstrings promise, on private registries."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from josefk.metrics import (
    BrokerMetrics,
    GroupPartitionStats,
    GroupStats,
    PartitionLogStats,
    PurgatoryStats,
)


@pytest.fixture
def metrics() -> BrokerMetrics:
    return BrokerMetrics(process_metrics=False)


def value(metrics: BrokerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_registries_are_independent() -> None:
    first = BrokerMetrics(process_metrics=False)
    second = BrokerMetrics(process_metrics=False)
    first.topics.produced("t", messages=1, nbytes=10)
    assert value(first, "kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 1
    assert value(second, "kafka_server_brokertopicmetrics_messagesin_total", topic="t") is None


def test_process_metrics_are_on_the_broker_registry() -> None:
    metrics = BrokerMetrics(process_metrics=True, node_id=3, version="9.9")
    text = generate_latest(metrics.registry).decode()
    assert "python_info" in text
    assert value(metrics, "josefk_broker_info", node_id="3", version="9.9") == 1


def test_request_probe(metrics: BrokerMetrics) -> None:
    requests = metrics.requests
    requests.request_completed("Produce", 9, seconds=0.003, request_bytes=1000)
    requests.request_completed("Produce", 9, seconds=0.2, request_bytes=24)
    requests.request_completed("Produce", 3, seconds=0.0)
    requests.request_completed("Fetch", 16, seconds=0.5)
    name = "kafka_network_requestmetrics_requests_total"
    assert value(metrics, name, request="Produce", version="9") == 2
    assert value(metrics, name, request="Produce", version="3") == 1
    assert value(metrics, name, request="Fetch", version="16") == 1
    assert (
        value(metrics, "kafka_network_requestmetrics_requestbytes_total", request="Produce") == 1024
    )
    latency = "kafka_network_requestmetrics_totaltime_seconds"
    assert value(metrics, latency + "_count", request="Produce") == 3
    assert value(metrics, latency + "_sum", request="Produce") == pytest.approx(0.203)
    assert value(metrics, latency + "_bucket", request="Produce", le="0.005") == 2
    assert value(metrics, latency + "_bucket", request="Fetch", le="0.25") == 0
    assert value(metrics, latency + "_bucket", request="Fetch", le="0.5") == 1


def test_request_errors_skip_none(metrics: BrokerMetrics) -> None:
    metrics.requests.errors("Produce", {"NONE": 5, "MESSAGE_TOO_LARGE": 2, "CORRUPT_MESSAGE": 0})
    metrics.requests.error("Metadata", "INVALID_TOPIC_EXCEPTION")
    metrics.requests.error("Metadata", "NONE")
    name = "kafka_network_requestmetrics_errors_total"
    assert value(metrics, name, request="Produce", error="MESSAGE_TOO_LARGE") == 2
    assert value(metrics, name, request="Produce", error="NONE") is None
    assert value(metrics, name, request="Produce", error="CORRUPT_MESSAGE") is None
    assert value(metrics, name, request="Metadata", error="INVALID_TOPIC_EXCEPTION") == 1


def test_topic_probe(metrics: BrokerMetrics) -> None:
    topics = metrics.topics
    topics.produced("orders", messages=10, nbytes=1500)
    topics.produced("orders", messages=5, nbytes=500)
    topics.produced("audit", messages=1, nbytes=70)
    topics.produce_failed("orders", rejected_bytes=2_000_000)
    topics.fetched("orders", nbytes=1800)
    topics.fetched("orders", nbytes=0)
    topics.fetch_failed("audit")
    prefix = "kafka_server_brokertopicmetrics_"
    assert value(metrics, prefix + "messagesin_total", topic="orders") == 15
    assert value(metrics, prefix + "bytesin_total", topic="orders") == 2000
    assert value(metrics, prefix + "bytesin_total", topic="audit") == 70
    assert value(metrics, prefix + "bytesrejected_total", topic="orders") == 2_000_000
    assert value(metrics, prefix + "bytesout_total", topic="orders") == 1800
    assert value(metrics, prefix + "totalproducerequests_total", topic="orders") == 3
    assert value(metrics, prefix + "failedproducerequests_total", topic="orders") == 1
    assert value(metrics, prefix + "totalfetchrequests_total", topic="orders") == 2
    assert value(metrics, prefix + "failedfetchrequests_total", topic="audit") == 1


def test_removed_topic_stops_being_exported(metrics: BrokerMetrics) -> None:
    metrics.topics.produced("gone", messages=1, nbytes=1)
    metrics.topics.remove_topic("gone")
    metrics.topics.remove_topic("never-existed")
    assert 'topic="gone"' not in generate_latest(metrics.registry).decode()
    metrics.topics.produced("gone", messages=2, nbytes=2)
    assert value(metrics, "kafka_server_brokertopicmetrics_messagesin_total", topic="gone") == 2


def test_socket_server_probe(metrics: BrokerMetrics) -> None:
    sockets = metrics.sockets
    for _ in range(3):
        sockets.connection_opened("PLAINTEXT")
    sockets.connection_closed("PLAINTEXT")
    sockets.oversized_request("PLAINTEXT")
    prefix = "kafka_server_socketservermetrics_"
    assert value(metrics, prefix + "connection_count", listener="PLAINTEXT") == 2
    assert value(metrics, prefix + "connection_creation_total", listener="PLAINTEXT") == 3
    assert value(metrics, prefix + "connection_close_total", listener="PLAINTEXT") == 1
    assert value(metrics, prefix + "oversized_requests_total", listener="PLAINTEXT") == 1


def test_authentication_counters(metrics: BrokerMetrics) -> None:
    sockets = metrics.sockets
    sockets.authentication("SASL_PLAINTEXT", succeeded=True)
    sockets.authentication("SASL_PLAINTEXT", succeeded=False)
    sockets.authentication("SASL_PLAINTEXT", succeeded=False)
    prefix = "kafka_server_socketservermetrics_"
    labels = {"listener": "SASL_PLAINTEXT"}
    assert value(metrics, prefix + "successful_authentication_total", **labels) == 1
    assert value(metrics, prefix + "failed_authentication_total", **labels) == 2


def test_log_dir_probe(metrics: BrokerMetrics) -> None:
    probe = metrics.log_dirs
    probe.log_dir_online("/a")
    probe.log_dir_online("/b")
    assert value(metrics, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    probe.log_dir_offline("/b")
    assert value(metrics, "kafka_log_logmanager_offlinelogdirectorycount") == 1
    assert value(metrics, "kafka_log_logmanager_logdirectoryoffline", log_directory="/b") == 1
    assert value(metrics, "kafka_log_logmanager_logdirectoryoffline", log_directory="/a") == 0
    assert probe.offline_log_dirs == ("/b",)


def test_partition_log_collector_reads_on_scrape(metrics: BrokerMetrics) -> None:
    state = {"leo": 10}

    def stats() -> list[PartitionLogStats]:
        return [
            PartitionLogStats("t", 0, 4096, 2, 3, state["leo"], 8),
            PartitionLogStats("t", 1, 0, 1, 0, 0, 0, is_leader=False),
        ]

    metrics.watch_partition_logs(stats)
    assert value(metrics, "kafka_log_log_logendoffset", topic="t", partition="0") == 10
    state["leo"] = 12
    assert value(metrics, "kafka_log_log_logendoffset", topic="t", partition="0") == 12
    assert value(metrics, "kafka_log_log_size", topic="t", partition="0") == 4096
    assert value(metrics, "kafka_log_log_numlogsegments", topic="t", partition="0") == 2
    assert value(metrics, "kafka_log_log_logstartoffset", topic="t", partition="0") == 3
    assert value(metrics, "kafka_log_log_highwatermark", topic="t", partition="0") == 8
    assert value(metrics, "kafka_server_replicamanager_partitioncount") == 2
    assert value(metrics, "kafka_server_replicamanager_leadercount") == 1
    # A second registration replaces the first source instead of duplicating series.
    metrics.watch_partition_logs(lambda: [])
    assert value(metrics, "kafka_log_log_size", topic="t", partition="0") is None
    assert value(metrics, "kafka_server_replicamanager_partitioncount") == 0


def test_failing_callback_costs_only_its_own_series(
    metrics: BrokerMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> list[PartitionLogStats]:
        raise RuntimeError("log manager closed")

    metrics.watch_partition_logs(broken)
    metrics.topics.produced("t", messages=1, nbytes=1)
    with caplog.at_level(logging.ERROR):
        text = generate_latest(metrics.registry).decode()
    assert "kafka_server_brokertopicmetrics_messagesin_total" in text
    assert "kafka_log_log_size" not in text
    assert "partition log stats callback failed" in caplog.text


def test_purgatories(metrics: BrokerMetrics) -> None:
    sizes = {"Fetch": PurgatoryStats(watched=4, delayed=3)}
    metrics.watch_purgatory("Fetch", lambda: sizes["Fetch"])
    metrics.watch_purgatory("Produce", lambda: PurgatoryStats(watched=1, delayed=1))
    prefix = "kafka_server_delayedoperationpurgatory_"
    assert value(metrics, prefix + "purgatorysize", delayed_operation="Fetch") == 4
    assert value(metrics, prefix + "numdelayedoperations", delayed_operation="Fetch") == 3
    sizes["Fetch"] = PurgatoryStats(watched=0, delayed=0)
    assert value(metrics, prefix + "purgatorysize", delayed_operation="Fetch") == 0
    assert value(metrics, prefix + "purgatorysize", delayed_operation="Produce") == 1


def test_groups(metrics: BrokerMetrics) -> None:
    groups = [
        GroupStats(
            "billing",
            "Stable",
            members=3,
            generation=7,
            offsets=(
                GroupPartitionStats("orders", 0, committed_offset=100, lag=5),
                GroupPartitionStats("orders", 1, committed_offset=50),
            ),
        ),
        GroupStats("idle", "Empty", members=0),
    ]
    metrics.watch_groups(lambda: groups)
    metrics.groups.rebalance_completed("billing")
    metrics.groups.rebalance_completed("billing")
    metrics.groups.offsets_committed("billing", 2)
    metrics.groups.offsets_expired(4)
    prefix = "kafka_coordinator_group_group_"
    assert value(metrics, prefix + "members", group="billing") == 3
    assert value(metrics, prefix + "generation", group="billing") == 7
    assert value(metrics, prefix + "state", group="billing", state="Stable") == 1
    assert value(metrics, prefix + "state", group="billing", state="Empty") == 0
    assert (
        value(metrics, prefix + "committedoffset", group="billing", topic="orders", partition="0")
        == 100
    )
    assert value(metrics, prefix + "lag", group="billing", topic="orders", partition="0") == 5
    assert value(metrics, prefix + "lag", group="billing", topic="orders", partition="1") is None
    assert value(metrics, prefix + "rebalances_total", group="billing") == 2
    manager = "kafka_coordinator_group_groupmetadatamanager_"
    assert value(metrics, manager + "numgroups", state="Stable") == 1
    assert value(metrics, manager + "numgroups", state="Empty") == 1
    assert value(metrics, manager + "numgroups", state="Dead") == 0
    assert value(metrics, manager + "offsetcommits_total", group="billing") == 2
    assert value(metrics, manager + "offsetexpirations_total") == 4
    metrics.groups.remove_group("billing")
    metrics.groups.remove_group("billing")
    assert value(metrics, prefix + "rebalances_total", group="billing") is None


def test_a_given_registry_is_used() -> None:
    registry = CollectorRegistry()
    metrics = BrokerMetrics(registry, process_metrics=False)
    metrics.sockets.connection_opened("PLAINTEXT")
    assert (
        registry.get_sample_value(
            "kafka_server_socketservermetrics_connection_count", {"listener": "PLAINTEXT"}
        )
        == 1
    )
