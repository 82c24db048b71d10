"""The group coordinator inside a real (in-process) Broker: ``__consumer_offsets`` is created
as Kafka creates it, commits land in the coordinator partition's log with Kafka's schemas, and
a restarted broker loads them back."""

from __future__ import annotations

from pathlib import Path

from josefk.broker.group.coordinator import GroupCoordinator, OffsetCommitEntry
from josefk.broker.group.offsets_schema import (
    OffsetKey,
    decode_key,
    decode_offset_value,
)
from josefk.broker.group.store import OFFSETS_TOPIC
from josefk.broker.server import Broker
from josefk.config.broker import BrokerConfig
from josefk.protocol.errors import ErrorCode
from josefk.records import split_batches
from josefk.records.record import iter_records
from josefk.storage.offsets import FetchIsolation


def config_for(data: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(data),
            "offsets.topic.num.partitions": "3",
            "josefk.metrics.enable": "false",
        }
    )


async def started(data: Path) -> tuple[Broker, GroupCoordinator]:
    broker = Broker(config_for(data))
    await broker.start()
    assert broker.group_coordinator is not None
    return broker, broker.group_coordinator


async def test_offsets_topic_is_created_compacted_and_reloaded(tmp_path: Path) -> None:
    broker, coordinator = await started(tmp_path)
    try:
        assert broker.replica_manager is not None and broker.local_topics is not None
        info = broker.replica_manager.catalog.get(OFFSETS_TOPIC)
        assert info is not None and info.is_internal and info.partitions == 3
        assert info.configs["cleanup.policy"] == "compact"
        broker.local_topics.create_topic_now("t", 2, {})
        errors = coordinator.commit_offsets(
            "g", -1, "", None, [OffsetCommitEntry("t", 0, 5, 3, "m"), OffsetCommitEntry("t", 1, 8)]
        )
        assert errors == [ErrorCode.NONE, ErrorCode.NONE]
        coordinator.commit_offsets("gone", -1, "", None, [OffsetCommitEntry("t", 0, 1)])
        assert coordinator.delete_groups(["gone"]) == [ErrorCode.NONE]

        partition = broker.replica_manager.get_partition(
            OFFSETS_TOPIC, coordinator.partition_for("g")
        )
        assert partition is not None
        read = partition.log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK)
        assert read.records is not None
        [batch, *_] = list(split_batches(read.records.read()))
        records = list(iter_records(batch))
        assert [decode_key(r.key) for r in records if r.key is not None][:2] == [
            OffsetKey("g", "t", 0),
            OffsetKey("g", "t", 1),
        ]
        assert records[0].value is not None
        value = decode_offset_value(records[0].value)
        assert (value.offset, value.leader_epoch, value.metadata) == (5, 3, "m")
    finally:
        await broker.stop()

    broker, coordinator = await started(tmp_path)
    try:
        fetched = {
            (t, p): (c.offset, c.metadata)
            for t, p, c in coordinator.fetch_offsets("g", None)
            if c is not None
        }
        assert fetched == {("t", 0): (5, "m"), ("t", 1): (8, "")}
        assert coordinator.group("gone") is None
    finally:
        await broker.stop()


async def test_a_commit_too_large_for_the_offsets_topic_is_refused(tmp_path: Path) -> None:
    broker, coordinator = await started(tmp_path)
    try:
        # 400 partitions with 4000 bytes of metadata each: one batch beyond message.max.bytes.
        entries = [OffsetCommitEntry("t", p, 1, -1, "m" * 4000) for p in range(400)]
        errors = coordinator.commit_offsets("big", -1, "", None, entries)
        assert set(errors) == {ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
        assert coordinator.fetch_offsets("big", [("t", 0)]) == [("t", 0, None)]
    finally:
        await broker.stop()
