"""The series named as the JMX exporter's Kafka rules and kafka_exporter name them: the
names, types and values the usual dashboards and alerts read."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from josefk.metrics import (
    BrokerMetrics,
    GroupPartitionStats,
    GroupStats,
    PartitionLogStats,
)
from josefk.metrics.collectors import EventLoopCollector, NetworkStats


def families(metrics: BrokerMetrics) -> dict[str, str]:
    """family name -> type, as a scraper parses the page."""
    text = generate_latest(metrics.registry).decode()
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def value(metrics: BrokerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_total_time_ms_has_kafkas_quantiles_and_a_count() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    for ms in range(1, 101):  # 1 ms ... 100 ms
        metrics.requests.request_completed("Produce", 9, seconds=ms / 1000)
    metrics.requests.request_completed("Fetch", 12, seconds=0.5)
    name = "kafka_network_requestmetrics_totaltimems"
    assert families(metrics)[name] == "summary"
    assert value(metrics, name + "_count", request="Produce") == 100
    assert round(value(metrics, name + "_sum", request="Produce") or 0) == 5050
    median = value(metrics, name, request="Produce", quantile="0.50")
    p99 = value(metrics, name, request="Produce", quantile="0.99")
    p999 = value(metrics, name, request="Produce", quantile="0.999")
    assert median is not None and 49 <= median <= 52
    assert p99 is not None and 99 <= p99 <= 100
    assert p999 is not None and round(p999) == 100
    assert value(metrics, name, request="Fetch", quantile="0.75") == 500
    # The histogram in seconds stays beside it.
    assert (
        value(metrics, "kafka_network_requestmetrics_totaltime_seconds_count", request="Produce")
        == 100
    )


def test_quantiles_follow_the_latest_requests() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    for _ in range(2000):
        metrics.requests.request_completed("Metadata", 12, seconds=1.0)
    for _ in range(1028):
        metrics.requests.request_completed("Metadata", 12, seconds=0.002)
    name = "kafka_network_requestmetrics_totaltimems"
    assert value(metrics, name, request="Metadata", quantile="0.999") == 2
    assert value(metrics, name + "_count", request="Metadata") == 3028


def test_leader_elections_and_unclean_ones() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    name = "kafka_controller_controllerstats_leaderelectionrateandtimems"
    unclean = "kafka_controller_controllerstats_uncleanleaderelections_total"
    assert value(metrics, name + "_count") == 0  # exported before the first election
    assert value(metrics, unclean) == 0
    metrics.replication.leader_elected(seconds=0.004, unclean=False)
    metrics.replication.leader_elected(seconds=0.010, unclean=True)
    assert value(metrics, name + "_count") == 2
    assert value(metrics, name, quantile="0.99") == 10
    assert value(metrics, unclean) == 1
    kinds = families(metrics)
    assert kinds[name] == "summary"
    assert kinds["kafka_controller_controllerstats_uncleanleaderelections"] == "counter"


def test_fetcher_lag_and_kafka_exporter_partition_series() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    common = dict(size_bytes=10, num_segments=1, log_start_offset=5, log_end_offset=40)
    metrics.watch_partition_logs(
        lambda: [
            PartitionLogStats(
                "led", 0, high_watermark=30, replicas=3, in_sync=2, leader=1, **common
            ),
            PartitionLogStats(
                "followed", 0, high_watermark=40, is_leader=False, leader=2, fetcher_lag=7, **common
            ),
            PartitionLogStats(
                "followed", 1, high_watermark=40, is_leader=False, leader=3, fetcher_lag=2, **common
            ),
        ]
    )
    assert (
        value(
            metrics,
            "kafka_server_fetcherlagmetrics_consumerlag",
            clientId="ReplicaFetcherThread-0-2",
            topic="followed",
            partition="0",
        )
        == 7
    )
    assert value(metrics, "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 7
    led = {"topic": "led", "partition": "0"}
    assert value(metrics, "kafka_topic_partition_current_offset", **led) == 30
    assert value(metrics, "kafka_topic_partition_oldest_offset", **led) == 5
    assert value(metrics, "kafka_topic_partition_replicas", **led) == 3
    assert value(metrics, "kafka_topic_partition_in_sync_replica", **led) == 2
    assert value(metrics, "kafka_topic_partition_leader", **led) == 1
    assert value(metrics, "kafka_topic_partition_under_replicated_partition", **led) == 1
    # Only the leader reports a partition: the followers' brokers would repeat it.
    followed = {"topic": "followed", "partition": "0"}
    assert value(metrics, "kafka_topic_partition_current_offset", **followed) is None


def test_max_lag_is_zero_when_following_nothing() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    metrics.watch_partition_logs(list)
    assert value(metrics, "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 0


def test_consumer_group_series_under_kafka_exporters_names() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    metrics.watch_groups(
        lambda: [
            GroupStats(
                "billing",
                "Stable",
                members=2,
                offsets=(
                    GroupPartitionStats("orders", 0, committed_offset=10, lag=5),
                    GroupPartitionStats("orders", 1, committed_offset=20, lag=1),
                    GroupPartitionStats("orders", 2, committed_offset=3, lag=None),
                    GroupPartitionStats("refunds", 0, committed_offset=4, lag=0),
                ),
            )
        ]
    )
    group = {"consumergroup": "billing"}
    assert value(metrics, "kafka_consumergroup_lag", **group, topic="orders", partition="0") == 5
    assert value(metrics, "kafka_consumergroup_lag", **group, topic="orders", partition="2") is None
    assert value(metrics, "kafka_consumergroup_lag_sum", **group, topic="orders") == 6
    assert value(metrics, "kafka_consumergroup_lag_sum", **group, topic="refunds") == 0
    assert (
        value(metrics, "kafka_consumergroup_current_offset", **group, topic="orders", partition="1")
        == 20
    )
    assert value(metrics, "kafka_consumergroup_current_offset_sum", **group, topic="orders") == 33
    assert value(metrics, "kafka_consumergroup_members", **group) == 2
    # josefk's own names stay.
    assert (
        value(
            metrics,
            "kafka_coordinator_group_group_lag",
            group="billing",
            topic="orders",
            partition="0",
        )
        == 5
    )


def test_request_queue_size() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    metrics.watch_network(lambda: NetworkStats(waiting=3, in_progress=9))
    assert value(metrics, "kafka_network_requestchannel_requestqueuesize") == 3
    assert value(metrics, "josefk_network_requests_in_progress") == 9


class _Clocks:
    def __init__(self) -> None:
        self.wall = 100.0
        self.cpu = 10.0


def test_idle_ratios_are_the_event_loops_idle_share() -> None:
    clocks = _Clocks()
    collector = EventLoopCollector(lambda: clocks.cpu, lambda: clocks.wall, min_window=1.0)

    def sample() -> dict[str, float]:
        return {m.name: m.samples[0].value for m in collector.collect()}

    network = "kafka_network_socketserver_networkprocessoravgidlepercent"
    handlers = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"
    assert sample()[network] == 1.0  # nothing measured yet
    clocks.wall += 10
    clocks.cpu += 2.5  # a quarter of the time on the CPU
    first = sample()
    assert first[network] == first[handlers] == 0.75
    assert first["josefk_eventloop_busy_seconds"] == 12.5
    clocks.wall += 0.5
    clocks.cpu += 0.5  # a window too short: the last figure stands
    assert sample()[network] == 0.75
    clocks.wall += 1.5
    clocks.cpu += 0.0
    assert sample()[network] == 0.75  # 0.5 busy of the 2 s since the last measure
    clocks.wall += 4
    clocks.cpu += 5  # more CPU than wall time (clock granularity): clamped
    assert sample()[network] == 0.0
