"""A Metadata answer for all topics reflects every change the moment it is made, although
the broker reuses each topic's entry between requests (issue 34): a topic created, deleted or
grown, a partition's new leader epoch and ISR, a log dir failing (KAFKA_STORAGE_ERROR); and
an entry reused across versions carries each version's fields, never another request's
authorized operations.

An in-process single-node Broker; requests go over a real socket through josefk's own
protocol connection. The cluster's source (etcd) is tested in
tests/cluster/test_metadata_answers_cluster.py."""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from josefk.broker.metadata_cache import TopicMemo
from josefk.broker.partition import TopicPartition
from josefk.broker.server import Broker
from josefk.broker.topic_admin import LocalTopicAdmin
from josefk.client.connection import BrokerConnection
from josefk.cluster.values import PartitionState
from josefk.config.broker import BrokerConfig
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import MetadataRequest
from josefk.records import BatchBuilder
from josefk.storage.errors import KafkaStorageError
from josefk.storage.segment import LogSegment

pytestmark = pytest.mark.timeout(60)

NOT_REQUESTED = -(2**31)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "offsets.topic.num.partitions": "1",
            "auto.create.topics.enable": "false",
            "node.id": "0",
            "josefk.metrics.enable": "false",
        }
    )
    running = Broker(config)
    await running.start()
    yield running
    await running.stop(1)


@pytest.fixture
async def conn(broker: Broker) -> AsyncIterator[BrokerConnection]:
    endpoint = broker.endpoints[0]
    connection = await BrokerConnection.open(
        endpoint.host, endpoint.port, node_id=0, client_id="metadata-answers", timeout_s=10
    )
    yield connection
    connection.close()


def admin(broker: Broker) -> LocalTopicAdmin:
    assert broker.local_topics is not None
    return broker.local_topics


async def all_topics(conn: BrokerConnection, version: int = 12, **fields: Any) -> dict[str, Any]:
    """The all-topics answer (null topic list) by topic name, internal topics left out."""
    response = await conn.request(
        ApiKey.METADATA,
        MetadataRequest(topics=None, allow_auto_topic_creation=False, **fields),
        version=version,
    )
    return {t.name: t for t in response.topics if not t.is_internal}


def partitions(topic: Any) -> list[tuple[int, int, int, int, list[int], list[int]]]:
    return [
        (p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
        for p in topic.partitions
    ]


async def test_topic_created_grown_and_deleted(broker: Broker, conn: BrokerConnection) -> None:
    assert await all_topics(conn) == {}
    admin(broker).create_topic_now("a", 2, {})
    answer = await all_topics(conn)
    assert set(answer) == {"a"}
    assert partitions(answer["a"]) == [(0, 0, 0, 0, [0], [0]), (1, 0, 0, 0, [0], [0])]
    assert set(await all_topics(conn)) == {"a"}  # asked again: the same

    admin(broker).create_topic_now("b", 1, {})
    assert set(await all_topics(conn)) == {"a", "b"}

    await admin(broker).create_partitions("a", 3, assignments=None, validate_only=False)
    grown = (await all_topics(conn))["a"]
    assert [p.partition_index for p in grown.partitions] == [0, 1, 2]

    await admin(broker).delete_topic("a")
    assert set(await all_topics(conn)) == {"b"}

    # Deleted and created again under the same name: the new topic id, its partition count.
    admin(broker).create_topic_now("a", 1, {})
    again = (await all_topics(conn))["a"]
    assert again.topic_id == broker.replica_manager.catalog.get("a").topic_id  # type: ignore[union-attr]
    assert again.topic_id != grown.topic_id
    assert len(again.partitions) == 1


async def test_a_new_leader_epoch_and_isr_are_answered(
    broker: Broker, conn: BrokerConnection
) -> None:
    admin(broker).create_topic_now("t", 2, {})
    assert partitions((await all_topics(conn))["t"])[0] == (0, 0, 0, 0, [0], [0])
    replicas = broker.replica_manager
    assert replicas is not None
    replicas.apply_partition_state(TopicPartition("t", 0), PartitionState((0,), 0, 3, (0,)))
    answer = partitions((await all_topics(conn))["t"])
    assert answer == [(0, 0, 0, 3, [0], [0]), (1, 0, 0, 0, [0], [0])]


async def test_a_failed_log_dir_is_answered_as_a_storage_error(
    broker: Broker, conn: BrokerConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin(broker).create_topic_now("t", 1, {})
    assert [p.error_code for p in (await all_topics(conn))["t"].partitions] == [0]
    partition = broker.replica_manager.get_partition("t", 0)  # type: ignore[union-attr]
    assert partition is not None
    builder = BatchBuilder(base_offset=0)
    builder.append(b"k", b"v", timestamp=1_700_000_000_000)
    partition.append_records_to_leader(memoryview(builder.build()))  # unflushed

    def failing(self: LogSegment) -> None:
        raise OSError(errno.EIO, "Input/output error")

    # The disk fails under a flush: the log dir goes offline, as a real I/O error takes it.
    monkeypatch.setattr(LogSegment, "flush", failing)
    with pytest.raises(KafkaStorageError):
        await partition.log.flush_async()
    monkeypatch.undo()
    (entry,) = (await all_topics(conn))["t"].partitions
    assert entry.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert entry.leader_id == -1 and entry.offline_replicas == [0]


async def test_an_entry_answers_each_version_with_its_own_fields(
    broker: Broker, conn: BrokerConnection
) -> None:
    admin(broker).create_topic_now("t", 1, {})
    info = broker.replica_manager.catalog.get("t")  # type: ignore[union-attr]
    assert info is not None
    v12 = (await all_topics(conn, 12))["t"]
    assert v12.topic_id == info.topic_id and v12.partitions[0].leader_epoch == 0
    v1 = (await all_topics(conn, 1))["t"]
    assert v1.partitions[0].leader_id == 0 and v1.partitions[0].leader_epoch == -1  # not in v1

    # Authorized operations are asked for: the principal's (every operation without an
    # authorizer), then not asked for: the "not requested" marker again.
    asked = (await all_topics(conn, 8, include_topic_authorized_operations=True))["t"]
    assert asked.topic_authorized_operations not in (NOT_REQUESTED, 0)
    plain = (await all_topics(conn, 8))["t"]
    assert plain.topic_authorized_operations == NOT_REQUESTED


def test_the_memo_answers_only_for_the_same_source_generation_and_key() -> None:
    one, other = object(), object()
    memo: TopicMemo[str] = TopicMemo()
    memo.put(one, 1, "t", ("id", 1), "entry")  # type: ignore[arg-type]
    assert memo.get(one, 1, "t", ("id", 1)) == "entry"  # type: ignore[arg-type]
    assert memo.get(one, 1, "t", ("id", 2)) is None  # type: ignore[arg-type]
    assert memo.get(other, 1, "t", ("id", 1)) is None  # type: ignore[arg-type]
    assert memo.get(one, 2, "t", ("id", 1)) is None  # type: ignore[arg-type]
    memo.put(one, 2, "u", ("id", 1), "later")  # type: ignore[arg-type]
    # A new generation dropped everything built from the old one.
    assert memo.get(one, 2, "t", ("id", 1)) is None  # type: ignore[arg-type]
    assert memo.get(one, 2, "u", ("id", 1)) == "later"  # type: ignore[arg-type]
