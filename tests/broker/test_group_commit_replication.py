"""Offset commits that wait for the offsets topic's in-sync replicas (a cluster).

The offsets topic is a MemoryOffsetsStore with ``hold_acks``: each append is written but not
replicated, its outcome handed out by ``take_appends`` as the real store's is, and the test
plays the handler's wait by settling it (an ``error`` on it for a failed replication) through
``GroupCoordinator.appends_settled``; a leader's SyncGroup waits the same way for its
assignment record. The handler's own part, a wait cut short, runs
``handlers.offsets.replicated`` against a replica manager fake (a fault path).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from josefk.broker.group.coordinator import OffsetCommitEntry
from josefk.broker.group.group import GroupState
from josefk.broker.handlers.offsets import replicated
from josefk.broker.partition import NotEnoughReplicasAfterAppendError, RequestTimedOutError
from josefk.broker.replica_manager import AppendOutcome
from josefk.protocol.errors import ErrorCode
from josefk.storage.offsets import TxnMarker
from tests.broker.test_group_coordinator import (
    Env,
    commit,
    fetched,
    join_new,
    make_env,
    settle,
    sync,
)


@pytest.fixture
def env() -> Env:
    env = make_env()
    env.store.hold_acks = True
    return env


def in_flight(env: Env, entries: list[tuple[str, int, int]], group: str = "g") -> AppendOutcome:
    """Commit ``entries`` and return the append still to be replicated."""
    assert commit(env, entries, group=group) == [ErrorCode.NONE] * len(entries)
    [append] = env.coordinator.take_appends()
    return append


def succeed(env: Env, append: AppendOutcome) -> None:
    env.coordinator.appends_settled([append])


def fail(env: Env, append: AppendOutcome, error: BaseException | None = None) -> None:
    append.error = error or RequestTimedOutError("not replicated in time")
    env.coordinator.appends_settled([append])


async def test_a_commit_is_invisible_until_replicated(env: Env) -> None:
    append = in_flight(env, [("t", 0, 5), ("t", 1, 9)])
    assert fetched(env) == {}
    assert env.coordinator.fetch_offsets("g", [("t", 0)]) == [("t", 0, None)]
    # OffsetFetch with require_stable retries instead of reading the older offset.
    assert env.coordinator.is_unstable("g", "t", 0)
    assert not env.coordinator.is_unstable("g", "t", 2)
    succeed(env, append)
    assert fetched(env) == {("t", 0): 5, ("t", 1): 9}
    assert not env.coordinator.is_unstable("g", "t", 0)
    group = env.coordinator.group("g")
    assert group is not None and not group.has_pending_offset_commits()


async def test_a_failed_commit_keeps_the_previous_offset(env: Env) -> None:
    succeed(env, in_flight(env, [("t", 0, 5)]))
    fail(env, in_flight(env, [("t", 0, 8), ("t", 1, 3)]))
    assert fetched(env) == {("t", 0): 5}
    assert not env.coordinator.is_unstable("g", "t", 0)
    fail(env, in_flight(env, [("t", 0, 9)]), NotEnoughReplicasAfterAppendError("isr shrank"))
    assert fetched(env) == {("t", 0): 5}


async def test_commits_in_flight_end_in_log_order(env: Env) -> None:
    # Settled in the opposite order: the later one in the log stays.
    first, second = in_flight(env, [("t", 0, 1)]), in_flight(env, [("t", 0, 2)])
    succeed(env, second)
    assert fetched(env) == {("t", 0): 2}
    assert env.coordinator.is_unstable("g", "t", 0), "the first is still pending"
    succeed(env, first)
    assert fetched(env) == {("t", 0): 2}
    # A failed earlier commit does not undo a later successful one...
    first, second = in_flight(env, [("t", 0, 3)]), in_flight(env, [("t", 0, 4)])
    succeed(env, second)
    fail(env, first)
    assert fetched(env) == {("t", 0): 4}
    # ...and an earlier one that succeeded stays when the later fails.
    first, second = in_flight(env, [("t", 0, 5)]), in_flight(env, [("t", 0, 6)])
    fail(env, second)
    succeed(env, first)
    assert fetched(env) == {("t", 0): 5}
    # Settled together, as one handler taking both appends would.
    first, second = in_flight(env, [("t", 0, 7)]), in_flight(env, [("t", 0, 8)])
    env.coordinator.appends_settled([second, first])
    assert fetched(env) == {("t", 0): 8}


async def test_the_same_offset_committed_twice_settles_each_append(env: Env) -> None:
    first, second = in_flight(env, [("t", 0, 7)]), in_flight(env, [("t", 0, 7)])
    fail(env, first)
    assert env.coordinator.is_unstable("g", "t", 0), "the second commit is its own append"
    succeed(env, second)
    assert fetched(env) == {("t", 0): 7}


async def test_a_simple_consumer_group_is_created_by_a_pending_commit(env: Env) -> None:
    fail(env, in_flight(env, [("t", 0, 5)], group="simple"))
    group = env.coordinator.group("simple")
    assert group is not None and group.offsets == {}
    assert fetched(env, "simple") == {}


async def test_offsets_deleted_while_pending_are_not_brought_back(env: Env) -> None:
    succeed(env, in_flight(env, [("t", 0, 1)]))
    append = in_flight(env, [("t", 0, 2), ("u", 0, 3)])
    top, errors = env.coordinator.delete_offsets("g", [("t", 0), ("u", 0)])
    assert (top, errors) == (ErrorCode.NONE, [ErrorCode.NONE] * 2)
    env.coordinator.take_appends()  # the tombstones' append
    succeed(env, append)
    assert fetched(env) == {}
    # A restart agrees: the tombstones came after the commit in the log.
    env.store.hold_acks = False
    env.restart()
    assert fetched(env) == {}


async def test_expiry_keeps_a_group_whose_commit_is_pending(env: Env) -> None:
    append = in_flight(env, [("t", 0, 1)])
    await env.advance(env.config.offsets_retention_ms + 1)
    assert env.coordinator.expire_offsets() == 0
    assert env.coordinator.group("g") is not None
    succeed(env, append)
    assert fetched(env) == {("t", 0): 1}


async def test_a_group_unloaded_meanwhile_ignores_the_settlement(env: Env) -> None:
    env.coordinator.coordinate_by_leadership()
    partition = env.coordinator.partition_for("g")
    env.coordinator.load_partition(partition)
    append = in_flight(env, [("t", 0, 1)])
    env.coordinator.unload_partition(partition)
    env.coordinator.load_partition(partition)
    # The new leader's view comes from the log, which has the append.
    assert fetched(env) == {("t", 0): 1}
    fail(env, append)
    assert fetched(env) == {("t", 0): 1}, "the settlement of the old group changes nothing"


async def test_a_failed_transactional_append_leaves_the_transaction(env: Env) -> None:
    def txn_commit(offset: int) -> AppendOutcome:
        errors = env.coordinator.txn_commit_offsets(
            "g", 7, 0, -1, "", None, [OffsetCommitEntry("t", 0, offset)]
        )
        assert errors == [ErrorCode.NONE]
        [append] = env.coordinator.take_appends()
        return append

    succeed(env, in_flight(env, [("t", 0, 1)]))
    fail(env, txn_commit(10))
    assert not env.coordinator.is_unstable("g", "t", 0)
    partition = env.coordinator.partition_for("g")
    env.store.write_marker(partition, TxnMarker(7, 0, 0, True))
    assert env.coordinator.complete_txn(partition, 7, committed=True) == 0
    assert fetched(env) == {("t", 0): 1}
    # A replicated one stays pending until the marker, as before.
    succeed(env, txn_commit(11))
    assert env.coordinator.is_unstable("g", "t", 0)
    assert env.coordinator.complete_txn(partition, 7, committed=True) == 1
    assert fetched(env) == {("t", 0): 11}


async def test_a_replicated_store_applies_at_once() -> None:
    env = make_env()  # no held acks: the single node
    assert commit(env, [("t", 0, 5)]) == [ErrorCode.NONE]
    assert env.coordinator.take_appends() == []
    assert fetched(env) == {("t", 0): 5}
    group = env.coordinator.group("g")
    assert group is not None and not group.has_pending_offset_commits()


class _StuckReplicas:
    """A replica manager whose in-sync replicas never catch up (a fault-path fake)."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()

    async def wait_for_acks(self, outcomes: list[AppendOutcome], timeout_ms: int) -> None:
        self.waiting.set()
        await asyncio.Event().wait()

    def must_wait_for_acks(self, outcomes: list[AppendOutcome]) -> bool:
        return any(o.error is None for o in outcomes)


async def test_a_wait_cut_short_settles_as_a_failure(env: Env) -> None:
    succeed(env, in_flight(env, [("t", 0, 1)]))
    replicas = _StuckReplicas()
    broker = SimpleNamespace(
        replica_manager=replicas, config=SimpleNamespace(offsets_commit_timeout_ms=5000)
    )
    context: Any = SimpleNamespace(broker=broker)
    assert commit(env, [("t", 0, 2)]) == [ErrorCode.NONE]
    task = asyncio.create_task(replicated(context, env.coordinator, [ErrorCode.NONE]))
    await asyncio.wait_for(replicas.waiting.wait(), 10)
    assert env.coordinator.is_unstable("g", "t", 0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not env.coordinator.is_unstable("g", "t", 0)
    assert fetched(env) == {("t", 0): 1}


# -- SyncGroup: the leader's assignment -------------------------------------------------------


async def joined_pair(env: Env) -> tuple[str, str]:
    """Two members through JoinGroup (CompletingRebalance); the leader first."""
    joins = [await join_new(env, client=f"c{i}") for i in range(2)]
    await settle(env, *joins)
    results = [f.result() for f in joins]
    assert all(r.error == ErrorCode.NONE and r.generation_id == 1 for r in results)
    leader = results[0].leader_id
    other = next(r.member_id for r in results if r.member_id != leader)
    return leader, other


async def test_a_sync_completes_once_its_assignment_is_replicated(env: Env) -> None:
    leader, other = await joined_pair(env)
    waiting = sync(env, other, 1)
    led = sync(env, leader, 1, {leader: b"L", other: b"O"})
    [append] = env.coordinator.take_appends()
    group = env.coordinator.group("g")
    assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
    assert not waiting.done() and not led.done()
    succeed(env, append)
    assert group.state is GroupState.STABLE
    assert (led.result().error, led.result().assignment) == (ErrorCode.NONE, b"L")
    assert (waiting.result().error, waiting.result().assignment) == (ErrorCode.NONE, b"O")


async def test_a_sync_whose_assignment_is_not_replicated_rebalances(env: Env) -> None:
    leader, other = await joined_pair(env)
    waiting = sync(env, other, 1)
    led = sync(env, leader, 1, {leader: b"L", other: b"O"})
    [append] = env.coordinator.take_appends()
    fail(env, append)
    assert led.result().error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert waiting.result().error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    group = env.coordinator.group("g")
    assert group is not None and group.state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())


async def test_a_sync_settled_after_the_group_moved_on_changes_nothing(env: Env) -> None:
    leader, other = await joined_pair(env)
    led = sync(env, leader, 1, {leader: b"L", other: b"O"})
    [append] = env.coordinator.take_appends()
    assert env.coordinator.leave_group("g", [(other, None)]) == (ErrorCode.NONE, [ErrorCode.NONE])
    group = env.coordinator.group("g")
    assert group is not None and group.state is GroupState.PREPARING_REBALANCE
    succeed(env, append)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert led.done() and led.result().error == ErrorCode.REBALANCE_IN_PROGRESS
