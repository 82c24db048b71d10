"""Fetch (1): read every requested partition at once, long-poll until ``min_bytes``.

The data of a partition is a slice of a segment file, never bytes: the response encoder leaves
it out and the connection sends it with ``os.sendfile``. A fetch that finds fewer than
``min_bytes`` parks in the fetch purgatory, woken by appends to its partitions, until it has
enough or ``max_wait_ms`` passes; nothing polls.

Limits as Kafka sets them: ``partition_max_bytes`` per partition and ``max_bytes`` overall,
except that the first batch of the first partition with data is returned whole even when
larger (KIP-74), so a consumer always makes progress.

Fetch sessions (KIP-227) are declined the way the protocol allows: every response carries
session id 0, meaning "no session was created", so clients keep sending full fetch requests;
a request that names a session gets FETCH_SESSION_ID_NOT_FOUND and starts over with a full one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from josefk.broker.context import RequestContext
from josefk.broker.handlers import handles
from josefk.broker.partition import Partition, TopicPartition
from josefk.protocol.api import ApiKey, response_class
from josefk.protocol.errors import ErrorCode
from josefk.storage.errors import KafkaStorageError, OffsetOutOfRangeError, StorageError
from josefk.storage.offsets import FetchIsolation

Response = response_class(ApiKey.FETCH)
TopicResponse = Response.FetchableTopicResponse
PartitionData = TopicResponse.PartitionData

_READ_COMMITTED = 1


@dataclass(slots=True)
class _Wanted:
    """One requested partition, resolved to our Partition (or the error that stops it)."""

    topic: str
    topic_id: Any
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    partition: Partition | None
    error: ErrorCode


@handles(ApiKey.FETCH)
async def handle_fetch(context: RequestContext, request: Any) -> Any:
    version = context.api_version
    if version >= 7 and request.session_id != 0:
        return Response(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)

    replicas = context.broker.replica_manager
    isolation = (
        FetchIsolation.TXN_COMMITTED
        if request.isolation_level == _READ_COMMITTED
        else FetchIsolation.HIGH_WATERMARK
    )
    wanted = _resolve(context, request)
    max_bytes = request.max_bytes if version >= 3 else 2**31 - 1
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request.max_wait_ms, 0) / 1000
    keys = [TopicPartition(w.topic, w.index) for w in wanted if w.partition is not None]

    while True:
        results, total, failed = _read_all(wanted, isolation, max_bytes)
        remaining = deadline - loop.time()
        if total >= request.min_bytes or failed or remaining <= 0 or not keys:
            break
        if not await replicas.fetch_purgatory.wait(keys, remaining):
            results, _, _ = _read_all(wanted, isolation, max_bytes)
            break

    metrics = context.broker.metrics
    by_topic: dict[str, list[Any]] = {}
    topic_ids: dict[str, Any] = {}
    for item, data in zip(wanted, results, strict=True):
        by_topic.setdefault(item.topic, []).append(data)
        topic_ids[item.topic] = item.topic_id
        if metrics is not None and data.records:
            metrics.topics.fetched(item.topic, nbytes=len(data.records))
    return Response(
        error_code=ErrorCode.NONE,
        session_id=0,
        responses=[
            TopicResponse(topic=topic, topic_id=topic_ids[topic], partitions=partitions)
            for topic, partitions in by_topic.items()
        ],
    )


def _resolve(context: RequestContext, request: Any) -> list[_Wanted]:
    replicas = context.broker.replica_manager
    catalog = replicas.catalog
    by_id = context.api_version >= 13
    wanted = []
    for topic in request.topics:
        if by_id:
            info = catalog.by_id(topic.topic_id)
            name = info.name if info is not None else ""
            unknown = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            info = catalog.get(topic.topic)
            name = topic.topic
            unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        topic_id = info.topic_id if info is not None else topic.topic_id
        for p in topic.partitions:
            partition = replicas.get_partition(name, p.partition) if info is not None else None
            error = ErrorCode.NONE
            if partition is None:
                error = unknown if info is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.current_leader_epoch >= 0 and p.current_leader_epoch != partition.leader_epoch:
                error = (
                    ErrorCode.FENCED_LEADER_EPOCH
                    if p.current_leader_epoch < partition.leader_epoch
                    else ErrorCode.UNKNOWN_LEADER_EPOCH
                )
            wanted.append(
                _Wanted(
                    topic=name,
                    topic_id=topic_id,
                    index=p.partition,
                    fetch_offset=p.fetch_offset,
                    max_bytes=p.partition_max_bytes,
                    current_leader_epoch=p.current_leader_epoch,
                    partition=partition if error == ErrorCode.NONE else None,
                    error=error,
                )
            )
    return wanted


def _read_all(
    wanted: list[_Wanted], isolation: FetchIsolation, max_bytes: int
) -> tuple[list[Any], int, bool]:
    """Read every partition once: (partition entries, bytes found, whether any failed)."""
    remaining = max(max_bytes, 0)
    min_one_message = True
    total = 0
    failed = False
    results = []
    for item in wanted:
        partition = item.partition
        if partition is None:
            results.append(_error_entry(item.index, item.error))
            failed = True
            continue
        log = partition.log
        try:
            read = partition.read(
                item.fetch_offset,
                min(max(item.max_bytes, 0), remaining),
                isolation,
                min_one_message=min_one_message,
            )
        except OffsetOutOfRangeError:
            results.append(
                _error_entry(
                    item.index,
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    high_watermark=log.high_watermark,
                    log_start_offset=log.log_start_offset,
                )
            )
            failed = True
            continue
        except (KafkaStorageError, StorageError):
            results.append(_error_entry(item.index, ErrorCode.KAFKA_STORAGE_ERROR))
            failed = True
            continue
        size = read.info.size
        if size:
            min_one_message = False
            remaining = max(remaining - size, 0)
            total += size
        results.append(
            PartitionData(
                partition_index=item.index,
                error_code=ErrorCode.NONE,
                high_watermark=read.high_watermark,
                last_stable_offset=read.last_stable_offset,
                log_start_offset=read.log_start_offset,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=read.info.records if size else b"",
            )
        )
    return results, total, failed


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
