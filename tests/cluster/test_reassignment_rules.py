"""The controller's reassignment rules (josefk.cluster.reassignment), as pure functions:
the three steps of KIP-455 and cancellation, by example and as properties over random
replica sets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.cluster.metadata_store import PartitionState
from josefk.cluster.reassignment import (
    ReassignmentError,
    cancel_reassignment,
    complete_reassignment,
    original_replicas,
    start_reassignment,
    target_replicas,
)

LIVE = {1, 2, 3, 4, 5}


def settled(replicas: tuple[int, ...], leader: int | None = None) -> PartitionState:
    return PartitionState(replicas, replicas[0] if leader is None else leader, 3, replicas, 7)


def test_a_move_waits_for_new_replicas_then_drops_the_old_ones() -> None:
    state = settled((1, 2))
    started = start_reassignment(state, (3, 2), LIVE)
    assert started is not None
    assert (started.replicas, started.adding_replicas, started.removing_replicas) == (
        (3, 2, 1),
        (3,),
        (1,),
    )
    assert (started.leader, started.leader_epoch, started.isr) == (1, 3, (1, 2))
    assert complete_reassignment(started, LIVE) is None  # 3 not in sync yet

    caught_up = PartitionState(
        started.replicas, 1, 3, (1, 2, 3), started.partition_epoch + 1, (3,), (1,)
    )
    done = complete_reassignment(caught_up, LIVE)
    assert done is not None
    # The leader leaves: the first in-sync target replica leads, in a new epoch.
    assert (done.replicas, done.leader, done.leader_epoch, done.isr) == ((3, 2), 3, 4, (2, 3))
    assert not done.reassigning
    assert done.partition_epoch > caught_up.partition_epoch


def test_a_shrink_or_reorder_of_in_sync_replicas_completes_at_once() -> None:
    shrunk = start_reassignment(settled((1, 2, 3)), (2, 3), LIVE)
    assert shrunk is not None and not shrunk.reassigning
    assert (shrunk.replicas, shrunk.leader, shrunk.isr) == ((2, 3), 2, (2, 3))
    reordered = start_reassignment(settled((1, 2, 3)), (3, 1, 2), LIVE)
    assert reordered is not None and not reordered.reassigning
    # The leader stays where it is; a preferred election moves it to 3 later.
    assert (reordered.replicas, reordered.leader, reordered.leader_epoch) == ((3, 1, 2), 1, 3)


def test_the_same_replicas_change_nothing() -> None:
    assert start_reassignment(settled((1, 2)), (1, 2), LIVE) is None


def test_cancelling_restores_the_original_replicas() -> None:
    started = start_reassignment(settled((1, 2)), (3, 4), LIVE)
    assert started is not None and started.reassigning
    cancelled = cancel_reassignment(started, LIVE)
    assert cancelled is not None
    assert (cancelled.replicas, cancelled.leader, cancelled.isr) == ((1, 2), 1, (1, 2))
    assert cancel_reassignment(cancelled, LIVE) is None


def test_a_new_target_replaces_a_move_in_progress_keeping_the_originals() -> None:
    first = start_reassignment(settled((1, 2)), (3, 4), LIVE)
    assert first is not None
    second = start_reassignment(first, (5, 2), LIVE)
    assert second is not None
    assert set(original_replicas(second)) == {1, 2}
    assert (second.adding_replicas, second.removing_replicas) == ((5,), (1,))
    assert set(second.replicas) == {1, 2, 5}


def test_an_out_of_sync_target_waits_and_an_unleadable_one_is_refused() -> None:
    lagging = start_reassignment(PartitionState((1, 2), 1, 3, (1,), 7), (2,), LIVE)
    assert lagging is not None and lagging.reassigning  # done once 2 catches up
    # Moving to 3, 4: the originals died and 3 leads alone; moving back has no one to lead.
    moved = PartitionState((3, 4, 1, 2), 3, 5, (3,), 9, (3, 4), (1, 2))
    with pytest.raises(ReassignmentError):
        start_reassignment(moved, (1, 2), LIVE)


replica_sets = st.lists(st.integers(1, 5), min_size=1, max_size=4, unique=True).map(tuple)


@given(original=replica_sets, target=replica_sets)
def test_a_move_ends_on_exactly_the_target(
    original: tuple[int, ...], target: tuple[int, ...]
) -> None:
    state = settled(original)
    started = start_reassignment(state, target, LIVE)
    if started is None:
        assert target == original
        return
    assert target_replicas(started) == target
    if started.reassigning:
        assert set(started.replicas) == set(original) | set(target)
        assert set(original_replicas(started)) == set(original)
    assert started.leader in started.isr
    assert started.partition_epoch > state.partition_epoch
    if started.reassigning:
        # Every replica catches up; then the move completes on the target alone.
        in_sync = PartitionState(
            started.replicas,
            started.leader,
            started.leader_epoch,
            started.replicas,
            started.partition_epoch,
            started.adding_replicas,
            started.removing_replicas,
        )
        done = complete_reassignment(in_sync, LIVE)
        assert done is not None
    else:
        done = started
    assert done.replicas == target and not done.reassigning
    assert set(done.isr) <= set(target) and done.leader in done.isr
    assert (done.leader == state.leader) == (done.leader_epoch == state.leader_epoch)
