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

What both protocols share (the background task, auto-commit, committed offsets, close) is
``membership.GroupMembership``, this class's base. Works on the consumer's
``SubscriptionState`` (subscription.py), as group.py does, never on the consumer itself. Imports josefk.protocol and josefk.client modules; never josefk.storage
or josefk.broker.
"""

from __future__ import annotations

import base64
import logging
import uuid

from josefk.client.cluster import KafkaClient
from josefk.client.errors import KafkaError, error_for
from josefk.client.membership import GroupMembership
from josefk.client.subscription import GroupMemberConfig, SubscriptionState
from josefk.client.types import TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.api import request_class
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

log = logging.getLogger("josefk.client.consumer_group")

_FENCED = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})


class ConsumerGroupMember(GroupMembership):
    """One consumer's membership in a KIP-848 group; see the module docstring. All methods
    run on the consumer's loop."""

    def __init__(
        self, client: KafkaClient, config: GroupMemberConfig, subscriptions: SubscriptionState
    ) -> None:
        super().__init__(client, config, subscriptions)
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        self.member_epoch = 0
        # Set when the subscription changed: the next heartbeat sends it.
        self._subscription_is_new = True

    @property
    def generation_id(self) -> int:
        """The member epoch: what OffsetCommit v9 and TxnOffsetCommit carry."""
        return self.member_epoch

    def _subscription_changed(self) -> None:
        self._subscription_is_new = True

    def _commit_identity(self) -> tuple[int, str, str | None]:
        if self.member_epoch > 0:
            return self.member_epoch, self.member_id, None
        return -1, "", None

    def _may_auto_commit(self) -> bool:
        # A subscribed member commits only as a member of the current epoch.
        return not self._topics or self.member_epoch > 0

    # ------------------------------------------------------------------ the loop

    async def _step(self) -> None:
        if self._topics:
            await self._heartbeat()
        await self._maybe_auto_commit()
        await self._wait_interval()

    def _owned(self) -> list[ConsumerGroupHeartbeatRequest.TopicPartitions]:
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
        full = joining or self._subscription_is_new
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
        response = await self._request(ApiKey.CONSUMER_GROUP_HEARTBEAT, body)
        code = response.error_code
        if code in _FENCED:
            log.info("group %s: member %s fenced (%s)", self.group_id, self.member_id, code)
            await self._lose_all()
            self.member_epoch = 0
            self._wakeup.set()
            return
        if code:
            # The loop finds the coordinator again after a coordinator error.
            raise error_for(code, group=self.group_id)
        self._subscription_is_new = False
        self.member_epoch = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self._interval_s = response.heartbeat_interval_ms / 1000
        if response.assignment is not None:
            await self._reconcile(response.assignment)

    async def _reconcile(self, assignment: ConsumerGroupHeartbeatResponse.Assignment) -> None:
        owned = assignment.topic_partitions
        # Declared nullable, but brokers send a list inside a non-null assignment; a null
        # failed here before the type said so, and still does.
        assert owned is not None
        names = self._client.metadata.topic_names_by_id
        if any(t.topic_id not in names for t in owned):
            await self._client.refresh_metadata()
            names = self._client.metadata.topic_names_by_id
        target = {
            TopicPartition(names[t.topic_id], p)
            for t in owned
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

    async def _leave(self, *, closing: bool = False) -> None:
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
            response = await self._request(ApiKey.CONSUMER_GROUP_HEARTBEAT, body, timeout_s=5.0)
            if response.error_code:
                log.info("leaving %s: %s", self.group_id, error_for(response.error_code))
        except KafkaError as exc:
            log.info("leaving %s failed: %s", self.group_id, exc)
