"""Collectors that read state on scrape: partition logs, purgatories, consumer groups.

Owns the plain stats records the broker hands over (``PartitionLogStats``, ``GroupStats``,
...) and the custom prometheus collectors that turn them into metric families when
``/metrics`` is scraped. The owner of the state registers a callback returning stats; nothing
is updated on the hot path, and storage never sees a metrics object.

Callbacks run on the thread that serves the scrape: the asyncio exporter serves on the event
loop, so callbacks may read loop-owned state without locks but must not block or await. A
callback that raises costs its own families for that scrape (logged), never the whole page.

Must not import josefk.storage, josefk.broker or josefk.protocol.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "CONSUMER_GROUP_STATES",
    "GROUP_STATES",
    "SHARE_GROUP_STATES",
    "CleanerCollector",
    "CleanerStats",
    "EventLoopCollector",
    "FetchSessionCollector",
    "FetchSessionStats",
    "GroupCollector",
    "GroupPartitionStats",
    "GroupStats",
    "NetworkCollector",
    "NetworkStats",
    "PartitionLogCollector",
    "PartitionLogStats",
    "PurgatoryCollector",
    "PurgatoryStats",
]

_log = logging.getLogger(__name__)

GROUP_STATES: Final = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
CONSUMER_GROUP_STATES: Final = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")
# Kafka's share-group states (KIP-932).
SHARE_GROUP_STATES: Final = ("Empty", "Stable", "Dead")


@dataclass(frozen=True, slots=True)
class PartitionLogStats:
    """One partition's log as the storage layer reports it; ``high_watermark`` from Partition."""

    topic: str
    partition: int
    size_bytes: int
    num_segments: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    is_leader: bool = True
    # Replication, as the leader sees it (a follower reports its own log only).
    replicas: int = 1
    in_sync: int = 1
    min_insync: int = 1
    # (follower id, messages it lacks of the leader's log end offset), leader only.
    follower_lags: tuple[tuple[int, int], ...] = ()
    # The partition's leader as this broker knows it (-1: none).
    leader: int = -1
    # A follower's lag as of its last fetch: the leader's high watermark minus this
    # replica's log end offset (Kafka's FetcherLagMetrics ConsumerLag); None on a leader.
    fetcher_lag: int | None = None


class PartitionLogCollector(Collector):
    """Per-partition log gauges (Kafka's ``kafka.log:type=Log``), labels ``topic, partition``.

    - ``kafka_log_log_size``, ``kafka_log_log_numlogsegments``, ``kafka_log_log_logstartoffset``,
      ``kafka_log_log_logendoffset``, ``kafka_log_log_highwatermark`` (josefk's own; Kafka has
      no per-partition HW metric)
    - ``kafka_server_replicamanager_partitioncount``, ``kafka_server_replicamanager_leadercount``
    - ``kafka_server_replicamanager_underreplicatedpartitions`` and
      ``kafka_server_replicamanager_underminisrpartitioncount``: partitions this broker leads
      whose ISR is smaller than their replicas, or than ``min.insync.replicas``
    - ``josefk_replica_follower_lag_messages{topic,partition,follower}``: per follower, the
      messages it lacks of the leader's log end offset (Kafka reports lag on the follower side
      only, as ``kafka_server_fetcherlagmetrics_consumerlag``)
    - ``kafka_server_fetcherlagmetrics_consumerlag{clientId,topic,partition}`` on a follower:
      the leader's high watermark minus this replica's log end offset at its last fetch;
      ``clientId`` is ``ReplicaFetcherThread-0-<leader>`` as Kafka names its fetchers
    - ``kafka_server_replicafetchermanager_maxlag{clientId="Replica"}``: the largest of those
      (0 when this broker follows nothing)
    - kafka_exporter's per-partition series, on the partition's leader only (so that the
      brokers' series together name each partition once): ``kafka_topic_partition_current_offset``
      (the high watermark, what ListOffsets answers for latest),
      ``kafka_topic_partition_oldest_offset``, ``kafka_topic_partition_replicas``,
      ``kafka_topic_partition_in_sync_replica``, ``kafka_topic_partition_leader`` and
      ``kafka_topic_partition_under_replicated_partition``
    """

    def __init__(self, source: Callable[[], Iterable[PartitionLogStats]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        try:
            stats = list(self._source())
        except Exception:  # noqa: BLE001  one bad callback must not fail the scrape
            _log.exception("partition log stats callback failed; log metrics skipped")
            return
        labels = ["topic", "partition"]
        families = {
            "size": GaugeMetricFamily(
                "kafka_log_log_size", "Bytes in the partition's segments.", labels=labels
            ),
            "segments": GaugeMetricFamily(
                "kafka_log_log_numlogsegments", "Segments of the partition's log.", labels=labels
            ),
            "start": GaugeMetricFamily(
                "kafka_log_log_logstartoffset", "The log start offset.", labels=labels
            ),
            "end": GaugeMetricFamily(
                "kafka_log_log_logendoffset", "The log end offset (LEO).", labels=labels
            ),
            "hw": GaugeMetricFamily(
                "kafka_log_log_highwatermark", "The high watermark.", labels=labels
            ),
        }
        leaders = under_replicated = under_min_isr = 0
        lag = GaugeMetricFamily(
            "josefk_replica_follower_lag_messages",
            "Messages a follower lacks of the leader's log end offset (on the leader).",
            labels=["topic", "partition", "follower"],
        )
        fetcher_lag = GaugeMetricFamily(
            "kafka_server_fetcherlagmetrics_consumerlag",
            "Messages this follower lacks of the leader's high watermark, as of its last fetch.",
            labels=["clientId", "topic", "partition"],
        )
        max_lag = 0
        exporter_labels = ["partition", "topic"]
        exported = {
            name: GaugeMetricFamily(f"kafka_topic_partition_{name}", doc, labels=exporter_labels)
            for name, doc in (
                ("current_offset", "The partition's high watermark (on its leader)."),
                ("oldest_offset", "The partition's log start offset (on its leader)."),
                ("replicas", "Replicas of the partition (on its leader)."),
                ("in_sync_replica", "In-sync replicas of the partition (on its leader)."),
                ("leader", "The partition's leader broker id (on its leader)."),
                ("under_replicated_partition", "1 if the ISR is smaller than the replicas."),
            )
        }
        for entry in stats:
            values = [entry.topic, str(entry.partition)]
            if entry.fetcher_lag is not None:
                client_id = f"ReplicaFetcherThread-0-{entry.leader}"
                fetcher_lag.add_metric([client_id, *values], entry.fetcher_lag)
                max_lag = max(max_lag, entry.fetcher_lag)
            if entry.is_leader:
                by_partition = [str(entry.partition), entry.topic]
                exported["current_offset"].add_metric(by_partition, entry.high_watermark)
                exported["oldest_offset"].add_metric(by_partition, entry.log_start_offset)
                exported["replicas"].add_metric(by_partition, entry.replicas)
                exported["in_sync_replica"].add_metric(by_partition, entry.in_sync)
                exported["leader"].add_metric(by_partition, entry.leader)
                exported["under_replicated_partition"].add_metric(
                    by_partition, 1 if entry.in_sync < entry.replicas else 0
                )
            families["size"].add_metric(values, entry.size_bytes)
            families["segments"].add_metric(values, entry.num_segments)
            families["start"].add_metric(values, entry.log_start_offset)
            families["end"].add_metric(values, entry.log_end_offset)
            families["hw"].add_metric(values, entry.high_watermark)
            leaders += entry.is_leader
            if entry.is_leader:
                under_replicated += entry.in_sync < entry.replicas
                under_min_isr += entry.in_sync < entry.min_insync
                for follower, behind in entry.follower_lags:
                    lag.add_metric([*values, str(follower)], behind)
        yield from families.values()
        yield lag
        yield fetcher_lag
        fetcher_max_lag = GaugeMetricFamily(
            "kafka_server_replicafetchermanager_maxlag",
            "The largest lag of the partitions this broker follows.",
            labels=["clientId"],
        )
        fetcher_max_lag.add_metric(["Replica"], max_lag)
        yield fetcher_max_lag
        yield from exported.values()
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions this broker leads whose ISR is smaller than their replica set.",
            value=under_replicated,
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions this broker leads whose ISR is below min.insync.replicas.",
            value=under_min_isr,
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount",
            "Partitions hosted by this broker.",
            value=len(stats),
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_leadercount",
            "Partitions this broker leads.",
            value=leaders,
        )

    def describe(self) -> Iterator[Metric]:
        # Declared empty so registering does not call the callback before the broker is up.
        return iter(())


@dataclass(frozen=True, slots=True)
class PurgatoryStats:
    """A purgatory's ``watched`` operations (PurgatorySize) and ``delayed`` ones pending."""

    watched: int
    delayed: int


class PurgatoryCollector(Collector):
    """Kafka's ``kafka.server:type=DelayedOperationPurgatory``, label ``delayed_operation``.

    - ``kafka_server_delayedoperationpurgatory_purgatorysize``
    - ``kafka_server_delayedoperationpurgatory_numdelayedoperations``
    """

    def __init__(self) -> None:
        self._sources: dict[str, Callable[[], PurgatoryStats]] = {}

    def register(self, name: str, source: Callable[[], PurgatoryStats]) -> None:
        """Report purgatory ``name`` (``Produce``, ``Fetch``, ``Heartbeat``, ``Rebalance``...)."""
        self._sources[name] = source

    def unregister(self, name: str) -> None:
        self._sources.pop(name, None)

    def collect(self) -> Iterator[Metric]:
        size = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Operations watched in the purgatory (an operation counts once per key).",
            labels=["delayed_operation"],
        )
        delayed = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_numdelayedoperations",
            "Operations waiting to complete or expire.",
            labels=["delayed_operation"],
        )
        for name, source in sorted(self._sources.items()):
            try:
                stats = source()
            except Exception:  # noqa: BLE001  one bad callback must not fail the scrape
                _log.exception("purgatory %s stats callback failed", name)
                continue
            size.add_metric([name], stats.watched)
            delayed.add_metric([name], stats.delayed)
        yield size
        yield delayed

    def describe(self) -> Iterator[Metric]:
        return iter(())


@dataclass(frozen=True, slots=True)
class GroupPartitionStats:
    """A group's committed offset for one partition and its lag (HW minus committed)."""

    topic: str
    partition: int
    committed_offset: int
    lag: int | None = None


@dataclass(frozen=True, slots=True)
class GroupStats:
    """One consumer group as the coordinator sees it."""

    group: str
    state: str
    members: int
    generation: int = 0
    offsets: Sequence[GroupPartitionStats] = field(default_factory=tuple)
    # "classic", "consumer" for a KIP-848 group or "share" for a KIP-932 one (the generation
    # of either is its group epoch; a share group has no committed offsets).
    group_type: str = "classic"


class GroupCollector(Collector):
    """Consumer groups, read on scrape (Kafka's ``kafka.coordinator.group`` domain).

    - ``kafka_coordinator_group_groupmetadatamanager_numgroups{state}``: classic groups per
      state
    - ``kafka_server_group_coordinator_metrics_group_count{protocol}``: groups per type
      (``classic``, ``consumer``, ``share``), Kafka 4's group-count
    - ``kafka_server_group_coordinator_metrics_consumer_group_count{state}``: KIP-848
      consumer groups per state, Kafka 4's consumer-group-count
    - ``kafka_coordinator_group_group_members{group}``, ``..._group_generation{group}``
    - ``kafka_coordinator_group_group_state{group,state}``: 1 for the group's state, 0 for
      the others (a state set)

    (for share groups too: their per-state count is ShareCollector's share_group_count)
    - ``kafka_coordinator_group_group_committedoffset{group,topic,partition}``
    - ``kafka_coordinator_group_group_lag{group,topic,partition}``: high watermark minus the
      committed offset, where the coordinator knows the HW

    and the same under kafka_exporter's names, so that its dashboards and alerts work:
    ``kafka_consumergroup_current_offset{consumergroup,topic,partition}``,
    ``kafka_consumergroup_current_offset_sum{consumergroup,topic}``,
    ``kafka_consumergroup_lag{consumergroup,topic,partition}``,
    ``kafka_consumergroup_lag_sum{consumergroup,topic}`` (over the partitions whose lag is
    known) and ``kafka_consumergroup_members{consumergroup}`` (consumer groups only: a share
    group is not one).
    """

    def __init__(self, source: Callable[[], Iterable[GroupStats]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        try:
            groups = list(self._source())
        except Exception:  # noqa: BLE001  one bad callback must not fail the scrape
            _log.exception("group stats callback failed; group metrics skipped")
            return
        prefix = "kafka_coordinator_group_group_"
        num_groups = GaugeMetricFamily(
            "kafka_coordinator_group_groupmetadatamanager_numgroups",
            "Consumer groups, by state.",
            labels=["state"],
        )
        members = GaugeMetricFamily(prefix + "members", "Members of the group.", labels=["group"])
        generation = GaugeMetricFamily(
            prefix + "generation", "The group's generation id.", labels=["group"]
        )
        state = GaugeMetricFamily(
            prefix + "state", "1 for the group's current state.", labels=["group", "state"]
        )
        offset_labels = ["group", "topic", "partition"]
        committed = GaugeMetricFamily(
            prefix + "committedoffset", "The committed offset.", labels=offset_labels
        )
        lag = GaugeMetricFamily(
            prefix + "lag", "High watermark minus the committed offset.", labels=offset_labels
        )
        by_partition = ["consumergroup", "partition", "topic"]
        by_topic = ["consumergroup", "topic"]
        exporter_offset = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "The group's committed offset of the partition.",
            labels=by_partition,
        )
        exporter_offset_sum = GaugeMetricFamily(
            "kafka_consumergroup_current_offset_sum",
            "The group's committed offsets of the topic, summed over its partitions.",
            labels=by_topic,
        )
        exporter_lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset of the partition.",
            labels=by_partition,
        )
        exporter_lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "The group's lag on the topic, summed over its partitions.",
            labels=by_topic,
        )
        exporter_members = GaugeMetricFamily(
            "kafka_consumergroup_members", "Members of the group.", labels=["consumergroup"]
        )
        coordinator = "kafka_server_group_coordinator_metrics_"
        by_type = GaugeMetricFamily(
            coordinator + "group_count", "Groups, by protocol.", labels=["protocol"]
        )
        consumer_groups = GaugeMetricFamily(
            coordinator + "consumer_group_count",
            "KIP-848 consumer groups, by state.",
            labels=["state"],
        )
        per_state = dict.fromkeys(GROUP_STATES, 0)
        per_consumer_state = dict.fromkeys(CONSUMER_GROUP_STATES, 0)
        per_type = {"classic": 0, "consumer": 0, "share": 0}
        for entry in groups:
            per_type[entry.group_type] = per_type.get(entry.group_type, 0) + 1
            states: tuple[str, ...] = GROUP_STATES
            if entry.group_type == "consumer":
                states = CONSUMER_GROUP_STATES
                per_consumer_state[entry.state] = per_consumer_state.get(entry.state, 0) + 1
            elif entry.group_type == "share":
                states = SHARE_GROUP_STATES
            else:
                per_state[entry.state] = per_state.get(entry.state, 0) + 1
            members.add_metric([entry.group], entry.members)
            if entry.group_type != "share":
                exporter_members.add_metric([entry.group], entry.members)
            offset_sums: dict[str, int] = {}
            lag_sums: dict[str, int] = {}
            generation.add_metric([entry.group], entry.generation)
            for name in states:
                state.add_metric([entry.group, name], 1 if name == entry.state else 0)
            for offset in entry.offsets:
                values = [entry.group, offset.topic, str(offset.partition)]
                committed.add_metric(values, offset.committed_offset)
                exporter_values = [entry.group, str(offset.partition), offset.topic]
                exporter_offset.add_metric(exporter_values, offset.committed_offset)
                offset_sums[offset.topic] = (
                    offset_sums.get(offset.topic, 0) + offset.committed_offset
                )
                if offset.lag is not None:
                    lag.add_metric(values, offset.lag)
                    exporter_lag.add_metric(exporter_values, offset.lag)
                    lag_sums[offset.topic] = lag_sums.get(offset.topic, 0) + offset.lag
            for topic, total in sorted(offset_sums.items()):
                exporter_offset_sum.add_metric([entry.group, topic], total)
            for topic, total in sorted(lag_sums.items()):
                exporter_lag_sum.add_metric([entry.group, topic], total)
        for name, count in per_state.items():
            num_groups.add_metric([name], count)
        for name, count in per_consumer_state.items():
            consumer_groups.add_metric([name.lower()], count)
        for name, count in per_type.items():
            by_type.add_metric([name], count)
        yield from (
            num_groups,
            by_type,
            consumer_groups,
            members,
            generation,
            state,
            committed,
            lag,
            exporter_offset,
            exporter_offset_sum,
            exporter_lag,
            exporter_lag_sum,
            exporter_members,
        )

    def describe(self) -> Iterator[Metric]:
        return iter(())


@dataclass(frozen=True, slots=True)
class CleanerStats:
    """The log cleaner's figures at scrape time; ``time_since_last_run_ms`` is None before
    its first run."""

    max_dirty_percent: float
    recopy_percent: float
    max_clean_time_secs: float
    max_buffer_utilization_percent: float
    time_since_last_run_ms: int | None
    uncleanable_partitions: int
    runs: int
    bytes_read: int
    bytes_written: int


class CleanerCollector(Collector):
    """Kafka's ``kafka.log:type=LogCleaner`` and ``type=LogCleanerManager`` gauges:

    - ``kafka_log_logcleanermanager_max_dirty_percent``
    - ``kafka_log_logcleanermanager_time_since_last_run_ms``
    - ``kafka_log_logcleanermanager_uncleanable_partitions_count``
    - ``kafka_log_logcleaner_cleaner_recopy_percent``
    - ``kafka_log_logcleaner_max_clean_time_secs``
    - ``kafka_log_logcleaner_max_buffer_utilization_percent``

    and counters Kafka only logs per run: ``josefk_log_cleaner_runs_total``,
    ``josefk_log_cleaner_bytes_read_total``, ``josefk_log_cleaner_bytes_written_total``.
    """

    def __init__(self, source: Callable[[], CleanerStats]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        try:
            stats = self._source()
        except Exception:  # noqa: BLE001  one bad callback must not fail the scrape
            _log.exception("log cleaner stats callback failed")
            return
        gauges = (
            (
                "kafka_log_logcleanermanager_max_dirty_percent",
                "Largest dirty share of any compacted log, in percent.",
                stats.max_dirty_percent,
            ),
            (
                "kafka_log_logcleanermanager_time_since_last_run_ms",
                "Milliseconds since the cleaner last cleaned a log (0 before its first run).",
                stats.time_since_last_run_ms or 0,
            ),
            (
                "kafka_log_logcleanermanager_uncleanable_partitions_count",
                "Partitions whose cleaning failed and that are no longer cleaned.",
                stats.uncleanable_partitions,
            ),
            (
                "kafka_log_logcleaner_cleaner_recopy_percent",
                "Bytes written as a share of bytes read in the last run, in percent.",
                stats.recopy_percent,
            ),
            (
                "kafka_log_logcleaner_max_clean_time_secs",
                "Duration of the last run, in seconds.",
                stats.max_clean_time_secs,
            ),
            (
                "kafka_log_logcleaner_max_buffer_utilization_percent",
                "How full the offset map was in the last run, in percent.",
                stats.max_buffer_utilization_percent,
            ),
        )
        for name, documentation, value in gauges:
            yield GaugeMetricFamily(name, documentation, value=value)
        counters = (
            ("josefk_log_cleaner_runs", "Cleaner runs that cleaned something.", stats.runs),
            ("josefk_log_cleaner_bytes_read", "Bytes of log the cleaner read.", stats.bytes_read),
            (
                "josefk_log_cleaner_bytes_written",
                "Bytes of cleaned segments the cleaner wrote.",
                stats.bytes_written,
            ),
        )
        for name, documentation, value in counters:
            yield CounterMetricFamily(name, documentation, value=value)

    def describe(self) -> Iterator[Metric]:
        return iter(())


@dataclass(frozen=True, slots=True)
class NetworkStats:
    """The request gate at scrape time: connections waiting to hand over a request because
    the broker is at ``queued.max.requests``, and requests read and not yet answered."""

    waiting: int
    in_progress: int


class NetworkCollector(Collector):
    """The network layer's queue gauges:

    - ``kafka_network_requestchannel_requestqueuesize``: Kafka's RequestQueueSize counts
      requests read and waiting for a handler thread. josefk hands a request to its handler
      as soon as it is read, so nothing waits there; what does wait is a connection whose
      reader holds a request back while the broker is at ``queued.max.requests``
      (``queued.max.request.bytes``): this gauge counts those.
    - ``josefk_network_requests_in_progress``: requests read and not yet answered, parked
      ones (long-poll fetches, produces waiting for acks) included.
    """

    def __init__(self, source: Callable[[], NetworkStats]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        try:
            stats = self._source()
        except Exception:  # noqa: BLE001  a scrape must not fail on a broken callback; logged
            _log.exception("network stats callback failed")
            return
        yield GaugeMetricFamily(
            "kafka_network_requestchannel_requestqueuesize",
            "Requests held back because the broker is at queued.max.requests.",
            value=stats.waiting,
        )
        yield GaugeMetricFamily(
            "josefk_network_requests_in_progress",
            "Requests read and not yet answered (parked ones included).",
            value=stats.in_progress,
        )

    def describe(self) -> Iterator[Metric]:
        return iter(())


class EventLoopCollector(Collector):
    """How busy the event loop thread is: josefk's honest equivalent of Kafka's idle ratios.

    Kafka has network threads (``NetworkProcessorAvgIdlePercent``) and request handler
    threads (``RequestHandlerAvgIdlePercent``); josefk does both jobs on one event loop
    thread, so both gauges report that thread's idle share: one minus the CPU time the
    thread used over the wall time elapsed, measured between two scrapes (at least
    ``min_window`` seconds apart; a scrape sooner repeats the last figure). Work the loop
    hands to executor threads (fsync, file reads) is not counted: it does not keep the loop
    from serving.

    - ``kafka_network_socketserver_networkprocessoravgidlepercent`` (0 to 1)
    - ``kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent`` (0 to 1)
    - ``josefk_eventloop_busy_seconds_total``: the loop thread's CPU seconds, for ``rate()``

    ``busy`` must read the loop thread's CPU time (``time.thread_time`` called on the loop:
    the exporter serves scrapes there); ``clock`` is a monotonic clock in seconds.
    """

    def __init__(
        self,
        busy: Callable[[], float],
        clock: Callable[[], float],
        *,
        min_window: float = 1.0,
    ) -> None:
        self._busy = busy
        self._clock = clock
        self._min_window = min_window
        self._last = (clock(), busy())
        self._idle = 1.0

    def collect(self) -> Iterator[Metric]:
        now, busy = self._clock(), self._busy()
        last_now, last_busy = self._last
        if now - last_now >= self._min_window:
            share = (busy - last_busy) / (now - last_now)
            self._idle = min(1.0, max(0.0, 1.0 - share))
            self._last = (now, busy)
        for name, doc in (
            (
                "kafka_network_socketserver_networkprocessoravgidlepercent",
                "Idle share of the event loop thread, which does the network threads' work.",
            ),
            (
                "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
                "Idle share of the event loop thread, which does the request handlers' work.",
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=self._idle)
        yield CounterMetricFamily(
            "josefk_eventloop_busy_seconds",
            "CPU seconds the event loop thread used.",
            value=busy,
        )

    def describe(self) -> Iterator[Metric]:
        return iter(())


@dataclass(frozen=True, slots=True)
class FetchSessionStats:
    """The fetch session cache (KIP-227) at scrape time."""

    sessions: int
    partitions_cached: int
    evictions: int


class FetchSessionCollector(Collector):
    """Kafka's ``kafka.server:type=FetchSessionCache`` gauges and the evictions counter:

    - ``kafka_server_fetchsessioncache_numincrementalfetchsessions``
    - ``kafka_server_fetchsessioncache_numincrementalfetchpartitionscached``
    - ``kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total``
    """

    def __init__(self, source: Callable[[], FetchSessionStats]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        try:
            stats = self._source()
        except Exception:  # noqa: BLE001  one bad callback must not fail the scrape
            _log.exception("fetch session stats callback failed")
            return
        yield GaugeMetricFamily(
            "kafka_server_fetchsessioncache_numincrementalfetchsessions",
            "Incremental fetch sessions in the cache.",
            value=stats.sessions,
        )
        yield GaugeMetricFamily(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "Partitions held by all incremental fetch sessions.",
            value=stats.partitions_cached,
        )
        yield CounterMetricFamily(
            "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
            "Sessions evicted to make room for a new one.",
            value=stats.evictions,
        )

    def describe(self) -> Iterator[Metric]:
        return iter(())
