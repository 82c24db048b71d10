"""Online migration of a group between the classic and the consumer protocol (KIP-848).

Owns ``MigrationManager``: the conversion of a classic group with members into a consumer
group (upgrade) and back (downgrade), and the classic APIs (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) of the classic members a consumer group holds meanwhile.

As Kafka 4.x does, per ``group.consumer.migration.policy`` (``disabled``, ``upgrade``,
``downgrade``, ``bidirectional``):

- Upgrade: a ConsumerGroupHeartbeat joining a classic group with members (protocol type
  ``consumer``) turns it into a consumer group where the policy allows an upgrade, else
  GROUP_ID_NOT_FOUND. Every classic member becomes a member of the consumer group at the
  classic generation (its member epoch), with the assignment its SyncGroup gave it as its
  current and target assignment; the group epoch is the generation. Parked JoinGroups and
  SyncGroups hear REBALANCE_IN_PROGRESS. The joining member then bumps the epoch as any
  new member does.
- Classic members inside a consumer group keep speaking the classic protocol. Their
  JoinGroup updates their subscription (the topics of their first protocol's metadata) and
  reconciles them towards the consumer group's target at once: what they own is what their
  subscription lists as owned (a cooperative member), nothing for an eager member (it
  revoked everything before rejoining). The answer has no leader work to do (an empty
  leader, no members); SyncGroup answers the member's assigned partitions, computed by the
  coordinator; its generation is the member epoch. Heartbeat answers REBALANCE_IN_PROGRESS
  while the member is not reconciled to the group's target (its target changed, or
  partitions it waits for are not released yet), so it rejoins. A new classic member joins
  too, except under ``disabled`` (INCONSISTENT_GROUP_PROTOCOL, as Kafka since KAFKA-20640);
  members already in the group may rejoin under every policy.
- Downgrade: when the last consumer-protocol member leaves (leave heartbeat, LeaveGroup,
  session or revocation timeout) and classic members remain, the group becomes a classic
  group without it, at the group epoch (not bumped for the leave: members reconciled to it
  may still commit with their generation), where the policy allows a downgrade, and starts a
  rebalance at once (its members hear REBALANCE_IN_PROGRESS, or ILLEGAL_GENERATION where
  their epoch lagged, and rejoin under the classic protocol).

Concurrency: event loop thread only; nothing awaits.

Imports the group package's data modules and managers (classic, consumer), the shard and the
store, josefk.protocol.errors (codes only); must not import handlers or the codec.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from josefk.broker.group.assignment import (
    SubscriptionFormatError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from josefk.broker.group.classic import ClassicGroupManager, JoinRequest
from josefk.broker.group.consumer import ConsumerGroupManager
from josefk.broker.group.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicPartitions,
    reconcile,
)
from josefk.broker.group.consumer_records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    ConsumerKey,
    encode_key,
)
from josefk.broker.group.group import (
    CONSUMER_PROTOCOL_TYPE,
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from josefk.broker.group.shard import UNKNOWN_MEMBER_ID, GroupShard, ShardPart
from josefk.broker.group.store import StoreAppendError
from josefk.protocol.errors import ErrorCode

logger = logging.getLogger(__name__)

UPGRADE_POLICIES = frozenset({"upgrade", "bidirectional"})
DOWNGRADE_POLICIES = frozenset({"downgrade", "bidirectional"})


class MigrationManager(ShardPart):
    """Mixed groups and their conversions. Event loop thread only."""

    def __init__(
        self, shard: GroupShard, classic: ClassicGroupManager, consumer: ConsumerGroupManager
    ) -> None:
        super().__init__(shard)
        self._classic = classic
        self._consumer = consumer
        consumer.downgrade = self.maybe_downgrade

    @property
    def _policy(self) -> str:
        return self.config.consumer_migration_policy

    # -- upgrade ----------------------------------------------------------------------------

    def upgrade(self, old: GroupMetadata) -> tuple[ErrorCode, str | None]:
        """Turn the classic group ``old`` (with members) into a consumer group holding them;
        GROUP_ID_NOT_FOUND where Kafka refuses the online upgrade."""
        gid = old.group_id
        if self._policy not in UPGRADE_POLICIES:
            return ErrorCode.GROUP_ID_NOT_FOUND, (
                f"Cannot upgrade classic group {gid} to consumer group because the online "
                "upgrade is disabled."
            )
        if old.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group."
        if len(old.members) >= self.config.consumer_max_size:
            return ErrorCode.GROUP_ID_NOT_FOUND, (
                f"Cannot upgrade classic group {gid} to consumer group because its size "
                "reaches the consumer group maximum size."
            )
        ids = {name: topic_id for topic_id, name in self._consumer.topic_names().items()}
        generation = old.generation_id
        group = ConsumerGroup(gid)
        try:
            for m in old.members.values():
                metadata = (
                    m.metadata_for(old.protocol_name)
                    if old.protocol_name is not None
                    else (m.protocols[0][1] if m.protocols else b"")
                )
                topics, _ = decode_subscription(metadata)
                member = ConsumerMember(
                    member_id=m.member_id,
                    instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    subscribed_topic_names=tuple(sorted(set(topics))),
                    member_epoch=generation,
                    previous_member_epoch=generation,
                    state=MemberState.STABLE,
                    assigned=_by_id(decode_assignment(m.assignment), ids),
                    classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
                )
                group.add_member(member)
                group.target[member.member_id] = dict(member.assigned)
        except SubscriptionFormatError as exc:
            return ErrorCode.GROUP_ID_NOT_FOUND, (
                f"Cannot upgrade classic group {gid} to consumer group: {exc}"
            )
        for member in group.members.values():
            # Of a partition two members claim (a stale assignment), the first keeps it.
            for tp in member.owned():
                group.owners.setdefault(tp, member.member_id)
        group.group_epoch = generation
        group.assignment_epoch = generation
        group.subscription_metadata = self._consumer._subscription_metadata(group)
        group.assignor_name = self._consumer._assignor_for(group)
        _move_offsets(old, group)
        self._classic.release(old, ErrorCode.REBALANCE_IN_PROGRESS)
        old.pending_members.clear()
        self._tombstone(gid, old.group_record_keys())
        self._groups[gid] = group
        self._consumer._persist(group, ())
        self._consumer.restart_sessions(group)
        logger.info(
            "group %s: upgraded from a classic group to a consumer group with %d classic "
            "members at epoch %d",
            gid,
            len(group.members),
            generation,
        )
        return ErrorCode.NONE, None

    # -- downgrade --------------------------------------------------------------------------

    def maybe_downgrade(self, group: ConsumerGroup, leaving: ConsumerMember) -> bool:
        """``leaving`` is about to be removed: if it is the last consumer-protocol member and
        classic members remain, the group becomes a classic group without it (where the
        policy allows) at the group epoch, so that members reconciled to it may still commit
        with their generation until they rejoin; True if so."""
        others = [m for m in group.members.values() if m is not leaving]
        if (
            leaving.classic is not None
            or group.members.get(leaving.member_id) is not leaving
            or not others
            or any(m.classic is None for m in others)
            or self._policy not in DOWNGRADE_POLICIES
            or len(others) > self.config.max_group_size
            or self._groups.get(group.group_id) is not group
        ):
            return False
        gid = group.group_id
        names = self._consumer.topic_names()
        now = self._clock.milliseconds()
        new = GroupMetadata(gid, now_ms=now)
        new.generation_id = group.group_epoch
        for m in others:
            assert m.classic is not None
            member = MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=m.classic.protocols,
            )
            member.assignment = encode_assignment(_by_name(m.assigned, names))
            new.add_member(member)
        if not new.candidate_protocols():
            return False  # no protocol every member supports: stay a consumer group
        new.protocol_name = new.select_protocol()
        new.state = GroupState.STABLE
        _move_offsets(group, new)
        self._consumer.release(group)
        keys = list(group.group_record_keys())
        for member_id in group.members:
            keys.extend(_member_keys(gid, member_id))
        self._tombstone(gid, keys)
        self._groups[gid] = new
        try:
            self._classic.store_group(new)
        except StoreAppendError as exc:
            logger.warning("group %s: storing the downgraded group failed: %s", gid, exc)
        for member in new.members.values():
            self._classic._reset_heartbeat(new, member)
        self._classic._prepare_rebalance(new)
        logger.info(
            "group %s: downgraded from a consumer group to a classic group with %d members "
            "as member %s leaves",
            gid,
            len(new.members),
            leaving.member_id,
        )
        return True

    # -- classic members of a consumer group -------------------------------------------------

    def join(self, group: ConsumerGroup, request: JoinRequest) -> JoinResult:
        """JoinGroup of a classic member into the consumer group ``group``."""
        if request.protocol_type != CONSUMER_PROTOCOL_TYPE or not request.protocols:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        if not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        instance_id = request.group_instance_id
        existing: ConsumerMember | None = None
        if instance_id is not None and instance_id in group.static_members:
            existing = group.members[group.static_members[instance_id]]
            if request.member_id and request.member_id != existing.member_id:
                return JoinResult(ErrorCode.FENCED_INSTANCE_ID, request.member_id)
        elif request.member_id:
            existing = group.members.get(request.member_id)
            if existing is None and request.member_id not in group.pending_classic_ids:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
        names = [name for name, _ in request.protocols]
        common = set(names)
        for other in group.members.values():
            if other is not existing and other.classic is not None:
                common.intersection_update(other.classic.protocol_names)
        if not common:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        if existing is None and self._policy == "disabled":
            logger.info(
                "group %s: a classic member may not join the consumer group: migration is disabled",
                group.group_id,
            )
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        try:
            topics, owned_names = decode_subscription(request.protocols[0][1])
        except SubscriptionFormatError:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        bumped = False
        if existing is None:
            if len(group.members) >= self.config.consumer_max_size:
                return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, request.member_id)
            new_id = f"{instance_id or request.client_id}-{uuid.uuid4()}"
            if instance_id is None and request.require_known_member_id and not request.member_id:
                # KIP-394, as for a classic group: the member learns its id first.
                if len(group.pending_classic_ids) >= 1024:
                    group.pending_classic_ids.clear()  # ids never used: forget the oldest
                group.pending_classic_ids.add(new_id)
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            group.pending_classic_ids.discard(request.member_id)
            member = ConsumerMember(member_id=request.member_id or new_id, instance_id=instance_id)
            group.add_member(member)
            bumped = True
            logger.info("group %s: classic member %s joins", group.group_id, member.member_id)
        elif not request.member_id:
            # A static member back under a new member id takes its place.
            self._consumer._cancel_timers(existing)
            member = group.replace_static_member(existing, f"{instance_id}-{uuid.uuid4()}")
        else:
            member = existing
        member.classic = ClassicMemberMetadata(request.session_timeout_ms, request.protocols)
        member.client_id = request.client_id
        member.client_host = request.client_host
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        subscribed = tuple(sorted(set(topics)))
        if (
            subscribed != member.subscribed_topic_names
            or member.subscribed_topic_regex is not None
            or member.server_assignor is not None
        ):
            member.subscribed_topic_names = subscribed
            member.subscribed_topic_regex = None
            member.server_assignor = None
            bumped = True
        metadata = self._consumer._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bumped = True
        if bumped:
            group.group_epoch += 1
            self._consumer._compute_target(group)
        ids = {name: topic_id for topic_id, name in self._consumer.topic_names().items()}
        owned = _by_id(owned_names, ids)
        # A rejoining classic member owns only what it lists (nothing if eager): the rest
        # of what it held is free now.
        dropped = {(t, p) for t, p in member.owned() if p not in owned.get(t, frozenset())}
        group.release(member, dropped)
        member.assigned = _intersect(member.assigned, owned)
        member.pending_revocation = _intersect(member.pending_revocation, owned)
        if member.state is MemberState.UNREVOKED_PARTITIONS and not member.pending_revocation:
            member.state = MemberState.STABLE
        reconcile(group, member, owned)
        self._consumer._after_reconcile(group, member)
        self._consumer._reset_session(group, member)
        self._consumer._persist(group, (), None if bumped else (member.member_id,))
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            generation_id=member.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=next(n for n in names if n in common),
            leader_id="",
            members=(),
        )

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> tuple[ConsumerMember | None, ErrorCode]:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return None, ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        return member, ErrorCode.NONE

    def sync(
        self,
        group: ConsumerGroup,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        *,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult:
        """SyncGroup of a classic member: its assignment, which the coordinator computed."""
        member, error = self._classic_member(group, member_id, instance_id)
        if member is None:
            return SyncResult(error)
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name not in member.classic.protocol_names
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        self._consumer._reset_session(group, member)
        names = self._consumer.topic_names()
        return SyncResult(
            ErrorCode.NONE,
            encode_assignment(_by_name(member.assigned, names)),
            CONSUMER_PROTOCOL_TYPE,
            protocol_name or member.classic.protocol_names[0],
        )

    def heartbeat(
        self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        """Heartbeat of a classic member: REBALANCE_IN_PROGRESS until it is reconciled."""
        member, error = self._classic_member(group, member_id, instance_id)
        if member is None:
            return error
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._consumer._reset_session(group, member)
        if member.is_reconciled(group):
            return ErrorCode.NONE
        return ErrorCode.REBALANCE_IN_PROGRESS

    def leave(
        self, group: ConsumerGroup, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup on a consumer group: each named member (of either protocol) leaves."""
        errors = []
        for member_id, instance_id in members:
            current = self._groups.get(group.group_id)
            if not isinstance(current, ConsumerGroup):
                # Downgraded by an earlier leave of this request.
                _, rest = self._classic.leave_group(group.group_id, [(member_id, instance_id)])
                errors.extend(rest)
                continue
            if instance_id is not None:
                known = current.static_members.get(instance_id)
                if known is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id != UNKNOWN_MEMBER_ID and member_id != known:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            member = current.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            logger.info("group %s: member %s leaves", group.group_id, member_id)
            self._consumer.remove_member(current, member)
            errors.append(ErrorCode.NONE)
        return ErrorCode.NONE, errors

    # -- records ----------------------------------------------------------------------------

    def _tombstone(self, group_id: str, keys: list[bytes]) -> None:
        try:
            self._store.append(
                self.partition_for(group_id),
                [(key, None) for key in keys],
                self._clock.milliseconds(),
            )
        except StoreAppendError as exc:
            logger.warning("group %s: conversion not stored: %s", group_id, exc)


def _move_offsets(old: GroupMetadata | ConsumerGroup, new: GroupMetadata | ConsumerGroup) -> None:
    new.offsets = old.offsets
    new.pending_txn_offsets = old.pending_txn_offsets
    new.pending_offset_commits = old.pending_offset_commits


def _member_keys(group_id: str, member_id: str) -> list[bytes]:
    return [
        encode_key(ConsumerKey(kind, group_id, member_id))
        for kind in (
            CONSUMER_GROUP_MEMBER_METADATA,
            CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
            CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
        )
    ]


def _by_id(partitions: list[tuple[str, int]], ids: dict[str, uuid.UUID]) -> TopicPartitions:
    found: dict[uuid.UUID, set[int]] = {}
    for topic, partition in partitions:
        topic_id = ids.get(topic)
        if topic_id is not None:
            found.setdefault(topic_id, set()).add(partition)
    return {t: frozenset(ps) for t, ps in found.items()}


def _by_name(assignment: TopicPartitions, names: dict[uuid.UUID, str]) -> dict[str, list[int]]:
    return {names[t]: sorted(ps) for t, ps in assignment.items() if t in names and ps}


def _intersect(a: TopicPartitions, b: TopicPartitions) -> TopicPartitions:
    found = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in found.items() if ps}
