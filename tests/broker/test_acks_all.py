"""acks=all in the replica manager: a produce waits in the produce purgatory until the ISR
has the records, and fails as Kafka answers when it cannot be satisfied. Real logs and a real
catalog; followers are simulated by the fetch offsets the leader would see."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
from log_helpers import NOW, producer_batch

from josefk.broker.catalog import TopicCatalog
from josefk.broker.partition import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    Partition,
    RequestTimedOutError,
)
from josefk.broker.replica_manager import ReplicaManager, UnknownTopicOrPartitionError
from josefk.cluster.metadata_store import PartitionState
from josefk.config.topic import LogConfig
from josefk.storage.clock import ManualClock
from josefk.storage.manager import LogManager, LogManagerConfig
from josefk.storage.offsets import TopicPartition
from josefk.storage.scheduler import InlineExecutor, Scheduler

TP = TopicPartition("t", 0)


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[ReplicaManager]:
    clock = ManualClock(wall_ms=NOW)
    logs = LogManager(
        LogManagerConfig(log_dirs=(tmp_path,)),
        LogConfig(min_insync_replicas=2),
        clock=clock,
        scheduler=Scheduler(clock),
        executor=InlineExecutor(),
    )
    await logs.startup()
    manager = ReplicaManager(
        logs, TopicCatalog.load(tmp_path), broker_id=0, default_log_config=LogConfig()
    )
    manager.create_topic("t", 1, {"min.insync.replicas": "2"})
    yield manager
    await logs.shutdown()


def lead(replicas: ReplicaManager, isr: tuple[int, ...], epoch: int = 1) -> Partition:
    partition = replicas.get_partition("t", 0)
    assert partition is not None
    partition.make_leader(PartitionState((0, 1, 2), 0, epoch, isr, epoch))
    return partition


def produce(replicas: ReplicaManager, count: int = 3) -> list:  # type: ignore[type-arg]
    return replicas.append_records([(TP, memoryview(producer_batch(count)))], acks=-1)


async def test_acks_all_waits_for_every_in_sync_replica(replicas: ReplicaManager) -> None:
    partition = lead(replicas, (0, 1, 2))
    outcomes = produce(replicas)
    assert outcomes[0].error is None and outcomes[0].info.last_offset == 2
    assert replicas.must_wait_for_acks(outcomes)
    waiter = asyncio.create_task(replicas.wait_for_acks(outcomes, 60_000))
    await asyncio.sleep(0)
    if partition.update_follower_fetch_state(1, 3, 0):
        replicas.high_watermark_moved(TP)
    await asyncio.sleep(0)
    assert not waiter.done()  # replica 2 has nothing yet
    assert partition.update_follower_fetch_state(2, 3, 0)
    replicas.high_watermark_moved(TP)
    await asyncio.wait_for(waiter, 10)
    assert outcomes[0].error is None and partition.log.high_watermark == 3


async def test_acks_all_times_out(replicas: ReplicaManager) -> None:
    lead(replicas, (0, 1, 2))
    outcomes = produce(replicas)
    await replicas.wait_for_acks(outcomes, 0)
    assert isinstance(outcomes[0].error, RequestTimedOutError)
    # The records stay in the log: Kafka's timeout says "not known to be replicated".
    partition = replicas.get_partition("t", 0)
    assert partition is not None and partition.log.log_end_offset == 3


async def test_too_few_in_sync_replicas(replicas: ReplicaManager) -> None:
    partition = lead(replicas, (0,))
    outcomes = produce(replicas)
    assert isinstance(outcomes[0].error, NotEnoughReplicasError)
    assert partition.log.log_end_offset == 0  # refused before the append
    ok = replicas.append_records([(TP, memoryview(producer_batch(1)))], acks=1)
    assert ok[0].error is None  # acks=1 does not ask for replicas


async def test_the_isr_shrinks_while_waiting(replicas: ReplicaManager) -> None:
    partition = lead(replicas, (0, 1))
    outcomes = produce(replicas)
    waiter = asyncio.create_task(replicas.wait_for_acks(outcomes, 60_000))
    await asyncio.sleep(0)
    partition.apply_isr(PartitionState((0, 1, 2), 0, 1, (0,), 2))
    replicas.high_watermark_moved(TP)
    await asyncio.wait_for(waiter, 10)
    assert isinstance(outcomes[0].error, NotEnoughReplicasAfterAppendError)


async def test_leadership_moves_while_waiting(replicas: ReplicaManager) -> None:
    partition = lead(replicas, (0, 1, 2))
    outcomes = produce(replicas)
    waiter = asyncio.create_task(replicas.wait_for_acks(outcomes, 60_000))
    await asyncio.sleep(0)
    partition.make_follower(PartitionState((0, 1, 2), 1, 2, (1, 2), 2))
    replicas.high_watermark_moved(TP)
    await asyncio.wait_for(waiter, 10)
    assert isinstance(outcomes[0].error, NotLeaderOrFollowerError)
    again = produce(replicas)
    assert isinstance(again[0].error, NotLeaderOrFollowerError)


async def test_unknown_partition(replicas: ReplicaManager) -> None:
    outcomes = replicas.append_records(
        [(TopicPartition("nope", 0), memoryview(producer_batch(1)))], acks=1
    )
    assert isinstance(outcomes[0].error, UnknownTopicOrPartitionError)
