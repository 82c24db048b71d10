"""Share groups' metrics (KIP-932, KIP-1103), under Kafka's names as the JMX exporter's Kafka
rules flatten them.

Owns ``ShareProbe`` (events, counted as they happen) and ``ShareStats`` / ``ShareCollector``
(state, read on scrape):

- ``kafka_server_brokertopicmetrics_totalsharefetchrequests_total{topic}`` and
  ``..._failedsharefetchrequests_total{topic}``: ShareFetch partitions of the topic, and those
  answered with an error (Kafka's TotalShareFetchRequestsPerSec / FailedShare...)
- ``kafka_server_brokertopicmetrics_totalshareacknowledgementrequests_total{topic}`` and
  ``..._failedshareacknowledgementrequests_total{topic}``: partitions acknowledged (on
  ShareFetch or ShareAcknowledge), and those whose acknowledgement failed
- ``kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType}``: records
  acknowledged, by type (Accept, Release, Reject; Kafka's RecordAcknowledgementsPerSec)
- ``kafka_server_sharegroupmetrics_partitionloadtimems{quantile}``: milliseconds to make a
  share partition from its share coordinator's state (PartitionLoadTimeMs)
- ``kafka_server_share_coordinator_metrics_write_total``: share-state writes the share
  coordinator made (write-total); ``..._write_latency_avg`` / ``..._write_latency_max``:
  milliseconds from a write's call to its replication, over the latest 1028 writes
- ``kafka_server_group_coordinator_metrics_share_group_count{state}``: share groups by state
  (share-group-count), on the group coordinator
- ``kafka_server_sharesessioncache_sharesessionscount`` and ``..._sharepartitionscount``:
  share sessions, and the partitions they fetch (ShareSessionCache)
- ``kafka_server_sharepartitionmetrics_inflightmessagecount{group,topic,partition}`` and
  ``..._inflightbatchcount{...}``: offsets and ranges between a share partition's start and
  end offsets, on its leader (SharePartitionMetrics)

Must not import josefk.storage, josefk.broker or josefk.protocol.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from josefk.metrics.collectors import SHARE_GROUP_STATES
from josefk.metrics.probes import _SummaryCollector

_log = logging.getLogger(__name__)

__all__ = ["ShareCollector", "SharePartitionStats", "ShareProbe", "ShareStats"]

ACK_TYPE_NAMES: Final = {1: "Accept", 2: "Release", 3: "Reject"}
_LATENCY_WINDOW: Final = 1028


class ShareProbe:
    """Share-group events of one broker."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def topic_counter(name: str, doc: str) -> Counter:
            return Counter(
                f"kafka_server_brokertopicmetrics_{name}", doc, ["topic"], registry=registry
            )

        self._fetches = topic_counter(
            "totalsharefetchrequests", "ShareFetch partitions of the topic."
        )
        self._failed_fetches = topic_counter(
            "failedsharefetchrequests", "ShareFetch partitions of the topic answered an error."
        )
        self._acks = topic_counter(
            "totalshareacknowledgementrequests", "Partitions of the topic acknowledged."
        )
        self._failed_acks = topic_counter(
            "failedshareacknowledgementrequests",
            "Partitions of the topic whose acknowledgement failed.",
        )
        records = Counter(
            "kafka_server_sharegroupmetrics_recordacknowledgements",
            "Records acknowledged, by acknowledgement type.",
            ["ackType"],
            registry=registry,
        )
        self._records = {kind: records.labels(name) for kind, name in ACK_TYPE_NAMES.items()}
        self._load_time = _SummaryCollector(
            "kafka_server_sharegroupmetrics_partitionloadtimems",
            "Milliseconds to make a share partition from its share coordinator's state "
            "(quantiles over the latest 1028).",
            (),
        )
        registry.register(self._load_time)
        self.writes = 0
        self.write_latencies_ms: deque[float] = deque(maxlen=_LATENCY_WINDOW)
        registry.register(_WriteCollector(self))

    def share_fetch(self, topic: str, *, failed: bool) -> None:
        self._fetches.labels(topic).inc()
        if failed:
            self._failed_fetches.labels(topic).inc()

    def acknowledged(self, topic: str, *, failed: bool, records: Mapping[int, int]) -> None:
        """One partition's acknowledgement; ``records``: acknowledge type -> record count."""
        self._acks.labels(topic).inc()
        if failed:
            self._failed_acks.labels(topic).inc()
        for kind, count in records.items():
            child = self._records.get(kind)
            if child is not None and count:
                child.inc(count)

    def partition_loaded(self, millis: float) -> None:
        self._load_time.window().observe(millis)

    def state_written(self, millis: float) -> None:
        self.writes += 1
        self.write_latencies_ms.append(millis)


class _WriteCollector(Collector):
    def __init__(self, probe: ShareProbe) -> None:
        self._probe = probe

    def collect(self) -> Iterator[Metric]:
        prefix = "kafka_server_share_coordinator_metrics_"
        yield CounterMetricFamily(
            prefix + "write", "Share-state writes made by the share coordinator.",
            value=self._probe.writes,
        )  # fmt: skip
        latencies = list(self._probe.write_latencies_ms)
        yield GaugeMetricFamily(
            prefix + "write_latency_avg",
            "Average milliseconds of a share-state write, replication included (latest 1028).",
            value=sum(latencies) / len(latencies) if latencies else 0.0,
        )
        yield GaugeMetricFamily(
            prefix + "write_latency_max",
            "Longest share-state write in milliseconds, replication included (latest 1028).",
            value=max(latencies, default=0.0),
        )

    def describe(self) -> Iterator[Metric]:
        return iter(())


@dataclass(frozen=True, slots=True)
class SharePartitionStats:
    group: str
    topic: str
    partition: int
    in_flight_messages: int
    in_flight_batches: int


@dataclass(frozen=True, slots=True)
class ShareStats:
    """What the share groups look like on this broker right now."""

    groups_by_state: Mapping[str, int] = field(default_factory=dict)
    sessions: int = 0
    session_partitions: int = 0
    partitions: tuple[SharePartitionStats, ...] = ()


class ShareCollector(Collector):
    """Share groups' state, read from ``source`` on each scrape."""

    def __init__(self, source: Callable[[], ShareStats]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        try:
            stats = self._source()
        except Exception:  # noqa: BLE001  one bad callback must not fail the scrape
            _log.exception("share stats callback failed; share metrics skipped")
            return
        groups = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_share_group_count",
            "Share groups, by state.",
            labels=["state"],
        )
        for state in SHARE_GROUP_STATES:
            groups.add_metric([state], stats.groups_by_state.get(state, 0))
        yield groups
        yield GaugeMetricFamily(
            "kafka_server_sharesessioncache_sharesessionscount",
            "Share sessions open on this broker.",
            value=stats.sessions,
        )
        yield GaugeMetricFamily(
            "kafka_server_sharesessioncache_sharepartitionscount",
            "Partitions fetched by the share sessions open on this broker.",
            value=stats.session_partitions,
        )
        labels = ["group", "topic", "partition"]
        messages = GaugeMetricFamily(
            "kafka_server_sharepartitionmetrics_inflightmessagecount",
            "Offsets between the share partition's start and end offsets.",
            labels=labels,
        )
        batches = GaugeMetricFamily(
            "kafka_server_sharepartitionmetrics_inflightbatchcount",
            "Ranges of records in flight in the share partition.",
            labels=labels,
        )
        for p in stats.partitions:
            values = [p.group, p.topic, str(p.partition)]
            messages.add_metric(values, p.in_flight_messages)
            batches.add_metric(values, p.in_flight_batches)
        yield messages
        yield batches

    def describe(self) -> Iterator[Metric]:
        return iter(())
