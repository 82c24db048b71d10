"""Transactional offset commits in the group coordinator (TxnOffsetCommit, KIP-98/KIP-447).

The offsets topic is a MemoryOffsetsStore: ``marker`` writes a transaction marker to the
group's partition as WriteTxnMarkers would and tells the coordinator as the replica manager's
marker listener does, so a "restart" (a new coordinator loading the store) replays markers
too. The model test checks random traffic against a small model of Kafka's rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from josefk.broker.group.coordinator import OffsetCommitEntry
from josefk.broker.group.group import GroupState
from josefk.metrics.probes import GroupProbe
from josefk.protocol.errors import ErrorCode
from josefk.storage.offsets import TxnMarker
from tests.broker.test_group_coordinator import (
    Env,
    fetched,
    make_env,
    stable_group,
)

PID = 1000
OTHER_PID = 2000


@pytest.fixture
def env() -> Env:
    return make_env()


def txn_commit(
    env: Env,
    offsets: list[tuple[str, int, int]],
    *,
    producer_id: int = PID,
    epoch: int = 0,
    group: str = "g",
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
) -> list[ErrorCode]:
    return env.coordinator.txn_commit_offsets(
        group,
        producer_id,
        epoch,
        generation,
        member,
        instance,
        [OffsetCommitEntry(t, p, o) for t, p, o in offsets],
    )


def plain_commit(env: Env, offsets: list[tuple[str, int, int]], group: str = "g") -> None:
    errors = env.coordinator.commit_offsets(
        group, -1, "", None, [OffsetCommitEntry(t, p, o) for t, p, o in offsets]
    )
    assert errors == [ErrorCode.NONE] * len(offsets)


def marker(
    env: Env, *, committed: bool, producer_id: int = PID, epoch: int = 0, group: str = "g"
) -> int:
    partition = env.coordinator.partition_for(group)
    env.store.write_marker(partition, TxnMarker(producer_id, epoch, 0, committed))
    return env.coordinator.complete_txn(partition, producer_id, committed=committed)


def unstable(env: Env, group: str = "g") -> set[tuple[str, int]]:
    return {
        (t, p) for t in ("t", "u") for p in range(4) if env.coordinator.is_unstable(group, t, p)
    }


async def test_offsets_are_invisible_until_the_commit_marker(env: Env) -> None:
    plain_commit(env, [("t", 0, 3)])
    assert txn_commit(env, [("t", 0, 10), ("t", 1, 20)]) == [ErrorCode.NONE] * 2
    assert fetched(env) == {("t", 0): 3}
    assert unstable(env) == {("t", 0), ("t", 1)}
    # Another producer's marker, or one on another partition, changes nothing.
    assert marker(env, committed=True, producer_id=OTHER_PID) == 0
    other = (env.coordinator.partition_for("g") + 1) % env.config.offsets_partitions
    assert env.coordinator.complete_txn(other, PID, committed=True) == 0
    assert fetched(env) == {("t", 0): 3}
    assert marker(env, committed=True) == 2
    assert fetched(env) == {("t", 0): 10, ("t", 1): 20}
    assert unstable(env) == set()


async def test_an_abort_marker_discards_the_pending_offsets(env: Env) -> None:
    plain_commit(env, [("t", 0, 3)])
    txn_commit(env, [("t", 0, 10), ("t", 1, 20)])
    assert marker(env, committed=False) == 0
    assert fetched(env) == {("t", 0): 3}
    assert unstable(env) == set()
    # The next transaction of the producer starts clean.
    txn_commit(env, [("t", 1, 21)])
    marker(env, committed=True)
    assert fetched(env) == {("t", 0): 3, ("t", 1): 21}


async def test_a_commit_of_an_unknown_group_creates_it_only_when_written(env: Env) -> None:
    assert txn_commit(env, [("t", 0, 1)], group="new") == [ErrorCode.NONE]
    group = env.coordinator.group("new")
    assert group is not None and group.is_in(GroupState.EMPTY)
    env.store.fail_with = ErrorCode.NOT_COORDINATOR
    assert txn_commit(env, [("t", 0, 1)], group="failed") == [ErrorCode.NOT_COORDINATOR]
    assert env.coordinator.group("failed") is None


async def test_an_older_producer_epoch_is_refused(env: Env) -> None:
    assert txn_commit(env, [("t", 0, 5)], epoch=3) == [ErrorCode.NONE]
    assert marker(env, committed=True, epoch=3) == 1
    assert txn_commit(env, [("t", 0, 9)], epoch=2) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert unstable(env) == set()
    assert fetched(env) == {("t", 0): 5}


async def test_kip447_membership_is_checked_when_given(env: Env) -> None:
    [member] = await stable_group(env, 1)
    assert txn_commit(env, [("t", 0, 1)], generation=1, member="nobody") == [
        ErrorCode.UNKNOWN_MEMBER_ID
    ]
    assert txn_commit(env, [("t", 0, 1)], generation=7, member=member) == [
        ErrorCode.ILLEGAL_GENERATION
    ]
    assert txn_commit(env, [("t", 0, 1)], generation=1, member=member) == [ErrorCode.NONE]
    # Without membership fields (v0-v2, or a producer outside the group) nothing is checked.
    assert txn_commit(env, [("t", 1, 1)]) == [ErrorCode.NONE]
    assert unstable(env) == {("t", 0), ("t", 1)}


async def test_a_fenced_static_member_cannot_commit(env: Env) -> None:
    await stable_group(env, 1)
    group = env.coordinator.group("g")
    assert group is not None
    [member] = list(group.members)
    group.static_members["instance-1"] = member
    group.members[member].group_instance_id = "instance-1"
    assert txn_commit(env, [("t", 0, 1)], generation=1, member="zombie", instance="instance-1") == [
        ErrorCode.FENCED_INSTANCE_ID
    ]
    assert txn_commit(env, [("t", 0, 1)], generation=1, member=member, instance="instance-1") == [
        ErrorCode.NONE
    ]


async def test_a_rebalance_in_progress_does_not_block_a_transactional_commit(env: Env) -> None:
    [member] = await stable_group(env, 1)
    group = env.coordinator.group("g")
    assert group is not None
    group.transition_to(GroupState.PREPARING_REBALANCE, env.clock.milliseconds())
    assert txn_commit(env, [("t", 0, 1)], generation=1, member=member) == [ErrorCode.NONE]


async def test_not_coordinator_and_invalid_group(env: Env) -> None:
    assert txn_commit(env, [("t", 0, 1)], group="") == [ErrorCode.INVALID_GROUP_ID]
    env.coordinator.coordinate_by_leadership()  # leads no partition
    assert txn_commit(env, [("t", 0, 1)]) == [ErrorCode.NOT_COORDINATOR]


async def test_the_later_commit_in_the_log_wins(env: Env) -> None:
    # A plain commit written after the transactional one keeps its offset at the marker.
    txn_commit(env, [("t", 0, 10)])
    plain_commit(env, [("t", 0, 7)])
    marker(env, committed=True)
    assert fetched(env) == {("t", 0): 7}
    # A plain commit before it is replaced.
    plain_commit(env, [("t", 1, 1)])
    txn_commit(env, [("t", 1, 30)])
    marker(env, committed=True)
    assert fetched(env) == {("t", 0): 7, ("t", 1): 30}
    # Two producers: the one written later wins whatever the marker order.
    txn_commit(env, [("t", 2, 100)], producer_id=PID)
    txn_commit(env, [("t", 2, 200)], producer_id=OTHER_PID)
    marker(env, committed=True, producer_id=OTHER_PID)
    marker(env, committed=True, producer_id=PID)
    assert fetched(env)[("t", 2)] == 200
    env.restart()
    assert fetched(env) == {("t", 0): 7, ("t", 1): 30, ("t", 2): 200}


async def test_a_restart_replays_open_committed_and_aborted_transactions(env: Env) -> None:
    plain_commit(env, [("t", 0, 1), ("t", 1, 1), ("t", 2, 1)])
    txn_commit(env, [("t", 0, 10)], producer_id=1)
    txn_commit(env, [("t", 1, 20)], producer_id=2)
    txn_commit(env, [("t", 2, 30)], producer_id=3)
    marker(env, committed=True, producer_id=1)
    marker(env, committed=False, producer_id=2)
    env.restart()
    assert fetched(env) == {("t", 0): 10, ("t", 1): 1, ("t", 2): 1}
    assert unstable(env) == {("t", 2)}
    # The open transaction still completes after the restart.
    assert marker(env, committed=True, producer_id=3) == 1
    assert fetched(env) == {("t", 0): 10, ("t", 1): 1, ("t", 2): 30}
    env.restart()
    assert fetched(env) == {("t", 0): 10, ("t", 1): 1, ("t", 2): 30}
    assert unstable(env) == set()


async def test_a_group_with_only_pending_offsets_survives_a_restart(env: Env) -> None:
    txn_commit(env, [("t", 0, 10)], group="only-pending")
    env.restart()
    assert env.coordinator.group("only-pending") is not None
    assert unstable(env, "only-pending") == {("t", 0)}
    marker(env, committed=True, group="only-pending")
    assert fetched(env, "only-pending") == {("t", 0): 10}


async def test_expiry_keeps_pending_offsets_and_their_group(env: Env) -> None:
    plain_commit(env, [("t", 0, 1), ("t", 1, 1)])
    txn_commit(env, [("t", 0, 10)])
    await env.advance(env.config.offsets_retention_ms + 1)
    env.coordinator.expire_offsets()
    group = env.coordinator.group("g")
    assert group is not None, "a group with a transaction in flight is not removed"
    assert fetched(env) == {("t", 0): 1}, "the partition with a pending offset is kept"
    marker(env, committed=True)
    assert fetched(env) == {("t", 0): 10}
    env.restart()
    assert fetched(env) == {("t", 0): 10}


async def test_deleting_a_group_drops_its_pending_offsets_for_good(env: Env) -> None:
    plain_commit(env, [("t", 0, 1)])
    txn_commit(env, [("t", 0, 10), ("t", 1, 20)])
    assert env.coordinator.delete_groups(["g"]) == [ErrorCode.NONE]
    assert marker(env, committed=True) == 0
    assert env.coordinator.group("g") is None
    env.restart()
    assert env.coordinator.group("g") is None


async def test_offset_delete_and_topic_deletion_drop_pending_offsets(env: Env) -> None:
    txn_commit(env, [("t", 0, 10), ("u", 0, 20), ("u", 1, 30)])
    assert env.coordinator.delete_offsets("g", [("t", 0)]) == (ErrorCode.NONE, [ErrorCode.NONE])
    env.coordinator.remove_offsets_of_topic("u")
    assert unstable(env) == set()
    marker(env, committed=True)
    assert fetched(env) == {}
    env.restart()
    assert fetched(env) == {}


async def test_the_pending_gauge_follows_transactions() -> None:
    env = make_env()
    registry = CollectorRegistry()
    probe = GroupProbe(registry)
    env.coordinator._probe = probe  # the env's coordinator has none
    name = "kafka_coordinator_group_groupmetadatamanager_pendingtxnoffsets"
    txn_commit(env, [("t", 0, 10), ("t", 1, 11)])
    txn_commit(env, [("t", 0, 12)], producer_id=OTHER_PID)
    assert registry.get_sample_value(name) == 3
    marker(env, committed=False)
    assert registry.get_sample_value(name) == 1
    marker(env, committed=True, producer_id=OTHER_PID)
    assert registry.get_sample_value(name) == 0


# -- model test ----------------------------------------------------------------------------

PARTITIONS = [("t", 0), ("t", 1), ("t", 2)]
PRODUCERS = [1, 2, 3]


@dataclass
class Model:
    """Kafka's rules for one group: each committed offset remembers its position in the log,
    a transaction's offsets wait per producer, a commit marker applies each unless the
    committed one is later in the log, an abort drops them, OffsetDelete drops both."""

    position: int = 0
    committed: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    pending: dict[int, dict[tuple[str, int], tuple[int, int]]] = field(default_factory=dict)

    def plain(self, tp: tuple[str, int], offset: int) -> None:
        self.position += 1
        self.committed[tp] = (offset, self.position)

    def txn(self, producer_id: int, tp: tuple[str, int], offset: int) -> None:
        self.position += 1
        self.pending.setdefault(producer_id, {})[tp] = (offset, self.position)

    def end(self, producer_id: int, committed: bool) -> None:
        self.position += 1
        for tp, (offset, position) in self.pending.pop(producer_id, {}).items():
            if committed and (tp not in self.committed or self.committed[tp][1] < position):
                self.committed[tp] = (offset, position)

    def delete(self, tp: tuple[str, int]) -> None:
        self.position += 1
        self.committed.pop(tp, None)
        for pending in self.pending.values():
            pending.pop(tp, None)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("plain"), st.sampled_from(PARTITIONS), st.integers(0, 1000)),
        st.tuples(
            st.just("txn"),
            st.sampled_from(PRODUCERS),
            st.sampled_from(PARTITIONS),
            st.integers(0, 1000),
        ),
        st.tuples(st.just("end"), st.sampled_from(PRODUCERS), st.booleans()),
        st.tuples(st.just("delete"), st.sampled_from(PARTITIONS)),
        st.tuples(st.just("restart")),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_random_transactional_and_plain_commits_follow_the_model(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    env = make_env(offsets_partitions=4)
    model = Model()
    for op in ops:
        kind = op[0]
        if kind == "plain":
            _, tp, offset = op
            plain_commit(env, [(tp[0], tp[1], offset)])
            model.plain(tp, offset)
        elif kind == "txn":
            _, producer_id, tp, offset = op
            errors = txn_commit(env, [(tp[0], tp[1], offset)], producer_id=producer_id)
            assert errors == [ErrorCode.NONE]
            model.txn(producer_id, tp, offset)
        elif kind == "end":
            _, producer_id, committed = op
            marker(env, committed=committed, producer_id=producer_id)
            model.end(producer_id, committed)
        elif kind == "delete":
            _, tp = op
            if env.coordinator.group("g") is not None:
                top, _errors = env.coordinator.delete_offsets("g", [tp])
                assert top == ErrorCode.NONE
            model.delete(tp)
        else:
            env.restart()
        assert fetched(env) == {tp: offset for tp, (offset, _) in model.committed.items()}
        assert unstable(env) == {tp for pending in model.pending.values() for tp in pending}
