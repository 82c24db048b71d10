"""Classic groups' membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

Owns ``ClassicGroupManager``, the half of the group coordinator that runs Kafka's classic
rebalance protocol for the ``GroupMetadata`` groups of the shard (the state machine is in
``group.py``), checks a classic member's offset commits (``validate_offset_commit``,
``validate_txn_offset_commit``), stores a group's record (``store_group``) and rebuilds a
group from its record on load (``restore``). The offsets themselves are ``offsets.py``'s.

Time: heartbeat deadlines, rebalance timeouts and the initial rebalance delay are timers of
the shard's ``Scheduler`` over its ``Clock``; tests step both, nothing sleeps.

Replication: a leader's SyncGroup completes the rebalance (Stable, assignments answered)
only once its assignment record is replicated (``settle_sync``); other group records (a
generation that leaves the group Empty, a static member's new id) are taken at append time.

Concurrency: every method runs on the event loop thread and none awaits halfway through a
change; JoinGroup and SyncGroup return futures that later transitions complete.

Imports the group package's data modules, the shard and the store, josefk.protocol.errors
(the codes only); must not import handlers, the codec or the other managers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from josefk.broker.group.group import (
    GroupMetadata,
    GroupState,
    JoinedMember,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from josefk.broker.group.offsets_schema import (
    GroupKey,
    GroupMetadataValue,
    encode_group_key,
    encode_group_value,
)
from josefk.broker.group.shard import UNKNOWN_MEMBER_ID, GroupShard, ShardPart
from josefk.broker.group.store import StoreAppendError, StoreWrite, replication_error
from josefk.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from josefk.broker.replica_manager import AppendOutcome

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True
    supports_skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class InFlightSync:
    """A leader's SyncGroup whose assignment record waits for the in-sync replicas: the
    generation it is for and every member's assignment."""

    outcome: AppendOutcome
    group: GroupMetadata
    generation_id: int
    assignments: dict[str, bytes]


class ClassicGroupManager(ShardPart):
    """The classic groups of one coordinator shard. Event loop thread only."""

    def __init__(self, shard: GroupShard, *, new_member_suffix: Callable[[], str]) -> None:
        super().__init__(shard)
        self._suffix = new_member_suffix

    def settle_sync(self, in_flight: InFlightSync, error: BaseException | None) -> None:
        """The wait for a leader's assignment record is over: the rebalance completes, or
        every member's sync fails and the group rebalances again."""
        group = in_flight.group
        if group.generation_id != in_flight.generation_id or not group.is_in(
            GroupState.COMPLETING_REBALANCE
        ):
            return  # the group moved on (a member left or joined) meanwhile
        if error is None:
            self._complete_sync(group, in_flight.assignments)
        else:
            self._fail_assignment(group, replication_error(error))

    def release(self, group: GroupMetadata, error: ErrorCode) -> None:
        self._cancel_join_timer(group)
        for member in group.members.values():
            if member.heartbeat_task is not None:
                member.heartbeat_task.cancel()
                member.heartbeat_task = None
            self._fail_join(member, error)
            self._fail_sync(member, error)

    def restore(self, group: GroupMetadata, value: GroupMetadataValue) -> None:
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        if value.current_state_timestamp >= 0:
            group.current_state_timestamp = value.current_state_timestamp
        for record in value.members:
            member = MemberMetadata(
                member_id=record.member_id,
                group_instance_id=record.group_instance_id,
                client_id=record.client_id,
                client_host=record.client_host,
                rebalance_timeout_ms=record.rebalance_timeout_ms,
                session_timeout_ms=record.session_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", record.subscription)],
            )
            member.assignment = record.assignment
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        if group.members:
            group.state = GroupState.STABLE
            for member in group.members.values():
                self._reset_heartbeat(group, member)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)

    # -- JoinGroup ------------------------------------------------------------------------

    def join_group(self, request: JoinRequest) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        error = self.ownership_error(request.group_id) or self._validate_join(request)
        if error:
            future.set_result(JoinResult(error, request.member_id))
            return future
        group = self._classic_group(request.group_id)
        if request.member_id == UNKNOWN_MEMBER_ID:
            if group is None:
                group = GroupMetadata(request.group_id, now_ms=self._clock.milliseconds())
                self._groups[request.group_id] = group
            self._join_unknown_member(group, request, future)
        elif group is None:
            future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id))
        else:
            self._join_known_member(group, request, future)
        return future

    def _validate_join(self, request: JoinRequest) -> ErrorCode:
        if not request.group_id:
            return ErrorCode.INVALID_GROUP_ID
        if not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return ErrorCode.INVALID_SESSION_TIMEOUT
        return ErrorCode.NONE

    def _join_unknown_member(
        self, group: GroupMetadata, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        names = [name for name, _ in request.protocols]
        if group.is_in(GroupState.DEAD):
            future.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(request.protocol_type, names):
            future.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID))
            return
        instance_id = request.group_instance_id
        new_id = f"{instance_id if instance_id is not None else request.client_id}-{self._suffix()}"
        if instance_id is not None and instance_id in group.static_members:
            self._replace_static_member(
                group, group.static_members[instance_id], new_id, request, future
            )
            return
        if group.size >= self.config.max_group_size:
            future.set_result(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
            return
        if instance_id is None and request.require_known_member_id:
            # KIP-394: the member learns its id first, so a retried first join does not
            # leave a ghost member behind that the group must wait out.
            group.pending_members.add(new_id)
            self._scheduler.schedule(
                f"group-pending-member-{group.group_id}",
                lambda: self._expire_pending_member(group, new_id),
                delay_ms=request.session_timeout_ms,
            )
            future.set_result(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
            return
        self._add_member_and_rebalance(group, new_id, request, future)

    def _join_known_member(
        self, group: GroupMetadata, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        member_id = request.member_id
        names = [name for name, _ in request.protocols]
        if group.is_in(GroupState.DEAD):
            future.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(request.protocol_type, names):
            future.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, request, future)
            return
        error = self._check_member(group, member_id, request.group_instance_id)
        if error:
            future.set_result(JoinResult(error, member_id))
            return
        member = group.members[member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, request, future)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # A lost JoinGroup response: answer again with the current generation.
                future.set_result(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, request, future)
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                # The leader's rejoin asks for a new assignment (metadata may have changed).
                self._update_member_and_rebalance(group, member, request, future)
            else:
                future.set_result(self._join_result(group, member, with_members=False))
        else:
            future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _check_member(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _join_result(
        self, group: GroupMetadata, member: MemberMetadata, *, with_members: bool = True
    ) -> JoinResult:
        members: tuple[JoinedMember, ...] = ()
        if with_members and group.is_leader(member.member_id):
            members = tuple(
                JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=members,
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        request: JoinRequest,
        future: asyncio.Future[JoinResult],
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
        )
        member.is_new = True
        member.join_future = future
        group.pending_members.discard(member_id)
        group.add_member(member)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.initial_join:
            group.new_member_added = True
        self._reset_heartbeat(group, member)
        self._maybe_prepare_rebalance(group)
        self._try_complete_join(group)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        request: JoinRequest,
        future: asyncio.Future[JoinResult],
    ) -> None:
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        # A second JoinGroup replaces the first; the first is answered so it does not hang.
        self._fail_join(member, ErrorCode.REBALANCE_IN_PROGRESS)
        member.join_future = future
        self._maybe_prepare_rebalance(group)
        self._try_complete_join(group)

    def _replace_static_member(
        self,
        group: GroupMetadata,
        old_id: str,
        new_id: str,
        request: JoinRequest,
        future: asyncio.Future[JoinResult],
    ) -> None:
        """KIP-345: a static member rejoining with an unknown member id takes over its
        instance's place; the old id is fenced. As Kafka, a Stable group does not rebalance
        unless the member's new protocols change the protocol the group would select: the
        member keeps its assignment (new subscription metadata included; the leader sees it
        at the next rebalance). A leader that can skip the assignment (JoinGroup v9+) is
        told so with the members; an older one is answered with the previous leader id, so it
        acts as a follower and syncs its assignment."""
        old = group.members[old_id]
        self._fail_join(old, ErrorCode.FENCED_INSTANCE_ID)
        self._fail_sync(old, ErrorCode.FENCED_INSTANCE_ID)
        instance_id = request.group_instance_id
        assert instance_id is not None
        was_leader = group.is_leader(old_id)
        current_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_id, new_id)
        old_protocols = list(member.protocols)
        old_session, old_rebalance = member.session_timeout_ms, member.rebalance_timeout_ms
        member.protocols = list(request.protocols)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.client_id = request.client_id
        member.client_host = request.client_host
        self._reset_heartbeat(group, member)
        if group.is_in(GroupState.STABLE) and group.protocol_name == group.select_protocol():
            try:
                self.store_group(group)
            except StoreAppendError as exc:
                # Undo: the old id stays the member's, as Kafka reverts on a failed write.
                group.replace_static_member(instance_id, new_id, old_id)
                member.protocols = old_protocols
                member.session_timeout_ms, member.rebalance_timeout_ms = old_session, old_rebalance
                future.set_result(JoinResult(exc.error, UNKNOWN_MEMBER_ID))
                return
            skip = was_leader and request.supports_skip_assignment
            result = self._join_result(group, member, with_members=skip)
            if was_leader:
                result = JoinResult(
                    result.error,
                    result.member_id,
                    generation_id=result.generation_id,
                    protocol_type=result.protocol_type,
                    protocol_name=result.protocol_name,
                    leader_id=result.leader_id if skip else current_leader,
                    members=result.members,
                    skip_assignment=skip,
                )
            future.set_result(result)
            return
        self._update_member_and_rebalance(group, member, request, future)

    # -- rebalance ------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The assignment being synced is void: members must rejoin.
            for member in group.members.values():
                member.assignment = b""
                self._fail_sync(member, ErrorCode.REBALANCE_IN_PROGRESS)
        initial = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._clock.milliseconds())
        self._cancel_join_timer(group)
        rebalance_timeout = group.rebalance_timeout_ms
        group.initial_join = initial
        if initial:
            # A new group waits for more members before the first generation, so that a
            # fleet of consumers starting together does not rebalance once per member.
            delay = self.config.initial_rebalance_delay_ms
            group.new_member_added = False
            self._schedule_join(
                group,
                min(delay, rebalance_timeout),
                remaining_ms=max(rebalance_timeout - delay, 0),
            )
        else:
            self._schedule_join(group, rebalance_timeout, remaining_ms=None)

    def _schedule_join(
        self, group: GroupMetadata, delay_ms: int, *, remaining_ms: int | None
    ) -> None:
        group.join_timer_token += 1
        token = group.join_timer_token
        group.join_timer = self._scheduler.schedule(
            f"group-join-{group.group_id}",
            lambda: self._on_join_timer(group, token, remaining_ms),
            delay_ms=delay_ms,
        )

    def _cancel_join_timer(self, group: GroupMetadata) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.join_timer_token += 1

    def _on_join_timer(self, group: GroupMetadata, token: int, remaining_ms: int | None) -> None:
        if token != group.join_timer_token or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        group.join_timer = None
        if remaining_ms is not None and group.new_member_added and remaining_ms > 0:
            delay = self.config.initial_rebalance_delay_ms
            group.new_member_added = False
            self._schedule_join(
                group, min(delay, remaining_ms), remaining_ms=max(remaining_ms - delay, 0)
            )
            return
        self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.initial_join
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        self._cancel_join_timer(group)
        group.initial_join = False
        for member in list(group.members.values()):
            if not member.is_awaiting_join:
                logger.info(
                    "group %s: member %s did not rejoin in time; removing it",
                    group.group_id,
                    member.member_id,
                )
                self._drop_member(group, member)
        if group.leader_id is not None and group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        now = self._clock.milliseconds()
        group.init_next_generation(now)
        if self._probe is not None:
            self._probe.rebalance_completed(group.group_id)
        logger.info(
            "group %s: generation %d with %d members (%s)",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )
        if group.is_in(GroupState.EMPTY):
            try:
                self.store_group(group)
            except StoreAppendError as exc:
                logger.warning("group %s: storing the empty group failed: %s", group.group_id, exc)
            return
        for member in group.members.values():
            future = member.join_future
            member.join_future = None
            member.is_new = False
            if future is not None and not future.done():
                future.set_result(self._join_result(group, member))
            self._reset_heartbeat(group, member)

    # -- SyncGroup ------------------------------------------------------------------------

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> asyncio.Future[SyncResult]:
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        group = self._classic_group(group_id)
        error = self.ownership_error(group_id)
        if error:
            pass
        elif group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif group.is_in(GroupState.DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            error = self._check_member(group, member_id, group_instance_id)
            if not error and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            if not error and (
                (protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)
            ):
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            if not error and group.is_in(GroupState.EMPTY):
                error = ErrorCode.UNKNOWN_MEMBER_ID
            if not error and group.is_in(GroupState.PREPARING_REBALANCE):
                error = ErrorCode.REBALANCE_IN_PROGRESS
        if error or group is None:
            future.set_result(SyncResult(error))
            return future
        member = group.members[member_id]
        if group.is_in(GroupState.STABLE):
            self._reset_heartbeat(group, member)
            future.set_result(self._sync_result(group, member))
            return future
        # CompletingRebalance: park until the leader's assignment arrives.
        self._fail_sync(member, ErrorCode.REBALANCE_IN_PROGRESS)
        member.sync_future = future
        self._reset_heartbeat(group, member)
        if group.is_leader(member_id):
            full = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
            try:
                write = self.store_group(group, full)
            except StoreAppendError as exc:
                self._fail_assignment(group, exc.error)
                return future
            if write.awaiting is not None:
                # As Kafka: the group becomes Stable and the members hear their assignment
                # only once the in-sync replicas hold it (``appends_settled``).
                self._in_flight[id(write.awaiting)] = InFlightSync(
                    write.awaiting, group, group.generation_id, full
                )
                return future
            self._complete_sync(group, full)
        return future

    def _complete_sync(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        for mid, member in group.members.items():
            member.assignment = assignments.get(mid, b"")
        group.transition_to(GroupState.STABLE, self._clock.milliseconds())
        for member in group.members.values():
            if member.sync_future is not None and not member.sync_future.done():
                member.sync_future.set_result(self._sync_result(group, member))
            member.sync_future = None

    def _fail_assignment(self, group: GroupMetadata, error: int) -> None:
        """The leader's assignment could not be stored: every parked sync hears ``error``
        and the group rebalances again."""
        for member in group.members.values():
            member.assignment = b""
            self._fail_sync(member, error)
        self._maybe_prepare_rebalance(group)

    @staticmethod
    def _sync_result(group: GroupMetadata, member: MemberMetadata) -> SyncResult:
        return SyncResult(
            ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
        )

    @staticmethod
    def _fail_join(member: MemberMetadata, error: int) -> None:
        future = member.join_future
        member.join_future = None
        if future is not None and not future.done():
            future.set_result(JoinResult(error, member.member_id))

    @staticmethod
    def _fail_sync(member: MemberMetadata, error: int) -> None:
        future = member.sync_future
        member.sync_future = None
        if future is not None and not future.done():
            future.set_result(SyncResult(error))

    # -- Heartbeat and session timeouts ---------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if error := self.ownership_error(group_id):
            return error
        group = self._classic_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._check_member(group, member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._reset_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _reset_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Move the member's session deadline; one timer per member follows the deadline
        instead of a new timer per heartbeat."""
        if self._stopped:
            return
        member.heartbeat_deadline_ms = self._clock.monotonic_ms() + member.session_timeout_ms
        if member.heartbeat_task is None:
            self._schedule_heartbeat_check(group, member, member.session_timeout_ms)

    def _schedule_heartbeat_check(
        self, group: GroupMetadata, member: MemberMetadata, delay_ms: int
    ) -> None:
        member.heartbeat_task = self._scheduler.schedule(
            f"group-heartbeat-{group.group_id}",
            lambda: self._on_heartbeat_timer(group, member),
            delay_ms=delay_ms,
        )

    def _on_heartbeat_timer(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_task = None
        if group.members.get(member.member_id) is not member or self._stopped:
            return
        now = self._clock.monotonic_ms()
        if member.is_awaiting_join or member.is_awaiting_sync:
            # A member parked in JoinGroup/SyncGroup cannot heartbeat; the rebalance
            # timeout bounds its wait instead.
            member.heartbeat_deadline_ms = now + member.session_timeout_ms
        if now < member.heartbeat_deadline_ms:
            self._schedule_heartbeat_check(group, member, member.heartbeat_deadline_ms - now)
            return
        logger.info(
            "group %s: member %s missed its session timeout of %d ms",
            group.group_id,
            member.member_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update_group(group, member)

    def _expire_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(group)

    def _drop_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        group.remove_member(member.member_id)
        if member.heartbeat_task is not None:
            member.heartbeat_task.cancel()
            member.heartbeat_task = None
        self._fail_join(member, ErrorCode.UNKNOWN_MEMBER_ID)
        self._fail_sync(member, ErrorCode.UNKNOWN_MEMBER_ID)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._drop_member(group, member)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        self._try_complete_join(group)

    # -- LeaveGroup -----------------------------------------------------------------------

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members given as (member id, instance id); the top-level error and one
        error per member."""
        if error := self.ownership_error(group_id):
            return error, [ErrorCode.NONE] * len(members)
        group = self._classic_group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.NONE] * len(members)
        errors = []
        for member_id, instance_id in members:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id != UNKNOWN_MEMBER_ID and member_id != known:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._try_complete_join(group)
                errors.append(ErrorCode.NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            logger.info("group %s: member %s leaves", group_id, member_id)
            self._remove_member_and_update_group(group, member)
            errors.append(ErrorCode.NONE)
        return ErrorCode.NONE, errors

    # -- offsets of classic members --------------------------------------------------------

    def validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode:
        """Whether a member (or, with a negative generation, a simple consumer of an Empty
        group) may commit offsets now; a member's commit counts as a heartbeat."""
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if (
            group_instance_id is not None
            and group.static_members.get(group_instance_id, member_id) != member_id
        ):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.NONE
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self._reset_heartbeat(group, group.members[member_id])
        return ErrorCode.NONE

    @staticmethod
    def validate_txn_offset_commit(
        group: GroupMetadata, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """The KIP-447 fields of a TxnOffsetCommit, checked as Kafka's coordinator does for
        a transactional commit: a static member's instance id must map to ``member_id``, a
        non-empty ``member_id`` must be a member and a generation >= 0 must be the group's
        (a rebalance in progress is no error here: the transaction's offsets only become
        visible at its commit)."""
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if (
            group_instance_id is not None
            and group.static_members.get(group_instance_id, member_id) != member_id
        ):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id != UNKNOWN_MEMBER_ID and member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # -- persistence of group metadata ----------------------------------------------------

    def store_group(
        self, group: GroupMetadata, assignments: dict[str, bytes] | None = None
    ) -> StoreWrite:
        value = encode_group_value(group.to_record(assignments))
        return self._store.append(
            self.partition_for(group.group_id),
            [(encode_group_key(GroupKey(group.group_id)), value)],
            self._clock.milliseconds(),
        )
