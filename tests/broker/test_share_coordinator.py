"""The share coordinator (KIP-932) on an in-memory ``__share_group_state``: the records'
bytes, replaying snapshots and updates, fencing, snapshots every N updates, and the share
partition manager writing through it and reloading from it after a "restart"; the cluster
persister's routing to the coordinator leading a key and its retries while that moves."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from josefk.broker.partition import TopicPartition
from josefk.broker.share import records
from josefk.broker.share.coordinator import (
    MemoryStateLog,
    ShareCoordinator,
    share_state_partition,
)
from josefk.broker.share.manager import SharePartitionManager
from josefk.broker.share.partition import AcknowledgementBatch, AcknowledgeType, AcquiredRange
from josefk.broker.share.persister import ClusterPersister
from josefk.broker.share.records import (
    ShareSnapshotValue,
    ShareStateKey,
    ShareUpdateValue,
    StateBatch,
)
from josefk.broker.share.state_store import migrate_json_state
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.util.clock import ManualClock

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
KEY = ShareStateKey("g", TOPIC_ID, 0)


def test_key_bytes_are_type_group_topic_id_partition() -> None:
    raw = records.encode_key(records.SHARE_UPDATE, KEY)
    assert raw == b"\x00\x01" + b"\x00\x01g" + TOPIC_ID.bytes + b"\x00\x00\x00\x00"
    assert records.decode_key(raw) == (records.SHARE_UPDATE, KEY)


def test_values_round_trip_with_the_tagged_delivery_complete_count() -> None:
    batches = (StateBatch(5, 9, records.ACKNOWLEDGED, 1), StateBatch(10, 10, records.AVAILABLE, 3))
    snapshot = ShareSnapshotValue(2, 1, 7, 5, 1000, 2000, batches, delivery_complete_count=5)
    raw = records.encode_snapshot(snapshot)
    # Version 0, then the fixed fields: 2 + 3*4 + 3*8 bytes before the batches.
    assert raw[:2] == b"\x00\x00" and raw[38] == 3
    assert records.decode_snapshot(raw) == snapshot
    update = ShareUpdateValue(2, 7, -1, batches)
    assert records.decode_update(records.encode_update(update)) == update


def test_the_coordinator_key_hashes_as_kafka_names_it() -> None:
    # Kafka prints a Uuid in URL-safe base64 without padding.
    assert KEY.coordinator_key() == "g:EjRWeBI0VngSNFZ4EjRWeA:0"
    assert 0 <= share_state_partition(KEY, 50) < 50


def test_merge_lays_updates_over_kept_batches_and_cuts_below_start() -> None:
    kept = [StateBatch(0, 9, records.AVAILABLE, 1)]
    merged = records.merge_batches(kept, [StateBatch(3, 4, records.ACKNOWLEDGED, 1)], 2)
    assert merged == [
        StateBatch(2, 2, records.AVAILABLE, 1),
        StateBatch(3, 4, records.ACKNOWLEDGED, 1),
        StateBatch(5, 9, records.AVAILABLE, 1),
    ]


async def test_writes_replay_into_the_same_state_and_snapshot_every_n() -> None:
    log = MemoryStateLog(partition_count=3)
    coordinator = ShareCoordinator(log, ManualClock(), updates_per_snapshot=2)
    assert (await coordinator.read(KEY, 0)).state is None
    assert (
        await coordinator.write(KEY, state_epoch=0, leader_epoch=0, start_offset=0, batches=())
        is ErrorCode.NONE
    )
    for last in range(5):
        error = await coordinator.write(
            KEY,
            state_epoch=0,
            leader_epoch=0,
            start_offset=last,
            batches=[StateBatch(last, last + 1, records.AVAILABLE, 1)],
        )
        assert error is ErrorCode.NONE
    kinds = [records.decode_key(k)[0] for k, _ in log.log[coordinator.partition_for(KEY)]]
    # A snapshot first, then two updates per snapshot.
    assert kinds == [0, 1, 1, 0, 1, 1]
    replayed = ShareCoordinator(log, ManualClock())
    replayed.load()
    assert replayed.states[KEY].start_offset == 4
    assert replayed.states[KEY].batches == coordinator.states[KEY].batches


async def test_an_older_leader_epoch_is_fenced_and_a_newer_read_recorded() -> None:
    log = MemoryStateLog()
    coordinator = ShareCoordinator(log, ManualClock())
    await coordinator.write(KEY, state_epoch=0, leader_epoch=3, start_offset=0, batches=())
    assert (await coordinator.read(KEY, 4)).error is ErrorCode.NONE
    assert (
        await coordinator.write(KEY, state_epoch=0, leader_epoch=3, start_offset=9, batches=())
        is ErrorCode.FENCED_LEADER_EPOCH
    )
    assert (await coordinator.read(KEY, 2)).error is ErrorCode.FENCED_LEADER_EPOCH
    replayed = ShareCoordinator(log, ManualClock())
    replayed.load()
    assert replayed.states[KEY].leader_epoch == 4
    assert replayed.states[KEY].start_offset == 0


async def test_a_coordinator_of_other_partitions_answers_not_coordinator() -> None:
    coordinator = ShareCoordinator(MemoryStateLog(), ManualClock())
    coordinator.coordinate_by_leadership()
    assert (await coordinator.read(KEY, 0)).error is ErrorCode.NOT_COORDINATOR
    coordinator.load_partition(coordinator.partition_for(KEY))
    assert (await coordinator.read(KEY, 0)).error is ErrorCode.NONE


async def test_a_manager_restarted_on_the_log_keeps_acknowledged_and_frees_acquired() -> None:
    log = MemoryStateLog()
    tp = TopicPartition("t", 0)
    manager = SharePartitionManager(ManualClock(), persister=ShareCoordinator(log, ManualClock()))
    assert await manager.load("g", tp, TOPIC_ID, leader_epoch=0, start=0) is ErrorCode.NONE
    sp = manager.share_partition("g", tp, 0)
    sp.acquire("a", 0, 9, max_records=500, now_ms=0)
    accept, reject = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.REJECT)
    sp.acknowledge("a", [AcknowledgementBatch(0, 2, (accept,))])
    sp.acknowledge("a", [AcknowledgementBatch(4, 4, (reject,))])
    assert await manager.persist("g", tp) is ErrorCode.NONE

    coordinator = ShareCoordinator(log, ManualClock())
    coordinator.load()
    reloaded = SharePartitionManager(ManualClock(), persister=coordinator)
    assert await reloaded.load("g", tp, TOPIC_ID, leader_epoch=0, start=99) is ErrorCode.NONE
    again = reloaded.share_partition("g", tp, 99)
    assert again.start_offset == 3
    assert again.acquire("b", 0, 9, max_records=500, now_ms=0) == [
        AcquiredRange(3, 3, 2),
        AcquiredRange(5, 9, 2),
    ]


async def test_a_new_share_partition_writes_its_start_offset_first() -> None:
    log = MemoryStateLog()
    tp = TopicPartition("t", 0)
    manager = SharePartitionManager(ManualClock(), persister=ShareCoordinator(log, ManualClock()))
    await manager.load("g", tp, TOPIC_ID, leader_epoch=0, start=42)
    coordinator = ShareCoordinator(log, ManualClock())
    coordinator.load()
    assert coordinator.states[KEY].start_offset == 42


async def test_a_failed_write_is_the_acknowledgement_error() -> None:
    log = MemoryStateLog()
    tp = TopicPartition("t", 0)
    manager = SharePartitionManager(ManualClock(), persister=ShareCoordinator(log, ManualClock()))
    await manager.load("g", tp, TOPIC_ID, leader_epoch=0, start=0)
    log.fail_with = ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert await manager.persist("g", tp) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    log.fail_with = None
    assert await manager.persist("g", tp) is ErrorCode.NONE


class _Catalog:
    def get(self, name: str) -> object | None:
        return type("Info", (), {"topic_id": TOPIC_ID})() if name == "t" else None


async def test_json_state_files_are_moved_into_the_topic_once(tmp_path: Path) -> None:
    directory = tmp_path / "share-state"
    directory.mkdir()
    body = {"group": "g", "topic": "t", "partition": 0, "start_offset": 3}
    body["ranges"] = [[3, 4, 2, 1], [5, 6, 1, 2]]
    (directory / "x.json").write_text(json.dumps(body))
    coordinator = ShareCoordinator(MemoryStateLog(), ManualClock())
    assert await migrate_json_state(directory, coordinator, _Catalog()) == 1
    assert not directory.exists()
    state = coordinator.states[KEY]
    assert state.start_offset == 3
    # The acquired range is kept as available, with its delivery count.
    assert state.batches == [
        StateBatch(3, 4, records.ACKNOWLEDGED, 1),
        StateBatch(5, 6, records.AVAILABLE, 2),
    ]
    assert await migrate_json_state(directory, coordinator, _Catalog()) == 0


class _Leaders:
    """A metadata cache whose __share_group_state partitions are led by ``leaders`` in turn
    (the last one stays)."""

    def __init__(self, *leaders: int) -> None:
        self.leaders = list(leaders)
        self.asked = 0

    def partition(self, topic: str, partition: int) -> Any:
        self.asked += 1
        leader = self.leaders[0] if len(self.leaders) == 1 else self.leaders.pop(0)
        return SimpleNamespace(leader=leader)


def _answer(error: ErrorCode) -> Any:
    return SimpleNamespace(
        results=[SimpleNamespace(partitions=[SimpleNamespace(error_code=int(error))])]
    )


async def test_the_cluster_persister_routes_and_retries_while_the_coordinator_moves() -> None:
    local = ShareCoordinator(MemoryStateLog(), ManualClock())
    leaders = _Leaders(-1, 1)  # no leader yet, then this broker
    persister = ClusterPersister(
        local, lambda: cast(Any, leaders), lambda _: None, broker_id=1, retry_s=5.0
    )
    batches = [StateBatch(0, 4, records.ACKNOWLEDGED, 1)]
    written = await persister.write(
        KEY, state_epoch=0, leader_epoch=0, start_offset=5, batches=batches
    )
    assert written is ErrorCode.NONE and leaders.asked == 2
    assert (await persister.read(KEY, 0)).state is not None
    assert await persister.delete(KEY) is ErrorCode.NONE


async def test_the_cluster_persister_sends_to_a_remote_coordinator_and_reconnects() -> None:
    local = ShareCoordinator(MemoryStateLog(), ManualClock())
    persister = ClusterPersister(
        local, lambda: cast(Any, _Leaders(2)), lambda _: None, broker_id=1, retry_s=5.0
    )
    sent: list[ApiKey] = []
    answers: list[Any] = [ConnectionError("reset"), None, _answer(ErrorCode.NONE)]

    async def request(leader: int, api: ApiKey, _request: Any) -> Any:
        assert leader == 2
        sent.append(api)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    persister._request = request  # type: ignore[method-assign]
    # A failed connection, then no address, then the answer: retried through both.
    assert (
        await persister.write(KEY, state_epoch=0, leader_epoch=0, start_offset=0, batches=[])
        is ErrorCode.NONE
    )
    assert sent == [ApiKey.WRITE_SHARE_GROUP_STATE] * 3
    answers.append(_answer(ErrorCode.FENCED_LEADER_EPOCH))
    # Not a coordinator move: answered at once.
    assert await persister.delete(KEY) is ErrorCode.FENCED_LEADER_EPOCH
    answers.append(_answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    assert (await persister.read(KEY, 0)).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_the_lag_of_a_kept_state_counts_what_is_not_done_with() -> None:
    state = records.ShareState(
        start_offset=3,
        batches=[
            StateBatch(0, 2, records.ACKNOWLEDGED, 1),  # below the start: not counted twice
            StateBatch(3, 4, records.ACKNOWLEDGED, 1),
            StateBatch(5, 5, records.AVAILABLE, 2),
            StateBatch(6, 9, records.ARCHIVED, 5),
        ],
    )
    assert state.lag(10) == 1  # offset 5
    assert state.lag(7) == 1  # 3..6, of which 3, 4 and 6 are settled
    assert state.lag(3) == 0
