"""Probes: the only objects in josefk that own prometheus-client metrics.

Each probe is made for one ``CollectorRegistry`` (never the global one, so a test process can
hold several brokers) and offers methods named for what happened: ``produced``,
``request_completed``, ``connection_opened``... Hot-path methods cache the labelled children
per topic or per API so a call costs a dict lookup and a few increments, not a label lookup.

Values that already live in broker or storage objects (log size, offsets, purgatory sizes,
group lag) are not copied into gauges on every change: the owner registers a callback and
the collectors in ``josefk.metrics.collectors`` read it when Prometheus scrapes.

Naming follows the scheme in ``josefk.metrics``' docstring.

Must not import josefk.storage, josefk.broker or josefk.protocol: callers pass API names and
error names as strings.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = [
    "LATENCY_BUCKETS",
    "QUANTILES",
    "GroupProbe",
    "LogDirProbe",
    "RequestProbe",
    "SocketServerProbe",
    "TopicProbe",
]

# Seconds: from 100 us (an in-memory ApiVersions) to 30 s (a long-polling Fetch's max wait).
LATENCY_BUCKETS: Final = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


# The percentiles Kafka's Yammer histograms publish (50thPercentile ... 999thPercentile), as
# the JMX exporter's Kafka rules label them: quantile="0.50" ... "0.999".
QUANTILES: Final = (
    ("0.50", 0.50),
    ("0.75", 0.75),
    ("0.95", 0.95),
    ("0.98", 0.98),
    ("0.99", 0.99),
    ("0.999", 0.999),
)
# Kafka's histograms sample into a 1028-entry reservoir; the window keeps the latest 1028.
_WINDOW: Final = 1028


class _Window:
    """The latest observations of one series (milliseconds), their count and sum: what a
    Kafka timer publishes as percentiles and Count. A deque append per observation; the sort
    happens on scrape."""

    __slots__ = ("count", "recent", "total")

    def __init__(self) -> None:
        self.recent: deque[float] = deque(maxlen=_WINDOW)
        self.count = 0
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.recent.append(value)
        self.count += 1
        self.total += value

    def quantiles(self) -> Iterator[tuple[str, float]]:
        ordered = sorted(self.recent)
        if not ordered:
            return
        last = len(ordered) - 1
        for label, q in QUANTILES:
            yield label, ordered[min(last, int(q * len(ordered)))]


class _SummaryCollector(Collector):
    """Windows exported as one Prometheus summary ``name{labels...,quantile}`` with
    ``name_count`` and ``name_sum``: the series names the JMX exporter's Kafka rules make of
    a Kafka timer (``<>99thPercentile`` -> ``name{quantile="0.99"}``, ``<>Count`` ->
    ``name_count``; its rules have no ``_sum``, this adds one)."""

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...]) -> None:
        self._name = name
        self._documentation = documentation
        self._labels = labels
        self.windows: dict[tuple[str, ...], _Window] = {}

    def window(self, *values: str) -> _Window:
        window = self.windows.get(values)
        if window is None:
            window = self.windows[values] = _Window()
        return window

    def collect(self) -> Iterator[Metric]:
        family = Metric(self._name, self._documentation, "summary")
        for values, window in sorted(self.windows.items()):
            labels = dict(zip(self._labels, values, strict=True))
            for quantile, value in window.quantiles():
                family.add_sample(self._name, {**labels, "quantile": quantile}, value)
            family.add_sample(self._name + "_count", labels, window.count)
            family.add_sample(self._name + "_sum", labels, window.total)
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())


class _RequestSeries:
    __slots__ = ("latency", "request_bytes", "requests", "window")

    def __init__(
        self, requests: Counter, request_bytes: Counter, latency: Histogram, window: _Window
    ) -> None:
        self.requests = requests
        self.request_bytes = request_bytes
        self.latency = latency
        self.window = window


class RequestProbe:
    """Per-API request rate, errors and latency (Kafka's ``kafka.network:type=RequestMetrics``).

    - ``kafka_network_requestmetrics_requests_total{request,version}``
    - ``kafka_network_requestmetrics_requestbytes_total{request}``
    - ``kafka_network_requestmetrics_errors_total{request,error}`` (error names, NONE not counted)
    - ``kafka_network_requestmetrics_totaltime_seconds{request}`` (histogram, seconds)
    - ``kafka_network_requestmetrics_totaltimems{request,quantile}`` with ``_count`` and
      ``_sum`` (summary, milliseconds): Kafka's ``TotalTimeMs`` timer as the JMX exporter's
      rules name it; quantiles over the latest 1028 requests of each API

    ``request`` is the API's name as Kafka writes it (``Produce``, ``Fetch``, ``ApiVersions``).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests received, by API and version.",
            ["request", "version"],
            registry=registry,
        )
        self._request_bytes = Counter(
            "kafka_network_requestmetrics_requestbytes",
            "Bytes of request frames received, by API.",
            ["request"],
            registry=registry,
        )
        self._errors = Counter(
            "kafka_network_requestmetrics_errors",
            "Error codes in responses (per partition where the API has partitions), by name.",
            ["request", "error"],
            registry=registry,
        )
        self._latency = Histogram(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from a request's arrival to its response being queued, by API.",
            ["request"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._total_time_ms = _SummaryCollector(
            "kafka_network_requestmetrics_totaltimems",
            "Milliseconds from a request's arrival to its response being queued, by API"
            " (quantiles over the latest 1028 requests).",
            ("request",),
        )
        registry.register(self._total_time_ms)
        self._series: dict[tuple[str, int], _RequestSeries] = {}

    def _for(self, api: str, version: int) -> _RequestSeries:
        series = self._series.get((api, version))
        if series is None:
            series = _RequestSeries(
                self._requests.labels(api, str(version)),
                self._request_bytes.labels(api),
                self._latency.labels(api),
                self._total_time_ms.window(api),
            )
            self._series[(api, version)] = series
        return series

    def request_completed(
        self, api: str, version: int, *, seconds: float, request_bytes: int = 0
    ) -> None:
        """One request of ``api``/``version`` answered ``seconds`` after it arrived."""
        series = self._for(api, version)
        series.requests.inc()
        if request_bytes:
            series.request_bytes.inc(request_bytes)
        series.latency.observe(seconds)
        series.window.observe(seconds * 1000.0)

    def errors(self, api: str, counts: Mapping[str, int]) -> None:
        """Error names a response carried, with how many times each (``{"NONE": 3}`` is skipped)."""
        for name, count in counts.items():
            if name != "NONE" and count:
                self._errors.labels(api, name).inc(count)

    def error(self, api: str, name: str) -> None:
        if name != "NONE":
            self._errors.labels(api, name).inc()


class _TopicSeries:
    __slots__ = (
        "bytes_in",
        "bytes_out",
        "bytes_rejected",
        "failed_fetch",
        "failed_produce",
        "fetch_requests",
        "messages_in",
        "produce_requests",
    )

    def __init__(self, probe: TopicProbe, topic: str) -> None:
        self.messages_in = probe._messages_in.labels(topic)
        self.bytes_in = probe._bytes_in.labels(topic)
        self.bytes_out = probe._bytes_out.labels(topic)
        self.bytes_rejected = probe._bytes_rejected.labels(topic)
        self.produce_requests = probe._produce_requests.labels(topic)
        self.fetch_requests = probe._fetch_requests.labels(topic)
        self.failed_produce = probe._failed_produce.labels(topic)
        self.failed_fetch = probe._failed_fetch.labels(topic)


class TopicProbe:
    """Per-topic traffic (Kafka's ``kafka.server:type=BrokerTopicMetrics``), label ``topic``.

    ``kafka_server_brokertopicmetrics_`` + ``messagesin_total``, ``bytesin_total``,
    ``bytesout_total``, ``bytesrejected_total``, ``totalproducerequests_total``,
    ``totalfetchrequests_total``, ``failedproducerequests_total``,
    ``failedfetchrequests_total``. Kafka's topic-less aggregates are a ``sum()`` away.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str) -> Counter:
            return Counter(
                f"kafka_server_brokertopicmetrics_{name}", doc, ["topic"], registry=registry
            )

        self._messages_in = counter("messagesin", "Records appended to the topic's logs.")
        self._bytes_in = counter("bytesin", "Record batch bytes appended to the topic's logs.")
        self._bytes_out = counter("bytesout", "Record batch bytes sent to fetchers.")
        self._bytes_rejected = counter(
            "bytesrejected", "Record batch bytes refused (too large, corrupt, invalid)."
        )
        self._produce_requests = counter(
            "totalproducerequests", "Produce requests (per partition) for the topic."
        )
        self._fetch_requests = counter(
            "totalfetchrequests", "Fetch requests (per partition) for the topic."
        )
        self._failed_produce = counter(
            "failedproducerequests", "Produce requests (per partition) that failed."
        )
        self._failed_fetch = counter(
            "failedfetchrequests", "Fetch requests (per partition) that failed."
        )
        self._series: dict[str, _TopicSeries] = {}

    def _for(self, topic: str) -> _TopicSeries:
        series = self._series.get(topic)
        if series is None:
            series = self._series[topic] = _TopicSeries(self, topic)
        return series

    def produced(self, topic: str, *, messages: int, nbytes: int) -> None:
        """One partition's records of a Produce request were appended."""
        series = self._for(topic)
        series.produce_requests.inc()
        series.messages_in.inc(messages)
        series.bytes_in.inc(nbytes)

    def produced_partitions(
        self, topic: str, *, partitions: int, messages: int, nbytes: int
    ) -> None:
        """``partitions`` partitions of a Produce request were appended, holding ``messages``
        records of ``nbytes`` in all: ``produced`` for each, counted at once (a request
        spread over thousands of partitions would otherwise pay three counter increments
        per partition)."""
        series = self._for(topic)
        series.produce_requests.inc(partitions)
        series.messages_in.inc(messages)
        series.bytes_in.inc(nbytes)

    def produce_failed(self, topic: str, *, rejected_bytes: int = 0) -> None:
        """One partition of a Produce request failed; ``rejected_bytes`` were refused."""
        series = self._for(topic)
        series.produce_requests.inc()
        series.failed_produce.inc()
        if rejected_bytes:
            series.bytes_rejected.inc(rejected_bytes)

    def fetched(self, topic: str, *, nbytes: int) -> None:
        """One partition of a Fetch response carried ``nbytes`` of record batches."""
        series = self._for(topic)
        series.fetch_requests.inc()
        if nbytes:
            series.bytes_out.inc(nbytes)

    def fetch_failed(self, topic: str) -> None:
        series = self._for(topic)
        series.fetch_requests.inc()
        series.failed_fetch.inc()

    def remove_topic(self, topic: str) -> None:
        """Drop a deleted topic's series so they stop being exported."""
        if self._series.pop(topic, None) is None:
            return
        for metric in (
            self._messages_in,
            self._bytes_in,
            self._bytes_out,
            self._bytes_rejected,
            self._produce_requests,
            self._fetch_requests,
            self._failed_produce,
            self._failed_fetch,
        ):
            metric.remove(topic)


class SocketServerProbe:
    """Connections per listener (Kafka's ``kafka.server:type=socket-server-metrics``).

    - ``kafka_server_socketservermetrics_connection_count{listener}`` (gauge)
    - ``kafka_server_socketservermetrics_connection_creation_total{listener}``
    - ``kafka_server_socketservermetrics_connection_close_total{listener}``
    - ``kafka_server_socketservermetrics_oversized_requests_total{listener}``: frames above
      ``socket.request.max.bytes`` (the connection was closed); josefk's own.
    - ``kafka_server_socketservermetrics_successful_authentication_total{listener}`` and
      ``..._failed_authentication_total{listener}``: SASL exchanges and, as Kafka counts
      them, TLS handshakes (a completed one on an SSL listener authenticates the client;
      a failed one fails on either TLS protocol) (Kafka's successful-authentication-total /
      failed-authentication-total).
    - ``kafka_server_socketservermetrics_failed_tls_handshake_total{listener,reason}``: TLS
      handshakes that failed, by ``reason``: ``timeout``, ``refused`` (a TLS error: bad or
      missing certificate, not TLS at all) or ``disconnected``; josefk's own.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._count = Gauge(
            "kafka_server_socketservermetrics_connection_count",
            "Open client connections.",
            ["listener"],
            registry=registry,
        )
        self._created = Counter(
            "kafka_server_socketservermetrics_connection_creation",
            "Connections accepted.",
            ["listener"],
            registry=registry,
        )
        self._closed = Counter(
            "kafka_server_socketservermetrics_connection_close",
            "Connections closed, by either side.",
            ["listener"],
            registry=registry,
        )
        self._oversized = Counter(
            "kafka_server_socketservermetrics_oversized_requests",
            "Connections closed for a frame larger than socket.request.max.bytes.",
            ["listener"],
            registry=registry,
        )
        self._auth_ok = Counter(
            "kafka_server_socketservermetrics_successful_authentication",
            "SASL authentications (and re-authentications) that succeeded.",
            ["listener"],
            registry=registry,
        )
        self._auth_failed = Counter(
            "kafka_server_socketservermetrics_failed_authentication",
            "SASL authentications and TLS handshakes that failed (the connection was closed).",
            ["listener"],
            registry=registry,
        )
        self._tls_failed = Counter(
            "kafka_server_socketservermetrics_failed_tls_handshake",
            "TLS handshakes that failed (the connection was closed), by reason.",
            ["listener", "reason"],
            registry=registry,
        )

    def connection_opened(self, listener: str) -> None:
        self._created.labels(listener).inc()
        self._count.labels(listener).inc()

    def connection_closed(self, listener: str) -> None:
        self._closed.labels(listener).inc()
        self._count.labels(listener).dec()

    def oversized_request(self, listener: str) -> None:
        self._oversized.labels(listener).inc()

    def authentication(self, listener: str, *, succeeded: bool) -> None:
        (self._auth_ok if succeeded else self._auth_failed).labels(listener).inc()

    def tls_handshake_failed(self, listener: str, reason: str) -> None:
        self._tls_failed.labels(listener, reason).inc()
        self._auth_failed.labels(listener).inc()


class LogDirProbe:
    """Log dir health (Kafka's ``kafka.log:type=LogManager``).

    - ``kafka_log_logmanager_offlinelogdirectorycount`` (gauge)
    - ``kafka_log_logmanager_logdirectoryoffline{log_directory}`` (1 offline, 0 online)
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._offline_count = Gauge(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "Log dirs taken offline by an I/O error.",
            registry=registry,
        )
        self._offline = Gauge(
            "kafka_log_logmanager_logdirectoryoffline",
            "Whether a log dir is offline (1) or online (0).",
            ["log_directory"],
            registry=registry,
        )
        self._state: dict[str, bool] = {}

    def log_dir_online(self, log_dir: str) -> None:
        self._set(log_dir, offline=False)

    def log_dir_offline(self, log_dir: str) -> None:
        self._set(log_dir, offline=True)

    def _set(self, log_dir: str, *, offline: bool) -> None:
        self._state[log_dir] = offline
        self._offline.labels(log_dir).set(1 if offline else 0)
        self._offline_count.set(sum(self._state.values()))

    @property
    def offline_log_dirs(self) -> tuple[str, ...]:
        return tuple(sorted(d for d, offline in self._state.items() if offline))


class GroupProbe:
    """Group coordinator events; the per-group state is read on scrape (GroupCollector).

    - ``kafka_coordinator_group_group_rebalances_total{group}``: rebalances completed
    - ``kafka_coordinator_group_groupmetadatamanager_offsetcommits_total{group}``: offsets
      committed (one per partition)
    - ``kafka_coordinator_group_groupmetadatamanager_offsetexpirations_total``: committed
      offsets removed by ``offsets.retention.minutes``
    - ``kafka_coordinator_group_groupmetadatamanager_pendingtxnoffsets``: transactional
      offsets written (TxnOffsetCommit) whose transaction has not completed yet
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._rebalances = Counter(
            "kafka_coordinator_group_group_rebalances",
            "Rebalances completed (generation bumps).",
            ["group"],
            registry=registry,
        )
        self._commits = Counter(
            "kafka_coordinator_group_groupmetadatamanager_offsetcommits",
            "Partition offsets committed.",
            ["group"],
            registry=registry,
        )
        self._expired = Counter(
            "kafka_coordinator_group_groupmetadatamanager_offsetexpirations",
            "Committed offsets expired by offsets.retention.minutes.",
            registry=registry,
        )
        self._pending_txn = Gauge(
            "kafka_coordinator_group_groupmetadatamanager_pendingtxnoffsets",
            "Transactional offsets waiting for their transaction's commit or abort.",
            registry=registry,
        )

    def rebalance_completed(self, group: str) -> None:
        self._rebalances.labels(group).inc()

    def offsets_committed(self, group: str, count: int = 1) -> None:
        self._commits.labels(group).inc(count)

    def offsets_expired(self, count: int) -> None:
        if count:
            self._expired.inc(count)

    def pending_txn_offsets(self, count: int) -> None:
        self._pending_txn.set(count)

    def remove_group(self, group: str) -> None:
        for metric in (self._rebalances, self._commits):
            try:
                metric.remove(group)
            except KeyError:
                pass


class ReplicationProbe:
    """The cluster's replication events and the controller's view (a single node is its own
    controller).

    - ``kafka_server_replicamanager_isrshrinks_total`` / ``..._isrexpands_total``: ISR changes
      of partitions this broker leads, as accepted by etcd
    - ``kafka_controller_kafkacontroller_activecontrollercount``: 1 on the controller, else 0
    - ``kafka_controller_kafkacontroller_offlinepartitionscount``: partitions without a leader,
      reported by the controller (0 elsewhere), as Kafka does
    - ``kafka_controller_controllerstats_leaderelectionrateandtimems{quantile}`` with ``_count``
      and ``_sum`` (summary, milliseconds): leader elections this broker made as controller,
      each timed from the decision to etcd accepting it (Kafka's LeaderElectionRateAndTimeMs)
    - ``kafka_controller_controllerstats_uncleanleaderelections_total``: of those, the ones
      that gave the leadership to a replica outside the ISR (Kafka's
      UncleanLeaderElectionsPerSec)
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._shrinks = Counter(
            "kafka_server_replicamanager_isrshrinks",
            "ISR shrinks of partitions this broker leads.",
            registry=registry,
        )
        self._expands = Counter(
            "kafka_server_replicamanager_isrexpands",
            "ISR expansions of partitions this broker leads.",
            registry=registry,
        )
        self._active = Gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 while this broker is the controller.",
            registry=registry,
        )
        self._offline = Gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a leader (counted by the controller).",
            registry=registry,
        )
        self._elections = _SummaryCollector(
            "kafka_controller_controllerstats_leaderelectionrateandtimems",
            "Leader elections made as controller, in milliseconds from the decision to etcd"
            " accepting it (quantiles over the latest 1028).",
            (),
        )
        registry.register(self._elections)
        self._election_window = self._elections.window()
        self._unclean = Counter(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Leader elections that chose a replica outside the ISR.",
            registry=registry,
        )

    def isr_changed(self, before: int, after: int) -> None:
        if after < before:
            self._shrinks.inc()
        elif after > before:
            self._expands.inc()

    def leader_elected(self, *, seconds: float, unclean: bool) -> None:
        """This broker, as controller, gave a partition a new leader (``unclean``: one that
        was not in the ISR)."""
        self._election_window.observe(seconds * 1000.0)
        if unclean:
            self._unclean.inc()

    def watch_controller(
        self, is_controller: Callable[[], bool], offline: Callable[[], int]
    ) -> None:
        """Read on scrape: whether this broker is the controller, and (if so) offline partitions."""
        self._active.set_function(lambda: 1.0 if is_controller() else 0.0)
        self._offline.set_function(lambda: float(offline()) if is_controller() else 0.0)
