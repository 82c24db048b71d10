"""The acks=all produce purgatory wakes a produce only once the high watermark has passed its
offset (or its partition changed), and the fetch purgatory does not wake a follower's fetch
for a high watermark move that its own fetch made."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
from log_helpers import producer_batch

from josefk.broker.partition import Partition
from josefk.broker.purgatory import OffsetPurgatory
from josefk.broker.replica_manager import FetchPartition, ReplicaManager
from josefk.cluster.metadata_store import PartitionState
from josefk.storage.offsets import FetchIsolation, TopicPartition

TP = TopicPartition("t", 0)


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_advance_wakes_only_the_offsets_passed_in_order() -> None:
    purgatory = OffsetPurgatory("Produce")
    woken: list[int] = []

    async def park(offset: int) -> None:
        assert await purgatory.wait([("p", offset)], 60)
        woken.append(offset)

    tasks = [asyncio.create_task(park(o)) for o in (30, 10, 20, 40)]
    await settle()
    assert purgatory.size == 4
    purgatory.advance("p", 9)
    await settle()
    assert woken == []
    purgatory.advance("p", 25)
    await settle()
    assert woken == [10, 20]
    purgatory.advance("other", 100)
    await settle()
    assert woken == [10, 20]
    purgatory.notify("p")  # the partition changed: everyone re-checks
    await asyncio.gather(*tasks)
    assert sorted(woken[2:]) == [30, 40] and purgatory.size == 0


async def test_a_waiter_on_several_keys_leaves_none_behind() -> None:
    purgatory = OffsetPurgatory("Produce")
    waiter = asyncio.create_task(purgatory.wait([("a", 5), ("b", 7)], 60))
    await settle()
    purgatory.advance("b", 7)
    assert await waiter
    assert purgatory._heaps == {}  # its entry under "a" went with it
    # One that times out leaves nothing either, though its key never advanced.
    assert not await purgatory.wait([("a", 5)], 0.001)
    assert purgatory._heaps == {} and purgatory.size == 0


async def test_close_wakes_everyone_and_parks_no_more() -> None:
    purgatory = OffsetPurgatory("Produce")
    waiter = asyncio.create_task(purgatory.wait([("a", 5)], 60))
    await settle()
    purgatory.close()
    assert await waiter
    assert not await purgatory.wait([("a", 5)], 60)


def lead(replicas: ReplicaManager) -> Partition:
    partition = replicas.get_partition("t", 0)
    assert partition is not None
    partition.make_leader(PartitionState((0, 1, 2), 0, 1, (0, 1, 2), 1))
    return partition


def fetch(replicas: ReplicaManager, replica_id: int, offset: int) -> asyncio.Task[list]:  # type: ignore[type-arg]
    return asyncio.create_task(
        replicas.fetch(
            [FetchPartition(TP, offset, 1 << 20)],
            replica_id=replica_id,
            max_wait_ms=60_000,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation=FetchIsolation.HIGH_WATERMARK,
        )
    )


async def test_a_high_watermark_move_wakes_consumers_not_followers(
    replicas: ReplicaManager,
) -> None:
    partition = lead(replicas)
    replicas.append_records([(TP, memoryview(producer_batch(3)))], acks=-1)
    consumer = fetch(replicas, -1, 0)  # nothing below the high watermark (0) yet
    follower = fetch(replicas, 2, 3)  # follower 2 has all three records
    await settle()
    assert not consumer.done() and not follower.done()
    # Follower 1's fetch at offset 3 moves the high watermark to 3.
    assert partition.update_follower_fetch_state(1, 3, 0)
    replicas.high_watermark_moved(TP)
    outcomes = await asyncio.wait_for(consumer, 10)
    assert outcomes[0].read.info.size > 0
    await settle()
    assert not follower.done()  # no new records for it: it stays parked
    replicas.append_records([(TP, memoryview(producer_batch(1)))], acks=-1)
    outcomes = await asyncio.wait_for(follower, 10)
    assert outcomes[0].read.info.size > 0


async def test_a_role_change_wakes_every_waiter(replicas: ReplicaManager) -> None:
    partition = lead(replicas)
    outcomes = replicas.append_records([(TP, memoryview(producer_batch(3)))], acks=-1)
    produce = asyncio.create_task(replicas.wait_for_acks(outcomes, 60_000))
    follower = fetch(replicas, 2, 3)
    await settle()
    partition.make_follower(PartitionState((0, 1, 2), 1, 2, (1, 2), 2))
    replicas.partition_changed(TP)
    await asyncio.wait_for(produce, 10)
    assert outcomes[0].error is not None
    assert (await asyncio.wait_for(follower, 10))[0].error is not None
