"""One KIP-848 consumer group: members with epochs, the target assignment, reconciliation.

Owns ``ConsumerGroupState``, ``MemberState``, ``ConsumerMember`` and ``ConsumerGroup`` (whose
offsets half is ``group_offsets.GroupOffsets``, as for classic groups) and ``reconcile``, the
step that moves a member from what it owns towards its target (Kafka's
CurrentAssignmentBuilder). The manager (``consumer.py``) drives them; this module never
schedules, awaits or writes anything.

Epochs: the group epoch goes up whenever something an assignment depends on changes (a
member joins or leaves, a subscription changes, a subscribed topic appears or grows). The
target assignment is computed for a group epoch (its assignment epoch). A member's epoch
reaches the assignment epoch once it holds no partition the target takes away from it.

Reconciliation of a member towards its target (never two owners of one partition):

- partitions it owns and keeps stay with it throughout (it never stops consuming them);
- partitions the target takes away: the member stays at its epoch in UNREVOKED_PARTITIONS
  with the kept ones assigned, until a heartbeat shows it no longer owns them (its
  TopicPartitions list); only then are they released;
- a member still revoking that drops topics from its subscription is asked at once to
  revoke their partitions too (``revoke_unsubscribed``);
- partitions the target gives it: each one as soon as no other member owns it (still
  assigned, or waiting to be revoked); until all have come the member is at the new epoch in
  UNRELEASED_PARTITIONS, then STABLE.

Group state, as Kafka reports it: Empty without members; Assigning while the target is
behind the group epoch (never seen here: the target is computed in the heartbeat that bumps
the epoch); Reconciling while some member is not STABLE at the assignment epoch; Stable.

Imports group_offsets and consumer_records (the keys of its records) only; must not import the codec, storage or handlers.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from josefk.broker.group.consumer_records import (
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerKey,
    encode_key,
)
from josefk.broker.group.group_offsets import GroupOffsets

# topic id -> partitions
TopicPartitions = dict[uuid.UUID, frozenset[int]]

LEAVE_GROUP_MEMBER_EPOCH: Final = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH: Final = -2


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member that speaks the classic protocol inside a consumer group (online
    migration, ``migration.py``) sent with its last JoinGroup."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    """A member's reconciliation state; the values are the bytes Kafka stores."""

    STABLE = 1
    UNREVOKED_PARTITIONS = 2
    UNRELEASED_PARTITIONS = 3


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)
    # Set for a classic-protocol member of a consumer group (online migration).
    classic: ClassicMemberMetadata | None = None
    # Timers of the manager: the session deadline and the revocation (rebalance) timeout.
    session_task: Any = None
    revocation_task: Any = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled(self, group: ConsumerGroup) -> bool:
        """At the group's assignment epoch, holding exactly its target."""
        return (
            self.state is MemberState.STABLE
            and self.member_epoch == group.assignment_epoch
            and self.assigned == group.target.get(self.member_id, {})
        )

    def owned(self) -> set[tuple[uuid.UUID, int]]:
        """Every partition this member may still be consuming."""
        found = {(t, p) for t, ps in self.assigned.items() for p in ps}
        found.update((t, p) for t, ps in self.pending_revocation.items() for p in ps)
        return found


class ConsumerGroup(GroupOffsets):
    """State of one consumer group. Event loop thread only, changed by the manager."""

    def __init__(self, group_id: str) -> None:
        super().__init__()
        self.group_id = group_id
        self.dead = False
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        # instance id -> member id of static members.
        self.static_members: dict[str, str] = {}
        self.target: dict[str, TopicPartitions] = {}
        # (topic id, partition) -> the member that owns it (assigned or being revoked).
        self.owners: dict[tuple[uuid.UUID, int], str] = {}
        # The subscribed topics as of the group epoch: name -> (topic id, partitions).
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.assignor_name = ""
        # Member ids handed to classic members with MEMBER_ID_REQUIRED (KIP-394) that have
        # not joined with them yet (memory only, as a classic group's pending members).
        self.pending_classic_ids: set[str] = set()
        # Record key -> the value last written for it (the manager writes only changes).
        self.written: dict[bytes, bytes] = {}
        # The members' regular expressions as last resolved (regex -> the topic names it
        # matched), when (monotonic ms) and against which topic names; the pending
        # resolution task. Resolved off the heartbeat path, as Kafka does (consumer.py).
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        self.regex_resolved_ms: int | None = None
        self.regex_topics: frozenset[str] = frozenset()
        self.regex_task: Any = None

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, {self.state.value}, epoch={self.group_epoch}, "
            f"members={list(self.members)})"
        )

    # -- what the offsets half asks ---------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def is_dead(self) -> bool:
        return self.dead

    def mark_dead(self, now_ms: int) -> None:
        self.dead = True

    def subscribed_topics(self) -> set[str] | None:
        return set(self.subscription_metadata)

    def group_record_keys(self) -> list[bytes]:
        return [
            encode_key(ConsumerKey(CONSUMER_GROUP_METADATA, self.group_id)),
            encode_key(ConsumerKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, self.group_id)),
        ]

    def _expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        # Kafka: offsets of topics the group subscribes to never expire while it has members;
        # the others expire ``retention`` after their commit.
        subscribed = set(self.subscription_metadata) if self.members else set()
        expired = []
        for tp, committed in self.offsets.items():
            if committed.expire_timestamp is not None:
                if now_ms >= committed.expire_timestamp:
                    expired.append(tp)
                continue
            if tp[0] in subscribed:
                continue
            if now_ms - committed.commit_timestamp >= retention_ms:
                expired.append(tp)
        return expired

    # -- state ------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.assignment_epoch < self.group_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state is not (
                MemberState.STABLE
            ):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    # -- members ----------------------------------------------------------------------------

    def add_member(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member_id
        ):
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        self.release(member, member.owned())
        return member

    def release(self, member: ConsumerMember, partitions: set[tuple[uuid.UUID, int]]) -> None:
        for tp in partitions:
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]

    def take(self, member: ConsumerMember) -> None:
        for tp in member.owned():
            self.owners[tp] = member.member_id

    def replace_static_member(self, old: ConsumerMember, new_member_id: str) -> ConsumerMember:
        """A static member rejoins under a new member id: the new id takes the old one's
        place, epoch and partitions (KIP-848's static membership)."""
        del self.members[old.member_id]
        target = self.target.pop(old.member_id, None)
        self.release(old, old.owned())
        old.member_id = new_member_id
        self.members[new_member_id] = old
        if target is not None:
            self.target[new_member_id] = target
        if old.instance_id is not None:
            self.static_members[old.instance_id] = new_member_id
        self.take(old)
        return old


def owns_any(owned: Mapping[uuid.UUID, frozenset[int]] | None, wanted: TopicPartitions) -> bool:
    """Whether the member's reported ``owned`` partitions still include one of ``wanted``."""
    if owned is None:
        return True  # not reported: nothing is known revoked
    return any(owned.get(t, frozenset()) & ps for t, ps in wanted.items())


def revoke_unsubscribed(
    member: ConsumerMember,
    subscribed: frozenset[uuid.UUID],
    owned: Mapping[uuid.UUID, frozenset[int]] | None,
) -> None:
    """A member still revoking (UNREVOKED_PARTITIONS) changed its subscription: the partitions
    of topics it no longer subscribes to join those it must revoke at once, as the
    CurrentAssignmentBuilder of Kafka 4.x does, rather than after the revocation under way
    (the member keeps its epoch either way). Once it has revoked everything it was asked to, ``reconcile``
    moves it on towards its target, which holds no unsubscribed topic."""
    if member.state is not MemberState.UNREVOKED_PARTITIONS or not owns_any(
        owned, member.pending_revocation
    ):
        return  # not revoking (any more): ``reconcile`` computes its next assignment
    dropped = {t: ps for t, ps in member.assigned.items() if t not in subscribed}
    if not dropped:
        return
    member.assigned = {t: ps for t, ps in member.assigned.items() if t in subscribed}
    pending = dict(member.pending_revocation)
    for topic_id, partitions in dropped.items():
        pending[topic_id] = pending.get(topic_id, frozenset()) | partitions
    member.pending_revocation = pending


def reconcile(
    group: ConsumerGroup,
    member: ConsumerMember,
    owned: Mapping[uuid.UUID, frozenset[int]] | None,
) -> None:
    """Move ``member`` towards its target as far as it may now (see the module docstring);
    ``owned`` is what its heartbeat says it owns (None: not reported)."""
    target = group.target.get(member.member_id, {})
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return  # still revoking: nothing moves until it has let them go
        group.release(member, {(t, p) for t, ps in member.pending_revocation.items() for p in ps})
        member.pending_revocation = {}
    elif (
        member.state is MemberState.STABLE
        and member.member_epoch == group.assignment_epoch
        and member.assigned == target
    ):
        return
    kept: TopicPartitions = {}
    revoke: TopicPartitions = {}
    for topic_id, partitions in member.assigned.items():
        wanted = target.get(topic_id, frozenset())
        if partitions & wanted:
            kept[topic_id] = partitions & wanted
        if partitions - wanted:
            revoke[topic_id] = partitions - wanted
    if revoke:
        # Kept partitions stay assigned; the member keeps its epoch until it has revoked.
        member.assigned = kept
        member.pending_revocation = revoke
        member.state = MemberState.UNREVOKED_PARTITIONS
        return
    assigned = {t: set(ps) for t, ps in kept.items()}
    unreleased = False
    for topic_id, partitions in target.items():
        for p in partitions:
            if p in assigned.get(topic_id, ()):
                continue
            owner = group.owners.get((topic_id, p))
            if owner is None or owner == member.member_id:
                assigned.setdefault(topic_id, set()).add(p)
            else:
                unreleased = True
    member.assigned = {t: frozenset(ps) for t, ps in assigned.items() if ps}
    if member.member_epoch != group.assignment_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = group.assignment_epoch
    member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    group.take(member)
