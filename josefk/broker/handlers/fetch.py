"""Fetch (1): read every requested partition at once, long-poll until ``min_bytes``.

The data of a partition is a slice of a segment file, never bytes: the response encoder leaves
it out and the connection sends it with ``os.sendfile``. A fetch that finds fewer than
``min_bytes`` parks in the fetch purgatory, woken by appends to its partitions, until it has
enough or ``max_wait_ms`` passes; nothing polls.

The reading, the limits (``partition_max_bytes`` per partition, ``max_bytes`` overall, the
first batch of the first partition with data whole, KIP-74; ``max_bytes`` is first capped by
the broker's ``fetch.max.bytes``, as Kafka does) and the long poll belong to the
replica manager; this handler maps names and topic ids to partitions and outcomes to the
response (with, under read_committed, the aborted transactions of what was read). A fetch
from a follower (replica id >= 0, or the replica state of v15+) reads up to
the log end offset and counts as that follower's progress.

With an authorizer a consumer needs READ on each topic, a follower CLUSTER_ACTION on the
cluster; a partition refused is TOPIC_AUTHORIZATION_FAILED (decided once per topic). A fetch
before v10 cannot read zstd (KIP-110): a partition whose answer would hold a zstd batch
answers UNSUPPORTED_COMPRESSION_TYPE instead (its batch headers are read for that, in those
versions only).

Fetch sessions (KIP-227, v7+; the cache and its epochs are josefk.broker.fetch_session): a
full fetch with epoch 0 creates a session and its answer carries the id; an incremental fetch
names only the partitions whose request changed (and forgets some), every partition of the
session is fetched (and, for a follower, counted as its fetch, so idle partitions stay in
the ISR), and the answer carries only the partitions with records, an error or a changed high
watermark, last stable offset or log start offset. A quiet partition (nothing past its fetch
offset, offsets as last answered) is left out of the fetch after one look and, while its
log's change count and its partition's state hold, told quiet by its stamp alone
(``QuietPartition``, compared in ``_session_news``); the wait is woken by quiet partitions
too (standing watches), and the session is then looked at again. The session's partitions
are read in the session's order, and one whose answer carried records goes to the back of
it (Kafka's rotation): under a ``max_bytes`` smaller than what the partitions hold, every
partition gets its turn instead of the first ones taking every answer. An unknown id is
FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH (the session is
closed), a session made with names used with topic ids or the reverse
FETCH_SESSION_TOPIC_ID_ERROR. Sessions are keyed by topic name before v13 and by topic id
from v13. Epoch -1 (what most clients send) takes the sessionless path, unchanged; there the
request's order is the reading order (a topic may come more than once, as in a fetcher's
rotated order).
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from typing import Any, Protocol, TypeAlias, cast

from josefk.broker.context import RequestContext
from josefk.broker.errors import error_code_for
from josefk.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSession,
    QuietWatch,
    next_epoch,
)
from josefk.broker.handlers import handles
from josefk.broker.partition import TopicPartition
from josefk.broker.replica_manager import FetchOutcome, FetchPartition
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import FetchRequest, FetchResponse
from josefk.protocol.types import ZERO_UUID
from josefk.records.batch import Compression
from josefk.storage.offsets import AbortedTxn, FetchIsolation

Response = FetchResponse
TopicResponse = Response.FetchableTopicResponse
PartitionData = TopicResponse.PartitionData
AbortedTransaction = PartitionData.AbortedTransaction

_READ_COMMITTED = 1


class _Partition(Protocol):
    """What reading a partition takes from it: a requested partition
    (FetchRequest.FetchPartition) or a session's partition (CachedPartition)."""

    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def partition_max_bytes(self) -> int: ...
    @property
    def current_leader_epoch(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...


# (topic name, topic id, its partitions): the name before v13, the id from v13.
_Topics: TypeAlias = Iterable[tuple[str, uuid.UUID, Iterable[_Partition]]]


@dataclass(slots=True)
class _Wanted:
    """One requested partition: its name and id as the request gave them, and either what
    to ask the replica manager or the error that stops it (an unknown topic id); in a
    session, the session's partition."""

    topic: str
    topic_id: uuid.UUID
    index: int
    fetch: FetchPartition | None
    error: ErrorCode
    cached: CachedPartition | None = None


@handles(ApiKey.FETCH)
async def handle_fetch(context: RequestContext, request: FetchRequest) -> FetchResponse:
    version = context.api_version
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    if version >= 7 and (request.session_id != 0 or request.session_epoch != FINAL_EPOCH):
        return await _fetch_in_session(context, request, replica_id)
    topics = [(t.topic, t.topic_id, t.partitions) for t in request.topics]
    wanted, answers = await _read(context, request, replica_id, topics)
    return _response(wanted, answers, session_id=0)


async def _read(
    context: RequestContext,
    request: FetchRequest,
    replica_id: int,
    topics: _Topics | None,
    *,
    session: FetchSession | None = None,
    incremental: bool = False,
) -> tuple[list[_Wanted], list[FetchResponse.PartitionData]]:
    """Read the partitions of ``topics`` ((name, topic id, requested partitions) each): the
    resolved partitions answered and, in the same order, their PartitionData.

    With a ``session``, ``topics`` is None and the session's partitions are read
    (``_session_topics``; in an incremental fetch only those ``_session_news`` leaves): each
    remembers the offsets answered, one that answers records goes to the back of the
    session, and an incremental fetch answers only partitions with records, an error or
    changed offsets (the others are dropped before their PartitionData is built: most of a
    follower's partitions are idle)."""
    version = context.api_version
    isolation = (
        FetchIsolation.TXN_COMMITTED
        if request.isolation_level == _READ_COMMITTED
        else FetchIsolation.HIGH_WATERMARK
    )
    # Kafka's rule: the broker's fetch.max.bytes caps what the request asks for (v0-v2 ask
    # for no limit), and min_bytes never exceeds the cap.
    max_bytes = min(
        request.max_bytes if version >= 3 else 2**31 - 1, context.broker.config.fetch_max_bytes
    )
    replicas = context.broker.replica_manager
    skip_quiet = incremental and (
        context.broker.authorizer is None
        or (replica_id >= 0 and context.authorize_cluster(AclOperation.CLUSTER_ACTION))
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request.max_wait_ms, 0) / 1000
    # A follower's fetch moves its progress (and may propose its ISR expansion) once per
    # request, not again at each look after a wake-up.
    record = True
    while True:
        quiet = 0
        if skip_quiet:
            assert session is not None
            planned: _Topics
            planned, quiet = _session_news(context, session, replica_id, isolation, record=record)
        elif topics is None:
            assert session is not None
            planned = _session_topics(session, by_id=version >= 13)
        else:
            planned = topics
        wanted = _resolve(context, planned, replica_id, in_session=session is not None)
        if incremental:
            for item in wanted:
                if item.fetch is not None and item.cached is not None:
                    item.fetch.known_offsets = item.cached.known_offsets()
        fetches = [w.fetch for w in wanted if w.fetch is not None]
        min_bytes = min(request.min_bytes, max_bytes) if len(fetches) == len(wanted) else 0
        found = await replicas.fetch(
            fetches,
            replica_id=replica_id,
            # With quiet partitions the wait is here: they must wake it too, and then the
            # session is looked at again.
            max_wait_ms=0 if quiet else math.ceil(max(deadline - loop.time(), 0) * 1000),
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            isolation=isolation,
            record=record,
        )
        record = False
        if not quiet or _enough(found, min_bytes):
            break
        assert session is not None
        remaining = deadline - loop.time()
        if remaining <= 0 or not await _wait_in_session(
            context, session, [f.tp for f in fetches], replica_id, remaining
        ):
            # The wait is over (its time, or the broker stopping): answer what there is.
            found = await replicas.fetch(
                fetches,
                replica_id=replica_id,
                max_wait_ms=0,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                isolation=isolation,
                record=False,
            )
            break
    outcomes = iter(found)

    metrics = context.broker.metrics
    kept = []
    answers = []
    for item in wanted:
        cached = item.cached
        if item.fetch is None:
            data = _error_entry(item.index, item.error)
            if cached is not None:
                cached.answer_changed(-1, -1, -1)
        else:
            outcome = next(outcomes)
            if outcome.unchanged:
                continue
            if cached is not None:
                assert session is not None
                read = outcome.read
                if read is None:
                    cached.answer_changed(outcome.high_watermark, -1, outcome.log_start_offset)
                else:
                    changed = cached.answer_changed(
                        read.high_watermark, read.last_stable_offset, read.log_start_offset
                    )
                    if read.info.size:
                        session.move_to_end(cached)
                    elif incremental and not changed:
                        continue
            data = _partition_data(item.index, outcome)
            if version < _FIRST_ZSTD_VERSION and _holds_zstd(outcome):
                data = _error_entry(item.index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        kept.append(item)
        answers.append(data)
        if metrics is not None:
            if data.error_code:
                # Only topics that exist get a series: names from requests are unbounded.
                if item.topic in context.broker.replica_manager.catalog:
                    metrics.topics.fetch_failed(item.topic)
            elif data.records:
                metrics.topics.fetched(item.topic, nbytes=len(data.records))
    return kept, answers


def _session_news(
    context: RequestContext,
    session: FetchSession,
    replica_id: int,
    isolation: FetchIsolation,
    *,
    record: bool,
) -> tuple[list[tuple[str, uuid.UUID, list[_Partition]]], int]:
    """An incremental session's partitions that may have something to answer, as ``_read``
    takes topics (runs of one topic's partitions, in the session's order), and how many
    others are quiet. One pass over the session: a partition stamped quiet is told quiet
    by its stamp alone (``QuietPartition``), one without a stamp is looked at and, if it
    is quiet, stamped and watched (a standing ``QuietWatch``: what wakes a fetch of it will
    wake the session's wait). Only for fetches whose every partition is authorized (no
    authorizer, or a follower allowed CLUSTER_ACTION), so none is an answer skipped."""
    replicas = context.broker.replica_manager
    catalog = replicas.catalog
    by_id = context.api_version >= 13
    if replica_id >= 0:
        isolation = FetchIsolation.LOG_END
    now_ms = replicas.clock.monotonic_ms()
    hosting = replicas.hosting_changes
    watch_for_news = replicas.watch_for_news
    names: dict[Any, str | None] = {}
    kept: list[tuple[str, uuid.UUID, list[_Partition]]] = []
    run: list[_Partition] = []
    run_key: Any = None
    quiet = 0
    session.news = False  # what the watches said is looked at now
    for cached in session:
        stamp = cached.quiet
        if stamp is not None:
            # Inline, not a method: this runs for every partition of every fetch of every
            # follower, and a call would cost as much as the comparisons.
            if (
                stamp.partition.log.change_count == stamp.change_count
                and stamp.partition.state_version == stamp.state_version
                and stamp.hosting == hosting
                and stamp.isolation is isolation
            ):
                progress = stamp.progress
                if progress is not None:
                    progress.last_caught_up_ms = now_ms
                    progress.last_fetch_ms = now_ms
                quiet += 1
                continue
            cached.quiet = None
        key = cached.topic_key
        known = cached.known_offsets()
        if known is not None:
            if key in names:
                name = names[key]
            elif by_id:
                info = catalog.by_id(key)
                name = names[key] = info.name if info is not None else None
            else:
                name = names[key] = key
            if name is not None:
                stamp = replicas.session_partition_quiet(
                    TopicPartition(name, cached.partition),
                    cached.fetch_offset,
                    cached.current_leader_epoch,
                    cached.log_start_offset,
                    known,
                    replica_id=replica_id,
                    isolation=isolation,
                    record=record,
                )
                if stamp is not None:
                    cached.quiet = stamp
                    watch = cached.watch
                    if watch is None:
                        watch = cached.watch = QuietWatch(cached, session)
                    if not session.released:  # else nothing would ever take it out
                        watch.cancel = watch_for_news(stamp.tp, watch, replica_id=replica_id)
                    quiet += 1
                    continue
        if not run or key != run_key:
            run = []
            run_key = key
            kept.append((key, key if by_id else ZERO_UUID, run))
        run.append(cached)
    return kept, quiet


async def _wait_in_session(
    context: RequestContext,
    session: FetchSession,
    tps: list[TopicPartition],
    replica_id: int,
    timeout_s: float,
) -> bool:
    """Wait for news of ``tps`` (the partitions fetched) or of the session's quiet ones
    (their watches wake ``session.parked``): True when woken, False at the timeout or when
    the broker is stopping or the session was closed or evicted meanwhile (its quiet
    partitions are watched no more). News that came since the session was looked at ends it
    at once."""
    if session.released:
        return False
    if session.news:
        return True
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    session.parked = waiter
    try:
        woken = await context.broker.replica_manager.wait_for_news(
            tps, replica_id=replica_id, timeout_s=timeout_s, waiter=waiter
        )
        return woken and not session.released
    finally:
        if session.parked is waiter:
            session.parked = None


def _enough(outcomes: Iterable[FetchOutcome], min_bytes: int) -> bool:
    """Whether a fetch may answer now: ``min_bytes`` found, or a partition failed."""
    total = 0
    for outcome in outcomes:
        if outcome.error is not None:
            return True
        if outcome.read is not None:
            total += outcome.read.info.size
    return total >= min_bytes


def _response(
    wanted: Iterable[_Wanted], answers: Iterable[FetchResponse.PartitionData], *, session_id: int
) -> FetchResponse:
    # Keyed by name and id: unknown topic ids all resolve to the name "".
    by_topic: dict[tuple[str, uuid.UUID], list[FetchResponse.PartitionData]] = {}
    for item, data in zip(wanted, answers, strict=True):
        by_topic.setdefault((item.topic, item.topic_id), []).append(data)
    return Response(
        error_code=ErrorCode.NONE,
        session_id=session_id,
        responses=[
            TopicResponse(topic=topic, topic_id=topic_id, partitions=partitions)
            for (topic, topic_id), partitions in by_topic.items()
        ],
    )


async def _fetch_in_session(
    context: RequestContext, request: FetchRequest, replica_id: int
) -> FetchResponse:
    """A fetch that names a session or asks for one (KIP-227)."""
    cache = context.broker.fetch_sessions
    session_id, epoch = request.session_id, request.session_epoch
    by_id = context.api_version >= 13
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != 0:
            cache.remove(session_id)
        session = (
            cache.create(replica_id=replica_id, uses_topic_ids=by_id)
            if epoch == INITIAL_EPOCH
            else None
        )
        if session is None:
            topics = [(t.topic, t.topic_id, t.partitions) for t in request.topics]
            wanted, answers = await _read(context, request, replica_id, topics)
            return _response(wanted, answers, session_id=0)
        full = True
    else:
        found = cache.get(session_id)
        error = ErrorCode.NONE
        if found is None:
            error = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        elif found.epoch != epoch:
            error = ErrorCode.INVALID_FETCH_SESSION_EPOCH
        elif found.uses_topic_ids != by_id:
            error = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        if found is None or error != ErrorCode.NONE:
            # The fetcher starts over with a full fetch; the session it had is of no use.
            cache.remove(session_id)
            return Response(error_code=error, session_id=0, responses=[])
        session = found
        session.epoch = next_epoch(epoch)
        full = False

    for topic in request.topics:
        key = topic.topic_id if by_id else topic.topic
        for p in topic.partitions:
            session.upsert(
                key,
                p.partition,
                fetch_offset=p.fetch_offset,
                partition_max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                log_start_offset=p.log_start_offset,
            )
    if not full:
        for forgotten in request.forgotten_topics_data:
            key = forgotten.topic_id if by_id else forgotten.topic
            for index in forgotten.partitions:
                session.forget(key, index)

    wanted, answers = await _read(
        context,
        request,
        replica_id,
        None,
        session=session,
        incremental=not full,
    )
    return _response(wanted, answers, session_id=session.session_id)


def _session_topics(
    session: FetchSession, *, by_id: bool
) -> list[tuple[str, uuid.UUID, list[CachedPartition]]]:
    """Every partition of the session in the session's order, as ``_read`` takes topics: a
    run of partitions of one topic is one entry, and after rotations a topic may have
    several runs (the answer merges them)."""
    return [
        (key, key if by_id else ZERO_UUID, list(run))
        for key, run in groupby(session, key=attrgetter("topic_key"))
    ]


def _resolve(
    context: RequestContext,
    topics: _Topics,
    replica_id: int,
    *,
    in_session: bool = False,
) -> list[_Wanted]:
    """What to read for each requested partition (``in_session``: the partitions are the
    session's CachedPartitions). A topic may come more than once (runs of a rotated session
    or of a request in a fetcher's rotated order): READ is decided once per topic."""
    catalog = context.broker.replica_manager.catalog
    by_id = context.api_version >= 13
    wanted = []
    checked = context.broker.authorizer is not None
    follower_allowed = (
        not checked or replica_id < 0 or context.authorize_cluster(AclOperation.CLUSTER_ACTION)
    )
    denied_by_name: dict[str, bool] = {}
    for topic_name, requested_id, partitions in topics:
        if by_id:
            info = catalog.by_id(requested_id)
            name = info.name if info is not None else ""
        else:
            info = catalog.get(topic_name)
            name = topic_name
        topic_id = info.topic_id if info is not None else requested_id
        denied = False
        if checked:
            if name not in denied_by_name:
                denied_by_name[name] = not follower_allowed or (
                    replica_id < 0
                    and not context.authorize(AclOperation.READ, ResourceType.TOPIC, name)
                )
            denied = denied_by_name[name]
        for p in partitions:
            # In a session ``topics`` come from _session_topics: CachedPartitions.
            cached = cast("CachedPartition", p) if in_session else None
            if info is None and by_id:
                wanted.append(
                    _Wanted(name, topic_id, p.partition, None, ErrorCode.UNKNOWN_TOPIC_ID, cached)
                )
                continue
            if denied:
                wanted.append(
                    _Wanted(
                        name,
                        topic_id,
                        p.partition,
                        None,
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        cached,
                    )
                )
                continue
            fetch = FetchPartition(
                TopicPartition(name, p.partition),
                fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                log_start_offset=p.log_start_offset,
            )
            wanted.append(_Wanted(name, topic_id, p.partition, fetch, ErrorCode.NONE, cached))
    return wanted


def _partition_data(index: int, outcome: FetchOutcome) -> FetchResponse.PartitionData:
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
        # The encoder passes a records value through untouched (encode_response_parts), so
        # the log's file slice goes out with sendfile; the generated type names what
        # decoding gives (bytes or a memoryview).
        records=cast("bytes | None", read.info.records) if size else b"",
    )


# KIP-110: a fetch before v10 cannot carry a zstd batch; the partition answers an error.
_FIRST_ZSTD_VERSION = 10


def _holds_zstd(outcome: FetchOutcome) -> bool:
    """Whether the records ``outcome`` read hold a zstd batch (for fetches before v10, which
    only clients older than Kafka 2.1's send)."""
    records = outcome.read.info.records if outcome.read is not None else None
    return records is not None and records.uses_codec(Compression.ZSTD)


def _error_entry(
    index: int, error: ErrorCode, *, high_watermark: int = -1, log_start_offset: int = -1
) -> FetchResponse.PartitionData:
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


def _aborted(aborted: list[AbortedTxn] | None) -> list[FetchResponse.AbortedTransaction] | None:
    # Null, not empty, when there is nothing to say: what Kafka sends for read_uncommitted.
    if not aborted:
        return None
    return [
        AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset) for a in aborted
    ]
