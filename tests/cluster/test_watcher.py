"""The watcher's view follows etcd by watch, and survives an etcd restart."""

from __future__ import annotations

import asyncio

import pytest
from etcd_server import EtcdServer
from view_recorder import Recorder, store_on

from josefk.cluster.metadata_store import (
    BrokerRegistration,
    EndpointRecord,
    PartitionState,
    TopicRecord,
)
from josefk.cluster.watcher import ClusterWatcher, ViewChange

pytestmark = pytest.mark.timeout(90)


async def test_the_view_follows_every_change(etcd: EtcdServer) -> None:
    writer, reader = await store_on(etcd), await store_on(etcd)
    recorder = Recorder()
    watcher = ClusterWatcher(reader, recorder)
    try:
        await writer.ensure_cluster_id("c1")
        await watcher.start()
        assert watcher.view.cluster_id == "c1"
        session = await writer.open_session()
        reg = BrokerRegistration(1, (EndpointRecord("PLAINTEXT", "127.0.0.1", 9092),))
        await writer.register_broker(reg, session)
        claim = await writer.try_become_controller(1, session)
        assert claim is not None
        await writer.create_topic(
            claim, TopicRecord("t", "id", 1), [PartitionState((1,), 1, 0, (1,))]
        )
        await recorder.until(ViewChange("partition", ("t", 0)))
        view = watcher.view
        assert set(view.brokers) == {1} and view.controller == claim
        assert view.partition("t", 0) == PartitionState((1,), 1, 0, (1,))
        await session.close()
        await recorder.until(ViewChange("broker", 1, removed=True))
        assert watcher.view.brokers == {} and watcher.view.controller is None
    finally:
        await watcher.stop()
        await writer.close()
        await reader.close()


async def test_an_etcd_restart_keeps_the_view_and_then_catches_up(etcd: EtcdServer) -> None:
    writer, reader = await store_on(etcd), await store_on(etcd)
    recorder = Recorder()
    watcher = ClusterWatcher(reader, recorder)
    try:
        session = await writer.open_session(ttl_s=30)
        claim = await writer.try_become_controller(1, session)
        assert claim is not None
        await writer.create_topic(
            claim, TopicRecord("t", "id", 1), [PartitionState((1,), 1, 0, (1,))]
        )
        await watcher.start()
        assert watcher.view.partition("t", 0) is not None
        await asyncio.wait_for(watcher.connected.wait(), timeout=30)

        etcd.stop()
        # While etcd is down the view is what it was: partitions keep their leaders.
        await asyncio.wait_for(watcher.disconnected.wait(), timeout=30)
        assert watcher.view.partition("t", 0) == PartitionState((1,), 1, 0, (1,))

        etcd.start()
        await writer.create_topic(
            claim, TopicRecord("u", "id2", 1), [PartitionState((1,), 1, 0, (1,))]
        )
        await recorder.until(ViewChange("partition", ("u", 0)))
        await asyncio.wait_for(watcher.connected.wait(), timeout=30)
        assert set(watcher.view.topics) == {"t", "u"}
        await session.close()
    finally:
        await watcher.stop()
        await writer.close()
        await reader.close()
