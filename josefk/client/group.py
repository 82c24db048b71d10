"""Consumer group membership (the classic protocol) and committed offsets.

Owns ``GroupCoordinator``, which runs one background task per consumer:

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

Also owns ``commit_offsets`` and ``fetch_committed_offsets`` (OffsetCommit / OffsetFetch for
any group, also used by the admin client to reset the offsets of an empty group).

The coordinator knows the consumer only through its ``SubscriptionState`` (subscription.py):
it sets the assignment there, reads the positions to commit and has the rebalance listener
told. Imports josefk.protocol and josefk.client modules, never josefk.client.consumer (which
imports this module), josefk.storage or josefk.broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from josefk.client.assignors import DEFAULT_ASSIGNORS, Assignor
from josefk.client.cluster import KafkaClient, find_coordinator
from josefk.client.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from josefk.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for,
)
from josefk.client.subscription import GroupMemberConfig, SubscriptionState
from josefk.client.types import TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

log = logging.getLogger("josefk.client.group")

PROTOCOL_TYPE = "consumer"
_MEMBER_ID_REQUIRED = 79
_COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
_REJOIN_ERRORS = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        _MEMBER_ID_REQUIRED,
    }
)


async def commit_offsets(
    client: KafkaClient,
    node_id: int,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
    metadata: str = "",
) -> None:
    """OffsetCommit; raises the first partition's typed error."""
    if not offsets:
        return
    req = OffsetCommitRequest
    by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            req.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata=metadata,
            )
        )
    body = req(
        group_id=group_id,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        topics=[req.OffsetCommitRequestTopic(name=n, partitions=p) for n, p in by_topic.items()],
    )
    response: OffsetCommitResponse = await client.request(node_id, ApiKey.OFFSET_COMMIT, body)
    for topic in response.topics:
        for part in topic.partitions:
            if part.error_code:
                raise error_for(
                    part.error_code,
                    group=group_id,
                    topic=topic.name,
                    partition=part.partition_index,
                )


async def fetch_committed_offsets(
    client: KafkaClient,
    node_id: int,
    group_id: str,
    partitions: Sequence[TopicPartition] | None,
    *,
    require_stable: bool = False,
) -> dict[TopicPartition, int | None]:
    """OffsetFetch: committed offset per partition (None when nothing is committed).
    ``partitions`` None asks for every partition the group has offsets for.
    ``require_stable`` (KIP-447): a partition with offsets pending in an open transaction
    answers UNSTABLE_OFFSET_COMMIT (raised, retriable) instead of the older offset."""
    req = OffsetFetchRequest
    by_topic: dict[str, list[int]] = {}
    for tp in partitions or ():
        by_topic.setdefault(tp.topic, []).append(tp.partition)

    def build(version: int) -> OffsetFetchRequest:
        if version >= 8:
            topics = (
                None
                if partitions is None
                else [
                    req.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                        name=n, partition_indexes=p
                    )
                    for n, p in by_topic.items()
                ]
            )
            return req(
                groups=[req.OffsetFetchRequestGroup(group_id=group_id, topics=topics)],
                require_stable=require_stable,
            )
        topics7 = (
            None
            if partitions is None
            else [
                req.OffsetFetchRequestTopic(name=n, partition_indexes=p)
                for n, p in by_topic.items()
            ]
        )
        return req(group_id=group_id, topics=topics7, require_stable=require_stable)

    response: OffsetFetchResponse = await client.request(node_id, ApiKey.OFFSET_FETCH, build)
    out: dict[TopicPartition, int | None] = {}
    topics_resp: Sequence[
        OffsetFetchResponse.OffsetFetchResponseTopics | OffsetFetchResponse.OffsetFetchResponseTopic
    ]
    if getattr(response, "groups", None):
        group = response.groups[0]
        if group.error_code:
            raise error_for(group.error_code, group=group_id)
        topics_resp = group.topics
    else:
        if getattr(response, "error_code", 0):
            raise error_for(response.error_code, group=group_id)
        topics_resp = response.topics
    for topic in topics_resp:
        for part in topic.partitions:
            if part.error_code:
                raise error_for(part.error_code, group=group_id, topic=topic.name)
            tp = TopicPartition(topic.name, part.partition_index)
            out[tp] = part.committed_offset if part.committed_offset >= 0 else None
    return out


class GroupCoordinator:
    """Membership of one consumer in its group; see the module docstring.

    All methods run on the consumer's loop. ``commit`` may run concurrently with the
    background task; a commit that meets a rebalance raises the typed error.
    """

    def __init__(
        self, client: KafkaClient, config: GroupMemberConfig, subscriptions: SubscriptionState
    ) -> None:
        assert config.group_id is not None
        self._client = client
        self.config = config
        self.group_id: str = config.group_id
        # What the consumer consumes: the coordinator sets the assignment, reads positions
        # to commit and tells the rebalance listener (subscription.py).
        self._subscriptions = subscriptions
        self.assignors: tuple[Assignor, ...] = (
            tuple(config.partition_assignment_strategy) or DEFAULT_ASSIGNORS
        )
        self.member_id = ""
        self.generation_id = -1
        self.leader_id = ""
        self.protocol_name: str | None = None
        self._coordinator: int | None = None
        self._topics: list[str] = []
        self._need_rejoin = False
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._assigned_with: dict[str, int] = {}
        self._next_auto_commit = 0.0
        self._joined = asyncio.Event()
        self._closing = False

    @property
    def subscribed(self) -> bool:
        return bool(self._topics)

    @property
    def joined(self) -> asyncio.Event:
        """Set while the member holds an assignment of the current generation."""
        return self._joined

    def subscribe(self, topics: Sequence[str]) -> None:
        self._topics = sorted(set(topics))
        self._client.add_topics(self._topics)
        self._need_rejoin = True
        self._wakeup.set()

    async def unsubscribe(self) -> None:
        self._topics = []
        await self._leave()
        self._wakeup.set()

    def start(self) -> None:
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        self._task = asyncio.ensure_future(self._run())

    def polled(self) -> None:
        """The user polled; nothing to do for the classic protocol's background heartbeat."""

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001  our own task, cancelled; _run logged what it met
                pass
        if self.config.enable_auto_commit:
            try:
                await self.commit(self._subscriptions.positions())
            except KafkaError as exc:
                log.warning("final auto-commit of group %s failed: %s", self.group_id, exc)
        if self._topics and self._subscriptions.assigned():
            await self._subscriptions.partitions_revoked()
        await self._leave()

    # ------------------------------------------------------------------ coordinator

    async def _ensure_coordinator(self) -> int:
        if self._coordinator is None:
            self._coordinator = await find_coordinator(self._client, self.group_id)
        return self._coordinator

    def _coordinator_dead(self) -> None:
        self._coordinator = None

    async def _request(
        self, api_key: int, body: object, *, timeout_s: float | None = None
    ) -> Any:  # the response of ``api_key``: callers annotate the variable they assign it to
        node_id = await self._ensure_coordinator()
        try:
            return await self._client.request(node_id, api_key, body, timeout_s=timeout_s)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._coordinator_dead()
            raise

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        attempt = 0
        while True:
            try:
                if self._topics and (self._need_rejoin or self.generation_id < 0):
                    await self._rejoin()
                    attempt = 0
                await self._wait_interval()
                if self._topics and not self._need_rejoin and self.generation_id >= 0:
                    await self._heartbeat()
                    self._check_metadata_changes()
                await self._maybe_auto_commit()
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                attempt += 1
                code = exc.code
                if code in _COORDINATOR_ERRORS or isinstance(
                    exc, (KafkaConnectionError, KafkaTimeoutError)
                ):
                    self._coordinator_dead()
                if code in _REJOIN_ERRORS or code in _COORDINATOR_ERRORS:
                    self._need_rejoin = self._need_rejoin or code in _REJOIN_ERRORS
                log.info("group %s: %s (attempt %d)", self.group_id, exc, attempt)
                await asyncio.sleep(
                    min(1.0, self.config.retry_backoff_ms / 1000 * 2 ** min(attempt, 5))
                )
            except Exception:
                attempt += 1
                log.exception("group %s: unexpected error", self.group_id)
                await asyncio.sleep(
                    min(1.0, self.config.retry_backoff_ms / 1000 * 2 ** min(attempt, 5))
                )

    async def _wait_interval(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        if self.config.enable_auto_commit:
            interval = min(interval, max(0.0, self._next_auto_commit - time.monotonic()))
        if self._need_rejoin and self._topics:
            return
        try:
            async with asyncio.timeout(interval):
                await self._wakeup.wait()
        except TimeoutError:
            pass
        self._wakeup.clear()

    async def _maybe_auto_commit(self) -> None:
        if not self.config.enable_auto_commit or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        positions = self._subscriptions.positions()
        if positions:
            try:
                await self.commit(positions)
            except KafkaError as exc:
                log.info("auto-commit of group %s failed: %s", self.group_id, exc)
                if exc.code in _REJOIN_ERRORS:
                    self._need_rejoin = True

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

    async def _leave(self) -> None:
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

    # ------------------------------------------------------------------ offsets

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        managed = bool(self._topics)
        await commit_offsets(
            self._client,
            await self._ensure_coordinator(),
            self.group_id,
            offsets,
            generation_id=self.generation_id if managed else -1,
            member_id=self.member_id if managed else "",
            group_instance_id=self.config.group_instance_id if managed else None,
        )

    async def fetch_committed(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The committed offsets; a read_committed consumer asks for stable ones (KIP-447)
        and waits, up to ``request_timeout_ms``, while a transaction holds offsets of the
        group pending, as Kafka's consumer does, instead of starting from older ones."""
        require_stable = self.config.isolation_level == "read_committed"
        clock = self.config.clock
        unstable_deadline = clock() + self.config.request_timeout_ms / 1000
        attempt = 0
        while True:
            try:
                return await fetch_committed_offsets(
                    self._client,
                    await self._ensure_coordinator(),
                    self.group_id,
                    list(partitions),
                    require_stable=require_stable,
                )
            except KafkaError as exc:
                if exc.code == ErrorCode.UNSTABLE_OFFSET_COMMIT and clock() < unstable_deadline:
                    await asyncio.sleep(
                        min(self.config.retry_backoff_max_ms, self.config.retry_backoff_ms) / 1000
                    )
                    continue
                if not exc.retriable and exc.code not in _COORDINATOR_ERRORS:
                    raise
                self._coordinator_dead()
                if attempt == 4:
                    raise
                await asyncio.sleep(self.config.retry_backoff_ms / 1000 * 2**attempt)
                attempt += 1
