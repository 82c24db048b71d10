"""Where a coordinator is: which broker leads the coordinator partition of a key.

Owns ``CoordinatorPlacement``, what FindCoordinator asks for the group, transaction and share
coordinators (handlers/groups.py, transactions.py, share_state.py), whichever kind of broker
answers: the broker picks the implementation once at start-up, as it picks its topic admin,
and the handlers never ask which one they have. A key's coordinator is the leader of the
key's partition of the coordinator's internal topic (``__consumer_offsets``,
``__transaction_state``, ``__share_group_state``), as in Kafka; the handler maps the key to
that partition (each coordinator knows its topic's partition count).

- ``LocalCoordinatorPlacement``: the single node coordinates every key, hosted yet or not.
- ``ClusterCoordinatorPlacement``: the partition's leader in the cluster's metadata; None
  while there is none (the topic is not created yet, or the partition has no leader right
  now), which the client hears as COORDINATOR_NOT_AVAILABLE and retries.
- ``UNPLACED``: before start-up chose (no listener is open then): every answer is None.

Imports the broker's metadata cache only; must not import josefk.protocol, the handlers or
josefk.cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from josefk.broker.metadata_cache import BrokerNode, MetadataCache

__all__ = [
    "UNPLACED",
    "ClusterCoordinatorPlacement",
    "CoordinatorPlacement",
    "LocalCoordinatorPlacement",
]


class CoordinatorPlacement(Protocol):
    def coordinator(self, topic: str, partition: int, listener_name: str) -> BrokerNode | None:
        """The broker leading ``partition`` of the internal ``topic``, as advertised on the
        listener ``listener_name`` (the one the asking client came in on); None while no
        broker does."""
        ...


class LocalCoordinatorPlacement:
    """The single node: this broker, at its endpoint on the asking listener."""

    def __init__(self, broker_id: int, endpoint: Callable[[str], tuple[str, int]]) -> None:
        self._broker_id = broker_id
        self._endpoint = endpoint

    def coordinator(self, topic: str, partition: int, listener_name: str) -> BrokerNode:
        host, port = self._endpoint(listener_name)
        return BrokerNode(self._broker_id, host, port)


class ClusterCoordinatorPlacement:
    """A cluster broker: the partition's leader as the cluster's metadata has it."""

    def __init__(self, metadata: MetadataCache) -> None:
        self._metadata = metadata

    def coordinator(self, topic: str, partition: int, listener_name: str) -> BrokerNode | None:
        view = self._metadata.partition(topic, partition)
        if view is None:
            return None
        for node in self._metadata.brokers(listener_name):
            if node.broker_id == view.leader:
                return node
        return None


class _Unplaced:
    def coordinator(self, topic: str, partition: int, listener_name: str) -> BrokerNode | None:
        return None


UNPLACED: Final[CoordinatorPlacement] = _Unplaced()
