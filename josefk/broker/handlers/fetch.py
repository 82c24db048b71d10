"""Fetch (1): read every requested partition at once, long-poll until ``min_bytes``.

The data of a partition is a slice of a segment file, never bytes: the response encoder leaves
it out and the connection sends it with ``os.sendfile``. A fetch that finds fewer than
``min_bytes`` parks in the fetch purgatory, woken by appends to its partitions, until it has
enough or ``max_wait_ms`` passes; nothing polls.

The reading, the limits (``partition_max_bytes`` per partition, ``max_bytes`` overall, the
first batch of the first partition with data whole, KIP-74) and the long poll belong to the
replica manager; this handler maps names and topic ids to partitions and outcomes to the
response (with, under read_committed, the aborted transactions of what was read). A fetch
from a follower (replica id >= 0, or the replica state of v15+) reads up to
the log end offset and counts as that follower's progress.

With an authorizer a consumer needs READ on each topic, a follower CLUSTER_ACTION on the
cluster; a partition refused is TOPIC_AUTHORIZATION_FAILED (decided once per topic).

Fetch sessions (KIP-227) are declined the way the protocol allows: every response carries
session id 0, meaning "no session was created", so clients keep sending full fetch requests;
a request that names a session gets FETCH_SESSION_ID_NOT_FOUND and starts over with a full one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from josefk.broker.context import RequestContext
from josefk.broker.errors import error_code_for
from josefk.broker.handlers import handles
from josefk.broker.partition import TopicPartition
from josefk.broker.replica_manager import FetchOutcome, FetchPartition
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey, response_class
from josefk.protocol.errors import ErrorCode
from josefk.storage.offsets import AbortedTxn, FetchIsolation

Response = response_class(ApiKey.FETCH)
TopicResponse = Response.FetchableTopicResponse
PartitionData = TopicResponse.PartitionData
AbortedTransaction = PartitionData.AbortedTransaction

_READ_COMMITTED = 1


@dataclass(slots=True)
class _Wanted:
    """One requested partition: its name and id as the request gave them, and either what
    to ask the replica manager or the error that stops it (an unknown topic id)."""

    topic: str
    topic_id: Any
    index: int
    fetch: FetchPartition | None
    error: ErrorCode


@handles(ApiKey.FETCH)
async def handle_fetch(context: RequestContext, request: Any) -> Any:
    version = context.api_version
    if version >= 7 and request.session_id != 0:
        return Response(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)

    isolation = (
        FetchIsolation.TXN_COMMITTED
        if request.isolation_level == _READ_COMMITTED
        else FetchIsolation.HIGH_WATERMARK
    )
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    wanted = _resolve(context, request, replica_id)
    fetches = [w.fetch for w in wanted if w.fetch is not None]
    outcomes = iter(
        await context.broker.replica_manager.fetch(
            fetches,
            replica_id=replica_id,
            max_wait_ms=request.max_wait_ms,
            min_bytes=request.min_bytes if all(w.fetch for w in wanted) else 0,
            max_bytes=request.max_bytes if version >= 3 else 2**31 - 1,
            isolation=isolation,
        )
    )

    metrics = context.broker.metrics
    by_topic: dict[str, list[Any]] = {}
    topic_ids: dict[str, Any] = {}
    for item in wanted:
        data = (
            _partition_data(item.index, next(outcomes))
            if item.fetch is not None
            else _error_entry(item.index, item.error)
        )
        by_topic.setdefault(item.topic, []).append(data)
        topic_ids[item.topic] = item.topic_id
        if metrics is not None:
            if data.error_code:
                # Only topics that exist get a series: names from requests are unbounded.
                if item.topic in context.broker.replica_manager.catalog:
                    metrics.topics.fetch_failed(item.topic)
            elif data.records:
                metrics.topics.fetched(item.topic, nbytes=len(data.records))
    return Response(
        error_code=ErrorCode.NONE,
        session_id=0,
        responses=[
            TopicResponse(topic=topic, topic_id=topic_ids[topic], partitions=partitions)
            for topic, partitions in by_topic.items()
        ],
    )


def _resolve(context: RequestContext, request: Any, replica_id: int) -> list[_Wanted]:
    catalog = context.broker.replica_manager.catalog
    by_id = context.api_version >= 13
    wanted = []
    checked = context.broker.authorizer is not None
    follower_allowed = (
        not checked or replica_id < 0 or context.authorize_cluster(AclOperation.CLUSTER_ACTION)
    )
    for topic in request.topics:
        if by_id:
            info = catalog.by_id(topic.topic_id)
            name = info.name if info is not None else ""
        else:
            info = catalog.get(topic.topic)
            name = topic.topic
        topic_id = info.topic_id if info is not None else topic.topic_id
        denied = checked and (
            not follower_allowed
            or (
                replica_id < 0
                and not context.authorize(AclOperation.READ, ResourceType.TOPIC, name)
            )
        )
        for p in topic.partitions:
            if info is None and by_id:
                wanted.append(
                    _Wanted(name, topic_id, p.partition, None, ErrorCode.UNKNOWN_TOPIC_ID)
                )
                continue
            if denied:
                wanted.append(
                    _Wanted(name, topic_id, p.partition, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                )
                continue
            fetch = FetchPartition(
                TopicPartition(name, p.partition),
                fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                log_start_offset=p.log_start_offset,
            )
            wanted.append(_Wanted(name, topic_id, p.partition, fetch, ErrorCode.NONE))
    return wanted


def _partition_data(index: int, outcome: FetchOutcome) -> Any:
    if outcome.error is not None:
        return _error_entry(
            index,
            error_code_for(outcome.error),
            high_watermark=outcome.high_watermark,
            log_start_offset=outcome.log_start_offset,
        )
    read = outcome.read
    assert read is not None
    size = read.info.size
    return PartitionData(
        partition_index=index,
        error_code=ErrorCode.NONE,
        high_watermark=read.high_watermark,
        last_stable_offset=read.last_stable_offset,
        log_start_offset=read.log_start_offset,
        aborted_transactions=_aborted(read.aborted_transactions),
        preferred_read_replica=-1,
        records=read.info.records if size else b"",
    )


def _error_entry(
    index: int, error: ErrorCode, *, high_watermark: int = -1, log_start_offset: int = -1
) -> Any:
    return PartitionData(
        partition_index=index,
        error_code=error,
        high_watermark=high_watermark,
        last_stable_offset=-1,
        log_start_offset=log_start_offset,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",
    )


def _aborted(aborted: list[AbortedTxn] | None) -> list[Any] | None:
    # Null, not empty, when there is nothing to say: what Kafka sends for read_uncommitted.
    if not aborted:
        return None
    return [
        AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset) for a in aborted
    ]
