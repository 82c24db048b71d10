"""The leader side of replication in ``Partition``: follower progress, the high watermark
over the ISR, ISR expansion and shrink proposals, and role changes. Real logs on disk, a
manual clock; followers are simulated by their fetch offsets, as the leader sees them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))

from log_helpers import NOW, open_log, producer_batch

from josefk.broker.partition import Partition
from josefk.cluster.metadata_store import PartitionState
from josefk.storage.offsets import TopicPartition
from josefk.util.clock import ManualClock

LAG_MS = 30_000


def leader_of_three(
    tmp_path: Path, isr: tuple[int, ...] = (1, 2, 3)
) -> tuple[Partition, ManualClock]:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(tmp_path / "t-0", clock=clock)
    state = PartitionState((1, 2, 3), leader=1, leader_epoch=3, isr=isr, partition_epoch=7)
    return Partition(
        TopicPartition("t", 0), log, local_broker_id=1, clock=clock, state=state
    ), clock


def append(partition: Partition, count: int) -> None:
    partition.append_records_to_leader(memoryview(producer_batch(count)))


def test_a_single_replica_partition_commits_at_once(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    partition = Partition(TopicPartition("t", 0), log, local_broker_id=5)
    assert partition.is_leader and partition.isr == [5] and partition.leader_epoch == 0
    append(partition, 4)
    assert log.high_watermark == log.log_end_offset == 4


def test_the_high_watermark_is_the_smallest_isr_log_end_offset(tmp_path: Path) -> None:
    partition, _ = leader_of_three(tmp_path)
    log = partition.log
    append(partition, 10)
    assert log.high_watermark == 0  # followers have nothing yet
    assert not partition.update_follower_fetch_state(2, 10, 0)
    assert log.high_watermark == 0  # 3 still at 0
    assert partition.update_follower_fetch_state(3, 6, 0)
    assert log.high_watermark == 6
    assert partition.update_follower_fetch_state(3, 10, 0)
    assert log.high_watermark == 10
    # It never moves back, whatever a follower reports later (e.g. after its truncation).
    partition.update_follower_fetch_state(3, 2, 0)
    assert log.high_watermark == 10


def test_an_out_of_sync_replica_does_not_hold_the_high_watermark(tmp_path: Path) -> None:
    partition, _ = leader_of_three(tmp_path, isr=(1, 2))
    append(partition, 5)
    partition.update_follower_fetch_state(2, 5, 0)
    assert partition.log.high_watermark == 5


def test_a_caught_up_follower_is_proposed_back_into_the_isr(tmp_path: Path) -> None:
    partition, _ = leader_of_three(tmp_path, isr=(1, 2))
    append(partition, 5)
    partition.update_follower_fetch_state(2, 5, 0)
    partition.update_follower_fetch_state(3, 3, 0)
    assert partition.isr_expansion(3) is None  # 3 is below the high watermark
    partition.update_follower_fetch_state(3, 5, 0)
    assert partition.isr_expansion(3) == [1, 2, 3]
    assert partition.isr_expansion(3) is None  # one proposal at a time
    # While proposed, the joining replica already holds the HW back (maximal ISR).
    append(partition, 5)
    partition.update_follower_fetch_state(2, 10, 0)
    assert partition.log.high_watermark == 5
    partition.apply_isr(PartitionState((1, 2, 3), 1, 3, (1, 2, 3), 8))
    assert partition.isr == [1, 2, 3] and partition.partition_epoch == 8
    partition.update_follower_fetch_state(3, 10, 0)
    assert partition.log.high_watermark == 10


def test_a_refused_expansion_releases_the_high_watermark(tmp_path: Path) -> None:
    partition, _ = leader_of_three(tmp_path, isr=(1, 2))
    append(partition, 5)
    partition.update_follower_fetch_state(2, 5, 0)
    partition.update_follower_fetch_state(3, 5, 0)
    assert partition.isr_expansion(3) == [1, 2, 3]
    append(partition, 5)
    partition.update_follower_fetch_state(2, 10, 0)
    assert partition.log.high_watermark == 5
    partition.isr_proposal_failed()
    assert partition.log.high_watermark == 10


def test_a_follower_that_stops_catching_up_is_proposed_out(tmp_path: Path) -> None:
    partition, clock = leader_of_three(tmp_path)
    append(partition, 5)
    partition.update_follower_fetch_state(2, 5, 0)
    partition.update_follower_fetch_state(3, 5, 0)
    clock.advance(LAG_MS)
    assert partition.isr_shrink(LAG_MS) is None  # exactly at the limit: still in time
    append(partition, 5)
    partition.update_follower_fetch_state(2, 10, 0)  # 2 keeps up, 3 went silent
    clock.advance(1)
    assert partition.isr_shrink(LAG_MS) == [1, 2]
    partition.apply_isr(PartitionState((1, 2, 3), 1, 3, (1, 2), 8))
    assert partition.log.high_watermark == 10


def test_a_slow_but_fetching_follower_counts_as_caught_up_at_its_previous_fetch(
    tmp_path: Path,
) -> None:
    partition, clock = leader_of_three(tmp_path, isr=(1, 2))
    append(partition, 5)
    partition.update_follower_fetch_state(2, 5, 0)  # caught up at t0
    append(partition, 5)  # the leader moves on
    clock.advance(LAG_MS)
    # 2 fetches from 5: not at the LEO (10), but at the LEO of its previous fetch (5), so it
    # was caught up at that previous fetch's time (t0), LAG_MS ago: still in time.
    partition.update_follower_fetch_state(2, 5, 0)
    assert partition.isr_shrink(LAG_MS) is None
    clock.advance(1)
    assert partition.isr_shrink(LAG_MS) == [1]


def test_roles(tmp_path: Path) -> None:
    partition, _ = leader_of_three(tmp_path)
    assert partition.make_follower(PartitionState((1, 2, 3), 2, 4, (2, 3), 8))
    assert not partition.is_leader and partition.leader_id == 2
    assert not partition.update_follower_fetch_state(3, 0, 0)  # followers track nobody
    assert partition.isr_expansion(3) is None and partition.isr_shrink(0) is None
    assert not partition.make_follower(PartitionState((1, 2, 3), 2, 4, (2, 3, 1), 9))
    assert partition.make_leader(PartitionState((1, 2, 3), 1, 5, (1, 2, 3), 10))
    with pytest.raises(ValueError):
        partition.make_follower(PartitionState((1, 2, 3), 1, 6, (1,), 11))
    with pytest.raises(ValueError):
        partition.make_leader(PartitionState((1, 2, 3), 2, 6, (2,), 11))


def test_a_dead_follower_is_not_proposed_back_when_others_fetch(tmp_path: Path) -> None:
    """Found in a three-broker run: broker 3 died, the controller took it out of the ISR, and
    the leader proposed it back on the next fetch of broker 2, because 3's last known log end
    offset still reached the (stuck) high watermark. Only the fetching follower is judged."""
    partition, _ = leader_of_three(tmp_path, isr=(1, 2))
    append(partition, 5)
    partition.update_follower_fetch_state(3, 5, 0)  # before it died
    partition.update_follower_fetch_state(2, 5, 0)
    assert partition.isr_expansion(2) is None  # already in sync
    partition.apply_isr(PartitionState((1, 2, 3), 1, 3, (1, 2), 9))
    assert partition.isr_expansion(2) is None
