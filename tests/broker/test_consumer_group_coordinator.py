"""KIP-848 consumer groups in the coordinator, on a manual clock: heartbeats with member
epochs, reconciliation (a partition reaches its new owner only after the old one revoked it),
leaving, static members, session and revocation timeouts, regex subscriptions, metadata
changes, the errors Kafka answers, offsets of consumer groups, and conversion between classic
and consumer groups. Timers are the storage Scheduler's, stepped with the clock."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.broker.catalog import TopicInfo
from josefk.broker.group.consumer import (
    REGEX_REFRESH_INTERVAL_MS,
    HeartbeatRequest,
    HeartbeatResult,
)
from josefk.broker.group.consumer_group import ConsumerGroupState
from josefk.broker.group.coordinator import GroupConfig, GroupCoordinator, OffsetCommitEntry
from josefk.broker.group.store import MemoryOffsetsStore
from josefk.protocol.errors import ErrorCode
from josefk.util.clock import ManualClock
from josefk.util.scheduler import Scheduler
from tests.broker.test_group_coordinator import join

SESSION_MS = 45_000
REBALANCE_MS = 30_000


class Topics:
    def __init__(self) -> None:
        self.infos: dict[str, TopicInfo] = {}

    def add(self, name: str, partitions: int) -> uuid.UUID:
        info = self.infos.get(name)
        topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, name) if info is None else info.topic_id
        self.infos[name] = TopicInfo(name, topic_id, partitions)
        return topic_id

    def topics(self) -> Iterable[TopicInfo]:
        return list(self.infos.values())


@dataclass
class Env:
    clock: ManualClock
    scheduler: Scheduler
    coordinator: GroupCoordinator
    topics: Topics
    store: MemoryOffsetsStore

    async def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        await self.scheduler.run_due()


def make_env(**overrides: object) -> Env:
    settings_ = {"min_session_timeout_ms": 1000, "initial_rebalance_delay_ms": 0}
    settings_.update(overrides)  # type: ignore[arg-type]
    config = GroupConfig(**settings_)  # type: ignore[arg-type]
    clock = ManualClock()
    scheduler = Scheduler(clock)
    store = MemoryOffsetsStore(config.offsets_partitions)
    topics = Topics()
    counter = itertools.count(1)
    coordinator = GroupCoordinator(
        config,
        store,
        scheduler=scheduler,
        clock=clock,
        topics=topics,
        new_member_suffix=lambda: f"c{next(counter)}",
    )
    return Env(clock, scheduler, coordinator, topics, store)


@pytest.fixture
def env() -> Env:
    e = make_env()
    e.topics.add("t", 6)
    return e


@dataclass
class Member:
    """A client that does what the coordinator says: it owns what it was last assigned."""

    env: Env
    member_id: str
    group: str = "g"
    topics: tuple[str, ...] | None = ("t",)
    regex: str | None = None
    instance_id: str | None = None
    assignor: str | None = None
    epoch: int = 0
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    # Partitions taken away that this client still consumes until it says it let them go
    # (a heartbeat with its owned partitions).
    revoking: set[tuple[uuid.UUID, int]] = field(default_factory=set)
    last: HeartbeatResult | None = None

    def heartbeat(self, *, epoch: int | None = None, full: bool = True) -> HeartbeatResult:
        joining = self.epoch == 0 if epoch is None else epoch == 0
        if full or joining:
            self.revoking.clear()
        result = self.env.coordinator.consumer_group_heartbeat(
            HeartbeatRequest(
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=self.epoch if epoch is None else epoch,
                instance_id=self.instance_id,
                rebalance_timeout_ms=REBALANCE_MS if joining else -1,
                subscribed_topic_names=self.topics if joining or full else None,
                subscribed_topic_regex=self.regex,
                server_assignor=self.assignor,
                owned={} if joining else (dict(self.owned) if full else None),
            )
        )
        self.last = result
        if result.error == ErrorCode.NONE:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                before = {(t, p) for t, ps in self.owned.items() for p in ps}
                self.owned = dict(result.assignment)
                self.revoking |= before - {(t, p) for t, ps in self.owned.items() for p in ps}
        return result

    def partitions(self) -> set[int]:
        return {p for ps in self.owned.values() for p in ps}


def disjoint(members: Iterable[Member]) -> bool:
    seen: set[tuple[uuid.UUID, int]] = set()
    for m in members:
        mine = {(t, p) for t, ps in m.owned.items() for p in ps} | m.revoking
        if seen & mine:
            return False
        seen |= mine
    return True


def test_a_second_member_gets_partitions_only_after_the_first_revoked_them(env: Env) -> None:
    a = Member(env, "a")
    assert a.heartbeat().error == ErrorCode.NONE
    assert a.partitions() == set(range(6)) and a.epoch == 1
    b = Member(env, "b")
    b.heartbeat()
    group = env.coordinator.consumer_group("g")
    assert group is not None and group.group_epoch == 2
    # b is at the new epoch but nothing of its target is free yet.
    assert b.epoch == 2 and b.partitions() == set()
    assert group.state is ConsumerGroupState.RECONCILING
    # a learns what to keep; it keeps consuming those (still epoch 1, revoking the rest).
    a.heartbeat()
    assert a.epoch == 1 and len(a.partitions()) == 3
    b.heartbeat()
    assert b.partitions() == set(), "given before a revoked"
    # a acknowledges the revocation (its owned list no longer has them): epoch 2.
    a.heartbeat()
    assert a.epoch == 2
    b.heartbeat()
    assert len(b.partitions()) == 3 and disjoint([a, b])
    assert a.partitions() | b.partitions() == set(range(6))
    assert group.state is ConsumerGroupState.STABLE


def test_a_member_that_never_acknowledges_keeps_its_partitions_from_the_newcomer(env: Env) -> None:
    a = Member(env, "a")
    a.heartbeat()
    b = Member(env, "b")
    b.heartbeat()
    # a heartbeats without saying what it owns (no ack): b keeps waiting.
    for _ in range(3):
        a.heartbeat(full=False)
        b.heartbeat()
    assert b.partitions() == set()


async def test_revocation_timeout_removes_the_member_and_frees_its_partitions(env: Env) -> None:
    a = Member(env, "a")
    a.heartbeat()
    b = Member(env, "b")
    b.heartbeat()
    a.heartbeat(full=False)  # told to revoke, never does
    await env.advance(REBALANCE_MS + 1)
    group = env.coordinator.consumer_group("g")
    assert group is not None and "a" not in group.members
    b.heartbeat()
    assert b.partitions() == set(range(6))


async def test_session_timeout_removes_a_silent_member(env: Env) -> None:
    a, b = Member(env, "a"), Member(env, "b")
    a.heartbeat()
    b.heartbeat()
    for _ in range(3):
        a.heartbeat()
        b.heartbeat()
    assert len(a.partitions()) == 3
    await env.advance(SESSION_MS // 2)
    a.heartbeat()
    await env.advance(SESSION_MS // 2 + 1)  # b silent for a whole session
    group = env.coordinator.consumer_group("g")
    assert group is not None and set(group.members) == {"a"}
    a.heartbeat()
    assert a.partitions() == set(range(6))
    assert b.heartbeat().error == ErrorCode.UNKNOWN_MEMBER_ID


def test_leaving_hands_partitions_over(env: Env) -> None:
    a, b = Member(env, "a"), Member(env, "b")
    a.heartbeat()
    b.heartbeat()
    for _ in range(2):
        a.heartbeat()
        b.heartbeat()
    left = b.heartbeat(epoch=-1)
    assert left.error == ErrorCode.NONE and left.member_epoch == -1
    a.heartbeat()
    assert a.partitions() == set(range(6))


def test_epoch_errors(env: Env) -> None:
    a = Member(env, "a")
    a.heartbeat()
    assert a.heartbeat(epoch=a.epoch + 1).error == ErrorCode.FENCED_MEMBER_EPOCH
    b = Member(env, "b")
    b.heartbeat()
    a.heartbeat()
    a.heartbeat()  # a acks: epoch 2
    assert a.epoch == 2
    # The previous epoch passes only with owned partitions it still has (a lost answer).
    assert a.heartbeat(epoch=1, full=False).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert a.heartbeat(epoch=1).error == ErrorCode.NONE
    assert Member(env, "ghost").heartbeat(epoch=3).error == ErrorCode.UNKNOWN_MEMBER_ID
    lost = Member(env, "x", group="nope").heartbeat(epoch=3)
    assert lost.error == ErrorCode.GROUP_ID_NOT_FOUND


def test_request_validation(env: Env) -> None:
    assert Member(env, "", group="g").heartbeat().error == ErrorCode.INVALID_REQUEST
    assert Member(env, "a", topics=None).heartbeat().error == ErrorCode.INVALID_REQUEST
    wrong = Member(env, "a", assignor="sticky").heartbeat()
    assert wrong.error == ErrorCode.UNSUPPORTED_ASSIGNOR
    bad = Member(env, "a", topics=None, regex="t(").heartbeat()
    assert bad.error == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert env.coordinator.consumer_group("g") is None


def test_a_join_must_carry_an_empty_owned_list_and_a_rebalance_timeout(env: Env) -> None:
    """Kafka's checks of a (re)join, in its order: the rebalance timeout, then TopicPartitions
    present and empty (a missing list is refused too), then a subscription."""

    def join(**fields: object) -> HeartbeatResult:
        request = {
            "group_id": "g",
            "member_id": "a",
            "member_epoch": 0,
            "rebalance_timeout_ms": REBALANCE_MS,
            "subscribed_topic_names": ("t",),
            "owned": {},
        }
        request.update(fields)
        return env.coordinator.consumer_group_heartbeat(HeartbeatRequest(**request))  # type: ignore[arg-type]

    topic_id = env.topics.infos["t"].topic_id
    for fields, message in [
        ({"rebalance_timeout_ms": -1, "owned": None}, "RebalanceTimeoutMs must be provided"),
        ({"owned": None}, "TopicPartitions must be empty when (re-)joining."),
        ({"owned": {topic_id: frozenset({0})}}, "TopicPartitions must be empty"),
        ({"subscribed_topic_names": None}, "SubscribedTopicNames or SubscribedTopicRegex"),
    ]:
        refused = join(**fields)
        assert refused.error == ErrorCode.INVALID_REQUEST
        assert refused.error_message is not None and refused.error_message.startswith(message)
    assert env.coordinator.consumer_group("g") is None
    assert join().error == ErrorCode.NONE


def test_subscription_changes_with_a_leave_and_rejoin_between_get_the_whole_new_assignment(
    env: Env,
) -> None:
    """librdkafka's test 0045_subscribe_many_updates, as its heartbeats reach the coordinator:
    one member changes its subscription over a sliding window of topics (a heartbeat with the
    new names and no owned list), unsubscribes while it still revokes a dropped topic (epoch
    -1), rejoins at once with the same member id (epoch 0) and a later window. Each answer is
    Kafka's: the dropped topic is revoked first, the member keeps its epoch until it has let
    it go, the leave frees everything, and the rejoin is given its whole new window in one
    epoch, nothing withheld for what the member was revoking before it left. A heartbeat of
    the old incarnation that arrives after the leave is UNKNOWN_MEMBER_ID."""
    ids = {f"w{i}": env.topics.add(f"w{i}", 4) for i in range(9)}

    def window(first: int) -> tuple[str, ...]:
        return tuple(f"w{i}" for i in range(first, first + 5))

    def partitions(assignment: dict[uuid.UUID, frozenset[int]] | None) -> set[tuple[str, int]]:
        names = {topic_id: name for name, topic_id in ids.items()}
        return {(names[t], p) for t, ps in (assignment or {}).items() for p in ps}

    def expected(first: int) -> set[tuple[str, int]]:
        return {(name, p) for name in window(first) for p in range(4)}

    def heartbeat(epoch: int, **fields: object) -> HeartbeatResult:
        request: dict[str, object] = {"group_id": "g", "member_id": "m", "member_epoch": epoch}
        request.update(fields)
        return env.coordinator.consumer_group_heartbeat(HeartbeatRequest(**request))  # type: ignore[arg-type]

    joined = heartbeat(
        0, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=window(0), owned={}
    )
    assert joined.error == ErrorCode.NONE and partitions(joined.assignment) == expected(0)
    epoch = joined.member_epoch
    # A new window without an owned list: w0 must be revoked first, w5 waits for it.
    moved = heartbeat(epoch, subscribed_topic_names=window(1))
    assert moved.error == ErrorCode.NONE and moved.member_epoch == epoch
    assert partitions(moved.assignment) == expected(1) - {("w5", p) for p in range(4)}
    # A heartbeat in flight at the same epoch, still without an owned list: nothing moves.
    still = heartbeat(epoch)
    assert still.error == ErrorCode.NONE and still.member_epoch == epoch
    # The application unsubscribes before the revocation is acknowledged: the member leaves.
    left = heartbeat(-1)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    group = env.coordinator.consumer_group("g")
    assert group is not None and not group.members and not group.owners
    # ...and subscribes again at once: the same member id joins with epoch 0.
    rejoined = heartbeat(
        0, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=window(3), owned={}
    )
    assert rejoined.error == ErrorCode.NONE and rejoined.member_epoch > epoch
    assert partitions(rejoined.assignment) == expected(3)
    epoch = rejoined.member_epoch
    acked = heartbeat(epoch, owned=dict(rejoined.assignment or {}))
    assert acked.error == ErrorCode.NONE and acked.member_epoch == epoch
    assert group.state is ConsumerGroupState.STABLE
    # The same once more from a stable member that acknowledges its revocation.
    moved = heartbeat(epoch, subscribed_topic_names=window(4))
    kept = dict(moved.assignment or {})
    assert partitions(kept) == expected(4) - {("w8", p) for p in range(4)}
    done = heartbeat(epoch, owned=kept)
    assert done.member_epoch > epoch and partitions(done.assignment) == expected(4)
    assert heartbeat(-1).error == ErrorCode.NONE
    stale = heartbeat(done.member_epoch, owned=kept)
    assert stale.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_still_revoking_that_drops_a_topic_is_told_to_revoke_it_at_once(
    env: Env,
) -> None:
    u = env.topics.add("u", 2)
    t = env.topics.infos["t"].topic_id
    a = Member(env, "a", topics=("t", "u"))
    a.heartbeat()
    assert set(a.owned) == {t, u} and a.epoch == 1
    b = Member(env, "b", topics=("t",))  # b takes a share of t only: a keeps u
    b.heartbeat()
    a.heartbeat(full=False)  # told what to keep; revoking the rest, not acknowledged yet
    group = env.coordinator.consumer_group("g")
    assert group is not None
    member = group.members["a"]
    assert member.pending_revocation and a.epoch == 1 and member.assigned[u] == {0, 1}
    kept_t = member.assigned.get(t, frozenset())
    # a drops u while it still revokes: u's partitions are to be revoked now, same epoch.
    a.topics = ("t",)
    # librdkafka's heartbeat with a new subscription: the names, no owned list.
    result = env.coordinator.consumer_group_heartbeat(
        HeartbeatRequest(group_id="g", member_id="a", member_epoch=1, subscribed_topic_names=("t",))
    )
    assert result.error == ErrorCode.NONE and result.member_epoch == 1
    assert result.assignment is not None and u not in result.assignment
    assert result.assignment.get(t, frozenset()) == kept_t
    assert member.pending_revocation.get(u)
    # It acknowledges (owns only what it keeps of t): next epoch, and b gets the rest.
    a.owned = dict(result.assignment)
    a.heartbeat()
    assert a.epoch == group.assignment_epoch and u not in a.owned
    for _ in range(2):
        b.heartbeat()
        a.heartbeat()
    owned = {(tid, p) for m in (a, b) for tid, ps in m.owned.items() for p in ps}
    assert disjoint([a, b]) and u not in a.owned
    assert owned == {(t, p) for p in range(6)}
    assert group.state is ConsumerGroupState.STABLE


def test_static_member_leaves_temporarily_and_its_instance_takes_its_partitions_back(
    env: Env,
) -> None:
    a = Member(env, "a1", instance_id="i-a")
    b = Member(env, "b", instance_id="i-b")
    a.heartbeat()
    b.heartbeat()
    for _ in range(2):
        a.heartbeat()
        b.heartbeat()
    kept, epoch = a.partitions(), a.epoch
    group = env.coordinator.consumer_group("g")
    assert group is not None
    group_epoch = group.group_epoch
    assert a.heartbeat(epoch=-2).member_epoch == -2
    # Another process with the same instance id while a1 is active is refused.
    c = Member(env, "c", instance_id="i-b")
    assert c.heartbeat().error == ErrorCode.UNRELEASED_INSTANCE_ID
    back = Member(env, "a2", instance_id="i-a")
    back.heartbeat()
    assert back.partitions() == kept and back.epoch == epoch
    assert group.group_epoch == group_epoch, "a static rejoin does not rebalance"
    assert set(group.members) == {"a2", "b"}


async def test_regex_subscription_picks_up_a_new_topic_and_added_partitions(env: Env) -> None:
    a = Member(env, "a", topics=None, regex="orders-.*")
    env.topics.add("orders-eu", 2)
    a.heartbeat()
    assert a.partitions() == set()  # the regex is resolved after the heartbeat...
    await env.advance(0)
    a.heartbeat()
    assert a.partitions() == {0, 1}  # ...and its topics come with the next epoch
    new_id = env.topics.add("orders-us", 3)
    env.topics.add("other", 3)
    a.heartbeat()
    await env.advance(0)
    a.heartbeat()
    assert set(a.owned) == {env.topics.infos["orders-eu"].topic_id}  # resolved recently
    await env.advance(REGEX_REFRESH_INTERVAL_MS)
    a.heartbeat()
    await env.advance(0)
    a.heartbeat()
    assert set(a.owned) == {env.topics.infos["orders-eu"].topic_id, new_id}
    env.topics.add("orders-us", 5)
    a.heartbeat()
    assert a.owned[new_id] == frozenset(range(5))


def test_server_assignor_range(env: Env) -> None:
    env.topics.add("u", 6)
    a = Member(env, "a", topics=("t", "u"), assignor="range")
    b = Member(env, "b", topics=("t", "u"), assignor="range")
    a.heartbeat()
    b.heartbeat()
    for _ in range(3):
        a.heartbeat()
        b.heartbeat()
    t, u = (env.topics.infos[n].topic_id for n in ("t", "u"))
    assert a.owned == {t: frozenset({0, 1, 2}), u: frozenset({0, 1, 2})}
    assert b.owned == {t: frozenset({3, 4, 5}), u: frozenset({3, 4, 5})}
    description = env.coordinator.describe_consumer_group("g")
    assert description is not None and description.assignor_name == "range"


def test_offset_commits_check_the_member_epoch(env: Env) -> None:
    a = Member(env, "a")
    a.heartbeat()
    entry = [OffsetCommitEntry("t", 0, 10)]
    commit = env.coordinator.commit_offsets
    assert commit("g", a.epoch, "a", None, entry, api_version=9) == [ErrorCode.NONE]
    assert commit("g", a.epoch - 1, "a", None, entry, api_version=9) == [
        ErrorCode.STALE_MEMBER_EPOCH
    ]
    assert commit("g", a.epoch, "zz", None, entry, api_version=9) == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert commit("g", a.epoch, "a", None, entry, api_version=8) == [ErrorCode.UNSUPPORTED_VERSION]
    # Without a member, only an empty group takes commits.
    assert commit("g", -1, "", None, entry, api_version=9) == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert commit("none", 3, "a", None, entry, api_version=9) == [ErrorCode.GROUP_ID_NOT_FOUND]
    assert commit("none", 3, "a", None, entry, api_version=8) == [ErrorCode.ILLEGAL_GENERATION]
    validate = env.coordinator.validate_offset_fetch
    assert validate("g", "a", a.epoch) == ErrorCode.NONE
    assert validate("g", "a", a.epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert validate("g", None, -1) == ErrorCode.NONE
    assert validate("g", "zz", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    [(_, _, committed)] = env.coordinator.fetch_offsets("g", [("t", 0)])
    assert committed is not None and committed.offset == 10


async def test_classic_and_consumer_groups_convert_when_empty(env: Env) -> None:
    commit = env.coordinator.commit_offsets
    assert commit("g", -1, "", None, [OffsetCommitEntry("t", 1, 7)]) == [ErrorCode.NONE]
    assert env.coordinator.group("g") is not None  # an empty classic group
    a = Member(env, "a")
    assert a.heartbeat().error == ErrorCode.NONE
    assert env.coordinator.group("g") is None and env.coordinator.consumer_group("g")
    [(_, _, committed)] = env.coordinator.fetch_offsets("g", [("t", 1)])
    assert committed is not None and committed.offset == 7
    # A member of another protocol type cannot join while the consumer group has members
    # (a classic consumer can: test_group_migration.py)...
    refused = await join(env, group="g", protocol_type="connect")  # type: ignore[arg-type]
    assert refused.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    a.heartbeat(epoch=-1)
    # ...and turns it back into a classic group once it is empty.
    joined = join(env, group="g", protocol_type="connect")  # type: ignore[arg-type]
    first = await joined
    assert first.error in (ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.NONE)
    assert env.coordinator.consumer_group("g") is None and env.coordinator.group("g")
    # A non-empty classic group of another protocol type is no consumer group.
    second = join(env, first.member_id, group="g", protocol_type="connect")  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert Member(env, "b").heartbeat().error == ErrorCode.GROUP_ID_NOT_FOUND
    env.coordinator.stop()
    await second


def test_list_describe_and_delete_consumer_groups(env: Env) -> None:
    a = Member(env, "a")
    a.heartbeat()
    listings = {g.group_id: g for g in env.coordinator.list_groups()}
    assert listings["g"].group_type == "consumer" and listings["g"].state == "Stable"
    assert env.coordinator.describe_group("g") is None  # not a classic group
    assert env.coordinator.describe_group_miss("g") == "Group g is not a classic group."
    assert env.coordinator.describe_group_miss("other") == "Group other not found."
    description = env.coordinator.describe_consumer_group("g")
    assert description is not None
    [member] = description.members
    assert member.member_epoch == 1 and member.assignment[0][2] == list(range(6))
    assert member.assignment == member.target_assignment
    assert env.coordinator.delete_groups(["g"]) == [ErrorCode.NON_EMPTY_GROUP]
    a.heartbeat(epoch=-1)
    assert env.coordinator.delete_groups(["g"]) == [ErrorCode.NONE]
    assert env.coordinator.consumer_group("g") is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["hb", "ack", "leave"])), max_size=60))
def test_no_partition_is_ever_owned_by_two_members(steps: list[tuple[int, str]]) -> None:
    """Members join, heartbeat with or without acknowledging, and leave in any order: what the
    members have been told they own never overlaps; once everyone heartbeats with acks, the
    group is Stable with every partition assigned."""
    env = make_env()
    env.topics.add("t", 7)
    members = [Member(env, f"m{i}") for i in range(6)]
    active: set[int] = set()
    for index, action in steps:
        member = members[index]
        if action == "leave":
            if index in active:
                member.heartbeat(epoch=-1)
                member.owned, member.epoch = {}, 0
                member.revoking.clear()
                active.discard(index)
            continue
        result = member.heartbeat(full=action == "ack" or index not in active)
        if result.error == ErrorCode.NONE:
            active.add(index)
        assert disjoint(members[i] for i in active)
    for _ in range(4):
        for i in sorted(active):
            members[i].heartbeat()
            assert disjoint(members[i] for i in active)
    group = env.coordinator.consumer_group("g")
    if active:
        assert group is not None and group.state is ConsumerGroupState.STABLE
        owned = [p for i in active for p in members[i].partitions()]
        assert sorted(owned) == list(range(7))


def restart(env: Env) -> GroupCoordinator:
    env.coordinator.stop()
    env.scheduler = Scheduler(env.clock)
    env.coordinator = GroupCoordinator(
        env.coordinator.config,
        env.store,
        scheduler=env.scheduler,
        clock=env.clock,
        topics=env.topics,
    )
    env.coordinator.load()
    return env.coordinator


async def test_a_restart_keeps_members_epochs_assignments_and_offsets(env: Env) -> None:
    a, b, c = Member(env, "a", instance_id="i-a"), Member(env, "b"), Member(env, "c")
    for m in (a, b, c):
        m.heartbeat()
    for _ in range(3):
        for m in (a, b, c):
            m.heartbeat()
    c.heartbeat(epoch=-1)  # a member that left stays gone
    for _ in range(3):
        for m in (a, b):
            m.heartbeat()
    commit = env.coordinator.commit_offsets
    assert commit("g", a.epoch, "a", None, [OffsetCommitEntry("t", 0, 42)], api_version=9) == [
        ErrorCode.NONE
    ]
    before = env.coordinator.describe_consumer_group("g")
    restarted = restart(env)
    after = restarted.describe_consumer_group("g")
    assert after == before and after is not None
    assert {m.member_id for m in after.members} == {"a", "b"}
    # The members carry on at their epochs, with their partitions.
    owned = (a.partitions(), b.partitions())
    assert a.heartbeat().error == ErrorCode.NONE and b.heartbeat().error == ErrorCode.NONE
    assert (a.partitions(), b.partitions()) == owned
    [(_, _, committed)] = restarted.fetch_offsets("g", [("t", 0)])
    assert committed is not None and committed.offset == 42
    # Sessions start again after the load: a silent member goes.
    await env.advance(SESSION_MS + 1)
    group = restarted.consumer_group("g")
    assert group is not None and not group.members


def test_a_deleted_consumer_group_stays_deleted_after_a_restart(env: Env) -> None:
    a = Member(env, "a")
    a.heartbeat()
    a.heartbeat(epoch=-1)
    assert env.coordinator.delete_groups(["g"]) == [ErrorCode.NONE]
    assert restart(env).consumer_group("g") is None


def test_an_empty_consumer_group_keeps_its_offsets_across_a_restart(env: Env) -> None:
    commit = env.coordinator.commit_offsets
    a = Member(env, "a")
    a.heartbeat()
    a.heartbeat(epoch=-1)
    assert commit("g", -1, "", None, [OffsetCommitEntry("t", 2, 5)]) == [ErrorCode.NONE]
    restarted = restart(env)
    assert restarted.consumer_group("g") is not None  # empty, with its offsets
    [(_, _, committed)] = restarted.fetch_offsets("g", [("t", 2)])
    assert committed is not None and committed.offset == 5


def test_metrics_count_groups_by_type_and_consumer_groups_by_state(env: Env) -> None:
    from josefk.metrics.collectors import GroupCollector

    Member(env, "a").heartbeat()
    b = Member(env, "b", group="other")
    b.heartbeat()
    b.heartbeat(epoch=-1)
    assert env.coordinator.commit_offsets("classic", -1, "", None, [OffsetCommitEntry("t", 0, 1)])
    families = {
        f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples}
        for f in GroupCollector(lambda: env.coordinator.group_stats(lambda t, p: None)).collect()
    }
    counts = families["kafka_server_group_coordinator_metrics_group_count"]
    assert counts[(("protocol", "consumer"),)] == 2 and counts[(("protocol", "classic"),)] == 1
    states = families["kafka_server_group_coordinator_metrics_consumer_group_count"]
    assert states[(("state", "stable"),)] == 1 and states[(("state", "empty"),)] == 1
    generations = families["kafka_coordinator_group_group_generation"]
    assert generations[(("group", "g"),)] == 1


@pytest.mark.timeout(30)
async def test_a_backtracking_regex_cannot_stall_the_coordinator(env: Env) -> None:
    """``(a+)+b`` against a 249-character topic name: a backtracking engine (Python's re)
    takes longer than the universe's age; RE2 answers at once."""
    env.topics.add("a" * 249, 1)
    member = Member(env, "a", topics=None, regex="(a+)+b")
    assert member.heartbeat().error == ErrorCode.NONE
    await env.advance(0)
    assert member.heartbeat().error == ErrorCode.NONE
    assert member.partitions() == set()


async def test_regex_syntax_is_re2s(env: Env) -> None:
    env.topics.add("Orders-eu", 1)
    env.topics.add("ordres", 1)
    unicode = Member(env, "u", group="g1", topics=None, regex=r"\pL+-\pL+")
    folded = Member(env, "f", group="g2", topics=None, regex="(?i)orders-.*")
    for member in (unicode, folded):
        assert member.heartbeat().error == ErrorCode.NONE
    await env.advance(0)
    for member in (unicode, folded):
        assert member.heartbeat().error == ErrorCode.NONE and member.partitions() == {0}
    for refused in ("(?=orders).*", r"(o)\1rders", "t("):
        bad = Member(env, "b", group="g3", topics=None, regex=refused)
        assert bad.heartbeat().error == ErrorCode.INVALID_REGULAR_EXPRESSION, refused


async def test_a_groups_own_session_timeout_and_heartbeat_interval_apply() -> None:
    from josefk.broker.group.group_configs import GroupConfigStore, InvalidGroupConfig

    env = make_env()
    env.topics.add("t", 2)
    store = GroupConfigStore(None, {})
    env.coordinator = GroupCoordinator(
        env.coordinator.config,
        env.store,
        scheduler=env.scheduler,
        clock=env.clock,
        topics=env.topics,
        group_configs=store,
    )
    config = env.coordinator.config
    with pytest.raises(InvalidGroupConfig):
        store.alter("g", lambda c: {**c, "consumer.session.timeout.ms": "1000"}, config)
    with pytest.raises(InvalidGroupConfig):
        store.alter("g", lambda c: {**c, "consumer.rebalance.timeout.ms": "1000"}, config)
    new = store.alter(
        "g",
        lambda c: {
            **c,
            "consumer.session.timeout.ms": "60000",
            "consumer.heartbeat.interval.ms": "6000",
        },
        config,
    )
    store.apply("g", new)
    short, long_ = Member(env, "a", group="other"), Member(env, "b")
    assert short.heartbeat().heartbeat_interval_ms == 5000
    assert long_.heartbeat().heartbeat_interval_ms == 6000
    await env.advance(50_000)  # past the broker's 45 s, within the group's 60 s
    assert env.coordinator.consumer_group("other").members == {}  # type: ignore[union-attr]
    assert set(env.coordinator.consumer_group("g").members) == {"b"}  # type: ignore[union-attr]
    await env.advance(10_001)
    assert env.coordinator.consumer_group("g").members == {}  # type: ignore[union-attr]


def test_transactional_commits_of_a_consumer_group(env: Env) -> None:
    a = Member(env, "a")
    a.heartbeat()
    txn = env.coordinator.txn_commit_offsets
    entry = [OffsetCommitEntry("t", 0, 3)]
    # No group metadata at all (a producer's plain send_offsets_to_transaction): accepted.
    assert txn("g", 7, 0, -1, "", None, entry) == [ErrorCode.NONE]
    assert txn("g", 7, 0, a.epoch, "a", None, entry) == [ErrorCode.NONE]
    assert txn("g", 7, 0, a.epoch + 1, "a", None, entry) == [ErrorCode.STALE_MEMBER_EPOCH]
    assert txn("g", 7, 0, a.epoch, "zz", None, entry) == [ErrorCode.UNKNOWN_MEMBER_ID]


def test_a_join_to_a_hundred_member_group_writes_only_what_changed() -> None:
    """Kafka writes, on a rebalance, the group epoch, the target epoch and the records of the
    members whose target or state changed, not every member's (which made each join cost a
    write per member: quadratic for a group filling up)."""
    env = make_env()
    env.topics.add("t", 200)
    members = [Member(env, f"m{i}") for i in range(100)]
    for m in members:
        assert m.heartbeat().error == ErrorCode.NONE
    for _ in range(3):  # everybody revokes, then gets what was released
        for m in members:
            m.heartbeat()
    group = env.coordinator.consumer_group("g")
    assert group is not None and group.state is ConsumerGroupState.STABLE
    written: list[tuple[bytes, bytes | None]] = []
    store_append = env.store.append

    def counting_append(partition: int, records: list, now_ms: int) -> object:  # type: ignore[type-arg]
        written.extend(records)
        return store_append(partition, records, now_ms)

    env.store.append = counting_append  # type: ignore[method-assign]
    before = {m.member_id: dict(group.target[m.member_id]) for m in members}
    newcomer = Member(env, "new")
    assert newcomer.heartbeat().error == ErrorCode.NONE
    changed = sum(1 for m in members if group.target[m.member_id] != before[m.member_id])
    assert 0 < changed < 10
    # Group epoch, the newcomer's three records, the changed targets, the target epoch.
    assert len(written) == 1 + 3 + changed + 1
    written.clear()
    # A heartbeat that changes nothing writes nothing; one that revokes writes its own.
    untouched = next(m for m in members if group.target[m.member_id] == before[m.member_id])
    untouched.heartbeat()
    assert len(written) == 1  # its current assignment at the new epoch
    written.clear()
    untouched.heartbeat()
    assert written == []


async def test_a_name_and_a_regex_are_assigned_in_two_epochs(env: Env) -> None:
    """What librdkafka's 0045 (do_test_resubscribe_with_regex) checks of a KIP-848 broker: a
    subscription to a regex and a topic name gets the named topic in one heartbeat and the
    regex's topics in a later one, after the coordinator resolved the regex."""
    env.topics.add("topic_regex1", 4)
    env.topics.add("topic_regex2", 4)
    a = Member(env, "a", topics=("t",), regex="^.*topic_regex.*")
    assert a.heartbeat().error == ErrorCode.NONE
    assert set(a.owned) == {env.topics.infos["t"].topic_id}
    await env.advance(0)
    a.heartbeat()
    assert set(a.owned) == {
        env.topics.infos[n].topic_id for n in ("t", "topic_regex1", "topic_regex2")
    }
    # Unsubscribed (a leave), then the regex alone: its topics in the next epoch.
    a.heartbeat(epoch=-1)
    b = Member(env, "b", topics=(), regex="^.*topic_regex.*")
    b.heartbeat()
    await env.advance(0)
    b.heartbeat()
    assert len(b.partitions()) == 4 and len(b.owned) == 2


async def test_a_regex_no_member_subscribes_to_any_more_is_resolved_afresh(env: Env) -> None:
    """librdkafka's 0045 goes on: after the regex alone, it unsubscribes and subscribes to the
    same regex and a topic name, and expects the named topic alone first. The group must not
    answer from what the regex matched while a member still had it."""
    env.topics.add("topic_regex1", 4)
    env.topics.add("topic_regex2", 4)
    b = Member(env, "b", topics=(), regex="^.*topic_regex.*")
    b.heartbeat()
    await env.advance(0)
    b.heartbeat()
    assert len(b.owned) == 2
    b.heartbeat(epoch=-1)
    c = Member(env, "c", topics=("t",), regex="^.*topic_regex.*")
    assert c.heartbeat().error == ErrorCode.NONE
    assert set(c.owned) == {env.topics.infos["t"].topic_id}
    await env.advance(0)
    c.heartbeat()
    assert len(c.owned) == 3


def test_a_share_groups_lock_duration_is_bounded_by_the_broker_config() -> None:
    # Kafka's group.share.min/max.record.lock.duration.ms bound the group config
    # share.record.lock.duration.ms (15-60 s by default; test clusters lower the minimum).
    from josefk.broker.group.group_configs import GroupConfigStore, InvalidGroupConfig
    from josefk.config.broker import BrokerConfig

    lock = "share.record.lock.duration.ms"
    default = GroupConfig.from_broker_config(BrokerConfig())
    with pytest.raises(InvalidGroupConfig):
        GroupConfigStore(None, {}).alter("g", lambda c: {**c, lock: "3000"}, default)
    lowered = GroupConfig.from_broker_config(
        BrokerConfig.model_validate({"group.share.min.record.lock.duration.ms": 1000})
    )
    altered = GroupConfigStore(None, {}).alter("g", lambda c: {**c, lock: "3000"}, lowered)
    assert altered[lock] == "3000"
