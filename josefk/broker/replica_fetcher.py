"""The follower's side of replication: one fetcher per leader broker.

Owns ``ReplicaFetcher``: a task that keeps one connection to a leader and, for every
partition this broker follows there, first finds where its log diverges from the leader's
(OffsetForLeaderEpoch with its latest epoch, KIP-101/KIP-279) and truncates there, then
fetches with its replica id from its log end offset, appends what comes with
``Log.append_as_follower`` (offsets, epochs and CRCs as the leader wrote them) and takes the
leader's high watermark, capped at its own log end offset.

The divergence point: the leader answers (epoch E', end offset O) for our latest epoch E. If
E' == E our log may keep everything below O; if the leader never had E (E' < E), only what we
wrote in epochs up to E' can be shared, so we keep min(O, our own end of E'). A deposed
leader's unacknowledged tail lies past that point and is removed, never served.

An error for a partition (NOT_LEADER_OR_FOLLOWER or a leader epoch the leader does not know
yet, while the metadata reaches both brokers) delays that partition for
``replica.fetch.backoff.ms``; a new role from the metadata re-follows it at once. A lost
connection is retried after the same backoff.

Fetch sessions (KIP-227): the first fetch on a connection is a full one that asks the leader
for a session (epoch 0); after that each fetch is incremental (the session's id, epoch + 1)
and names only the partitions whose fetch offset, log start offset or leader epoch changed
since they were last sent, and forgets those no longer fetched (unfollowed, delayed after an
error, waiting to truncate). A partition whose log's change count is what it was when its
state was last sent is passed over without a look at its offsets, and the exceptions (a
backoff, a truncation to make, a partition that left the session) are kept apart, so a
round without them copies nothing and looks nothing up per partition. The leader answers
only partitions with news, so an idle partition costs each side a comparison per round. A
session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH), any other failed
fetch and a new connection start over with a full fetch; a leader that answers session id 0
(cache full) gets full fetches.

Order (Kafka's PartitionStates.updateAndMoveToEnd): the followed partitions are kept in one
order, and a partition that got records moves to the back of it. A full fetch names the
partitions in that order (a run of one topic's partitions per topic entry, so a topic may
come more than once), and the leader reads them in it until
``replica.fetch.response.max.bytes`` is used up: partitions that always have more than that
waiting cannot keep the others from their turn. Incremental fetches are read in the order of
the leader's session, which rotates the same way (josefk.broker.fetch_session).

Imports josefk.client's connection (the same wire code clients use), josefk.protocol and
josefk.storage through the broker's Partition; must not import the handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any

from josefk.broker.fetch_session import INITIAL_EPOCH, next_epoch
from josefk.broker.partition import Partition, TopicPartition
from josefk.client.connection import BrokerConnection
from josefk.client.errors import KafkaConnectionError, KafkaError
from josefk.client.security import PLAINTEXT, ClientSecurity
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    FetchRequest,
    FetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

logger = logging.getLogger(__name__)

__all__ = ["FetcherSettings", "ReplicaFetcher"]

EpochRequest = OffsetForLeaderEpochRequest
# Fetch v12 names topics (v13+ uses ids) and still carries the replica id as a field.
_FETCH_VERSION = 12
_SESSION_ERRORS = frozenset(
    {
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    }
)
_RETRY_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    broker_id: int
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024
    partition_max_bytes: int = 1024 * 1024
    backoff_ms: int = 1000
    request_timeout_s: float = 30.0
    # The inter-broker listener's security (TLS, SASL): josefk.broker.security.inter_broker.
    security: ClientSecurity = PLAINTEXT


@dataclass(slots=True)
class _Followed:
    partition: Partition
    leader_epoch: int
    # The fetcher's count of follow() calls when this one was made: an answer to a fetch
    # sent before it is not this one's (the partition was followed anew meanwhile).
    generation: int
    truncated: bool = False
    # Loop time before which the partition is not fetched (after an error), as Kafka's
    # fetcher delays a partition for replica.fetch.backoff.ms.
    delayed_until: float = 0.0
    # The log's change count when this partition's state last went into the session's
    # requests: while it holds, so does the state (nothing to send, nothing to compare).
    # -1 while the session does not hold the partition (never sent, or forgotten).
    sent_change_count: int = -1


# What a fetch request said of one partition: (fetch offset, log start offset, leader epoch).
_SentState = tuple[int, int, int]


@dataclass(slots=True)
class _Session:
    """Our side of the fetch session with the leader (session id 0: none yet)."""

    session_id: int = 0
    epoch: int = INITIAL_EPOCH
    # The partitions the leader's session holds, as we last sent them.
    sent: dict[TopicPartition, _SentState] = field(default_factory=dict)


class ReplicaFetcher:
    """Replicates every partition this broker follows on one leader broker."""

    def __init__(
        self,
        leader_id: int,
        address: Callable[[], tuple[str, int] | None],
        settings: FetcherSettings,
        *,
        on_high_watermark: Callable[[TopicPartition], None],
    ) -> None:
        self.leader_id = leader_id
        self._address = address
        self._settings = settings
        self._on_high_watermark = on_high_watermark
        self._partitions: dict[TopicPartition, _Followed] = {}
        # The exceptions, kept apart so that a round with none costs nothing per partition:
        # partitions waiting out a backoff, partitions to truncate before they are fetched,
        # and whether one has left the fetched set since the last fetch (the session must
        # forget it). Most rounds of a follower have none of them.
        self._delayed: set[TopicPartition] = set()
        self._untruncated: set[TopicPartition] = set()
        self._left_session = False
        self._follows = 0
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: BrokerConnection | None = None
        self._session = _Session()

    # -- membership (event loop) ---------------------------------------------------------

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from this leader, truncating first (a new leader or epoch)."""
        tp = partition.tp
        self._follows += 1
        self._partitions[tp] = _Followed(partition, partition.leader_epoch, self._follows)
        self._delayed.discard(tp)
        self._untruncated.add(tp)
        self._left_session = True
        self._changed.set()

    def unfollow(self, tp: TopicPartition) -> None:
        if self._partitions.pop(tp, None) is not None:
            self._delayed.discard(tp)
            self._untruncated.discard(tp)
            self._left_session = True

    @property
    def partitions(self) -> list[TopicPartition]:
        return list(self._partitions)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # -- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff_s = self._settings.backoff_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            active = self._active(now)
            if not active:
                self._changed.clear()
                delays = [f.delayed_until - now for f in self._partitions.values()]
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel
                # that arrives as the event is set, and the fetcher would outlive its stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(delays, default=None)):
                        await self._changed.wait()
                continue
            try:
                connection = await self._connect()
                await self._truncate(connection, active)
                await self._fetch_once(connection, active)
            except (KafkaError, OSError) as exc:
                # A refused authentication is retried too (the user may be created later),
                # but said louder: replication stops until it is fixed.
                retriable = not isinstance(exc, KafkaError) or exc.retriable
                logger.log(
                    logging.INFO if retriable else logging.WARNING,
                    "fetcher for leader %d: %s; retrying",
                    self.leader_id,
                    exc,
                )
                if self._connection is not None:
                    self._connection.close()
                    self._connection = None
                await asyncio.sleep(backoff_s)

    def _active(self, now: float) -> dict[TopicPartition, _Followed]:
        """The followed partitions not waiting out a backoff: all of them, not copied,
        unless some are."""
        if not self._delayed:
            return self._partitions
        for tp in [tp for tp in self._delayed if self._partitions[tp].delayed_until <= now]:
            self._delayed.discard(tp)
        if not self._delayed:
            return self._partitions
        return {tp: f for tp, f in self._partitions.items() if tp not in self._delayed}

    async def _connect(self) -> BrokerConnection:
        if self._connection is not None and not self._connection.closed:
            return self._connection
        address = self._address()
        if address is None:
            raise KafkaConnectionError(f"leader {self.leader_id} is not registered", node_id=-1)
        host, port = address
        self._session = _Session()  # a session does not outlive its connection
        self._connection = await BrokerConnection.open(
            host,
            port,
            node_id=self.leader_id,
            client_id=f"josefk-replica-fetcher-{self._settings.broker_id}",
            timeout_s=self._settings.request_timeout_s,
            security=self._settings.security,
        )
        return self._connection

    async def _truncate(
        self, connection: BrokerConnection, active: dict[TopicPartition, _Followed]
    ) -> None:
        if not self._untruncated:
            return
        pending = {tp: f for tp, f in active.items() if not f.truncated}
        if not pending:
            return
        by_topic: dict[str, list[Any]] = {}
        asked: dict[TopicPartition, int] = {}
        for tp, followed in pending.items():
            latest = followed.partition.log.leader_epoch_cache.latest_epoch
            if latest is None:
                self._mark_truncated(tp, followed)  # an empty history has nothing to diverge
                continue
            asked[tp] = latest
            by_topic.setdefault(tp.topic, []).append(
                EpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=tp.partition,
                    current_leader_epoch=followed.leader_epoch,
                    leader_epoch=latest,
                )
            )
        if not by_topic:
            return
        response: OffsetForLeaderEpochResponse = await connection.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            EpochRequest(
                replica_id=self._settings.broker_id,
                topics=[
                    EpochRequest.OffsetForLeaderTopic(topic=t, partitions=p)
                    for t, p in by_topic.items()
                ],
            ),
            timeout_s=self._settings.request_timeout_s,
        )
        for topic in response.topics:
            for result in topic.partitions:
                tp = TopicPartition(topic.topic, result.partition)
                current = self._partitions.get(tp)
                if current is None or tp not in asked:
                    continue
                followed = current
                if result.error_code != ErrorCode.NONE:
                    self._delay(tp, followed, result.error_code)
                    continue
                self._truncate_to_divergence(
                    followed, asked[tp], result.leader_epoch, result.end_offset
                )
                self._mark_truncated(tp, followed)

    def _truncate_to_divergence(
        self, followed: _Followed, asked_epoch: int, leader_epoch: int, end_offset: int
    ) -> None:
        log = followed.partition.log
        if leader_epoch < 0 or end_offset < 0:
            # The leader knows none of our epochs: keep only what is known committed.
            target = log.high_watermark
        elif leader_epoch == asked_epoch:
            target = min(end_offset, log.log_end_offset)
        else:
            _, own_end = log.end_offset_for_epoch(leader_epoch)
            target = min(end_offset, own_end if own_end >= 0 else log.log_end_offset)
        if target < log.log_end_offset:
            logger.info(
                "%s: truncating from %d to %d to match leader %d",
                followed.partition.tp,
                log.log_end_offset,
                target,
                self.leader_id,
            )
            log.truncate_to(target)

    async def _fetch_once(
        self, connection: BrokerConnection, active: dict[TopicPartition, _Followed]
    ) -> None:
        ready = active
        if self._untruncated:
            ready = {tp: f for tp, f in active.items() if f.truncated}
        if not ready:
            return
        settings = self._settings
        session = self._session
        full = session.session_id == 0
        generation = self._follows
        # What the leader's session will hold once this fetch is answered: in an incremental
        # fetch, what it holds now, less what we no longer fetch, with what changed. Made
        # in place: a fetch that fails in any way ends the session (a new one starts full).
        states: dict[TopicPartition, _SentState] = {} if full else session.sent
        forgotten: dict[str, list[int]] = {}
        if full:
            # A new session holds nothing yet: what is held back now (a backoff, a
            # truncation) must be sent whole when it comes back, whatever an older session
            # was sent. Rare: a session starts with a connection or after an error.
            for followed in self._partitions.values():
                followed.sent_change_count = -1
        elif self._left_session or len(states) != len(ready):
            for tp in states.keys() - ready.keys():
                del states[tp]
                forgotten.setdefault(tp.topic, []).append(tp.partition)
                if (left := self._partitions.get(tp)) is not None:
                    left.sent_change_count = -1
        self._left_session = False
        wanted: list[tuple[str, Any]] = []  # (topic, FetchPartition) in our order
        for tp, followed in ready.items():
            log = followed.partition.log
            change_count = log.change_count
            if followed.sent_change_count == change_count and not full:
                continue  # nothing moved since it was sent: the leader's session has it
            followed.sent_change_count = change_count
            state = (log.log_end_offset, log.log_start_offset, followed.leader_epoch)
            if not full and states.get(tp) == state:
                continue  # the leader's session has it as it is
            states[tp] = state
            wanted.append(
                (
                    tp.topic,
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=tp.partition,
                        current_leader_epoch=followed.leader_epoch,
                        fetch_offset=state[0],
                        last_fetched_epoch=-1,
                        log_start_offset=state[1],
                        partition_max_bytes=settings.partition_max_bytes,
                    ),
                )
            )
        request = FetchRequest(
            replica_id=settings.broker_id,
            max_wait_ms=settings.max_wait_ms,
            min_bytes=settings.min_bytes,
            max_bytes=settings.max_bytes,
            isolation_level=0,
            session_id=session.session_id,
            session_epoch=INITIAL_EPOCH if full else session.epoch,
            # One entry per run of a topic's partitions (groupby joins neighbours only):
            # gathering a topic's partitions together would put one with data ahead of one
            # that has waited longer.
            topics=[
                FetchRequest.FetchTopic(topic=t, partitions=[p for _, p in run])
                for t, run in groupby(wanted, key=itemgetter(0))
            ],
            forgotten_topics_data=[
                FetchRequest.ForgottenTopic(topic=t, partitions=p) for t, p in forgotten.items()
            ],
            rack_id="",
        )
        version = min(connection.version_for(ApiKey.FETCH), _FETCH_VERSION)
        response: FetchResponse = await connection.request(
            ApiKey.FETCH,
            request,
            version=version,
            timeout_s=settings.request_timeout_s + settings.max_wait_ms / 1000,
        )
        if response.error_code != ErrorCode.NONE:
            self._session = _Session()
            if response.error_code in _SESSION_ERRORS:
                logger.info(
                    "fetcher for leader %d: %s; starting a new fetch session",
                    self.leader_id,
                    ErrorCode(response.error_code).name,
                )
                return
            raise KafkaError(
                f"leader {self.leader_id} answered the fetch with "
                f"{ErrorCode(response.error_code).name}"
            )
        if session is self._session:
            if full:
                session.session_id = response.session_id
                session.epoch = next_epoch(INITIAL_EPOCH)
                session.sent = states if response.session_id else {}
            elif session.session_id:
                session.epoch = next_epoch(session.epoch)
                session.sent = states
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                current = self._partitions.get(tp)
                if current is None or current.generation > generation or not current.truncated:
                    continue  # unfollowed or re-followed while the fetch was in flight
                self._handle_partition(tp, current, data)

    def _handle_partition(
        self, tp: TopicPartition, followed: _Followed, data: FetchResponse.PartitionData
    ) -> None:
        log = followed.partition.log
        error = data.error_code
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            if data.log_start_offset > log.log_end_offset:
                # Retention on the leader passed everything we have: start where it starts.
                log.truncate_fully_and_start_at(data.log_start_offset)
            else:
                followed.truncated = False
                self._untruncated.add(tp)
                self._left_session = True
            return
        if error != ErrorCode.NONE:
            self._delay(tp, followed, error)
            return
        records = data.records
        if records is not None and len(records):
            log.append_as_follower(records)
            # To the back of our order: the next full fetch asks for the others first.
            del self._partitions[tp]
            self._partitions[tp] = followed
        old_hw = log.high_watermark
        # The high watermark first, as Kafka's follower does: the log start offset may not
        # pass it, and one answer can carry both a new high watermark and a log start offset
        # beyond the old one (a DeleteRecords right after a produce). Moved the other way
        # round, the start was refused and never retried: the leader's fetch session does
        # not repeat a log start offset it has answered.
        new_hw = log.update_high_watermark(min(data.high_watermark, log.log_end_offset))
        followed.partition.fetcher_lag = max(0, data.high_watermark - log.log_end_offset)
        if data.log_start_offset > log.log_start_offset:
            try:
                log.maybe_increment_log_start_offset(min(data.log_start_offset, new_hw))
            except Exception as exc:  # noqa: BLE001  the fetcher goes on with the other partitions
                # The session will not repeat this log start offset: say so, not silently.
                logger.warning("%s: cannot take the leader's log start offset: %s", tp, exc)
        if new_hw != old_hw:
            self._on_high_watermark(tp)

    def _mark_truncated(self, tp: TopicPartition, followed: _Followed) -> None:
        followed.truncated = True
        self._untruncated.discard(tp)

    def _delay(self, tp: TopicPartition, followed: _Followed, error: int) -> None:
        # Our metadata is behind or ahead of the leader's (or the leader is in trouble): try
        # again after the backoff; a new role from the metadata re-follows at once.
        loop = asyncio.get_running_loop()
        followed.delayed_until = loop.time() + self._settings.backoff_ms / 1000
        self._delayed.add(tp)
        self._left_session = True
        level = logging.INFO if error in _RETRY_ERRORS else logging.WARNING
        logger.log(level, "%s: leader %d answered %s", tp, self.leader_id, ErrorCode(error).name)
