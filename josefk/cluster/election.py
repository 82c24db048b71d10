"""Who leads a partition: the controller's leader-election rules, as Kafka states them.

Owns the pure decisions the controller makes for one partition, each returning the new
``PartitionState`` (or None when nothing may or need change). Every leader change bumps the
leader epoch and the partition epoch; an ISR-only change bumps the partition epoch.

- ``elect_after_failure`` (a broker died, or the partition has no leader): the first replica
  in assignment order that is alive *and* in the ISR. Only with
  ``unclean.leader.election.enable=true`` may a live replica outside the ISR lead, which can
  lose acknowledged records; without one, the partition goes offline (leader -1) and keeps
  its last ISR so that it can come back with no data lost when an ISR member returns.
- ``elect_preferred``: the first replica of the assignment, if it is alive and in sync.
- ``elect_for_controlled_shutdown``: the first live ISR member that is not shutting down.
- ``remove_from_isr``: dead or shut-down brokers leave the ISR (never the last member).

Imports josefk.cluster.metadata_store's value types only.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from josefk.cluster.values import PartitionState

__all__ = [
    "elect_after_failure",
    "elect_for_controlled_shutdown",
    "elect_preferred",
    "is_preferred_leader",
    "remove_from_isr",
]


def _lead(state: PartitionState, leader: int, isr: tuple[int, ...]) -> PartitionState:
    return replace(
        state,
        leader=leader,
        leader_epoch=state.leader_epoch + 1,
        isr=isr,
        partition_epoch=state.partition_epoch + 1,
    )


def elect_after_failure(
    state: PartitionState, live: Collection[int], *, unclean: bool = False
) -> PartitionState | None:
    """The state after the leader died (or ``live`` changed for a leaderless partition);
    None when the current leader is alive and nothing needs to change."""
    if state.leader in live and state.leader in state.isr:
        return None
    in_sync_live = tuple(b for b in state.isr if b in live)
    for replica in state.replicas:
        if replica in live and replica in state.isr:
            return _lead(state, replica, in_sync_live)
    if unclean:
        for replica in state.replicas:
            if replica in live:
                # The only survivor of an unclean election is the new ISR.
                return _lead(state, replica, (replica,))
    if state.leader == -1:
        return None
    # Offline: no leader, and the ISR stays as it was so the last in-sync replica can return.
    return _lead(state, -1, state.isr)


def elect_preferred(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    """Move leadership back to the first assigned replica; None if it already leads or may
    not (dead or out of sync)."""
    preferred = state.replicas[0]
    if state.leader == preferred or preferred not in live or preferred not in state.isr:
        return None
    return _lead(state, preferred, state.isr)


def is_preferred_leader(state: PartitionState) -> bool:
    return bool(state.replicas) and state.leader == state.replicas[0]


def elect_for_controlled_shutdown(
    state: PartitionState, live: Collection[int], shutting_down: Collection[int]
) -> PartitionState | None:
    """Hand leadership away from brokers that are shutting down, to the first live ISR member
    that stays; None if the leader stays, or if no other replica is in sync (the partition
    then stays with its leader until it stops, as Kafka's controlled shutdown does)."""
    if state.leader not in shutting_down:
        return None
    for replica in state.replicas:
        if replica in live and replica in state.isr and replica not in shutting_down:
            isr = tuple(b for b in state.isr if b not in shutting_down)
            return _lead(state, replica, isr)
    return None


def remove_from_isr(state: PartitionState, leaving: Collection[int]) -> PartitionState | None:
    """The ISR without ``leaving``, leader unchanged; never empties the ISR, and never drops
    the leader itself (that takes an election). None when nothing changes."""
    isr = tuple(b for b in state.isr if b not in leaving or b == state.leader)
    if isr == state.isr or not isr:
        return None
    return replace(state, isr=isr, partition_epoch=state.partition_epoch + 1)
