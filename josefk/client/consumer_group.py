"""Consumer group membership with Kafka 4's consumer group protocol (KIP-848).

Owns ``ConsumerGroupMember``, the counterpart of ``group.GroupCoordinator`` for
``group_protocol="consumer"``: the broker computes the assignment, the member only
heartbeats (ConsumerGroupHeartbeat v1, the member id generated here, KIP-1082) and follows
what each answer says:

1. find the group's coordinator, heartbeat with epoch 0 and the subscription (topic names,
   the rebalance timeout, ``group_remote_assignor``); every heartbeat then carries the member
   epoch and the partitions this member owns (so a revocation is acknowledged by the next
   heartbeat, which goes out at once);
2. an answer with an assignment: partitions no longer in it are revoked first (committed with
   auto-commit, the listener's ``on_partitions_revoked`` with exactly those), then the new
   ones are added (``on_partitions_assigned`` with exactly those); the partitions this member
   keeps are never paused;
3. FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: every partition is lost (no commit: another
   member may own them already) and the member joins again with epoch 0; coordinator errors
   find the coordinator again;
4. the broker's heartbeat interval paces the loop; auto-commit commits at the member epoch
   (OffsetCommit v9);
5. close: a last commit, the listener, then a heartbeat with epoch -1 (-2 for a static
   member, which keeps its partitions for the session timeout).

Works on the consumer's ``SubscriptionState`` (subscription.py), as group.py does, never on
the consumer itself. Imports josefk.protocol and josefk.client modules; never josefk.storage
or josefk.broker.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from josefk.client.cluster import KafkaClient, find_coordinator
from josefk.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from josefk.client.group import commit_offsets, fetch_committed_offsets
from josefk.client.subscription import GroupMemberConfig, SubscriptionState
from josefk.client.types import TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.api import request_class
from josefk.protocol.errors import ErrorCode

log = logging.getLogger("josefk.client.consumer_group")

_COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
_FENCED = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})


class ConsumerGroupMember:
    """One consumer's membership in a KIP-848 group; see the module docstring. All methods
    run on the consumer's loop."""

    def __init__(
        self, client: KafkaClient, config: GroupMemberConfig, subscriptions: SubscriptionState
    ) -> None:
        assert config.group_id is not None
        self._client = client
        self.config = config
        self.group_id: str = config.group_id
        self._subscriptions = subscriptions
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        self.member_epoch = 0
        self._coordinator: int | None = None
        self._topics: list[str] = []
        self._interval_s = config.heartbeat_interval_ms / 1000
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._joined = asyncio.Event()
        self._next_auto_commit = 0.0
        # Set when the subscription changed: the next heartbeat sends it.
        self._subscription_changed = True

    @property
    def generation_id(self) -> int:
        """The member epoch: what OffsetCommit v9 and TxnOffsetCommit carry."""
        return self.member_epoch

    @property
    def subscribed(self) -> bool:
        return bool(self._topics)

    @property
    def joined(self) -> asyncio.Event:
        return self._joined

    def subscribe(self, topics: Sequence[str]) -> None:
        self._topics = sorted(set(topics))
        self._client.add_topics(self._topics)
        self._subscription_changed = True
        self._wakeup.set()

    async def unsubscribe(self) -> None:
        self._topics = []
        await self._leave()
        self._wakeup.set()

    def start(self) -> None:
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        self._task = asyncio.ensure_future(self._run())

    def polled(self) -> None:
        """The user polled: nothing to do, heartbeats run in the background."""

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001  our own task, cancelled; _run logged what it met
                pass
        if self.config.enable_auto_commit and self.member_epoch > 0:
            try:
                await self.commit(self._subscriptions.positions())
            except KafkaError as exc:
                log.warning("final auto-commit of group %s failed: %s", self.group_id, exc)
        await self._leave()

    # ------------------------------------------------------------------ the loop

    async def _ensure_coordinator(self) -> int:
        if self._coordinator is None:
            self._coordinator = await find_coordinator(self._client, self.group_id)
        return self._coordinator

    async def _run(self) -> None:
        attempt = 0
        while True:
            try:
                if self._topics:
                    await self._heartbeat()
                await self._maybe_auto_commit()
                attempt = 0
                await self._wait_interval()
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                attempt += 1
                if exc.code in _COORDINATOR_ERRORS or isinstance(
                    exc, (KafkaConnectionError, KafkaTimeoutError)
                ):
                    self._coordinator = None
                log.info("group %s: %s (attempt %d)", self.group_id, exc, attempt)
                await asyncio.sleep(
                    min(1.0, self.config.retry_backoff_ms / 1000 * 2 ** min(attempt, 5))
                )
            except Exception:
                attempt += 1
                log.exception("group %s: unexpected error", self.group_id)
                await asyncio.sleep(1.0)

    async def _wait_interval(self) -> None:
        interval = self._interval_s
        if self.config.enable_auto_commit:
            interval = min(interval, max(0.0, self._next_auto_commit - time.monotonic()))
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
        if positions and self.member_epoch > 0:
            try:
                await self.commit(positions)
            except KafkaError as exc:
                log.info("auto-commit of group %s failed: %s", self.group_id, exc)

    def _owned(self) -> list[Any]:
        req = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        ids = {
            name: info.topic_id
            for name, info in self._client.metadata.topics.items()
            if info.topic_id is not None
        }
        by_topic: dict[str, list[int]] = {}
        for tp in self._subscriptions.assigned():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return [
            req.TopicPartitions(topic_id=ids[topic], partitions=sorted(parts))
            for topic, parts in sorted(by_topic.items())
            if topic in ids
        ]

    async def _heartbeat(self) -> None:
        req = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        joining = self.member_epoch == 0
        full = joining or self._subscription_changed
        body = req(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.config.group_instance_id,
            rebalance_timeout_ms=(
                self.config.rebalance_timeout_ms or self.config.max_poll_interval_ms
            )
            if full
            else -1,
            subscribed_topic_names=list(self._topics) if full else None,
            server_assignor=self.config.group_remote_assignor if full else None,
            topic_partitions=[] if joining else self._owned(),
        )
        node_id = await self._ensure_coordinator()
        try:
            response = await self._client.request(node_id, ApiKey.CONSUMER_GROUP_HEARTBEAT, body)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._coordinator = None
            raise
        code = response.error_code
        if code in _FENCED:
            log.info("group %s: member %s fenced (%s)", self.group_id, self.member_id, code)
            await self._lose_all()
            self.member_epoch = 0
            self._wakeup.set()
            return
        if code:
            if code in _COORDINATOR_ERRORS:
                self._coordinator = None
            raise error_for(code, group=self.group_id)
        self._subscription_changed = False
        self.member_epoch = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self._interval_s = response.heartbeat_interval_ms / 1000
        if response.assignment is not None:
            await self._reconcile(response.assignment)

    async def _reconcile(self, assignment: Any) -> None:
        names = self._client.metadata.topic_names_by_id
        if any(t.topic_id not in names for t in assignment.topic_partitions):
            await self._client.refresh_metadata()
            names = self._client.metadata.topic_names_by_id
        target = {
            TopicPartition(names[t.topic_id], p)
            for t in assignment.topic_partitions
            if t.topic_id in names
            for p in t.partitions
        }
        current = self._subscriptions.assigned()
        revoked = current - target
        added = target - current
        if revoked:
            if self.config.enable_auto_commit:
                positions = {
                    tp: o for tp, o in self._subscriptions.positions().items() if tp in revoked
                }
                try:
                    await self.commit(positions)
                except KafkaError as exc:
                    log.info("commit of revoked partitions failed: %s", exc)
            await self._subscriptions.partitions_revoked(revoked)
            self._subscriptions.set_assignment(sorted(current - revoked))
            # Acknowledge at once: the new owner waits for it.
            self._wakeup.set()
        if added:
            self._subscriptions.set_assignment(sorted((current - revoked) | added))
            await self._subscriptions.partitions_assigned(sorted(added))
        log.info(
            "group %s epoch %d: member %s owns %s",
            self.group_id,
            self.member_epoch,
            self.member_id,
            sorted(self._subscriptions.assigned()),
        )
        self._joined.set()

    async def _lose_all(self) -> None:
        lost = self._subscriptions.assigned()
        if lost:
            await self._subscriptions.partitions_revoked(lost)
            self._subscriptions.set_assignment([])
        self._joined.clear()

    async def _leave(self) -> None:
        if self.member_epoch <= 0:
            self.member_epoch = 0
            return
        owned = self._subscriptions.assigned()
        if owned:
            await self._subscriptions.partitions_revoked(owned)
            self._subscriptions.set_assignment([])
        epoch = -2 if self.config.group_instance_id is not None else -1
        req = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        body = req(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.config.group_instance_id,
        )
        self.member_epoch = 0
        self._joined.clear()
        try:
            node_id = await self._ensure_coordinator()
            response = await self._client.request(
                node_id, ApiKey.CONSUMER_GROUP_HEARTBEAT, body, timeout_s=5.0
            )
            if response.error_code:
                log.info("leaving %s: %s", self.group_id, error_for(response.error_code))
        except KafkaError as exc:
            log.info("leaving %s failed: %s", self.group_id, exc)

    # ------------------------------------------------------------------ offsets

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        managed = bool(self._topics) and self.member_epoch > 0
        await commit_offsets(
            self._client,
            await self._ensure_coordinator(),
            self.group_id,
            offsets,
            generation_id=self.member_epoch if managed else -1,
            member_id=self.member_id if managed else "",
        )

    async def fetch_committed(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        attempt = 0
        while True:
            try:
                return await fetch_committed_offsets(
                    self._client,
                    await self._ensure_coordinator(),
                    self.group_id,
                    list(partitions),
                    require_stable=self.config.isolation_level == "read_committed",
                )
            except KafkaError as exc:
                if not exc.retriable and exc.code not in _COORDINATOR_ERRORS:
                    raise
                self._coordinator = None
                if attempt == 4:
                    raise
                await asyncio.sleep(self.config.retry_backoff_ms / 1000 * 2**attempt)
                attempt += 1
