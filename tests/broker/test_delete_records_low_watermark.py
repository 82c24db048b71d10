"""DeleteRecords on a leader with followers (Kafka's delayed delete-records): the leader moves
its own log start offset at once, and the answer waits in the replica manager's DeleteRecords
purgatory until the low watermark (the smallest log start offset over the leader and every
follower on a live broker, as the followers report it in their fetches) reaches the offset;
REQUEST_TIMED_OUT at the timeout, NOT_LEADER_OR_FOLLOWER when leadership moves meanwhile.
Real logs and a real catalog; followers are simulated by their fetch requests. And the
follower's side: one fetch answer carrying a new high watermark and a log start offset past
the old one moves both."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
from log_helpers import producer_batch

from josefk.broker.partition import NotLeaderOrFollowerError, Partition, RequestTimedOutError
from josefk.broker.replica_fetcher import FetcherSettings, ReplicaFetcher
from josefk.broker.replica_manager import (
    DELETE_TO_HIGH_WATERMARK,
    DeleteRecordsOutcome,
    FetchPartition,
    ReplicaManager,
)
from josefk.cluster.metadata_store import PartitionState
from josefk.protocol.api import ApiKey, response_class
from josefk.storage.errors import OffsetOutOfRangeError
from josefk.storage.offsets import FetchIsolation, TopicPartition

TP = TopicPartition("t", 0)
RECORDS = 5


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def follower_fetch(
    replicas: ReplicaManager, replica_id: int, offset: int, log_start_offset: int
) -> None:
    """A follower's fetch from ``offset`` (its log end) reporting its ``log_start_offset``."""
    [outcome] = await replicas.fetch(
        [FetchPartition(TP, offset, 1 << 20, log_start_offset=log_start_offset)],
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation=FetchIsolation.HIGH_WATERMARK,
    )
    assert outcome.error is None


async def replicated_leader(replicas: ReplicaManager) -> Partition:
    """Broker 0 leads t-0 with followers 1 and 2, both holding offsets 0-4 from 0."""
    partition = replicas.get_partition("t", 0)
    assert partition is not None
    partition.make_leader(PartitionState((0, 1, 2), 0, 1, (0, 1, 2), 1))
    replicas.append_records([(TP, memoryview(producer_batch(RECORDS)))], acks=1)
    for follower in (1, 2):
        await follower_fetch(replicas, follower, RECORDS, 0)
    assert partition.log.high_watermark == RECORDS
    return partition


def delete_to(replicas: ReplicaManager, offset: int) -> DeleteRecordsOutcome:
    [outcome] = replicas.delete_records([(TP, offset)])
    return outcome


async def test_answered_once_every_follower_has_moved_its_log_start(
    replicas: ReplicaManager,
) -> None:
    partition = await replicated_leader(replicas)
    outcome = delete_to(replicas, 3)
    # The leader's own log start moved at once; the followers still start at 0.
    assert partition.log.log_start_offset == 3
    assert outcome.error is None and outcome.pending and outcome.low_watermark == 0
    waiter = asyncio.create_task(replicas.wait_for_low_watermark([outcome], 60_000))
    await settle()
    assert replicas.delete_records_purgatory.size == 1
    await follower_fetch(replicas, 1, RECORDS, 3)
    await follower_fetch(replicas, 2, RECORDS, 2)  # short of 3: not enough
    await settle()
    assert not waiter.done() and outcome.pending
    await follower_fetch(replicas, 2, RECORDS, 3)
    await asyncio.wait_for(waiter, 10)
    assert outcome.error is None and not outcome.pending and outcome.low_watermark == 3
    assert replicas.delete_records_purgatory.size == 0


async def test_a_single_replica_answers_at_once(replicas: ReplicaManager) -> None:
    partition = replicas.get_partition("t", 0)
    assert partition is not None  # the single node's state: this broker alone
    replicas.append_records([(TP, memoryview(producer_batch(RECORDS)))], acks=1)
    outcome = delete_to(replicas, DELETE_TO_HIGH_WATERMARK)
    assert not outcome.pending and outcome.error is None
    assert outcome.required_offset == outcome.low_watermark == RECORDS
    assert partition.log.log_start_offset == RECORDS


async def test_times_out_with_the_leaders_low_watermark(replicas: ReplicaManager) -> None:
    partition = await replicated_leader(replicas)
    outcome = delete_to(replicas, 3)
    await follower_fetch(replicas, 1, RECORDS, 3)
    await replicas.wait_for_low_watermark([outcome], 1)
    assert isinstance(outcome.error, RequestTimedOutError) and not outcome.pending
    # As Kafka answers a timed-out partition: the low watermark known when it deleted.
    assert outcome.low_watermark == 0
    assert partition.log.log_start_offset == 3  # the deletion itself stands
    assert replicas.delete_records_purgatory.size == 0


async def test_leadership_moving_while_waiting(replicas: ReplicaManager) -> None:
    partition = await replicated_leader(replicas)
    outcome = delete_to(replicas, 3)
    waiter = asyncio.create_task(replicas.wait_for_low_watermark([outcome], 60_000))
    await settle()
    partition.make_follower(PartitionState((0, 1, 2), 1, 2, (1, 2), 2))
    replicas.partition_changed(TP)
    await asyncio.wait_for(waiter, 10)
    assert isinstance(outcome.error, NotLeaderOrFollowerError)
    assert outcome.low_watermark == -1
    # A follower does not delete.
    again = delete_to(replicas, 4)
    assert isinstance(again.error, NotLeaderOrFollowerError) and partition.log.log_start_offset == 3


async def test_a_follower_on_a_dead_broker_does_not_hold_it_up(
    replicas: ReplicaManager,
) -> None:
    live = {0, 1, 2}
    replicas.live_brokers = lambda: live
    await replicated_leader(replicas)
    outcome = delete_to(replicas, 3)
    waiter = asyncio.create_task(replicas.wait_for_low_watermark([outcome], 60_000))
    await follower_fetch(replicas, 1, RECORDS, 3)
    await settle()
    assert not waiter.done()  # broker 2 is alive and still starts at 0
    live.discard(2)
    replicas.live_brokers_changed()
    await asyncio.wait_for(waiter, 10)
    assert outcome.error is None and outcome.low_watermark == 3

    # Already dead when the request comes: only broker 1's report is awaited.
    outcome = delete_to(replicas, 4)
    assert outcome.pending and outcome.low_watermark == 3
    waiter = asyncio.create_task(replicas.wait_for_low_watermark([outcome], 60_000))
    await follower_fetch(replicas, 1, RECORDS, 4)
    await asyncio.wait_for(waiter, 10)
    assert outcome.error is None and outcome.low_watermark == 4


async def test_offsets_past_the_high_watermark_are_refused(replicas: ReplicaManager) -> None:
    partition = await replicated_leader(replicas)
    for offset in (RECORDS + 1, -2):
        outcome = delete_to(replicas, offset)
        assert isinstance(outcome.error, OffsetOutOfRangeError) and not outcome.pending
    assert partition.log.log_start_offset == 0


async def test_a_follower_takes_a_log_start_offset_past_its_old_high_watermark(
    replicas: ReplicaManager,
) -> None:
    partition = replicas.get_partition("t", 0)
    assert partition is not None
    partition.make_follower(PartitionState((1, 0), 1, 1, (1, 0), 1))
    fetcher = ReplicaFetcher(
        1, lambda: None, FetcherSettings(broker_id=0), on_high_watermark=lambda tp: None
    )
    fetcher.follow(partition)
    data = response_class(ApiKey.FETCH).FetchableTopicResponse.PartitionData
    followed = fetcher._partitions[TP]
    fetcher._handle_partition(
        TP, followed, data(partition_index=0, high_watermark=0, records=producer_batch(RECORDS))
    )
    assert (partition.log.log_end_offset, partition.log.high_watermark) == (RECORDS, 0)
    # The leader's next answer: the records committed and deleted below 3 (a DeleteRecords
    # right after the produce). The leader's fetch session does not say it twice.
    fetcher._handle_partition(
        TP, followed, data(partition_index=0, high_watermark=RECORDS, log_start_offset=3)
    )
    assert (partition.log.high_watermark, partition.log.log_start_offset) == (RECORDS, 3)
