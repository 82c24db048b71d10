"""Online migration between the classic and the consumer protocol (KIP-848), in the
coordinator on a manual clock: a classic group with members upgraded by a consumer-protocol
member's heartbeat, its classic members answered from the consumer group's target assignment
(JoinGroup, SyncGroup, Heartbeat), the downgrade when the last consumer-protocol member
leaves, ``group.consumer.migration.policy``, commits of classic members, a restart."""

from __future__ import annotations

import pytest

from josefk.broker.group.assignment import decode_assignment, encode_assignment
from josefk.broker.group.coordinator import OffsetCommitEntry
from josefk.broker.group.group import GroupState
from josefk.protocol.errors import ErrorCode
from tests.broker.test_consumer_group_coordinator import Env, Member, make_env, restart
from tests.broker.test_group_coordinator import join, subscription


@pytest.fixture
def env() -> Env:
    e = make_env()
    e.topics.add("t", 6)
    return e


class Classic:
    """A classic eager consumer: it revokes everything before it rejoins."""

    def __init__(self, env: Env, client: str) -> None:
        self.env = env
        self.client = client
        self.member_id = ""
        self.generation = -1
        self.partitions: set[int] = set()

    async def join(self, *, policy_error: ErrorCode | None = None) -> ErrorCode:
        self.partitions = set()
        result = await join(self.env, self.member_id, client=self.client)
        if result.error == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = result.member_id
            result = await join(self.env, self.member_id, client=self.client)
        if result.error:
            return ErrorCode(result.error)
        self.member_id = result.member_id
        self.generation = result.generation_id
        assert result.leader_id != self.member_id and not result.members
        synced = await self.env.coordinator.sync_group(
            "g", self.generation, self.member_id, None, {}
        )
        if synced.error:
            return ErrorCode(synced.error)
        self.partitions = {p for _, p in decode_assignment(synced.assignment)}
        return ErrorCode.NONE

    def heartbeat(self) -> ErrorCode:
        return self.env.coordinator.heartbeat("g", self.generation, self.member_id, None)


async def classic_group(env: Env) -> tuple[Classic, Classic]:
    """A Stable classic group of two eager members with three partitions each."""
    a, b = Classic(env, "a"), Classic(env, "b")
    first = await join(env, client="a")
    a.member_id = first.member_id
    second = await join(env, client="b")
    b.member_id = second.member_id
    ja, jb = join(env, a.member_id, client="a"), join(env, b.member_id, client="b")
    await env.advance(0)
    ra, rb = await ja, await jb
    assert ra.error == rb.error == ErrorCode.NONE
    a.generation = b.generation = ra.generation_id
    leader = ra.leader_id
    assignments = {
        a.member_id: encode_assignment({"t": [0, 1, 2]}),
        b.member_id: encode_assignment({"t": [3, 4, 5]}),
    }
    sa, sb = (
        env.coordinator.sync_group(
            "g", m.generation, m.member_id, None, assignments if m.member_id == leader else {}
        )
        for m in (a, b)
    )
    for member, synced in ((a, sa), (b, sb)):
        member.partitions = {p for _, p in decode_assignment((await synced).assignment)}
    group = env.coordinator.group("g")
    assert group is not None and group.is_in(GroupState.STABLE)
    return a, b


def owned_once(*holders: set[int]) -> bool:
    seen: set[int] = set()
    for held in holders:
        if seen & held:
            return False
        seen |= held
    return True


async def test_a_consumer_member_upgrades_a_classic_group_with_members(env: Env) -> None:
    a, b = await classic_group(env)
    generation = a.generation
    c = Member(env, "c")
    assert c.heartbeat().error == ErrorCode.NONE
    group = env.coordinator.consumer_group("g")
    assert group is not None and env.coordinator.group("g") is None
    assert set(group.members) == {a.member_id, b.member_id, "c"}
    assert group.members[a.member_id].member_epoch == generation
    described = env.coordinator.describe_consumer_group("g")
    assert described is not None
    assert {m.member_id: m.uses_classic_protocol for m in described.members} == {
        a.member_id: True,
        b.member_id: True,
        "c": False,
    }
    # DescribeGroups describes classic groups only: Kafka answers a mixed group as missing.
    assert env.coordinator.describe_group("g") is None
    assert env.coordinator.describe_group_miss("g") == "Group g is not a classic group."
    # The newcomer gets nothing the classic members still hold.
    assert c.partitions() == set()
    # The classic members hear that their assignment changed, and rejoin.
    assert a.heartbeat() == b.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    assert await a.join() == ErrorCode.NONE
    assert a.generation == group.group_epoch
    assert await b.join() == ErrorCode.NONE
    c.heartbeat()
    assert owned_once(a.partitions, b.partitions, c.partitions())
    assert sorted(a.partitions | b.partitions | c.partitions()) == list(range(6))
    assert len(a.partitions) == len(b.partitions) == len(c.partitions()) == 2
    assert a.heartbeat() == b.heartbeat() == ErrorCode.NONE
    assert group.state.value == "Stable"
    # A classic member commits with its generation (its member epoch), any API version.
    commit = env.coordinator.commit_offsets
    entry = [OffsetCommitEntry("t", min(a.partitions), 5)]
    assert commit("g", a.generation, a.member_id, None, entry, api_version=8) == [ErrorCode.NONE]
    assert commit("g", a.generation - 1, a.member_id, None, entry) == [ErrorCode.ILLEGAL_GENERATION]


async def test_the_last_consumer_member_leaving_downgrades_the_group(env: Env) -> None:
    a, b = await classic_group(env)
    c = Member(env, "c")
    c.heartbeat()
    for m in (a, b):
        m.heartbeat()
        await m.join()
    c.heartbeat()
    assert c.heartbeat(epoch=-1).error == ErrorCode.NONE
    group = env.coordinator.group("g")
    assert group is not None and env.coordinator.consumer_group("g") is None
    assert group.is_in(GroupState.PREPARING_REBALANCE)
    assert set(group.members) == {a.member_id, b.member_id}
    # The classic members rebalance under the classic protocol again.
    assert a.heartbeat() in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION)
    ja = join(env, a.member_id, client="a")
    jb = join(env, b.member_id, client="b")
    await env.advance(0)
    ra, rb = await ja, await jb
    assert ra.error == rb.error == ErrorCode.NONE
    assert ra.leader_id in (a.member_id, b.member_id)
    assert ra.generation_id > a.generation


async def test_a_classic_member_leaving_a_mixed_group_hands_its_partitions_over(
    env: Env,
) -> None:
    a, b = await classic_group(env)
    c = Member(env, "c")
    c.heartbeat()
    error, errors = env.coordinator.leave_group("g", [(a.member_id, None), ("nobody", None)])
    assert error == ErrorCode.NONE and errors == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    c.heartbeat()
    # a's partitions were released by its leaving; b's stay b's until b rejoins.
    assert c.partitions() and c.partitions() <= {0, 1, 2}
    group = env.coordinator.consumer_group("g")
    assert group is not None and set(group.members) == {b.member_id, "c"}
    assert b.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    assert await b.join() == ErrorCode.NONE
    c.heartbeat()
    assert owned_once(b.partitions, c.partitions())
    assert len(b.partitions) == len(c.partitions()) == 3


async def test_a_session_timeout_of_a_classic_member_removes_it(env: Env) -> None:
    a, b = await classic_group(env)
    c = Member(env, "c")
    c.heartbeat()
    for _ in range(3):  # the classic session timeout is 10 s (JoinGroup's)
        await env.advance(4_000)
        assert a.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS  # a keeps its session
        assert c.heartbeat(full=False).error == ErrorCode.NONE
    group = env.coordinator.consumer_group("g")
    assert group is not None and b.member_id not in group.members
    assert a.member_id in group.members


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
async def test_a_policy_without_upgrade_refuses_the_heartbeat(policy: str) -> None:
    env = make_env(consumer_migration_policy=policy)
    env.topics.add("t", 6)
    await classic_group(env)
    result = Member(env, "c").heartbeat()
    assert result.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert env.coordinator.group("g") is not None


async def test_disabled_refuses_a_new_classic_member_of_a_consumer_group() -> None:
    env = make_env(consumer_migration_policy="disabled")
    env.topics.add("t", 6)
    Member(env, "c").heartbeat()
    refused = await join(env, client="x", known_required=False)
    assert refused.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


async def test_upgrade_policy_keeps_a_mixed_group_when_the_consumer_member_leaves() -> None:
    env = make_env(consumer_migration_policy="upgrade")
    env.topics.add("t", 6)
    a, _ = await classic_group(env)
    c = Member(env, "c")
    c.heartbeat()
    c.heartbeat(epoch=-1)
    assert env.coordinator.consumer_group("g") is not None
    assert a.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS


async def test_a_restart_keeps_the_classic_members_of_a_consumer_group(env: Env) -> None:
    a, _ = await classic_group(env)
    c = Member(env, "c")
    c.heartbeat()
    await a.join()
    coordinator = restart(env)
    group = coordinator.consumer_group("g")
    assert group is not None
    member = group.members[a.member_id]
    assert member.classic is not None and member.classic.protocols[0][0] == "range"
    assert member.classic.protocols[0][1] == subscription("t")
    assert coordinator.heartbeat("g", a.generation, a.member_id, None) in (
        ErrorCode.NONE,
        ErrorCode.REBALANCE_IN_PROGRESS,
    )
