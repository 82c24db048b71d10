"""The cluster as the handlers describe it to clients: brokers, the controller, and who
leads each partition.

Owns ``MetadataCache`` (what Metadata, DescribeCluster and FindCoordinator read) and its two
sources: ``LocalMetadata`` for the embedded single node (this broker is the whole cluster,
filled from its own catalog and partitions) and ``ClusterMetadata`` (the etcd view a
``ClusterWatcher`` keeps current). Handlers never ask which one they have.

Each source has a ``generation``: a number that changes whenever any ``partition`` answer may
have (it may also change when none did). ``TopicMemo`` keeps what a handler built for a topic
from those answers while the generation stands, so that describing 10,000 unchanged
partitions does not rebuild them on every request (issue 34).

Imports josefk.cluster's value types and the broker's partition types; must not import
josefk.protocol or the handlers.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from josefk.broker.replica_manager import ReplicaManager
from josefk.cluster.values import ClusterView

__all__ = [
    "BrokerNode",
    "ClusterMetadata",
    "LocalMetadata",
    "MetadataCache",
    "PartitionView",
    "TopicMemo",
]

_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class BrokerNode:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionView:
    """A partition as Metadata reports it. ``leader`` -1: no leader (offline)."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    storage_error: bool = False


class MetadataCache(Protocol):
    @property
    def controller_id(self) -> int: ...

    def brokers(self, listener_name: str) -> list[BrokerNode]: ...

    def partition(self, topic: str, index: int) -> PartitionView | None: ...

    def generation(self) -> int:
        """Changes whenever ``partition`` may answer differently for any partition; equal
        numbers mean every ``partition`` answer is as it was."""
        ...


class TopicMemo(Generic[_V]):
    """What a handler built for each topic from one generation of one ``MetadataCache``,
    by topic name, with the ``key`` of what else it was built from (the catalog's topic id
    and partition count). All of it is dropped as soon as the generation moves, so nothing
    built from an older generation is ever returned and names of deleted topics do not pile
    up. Used on the event loop only; nothing here awaits."""

    def __init__(self) -> None:
        # The source and its generation the values were built from: generations of two
        # sources are unrelated numbers, so a value is only returned for its own source.
        self._source: MetadataCache | None = None
        self._generation = -1
        self._values: dict[str, tuple[Hashable, _V]] = {}

    def get(self, source: MetadataCache, generation: int, name: str, key: Hashable) -> _V | None:
        if source is not self._source or generation != self._generation:
            return None
        found = self._values.get(name)
        if found is None or found[0] != key:
            return None
        return found[1]

    def put(
        self, source: MetadataCache, generation: int, name: str, key: Hashable, value: _V
    ) -> None:
        if source is not self._source or generation != self._generation:
            self._values.clear()
            self._source = source
            self._generation = generation
        self._values[name] = (key, value)


class LocalMetadata:
    """The single node: one broker, its own partitions."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        endpoint: Callable[[str], tuple[str, int]],
        rack: str | None = None,
    ) -> None:
        self._broker_id = broker_id
        self._replicas = replicas
        self._endpoint = endpoint
        self._rack = rack

    @property
    def controller_id(self) -> int:
        return self._broker_id

    def brokers(self, listener_name: str) -> list[BrokerNode]:
        host, port = self._endpoint(listener_name)
        return [BrokerNode(self._broker_id, host, port, self._rack)]

    def generation(self) -> int:
        # Everything ``partition`` reads is the replica manager's partitions, their state and
        # their logs' offline flag; ``state_generation`` counts changes of exactly those.
        return self._replicas.state_generation()

    def partition(self, topic: str, index: int) -> PartitionView | None:
        partition = self._replicas.get_partition(topic, index)
        if partition is None:
            return None
        if partition.log.is_offline:
            return PartitionView(
                -1,
                partition.leader_epoch,
                tuple(partition.replicas),
                (),
                (self._broker_id,),
                storage_error=True,
            )
        return PartitionView(
            partition.leader_id,
            partition.leader_epoch,
            tuple(partition.replicas),
            tuple(partition.isr),
        )


class ClusterMetadata:
    """The cluster as etcd has it, through the watcher's view."""

    def __init__(self, view: Callable[[], ClusterView], *, local_broker_id: int = -1) -> None:
        self._view = view
        self._local_broker_id = local_broker_id
        # Set while this broker has lost its etcd session: the view may still name it leader
        # of partitions the controller has since moved, so it names no leader for those.
        self.fenced = False
        # What ``generation`` last saw: the view object (a resync replaces it), its count of
        # applied events, and ``fenced``; ``partition`` reads nothing else.
        self._generation = 0
        self._seen: tuple[ClusterView | None, int, bool] = (None, -1, False)

    @property
    def controller_id(self) -> int:
        controller = self._view().controller
        return controller.broker_id if controller is not None else -1

    def brokers(self, listener_name: str) -> list[BrokerNode]:
        nodes = []
        for broker_id, registration in sorted(self._view().brokers.items()):
            if self.fenced and broker_id == self._local_broker_id:
                continue  # not registered as far as it knows, as KRaft omits fenced brokers
            endpoints = registration.endpoints
            chosen = next((e for e in endpoints if e.listener == listener_name), None)
            if chosen is None and endpoints:
                chosen = endpoints[0]
            if chosen is not None:
                nodes.append(BrokerNode(broker_id, chosen.host, chosen.port, registration.rack))
        return nodes

    def generation(self) -> int:
        view = self._view()
        seen_view, seen_changes, seen_fenced = self._seen
        if view is not seen_view or view.changes != seen_changes or self.fenced != seen_fenced:
            self._generation += 1
            self._seen = (view, view.changes, self.fenced)
        return self._generation

    def partition(self, topic: str, index: int) -> PartitionView | None:
        view = self._view()
        state = view.partition(topic, index)
        if state is None:
            return None
        live = view.brokers
        leader = state.leader
        if leader not in live or (self.fenced and leader == self._local_broker_id):
            leader = -1
        return PartitionView(
            leader,
            state.leader_epoch,
            state.replicas,
            state.isr,
            tuple(b for b in state.replicas if b not in live),
        )
