"""Consumer group membership with the classic protocol.

Owns ``GroupCoordinator``, a ``membership.GroupMembership`` (which holds what both protocols
share: the background task, auto-commit, committed offsets, close), running per consumer:

1. find the group's coordinator (FindCoordinator), connect;
2. JoinGroup with protocol type "consumer" and one protocol per assignor ("range",
   "roundrobin"), each carrying the ConsumerProtocol subscription bytes; a MEMBER_ID_REQUIRED
   answer (KIP-394) gives the member id to join again with;
3. the leader (elected by the coordinator) reads every member's subscription, refreshes the
   metadata of the union of their topics, runs the chosen assignor and sends all assignments
   in SyncGroup; every member reads its own assignment from the SyncGroup response;
4. Heartbeat every ``heartbeat_interval_ms``; REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or
   UNKNOWN_MEMBER_ID mean "join again", coordinator errors mean "find it again". The
   protocol is eager: before joining again the member commits (with auto-commit) and gives
   up its whole assignment;
5. auto-commit of the consumer's positions every ``auto_commit_interval_ms``;
6. on close: a last commit (auto-commit), then LeaveGroup so the group rebalances at once
   instead of waiting for the session timeout.

The coordinator knows the consumer only through its ``SubscriptionState`` (subscription.py):
it sets the assignment there, reads the positions to commit and has the rebalance listener
told. Imports josefk.protocol and josefk.client modules, never josefk.client.consumer (which
imports this module), josefk.storage or josefk.broker.
"""

from __future__ import annotations

import logging

from josefk.client.assignors import DEFAULT_ASSIGNORS, Assignor
from josefk.client.cluster import KafkaClient
from josefk.client.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from josefk.client.errors import KafkaError, error_for
from josefk.client.membership import GroupMembership
from josefk.client.subscription import GroupMemberConfig, SubscriptionState
from josefk.protocol import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

log = logging.getLogger("josefk.client.group")

PROTOCOL_TYPE = "consumer"
_MEMBER_ID_REQUIRED = 79
_REJOIN_ERRORS = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        _MEMBER_ID_REQUIRED,
    }
)


class GroupCoordinator(GroupMembership):
    """Membership of one consumer in its group (the classic protocol); see the module
    docstring. A commit that meets a rebalance raises the typed error."""

    def __init__(
        self, client: KafkaClient, config: GroupMemberConfig, subscriptions: SubscriptionState
    ) -> None:
        super().__init__(client, config, subscriptions)
        self.assignors: tuple[Assignor, ...] = (
            tuple(config.partition_assignment_strategy) or DEFAULT_ASSIGNORS
        )
        self.member_id = ""
        self.generation_id = -1
        self.leader_id = ""
        self.protocol_name: str | None = None
        self._need_rejoin = False
        self._assigned_with: dict[str, int] = {}

    def _subscription_changed(self) -> None:
        self._need_rejoin = True

    def _commit_identity(self) -> tuple[int, str, str | None]:
        return self.generation_id, self.member_id, self.config.group_instance_id

    def _on_error(self, exc: KafkaError) -> None:
        if exc.code in _REJOIN_ERRORS:
            self._need_rejoin = True

    # ------------------------------------------------------------------ the loop

    async def _step(self) -> None:
        if self._topics and (self._need_rejoin or self.generation_id < 0):
            await self._rejoin()
        await self._wait_interval()
        if self._topics and not self._need_rejoin and self.generation_id >= 0:
            await self._heartbeat()
            self._check_metadata_changes()
        await self._maybe_auto_commit()

    async def _wait_interval(self) -> None:
        # A member that must join again does so at once.
        if self._need_rejoin and self._topics:
            return
        await super()._wait_interval()

    def _check_metadata_changes(self) -> None:
        """The leader joins again when a subscribed topic gained partitions."""
        if self.leader_id != self.member_id:
            return
        metadata = self._client.metadata
        for topic, count in self._assigned_with.items():
            if len(metadata.partitions_for(topic)) != count:
                log.info("group %s: partitions of %s changed, rebalancing", self.group_id, topic)
                self._need_rejoin = True
                self._wakeup.set()
                return

    async def _heartbeat(self) -> None:
        req = HeartbeatRequest
        response: HeartbeatResponse = await self._request(
            ApiKey.HEARTBEAT,
            req(
                group_id=self.group_id,
                generation_id=self.generation_id,
                member_id=self.member_id,
                group_instance_id=self.config.group_instance_id,
            ),
        )
        code = response.error_code
        if code:
            if code in _REJOIN_ERRORS:
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self._need_rejoin = True
                self._joined.clear()
                return
            raise error_for(code, group=self.group_id)

    # ------------------------------------------------------------------ join / sync

    async def _revoke(self) -> None:
        if self._subscriptions.assigned():
            if self.config.enable_auto_commit and self.generation_id >= 0:
                try:
                    await self.commit(self._subscriptions.positions())
                except KafkaError as exc:
                    log.info("commit before rebalance of group %s failed: %s", self.group_id, exc)
            await self._subscriptions.partitions_revoked()
            self._subscriptions.set_assignment([])
        self._joined.clear()

    async def _rejoin(self) -> None:
        await self._revoke()
        self._need_rejoin = True
        response = await self._join()
        assignment = await self._sync(response)
        self._need_rejoin = False
        wanted = set(self._topics)
        mine = [tp for tp in assignment.partitions if tp.topic in wanted]
        log.info(
            "group %s generation %d: member %s assigned %s",
            self.group_id,
            self.generation_id,
            self.member_id,
            sorted(mine),
        )
        self._subscriptions.set_assignment(mine)
        self._joined.set()
        await self._subscriptions.partitions_assigned(mine)

    async def _join(self) -> JoinGroupResponse:
        req = JoinGroupRequest
        rebalance_timeout = self.config.rebalance_timeout_ms or self.config.max_poll_interval_ms
        for _ in range(3):
            metadata = encode_subscription(Subscription(list(self._topics)))
            body = req(
                group_id=self.group_id,
                session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout,
                member_id=self.member_id,
                group_instance_id=self.config.group_instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocols=[
                    req.JoinGroupRequestProtocol(name=a.name, metadata=metadata)
                    for a in self.assignors
                ],
            )
            response: JoinGroupResponse = await self._request(
                ApiKey.JOIN_GROUP,
                body,
                timeout_s=rebalance_timeout / 1000 + self.config.request_timeout_ms / 1000,
            )
            code = response.error_code
            if code == _MEMBER_ID_REQUIRED:
                self.member_id = response.member_id
                continue
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            if code:
                raise error_for(code, group=self.group_id)
            self.member_id = response.member_id
            self.generation_id = response.generation_id
            self.leader_id = response.leader
            self.protocol_name = response.protocol_name
            return response
        raise error_for(_MEMBER_ID_REQUIRED, group=self.group_id)

    async def _assign_as_leader(
        self, response: JoinGroupResponse
    ) -> list[SyncGroupRequest.SyncGroupRequestAssignment]:
        req = SyncGroupRequest
        subscriptions: dict[str, list[str]] = {}
        for member in response.members:
            try:
                subscriptions[member.member_id] = decode_subscription(member.metadata).topics
            except ValueError as exc:
                log.warning(
                    "group %s: bad subscription from %s: %s", self.group_id, member.member_id, exc
                )
                subscriptions[member.member_id] = []
        topics = sorted({t for ts in subscriptions.values() for t in ts})
        metadata = await self._client.refresh_metadata(topics)
        counts = {t: len(metadata.partitions_for(t)) for t in topics}
        self._assigned_with = counts
        assignor = next((a for a in self.assignors if a.name == response.protocol_name), None)
        if assignor is None:
            raise error_for(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"no assignor named {response.protocol_name}"
            )
        plan = assignor.assign(counts, subscriptions)
        return [
            req.SyncGroupRequestAssignment(
                member_id=m, assignment=encode_assignment(Assignment(parts))
            )
            for m, parts in plan.items()
        ]

    async def _sync(self, join_response: JoinGroupResponse) -> Assignment:
        req = SyncGroupRequest
        assignments: list[SyncGroupRequest.SyncGroupRequestAssignment] = []
        if join_response.leader == join_response.member_id:
            assignments = await self._assign_as_leader(join_response)
        body = req(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.config.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=self.protocol_name,
            assignments=assignments,
        )
        rebalance_timeout = self.config.rebalance_timeout_ms or self.config.max_poll_interval_ms
        response: SyncGroupResponse = await self._request(
            ApiKey.SYNC_GROUP,
            body,
            timeout_s=rebalance_timeout / 1000 + self.config.request_timeout_ms / 1000,
        )
        if response.error_code:
            if response.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            raise error_for(response.error_code, group=self.group_id)
        return decode_assignment(response.assignment)

    async def _leave(self, *, closing: bool = False) -> None:
        if closing and self._topics and self._subscriptions.assigned():
            await self._subscriptions.partitions_revoked()
        # A member id without a generation is a member still joining: the group counts it
        # and would wait out its rebalance timeout for it, so it leaves too, as Kafka's do.
        if not self.member_id:
            return
        req = LeaveGroupRequest
        member_id = self.member_id

        def build(version: int) -> LeaveGroupRequest:
            if version >= 3:
                return req(
                    group_id=self.group_id,
                    members=[
                        req.MemberIdentity(
                            member_id=member_id, group_instance_id=self.config.group_instance_id
                        )
                    ],
                )
            return req(group_id=self.group_id, member_id=member_id)

        self.member_id = ""
        self.generation_id = -1
        self._joined.clear()
        try:
            response: LeaveGroupResponse = await self._request(
                ApiKey.LEAVE_GROUP, build, timeout_s=5.0
            )
            if response.error_code:
                log.info("LeaveGroup of %s: %s", self.group_id, error_for(response.error_code))
        except KafkaError as exc:
            log.info("LeaveGroup of %s failed: %s", self.group_id, exc)
