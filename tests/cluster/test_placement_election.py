"""Replica placement and leader election: worked examples from Kafka's rules, and properties
over random clusters (hypothesis)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.cluster.election import (
    elect_after_failure,
    elect_for_controlled_shutdown,
    elect_preferred,
    remove_from_isr,
)
from josefk.cluster.metadata_store import PartitionState
from josefk.cluster.placement import (
    InvalidReplicationFactorError,
    assign_replicas,
    rack_alternated,
)


class FixedRandom(random.Random):
    """start and shift both 0, as Kafka's fixed start index gives."""

    def randrange(self, *args: object, **kwargs: object) -> int:  # type: ignore[override]
        return 0


def test_rack_unaware_worked_example() -> None:
    brokers = {1: None, 2: None, 3: None}
    assert assign_replicas(6, 2, brokers, rng=FixedRandom()) == [
        [1, 2], [2, 3], [3, 1], [1, 3], [2, 1], [3, 2],
    ]  # fmt: skip


def test_rack_alternated_order() -> None:
    assert rack_alternated({1: "a", 2: "a", 3: "b", 4: "c"}) == [1, 3, 4, 2]
    assert rack_alternated({5: "b", 1: "a", 2: "a", 6: "b"}) == [1, 5, 2, 6]


def test_too_many_replicas_is_refused() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than the 2 available"):
        assign_replicas(1, 3, {1: None, 2: None})
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(1, 0, {1: None})


clusters = st.dictionaries(
    st.integers(0, 50), st.sampled_from(["r1", "r2", "r3"]), min_size=1, max_size=9
)


@given(clusters, st.integers(1, 40), st.data(), st.booleans(), st.integers(0, 2**32))
def test_placement_properties(
    racks: dict[int, str], partitions: int, data: st.DataObject, use_racks: bool, seed: int
) -> None:
    rf = data.draw(st.integers(1, len(racks)))
    brokers: dict[int, str | None] = dict(racks) if use_racks else dict.fromkeys(racks)
    result = assign_replicas(partitions, rf, brokers, rng=random.Random(seed))
    assert len(result) == partitions
    for replicas in result:
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= set(racks)
        if use_racks and len(set(racks.values())) > 1:
            assert len({racks[b] for b in replicas}) == min(rf, len(set(racks.values())))
    # Leaders spread evenly: over every full round of brokers, each leads once.
    leaders = Counter(replicas[0] for replicas in result)
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in racks) <= 1


def state(replicas: tuple[int, ...], leader: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(replicas, leader, leader_epoch=4, isr=isr, partition_epoch=9)


def test_failure_election_takes_the_first_live_in_sync_replica() -> None:
    new = elect_after_failure(state((1, 2, 3), 1, (1, 2, 3)), live={2, 3})
    assert new == PartitionState((1, 2, 3), 2, 5, (2, 3), 10)
    # Replica order decides, not ISR order.
    new = elect_after_failure(state((1, 3, 2), 1, (2, 3, 1)), live={2, 3})
    assert new is not None and new.leader == 3
    # A live leader stays.
    assert elect_after_failure(state((1, 2, 3), 1, (1, 2)), live={1, 2}) is None


def test_no_in_sync_survivor_means_offline_unless_unclean() -> None:
    old = state((1, 2, 3), 1, (1,))
    offline = elect_after_failure(old, live={2, 3})
    assert offline == PartitionState((1, 2, 3), -1, 5, (1,), 10)
    # Stays offline while no ISR member returns...
    assert elect_after_failure(offline, live={2, 3}) is None
    # ...and comes back with the returning ISR member.
    back = elect_after_failure(offline, live={1, 2, 3})
    assert back is not None and back.leader == 1 and back.isr == (1,)
    unclean = elect_after_failure(old, live={2, 3}, unclean=True)
    assert unclean == PartitionState((1, 2, 3), 2, 5, (2,), 10)


@given(
    st.permutations([1, 2, 3, 4]).map(tuple),
    st.sets(st.sampled_from([1, 2, 3, 4]), min_size=1),
    st.sets(st.sampled_from([1, 2, 3, 4])),
    st.booleans(),
)
def test_election_properties(
    replicas: tuple[int, ...], isr_set: set[int], live: set[int], unclean: bool
) -> None:
    isr = tuple(b for b in replicas if b in isr_set)
    old = state(replicas, isr[0], isr)
    new = elect_after_failure(old, live, unclean=unclean)
    if new is None:
        assert old.leader in live
        return
    assert new.leader_epoch == old.leader_epoch + 1
    assert new.partition_epoch == old.partition_epoch + 1
    if new.leader == -1:
        assert not (live & isr_set) and not (unclean and live & set(replicas))
    elif new.leader in isr_set:
        assert new.leader == next(b for b in replicas if b in live and b in isr_set)
        assert set(new.isr) == isr_set & live
    else:
        assert unclean and not (live & isr_set) and new.isr == (new.leader,)


def test_preferred_and_controlled_shutdown() -> None:
    moved = state((1, 2, 3), 2, (1, 2, 3))
    assert elect_preferred(moved, live={1, 2, 3}) == PartitionState((1, 2, 3), 1, 5, (1, 2, 3), 10)
    assert elect_preferred(state((1, 2, 3), 2, (2, 3)), live={1, 2, 3}) is None  # 1 lags
    assert elect_preferred(state((1, 2, 3), 1, (1, 2)), live={1, 2}) is None
    shut = elect_for_controlled_shutdown(state((1, 2, 3), 1, (1, 2, 3)), {1, 2, 3}, {1})
    assert shut == PartitionState((1, 2, 3), 2, 5, (2, 3), 10)
    assert elect_for_controlled_shutdown(state((1, 2), 1, (1,)), {1, 2}, {1}) is None
    assert remove_from_isr(state((1, 2, 3), 1, (1, 2, 3)), {3}) == PartitionState(
        (1, 2, 3), 1, 4, (1, 2), 10
    )
    assert remove_from_isr(state((1, 2), 1, (1,)), {1}) is None
