"""The console's background look at the cluster: one snapshot every few seconds, and history.

Owns ``Snapshot`` (brokers, controller, every topic's partitions with their log start and end
offsets and leader replica's size, the groups with their states and total lag) and
``Sampler``, which takes one every ``interval`` seconds through the Kafka protocol alone
(Metadata, DescribeCluster, ListOffsets, DescribeLogDirs, ListGroups, OffsetFetch) plus, where
given, the brokers' Prometheus endpoints, and adds its counters to ``History``:

* ``records_in``: the sum of every partition's log end offset (its rate is records in/s);
* ``bytes_in``: the brokers' ``bytesin`` counters where metrics are given, else the sum of
  the leader replicas' sizes on disk (retention makes that step 0, not negative);
* ``records_out``: the sum of every group's committed offsets (records consumed by groups);
* ``bytes_out``: the brokers' ``bytesout`` counters, only where metrics are given;
* ``topic:<name>``: the topic's log end offsets summed (its produce rate);
* ``lag:<group>``: the group's total lag (committed offset to log end offset).

Pages read the latest snapshot instead of asking the cluster for everything again, so that a
page with a thousand topics loads at once. Each step of a sample has its own deadline and its
own failure: a broker that is down leaves its log dirs out, it does not stop the overview from
showing the under-replicated partitions it left behind. Wall-clock time comes from the
injected ``clock``.

Imports josefk.client only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from josefk.client import AIOAdmin, ClusterDescription, GroupListing, TopicDescription
from josefk.client.errors import KafkaError
from josefk.client.types import TopicPartition
from josefk.console.history import History
from josefk.console.metrics import MetricsScraper

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(slots=True)
class Snapshot:
    """What the cluster looked like at ``taken_ms`` (each part may be older when its step
    failed: it keeps the previous value and ``errors`` says why)."""

    taken_ms: int = 0
    cluster: ClusterDescription | None = None
    topics: dict[str, TopicDescription] = field(default_factory=dict)
    log_start: dict[TopicPartition, int] = field(default_factory=dict)
    log_end: dict[TopicPartition, int] = field(default_factory=dict)
    sizes: dict[TopicPartition, int] = field(default_factory=dict)
    groups: list[GroupListing] = field(default_factory=list)
    group_lag: dict[str, int] = field(default_factory=dict)
    group_committed: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


class Sampler:
    """Takes a ``Snapshot`` every ``interval`` seconds until closed; ``refresh()`` takes one
    now (after an action, so that the next page shows its effect)."""

    def __init__(
        self,
        admin: AIOAdmin,
        history: History,
        *,
        interval: float = 5.0,
        metrics: MetricsScraper | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.admin = admin
        self.history = history
        self.interval = interval
        self.metrics = metrics
        self.clock = clock
        self.snapshot = Snapshot()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._first = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def ready(self) -> None:
        """Wait for the first snapshot (callers bound the wait with ``asyncio.timeout``)."""
        await self._first.wait()

    async def _run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.interval)

    async def refresh(self) -> Snapshot:
        async with self._lock:
            try:
                await self._sample()
            except Exception:  # the sampler must outlive any one bad answer
                log.exception("sampling the cluster failed")
            finally:
                self._first.set()
        return self.snapshot

    async def _step(self, name: str, work: Awaitable[T]) -> T | None:
        """One part of a sample, with its deadline; its failure is noted, not raised."""
        try:
            async with asyncio.timeout(max(self.interval * 2, 5.0)):
                result = await work
        except (KafkaError, TimeoutError, OSError) as exc:
            self.snapshot.errors[name] = str(exc) or type(exc).__name__
            return None
        self.snapshot.errors.pop(name, None)
        return result

    async def _sample(self) -> None:
        snap = self.snapshot
        admin = self.admin
        cluster = await self._step("cluster", admin.describe_cluster())
        if cluster is not None:
            snap.cluster = cluster
        topics = await self._step("topics", admin.describe_topics(None))
        if topics is not None:
            snap.topics = {t.name: t for t in topics}
        now_ms = int(self.clock() * 1000)
        snap.taken_ms = now_ms
        tps = [
            TopicPartition(t.name, p.partition) for t in snap.topics.values() for p in t.partitions
        ]
        groups = await self._step("groups", admin.list_groups())
        if groups is not None:
            snap.groups = groups
        # Committed offsets before log end offsets, as Kafka's tools read them: the other way
        # round, commits made between the two reads would pass the stale ends and the lag
        # would read 0 while the group is behind.
        committed = await self._step("group_offsets", self._group_offsets(snap.groups))
        ends, starts, sizes = await asyncio.gather(
            self._step("log_end", self._offsets(tps, admin.LATEST)),
            self._step("log_start", self._offsets(tps, admin.EARLIEST)),
            self._step("log_dirs", self._leader_sizes()),
        )
        if ends is not None:
            snap.log_end = ends
        if starts is not None:
            snap.log_start = starts
        if sizes is not None:
            snap.sizes = sizes
        if committed is not None:
            lags: dict[str, int] = {}
            sums: dict[str, int] = {}
            for group_id, offsets in committed.items():
                lags[group_id] = sum(
                    max(0, snap.log_end[tp] - offset)
                    for tp, offset in offsets.items()
                    if tp in snap.log_end
                )
                sums[group_id] = sum(offsets.values())
            snap.group_lag, snap.group_committed = lags, sums
        self._record(now_ms, ends is not None, sizes is not None, committed is not None)
        if self.metrics is not None:
            totals = await self._step("metrics", self.metrics.scrape())
            if totals is not None:
                for name in ("bytes_in", "bytes_out"):
                    if name in totals:
                        self.history.add(name, now_ms, totals[name])

    def _record(self, now_ms: int, ends: bool, sizes: bool, committed: bool) -> None:
        snap, history = self.snapshot, self.history
        user_topics = {name for name, t in snap.topics.items() if not t.is_internal}
        if ends:
            per_topic: dict[str, int] = {}
            for tp, offset in snap.log_end.items():
                if tp.topic in user_topics:
                    per_topic[tp.topic] = per_topic.get(tp.topic, 0) + offset
            history.add("records_in", now_ms, sum(per_topic.values()))
            for name, total in per_topic.items():
                history.add(f"topic:{name}", now_ms, total)
            history.retain((f"topic:{n}" for n in per_topic), prefix="topic:")
        if sizes and self.metrics is None:
            history.add(
                "bytes_in",
                now_ms,
                sum(size for tp, size in snap.sizes.items() if tp.topic in user_topics),
            )
        if committed:
            history.add("records_out", now_ms, sum(snap.group_committed.values()))
            for group_id, lag in snap.group_lag.items():
                history.add(f"lag:{group_id}", now_ms, lag)
            history.retain((f"lag:{g}" for g in snap.group_lag), prefix="lag:")

    async def _offsets(
        self, tps: Sequence[TopicPartition], which: int
    ) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        found = await self.admin.list_offsets({tp: which for tp in tps})
        return {tp: hit.offset for tp, hit in found.items() if hit is not None}

    async def _leader_sizes(self) -> dict[TopicPartition, int]:
        """Each partition's size on its leader (DescribeLogDirs of every live broker; a broker
        that does not answer is left out)."""
        leaders = {
            TopicPartition(t.name, p.partition): p.leader
            for t in self.snapshot.topics.values()
            for p in t.partitions
        }
        cluster = self.snapshot.cluster
        brokers = [b.node_id for b in cluster.brokers] if cluster is not None else []

        async def one(broker_id: int) -> dict[TopicPartition, int]:
            out: dict[TopicPartition, int] = {}
            try:
                dirs = await self.admin.describe_log_dirs(broker_id)
            except KafkaError:
                return out
            for d in dirs:
                for p in d.partitions:
                    tp = TopicPartition(p.topic, p.partition)
                    if leaders.get(tp) == broker_id:
                        out[tp] = p.size
            return out

        sizes: dict[TopicPartition, int] = {}
        for part in await asyncio.gather(*(one(b) for b in brokers)):
            sizes.update(part)
        return sizes

    async def _group_offsets(
        self, groups: Sequence[GroupListing]
    ) -> dict[str, dict[TopicPartition, int]]:
        semaphore = asyncio.Semaphore(16)

        async def one(group_id: str) -> tuple[str, dict[TopicPartition, int]]:
            async with semaphore:
                try:
                    return group_id, await self.admin.list_group_offsets(group_id)
                except KafkaError:
                    return group_id, {}

        found = await asyncio.gather(*(one(g.group_id) for g in groups))
        return dict(found)


def under_replicated(topic: TopicDescription) -> int:
    return sum(1 for p in topic.partitions if len(p.isr) < len(p.replicas))


def offline(topic: TopicDescription) -> int:
    return sum(1 for p in topic.partitions if p.leader < 0)
