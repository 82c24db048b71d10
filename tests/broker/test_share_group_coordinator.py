"""KIP-932 share groups in the coordinator, on a manual clock: joining, member epochs, the
simple assignment (every member subscribed to a topic gets all its partitions), leaving,
session expiry releasing a member's share-partition records, the errors Kafka answers,
share groups beside classic and consumer groups in ListGroups and DeleteGroups, and the
group's records in __consumer_offsets: epochs, assignments and initialized topics come back
after a restart."""

from __future__ import annotations

from typing import Any

import pytest

from josefk.broker.group.share import ShareHeartbeatRequest, ShareHeartbeatResult
from josefk.broker.partition import TopicPartition
from josefk.broker.share.manager import SharePartitionManager
from josefk.protocol.errors import ErrorCode
from tests.broker.test_consumer_group_coordinator import Env, make_env, restart

SESSION_MS = 45_000


@pytest.fixture
def env() -> Env:
    e = make_env()
    e.topics.add("t", 3)
    return e


def beat(
    env: Env, member: str, epoch: int, topics: tuple[str, ...] | None = None, group: str = "g"
) -> ShareHeartbeatResult:
    return env.coordinator.share_group_heartbeat(
        ShareHeartbeatRequest(group, member, epoch, subscribed_topic_names=topics)
    )


def test_members_split_the_partitions_when_there_are_enough(env: Env) -> None:
    t = env.topics.add("t", 3)
    a = beat(env, "a", 0, ("t",))
    assert a.error is ErrorCode.NONE and a.member_epoch == 1
    assert a.assignment == {t: frozenset({0, 1, 2})}
    b = beat(env, "b", 0, ("t",))
    assert b.member_epoch == 2 and b.assignment == {t: frozenset({1})}
    # a catches up with the group epoch and learns that it gave partition 1 to b.
    again = beat(env, "a", 1)
    assert again.member_epoch == 2 and again.assignment == {t: frozenset({0, 2})}
    assert beat(env, "a", 2).assignment is None  # nothing changed since


def test_more_members_than_partitions_share_each_partition(env: Env) -> None:
    t = env.topics.add("t", 2)
    latest: dict[str, Any] = {}
    epochs: dict[str, int] = {}
    for member in "abcde":
        joined = beat(env, member, 0, ("t",))
        epochs[member], latest[member] = joined.member_epoch, joined.assignment
    for member in "abcde":
        answer = beat(env, member, epochs[member])
        if answer.assignment is not None:
            latest[member] = answer.assignment
    # Every member gets one partition, and each partition is shared by several members.
    assert latest == {
        "a": {t: frozenset({0})},
        "b": {t: frozenset({1})},
        "c": {t: frozenset({0})},
        "d": {t: frozenset({1})},
        "e": {t: frozenset({0})},
    }


def test_epochs_are_checked(env: Env) -> None:
    beat(env, "a", 0, ("t",))
    assert beat(env, "a", 7).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert beat(env, "zz", 1).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(env, "", 0, ("t",)).error is ErrorCode.INVALID_REQUEST
    assert beat(env, "n", 0).error is ErrorCode.INVALID_REQUEST  # no subscription at join


def test_topic_growth_and_subscription_change_reassign(env: Env) -> None:
    t = env.topics.add("t", 3)
    beat(env, "a", 0, ("t",))
    env.topics.add("t", 5)
    grown = beat(env, "a", 1)
    assert grown.member_epoch == 2 and grown.assignment == {t: frozenset(range(5))}
    u = env.topics.add("u", 1)
    changed = beat(env, "a", 2, ("u",))
    assert changed.assignment == {u: frozenset({0})}


async def test_leave_and_session_expiry_release_records(env: Env) -> None:
    manager = SharePartitionManager(env.clock)
    env.coordinator.share.on_member_gone.append(manager.member_gone)
    tp = TopicPartition("t", 0)
    sp = manager.share_partition("g", tp, 0)
    beat(env, "a", 0, ("t",))
    beat(env, "b", 0, ("t",))
    sp.acquire("a", 0, 9, max_records=5, now_ms=0)
    sp.acquire("b", 0, 9, max_records=5, now_ms=0)
    assert beat(env, "a", -1).member_epoch == -1
    assert sp.acquired_by("a") == 0 and sp.next_fetch_offset() == 0
    await env.advance(SESSION_MS)
    group = env.coordinator.share_group("g")
    assert group is not None and group.members == {}
    assert sp.acquired_by("b") == 0


def test_a_member_that_leaves_with_a_session_open_keeps_it_until_it_closes(env: Env) -> None:
    """librdkafka's close sends the leave and the closing ShareAcknowledge side by side: the
    share session and what it holds outlive the leave, so the last acknowledgements land."""
    manager = SharePartitionManager(env.clock)
    env.coordinator.share.on_member_gone.append(manager.member_gone)
    tp = TopicPartition("t", 0)
    sp = manager.share_partition("g", tp, 0)
    beat(env, "a", 0, ("t",))
    manager.open_session("g", "a", [tp])
    sp.acquire("a", 0, 9, max_records=5, now_ms=0)
    beat(env, "a", -1)
    assert sp.acquired_by("a") == 5
    assert manager.session_for("g", "a", -1)[0] is ErrorCode.NONE
    manager.close_session("g", "a")
    assert sp.acquired_by("a") == 0


def test_share_group_ids_do_not_mix_with_other_group_types(env: Env) -> None:
    beat(env, "a", 0, ("t",))
    listing = {g.group_id: g.group_type for g in env.coordinator.list_groups()}
    assert listing == {"g": "share"}
    assert env.coordinator.describe_group("g") is None
    assert env.coordinator.delete_groups(["g"]) == [ErrorCode.NON_EMPTY_GROUP]
    manager = SharePartitionManager(env.clock)
    env.coordinator.share.on_group_deleted.append(lambda group, _topics: manager.drop_group(group))
    manager.share_partition("g", TopicPartition("t", 0), 0)
    beat(env, "a", -1)
    assert env.coordinator.delete_groups(["g"]) == [ErrorCode.NONE]
    assert env.coordinator.share_group("g") is None
    assert manager.of_group("g") == {}


def test_metrics_count_share_groups_by_protocol(env: Env) -> None:
    """Kafka's group-count has a protocol="share" series; a share group's members and epoch
    are in the per-group series, not in kafka_exporter's consumer-group ones."""
    from josefk.metrics.collectors import GroupCollector

    beat(env, "a", 0, ("t",))
    beat(env, "b", 0, ("t",), group="idle")
    beat(env, "b", 1, group="idle")
    beat(env, "b", -1, group="idle")
    families = {
        f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples}
        for f in GroupCollector(lambda: env.coordinator.group_stats(lambda t, p: None)).collect()
    }
    counts = families["kafka_server_group_coordinator_metrics_group_count"]
    assert counts[(("protocol", "share"),)] == 2
    assert counts[(("protocol", "classic"),)] == 0 and counts[(("protocol", "consumer"),)] == 0
    assert families["kafka_coordinator_group_group_members"] == {
        (("group", "g"),): 1,
        (("group", "idle"),): 0,
    }
    assert families["kafka_coordinator_group_group_generation"][(("group", "g"),)] == 1
    states = families["kafka_coordinator_group_group_state"]
    assert states[(("group", "idle"), ("state", "Empty"))] == 1
    assert states[(("group", "g"), ("state", "Stable"))] == 1
    assert (
        "kafka_consumergroup_members" not in families or not families["kafka_consumergroup_members"]
    )
    # Share groups are not counted among classic groups' states.
    assert sum(families["kafka_coordinator_group_groupmetadatamanager_numgroups"].values()) == 0


async def test_a_restart_keeps_epochs_assignments_and_initialized_topics(env: Env) -> None:
    t = env.topics.add("t", 3)
    beat(env, "a", 0, ("t",))
    beat(env, "b", 0, ("t",))
    beat(env, "c", 0, ("t",))
    beat(env, "c", -1)  # a member that left stays gone
    a = beat(env, "a", 1)
    assert a.member_epoch == 4 and a.assignment == {t: frozenset({0, 2})}
    before = env.coordinator.share_group("g")
    assert before is not None
    written = dict(before.written)
    coordinator = restart(env)
    group = coordinator.share_group("g")
    assert group is not None
    assert (group.group_epoch, group.assignment_epoch) == (4, 4)
    assert sorted(group.members) == ["a", "b"]
    assert group.members["a"].member_epoch == 4
    assert group.members["a"].previous_member_epoch == 1
    assert group.members["b"].member_epoch == 2 and group.members["b"].previous_member_epoch == 0
    assert group.members["a"].subscribed_topic_names == ("t",)
    assert group.initialized == {t: ("t", frozenset({0, 1, 2}))}
    assert group.topics == {"t"}
    assert group.written == written
    # The members go on with their epochs: no UNKNOWN_MEMBER_ID, no FENCED_MEMBER_EPOCH, and
    # the first heartbeat after the move carries the assignment again (as a join does).
    again = beat(env, "a", 4)
    assert again.error is ErrorCode.NONE and again.member_epoch == 4
    assert again.assignment == {t: frozenset({0, 2})}
    caught_up = beat(env, "b", 2)
    assert caught_up.member_epoch == 4 and caught_up.assignment == {t: frozenset({1})}
    # Nothing changed, so nothing more was written.
    assert beat(env, "a", 4).assignment is None
    # Silent members still expire after the restart.
    await env.advance(SESSION_MS)
    assert group.members == {}


def test_a_deleted_share_group_stays_deleted_after_a_restart(env: Env) -> None:
    beat(env, "a", 0, ("t",))
    beat(env, "a", -1)
    deleted: list[tuple[str, frozenset[str]]] = []
    assert env.coordinator.delete_groups(["g"]) == [ErrorCode.NONE]
    coordinator = restart(env)
    assert coordinator.share_group("g") is None
    assert [g.group_id for g in coordinator.list_groups()] == []
    # An empty group that outlived a restart is deleted with its topics' share state.
    beat(env, "b", 0, ("t",), group="h")
    beat(env, "b", -1, group="h")
    coordinator = restart(env)
    coordinator.share.on_group_deleted.append(lambda g, topics: deleted.append((g, topics)))
    assert coordinator.delete_groups(["h"]) == [ErrorCode.NONE]
    assert deleted == [("h", frozenset({"t"}))]


def test_offsets_admin_marks_topics_initialized_across_a_restart(env: Env) -> None:
    t = env.topics.add("t", 3)
    env.coordinator.ensure_share_group("g")
    env.coordinator.share.topic_initialized("g", t, "t", 1)
    coordinator = restart(env)
    group = coordinator.share_group("g")
    assert group is not None and group.initialized == {t: ("t", frozenset({1}))}
    coordinator.share.topic_deleted("g", t, "t")
    group = restart(env).share_group("g")
    assert group is not None and group.initialized == {} and group.topics == set()
