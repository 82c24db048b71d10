"""A KIP-848 heartbeat's answer waits for its records' replication (a cluster's fault path).

``handlers.groups.member_heartbeat_response`` is the answer the ConsumerGroupHeartbeat and
ShareGroupHeartbeat handlers share: it waits until the offsets topic's in-sync replicas hold
the records the coordinator call appended, then answers the result. Here the coordinator runs
on a ``MemoryOffsetsStore`` with ``hold_acks`` (appends written, not replicated) and the wait
is a replica manager fake that settles every append as the test says: replicated, or failed
as a shrunken ISR fails it.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from josefk.broker.group.consumer import HeartbeatRequest, HeartbeatResult
from josefk.broker.handlers.groups import member_heartbeat_response
from josefk.broker.partition import NotEnoughReplicasAfterAppendError
from josefk.broker.replica_manager import AppendOutcome
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import ConsumerGroupHeartbeatResponse
from tests.broker.test_consumer_group_coordinator import REBALANCE_MS, Env, make_env


class _Replicas:
    """Settles each wait at once: every append replicated, or every one failed with
    ``error``."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.waited: list[AppendOutcome] = []

    async def wait_for_acks(self, outcomes: list[AppendOutcome], timeout_ms: int) -> None:
        self.waited.extend(outcomes)
        for outcome in outcomes:
            outcome.error = self.error

    def must_wait_for_acks(self, outcomes: list[AppendOutcome]) -> bool:
        return False


def _context(replicas: _Replicas) -> Any:
    config = SimpleNamespace(offsets_commit_timeout_ms=5000)
    return SimpleNamespace(broker=SimpleNamespace(replica_manager=replicas, config=config))


def _join(env: Env) -> HeartbeatResult:
    return env.coordinator.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id="g",
            member_id="m1",
            member_epoch=0,
            instance_id=None,
            rebalance_timeout_ms=REBALANCE_MS,
            subscribed_topic_names=("t",),
            subscribed_topic_regex=None,
            server_assignor=None,
            owned={},
        )
    )


def _env() -> Env:
    env = make_env()
    env.topics.add("t", 3)
    env.store.hold_acks = True
    return env


async def test_a_replicated_join_is_answered_with_its_epoch_and_assignment() -> None:
    env = _env()
    result = _join(env)
    replicas = _Replicas()
    answer = await member_heartbeat_response(
        _context(replicas), env.coordinator, "g", result, ConsumerGroupHeartbeatResponse
    )
    assert replicas.waited, "the join appended records that had to be replicated"
    assert answer.error_code == ErrorCode.NONE
    assert answer.member_id == "m1" and answer.member_epoch == result.member_epoch > 0
    assert answer.assignment is not None
    [owned] = answer.assignment.topic_partitions
    assert owned.partitions == [0, 1, 2]


async def test_a_join_whose_records_are_not_replicated_is_refused_retriably() -> None:
    """Kafka's coordinator answers a write its replicas did not take with
    COORDINATOR_NOT_AVAILABLE (the client finds the coordinator again and retries)."""
    env = _env()
    result = _join(env)
    replicas = _Replicas(NotEnoughReplicasAfterAppendError("the ISR shrank"))
    answer = await member_heartbeat_response(
        _context(replicas), env.coordinator, "g", result, ConsumerGroupHeartbeatResponse
    )
    assert answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert answer.error_message is not None and "ISR shrank" in answer.error_message
    assert answer.assignment is None


async def test_a_coordinator_that_lost_the_group_meanwhile_says_not_coordinator() -> None:
    env = _env()
    result = _join(env)
    # Leadership of the group's offsets partition moved while the records waited.
    env.coordinator.coordinate_by_leadership()
    replicas = _Replicas(NotEnoughReplicasAfterAppendError("not the leader any more"))
    answer = await member_heartbeat_response(
        _context(replicas), env.coordinator, "g", result, ConsumerGroupHeartbeatResponse
    )
    assert answer.error_code == ErrorCode.NOT_COORDINATOR
