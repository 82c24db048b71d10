"""KIP-848 consumer groups' membership: ConsumerGroupHeartbeat, ConsumerGroupDescribe.

Owns ``ConsumerGroupManager``, the half of the group coordinator that runs the consumer
group protocol for the ``ConsumerGroup``s of the shard (their data and reconciliation are in
``consumer_group.py``, the assignors in ``assignors.py``), ``HeartbeatRequest`` /
``HeartbeatResult``, and the checks of a consumer group member's offset commits and fetches
(``validate_offset_commit``, ``validate_offset_fetch``).

A heartbeat, as Kafka's coordinator handles it:

1. Epoch -1 leaves the group (a static member for good); epoch -2 is a static member's
   temporary leave: it keeps its place and partitions for a session timeout, and the next
   member with its instance id takes them over without a rebalance.
2. Epoch 0 joins (or rejoins: a known member id starts over with what it is assigned); any
   other epoch must be the member's (FENCED_MEMBER_EPOCH otherwise, except the previous epoch
   with owned partitions the member still has: a lost response). A static member's instance
   id held by an active member is UNRELEASED_INSTANCE_ID.
3. The member's subscription (names, regex, server assignor, rebalance timeout) is updated
   from the fields that are not null; the subscribed topics are resolved against the
   broker's topics (``TopicsView``); a new member, a changed subscription, a leaving member or
   a subscribed topic that appeared, vanished or grew bumps the group epoch and the target
   assignment is computed at once by the group's assignor. Regexes are the exception, as in
   Kafka: a heartbeat only schedules their resolution (a new regex at once, a change of the
   topics once the last resolution is ``REGEX_REFRESH_INTERVAL_MS`` old), which runs after it
   on the shard's scheduler and bumps the epoch if what they match changed; so a member
   subscribing to a name and a regex gets the named topic first and the matched ones in a
   later epoch (librdkafka's test 0045 expects this). A load resolves them at once (the one most members ask for in
   ``group.remote.assignor`` among ``group.consumer.assignors``, else the first of those).
4. The member reconciles towards its target (``consumer_group.reconcile``) and the answer
   carries its epoch and, when it changed or was asked for, its assignment.

Regular expressions (SubscribedTopicRegex): Kafka compiles them with RE2J and matches whole
topic names; josefk compiles them with Google's RE2 (the ``google-re2`` package, module
``re2``) and uses ``fullmatch``, so the syntax is RE2's in both: classes, alternation,
repetition, ``(?i)`` flags, non-capturing groups, ``\\d \\w \\s``, ``\\pL`` Unicode classes;
lookaround and backreferences are refused (INVALID_REGULAR_EXPRESSION). Python's ``re`` is
not used: it backtracks, and a pattern such as ``(a+)+b`` against a long topic name would
stall the event loop; RE2 matches in time linear in the name. Internal topics never match.

Time: session timeouts (``group.consumer.session.timeout.ms``) and revocation timeouts (the
member's rebalance timeout, while it holds partitions it must give up) are timers of the
shard's ``Scheduler`` over its ``Clock``; an expired member is removed and its partitions go
to the others.

Concurrency: event loop thread only; nothing awaits.

Imports the group package's data modules, records, loader types, the shard and the store, and
josefk.protocol.errors (codes only);
must not import handlers, the codec or the other managers.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

import re2

from josefk.broker.group.assignors import UnknownAssignorError, assign
from josefk.broker.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicPartitions,
    reconcile,
    revoke_unsubscribed,
)
from josefk.broker.group.consumer_records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerKey,
    CurrentAssignmentValue,
    MemberMetadataValue,
    encode_current_assignment,
    encode_epoch,
    encode_key,
    encode_member_metadata,
    encode_target_member,
)
from josefk.broker.group.group_configs import GroupConfigs
from josefk.broker.group.loader import LoadedConsumerGroup
from josefk.broker.group.shard import GroupShard, ShardPart
from josefk.broker.group.store import KeyValue, StoreAppendError
from josefk.protocol.errors import ErrorCode

logger = logging.getLogger(__name__)

# How old the resolution of a group's regexes must be before a change of the topics makes
# the coordinator resolve them again (a new regex is resolved at once).
REGEX_REFRESH_INTERVAL_MS: Final = 10_000


class TopicInfoView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def partitions(self) -> int: ...
    @property
    def is_internal(self) -> bool: ...


class TopicsView(Protocol):
    """The broker's topics, as the coordinator needs them (the catalog)."""

    def topics(self) -> Iterable[TopicInfoView]: ...


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[uuid.UUID, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


class ConsumerGroupManager(ShardPart):
    """The consumer groups of one coordinator shard. Event loop thread only."""

    def __init__(
        self,
        shard: GroupShard,
        topics: TopicsView | None,
        *,
        new_member_id: Callable[[], str],
        group_configs: GroupConfigs | None = None,
    ) -> None:
        super().__init__(shard)
        self._topics = topics
        self.group_configs = group_configs
        self._new_member_id = new_member_id
        # Asked before a member is removed: the online downgrade (``migration.py``), which
        # answers True when it turned the group into a classic group without the member.
        self.downgrade: Callable[[ConsumerGroup, ConsumerMember], bool] | None = None

    # -- topics -----------------------------------------------------------------------------

    def _all_topics(self) -> dict[str, tuple[uuid.UUID, int, bool]]:
        if self._topics is None:
            return {}
        return {t.name: (t.topic_id, t.partitions, t.is_internal) for t in self._topics.topics()}

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {topic_id: name for name, (topic_id, _, _) in self._all_topics().items()}

    @staticmethod
    def _resolve(
        group: ConsumerGroup,
        member: ConsumerMember,
        topics: Mapping[str, tuple[uuid.UUID, int, bool]],
    ) -> set[str]:
        """The existing topics ``member`` subscribes to: its topic names, and what its regex
        matched when the group's regexes were last resolved."""
        names = {n for n in member.subscribed_topic_names if n in topics}
        if member.subscribed_topic_regex is not None:
            matched = group.resolved_regexes.get(member.subscribed_topic_regex, frozenset())
            names.update(n for n in matched if n in topics)
        return names

    def _subscription_metadata(
        self,
        group: ConsumerGroup,
        topics: Mapping[str, tuple[uuid.UUID, int, bool]] | None = None,
    ) -> dict[str, tuple[uuid.UUID, int]]:
        if topics is None:
            topics = self._all_topics()
        wanted: set[str] = set()
        for member in group.members.values():
            wanted |= self._resolve(group, member, topics)
        return {n: (topics[n][0], topics[n][1]) for n in sorted(wanted)}

    # -- regular expressions ----------------------------------------------------------------

    def _regexes(self, group: ConsumerGroup) -> set[str]:
        return {
            m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex
        }

    def _resolve_regexes(
        self, group: ConsumerGroup, topics: Mapping[str, tuple[uuid.UUID, int, bool]]
    ) -> dict[str, frozenset[str]]:
        resolved = {}
        for regex in self._regexes(group):
            pattern = _compile(regex)
            resolved[regex] = frozenset(
                n
                for n, (_, _, internal) in topics.items()
                if not internal and pattern is not None and pattern.fullmatch(n)
            )
        group.regex_resolved_ms = self._clock.monotonic_ms()
        group.regex_topics = frozenset(n for n, (_, _, internal) in topics.items() if not internal)
        return resolved

    def _maybe_refresh_regexes(
        self, group: ConsumerGroup, topics: Mapping[str, tuple[uuid.UUID, int, bool]]
    ) -> None:
        """Schedule the resolution of the group's regexes when a member brought a new one,
        or when the topics changed and the last resolution is ``REGEX_REFRESH_INTERVAL_MS``
        old. The heartbeat does not wait for it: the topics a regex matches come with a
        later epoch (as in Kafka, whose clients' tests expect a subscription to a regex and
        a topic name to be assigned the named topic first)."""
        self._forget_unsubscribed_regexes(group)
        if group.regex_task is not None or self._stopped:
            return
        regexes = self._regexes(group)
        if not regexes:
            return
        due = bool(regexes - group.resolved_regexes.keys())
        if not due and group.regex_resolved_ms is not None:
            age = self._clock.monotonic_ms() - group.regex_resolved_ms
            if age >= REGEX_REFRESH_INTERVAL_MS:
                names = frozenset(n for n, (_, _, internal) in topics.items() if not internal)
                due = names != group.regex_topics
        if due:
            group.regex_task = self._scheduler.schedule(
                f"consumer-group-regex-{group.group_id}",
                lambda: self._refresh_regexes(group),
                delay_ms=0,
            )

    def _forget_unsubscribed_regexes(self, group: ConsumerGroup) -> None:
        """Drop what a regex matched once no member subscribes to it: a member subscribing to
        it again later is resolved afresh, after its heartbeat, as a new regex (librdkafka's
        0045 unsubscribes from a regex, then subscribes to it with a topic name, and expects the
        named topic first)."""
        regexes = self._regexes(group)
        if group.resolved_regexes.keys() - regexes:
            group.resolved_regexes = {
                regex: matched
                for regex, matched in group.resolved_regexes.items()
                if regex in regexes
            }

    def _refresh_regexes(self, group: ConsumerGroup) -> None:
        """Resolve the group's regexes against the topics now; if what they match changed,
        the group epoch goes up and the target is computed again."""
        group.regex_task = None
        if self._stopped or self._groups.get(group.group_id) is not group:
            return
        resolved = self._resolve_regexes(group, self._all_topics())
        if resolved == group.resolved_regexes:
            return
        group.resolved_regexes = resolved
        logger.info(
            "group %s: regular expressions resolved: %s",
            group.group_id,
            {r: sorted(ns) for r, ns in resolved.items()},
        )
        if not group.members:
            return
        group.subscription_metadata = self._subscription_metadata(group)
        group.group_epoch += 1
        self._compute_target(group)
        self._persist(group, ())

    # -- heartbeat --------------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        result = self._heartbeat(request)
        if logger.isEnabledFor(logging.DEBUG):
            names = self.topic_names()
            logger.debug(
                "group %s: heartbeat of %s epoch %d names %s regex %s owned %s -> %s epoch %d "
                "assignment %s",
                request.group_id,
                request.member_id,
                request.member_epoch,
                request.subscribed_topic_names,
                request.subscribed_topic_regex,
                None if request.owned is None else _named(request.owned, names),
                result.error.name,
                result.member_epoch,
                None if result.assignment is None else _named(result.assignment, names),
            )
        return result

    def _heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        error, message = self._validate(request)
        if error:
            return HeartbeatResult(error, message)
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(request)
        found = self._groups.get(request.group_id)
        if found is not None and not isinstance(found, ConsumerGroup):
            return HeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a consumer group."
            )
        group = found
        if group is None:
            if request.member_epoch != 0:
                return HeartbeatResult(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Consumer group {request.group_id} not found.",
                )
            group = ConsumerGroup(request.group_id)
            self._groups[request.group_id] = group  # type: ignore[assignment]
        member, bumped, error, message = self._member_for(group, request)
        if member is None:
            if not group.members and not group.offsets and found is None:
                del self._groups[request.group_id]
            return HeartbeatResult(error, message)
        before = (member.member_epoch, dict(member.assigned))
        subscription_changed = self._update_subscription(member, request)
        if subscription_changed:
            bumped = True
        topics = self._all_topics()
        self._maybe_refresh_regexes(group, topics)
        metadata = self._subscription_metadata(group, topics)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bumped = True
        if bumped:
            group.group_epoch += 1
            self._compute_target(group)
        if subscription_changed:
            subscribed = self._resolve(group, member, topics)
            revoke_unsubscribed(member, frozenset(topics[n][0] for n in subscribed), request.owned)
        reconcile(group, member, request.owned)
        self._after_reconcile(group, member)
        self._reset_session(group, member)
        changed = before != (member.member_epoch, member.assigned)
        if bumped or changed:
            self._persist(group, (), None if bumped else (member.member_id,))
        include = request.owned is not None or request.member_epoch == 0 or changed
        return HeartbeatResult(
            ErrorCode.NONE,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self._heartbeat_interval_ms(group.group_id),
            assignment=dict(member.assigned) if include else None,
        )

    def _validate(self, request: HeartbeatRequest) -> tuple[ErrorCode, str | None]:
        if not request.group_id:
            return ErrorCode.INVALID_REQUEST, "GroupId can't be empty."
        if request.api_version >= 1 and not request.member_id:
            return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
        if request.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."
        if request.member_epoch == 0:
            if request.rebalance_timeout_ms == -1:
                return (
                    ErrorCode.INVALID_REQUEST,
                    "RebalanceTimeoutMs must be provided in first request.",
                )
            # Present and empty, as Kafka checks: a join without the field is refused too.
            if request.owned is None or request.owned:
                return ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                return (
                    ErrorCode.INVALID_REQUEST,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and request.instance_id is None:
            return ErrorCode.INVALID_REQUEST, "InstanceId can't be null."
        if (
            request.server_assignor is not None
            and request.server_assignor not in self.config.consumer_assignors
        ):
            return (
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.consumer_assignors)}.",
            )
        if request.subscribed_topic_regex is not None and (
            _compile(request.subscribed_topic_regex) is None
        ):
            return (
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex {request.subscribed_topic_regex} is not a valid regular "
                "expression.",
            )
        return ErrorCode.NONE, None

    def _member_for(
        self, group: ConsumerGroup, request: HeartbeatRequest
    ) -> tuple[ConsumerMember | None, bool, ErrorCode, str | None]:
        """The member the heartbeat is from (created on a join); whether the group epoch
        must go up; else the error."""
        member_id = request.member_id
        instance_id = request.instance_id
        if request.member_epoch == 0:
            if instance_id is not None and instance_id in group.static_members:
                existing = group.members[group.static_members[instance_id]]
                if existing.member_id == member_id:
                    return self._rejoin(group, existing), False, ErrorCode.NONE, None
                if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    return (
                        None,
                        False,
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {existing.member_id} with instance id {instance_id} "
                        "is not released yet.",
                    )
                new_id = member_id or self._new_member_id()
                self._cancel_timers(existing)
                member = group.replace_static_member(existing, new_id)
                member.state = MemberState.STABLE
                logger.info(
                    "group %s: static member %s rejoins as %s", group.group_id, instance_id, new_id
                )
                return member, False, ErrorCode.NONE, None
            existing_member = group.members.get(member_id) if member_id else None
            if existing_member is not None:
                return self._rejoin(group, existing_member), False, ErrorCode.NONE, None
            if len(group.members) >= self.config.consumer_max_size:
                return (
                    None,
                    False,
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of "
                    f"{self.config.consumer_max_size} members.",
                )
            member = ConsumerMember(
                member_id=member_id or self._new_member_id(),
                instance_id=instance_id,
                client_id=request.client_id,
                client_host=request.client_host,
            )
            group.add_member(member)
            logger.info("group %s: member %s joins", group.group_id, member.member_id)
            return member, True, ErrorCode.NONE, None
        found = group.members.get(member_id)
        if found is None:
            return (
                None,
                False,
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {group.group_id}.",
            )
        if instance_id is not None and group.static_members.get(instance_id) != member_id:
            return None, False, ErrorCode.FENCED_INSTANCE_ID, None
        if request.member_epoch != found.member_epoch and not (
            request.member_epoch == found.previous_member_epoch
            and request.owned is not None
            and _is_subset(request.owned, found.assigned)
        ):
            return (
                None,
                False,
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch "
                f"({found.member_epoch}) than the one known by the client "
                f"({request.member_epoch}).",
            )
        return found, False, ErrorCode.NONE, None

    def _rejoin(self, group: ConsumerGroup, member: ConsumerMember) -> ConsumerMember:
        """A known member joins again with epoch 0: it owns nothing now (it gave everything
        up when fenced), so what it was revoking is released; it gets back what it is
        assigned."""
        group.release(member, {(t, p) for t, ps in member.pending_revocation.items() for p in ps})
        member.pending_revocation = {}
        member.state = MemberState.STABLE
        self._cancel_revocation(member)
        return member

    def _update_subscription(self, member: ConsumerMember, request: HeartbeatRequest) -> bool:
        changed = False
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.client_id:
            member.client_id = request.client_id
        if request.client_host:
            member.client_host = request.client_host
        if request.subscribed_topic_names is not None:
            names = tuple(sorted(set(request.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                changed = True
        if request.subscribed_topic_regex is not None:
            regex = request.subscribed_topic_regex or None
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex
                changed = True
        if request.server_assignor is not None:
            assignor = request.server_assignor or None
            if assignor != member.server_assignor:
                member.server_assignor = assignor
                changed = True
        return changed

    # -- target assignment ------------------------------------------------------------------

    def _assignor_for(self, group: ConsumerGroup) -> str:
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if votes:
            return max(sorted(votes), key=lambda name: votes[name])
        return self.config.consumer_assignors[0]

    def _compute_target(self, group: ConsumerGroup) -> None:
        """The target assignment for the group epoch (its assignment epoch)."""
        topics = {n: (tid, count, False) for n, (tid, count) in group.subscription_metadata.items()}
        subscriptions = {
            member_id: frozenset(topics[n][0] for n in self._resolve(group, member, topics))
            for member_id, member in group.members.items()
        }
        counts = {tid: count for tid, count in group.subscription_metadata.values()}
        assignor = self._assignor_for(group)
        try:
            target = assign(assignor, subscriptions, counts, group.target)
        except UnknownAssignorError:
            assignor = self.config.consumer_assignors[0]
            target = assign(assignor, subscriptions, counts, group.target)
        group.target = {m: {t: ps for t, ps in a.items() if ps} for m, a in target.items()}
        group.assignor_name = assignor
        group.assignment_epoch = group.group_epoch
        if self._probe is not None:
            self._probe.rebalance_completed(group.group_id)
        logger.info(
            "group %s: epoch %d, target assignment by %s for %d members",
            group.group_id,
            group.group_epoch,
            assignor,
            len(group.members),
        )

    def _after_reconcile(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.revocation_task is None:
                epoch = member.member_epoch
                member.revocation_task = self._scheduler.schedule(
                    f"consumer-group-revocation-{group.group_id}",
                    lambda: self._on_revocation_timeout(group, member, epoch),
                    delay_ms=member.rebalance_timeout_ms,
                )
        else:
            self._cancel_revocation(member)

    # -- leaving, timeouts ------------------------------------------------------------------

    def _leave(self, request: HeartbeatRequest) -> HeartbeatResult:
        found = self._groups.get(request.group_id)
        if not isinstance(found, ConsumerGroup):
            return HeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {request.group_id} not found."
            )
        group = found
        if request.instance_id is not None:
            member_id = group.static_members.get(request.instance_id)
            if member_id is None:
                return HeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Instance id {request.instance_id} is unknown.",
                )
            if member_id != request.member_id:
                return HeartbeatResult(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(request.member_id)
        if member is None:
            return HeartbeatResult(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {request.member_id} is not a member of group {group.group_id}.",
            )
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A static member's temporary leave: it keeps its place and partitions until
            # its session times out or its instance id comes back.
            logger.info(
                "group %s: static member %s leaves temporarily", group.group_id, member.member_id
            )
            member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            self._cancel_revocation(member)
            self._reset_session(group, member)
            self._persist(group, ())
        else:
            logger.info("group %s: member %s leaves", group.group_id, member.member_id)
            self.remove_member(group, member)
        return HeartbeatResult(
            ErrorCode.NONE,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            heartbeat_interval_ms=0,
        )

    def remove_member(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """The member is gone (left, expired, fenced): its partitions are free and the
        others get a new target."""
        self._cancel_timers(member)
        if self.downgrade is not None and self.downgrade(group, member):
            return  # the group became a classic group without it
        group.remove_member(member.member_id)
        self._forget_unsubscribed_regexes(group)
        group.group_epoch += 1
        group.subscription_metadata = self._subscription_metadata(group)
        if group.members:
            self._compute_target(group)
        else:
            group.target = {}
            group.assignment_epoch = group.group_epoch
        self._persist(group, (member.member_id,))

    def _session_timeout_ms(self, group_id: str) -> int:
        """The group's consumer.session.timeout.ms, else the broker's."""
        default = self.config.consumer_session_timeout_ms
        if self.group_configs is None:
            return default
        return self.group_configs.session_timeout_ms(group_id, default)

    def _heartbeat_interval_ms(self, group_id: str) -> int:
        default = self.config.consumer_heartbeat_interval_ms
        if self.group_configs is None:
            return default
        return self.group_configs.heartbeat_interval_ms(group_id, default)

    def _reset_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if self._stopped:
            return
        if member.session_task is not None:
            member.session_task.cancel()
        member.session_task = self._scheduler.schedule(
            f"consumer-group-session-{group.group_id}",
            lambda: self._on_session_timeout(group, member),
            delay_ms=self._member_session_timeout_ms(group, member),
        )

    def _member_session_timeout_ms(self, group: ConsumerGroup, member: ConsumerMember) -> int:
        """A classic member keeps the session timeout of its JoinGroup."""
        if member.classic is not None:
            return member.classic.session_timeout_ms
        return self._session_timeout_ms(group.group_id)

    def _on_session_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.session_task = None
        if group.members.get(member.member_id) is not member or self._stopped:
            return
        logger.info(
            "group %s: member %s missed its session timeout of %d ms",
            group.group_id,
            member.member_id,
            self._member_session_timeout_ms(group, member),
        )
        self.remove_member(group, member)

    def _on_revocation_timeout(
        self, group: ConsumerGroup, member: ConsumerMember, epoch: int
    ) -> None:
        member.revocation_task = None
        if (
            group.members.get(member.member_id) is not member
            or member.state is not MemberState.UNREVOKED_PARTITIONS
            or member.member_epoch != epoch
        ):
            return
        logger.info(
            "group %s: member %s did not revoke its partitions within %d ms",
            group.group_id,
            member.member_id,
            member.rebalance_timeout_ms,
        )
        self.remove_member(group, member)

    def _cancel_revocation(self, member: ConsumerMember) -> None:
        if member.revocation_task is not None:
            member.revocation_task.cancel()
            member.revocation_task = None

    def _cancel_timers(self, member: ConsumerMember) -> None:
        self._cancel_revocation(member)
        if member.session_task is not None:
            member.session_task.cancel()
            member.session_task = None

    def release(self, group: ConsumerGroup) -> None:
        """Stop the group's timers (unload, shutdown)."""
        if group.regex_task is not None:
            group.regex_task.cancel()
            group.regex_task = None
        for member in group.members.values():
            self._cancel_timers(member)

    def restart_sessions(self, group: ConsumerGroup) -> None:
        """After a load: every member must heartbeat within a session timeout."""
        for member in group.members.values():
            self._reset_session(group, member)

    # -- persistence ------------------------------------------------------------------------

    def _persist(
        self, group: ConsumerGroup, gone: Iterable[str], members: Iterable[str] | None = None
    ) -> None:
        """Write the group's records (Kafka's record types 3, 5-8, ``consumer_records``) that
        changed since last written, as one batch: its epoch, each member's metadata, target
        and current assignment, the target's epoch, and tombstones for the members in
        ``gone``. ``members`` limits the members looked at (a heartbeat that moved only its
        own member). As Kafka, a rebalance writes the records of the members whose target or
        state changed, not every member's: ``group.written`` remembers the value last
        written under each key. Compaction keeps the last record of each key, so the log
        holds the group as it is now."""
        gid = group.group_id
        written = group.written
        records: list[KeyValue] = []
        for key, value in self._records(group, members):
            if written.get(key) != value:
                records.append((key, value))
        for member_id in gone:
            for key in _member_keys(gid, member_id):
                records.append((key, None))
        if not records:
            return
        try:
            self._store.append(self.partition_for(gid), records, self._clock.milliseconds())
        except StoreAppendError as exc:
            logger.warning("group %s: storing the consumer group failed: %s", gid, exc)
            return
        for key, stored in records:
            if stored is None:
                written.pop(key, None)
            else:
                written[key] = stored

    def _records(
        self, group: ConsumerGroup, members: Iterable[str] | None = None
    ) -> Iterable[tuple[bytes, bytes]]:
        """The group's records as they are now (of ``members`` only, if given)."""
        gid = group.group_id
        yield (
            encode_key(ConsumerKey(CONSUMER_GROUP_METADATA, gid)),
            encode_epoch(group.group_epoch),
        )
        for member_id in group.members if members is None else members:
            m = group.members.get(member_id)
            if m is None:
                continue
            yield (
                encode_key(ConsumerKey(CONSUMER_GROUP_MEMBER_METADATA, gid, member_id)),
                encode_member_metadata(
                    MemberMetadataValue(
                        m.instance_id,
                        m.rack_id,
                        m.client_id,
                        m.client_host,
                        m.subscribed_topic_names,
                        m.subscribed_topic_regex,
                        m.rebalance_timeout_ms,
                        m.server_assignor,
                        m.classic.session_timeout_ms if m.classic is not None else None,
                        m.classic.protocols if m.classic is not None else (),
                    )
                ),
            )
            yield (
                encode_key(ConsumerKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, member_id)),
                encode_target_member(group.target.get(member_id, {})),
            )
            yield (
                encode_key(ConsumerKey(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, member_id)),
                encode_current_assignment(
                    CurrentAssignmentValue(
                        m.member_epoch,
                        m.previous_member_epoch,
                        m.state.value,
                        m.assigned,
                        m.pending_revocation,
                    )
                ),
            )
        yield (
            encode_key(ConsumerKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid)),
            encode_epoch(group.assignment_epoch),
        )

    def restore(self, group_id: str, loaded: LoadedConsumerGroup) -> ConsumerGroup:
        """A consumer group as its records left it: members with their epochs and
        assignments, the target. A target that no longer covers the subscribed topics'
        partitions (topics changed while nobody coordinated the group) is computed again.
        Every member must heartbeat within a session timeout."""
        group = ConsumerGroup(group_id)
        group.group_epoch = loaded.epoch or 0
        group.assignment_epoch = loaded.assignment_epoch
        for member_id, metadata in loaded.members.items():
            current = loaded.current.get(member_id)
            member = ConsumerMember(
                member_id=member_id,
                instance_id=metadata.instance_id,
                rack_id=metadata.rack_id,
                client_id=metadata.client_id,
                client_host=metadata.client_host,
                rebalance_timeout_ms=metadata.rebalance_timeout_ms,
                subscribed_topic_names=metadata.subscribed_topic_names,
                subscribed_topic_regex=metadata.subscribed_topic_regex,
                server_assignor=metadata.server_assignor,
            )
            if metadata.classic_session_timeout_ms is not None:
                member.classic = ClassicMemberMetadata(
                    metadata.classic_session_timeout_ms, metadata.classic_protocols
                )
            if current is not None:
                member.member_epoch = current.member_epoch
                member.previous_member_epoch = current.previous_member_epoch
                member.state = (
                    MemberState(current.state)
                    if current.state in (1, 2, 3)
                    else (MemberState.STABLE)
                )
                member.assigned = dict(current.assigned)
                member.pending_revocation = dict(current.pending_revocation)
            group.add_member(member)
            group.take(member)
            group.target[member_id] = dict(loaded.targets.get(member_id, {}))
        # A load is no heartbeat: the regexes are resolved here, at once.
        group.resolved_regexes = self._resolve_regexes(group, self._all_topics())
        group.subscription_metadata = self._subscription_metadata(group)
        covered = {(t, p) for a in group.target.values() for t, ps in a.items() for p in ps}
        wanted = {(t, p) for t, count in group.subscription_metadata.values() for p in range(count)}
        if group.members and covered != wanted:
            group.group_epoch += 1
            self._compute_target(group)
        group.assignor_name = self._assignor_for(group) if group.members else ""
        # What the log holds now, as far as a later write must know; a target computed
        # again here differs from it and is written with the next change.
        group.written = dict(loaded.written)
        self._groups[group_id] = group
        self.restart_sessions(group)
        return group

    # -- offsets of consumer group members --------------------------------------------------

    @staticmethod
    def validate_offset_commit(
        group: ConsumerGroup,
        member_epoch: int,
        member_id: str,
        *,
        api_version: int | None,
        transactional: bool = False,
    ) -> ErrorCode:
        """Kafka's rules: without a member (epoch < 0) only an empty group takes commits
        (the admin client's), except a TxnOffsetCommit that names no member at all; a member
        must be known and commit at its current epoch (STALE_MEMBER_EPOCH, also for a commit
        racing the heartbeat that moved the epoch on, as in Kafka 4.0), with OffsetCommit
        v9+ (UNSUPPORTED_VERSION before)."""
        if group.is_dead:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE
        # TxnOffsetCommit without group metadata (no member, no epoch): Kafka lets it through.
        if transactional and member_epoch < 0 and not member_id:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is not None:
            # A classic member of a consumer group commits with the generation its JoinGroup
            # gave it (its member epoch), with any OffsetCommit version, as in Kafka.
            if member_epoch != member.member_epoch and not (transactional and member_epoch < 0):
                return ErrorCode.ILLEGAL_GENERATION
            return ErrorCode.NONE
        if not transactional and api_version is not None and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    @staticmethod
    def validate_offset_fetch(
        group: ConsumerGroup, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        if member_epoch < 0 and member_id is None:
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE


def _member_keys(group_id: str, member_id: str) -> list[bytes]:
    """The keys of a member's records (metadata, target, current assignment)."""
    return [
        encode_key(ConsumerKey(kind, group_id, member_id))
        for kind in (
            CONSUMER_GROUP_MEMBER_METADATA,
            CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
            CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
        )
    ]


def _named(
    partitions: Mapping[uuid.UUID, frozenset[int]], names: Mapping[uuid.UUID, str]
) -> dict[str, list[int]]:
    """Partitions by topic name (else id), for debug logs."""
    return {names.get(t, str(t)): sorted(ps) for t, ps in partitions.items()}


def _is_subset(owned: Mapping[uuid.UUID, frozenset[int]], assigned: TopicPartitions) -> bool:
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


class _Pattern(Protocol):
    def fullmatch(self, text: str) -> object | None: ...


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a client's bad pattern is its error, not the broker's log
_PATTERNS: dict[str, _Pattern | None] = {}


def _compile(regex: str) -> _Pattern | None:
    """The compiled RE2 pattern, None when RE2 refuses it (cached: every heartbeat of a
    member resolves its regex)."""
    if regex in _PATTERNS:
        return _PATTERNS[regex]
    try:
        pattern: _Pattern | None = re2.compile(regex, _RE2_OPTIONS)
    except re2.error:
        pattern = None
    if len(_PATTERNS) < 4096:
        _PATTERNS[regex] = pattern
    return pattern


def describe_assignment(
    assignment: TopicPartitions, names: Mapping[uuid.UUID, str]
) -> list[tuple[uuid.UUID, str, list[int]]]:
    return [
        (topic_id, names.get(topic_id, ""), sorted(partitions))
        for topic_id, partitions in sorted(assignment.items(), key=lambda kv: names.get(kv[0], ""))
    ]
