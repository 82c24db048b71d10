"""ShareFetch (78) and ShareAcknowledge (79), v1-v2: share-group members read and acknowledge.

Behavior: the request's share session epoch opens (0), continues (the session's next epoch)
or closes (-1) the member's share session (``josefk.broker.share.manager``); errors of the
session are the response's top-level error (SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH). Acknowledgements are applied first, per partition (their
error in ``acknowledge_error_code``: INVALID_RECORD_STATE for records the member does not
hold). Then, unless the session closes, every partition of the session this broker leads is
read from its share partition's first AVAILABLE offset (else its end offset) and what the
read covers is acquired for the member, up to ``max_records`` and within the in-flight limit;
the response carries the whole batches read (a file slice, sent with sendfile) and the
ranges acquired with their delivery counts, which the client delivers and nothing else.
When nothing could be acquired the fetch waits up to ``max_wait_ms``, woken by an append,
a high watermark move, a release by another member, or the first acquisition lock to end.
A partition answers when it has records, an error or acknowledgements.

The first fetch of a (group, partition) makes its share partition, starting at the high
watermark (``share.auto.offset.reset=latest``, the default) or the log start offset
(``earliest``). ``share.isolation.level=read_committed`` reads up to the last stable offset.
A share partition not made yet is not made while another partition of the fetch already has
records to acquire: the fetch answers with what is ready and the next one makes it (Kafka
initializes share partitions asynchronously and answers with those already initialized, so
a new session's first fetch of two partitions returns one; librdkafka's 0179 relies on it).
A ShareFetch with ``max_bytes`` 0 acquires nothing (Kafka answers it without records).

Version notes: v1 (Kafka 4.1) and v2 (Kafka 4.2); ``min_bytes`` is taken as "at least one
record"; ``batch_size`` is not used (the whole read is acquired at once). v2's
``share_acquire_mode`` (KIP-1206): both modes are served alike, since acquisition never goes
past ``max_records`` (what record-limit mode asks; batch-optimized mode merely allows more);
another value is INVALID_REQUEST. v2's ``is_renew_ack`` (KIP-1222): acknowledge type 4
(renew) is accepted and restarts the acquisition lock of records the member holds, and a
ShareFetch carrying it acquires nothing (it answers its acknowledgements only); without it
type 4 is INVALID_REQUEST, as any unknown type. ShareAcknowledge v2 answers the lock
duration (``group.share.record.lock.duration.ms``) as ShareFetch v1+ does.

Authorization, as Kafka's: READ on the group (GROUP_AUTHORIZATION_FAILED, whole request) and
READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).

Imports josefk.protocol, the share package and the replica manager's fetch types; must not
import the server or network layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar, cast

from josefk.broker.context import RequestContext
from josefk.broker.group.share import SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION_LEVEL
from josefk.broker.handlers import handles
from josefk.broker.handlers.groups import coordinator_of, may_read_group
from josefk.broker.partition import Partition, TopicPartition
from josefk.broker.replica_manager import FetchPartition
from josefk.broker.share.manager import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    SharePartitionManager,
    ShareSession,
    batch_spans,
    not_deliverable,
    trim_to,
)
from josefk.broker.share.partition import AcknowledgementBatch, AcquiredRange
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from josefk.storage.offsets import FetchIsolation

logger = logging.getLogger(__name__)

# KIP-1206's share acquire modes: 0 batch-optimized, 1 record-limit.
_ACQUIRE_MODES: Final = frozenset({0, 1})

# A share partition's first load waits at least this long, even for a fetch that would not.
_MIN_LOAD_WAIT_S: Final = 1.0

FETCH: Final = ShareFetchResponse
ACKNOWLEDGE: Final = ShareAcknowledgeResponse

# Either response, for what both answer alike (a session's error).
_Response = TypeVar("_Response", ShareFetchResponse, ShareAcknowledgeResponse)
# The acknowledgements of either request: ShareFetch's topics carry them as ShareAcknowledge's do.
_AckTopics = (
    Sequence[ShareFetchRequest.FetchTopic] | Sequence[ShareAcknowledgeRequest.AcknowledgeTopic]
)
_AckPartition = ShareFetchRequest.FetchPartition | ShareAcknowledgeRequest.AcknowledgePartition


@dataclass(slots=True)
class _Answer:
    """One partition's part of the response, built up by acknowledgement and fetch."""

    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.NONE
    ack_error: ErrorCode | None = None
    # What the read returned (a file slice sent with sendfile, or bytes), cut to the batches
    # acquired; None with nothing acquired.
    records: object = None
    acquired: list[AcquiredRange] = field(default_factory=list)
    leader_epoch: int = -1


def _manager(context: RequestContext) -> SharePartitionManager | None:
    manager = context.broker.share_partitions
    return manager if isinstance(manager, SharePartitionManager) else None


def _batches(partition: _AckPartition) -> list[AcknowledgementBatch]:
    return [
        AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
        for b in partition.acknowledgement_batches
    ]


class _Topics:
    """Topic ids to names and READ decisions, decided once per topic."""

    def __init__(self, context: RequestContext) -> None:
        self._context = context
        self._catalog = context.broker.replica_manager.catalog
        self._allowed: dict[str, bool] = {}

    def name(self, topic_id: uuid.UUID) -> str | None:
        info = self._catalog.by_id(topic_id)
        return None if info is None else info.name

    def topic_id(self, name: str) -> uuid.UUID | None:
        info = self._catalog.get(name)
        return None if info is None else info.topic_id

    def readable(self, name: str) -> bool:
        if name not in self._allowed:
            self._allowed[name] = self._context.authorize(
                AclOperation.READ, ResourceType.TOPIC, name
            )
        return self._allowed[name]


async def _acknowledge(
    manager: SharePartitionManager,
    group_id: str,
    member_id: str,
    topics: _Topics,
    request_topics: _AckTopics,
    answers: dict[TopicPartition, _Answer],
    *,
    renew: bool = False,
) -> None:
    changed: list[TopicPartition] = []
    counted: dict[TopicPartition, dict[int, int]] = {}
    for topic in request_topics:
        name = topics.name(topic.topic_id)
        for p in topic.partitions:
            if not p.acknowledgement_batches:
                continue
            if name is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
                tp = TopicPartition(f"<{topic.topic_id}>", p.partition_index)
            else:
                tp = TopicPartition(name, p.partition_index)
                sp = manager.existing(group_id, tp)
                if not topics.readable(name):
                    error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif sp is None:
                    error = ErrorCode.INVALID_RECORD_STATE
                else:
                    batches = _batches(p)
                    error = sp.acknowledge(member_id, batches, renew=renew, now_ms=manager.now_ms())
                    changed.append(tp)
                    counted[tp] = _record_counts(batches)
            answer = answers.setdefault(tp, _Answer(topic.topic_id, p.partition_index))
            answer.ack_error = error
    if changed:
        manager.notify()
        # Durable before answered: the share coordinator holds the state, replicated.
        written = await asyncio.gather(*(manager.persist(group_id, tp) for tp in changed))
        for tp, error in zip(changed, written, strict=True):
            if error and not answers[tp].ack_error:
                answers[tp].ack_error = error
    if manager.probe is not None:
        for tp, answer in answers.items():
            if answer.ack_error is not None:
                manager.probe.acknowledged(
                    tp.topic,
                    failed=bool(answer.ack_error),
                    records={} if answer.ack_error else counted.get(tp, {}),
                )


def _record_counts(batches: list[AcknowledgementBatch]) -> dict[int, int]:
    """Records acknowledged by type (gaps left out) in one partition's batches."""
    counts: dict[int, int] = {}
    for b in batches:
        if len(b.acknowledge_types) == 1:
            kind = b.acknowledge_types[0]
            counts[kind] = counts.get(kind, 0) + b.last_offset - b.first_offset + 1
        else:
            for kind in b.acknowledge_types:
                counts[kind] = counts.get(kind, 0) + 1
    return counts


def _session_error(error: ErrorCode, response: type[_Response]) -> _Response:
    return response(error_code=error, error_message=error.message)


@handles(ApiKey.SHARE_FETCH)
async def handle_share_fetch(
    context: RequestContext, request: ShareFetchRequest
) -> ShareFetchResponse:
    manager = _manager(context)
    group_id, member_id = request.group_id, request.member_id
    if not group_id:
        return _session_error(ErrorCode.INVALID_GROUP_ID, FETCH)
    if not member_id:
        return _session_error(ErrorCode.INVALID_REQUEST, FETCH)
    if not may_read_group(context, group_id):
        return _session_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, FETCH)
    if manager is None:
        return _session_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, FETCH)
    if getattr(request, "share_acquire_mode", 0) not in _ACQUIRE_MODES:
        return _session_error(ErrorCode.INVALID_REQUEST, FETCH)
    topics = _Topics(context)
    epoch = request.share_session_epoch
    requested = [
        TopicPartition(name, p.partition_index)
        for t in request.topics
        if (name := topics.name(t.topic_id)) is not None
        for p in t.partitions
    ]
    answers: dict[TopicPartition, _Answer] = {}
    for t in request.topics:
        if topics.name(t.topic_id) is None:
            for p in t.partitions:
                tp = TopicPartition(f"<{t.topic_id}>", p.partition_index)
                answers[tp] = _Answer(t.topic_id, p.partition_index, ErrorCode.UNKNOWN_TOPIC_ID)
    session: ShareSession | None
    if epoch == INITIAL_EPOCH:
        if any(p.acknowledgement_batches for t in request.topics for p in t.partitions):
            return _session_error(ErrorCode.INVALID_REQUEST, FETCH)
        error, session = manager.open_session(group_id, member_id, requested)
    else:
        error, session = manager.session_for(group_id, member_id, epoch)
    if error or session is None:
        return _session_error(error or ErrorCode.SHARE_SESSION_NOT_FOUND, FETCH)
    renew = bool(getattr(request, "is_renew_ack", False))
    await _acknowledge(manager, group_id, member_id, topics, request.topics, answers, renew=renew)
    if epoch == FINAL_EPOCH:
        manager.close_session(group_id, member_id)
        return _fetch_response(context, answers, manager, group_id)
    for tp in requested:
        session.partitions.setdefault(tp, None)
    for t in request.topics:
        if (name := topics.name(t.topic_id)) is not None:
            session.topic_ids[name] = t.topic_id
    for forgotten in request.forgotten_topics_data:
        name = topics.name(forgotten.topic_id)
        if name is not None:
            for index in forgotten.partitions:
                manager.forget(session, TopicPartition(name, index))
    if not renew:
        # KIP-1222: a request renewing locks only acknowledges; it acquires nothing more.
        await _fetch(context, manager, session, topics, request, answers)
    return _fetch_response(context, answers, manager, group_id)


async def _fetch(
    context: RequestContext,
    manager: SharePartitionManager,
    session: ShareSession,
    topics: _Topics,
    request: ShareFetchRequest,
    answers: dict[TopicPartition, _Answer],
) -> None:
    replicas = context.broker.replica_manager
    coordinator = coordinator_of(context)
    group_id, member_id = session.group_id, session.member_id
    config = coordinator.share.group_config if coordinator is not None else None
    reset = config(group_id, SHARE_AUTO_OFFSET_RESET) if config else "latest"
    committed = config is not None and config(group_id, SHARE_ISOLATION_LEVEL) == "read_committed"
    isolation = FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request.max_wait_ms, 0) / 1000
    budget = request.max_records if request.max_records > 0 else 500
    # Until a pass acquires nothing, partitions without a share partition yet wait while
    # another has records (see the module docstring).
    defer_loads = True
    while True:
        wanted: list[tuple[TopicPartition, Partition, uuid.UUID]] = []
        for tp in list(session.partitions):
            topic_id = topics.topic_id(tp.topic) or session.topic_ids.get(tp.topic)
            if topic_id is None:
                # Neither the catalog nor the session knows an id to answer under.
                del session.partitions[tp]
                continue
            if not topics.readable(tp.topic):
                answers[tp] = _Answer(topic_id, tp.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            partition = replicas.get_partition(tp.topic, tp.partition)
            if partition is None and TopicPartition(f"<{topic_id}>", tp.partition) in answers:
                continue  # named in this request by an id now unknown: answered already
            if partition is None or not partition.is_leader:
                error = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if partition is None
                    else ErrorCode.NOT_LEADER_OR_FOLLOWER
                )
                answers[tp] = _Answer(topic_id, tp.partition, error)
                continue
            log = partition.log
            visible = log.last_stable_offset if committed else log.high_watermark
            start = log.log_start_offset if reset == "earliest" else log.high_watermark
            if manager.existing(group_id, tp) is None:
                if defer_loads and wanted:
                    continue
                # Bounded by the fetch's wait: the persister retries while a coordinator
                # moves, and the member asks again on its next fetch.
                try:
                    error = await asyncio.wait_for(
                        manager.load(
                            group_id,
                            tp,
                            topic_id,
                            leader_epoch=partition.leader_epoch,
                            start=start,
                        ),
                        max(deadline - loop.time(), _MIN_LOAD_WAIT_S),
                    )
                except TimeoutError:
                    error = ErrorCode.COORDINATOR_NOT_AVAILABLE
                if error:
                    # The share coordinator cannot answer yet (loading, moving, fenced):
                    # nothing is acquired here until it does.
                    logger.info("share partition %s of %s not loaded: %s", tp, group_id, error.name)
                    continue
            sp = manager.share_partition(group_id, tp, start)
            sp.reset_start(log.log_start_offset)
            sp.expire_locks(manager.now_ms())
            if sp.acquirable(visible):
                wanted.append((tp, partition, topic_id))
        acquired_any = False
        if wanted and request.max_bytes > 0:
            fetches = [
                FetchPartition(
                    tp,
                    fetch_offset=manager.partitions[(group_id, tp)].next_fetch_offset(),
                    max_bytes=request.max_bytes,
                )
                for tp, _, _ in wanted
            ]
            outcomes = await replicas.fetch(
                fetches,
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=request.max_bytes,
                isolation=isolation,
            )
            for (tp, partition, topic_id), fetch, outcome in zip(
                wanted, fetches, outcomes, strict=True
            ):
                found = manager.partitions.get((group_id, tp))
                read = outcome.read
                if found is None or budget <= 0:
                    continue
                if outcome.error is not None or read is None or not read.info.size:
                    continue
                # The acquisition takes AVAILABLE ranges below the end offset, then new
                # records: no more than ``budget`` past the end is ever acquired.
                spans = batch_spans(
                    read.info.records, max(found.end_offset, fetch.fetch_offset) + budget
                )
                if not spans:
                    continue
                acquired = found.acquire(
                    member_id,
                    fetch.fetch_offset,
                    spans[-1].last_offset,
                    max_records=budget,
                    now_ms=manager.now_ms(),
                )
                aborted = (
                    [
                        (t.producer_id, t.first_offset, t.last_offset)
                        for t in read.aborted_transactions
                    ]
                    if committed and read.aborted_transactions is not None
                    else None
                )
                skipped = not_deliverable(spans, aborted)
                if skipped and acquired:
                    acquired = found.withhold(member_id, acquired, skipped)
                    manager.persist_later(group_id, tp)
                if not acquired:
                    continue
                acquired_any = True
                budget -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
                answer = answers.setdefault(
                    tp,
                    _Answer(
                        session.topic_ids.get(tp.topic) or topics.topic_id(tp.topic) or topic_id,
                        tp.partition,
                    ),
                )
                answer.records = trim_to(
                    read.info.records, spans, max(a.last_offset for a in acquired)
                )
                answer.acquired = acquired
                answer.leader_epoch = partition.leader_epoch
        remaining = deadline - loop.time()
        if acquired_any or remaining <= 0 or not session.partitions:
            return
        defer_loads = False
        lock = manager.next_lock_deadline_ms((group_id, tp) for tp in session.partitions)
        if lock is not None:
            remaining = min(remaining, max(lock - manager.now_ms(), 0) / 1000 + 0.001)
        keys = [k for tp in session.partitions for k in replicas.visibility_keys(tp)]
        # Then one more look: past the deadline it is the last.
        await _wait_any(
            replicas.fetch_purgatory.wait(keys, remaining), manager.wait_changed(remaining)
        )


async def _wait_any(*waits: Awaitable[object]) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def _fetch_response(
    context: RequestContext,
    answers: dict[TopicPartition, _Answer],
    manager: SharePartitionManager,
    group_id: str,
) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, list[ShareFetchResponse.PartitionData]] = {}
    if manager.probe is not None:
        for tp, answer in answers.items():
            manager.probe.share_fetch(tp.topic, failed=bool(answer.error))
    for answer in answers.values():
        by_topic.setdefault(answer.topic_id, []).append(
            FETCH.PartitionData(
                partition_index=answer.partition,
                error_code=answer.error,
                acknowledge_error_code=answer.ack_error or ErrorCode.NONE,
                # This broker for what it answers; unknown (-1) with an error, so that the
                # client looks the leader up in metadata rather than coming back here.
                current_leader=FETCH.LeaderIdAndEpoch(
                    leader_id=-1 if answer.error else context.broker.broker_id,
                    leader_epoch=answer.leader_epoch,
                ),
                records=cast("bytes | None", answer.records) if answer.acquired else b"",
                acquired_records=[
                    FETCH.AcquiredRecords(
                        first_offset=a.first_offset,
                        last_offset=a.last_offset,
                        delivery_count=a.delivery_count,
                    )
                    for a in answer.acquired
                ],
            )
        )
    return FETCH(
        error_code=ErrorCode.NONE,
        acquisition_lock_timeout_ms=manager.lock_duration_ms(group_id),
        responses=[
            FETCH.ShareFetchableTopicResponse(topic_id=topic_id, partitions=partitions)
            for topic_id, partitions in by_topic.items()
        ],
        node_endpoints=[],
    )


@handles(ApiKey.SHARE_ACKNOWLEDGE)
async def handle_share_acknowledge(
    context: RequestContext, request: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    manager = _manager(context)
    group_id, member_id = request.group_id, request.member_id
    if not group_id:
        return _session_error(ErrorCode.INVALID_GROUP_ID, ACKNOWLEDGE)
    if not member_id:
        return _session_error(ErrorCode.INVALID_REQUEST, ACKNOWLEDGE)
    if not may_read_group(context, group_id):
        return _session_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, ACKNOWLEDGE)
    if manager is None:
        return _session_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, ACKNOWLEDGE)
    epoch = request.share_session_epoch
    if epoch == INITIAL_EPOCH:
        # A ShareAcknowledge cannot open a session.
        return _session_error(ErrorCode.INVALID_SHARE_SESSION_EPOCH, ACKNOWLEDGE)
    error, session = manager.session_for(group_id, member_id, epoch)
    if error or session is None:
        return _session_error(error or ErrorCode.SHARE_SESSION_NOT_FOUND, ACKNOWLEDGE)
    topics = _Topics(context)
    answers: dict[TopicPartition, _Answer] = {}
    renew = bool(getattr(request, "is_renew_ack", False))
    await _acknowledge(manager, group_id, member_id, topics, request.topics, answers, renew=renew)
    if epoch == FINAL_EPOCH:
        manager.close_session(group_id, member_id)
    by_topic: dict[uuid.UUID, list[ShareAcknowledgeResponse.PartitionData]] = {}
    for answer in answers.values():
        by_topic.setdefault(answer.topic_id, []).append(
            ACKNOWLEDGE.PartitionData(
                partition_index=answer.partition,
                error_code=answer.ack_error or ErrorCode.NONE,
                current_leader=ACKNOWLEDGE.LeaderIdAndEpoch(
                    leader_id=context.broker.broker_id, leader_epoch=-1
                ),
            )
        )
    return ACKNOWLEDGE(
        error_code=ErrorCode.NONE,
        acquisition_lock_timeout_ms=manager.lock_duration_ms(group_id),
        responses=[
            ACKNOWLEDGE.ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=partitions)
            for topic_id, partitions in by_topic.items()
        ],
        node_endpoints=[],
    )
