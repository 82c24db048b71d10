"""Share groups' membership (KIP-932): ShareGroupHeartbeat and the broker's assignment.

Owns ``ShareGroup``, ``ShareMember`` and ``ShareGroupManager``, the third group type of the
coordinator beside classic (``classic.py``) and consumer groups (``consumer.py``).

A member joins with epoch 0 and a subscription (topic names), heartbeats with its epoch,
leaves with epoch -1. The group epoch goes up whenever the assignment of the group changes
(a member joins, leaves or changes its subscription; a subscribed topic appears, vanishes or
grows, as seen on the next heartbeat); each member's epoch then becomes the group's on its
next heartbeat, which carries its new assignment. Partitions are not owned exclusively in a
share group, so there is no revocation. The assignment is a simple assignor's, per topic over
the members subscribed to it (sorted by member id): with no more members than partitions each
partition goes to one member, round robin, so that members split the partitions as in a
consumer group; with more members than partitions every member gets one partition and each
partition is shared by several members, whose records are then divided by acquisition on the
partition leader. (librdkafka's share tests rely on the split: with two members on four
partitions each gets two.)

Errors as Kafka's: INVALID_REQUEST for an empty member id or a join without subscription,
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH for any epoch but the member's, GROUP_ID_NOT_FOUND for a
group id used by a classic or consumer group (checked by the coordinator), GROUP_MAX_SIZE_REACHED.
A member silent for ``group.share.session.timeout.ms`` (on the injected clock's scheduler) is
removed as if it had left; ``on_member_gone`` tells the share partitions to release what it
held.

Persistence, as Kafka 4.1 (``share_records``): every change is written to
``__consumer_offsets`` as the group's records, only those whose value changed: the group epoch
(ShareGroupMetadata), each member's subscription (ShareGroupMemberMetadata), target assignment
(ShareGroupTargetAssignmentMember) and current assignment with its epochs
(ShareGroupCurrentMemberAssignment), the target's epoch (ShareGroupTargetAssignmentMetadata),
and which topic partitions have share state (ShareGroupStatePartitionMetadata: josefk writes
the partitions of the subscribed topics as initialized when the assignment first covers them,
and those AlterShareGroupOffsets sets; it has no InitializeShareGroupState step, so nothing is
ever "initializing"). A member that leaves has its three records tombstoned, a deleted group
its group records. ``restore`` rebuilds a group from them (a broker restart, a coordinator
move): members keep their epochs and assignments and must heartbeat within a session timeout;
DeleteGroups still finds the topics whose share state it deletes.

Concurrency: event loop thread only; nothing awaits.

Imports the shard and the consumer module's topic view; must not import handlers or the codec.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from josefk.broker.group.consumer import TopicsView
from josefk.broker.group.consumer_group import MemberState
from josefk.broker.group.consumer_records import (
    encode_epoch,
    encode_target_member,
)
from josefk.broker.group.group_configs import (
    SHARE_AUTO_OFFSET_RESET,
    SHARE_GROUP_CONFIG_DEFAULTS,
    SHARE_ISOLATION_LEVEL,
    SHARE_RECORD_LOCK_DURATION,
    GroupConfigs,
)
from josefk.broker.group.shard import GroupShard, ShardPart
from josefk.broker.group.share_records import (
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_STATE_PARTITION_METADATA,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    ShareCurrentAssignment,
    ShareGroupMetadataValue,
    ShareKey,
    ShareMemberMetadata,
    StatePartitionMetadata,
    encode_current_assignment,
    encode_group_metadata,
    encode_key,
    encode_member_metadata,
    encode_state_partition_metadata,
)
from josefk.broker.group.share_records import decode_key as decode_share_key
from josefk.broker.group.store import KeyValue, StoreAppendError
from josefk.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from josefk.broker.group.loader import LoadedShareGroup

logger = logging.getLogger(__name__)

LEAVE_EPOCH: Final = -1
JOIN_EPOCH: Final = 0
SIMPLE_ASSIGNOR: Final = "simple"

__all__ = [
    "SHARE_AUTO_OFFSET_RESET",
    "SHARE_GROUP_CONFIG_DEFAULTS",
    "SHARE_ISOLATION_LEVEL",
    "ShareGroup",
    "ShareGroupManager",
    "ShareHeartbeatRequest",
    "ShareHeartbeatResult",
    "ShareMember",
]

TopicPartitions = dict[uuid.UUID, frozenset[int]]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: TopicPartitions = field(default_factory=dict)
    # The assignment last sent to the member (None: never), so that a heartbeat carries
    # one only when it changed.
    sent: TopicPartitions | None = None
    session_task: Any = None


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # Every topic a member subscribed to (while the coordinator kept the group) or that has
    # initialized share state: whose share state DeleteGroups deletes.
    topics: set[str] = field(default_factory=set)
    # The topic partitions with share state: topic id -> (name, partitions)
    # (ShareGroupStatePartitionMetadata's initialized topics).
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)
    # The value last written under each of the group's keys in __consumer_offsets.
    written: dict[bytes, bytes] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    @property
    def is_empty(self) -> bool:
        return not self.members


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    # Set when the member's assignment changed since it was last told.
    assignment: TopicPartitions | None = None


class ShareGroupManager(ShardPart):
    """Share groups' membership. Event loop thread only."""

    def __init__(
        self,
        shard: GroupShard,
        share_groups: dict[str, ShareGroup],
        topics: TopicsView | None,
        *,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 5_000,
        max_size: int = 200,
        group_configs: GroupConfigs | None = None,
    ) -> None:
        super().__init__(shard)
        self.share_groups = share_groups
        self._topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size
        # Group configs (GROUP config resources, group_configs.py); a group may have them
        # before it has members. None: every group has the defaults.
        self._group_configs = group_configs
        # Told when a member leaves or is removed: (group id, member id, whether it left
        # with epoch -1 rather than missing its session timeout).
        self.on_member_gone: list[Callable[[str, str, bool], None]] = []
        # Told when an empty share group is deleted, with the topics it read: its share
        # partitions' state goes too.
        self.on_group_deleted: list[Callable[[str, frozenset[str]], None]] = []

    def group_config(self, group_id: str, name: str) -> str:
        """A share group's config: set for the group, else Kafka's default."""
        stored = {} if self._group_configs is None else self._group_configs.overrides(group_id)
        return stored.get(name, SHARE_GROUP_CONFIG_DEFAULTS[name])

    def record_lock_duration_ms(self, group_id: str) -> int | None:
        """The group's ``share.record.lock.duration.ms`` when set (else the broker's)."""
        stored = {} if self._group_configs is None else self._group_configs.overrides(group_id)
        value = stored.get(SHARE_RECORD_LOCK_DURATION)
        return None if value is None else int(value)

    def group(self, group_id: str) -> ShareGroup | None:
        return self.share_groups.get(group_id)

    def _topic_partitions(self) -> dict[str, tuple[uuid.UUID, int]]:
        if self._topics is None:
            return {}
        return {
            t.name: (t.topic_id, t.partitions) for t in self._topics.topics() if not t.is_internal
        }

    @staticmethod
    def _assignments(
        group: ShareGroup, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> dict[str, TopicPartitions]:
        """Every member's assignment (see the module docstring for the rule)."""
        result: dict[str, TopicPartitions] = {member_id: {} for member_id in group.members}
        subscribers: dict[str, list[str]] = {}
        for member_id in sorted(group.members):
            for name in group.members[member_id].subscribed_topic_names:
                if name in topics:
                    subscribers.setdefault(name, []).append(member_id)
        for name, members in subscribers.items():
            topic_id, count = topics[name]
            if count <= 0:
                continue
            if len(members) <= count:
                picks = [(members[p % len(members)], p) for p in range(count)]
            else:
                picks = [(member_id, i % count) for i, member_id in enumerate(members)]
            for member_id, partition in picks:
                owned = result[member_id].get(topic_id, frozenset())
                result[member_id][topic_id] = owned | {partition}
        return result

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {topic_id: name for name, (topic_id, _) in self._topic_partitions().items()}

    # -- heartbeat ----------------------------------------------------------------------------

    def heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        if not request.group_id:
            return ShareHeartbeatResult(ErrorCode.INVALID_GROUP_ID)
        if not request.member_id:
            return ShareHeartbeatResult(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if request.member_epoch == LEAVE_EPOCH:
            return self._leave(request)
        group = self.share_groups.get(request.group_id)
        # The group epoch goes up once for whatever this heartbeat changes.
        bump = False
        if request.member_epoch == JOIN_EPOCH:
            if not request.subscribed_topic_names:
                return ShareHeartbeatResult(
                    ErrorCode.INVALID_REQUEST,
                    "SubscribedTopicNames must be set in first request.",
                )
            if group is None:
                group = ShareGroup(request.group_id)
                self.share_groups[request.group_id] = group
            member = group.members.get(request.member_id)
            if member is None:
                if len(group.members) >= self.max_size:
                    return ShareHeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
                member = ShareMember(request.member_id)
                group.members[request.member_id] = member
                # A new member changes the group even when it gets nothing yet.
                bump = True
            member.sent = None
        else:
            member = None if group is None else group.members.get(request.member_id)
            if group is None or member is None:
                return ShareHeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {request.member_id} is not a member of group {request.group_id}.",
                )
            if request.member_epoch != member.member_epoch:
                return ShareHeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH)
        member.client_id = request.client_id
        member.client_host = request.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.subscribed_topic_names is not None:
            names = tuple(sorted(set(request.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                group.topics.update(names)
                bump = True
        topics = self._topic_partitions()
        rebalanced = self._refresh_assignment(group, topics) or bump
        if rebalanced:
            group.group_epoch += 1
        group.assignment_epoch = group.group_epoch
        if member.member_epoch != group.group_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.group_epoch
        self._note_initialized(group, topics)
        # A rebalance may change every member's target; otherwise only this member moved.
        self._persist(group, members=None if rebalanced else (member.member_id,))
        self._reset_session(group, member)
        changed = member.sent is None or member.sent != member.assignment
        if changed:
            member.sent = dict(member.assignment)
        return ShareHeartbeatResult(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=dict(member.assignment) if changed else None,
        )

    def _refresh_assignment(
        self, group: ShareGroup, topics: Mapping[str, tuple[uuid.UUID, int]] | None = None
    ) -> bool:
        """Recompute every member's assignment from the catalog; whether one changed (a
        topic appeared, grew or vanished, or a subscription changed)."""
        targets = self._assignments(group, self._topic_partitions() if topics is None else topics)
        bumped = False
        for member in group.members.values():
            target = targets[member.member_id]
            if target != member.assignment:
                member.assignment = target
                bumped = True
        return bumped

    def _leave(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        group = self.share_groups.get(request.group_id)
        member = None if group is None else group.members.get(request.member_id)
        if group is None or member is None:
            return ShareHeartbeatResult(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {request.member_id} is not a member of group {request.group_id}.",
            )
        self.remove_member(group, member, left=True)
        return ShareHeartbeatResult(member_id=request.member_id, member_epoch=LEAVE_EPOCH)

    def remove_member(self, group: ShareGroup, member: ShareMember, *, left: bool = False) -> None:
        if member.session_task is not None:
            member.session_task.cancel()
            member.session_task = None
        if group.members.pop(member.member_id, None) is None:
            return
        self._refresh_assignment(group)
        group.group_epoch += 1
        group.assignment_epoch = group.group_epoch
        self._persist(group, gone=(member.member_id,))
        for listener in self.on_member_gone:
            listener(group.group_id, member.member_id, left)

    def _reset_session(self, group: ShareGroup, member: ShareMember) -> None:
        if self._stopped:
            return
        if member.session_task is not None:
            member.session_task.cancel()
        member.session_task = self._scheduler.schedule(
            f"share-group-session-{group.group_id}",
            lambda: self._on_session_timeout(group, member),
            delay_ms=self.session_timeout_ms,
        )

    def _on_session_timeout(self, group: ShareGroup, member: ShareMember) -> None:
        member.session_task = None
        if group.members.get(member.member_id) is not member or self._stopped:
            return
        logger.info(
            "share group %s: member %s missed its session timeout of %d ms",
            group.group_id,
            member.member_id,
            self.session_timeout_ms,
        )
        self.remove_member(group, member)

    def ensure_group(self, group_id: str) -> ShareGroup:
        """The share group, made empty when missing (AlterShareGroupOffsets on a new id)."""
        group = self.share_groups.get(group_id)
        if group is None:
            group = ShareGroup(group_id)
            self.share_groups[group_id] = group
            self._persist(group)
        return group

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.share_groups.get(group_id)
        return group is not None and member_id in group.members

    def release(self) -> None:
        """Cancel every member's timer (the coordinator stops)."""
        for group in self.share_groups.values():
            for member in group.members.values():
                if member.session_task is not None:
                    member.session_task.cancel()
                    member.session_task = None

    def delete(self, group_id: str) -> ErrorCode:
        group = self.share_groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_empty:
            return ErrorCode.NON_EMPTY_GROUP
        tombstones: list[KeyValue] = [
            (encode_key(ShareKey(kind, group_id)), None)
            for kind in (
                SHARE_GROUP_STATE_PARTITION_METADATA,
                SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
                SHARE_GROUP_METADATA,
            )
        ]
        tombstones += [(key, None) for key in group.written if not _is_group_key(key)]
        if not self._append(group_id, tombstones):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        del self.share_groups[group_id]
        for listener in self.on_group_deleted:
            listener(group_id, frozenset(group.topics))
        return ErrorCode.NONE

    # -- share state of topics ----------------------------------------------------------------

    def _note_initialized(
        self, group: ShareGroup, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> None:
        """The partitions of the topics the members subscribe to have share state from now
        on (josefk's share partitions start from share.auto.offset.reset on first fetch)."""
        for name in {n for m in group.members.values() for n in m.subscribed_topic_names}:
            found = topics.get(name)
            if found is None or found[1] <= 0:
                continue
            topic_id, count = found
            _, known = group.initialized.get(topic_id, (name, frozenset()))
            if len(known) < count or not known >= frozenset(range(count)):
                group.initialized[topic_id] = (name, known | frozenset(range(count)))

    def topic_initialized(
        self, group_id: str, topic_id: uuid.UUID, name: str, partition: int
    ) -> None:
        """AlterShareGroupOffsets set the share state of ``partition``."""
        group = self.share_groups.get(group_id)
        if group is None:
            return
        group.topics.add(name)
        _, known = group.initialized.get(topic_id, (name, frozenset()))
        group.initialized[topic_id] = (name, known | {partition})
        self._persist(group, members=())

    def topic_deleted(self, group_id: str, topic_id: uuid.UUID, name: str) -> None:
        """DeleteShareGroupOffsets deleted the share state of the topic."""
        group = self.share_groups.get(group_id)
        if group is None:
            return
        group.topics.discard(name)
        group.initialized.pop(topic_id, None)
        self._persist(group, members=())

    # -- persistence --------------------------------------------------------------------------

    def _append(self, group_id: str, records: list[KeyValue]) -> bool:
        try:
            self._store.append(self.partition_for(group_id), records, self._clock.milliseconds())
        except StoreAppendError as exc:
            logger.warning("share group %s: storing the group failed: %s", group_id, exc)
            return False
        return True

    def _persist(
        self,
        group: ShareGroup,
        gone: tuple[str, ...] = (),
        members: tuple[str, ...] | None = None,
    ) -> None:
        """Write the group's records that changed since last written, in one batch:
        tombstones of the members in ``gone`` first, then (as Kafka orders them) member
        metadata, the group epoch, target assignments and their epoch, current assignments,
        the initialized topics. ``members`` limits the members looked at (None: all)."""
        gid = group.group_id
        records: list[KeyValue] = []
        for member_id in gone:
            for kind in (
                SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                SHARE_GROUP_MEMBER_METADATA,
            ):
                records.append((encode_key(ShareKey(kind, gid, member_id)), None))
        for key, value in self._records(group, members):
            if group.written.get(key) != value:
                records.append((key, value))
        if not records or not self._append(gid, records):
            return
        for key, stored in records:
            if stored is None:
                group.written.pop(key, None)
            else:
                group.written[key] = stored

    def _records(
        self, group: ShareGroup, members: tuple[str, ...] | None
    ) -> list[tuple[bytes, bytes]]:
        gid = group.group_id
        chosen = [
            group.members[m]
            for m in (group.members if members is None else members)
            if m in group.members
        ]
        out = [
            (
                encode_key(ShareKey(SHARE_GROUP_MEMBER_METADATA, gid, m.member_id)),
                encode_member_metadata(
                    ShareMemberMetadata(
                        m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names
                    )
                ),
            )
            for m in chosen
        ]
        out.append(
            (
                encode_key(ShareKey(SHARE_GROUP_METADATA, gid)),
                encode_group_metadata(ShareGroupMetadataValue(group.group_epoch)),
            )
        )
        out += [
            (
                encode_key(ShareKey(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, m.member_id)),
                encode_target_member(m.assignment),
            )
            for m in chosen
        ]
        out.append(
            (
                encode_key(ShareKey(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, gid)),
                encode_epoch(group.assignment_epoch),
            )
        )
        out += [
            (
                encode_key(ShareKey(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id)),
                encode_current_assignment(
                    ShareCurrentAssignment(
                        m.member_epoch,
                        m.previous_member_epoch,
                        MemberState.STABLE.value,
                        m.assignment,
                    )
                ),
            )
            for m in chosen
        ]
        state_key = encode_key(ShareKey(SHARE_GROUP_STATE_PARTITION_METADATA, gid))
        if group.initialized or state_key in group.written:
            # As Kafka: written once a topic has share state, not for a group without any.
            out.append(
                (
                    state_key,
                    encode_state_partition_metadata(
                        StatePartitionMetadata(initialized=dict(group.initialized))
                    ),
                )
            )
        return out

    def restore(self, group_id: str, loaded: LoadedShareGroup) -> ShareGroup:
        """A share group as its records left it: members with their subscriptions, epochs
        and assignments (the current assignment, else the target), the group and target
        epochs, the initialized topics. Every member must heartbeat within a session
        timeout."""
        group = ShareGroup(group_id, group_epoch=loaded.epoch or 0)
        group.assignment_epoch = loaded.assignment_epoch
        group.initialized = dict(loaded.state_partitions.initialized)
        group.topics = {name for name, _ in group.initialized.values()}
        group.written = dict(loaded.written)
        for member_id, metadata in loaded.members.items():
            member = ShareMember(
                member_id,
                rack_id=metadata.rack_id,
                client_id=metadata.client_id,
                client_host=metadata.client_host,
                subscribed_topic_names=metadata.subscribed_topic_names,
            )
            current = loaded.current.get(member_id)
            if current is not None:
                member.member_epoch = current.member_epoch
                member.previous_member_epoch = current.previous_member_epoch
                member.assignment = dict(current.assigned)
            else:
                member.assignment = dict(loaded.targets.get(member_id, {}))
            group.topics.update(metadata.subscribed_topic_names)
            group.members[member_id] = member
        self.share_groups[group_id] = group
        for member in group.members.values():
            self._reset_session(group, member)
        return group

    def unload(self, partition: int) -> None:
        """This broker no longer coordinates ``partition``: its share groups move to the new
        coordinator, which restores them from their records."""
        for group_id in [g for g in self.share_groups if self.partition_for(g) == partition]:
            group = self.share_groups.pop(group_id)
            for member in group.members.values():
                if member.session_task is not None:
                    member.session_task.cancel()
                    member.session_task = None


def _is_group_key(key: bytes) -> bool:
    """Whether ``key`` is one of the group's own records (not a member's)."""
    return decode_share_key(key).member is None
