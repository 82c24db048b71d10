"""``BrokerMetrics``: one broker's registry and every probe and collector on it.

Owns the wiring: the broker builds one BrokerMetrics, hands each component the probe it needs
(the socket server gets ``sockets``, the request dispatcher ``requests``, the replica manager
``topics``), registers its scrape-time callbacks, and serves ``registry`` with
``MetricsExporter``. Tests build as many as they like: nothing touches prometheus-client's
global registry.

Must not import josefk.storage, josefk.broker or josefk.protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from josefk.metrics.collectors import (
    CleanerCollector,
    CleanerStats,
    EventLoopCollector,
    FetchSessionCollector,
    FetchSessionStats,
    GroupCollector,
    GroupStats,
    NetworkCollector,
    NetworkStats,
    PartitionLogCollector,
    PartitionLogStats,
    PurgatoryCollector,
    PurgatoryStats,
)
from josefk.metrics.probes import (
    GroupProbe,
    LogDirProbe,
    ReplicationProbe,
    RequestProbe,
    SocketServerProbe,
    TopicProbe,
)
from josefk.metrics.share import ShareCollector, ShareProbe, ShareStats

__all__ = ["BrokerMetrics"]


class BrokerMetrics:
    """The probes of one broker, all on ``registry``.

    ``process_metrics`` adds prometheus-client's process, platform and GC collectors
    (``process_cpu_seconds_total``, ``process_resident_memory_bytes``, ...) to the registry.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        process_metrics: bool = True,
        node_id: int | None = None,
        version: str | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = RequestProbe(self.registry)
        self.topics = TopicProbe(self.registry)
        self.sockets = SocketServerProbe(self.registry)
        self.log_dirs = LogDirProbe(self.registry)
        self.groups = GroupProbe(self.registry)
        self.replication = ReplicationProbe(self.registry)
        self.share = ShareProbe(self.registry)
        self._purgatories = PurgatoryCollector()
        self.registry.register(self._purgatories)
        self._log_collector: PartitionLogCollector | None = None
        self._group_collector: GroupCollector | None = None
        if node_id is not None or version is not None:
            info = Gauge(
                "josefk_broker_info",
                "Constant 1, labelled with the broker's node id and josefk version.",
                ["node_id", "version"],
                registry=self.registry,
            )
            info.labels(str(node_id if node_id is not None else ""), version or "").set(1)
        if process_metrics:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)

    def watch_partition_logs(self, source: Callable[[], Iterable[PartitionLogStats]]) -> None:
        """Export per-partition log gauges read from ``source`` on each scrape (one source)."""
        if self._log_collector is not None:
            self.registry.unregister(self._log_collector)
        self._log_collector = PartitionLogCollector(source)
        self.registry.register(self._log_collector)

    def watch_purgatory(self, name: str, source: Callable[[], PurgatoryStats]) -> None:
        """Export purgatory ``name``'s sizes read from ``source`` on each scrape."""
        self._purgatories.register(name, source)

    def watch_groups(self, source: Callable[[], Iterable[GroupStats]]) -> None:
        """Export consumer groups read from ``source`` on each scrape (one source)."""
        if self._group_collector is not None:
            self.registry.unregister(self._group_collector)
        self._group_collector = GroupCollector(source)
        self.registry.register(self._group_collector)

    def watch_cleaner(self, source: Callable[[], CleanerStats]) -> None:
        """Export the log cleaner's figures read from ``source`` on each scrape."""
        self.registry.register(CleanerCollector(source))

    def watch_network(self, source: Callable[[], NetworkStats]) -> None:
        """Export the request gate's queue figures read from ``source`` on each scrape."""
        self.registry.register(NetworkCollector(source))

    def watch_event_loop(self, busy: Callable[[], float], clock: Callable[[], float]) -> None:
        """Export the event loop's idle share: ``busy`` reads the loop thread's CPU seconds
        (scrapes are served on the loop), ``clock`` is monotonic seconds."""
        self.registry.register(EventLoopCollector(busy, clock))

    def watch_fetch_sessions(self, source: Callable[[], FetchSessionStats]) -> None:
        """Export the fetch session cache's figures read from ``source`` on each scrape."""
        self.registry.register(FetchSessionCollector(source))

    def watch_share(self, source: Callable[[], ShareStats]) -> None:
        """Export share groups' state (KIP-932) read from ``source`` on each scrape."""
        self.registry.register(ShareCollector(source))
