"""The broker's Prometheus endpoint as a scraper sees it, after real client traffic."""

from __future__ import annotations

import asyncio
import re
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, free_port
from client_helpers import (
    assert_delivered,
    ck_consume,
    ck_consumer,
    ck_create_topic,
    ck_produce,
    make_messages,
    unique_topic,
)
from confluent_kafka import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from josefk.client.connection import BrokerConnection
from josefk.protocol.api import ApiKey, request_class

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def metered_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("josefk-metrics")
    broker = BrokerProcess(base / "data", base / "metrics.stderr.log", metrics_port=free_port())
    try:
        broker.start()
        yield broker
        broker.stop()
    finally:
        broker.close()


def scrape(broker: BrokerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=20) as response:
        assert response.status == 200
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    key = (name, tuple(sorted(labels.items())))
    assert key in samples, (
        f"no sample {name}{labels}; have e.g. {[k for k in samples if k[0] == name][:5]}"
    )
    return samples[key]


def test_topic_and_partition_metrics_follow_traffic(metered_broker: BrokerProcess) -> None:
    topic = unique_topic("metrics")
    ck_create_topic(metered_broker.bootstrap, topic, config={"max.message.bytes": "20000"})
    sent = make_messages(120, value_size=200)
    assert_delivered(ck_produce(metered_broker.bootstrap, topic, sent, batch_num_messages=40))
    ck_consume(metered_broker.bootstrap, topic, count=120)
    (rejected,) = ck_produce(
        metered_broker.bootstrap, topic, make_messages(1, value_size=50_000), retries=0
    )
    assert rejected.error is not None

    samples = scrape(metered_broker)
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 120
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) > 120 * 200
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) > 120 * 200
    assert (
        value(samples, "kafka_server_brokertopicmetrics_bytesrejected_total", topic=topic) > 50_000
    )
    partition = {"topic": topic, "partition": "0"}
    assert value(samples, "kafka_log_log_logendoffset", **partition) == 120
    assert value(samples, "kafka_log_log_highwatermark", **partition) == 120
    assert value(samples, "kafka_log_log_logstartoffset", **partition) == 0
    assert value(samples, "kafka_log_log_numlogsegments", **partition) == 1
    assert value(samples, "kafka_log_log_size", **partition) > 120 * 200
    produce_requests = sum(
        v
        for (name, labels), v in samples.items()
        if name == "kafka_network_requestmetrics_requests_total"
        and ("request", "Produce") in labels
    )
    assert produce_requests >= 4


async def test_failed_fetches_and_oversized_requests_are_counted(
    metered_broker: BrokerProcess,
) -> None:
    """Before, both metrics existed and never moved."""
    topic = unique_topic("failing-fetch")
    ck_produce(metered_broker.bootstrap, topic, make_messages(3))
    F = request_class(ApiKey.FETCH)
    partition = F.FetchTopic.FetchPartition(
        partition=0, fetch_offset=10**9, partition_max_bytes=1024
    )
    conn = await BrokerConnection.open(
        metered_broker.host, metered_broker.port, node_id=0, client_id="m", timeout_s=10
    )
    try:
        response = await conn.request(
            ApiKey.FETCH,
            F(
                max_wait_ms=0,
                min_bytes=0,
                topics=[F.FetchTopic(topic=topic, partitions=[partition])],
            ),
            version=12,
        )
    finally:
        conn.close()
    assert response.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
    samples = scrape(metered_broker)
    assert (
        value(samples, "kafka_server_brokertopicmetrics_failedfetchrequests_total", topic=topic)
        == 1
    )

    before = {k: v for k, v in samples.items() if "oversized" in k[0]}
    with socket.create_connection((metered_broker.host, metered_broker.port)) as raw:
        raw.sendall((1 << 30).to_bytes(4, "big"))  # a frame far over socket.request.max.bytes
        raw.settimeout(10)
        assert raw.recv(1) == b""  # the broker closes the connection
    await asyncio.sleep(0)
    after = scrape(metered_broker)
    oversized = [
        (k, v) for k, v in after.items() if "oversized" in k[0] and k[0].endswith("_total")
    ]
    assert (
        oversized
        and sum(v for _, v in oversized)
        == sum(v for k, v in before.items() if k[0].endswith("_total")) + 1
    ), oversized


def test_a_single_broker_is_the_active_controller(metered_broker: BrokerProcess) -> None:
    """Before, a single node exported 0 while ``josefk cluster info`` named it the controller,
    so the usual "active controllers != 1" alert fired on every healthy single broker."""
    samples = scrape(metered_broker)
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0


def families(broker: BrokerProcess) -> dict[str, str]:
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=20) as response:
        text = response.read().decode()
    return {family.name: family.type for family in text_string_to_metric_families(text)}


def test_dashboard_series_after_real_traffic(metered_broker: BrokerProcess) -> None:
    """The names the JMX exporter's Kafka rules and kafka_exporter give, with their types
    and values, after a real producer and a group's commits."""
    topic = unique_topic("dashboards")
    group = f"group-{topic}"
    ck_create_topic(metered_broker.bootstrap, topic, partitions=2)
    for partition in (0, 1):
        assert_delivered(
            ck_produce(metered_broker.bootstrap, topic, make_messages(50), partition=partition)
        )
    consumer = ck_consumer(metered_broker.bootstrap, **{"group.id": group})
    try:
        committed = consumer.commit(
            offsets=[TopicPartition(topic, 0, 30), TopicPartition(topic, 1, 45)],
            asynchronous=False,
        )
        assert committed is not None and all(tp.error is None for tp in committed)
    finally:
        consumer.close()

    samples = scrape(metered_broker)
    by_partition = {"consumergroup": group, "topic": topic}
    assert value(samples, "kafka_consumergroup_lag", **by_partition, partition="0") == 20
    assert value(samples, "kafka_consumergroup_lag", **by_partition, partition="1") == 5
    assert value(samples, "kafka_consumergroup_lag_sum", **by_partition) == 25
    assert value(samples, "kafka_consumergroup_current_offset", **by_partition, partition="1") == 45
    assert value(samples, "kafka_consumergroup_current_offset_sum", **by_partition) == 75
    assert value(samples, "kafka_consumergroup_members", consumergroup=group) == 0
    partition = {"topic": topic, "partition": "0"}
    assert value(samples, "kafka_topic_partition_current_offset", **partition) == 50
    assert value(samples, "kafka_topic_partition_oldest_offset", **partition) == 0
    assert value(samples, "kafka_topic_partition_leader", **partition) == 1
    assert value(samples, "kafka_topic_partition_in_sync_replica", **partition) == 1
    assert value(samples, "kafka_topic_partition_under_replicated_partition", **partition) == 0

    produce_count = value(
        samples, "kafka_network_requestmetrics_totaltimems_count", request="Produce"
    )
    histogram_count = value(
        samples, "kafka_network_requestmetrics_totaltime_seconds_count", request="Produce"
    )
    assert produce_count == histogram_count and produce_count >= 2
    quantiles = [
        value(samples, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile=q)
        for q in ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999")
    ]
    assert quantiles == sorted(quantiles) and quantiles[0] > 0
    assert value(samples, "kafka_network_requestchannel_requestqueuesize") == 0
    for idle in (
        "kafka_network_socketserver_networkprocessoravgidlepercent",
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
    ):
        assert 0 <= value(samples, idle) <= 1
    assert value(samples, "josefk_eventloop_busy_seconds_total") > 0
    # A single node follows nothing and elects nobody.
    assert value(samples, "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 0
    assert value(samples, "kafka_controller_controllerstats_leaderelectionrateandtimems_count") == 0
    assert value(samples, "kafka_controller_controllerstats_uncleanleaderelections_total") == 0

    kinds = families(metered_broker)
    assert kinds["kafka_network_requestmetrics_totaltimems"] == "summary"
    assert kinds["kafka_network_requestmetrics_totaltime_seconds"] == "histogram"
    assert kinds["kafka_controller_controllerstats_leaderelectionrateandtimems"] == "summary"
    assert kinds["kafka_controller_controllerstats_uncleanleaderelections"] == "counter"
    for gauge in (
        "kafka_consumergroup_lag",
        "kafka_consumergroup_lag_sum",
        "kafka_consumergroup_current_offset",
        "kafka_topic_partition_current_offset",
        "kafka_network_requestchannel_requestqueuesize",
        "kafka_network_socketserver_networkprocessoravgidlepercent",
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
        "kafka_server_replicafetchermanager_maxlag",
        "kafka_controller_kafkacontroller_activecontrollercount",
    ):
        assert kinds[gauge] == "gauge", gauge


def test_every_served_series_is_documented(metered_broker: BrokerProcess) -> None:
    """docs/metrics.md (generated from the probes) names each family a real broker serves
    after traffic, with the type it is served as."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    documented = dict(re.findall(r"^\| `(\w+)` \| (\w+) \|", page, re.M))
    topic = unique_topic("documented")
    assert_delivered(ck_produce(metered_broker.bootstrap, topic, make_messages(5)))
    ck_consume(metered_broker.bootstrap, topic, count=5)
    served = {
        name + ("_total" if kind == "counter" else ""): kind
        for name, kind in families(metered_broker).items()
        # prometheus-client's text format shows each counter's creation time as a gauge.
        if not name.startswith(("process_", "python_")) and not name.endswith("_created")
    }
    undocumented = {n: k for n, k in served.items() if documented.get(n) != k}
    assert undocumented == {}
    assert len(served) >= 60
