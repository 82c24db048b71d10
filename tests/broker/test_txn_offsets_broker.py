"""Transactional offsets inside a real (in-process) Broker: TxnOffsetCommit and OffsetFetch go
over a socket through josefk's protocol connection, the offsets land in ``__consumer_offsets``
as a transactional batch of the request's producer, markers are written as WriteTxnMarkers
writes them (``ReplicaManager.append_txn_markers``, whose listener completes the offsets), and
a restarted broker replays open, committed and aborted transactions from the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from josefk.broker.group.coordinator import OffsetCommitEntry
from josefk.broker.group.offsets_schema import decode_offset_value
from josefk.broker.group.store import OFFSETS_TOPIC, TopicOffsetsStore
from josefk.broker.server import Broker
from josefk.client.connection import BrokerConnection
from josefk.config.broker import BrokerConfig
from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode
from josefk.records import split_batches
from josefk.storage.offsets import FetchIsolation, TopicPartition, TxnMarker

pytestmark = pytest.mark.timeout(60)

PID = 4242


def config_for(data: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(data),
            "offsets.topic.num.partitions": "3",
            "josefk.metrics.enable": "false",
        }
    )


async def started(data: Path) -> tuple[Broker, BrokerConnection]:
    broker = Broker(config_for(data))
    await broker.start()
    assert broker.replica_manager is not None and broker.local_topics is not None
    if broker.replica_manager.catalog.get("t") is None:
        broker.local_topics.create_topic_now("t", 2, {})
    endpoint = broker.endpoints[0]
    connection = await BrokerConnection.open(
        endpoint.host, endpoint.port, node_id=0, client_id="txn-offsets", timeout_s=10
    )
    return broker, connection


async def txn_offset_commit(
    connection: BrokerConnection,
    offsets: list[tuple[str, int, int]],
    *,
    version: int,
    epoch: int = 0,
    generation: int = -1,
    member: str = "",
) -> dict[tuple[str, int], int]:
    T = request_class(ApiKey.TXN_OFFSET_COMMIT)
    topics: dict[str, list[Any]] = {}
    for topic, partition, offset in offsets:
        topics.setdefault(topic, []).append(
            T.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata="m"
            )
        )
    request = T(
        transactional_id="tx",
        group_id="g",
        producer_id=PID,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member,
        topics=[T.TxnOffsetCommitRequestTopic(name=n, partitions=ps) for n, ps in topics.items()],
    )
    response = await connection.request(ApiKey.TXN_OFFSET_COMMIT, request, version=version)
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


async def offset_fetch(
    connection: BrokerConnection, *, version: int, require_stable: bool
) -> dict[tuple[str, int], tuple[int, int]]:
    """(offset, error) of t-0 and t-1 for group g."""
    F = request_class(ApiKey.OFFSET_FETCH)
    if version >= 8:
        request = F(
            groups=[
                F.OffsetFetchRequestGroup(
                    group_id="g",
                    topics=[
                        F.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                            name="t", partition_indexes=[0, 1]
                        )
                    ],
                )
            ],
            require_stable=require_stable,
        )
        response = await connection.request(ApiKey.OFFSET_FETCH, request, version=version)
        [group] = response.groups
        assert group.error_code == ErrorCode.NONE
        topics = group.topics
    else:
        request = F(
            group_id="g",
            topics=[F.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])],
            require_stable=require_stable,
        )
        response = await connection.request(ApiKey.OFFSET_FETCH, request, version=version)
        topics = response.topics
    return {
        (t.name, p.partition_index): (p.committed_offset, p.error_code)
        for t in topics
        for p in t.partitions
    }


def write_marker(broker: Broker, *, committed: bool, epoch: int = 0) -> None:
    replicas = broker.replica_manager
    coordinator = broker.group_coordinator
    assert replicas is not None and coordinator is not None
    tp = TopicPartition(OFFSETS_TOPIC, coordinator.partition_for("g"))
    [outcome] = replicas.append_txn_markers([(tp, TxnMarker(PID, epoch, 0, committed))])
    assert outcome.error is None


async def test_offsets_wait_for_the_commit_marker_and_require_stable_sees_them(
    tmp_path: Path,
) -> None:
    broker, connection = await started(tmp_path)
    try:
        errors = await txn_offset_commit(connection, [("t", 0, 10), ("nope", 0, 1)], version=3)
        assert errors == {
            ("t", 0): ErrorCode.NONE,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        for version in (6, 8):
            assert await offset_fetch(connection, version=version, require_stable=False) == {
                ("t", 0): (-1, ErrorCode.NONE),
                ("t", 1): (-1, ErrorCode.NONE),
            }
        for version in (7, 8):
            assert await offset_fetch(connection, version=version, require_stable=True) == {
                ("t", 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
                ("t", 1): (-1, ErrorCode.NONE),
            }
        # The offsets went in as a transactional batch of the producer.
        coordinator = broker.group_coordinator
        assert broker.replica_manager is not None and coordinator is not None
        partition = broker.replica_manager.get_partition(
            OFFSETS_TOPIC, coordinator.partition_for("g")
        )
        assert partition is not None
        read = partition.log.read(0, 1 << 20, FetchIsolation.LOG_END)
        assert read.records is not None
        [batch] = list(split_batches(read.records.read()))
        assert batch.is_transactional and batch.producer_id == PID
        assert partition.log.last_stable_offset == 0, "the transaction holds the LSO"

        write_marker(broker, committed=True)
        for version in (7, 8):
            assert await offset_fetch(connection, version=version, require_stable=True) == {
                ("t", 0): (10, ErrorCode.NONE),
                ("t", 1): (-1, ErrorCode.NONE),
            }
        # An older epoch of the producer is fenced by the partition's producer state.
        errors = await txn_offset_commit(connection, [("t", 1, 5)], version=0, epoch=0)
        assert errors == {("t", 1): ErrorCode.NONE}
        write_marker(broker, committed=False)
        errors = await txn_offset_commit(connection, [("t", 1, 6)], version=2, epoch=3)
        assert errors == {("t", 1): ErrorCode.NONE}
        errors = await txn_offset_commit(connection, [("t", 1, 7)], version=2, epoch=2)
        assert errors == {("t", 1): ErrorCode.INVALID_PRODUCER_EPOCH}
        # KIP-447: a member the group does not have.
        errors = await txn_offset_commit(
            connection, [("t", 1, 8)], version=3, epoch=3, generation=1, member="ghost"
        )
        assert errors == {("t", 1): ErrorCode.UNKNOWN_MEMBER_ID}
    finally:
        connection.close()
        await broker.stop()

    # Restart: t-0 committed, the aborted t-1 offset gone, epoch 3's t-1 offset still open.
    broker, connection = await started(tmp_path)
    try:
        assert await offset_fetch(connection, version=7, require_stable=True) == {
            ("t", 0): (10, ErrorCode.NONE),
            ("t", 1): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        }
        write_marker(broker, committed=True, epoch=3)
        assert await offset_fetch(connection, version=7, require_stable=True) == {
            ("t", 0): (10, ErrorCode.NONE),
            ("t", 1): (6, ErrorCode.NONE),
        }
    finally:
        connection.close()
        await broker.stop()


async def test_replay_after_the_cleaner_compacted_the_offsets_partition(tmp_path: Path) -> None:
    """The cleaner drops aborted records and superseded ones but keeps markers; what a load
    replays afterwards is what the coordinator had before."""
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path),
        "offsets.topic.num.partitions": "1",
        "offsets.topic.segment.bytes": "600",
        "log.cleaner.backoff.ms": "3600000",
        "log.cleaner.min.cleanable.ratio": "0.01",
        "josefk.metrics.enable": "false",
    }

    async def start() -> tuple[Broker, Any]:
        broker = Broker(BrokerConfig.from_properties(settings))
        await broker.start()
        assert broker.replica_manager is not None and broker.group_coordinator is not None
        return broker, broker.group_coordinator

    def marker(broker: Broker, producer_id: int, committed: bool) -> None:
        assert broker.replica_manager is not None
        tp = TopicPartition(OFFSETS_TOPIC, 0)
        marker = TxnMarker(producer_id, 0, 0, committed)
        [outcome] = broker.replica_manager.append_txn_markers([(tp, marker)])
        assert outcome.error is None

    def offsets(coordinator: Any) -> dict[tuple[str, int], int]:
        return {
            (t, p): c.offset for t, p, c in coordinator.fetch_offsets("g", None) if c is not None
        }

    broker, coordinator = await start()
    try:
        assert broker.replica_manager is not None and broker.local_topics is not None
        broker.local_topics.create_topic_now("t", 4, {})
        for round_ in range(20):
            errors = coordinator.commit_offsets(
                "g", -1, "", None, [OffsetCommitEntry("t", p, round_) for p in range(4)]
            )
            assert errors == [ErrorCode.NONE] * 4
        entries = [OffsetCommitEntry("t", 0, 100)]
        assert coordinator.txn_commit_offsets("g", 1, 0, -1, "", None, entries) == [0]
        marker(broker, 1, committed=True)
        entries = [OffsetCommitEntry("t", 1, 200)]
        assert coordinator.txn_commit_offsets("g", 2, 0, -1, "", None, entries) == [0]
        marker(broker, 2, committed=False)
        for round_ in range(20, 30):
            coordinator.commit_offsets("g", -1, "", None, [OffsetCommitEntry("t", 3, round_)])
        entries = [OffsetCommitEntry("t", 2, 300)]
        assert coordinator.txn_commit_offsets("g", 3, 0, -1, "", None, entries) == [0]
        before = offsets(coordinator)
        assert before == {("t", 0): 100, ("t", 1): 19, ("t", 2): 19, ("t", 3): 29}
        log_manager = broker.log_manager
        assert log_manager is not None
        store = TopicOffsetsStore(broker.replica_manager)

        def stored_offsets() -> list[int]:
            return [
                decode_offset_value(value).offset
                for batch in store.read(0)
                for _, value in batch.records
                if value is not None
            ]

        assert 200 in stored_offsets()
        records_before = len(stored_offsets())
        assert await log_manager.cleaner.clean_once()
        assert 200 not in stored_offsets(), "the aborted commit is cleaned away"
        assert len(stored_offsets()) < records_before
        markers = [b.control for b in store.read(0) if b.control is not None]
        assert len(markers) == 2, "markers are kept"
    finally:
        await broker.stop()

    broker, coordinator = await start()
    try:
        assert offsets(coordinator) == before
        assert coordinator.is_unstable("g", "t", 2)
        marker(broker, 3, committed=True)
        assert offsets(coordinator) == {**before, ("t", 2): 300}
    finally:
        await broker.stop()
