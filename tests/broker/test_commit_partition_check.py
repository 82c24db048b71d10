"""Which partitions a group commit may name: those of the cluster's metadata, whoever hosts
them, and (in a cluster) those of a topic the broker's view has yet to bring in, waited for.

``existing_partitions`` is what OffsetCommit and TxnOffsetCommit ask before the coordinator;
here it runs against a stand-in metadata view and topic admin, the real-process side being
tests/cluster/test_groups_any_placement.py.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from josefk.broker.context import RequestContext
from josefk.broker.handlers.offsets import existing_partitions
from josefk.broker.metadata_cache import PartitionView
from josefk.broker.topic_admin import LocalTopicAdmin


class View:
    """A metadata view that knows ``counts`` (topic -> partitions)."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partition(self, topic: str, index: int) -> PartitionView | None:
        if index < self.counts.get(topic, 0):
            return PartitionView(leader=2, leader_epoch=0, replicas=(2,), isr=(2,))
        return None


class CatchingUp:
    """A cluster's topic admin whose view brings ``arriving`` in when it is waited for."""

    def __init__(self, view: View, arriving: dict[str, int]) -> None:
        self.view = view
        self.arriving = arriving
        self.waited: list[set[str]] = []

    async def await_topics(self, names: set[str]) -> None:
        self.waited.append(set(names))
        for name in names:
            if name in self.arriving:
                self.view.counts[name] = self.arriving[name]


def context(view: View, admin: CatchingUp | LocalTopicAdmin) -> RequestContext:
    broker = SimpleNamespace(metadata=view, topic_admin=admin, replica_manager=None)
    return cast(RequestContext, cast(Any, SimpleNamespace(broker=broker)))


async def test_partitions_hosted_elsewhere_exist() -> None:
    view = View({"orders": 2})
    cluster = CatchingUp(view, {})
    known = await existing_partitions(context(view, cluster), [("orders", 0), ("orders", 1)])
    assert known == {("orders", 0), ("orders", 1)}
    assert cluster.waited == []  # nothing unknown: no wait


async def test_a_topic_the_view_lacks_is_waited_for() -> None:
    view = View({})
    cluster = CatchingUp(view, {"fresh": 1})
    known = await existing_partitions(context(view, cluster), [("fresh", 0), ("absent", 0)])
    assert known == {("fresh", 0)}
    assert cluster.waited == [{"fresh", "absent"}]


async def test_a_partition_past_the_known_count_waits_for_its_topic() -> None:
    view = View({"grown": 1})
    cluster = CatchingUp(view, {"grown": 3})
    known = await existing_partitions(context(view, cluster), [("grown", 0), ("grown", 2)])
    assert known == {("grown", 0), ("grown", 2)}
    assert cluster.waited == [{"grown"}]


async def test_the_single_node_does_not_wait() -> None:
    view = View({"orders": 1})
    # The single node's topic admin: its catalog is the metadata, nothing to wait for.
    local = LocalTopicAdmin(cast(Any, None), broker_id=1)
    known = await existing_partitions(context(view, local), [("orders", 0), ("orders", 5)])
    assert known == {("orders", 0)}
