"""Moving a partition's replicas (KIP-455): the controller's pure decisions for one partition.

A reassignment runs in three steps, each one compare-and-swap write of the partition state:

1. ``start_reassignment``: the replica set grows to the target replicas followed by the
   original replicas that leave (``adding_replicas`` and ``removing_replicas`` say which);
   the brokers added start following the leader like any replica.
2. The leader adds each new replica to the ISR once it has caught up (its ordinary ISR
   expansion, nothing special to reassignment).
3. ``complete_reassignment``, once every target replica is in the ISR: the replica set
   becomes the target, the ISR loses the leaving replicas, and if the leader is leaving the
   first live in-sync target replica leads with a new leader epoch. Brokers no longer
   assigned stop hosting the partition and delete their copy.

``cancel_reassignment`` goes back to the original replicas (a ListPartitionReassignments
entry disappears; replicas already copied are dropped again).

Imports josefk.cluster.metadata_store's value types only.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from josefk.cluster.values import PartitionState

__all__ = [
    "ReassignmentError",
    "cancel_reassignment",
    "complete_reassignment",
    "original_replicas",
    "start_reassignment",
    "target_replicas",
]


class ReassignmentError(Exception):
    """The reassignment cannot start: no replica could lead afterwards."""


def original_replicas(state: PartitionState) -> tuple[int, ...]:
    """The replicas before the reassignment in progress (all of them when none is)."""
    return tuple(b for b in state.replicas if b not in state.adding_replicas)


def target_replicas(state: PartitionState) -> tuple[int, ...]:
    """The replicas the reassignment in progress moves to (all of them when none is)."""
    return tuple(b for b in state.replicas if b not in state.removing_replicas)


def start_reassignment(
    state: PartitionState, target: Sequence[int], live: Collection[int]
) -> PartitionState | None:
    """Begin moving to ``target`` (replacing any reassignment in progress, whose original
    replicas stay the original ones, as Kafka does). Completes at once when every target
    replica is already in sync (a reordering or a shrink). None when nothing changes;
    raises ReassignmentError when no replica could lead afterwards."""
    target = tuple(target)
    original = original_replicas(state)
    adding = tuple(b for b in target if b not in original)
    removing = tuple(b for b in original if b not in target)
    replicas = target + removing
    if (replicas, adding, removing) == (
        state.replicas,
        state.adding_replicas,
        state.removing_replicas,
    ):
        return complete_reassignment(state, live) if state.reassigning else None
    started = replace(
        state,
        replicas=replicas,
        adding_replicas=adding,
        removing_replicas=removing,
        # Replicas being added join the ISR only once they catch up.
        isr=tuple(b for b in state.isr if b in replicas),
        partition_epoch=state.partition_epoch + 1,
    )
    if not started.reassigning:
        # Back to the original set, or a new order of it: nothing to copy or drop.
        settled = _settle(started, replicas, live)
    else:
        settled = complete_reassignment(started, live)
        if settled is None and started.leader in replicas:
            return started
        if settled is None:
            # The leader was a replica the replaced reassignment added and this one drops.
            settled = _elect(started, live)
    if settled is None:
        raise ReassignmentError(f"no live in-sync replica of {list(replicas)} could lead")
    return settled


def complete_reassignment(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    """The state once every target replica is in the ISR; None while some is not yet (or
    no target replica could lead)."""
    if not state.reassigning:
        return None
    target = target_replicas(state)
    if any(b not in state.isr for b in target):
        return None
    return _settle(state, target, live)


def cancel_reassignment(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    """Back to the original replicas; None when no reassignment is in progress, or when no
    original replica is in sync to lead (then the reassignment must finish instead)."""
    if not state.reassigning:
        return None
    return _settle(state, original_replicas(state), live)


def _settle(
    state: PartitionState, replicas: tuple[int, ...], live: Collection[int]
) -> PartitionState | None:
    isr = tuple(b for b in state.isr if b in replicas)
    if not isr:
        return None
    done = replace(
        state,
        replicas=replicas,
        isr=isr,
        adding_replicas=(),
        removing_replicas=(),
        partition_epoch=state.partition_epoch + 1,
    )
    if state.leader in replicas and state.leader in isr:
        return done
    if state.leader == -1:
        return done  # offline before and after: it comes back when an ISR member does
    return _elect(done, live)


def _elect(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    for candidate in state.replicas:
        if candidate in live and candidate in state.isr:
            return replace(state, leader=candidate, leader_epoch=state.leader_epoch + 1)
    return None
