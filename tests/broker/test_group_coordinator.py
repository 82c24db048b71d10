"""The group coordinator's state machine, offsets and durability, on a manual clock.

Timers are the storage Scheduler's, stepped with ``ManualClock.advance`` + ``run_due``; the
offsets topic is a MemoryOffsetsStore, so a "restart" is a new coordinator loading it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.broker.group.assignment import encode_subscription
from josefk.broker.group.coordinator import (
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    OffsetCommitEntry,
)
from josefk.broker.group.group import GroupState, JoinResult, SyncResult
from josefk.broker.group.offsets_schema import (
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
)
from josefk.broker.group.store import MemoryOffsetsStore
from josefk.protocol.errors import ErrorCode
from josefk.util.clock import ManualClock
from josefk.util.scheduler import Scheduler

SESSION_MS = 10_000
REBALANCE_MS = 30_000
DELAY_MS = 3_000
CONSUMER = "consumer"


def subscription(*topics: str) -> bytes:
    return encode_subscription(list(topics))


@dataclass
class Env:
    clock: ManualClock
    scheduler: Scheduler
    store: MemoryOffsetsStore
    coordinator: GroupCoordinator
    config: GroupConfig

    async def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        await self.scheduler.run_due()

    def restart(self) -> GroupCoordinator:
        self.coordinator.stop()
        self.scheduler = Scheduler(self.clock)
        self.coordinator = make_coordinator(self.config, self.store, self.scheduler, self.clock)
        self.coordinator.load()
        return self.coordinator


def make_coordinator(
    config: GroupConfig, store: MemoryOffsetsStore, scheduler: Scheduler, clock: ManualClock
) -> GroupCoordinator:
    counter = itertools.count(1)
    return GroupCoordinator(
        config,
        store,
        scheduler=scheduler,
        clock=clock,
        new_member_suffix=lambda: f"m{next(counter)}",
    )


def make_env(**overrides: int) -> Env:
    settings = {
        "min_session_timeout_ms": 1000,
        "max_session_timeout_ms": 60_000,
        "initial_rebalance_delay_ms": DELAY_MS,
        "offsets_retention_ms": 3_600_000,
        "retention_check_interval_ms": 60_000,
        "offsets_partitions": 50,
    }
    settings.update(overrides)
    config = GroupConfig(**settings)
    clock = ManualClock()
    scheduler = Scheduler(clock)
    store = MemoryOffsetsStore(config.offsets_partitions)
    return Env(clock, scheduler, store, make_coordinator(config, store, scheduler, clock), config)


@pytest.fixture
def env() -> Env:
    return make_env()


def join(
    env: Env,
    member_id: str = "",
    *,
    group: str = "g",
    client: str = "client",
    instance: str | None = None,
    protocols: Sequence[tuple[str, bytes]] = (("range", subscription("t")),),
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
    known_required: bool = True,
    protocol_type: str = CONSUMER,
) -> asyncio.Future[JoinResult]:
    return env.coordinator.join_group(
        JoinRequest(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            client_id=client,
            client_host="/127.0.0.1",
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            protocol_type=protocol_type,
            protocols=tuple(protocols),
            require_known_member_id=known_required,
        )
    )


async def join_new(env: Env, **kwargs: object) -> asyncio.Future[JoinResult]:
    """The KIP-394 round trip: learn a member id, then join with it."""
    first = join(env, **kwargs)  # type: ignore[arg-type]
    assert first.done()
    result = first.result()
    assert result.error == ErrorCode.MEMBER_ID_REQUIRED
    assert result.member_id
    return join(env, result.member_id, **kwargs)  # type: ignore[arg-type]


def sync(
    env: Env,
    member_id: str,
    generation: int,
    assignments: dict[str, bytes] | None = None,
    *,
    group: str = "g",
    instance: str | None = None,
) -> asyncio.Future[SyncResult]:
    return env.coordinator.sync_group(group, generation, member_id, instance, assignments or {})


async def settle(env: Env, *joins: asyncio.Future[JoinResult]) -> None:
    """Step through the initial delay, which members arriving during it extend (up to the
    rebalance timeout), until every join is answered."""
    for _ in range(REBALANCE_MS // DELAY_MS):
        if all(f.done() for f in joins):
            return
        await env.advance(DELAY_MS)
    assert all(f.done() for f in joins)


async def stable_group(env: Env, count: int) -> list[str]:
    """A Stable group of ``count`` members at generation 1; returns the member ids."""
    joins = [await join_new(env, client=f"c{i}") for i in range(count)]
    await settle(env, *joins)
    results = [f.result() for f in joins]
    assert all(r.error == ErrorCode.NONE and r.generation_id == 1 for r in results)
    ids = [r.member_id for r in results]
    leader = results[0].leader_id
    syncs = [
        sync(env, m, 1, {mid: mid.encode() for mid in ids} if m == leader else None) for m in ids
    ]
    assert all(s.done() and s.result().error == ErrorCode.NONE for s in syncs)
    group = env.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    return ids


# -- join / sync ---------------------------------------------------------------------------


async def test_first_join_needs_a_member_id_then_waits_for_the_initial_delay(env: Env) -> None:
    pending = await join_new(env)
    assert not pending.done()
    group = env.coordinator.group("g")
    assert group is not None and group.state is GroupState.PREPARING_REBALANCE
    await env.advance(DELAY_MS - 1)
    assert not pending.done()
    await env.advance(1)
    result = pending.result()
    assert result.error == ErrorCode.NONE
    assert result.generation_id == 1
    assert result.leader_id == result.member_id
    assert result.protocol_name == "range"
    assert [m.member_id for m in result.members] == [result.member_id]
    assert group.state is GroupState.COMPLETING_REBALANCE


async def test_members_joining_during_the_delay_extend_it_and_share_a_generation(env: Env) -> None:
    first = await join_new(env, client="a")
    await env.advance(DELAY_MS - 1)
    second = await join_new(env, client="b")
    await env.advance(1)  # the first delay ends, but a member arrived: wait once more
    assert not first.done() and not second.done()
    await env.advance(DELAY_MS)
    a, b = first.result(), second.result()
    assert a.generation_id == b.generation_id == 1
    assert a.leader_id == a.member_id
    assert len(a.members) == 2 and b.members == ()


async def test_sync_distributes_the_leaders_assignment_and_stores_the_group(env: Env) -> None:
    ids = await stable_group(env, 3)
    for member_id in ids:
        result = sync(env, member_id, 1).result()
        assert result.assignment == member_id.encode()
        assert result.protocol_name == "range"
    records = env.store.records[env.coordinator.partition_for("g")]
    key, value = records[-1]
    assert decode_key(key) == GroupKey("g")
    assert value is not None
    stored = decode_group_value(value)
    assert stored.generation == 1
    assert [m.member_id for m in stored.members] == ids
    assert [m.assignment for m in stored.members] == [m.encode() for m in ids]


async def test_follower_sync_waits_for_the_leader(env: Env) -> None:
    a = await join_new(env, client="a")
    b = await join_new(env, client="b")
    await settle(env, a, b)
    leader, follower = a.result(), b.result()
    waiting = sync(env, follower.member_id, 1)
    assert not waiting.done()
    sync(env, leader.member_id, 1, {follower.member_id: b"mine", leader.member_id: b"lead"})
    assert waiting.result() == SyncResult(ErrorCode.NONE, b"mine", CONSUMER, "range")


async def test_a_new_member_makes_the_others_rejoin(env: Env) -> None:
    ids = await stable_group(env, 2)
    third = await join_new(env, client="c")
    assert env.coordinator.heartbeat("g", 1, ids[0], None) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoins = [join(env, member_id) for member_id in ids]
    # Every member has rejoined: the generation completes without waiting for a timer.
    results = [f.result() for f in (*rejoins, third)]
    assert {r.generation_id for r in results} == {2}
    assert sum(1 for r in results if r.members) == 1
    assert env.coordinator.heartbeat("g", 1, ids[0], None) == ErrorCode.ILLEGAL_GENERATION


async def test_protocol_selection_takes_the_most_votes_among_common_protocols(env: Env) -> None:
    sub = subscription("t")
    a = await join_new(env, protocols=[("range", sub), ("roundrobin", sub), ("sticky", sub)])
    b = await join_new(env, protocols=[("roundrobin", sub), ("range", sub)])
    c = await join_new(env, protocols=[("roundrobin", sub), ("range", sub)])
    await settle(env, a, b, c)
    assert {f.result().protocol_name for f in (a, b, c)} == {"roundrobin"}
    refused = join(env, protocols=[("sticky", sub)])
    assert refused.result().error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    other_type = join(env, protocol_type="connect")
    assert other_type.result().error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


async def test_join_validation(env: Env) -> None:
    assert join(env, session_ms=500).result().error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join(env, session_ms=60_001).result().error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join(env, group="").result().error == ErrorCode.INVALID_GROUP_ID
    assert join(env, "nobody", group="none").result().error == ErrorCode.UNKNOWN_MEMBER_ID


async def test_group_max_size() -> None:
    env = make_env(max_group_size=2)
    await join_new(env)
    await join_new(env)
    assert join(env).result().error == ErrorCode.GROUP_MAX_SIZE_REACHED


async def test_old_clients_join_without_the_member_id_round_trip(env: Env) -> None:
    pending = join(env, known_required=False)
    await env.advance(DELAY_MS)
    assert pending.result().error == ErrorCode.NONE
    assert pending.result().member_id.startswith("client-")


# -- heartbeats and session timeouts ---------------------------------------------------------


async def test_heartbeat_errors(env: Env) -> None:
    ids = await stable_group(env, 1)
    assert env.coordinator.heartbeat("g", 1, ids[0], None) == ErrorCode.NONE
    assert env.coordinator.heartbeat("g", 0, ids[0], None) == ErrorCode.ILLEGAL_GENERATION
    assert env.coordinator.heartbeat("g", 1, "ghost", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert env.coordinator.heartbeat("none", 1, ids[0], None) == ErrorCode.UNKNOWN_MEMBER_ID


async def test_a_silent_member_expires_and_the_group_rebalances(env: Env) -> None:
    alive, silent = await stable_group(env, 2)
    for _ in range(4):
        await env.advance(SESSION_MS // 2)
        if env.coordinator.heartbeat("g", 1, alive, None) != ErrorCode.NONE:
            break
    group = env.coordinator.group("g")
    assert group is not None
    assert silent not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    result = join(env, alive).result()
    assert result.generation_id == 2
    assert [m.member_id for m in result.members] == [alive]


async def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout(env: Env) -> None:
    a, b = await stable_group(env, 2)
    await join_new(env, client="c")
    rejoined = join(env, a)
    for _ in range(REBALANCE_MS // 5_000):
        assert env.coordinator.heartbeat("g", 1, b, None) == ErrorCode.REBALANCE_IN_PROGRESS
        await env.advance(5_000)
    result = rejoined.result()
    assert result.generation_id == 2
    group = env.coordinator.group("g")
    assert group is not None and b not in group.members and len(group.members) == 2


async def test_pending_member_ids_expire(env: Env) -> None:
    first = join(env).result()
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    await env.advance(SESSION_MS)
    group = env.coordinator.group("g")
    assert group is not None and not group.pending_members


# -- leave --------------------------------------------------------------------------------


async def test_leave_rebalances_and_the_last_member_leaves_an_empty_group(env: Env) -> None:
    a, b = await stable_group(env, 2)
    top, errors = env.coordinator.leave_group("g", [(b, None), ("ghost", None)])
    assert top == ErrorCode.NONE
    assert errors == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert join(env, a).result().generation_id == 2
    top, errors = env.coordinator.leave_group("g", [(a, None)])
    group = env.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY
    assert group.generation_id == 3
    _, value = env.store.records[env.coordinator.partition_for("g")][-1]
    assert value is not None and decode_group_value(value).members == ()


async def test_leave_of_an_unknown_group(env: Env) -> None:
    assert env.coordinator.leave_group("none", [("m", None)]) == (
        ErrorCode.NONE,
        [ErrorCode.UNKNOWN_MEMBER_ID],
    )


# -- static membership ----------------------------------------------------------------------


async def test_static_member_rejoins_without_a_rebalance(env: Env) -> None:
    leader_join = join(env, instance="i-0", client="a")
    follower_join = join(env, instance="i-1", client="b")
    await settle(env, leader_join, follower_join)
    leader, follower = leader_join.result(), follower_join.result()
    assert follower.member_id.startswith("i-1-")
    sync(env, leader.member_id, 1, {follower.member_id: b"f", leader.member_id: b"l"})
    # The follower restarts: a new member id, same instance id, same protocols.
    again = join(env, instance="i-1", client="b").result()
    assert again.error == ErrorCode.NONE
    assert again.member_id != follower.member_id
    assert again.generation_id == 1
    group = env.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    assert sync(env, again.member_id, 1, instance="i-1").result().assignment == b"f"
    assert (
        env.coordinator.heartbeat("g", 1, follower.member_id, "i-1") == ErrorCode.FENCED_INSTANCE_ID
    )
    assert env.coordinator.heartbeat("g", 1, again.member_id, "i-1") == ErrorCode.NONE
    _top, errors = env.coordinator.leave_group("g", [(follower.member_id, "i-1")])
    assert errors == [ErrorCode.FENCED_INSTANCE_ID]


async def test_a_static_member_rebalances_only_when_the_selected_protocol_changes(
    env: Env,
) -> None:
    """Kafka: a static member replaced in a Stable group keeps the generation and its
    assignment unless its protocols change the protocol the group would select; new
    subscription metadata under the same protocol is kept for the next rebalance. A leader
    that cannot skip the assignment (JoinGroup before v9) is answered with the previous leader
    id, so it syncs as a follower."""
    first = join(env, instance="i-0")
    await env.advance(DELAY_MS)
    member = first.result().member_id
    sync(env, member, 1, {member: b"x"})
    changed = join(env, instance="i-0", protocols=[("range", subscription("t", "u"))]).result()
    assert (changed.error, changed.generation_id) == (ErrorCode.NONE, 1)
    assert changed.leader_id == member and changed.members == ()
    group = env.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    assert group.members[changed.member_id].metadata_for("range") == subscription("t", "u")
    assert sync(env, changed.member_id, 1, instance="i-0").result().assignment == b"x"
    # Preferring another protocol it now supports changes the group's selection: rebalance.
    preferred = [("roundrobin", subscription("t")), ("range", subscription("t"))]
    other = join(env, instance="i-0", protocols=preferred)
    await env.advance(0)
    assert other.result().generation_id == 2 and other.result().protocol_name == "roundrobin"


async def test_static_member_leaves_by_instance_id(env: Env) -> None:
    first = join(env, instance="i-0")
    await env.advance(DELAY_MS)
    member = first.result().member_id
    sync(env, member, 1, {member: b"x"})
    assert env.coordinator.leave_group("g", [("", "i-0")]) == (ErrorCode.NONE, [ErrorCode.NONE])
    group = env.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY


# -- offsets ------------------------------------------------------------------------------


def commit(
    env: Env,
    entries: Sequence[tuple[str, int, int]],
    *,
    generation: int = -1,
    member: str = "",
    group: str = "g",
    metadata: str | None = "meta",
    retention_ms: int = -1,
) -> list[ErrorCode]:
    return env.coordinator.commit_offsets(
        group,
        generation,
        member,
        None,
        [OffsetCommitEntry(t, p, o, 7, metadata) for t, p, o in entries],
        retention_ms=retention_ms,
    )


def fetched(env: Env, group: str = "g") -> dict[tuple[str, int], int]:
    return {
        (t, p): c.offset for t, p, c in env.coordinator.fetch_offsets(group, None) if c is not None
    }


async def test_simple_commits_and_fetch(env: Env) -> None:
    assert commit(env, [("t", 0, 5), ("t", 1, 9)]) == [ErrorCode.NONE] * 2
    [(_topic, _partition, committed)] = env.coordinator.fetch_offsets("g", [("t", 0)])
    assert committed is not None
    assert (committed.offset, committed.metadata, committed.leader_epoch) == (5, "meta", 7)
    assert env.coordinator.fetch_offsets("g", [("t", 2)]) == [("t", 2, None)]
    assert env.coordinator.fetch_offsets("none", [("t", 0)]) == [("t", 0, None)]
    assert fetched(env) == {("t", 0): 5, ("t", 1): 9}
    assert commit(env, [("t", 0, 1)], generation=3, group="other") == [ErrorCode.ILLEGAL_GENERATION]
    assert commit(env, [("t", 0, 1)], metadata="x" * 5000) == [ErrorCode.OFFSET_METADATA_TOO_LARGE]
    assert commit(env, [("t", 0, 6)], metadata=None) == [ErrorCode.NONE]
    assert env.coordinator.fetch_offsets("g", [("t", 0)])[0][2].metadata == ""  # type: ignore[union-attr]


async def test_member_commits_are_checked(env: Env) -> None:
    a, b = await stable_group(env, 2)
    assert commit(env, [("t", 0, 1)], generation=1, member=a) == [ErrorCode.NONE]
    assert commit(env, [("t", 0, 1)], generation=0, member=a) == [ErrorCode.ILLEGAL_GENERATION]
    assert commit(env, [("t", 0, 1)], generation=1, member="x") == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert commit(env, [("t", 0, 1)]) == [ErrorCode.UNKNOWN_MEMBER_ID]
    await join_new(env, client="c")
    # PreparingRebalance still takes commits of the current generation (Kafka does too).
    assert commit(env, [("t", 0, 2)], generation=1, member=a) == [ErrorCode.NONE]
    join(env, a)
    join(env, b)
    group = env.coordinator.group("g")
    assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
    assert commit(env, [("t", 0, 3)], generation=2, member=a) == [ErrorCode.REBALANCE_IN_PROGRESS]


async def test_a_failed_append_is_an_error_and_changes_nothing(env: Env) -> None:
    env.store.fail_with = ErrorCode.NOT_COORDINATOR
    assert commit(env, [("t", 0, 5)]) == [ErrorCode.NOT_COORDINATOR]
    assert fetched(env) == {}


async def test_one_batch_per_commit(env: Env) -> None:
    commit(env, [("t", p, p) for p in range(10)])
    assert env.store.batches == 1
    keys = [decode_key(k) for k, _ in env.store.records[env.coordinator.partition_for("g")]]
    assert keys == [OffsetKey("g", "t", p) for p in range(10)]


# -- durability -----------------------------------------------------------------------------


async def test_offsets_and_groups_survive_a_restart(env: Env) -> None:
    a, b = await stable_group(env, 2)
    commit(env, [("t", 0, 42)], generation=1, member=a)
    commit(env, [("x", 3, 7)], group="simple")
    coordinator = env.restart()
    assert fetched(env) == {("t", 0): 42}
    assert fetched(env, "simple") == {("x", 3): 7}
    group = coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    assert list(group.members) == [a, b]
    assert group.generation_id == 1
    # Members carry on with their generation: heartbeat and sync still work.
    assert coordinator.heartbeat("g", 1, b, None) == ErrorCode.NONE
    assert sync(env, b, 1).result().assignment == b.encode()
    # ...and a member that does not come back expires.
    await env.advance(SESSION_MS // 2)
    assert coordinator.heartbeat("g", 1, b, None) == ErrorCode.NONE
    await env.advance(SESSION_MS // 2)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert list(group.members) == [b]


async def test_deleted_groups_stay_deleted_after_a_restart(env: Env) -> None:
    commit(env, [("t", 0, 1)])
    assert env.coordinator.delete_groups(["g", "none", ""]) == [
        ErrorCode.NONE,
        ErrorCode.GROUP_ID_NOT_FOUND,
        ErrorCode.INVALID_GROUP_ID,
    ]
    env.restart()
    assert env.coordinator.group("g") is None
    assert fetched(env) == {}


async def test_delete_refuses_non_empty_groups(env: Env) -> None:
    await stable_group(env, 1)
    assert env.coordinator.delete_groups(["g"]) == [ErrorCode.NON_EMPTY_GROUP]


async def test_offset_delete_refuses_subscribed_topics(env: Env) -> None:
    [member] = await stable_group(env, 1)
    commit(env, [("t", 0, 1), ("other", 0, 2)], generation=1, member=member)
    top, errors = env.coordinator.delete_offsets("g", [("t", 0), ("other", 0)])
    assert top == ErrorCode.NONE
    assert errors == [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.NONE]
    assert fetched(env) == {("t", 0): 1}
    assert env.coordinator.delete_offsets("none", [("t", 0)])[0] == ErrorCode.GROUP_ID_NOT_FOUND
    env.restart()
    assert fetched(env) == {("t", 0): 1}


# -- retention ----------------------------------------------------------------------------


async def test_offsets_of_an_empty_group_expire_after_retention(env: Env) -> None:
    [member] = await stable_group(env, 1)
    commit(env, [("t", 0, 1), ("u", 0, 1)], generation=1, member=member)
    # Stable and subscribed to "t": only "u" may expire. (The clock moves without running
    # timers, so the member does not expire meanwhile.)
    env.clock.advance(env.config.offsets_retention_ms)
    assert env.coordinator.expire_offsets() == 1
    assert fetched(env) == {("t", 0): 1}
    env.coordinator.leave_group("g", [(member, None)])
    await env.advance(env.config.offsets_retention_ms - 1)
    assert env.coordinator.expire_offsets() == 0
    await env.advance(1)
    assert env.coordinator.expire_offsets() == 1
    # The group had nothing left: it is gone, and stays gone after a restart.
    assert env.coordinator.group("g") is None
    env.restart()
    assert env.coordinator.group("g") is None


async def test_explicit_retention_and_simple_groups(env: Env) -> None:
    commit(env, [("t", 0, 1)], retention_ms=1000)
    commit(env, [("t", 1, 1)])
    await env.advance(1000)
    assert env.coordinator.expire_offsets() == 1
    assert fetched(env) == {("t", 1): 1}


async def test_retention_runs_on_the_scheduler(env: Env) -> None:
    env.coordinator.start()
    commit(env, [("t", 0, 1)])
    env.clock.advance(env.config.offsets_retention_ms)
    await env.advance(env.config.retention_check_interval_ms)
    assert env.coordinator.group("g") is None


# -- describe, list, stats ----------------------------------------------------------------


async def test_describe_list_and_stats(env: Env) -> None:
    ids = await stable_group(env, 2)
    commit(env, [("t", 0, 4)], generation=1, member=ids[0])
    description = env.coordinator.describe_group("g")
    assert description is not None
    assert description.state == "Stable" and description.protocol_name == "range"
    assert [m.assignment for m in description.members] == [i.encode() for i in ids]
    assert [m.metadata for m in description.members] == [subscription("t")] * 2
    assert [(x.group_id, x.state) for x in env.coordinator.list_groups()] == [("g", "Stable")]
    [stats] = env.coordinator.group_stats(lambda topic, partition: 10)
    assert (stats.state, stats.members, stats.generation) == ("Stable", 2, 1)
    assert [(o.topic, o.partition, o.committed_offset, o.lag) for o in stats.offsets] == [
        ("t", 0, 4, 6)
    ]


async def test_stop_answers_parked_joins(env: Env) -> None:
    pending = await join_new(env)
    env.coordinator.stop()
    assert pending.result().error == ErrorCode.NOT_COORDINATOR
    # Requests arriving during the rest of the shutdown are not parked either.
    assert join(env).result().error == ErrorCode.NOT_COORDINATOR
    assert sync(env, "m", 1).result().error == ErrorCode.NOT_COORDINATOR


# -- invariants under random operation sequences ----------------------------------------------

OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["join", "static", "rejoin", "sync", "heartbeat", "leave", "wait"]),
        st.integers(0, 4),
        st.integers(100, SESSION_MS + 1000),
    ),
    max_size=40,
)


def check_invariants(env: Env, generations: list[int]) -> None:
    group = env.coordinator.group("g")
    if group is None:
        return
    if group.members:
        assert group.leader_id in group.members
    if group.state is GroupState.EMPTY:
        assert not group.members
    if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        assert group.members
        assert group.protocol_name is not None
    assert set(group.static_members.values()) <= set(group.members)
    assert not generations or group.generation_id >= generations[-1]
    generations.append(group.generation_id)


@settings(max_examples=200, deadline=None)
@given(OPERATIONS)
def test_random_operations_keep_the_group_consistent(
    operations: list[tuple[str, int, int]],
) -> None:
    async def run() -> None:
        env = make_env()
        known: list[str] = []
        generations: list[int] = []
        for op, who, amount in operations:
            group = env.coordinator.group("g")
            generation = 0 if group is None else group.generation_id
            member = known[who % len(known)] if known else ""
            if op == "join":
                result = join(env).result()
                if result.error == ErrorCode.MEMBER_ID_REQUIRED:
                    join(env, result.member_id)
                    known.append(result.member_id)
            elif op == "static":
                static = join(env, instance=f"i-{who}")
                if static.done() and static.result().member_id:
                    known.append(static.result().member_id)
            elif op == "rejoin" and member:
                join(env, member)
            elif op == "sync" and member:
                sync(env, member, generation, {m: b"x" for m in known})
            elif op == "heartbeat" and member:
                env.coordinator.heartbeat("g", generation, member, None)
            elif op == "leave" and member:
                env.coordinator.leave_group("g", [(member, None)])
            elif op == "wait":
                await env.advance(amount)
            check_invariants(env, generations)
        # Whatever happened, silence lets every member expire and the group empty out.
        for _ in range(2 * (SESSION_MS + REBALANCE_MS) // 1000):
            await env.advance(1000)
        check_invariants(env, generations)
        group = env.coordinator.group("g")
        assert group is None or group.state is GroupState.EMPTY
        env.coordinator.stop()

    asyncio.run(run())


async def test_a_deleted_topic_takes_its_offsets_along(env: Env) -> None:
    commit(env, [("t", 0, 1), ("u", 0, 2)])
    commit(env, [("t", 1, 3)], group="other")
    env.coordinator.remove_offsets_of_topic("t")
    assert fetched(env) == {("u", 0): 2}
    assert fetched(env, "other") == {}
    env.restart()
    assert fetched(env) == {("u", 0): 2}
