"""One classic consumer group: its members, generation, chosen protocol and committed offsets.

Owns ``GroupState`` and its legal transitions, ``MemberMetadata`` and ``GroupMetadata``: the data of the group state machine and the rules that need no clock and
no I/O (protocol selection, leader choice, which offsets retention may expire, the record a
group is stored as, how pending offsets complete). The coordinator drives the transitions;
this module never schedules, awaits or writes anything.

State machine (Kafka's classic protocol)::

    Empty               --a member joins-->                       PreparingRebalance
    PreparingRebalance  --all members rejoined, or the rebalance timeout (initial delay
                          for a new group)-->                     CompletingRebalance
                        --nobody rejoined-->                      Empty (next generation)
    CompletingRebalance --the leader's SyncGroup is stored-->     Stable
    CompletingRebalance, Stable
                        --a member joins, leaves, dies or changes
                          its protocols; the leader rejoins-->    PreparingRebalance
    Empty (no offsets)  --retention, DeleteGroups-->              Dead

The group's offsets (committed, transactional ones pending a marker, commits pending
replication) and their rules are the base class's, ``group_offsets.GroupOffsets``, shared with
the consumer groups of KIP-848; this class adds which offsets retention expires for a classic
group. ``CommittedOffset`` is re-exported from there.

Imports josefk.broker.group.offsets_schema, group_offsets and assignment only; must not import the
protocol codec, storage or handlers.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from josefk.broker.group.assignment import SubscriptionFormatError, subscribed_topics
from josefk.broker.group.group_offsets import CommittedOffset, GroupOffsets
from josefk.broker.group.offsets_schema import (
    GroupKey,
    GroupMetadataValue,
    MemberRecord,
    encode_group_key,
)

CONSUMER_PROTOCOL_TYPE = "consumer"

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "CommittedOffset",
    "GroupMetadata",
    "GroupState",
    "IllegalStateTransition",
    "JoinResult",
    "JoinedMember",
    "MemberMetadata",
    "SyncResult",
]


class GroupState(enum.Enum):
    """The states of a classic group; the values are the names Kafka's APIs report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    pass


class MemberMetadata:
    """A member of a group. ``join_future``/``sync_future`` are set while a JoinGroup or
    SyncGroup of this member waits for the rebalance to reach the next step."""

    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "group_instance_id",
        "heartbeat_deadline_ms",
        "heartbeat_task",
        "is_new",
        "join_future",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "sync_future",
    )

    def __init__(
        self,
        *,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols: list[tuple[str, bytes]] = list(protocols)
        self.assignment = b""
        self.join_future: asyncio.Future[Any] | None = None
        self.sync_future: asyncio.Future[Any] | None = None
        self.heartbeat_deadline_ms = 0
        self.heartbeat_task: Any = None
        self.is_new = False

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Same protocols in the same order with the same metadata."""
        return len(protocols) == len(self.protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1])
            for a, b in zip(protocols, self.protocols, strict=True)
        )

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class GroupMetadata(GroupOffsets):
    """State of one group. Changed only from the event loop thread, by the coordinator."""

    def __init__(self, group_id: str, *, now_ms: int, state: GroupState = GroupState.EMPTY):
        super().__init__()
        self.group_id = group_id
        self.state = state
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.pending_members: set[str] = set()
        self.static_members: dict[str, str] = {}
        self.current_state_timestamp: int | None = now_ms
        # Rebalance bookkeeping: the join timer, whether it is the initial delayed join of a
        # new group, and whether members arrived while that delay ran.
        self.join_timer: Any = None
        self.join_timer_token = 0
        self.initial_join = False
        self.new_member_added = False

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, "
            f"generation={self.generation_id}, members={list(self.members)})"
        )

    # -- state ----------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {target.value} is not allowed"
            )
        self.state = target
        self.current_state_timestamp = now_ms

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    @property
    def has_pending_members(self) -> bool:
        return bool(self.pending_members)

    @property
    def is_dead(self) -> bool:
        return self.state is GroupState.DEAD

    def mark_dead(self, now_ms: int) -> None:
        self.transition_to(GroupState.DEAD, now_ms)

    def group_record_keys(self) -> list[bytes]:
        return [encode_group_key(GroupKey(self.group_id))]

    # -- members --------------------------------------------------------------------------

    def add_member(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """Give a static member a new member id, keeping its place, metadata and assignment."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(
            member.is_awaiting_join for member in self.members.values()
        )

    @property
    def size(self) -> int:
        return len(self.members) + len(self.pending_members)

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        candidates = set(first.protocol_names)
        for member in members:
            candidates.intersection_update(member.protocol_names)
        return candidates

    def supports_protocols(self, protocol_type: str, names: Sequence[str]) -> bool:
        """Whether a member with these protocols may join (INCONSISTENT_GROUP_PROTOCOL if not)."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(
            self.candidate_protocols().intersection(names)
        )

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; the most votes win, ties going
        to the protocol that comes first in the first member's preference order."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        order = next(iter(self.members.values())).protocol_names
        return max(votes, key=lambda name: (votes[name], -order.index(name)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to under the consumer protocol, or None when that
        cannot be known (another protocol type, no protocol chosen, unreadable metadata)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(subscribed_topics(member.metadata_for(self.protocol_name)))
        except SubscriptionFormatError:
            return None
        return topics

    def init_next_generation(self, now_ms: int) -> None:
        """Start the next generation: CompletingRebalance with a protocol, or Empty."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def _expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        if self.protocol_type is None or self.state is GroupState.EMPTY:
            subscribed: set[str] = set()
            use_state_time = self.protocol_type is not None
        elif self.state is GroupState.STABLE and self.protocol_type == CONSUMER_PROTOCOL_TYPE:
            topics = self.subscribed_topics()
            if topics is None:
                return []
            subscribed = topics
            use_state_time = False
        else:
            return self._explicitly_expired(now_ms)
        expired = []
        for tp, committed in self.offsets.items():
            if committed.expire_timestamp is not None:
                if now_ms >= committed.expire_timestamp:
                    expired.append(tp)
                continue
            if tp[0] in subscribed:
                continue
            base = committed.commit_timestamp
            if use_state_time and self.current_state_timestamp is not None:
                base = self.current_state_timestamp
            if now_ms - base >= retention_ms:
                expired.append(tp)
        return expired

    # -- durable form ---------------------------------------------------------------------

    def to_record(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue Kafka would store for this group now (``assignments``
        overrides the members' current ones: the leader's SyncGroup before it is applied)."""
        members = tuple(
            MemberRecord(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata_for(self.protocol_name),
                assignment=(
                    m.assignment if assignments is None else assignments.get(m.member_id, b"")
                ),
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=(
                -1 if self.current_state_timestamp is None else self.current_state_timestamp
            ),
            members=members,
        )


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What a JoinGroup response says, whatever its version."""

    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = field(default_factory=tuple)
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None
