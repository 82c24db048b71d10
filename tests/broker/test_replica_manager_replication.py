"""Replication in the replica manager: acks=all produces wait in the produce purgatory until
the ISR has the records (and fail as Kafka answers when they cannot be satisfied); follower
fetches read past the high watermark, move it, and bring lagging replicas back into the ISR.
Real logs and a real catalog; followers are simulated by their fetch requests."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
from log_helpers import producer_batch

from josefk.broker.partition import (
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    Partition,
    RequestTimedOutError,
)
from josefk.broker.replica_manager import (
    FetchPartition,
    ReplicaManager,
    UnknownTopicOrPartitionError,
)
from josefk.cluster.metadata_store import PartitionState
from josefk.storage.offsets import FetchIsolation, TopicPartition

TP = TopicPartition("t", 0)


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
    replicas.partition_changed(TP)
    await asyncio.wait_for(waiter, 10)
    assert isinstance(outcomes[0].error, NotEnoughReplicasAfterAppendError)


async def test_leadership_moves_while_waiting(replicas: ReplicaManager) -> None:
    partition = lead(replicas, (0, 1, 2))
    outcomes = produce(replicas)
    waiter = asyncio.create_task(replicas.wait_for_acks(outcomes, 60_000))
    await asyncio.sleep(0)
    partition.make_follower(PartitionState((0, 1, 2), 1, 2, (1, 2), 2))
    replicas.partition_changed(TP)
    await asyncio.wait_for(waiter, 10)
    assert isinstance(outcomes[0].error, NotLeaderOrFollowerError)
    again = produce(replicas)
    assert isinstance(again[0].error, NotLeaderOrFollowerError)


async def test_unknown_partition(replicas: ReplicaManager) -> None:
    outcomes = replicas.append_records(
        [(TopicPartition("nope", 0), memoryview(producer_batch(1)))], acks=1
    )
    assert isinstance(outcomes[0].error, UnknownTopicOrPartitionError)


async def fetch(
    replicas: ReplicaManager, replica_id: int, offset: int, *, epoch: int = -1, wait_ms: int = 0
) -> tuple[int, int, BaseException | None]:
    """(bytes read, high watermark, error) of a one-partition fetch."""
    [outcome] = await replicas.fetch(
        [FetchPartition(TP, offset, 1 << 20, current_leader_epoch=epoch)],
        replica_id=replica_id,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation=FetchIsolation.HIGH_WATERMARK,
    )
    read = outcome.read
    return (read.info.size if read else 0, read.high_watermark if read else -1, outcome.error)


async def test_followers_read_past_the_high_watermark_and_move_it(
    replicas: ReplicaManager,
) -> None:
    lead(replicas, (0, 1, 2))
    outcomes = produce(replicas)
    waiter = asyncio.create_task(replicas.wait_for_acks(outcomes, 60_000))
    size, hw, error = await fetch(replicas, -1, 0)
    assert (size, hw, error) == (0, 0, None)  # a consumer sees nothing uncommitted
    size, _, _ = await fetch(replicas, 1, 0)
    assert size > 0  # a follower gets the records at once
    await fetch(replicas, 2, 0)
    await fetch(replicas, 1, 3)  # 1 now has offsets 0-2...
    assert not waiter.done()
    await fetch(replicas, 2, 3)  # ...and 2 too: the HW passes the produce
    await asyncio.wait_for(waiter, 10)
    assert outcomes[0].error is None
    size, hw, _ = await fetch(replicas, -1, 0)
    assert size > 0 and hw == 3


async def test_a_caught_up_follower_is_proposed_for_the_isr(replicas: ReplicaManager) -> None:
    replicas.append_records([(TP, memoryview(producer_batch(2)))], acks=1)
    lead(replicas, (0, 1))  # this epoch begins at offset 2
    proposals: list[list[int]] = []
    replicas.isr_proposer = lambda partition, isr: proposals.append(isr)
    await fetch(replicas, 2, 0)
    assert proposals == []  # short of the HW and of where the epoch began (2)
    await fetch(replicas, 1, 2)  # 1 moves the HW to 2
    await fetch(replicas, 2, 2)  # 2 has reached it
    assert proposals == [[0, 1, 2]]


async def test_fetch_errors(replicas: ReplicaManager) -> None:
    partition = lead(replicas, (0, 1, 2), epoch=4)
    assert isinstance((await fetch(replicas, -1, 0, epoch=3))[2], FencedLeaderEpochError)
    partition.make_follower(PartitionState((0, 1, 2), 1, 5, (1, 2), 6))
    assert isinstance((await fetch(replicas, -1, 0))[2], NotLeaderOrFollowerError)
