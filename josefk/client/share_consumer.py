"""The asyncio share consumer (KIP-932): a member of a share group, reading with queue semantics.

Owns ``AIOShareConsumer`` and ``ShareConsumerRecord``.

Membership: ``subscribe`` starts a heartbeat task (ShareGroupHeartbeat to the group
coordinator at the interval it names; epoch 0 joins with the topic names, -1 leaves on
close; FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID rejoin). The assignment comes by topic id and
is named through metadata.

Fetching: ``poll`` sends one ShareFetch per leader of the assigned partitions, in that
leader's share session (epoch 0 opens it, then 1, 2, ...), carrying the acknowledgements
pending for the leader's partitions; the records returned are only those in the acquired
ranges of the answer, each with its delivery count. Acknowledgement: in ``implicit`` mode
every record a poll returned is accepted by the next poll (or ``commit`` / ``close``); in
``explicit`` mode the application calls ``acknowledge(record, type)`` (ACCEPT, RELEASE,
REJECT) for each, and the types travel on the next poll or ``commit`` (a ShareAcknowledge).
``close`` sends what is pending, closes the share sessions (epoch -1, which releases what
the member still holds) and leaves the group.

Not done: a sync wrapper, rack awareness, acknowledgement callbacks, renewing locks.

Imports josefk.protocol and josefk.client modules; never josefk.storage or josefk.broker.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final, NamedTuple

from josefk.client.cluster import KafkaClient, find_coordinator
from josefk.client.decode import decode_records
from josefk.client.errors import KafkaError, error_for
from josefk.client.types import ConsumerRecord, TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupHeartbeatRequest,
)

logger = logging.getLogger(__name__)

_REJOIN: Final = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})


class AcknowledgeType(IntEnum):
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class ShareConsumerRecord(NamedTuple):
    """A record delivered to this member, and how many times it has been delivered."""

    record: ConsumerRecord
    delivery_count: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.record.topic, self.record.partition)

    @property
    def offset(self) -> int:
        return self.record.offset


@dataclass(slots=True)
class _Session:
    epoch: int = 0


@dataclass(slots=True)
class _Membership:
    member_id: str = field(
        default_factory=lambda: base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    )
    epoch: int = 0
    interval_ms: int = 5000
    # Assigned partitions by topic id, and their names once known.
    assignment: dict[uuid.UUID, list[int]] = field(default_factory=dict)


class AIOShareConsumer:
    """A share group member. One task at a time calls poll / commit / close."""

    def __init__(
        self,
        *,
        bootstrap_servers: str | Sequence[str],
        group_id: str,
        acknowledgement_mode: str = "implicit",
        max_poll_records: int = 500,
        max_wait_ms: int = 500,
        client_id: str = "josefk-share-consumer",
    ) -> None:
        if acknowledgement_mode not in ("implicit", "explicit"):
            raise ValueError("acknowledgement_mode must be implicit or explicit")
        self._client = KafkaClient(bootstrap_servers=bootstrap_servers, client_id=client_id)
        self.group_id = group_id
        self.explicit = acknowledgement_mode == "explicit"
        self.max_poll_records = max_poll_records
        self.max_wait_ms = max_wait_ms
        self._topics: list[str] = []
        self._member = _Membership()
        self._heartbeat: asyncio.Task[None] | None = None
        self._sessions: dict[int, _Session] = {}
        # Acknowledgements not yet sent: (topic, partition) -> offset -> type.
        self._pending: dict[TopicPartition, dict[int, int]] = {}
        # Implicit mode: what the last poll returned, accepted by the next one.
        self._delivered: list[ShareConsumerRecord] = []
        self._assigned = asyncio.Event()

    async def start(self) -> None:
        await self._client.start()

    async def __aenter__(self) -> AIOShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # -- membership ---------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        self._topics = sorted(set(topics))
        self._client.add_topics(self._topics)
        if self._heartbeat is None:
            self._heartbeat = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                await self._beat(leaving=False)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the next beat tries again
                logger.debug("share heartbeat failed: %s", exc)
            await asyncio.sleep(self._member.interval_ms / 1000)

    async def _beat(self, *, leaving: bool) -> None:
        member = self._member
        coordinator = await find_coordinator(self._client, self.group_id)
        request = ShareGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=member.member_id,
            member_epoch=-1 if leaving else member.epoch,
            subscribed_topic_names=self._topics if member.epoch == 0 else None,
        )
        response = await self._client.request(coordinator, ApiKey.SHARE_GROUP_HEARTBEAT, request)
        if leaving:
            return
        code = ErrorCode(response.error_code)
        if code in _REJOIN:
            member.epoch = 0
            member.assignment = {}
            return
        if code:
            raise error_for(code, response.error_message)
        member.epoch = response.member_epoch
        member.interval_ms = max(response.heartbeat_interval_ms, 100)
        if response.assignment is not None:
            member.assignment = {
                t.topic_id: sorted(t.partitions) for t in response.assignment.topic_partitions
            }
            self._assigned.set()

    def assignment(self) -> list[TopicPartition]:
        names = self._topic_names()
        return sorted(
            TopicPartition(names[topic_id], p)
            for topic_id, parts in self._member.assignment.items()
            if topic_id in names
            for p in parts
        )

    def _topic_names(self) -> dict[uuid.UUID, str]:
        metadata = self._client.metadata
        return {t.topic_id: name for name, t in metadata.topics.items() if t.topic_id is not None}

    # -- acknowledgement -------------------------------------------------------------------

    def acknowledge(
        self, record: ShareConsumerRecord, ack_type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """Explicit mode: how the broker should treat ``record`` (sent on the next poll or
        commit)."""
        if not self.explicit:
            raise KafkaError("acknowledge() needs acknowledgement_mode='explicit'")
        self._pending.setdefault(record.topic_partition, {})[record.offset] = int(ack_type)

    def _accept_delivered(self) -> None:
        if not self.explicit:
            for r in self._delivered:
                self._pending.setdefault(r.topic_partition, {})[r.offset] = int(
                    AcknowledgeType.ACCEPT
                )
        self._delivered = []

    def _batches_for(self, tp: TopicPartition) -> list[Any]:
        """The pending acknowledgements of ``tp`` as batches (runs of consecutive offsets of
        one type), taken out of the pending set."""
        acks = self._pending.pop(tp, {})
        batches: list[Any] = []
        for offset in sorted(acks):
            kind = acks[offset]
            last = batches[-1] if batches else None
            if last is not None and last[1] + 1 == offset and last[2] == kind:
                last[1] = offset
            else:
                batches.append([offset, offset, kind])
        return batches

    # -- fetching -----------------------------------------------------------------------------

    async def _leaders(self) -> dict[int, list[tuple[uuid.UUID, TopicPartition]]]:
        metadata = await self._client.ensure_metadata()
        if set(self._member.assignment) - set(self._topic_names()):
            metadata = await self._client.refresh_metadata(self._topics)
        names = self._topic_names()
        by_leader: dict[int, list[tuple[uuid.UUID, TopicPartition]]] = {}
        for topic_id, parts in self._member.assignment.items():
            name = names.get(topic_id)
            if name is None:
                continue
            for p in parts:
                leader = metadata.leader_for(name, p)
                if leader is not None:
                    by_leader.setdefault(leader, []).append((topic_id, TopicPartition(name, p)))
        # Acknowledgements for partitions no longer assigned still go to their leader.
        for tp in list(self._pending):
            if all(tp != known for parts in by_leader.values() for _, known in parts):
                leader = metadata.leader_for(tp.topic, tp.partition)
                topic = metadata.topics.get(tp.topic)
                if leader is not None and topic is not None and topic.topic_id is not None:
                    by_leader.setdefault(leader, []).append((topic.topic_id, tp))
        return by_leader

    async def poll(self, timeout_ms: int = 1000) -> list[ShareConsumerRecord]:
        """Records acquired for this member (implicit mode: accepting the last poll's)."""
        self._accept_delivered()
        if not self._member.assignment:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._assigned.wait(), timeout_ms / 1000)
        by_leader = await self._leaders()
        if not by_leader:
            return []
        wait_ms = min(self.max_wait_ms, timeout_ms)
        results = await asyncio.gather(
            *(self._share_fetch(node, parts, wait_ms) for node, parts in by_leader.items())
        )
        records = [r for chunk in results for r in chunk]
        self._delivered = list(records)
        return records

    async def _share_fetch(
        self, node: int, parts: list[tuple[uuid.UUID, TopicPartition]], wait_ms: int
    ) -> list[ShareConsumerRecord]:
        session = self._sessions.setdefault(node, _Session())
        topics: dict[uuid.UUID, list[ShareFetchRequest.FetchPartition]] = {}
        for topic_id, tp in parts:
            batches = [] if session.epoch == 0 else self._batches_for(tp)
            topics.setdefault(topic_id, []).append(
                ShareFetchRequest.FetchPartition(
                    partition_index=tp.partition,
                    acknowledgement_batches=[
                        ShareFetchRequest.AcknowledgementBatch(
                            first_offset=b[0], last_offset=b[1], acknowledge_types=[b[2]]
                        )
                        for b in batches
                    ],
                )
            )
        request = ShareFetchRequest(
            group_id=self.group_id,
            member_id=self._member.member_id,
            share_session_epoch=session.epoch,
            max_wait_ms=wait_ms,
            min_bytes=1,
            max_bytes=50 * 1024 * 1024,
            max_records=self.max_poll_records,
            batch_size=self.max_poll_records,
            topics=[
                ShareFetchRequest.FetchTopic(topic_id=topic_id, partitions=partitions)
                for topic_id, partitions in topics.items()
            ],
            forgotten_topics_data=[],
        )
        response = await self._client.request(
            node, ApiKey.SHARE_FETCH, request, timeout_s=wait_ms / 1000 + 30
        )
        code = ErrorCode(response.error_code)
        if code in (ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH):
            session.epoch = 0
            return []
        if code:
            raise error_for(code, response.error_message)
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        names = self._topic_names()
        out: list[ShareConsumerRecord] = []
        for topic in response.responses:
            name = names.get(topic.topic_id)
            if name is None:
                continue
            for p in topic.partitions:
                if p.error_code or not p.acquired_records or not p.records:
                    continue
                counts: dict[int, int] = {}
                for a in p.acquired_records:
                    for offset in range(a.first_offset, a.last_offset + 1):
                        counts[offset] = a.delivery_count
                low = min(counts)
                decoded, _ = decode_records(name, p.partition_index, p.records, low)
                out.extend(
                    ShareConsumerRecord(r, counts[r.offset]) for r in decoded if r.offset in counts
                )
        return out

    async def commit(self) -> None:
        """Send the pending acknowledgements now (ShareAcknowledge to each leader)."""
        self._accept_delivered()
        await self._send_acknowledgements(closing=False)

    async def _send_acknowledgements(self, *, closing: bool) -> None:
        by_leader = await self._leaders()
        for node, parts in by_leader.items():
            session = self._sessions.get(node)
            if session is None or session.epoch == 0:
                continue
            topics: dict[uuid.UUID, list[ShareAcknowledgeRequest.AcknowledgePartition]] = {}
            for topic_id, tp in parts:
                batches = self._batches_for(tp)
                if batches:
                    topics.setdefault(topic_id, []).append(
                        ShareAcknowledgeRequest.AcknowledgePartition(
                            partition_index=tp.partition,
                            acknowledgement_batches=[
                                ShareAcknowledgeRequest.AcknowledgementBatch(
                                    first_offset=b[0], last_offset=b[1], acknowledge_types=[b[2]]
                                )
                                for b in batches
                            ],
                        )
                    )
            if not topics and not closing:
                continue
            request = ShareAcknowledgeRequest(
                group_id=self.group_id,
                member_id=self._member.member_id,
                share_session_epoch=-1 if closing else session.epoch,
                topics=[
                    ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=t, partitions=ps)
                    for t, ps in topics.items()
                ],
            )
            response = await self._client.request(node, ApiKey.SHARE_ACKNOWLEDGE, request)
            if response.error_code:
                raise error_for(response.error_code, response.error_message)
            session.epoch = 0 if closing else session.epoch + 1
            for topic in response.responses:
                for p in topic.partitions:
                    if p.error_code:
                        logger.warning(
                            "acknowledgement of partition %d refused: %s",
                            p.partition_index,
                            ErrorCode(p.error_code).name,
                        )

    async def close(self) -> None:
        """Send what is pending, close the share sessions, leave the group."""
        try:
            if self._heartbeat is not None:
                self._heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._heartbeat
                self._accept_delivered()
                with contextlib.suppress(KafkaError):
                    await self._send_acknowledgements(closing=True)
                with contextlib.suppress(KafkaError):
                    await self._beat(leaving=True)
        finally:
            await self._client.close()
