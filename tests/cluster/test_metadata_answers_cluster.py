"""In a cluster, a Metadata answer for all topics follows the etcd view the moment the watcher
has applied a change, although the broker reuses each topic's entry between requests
(issue 34): a new ISR, a new leader and epoch, a replica's broker gone (offline replicas, no
leader), this broker fenced, and a topic grown, all within the same etcd revision history.

A real etcd and a real ClusterWatcher; the Metadata handler is called with the cluster's
metadata source and a catalog mirroring the view, as the cluster node keeps it."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from etcd_server import EtcdServer
from view_recorder import Recorder, store_on

from josefk.broker.catalog import TopicCatalog, TopicInfo
from josefk.broker.handlers.metadata import handle_metadata
from josefk.broker.metadata_cache import ClusterMetadata, TopicMemo
from josefk.cluster.metadata_store import (
    BrokerRegistration,
    EndpointRecord,
    PartitionState,
    TopicRecord,
)
from josefk.cluster.watcher import ClusterWatcher, ViewChange
from josefk.protocol.message_types import MetadataRequest, MetadataResponse

pytestmark = pytest.mark.timeout(90)

TOPIC_ID = "9b5a3d2e-1c4f-4a6b-8d7e-0f1a2b3c4d5e"


class Asker:
    """Asks the Metadata handler for all topics as broker 1 would be asked."""

    def __init__(self, metadata: ClusterMetadata, catalog: TopicCatalog) -> None:
        self.broker = SimpleNamespace(
            replica_manager=SimpleNamespace(catalog=catalog),
            authorizer=None,
            metadata=metadata,
            cluster_id="c1",
            metadata_topics=TopicMemo(),
        )

    def all_topics(self, version: int = 12) -> dict[str, Any]:
        context: Any = SimpleNamespace(
            broker=self.broker,
            api_version=version,
            connection=SimpleNamespace(listener_name="PLAINTEXT"),
        )
        response = handle_metadata(context, MetadataRequest(topics=None))
        MetadataResponse.COMPILED.encode(response, version)  # answerable as built
        return {t.name: t for t in response.topics}


def partitions(topic: Any) -> list[tuple[int, int, int, list[int], list[int], list[int]]]:
    return [
        (
            p.leader_id,
            p.leader_epoch,
            p.error_code,
            p.replica_nodes,
            p.isr_nodes,
            p.offline_replicas,
        )
        for p in topic.partitions
    ]


async def test_every_change_of_the_view_is_answered(etcd: EtcdServer, tmp_path: Path) -> None:
    writer, reader = await store_on(etcd), await store_on(etcd)
    recorder = Recorder()
    watcher = ClusterWatcher(reader, recorder)
    sessions = []
    try:
        await writer.ensure_cluster_id("c1")
        for broker_id in (1, 2):
            session = await writer.open_session()
            sessions.append(session)
            endpoint = EndpointRecord("PLAINTEXT", "127.0.0.1", 9090 + broker_id)
            await writer.register_broker(BrokerRegistration(broker_id, (endpoint,)), session)
        claim = await writer.try_become_controller(1, sessions[0])
        assert claim is not None
        start = PartitionState((1, 2), 1, 0, (1, 2))
        await writer.create_topic(claim, TopicRecord("t", TOPIC_ID, 1), [start])
        await watcher.start()
        catalog = TopicCatalog(tmp_path)
        catalog.put(TopicInfo("t", uuid.UUID(TOPIC_ID), 1))
        metadata = ClusterMetadata(lambda: watcher.view, local_broker_id=1)
        asker = Asker(metadata, catalog)

        first = asker.all_topics()["t"]
        assert partitions(first) == [(1, 0, 0, [1, 2], [1, 2], [])]
        assert asker.all_topics()["t"] is first  # nothing changed: the entry is reused

        async def caught_up() -> None:
            versioned = await writer.partition_state("t", 0)
            assert versioned is not None
            await watcher.caught_up(versioned.mod_revision)

        # The leader's ISR change (AlterPartition).
        versioned = await writer.partition_state("t", 0)
        assert versioned is not None
        altered = await writer.alter_partition("t", 0, versioned, [1])
        assert altered is not None
        await watcher.caught_up(altered.mod_revision)
        assert partitions(asker.all_topics()["t"]) == [(1, 0, 0, [1, 2], [1], [])]

        # The controller elects broker 2 in a new epoch.
        current = await writer.partition_state("t", 0)
        assert current is not None
        moved = replace(current.state, leader=2, leader_epoch=1, isr=(1, 2))
        assert await writer.controller_set_partition(claim, "t", 0, current, moved)
        await caught_up()
        assert partitions(asker.all_topics()["t"]) == [(2, 1, 0, [1, 2], [1, 2], [])]

        # Broker 2's session ends: its replica is offline and the partition has no leader.
        await sessions[1].close()
        await recorder.until(ViewChange("broker", 2, removed=True))
        assert partitions(asker.all_topics()["t"]) == [(-1, 1, 5, [1, 2], [1, 2], [2])]

        # Broker 1 leads again, then is fenced (its etcd session lost, as the node marks it).
        current = await writer.partition_state("t", 0)
        assert current is not None
        back = replace(current.state, leader=1, leader_epoch=2)
        assert await writer.controller_set_partition(claim, "t", 0, current, back)
        await caught_up()
        assert partitions(asker.all_topics()["t"])[0][:2] == (1, 2)
        metadata.fenced = True
        assert partitions(asker.all_topics()["t"])[0][:2] == (-1, 2)
        metadata.fenced = False
        assert partitions(asker.all_topics()["t"])[0][:2] == (1, 2)

        # The topic grows to two partitions: record and catalog name the new one.
        grown = PartitionState((1,), 1, 0, (1,))
        topic_key = writer.key("topics", "t")
        assert await writer.controller_write(
            claim,
            [
                (writer.key("partitions", "t", 1), grown.encode()),
                (topic_key, TopicRecord("t", TOPIC_ID, 2).encode()),
            ],
        )
        revision = await writer.topic_revision("t")
        assert revision is not None
        await watcher.caught_up(revision)
        catalog.set_partitions("t", 2)
        answer = partitions(asker.all_topics()["t"])
        assert answer[1] == (1, 0, 0, [1], [1], [])
    finally:
        await watcher.stop()
        for session in sessions:
            await session.close()
        await writer.close()
        await reader.close()
