"""Fetch sessions (KIP-227): the broker's cache of incremental fetch sessions.

Owns ``FetchSessionCache``, ``FetchSession`` and ``CachedPartition``. A session remembers,
per partition, what its fetcher last asked for (fetch offset, log start offset, max bytes,
leader epoch) and what the broker last answered (high watermark, last stable offset, log
start offset). An incremental fetch names only the partitions whose request changed; the
broker fetches every partition of the session and answers only those with something new (an
idle one, ``quiet``, is told idle from a stamp the replica manager gave it: see
josefk.broker.handlers.fetch).

Waiting: a quiet partition has a standing ``QuietWatch`` in the fetch purgatory, made when it
is stamped; whatever the purgatory hears of the partition (an append, a change of role)
lapses the stamp and wakes the session's parked fetch (``parked``), or, with none parked,
leaves ``news`` for the next wait to find. A fetch therefore parks on the partitions it
fetched alone, however many idle ones the session holds. A partition that leaves the
session, and every partition of a session that is closed or evicted, drops its watch.

Order (Kafka's rotation): a session keeps its partitions in one order, the order every fetch
reads them in, and a partition whose answer carried records moves to the back of it. A fetch
stops reading once the response limit (``max_bytes``) is used up, so without the rotation the
first partitions, when they always have more than the limit waiting, would take every answer
and the others would never be read (a follower would let them fall out of the ISR). With it,
a partition with data is read again only after every other one has had its turn. A partition
joins at the back; a changed request keeps its place.

Epochs, as the KIP defines them for a request's (session id, epoch):
  (0, 0)   a full fetch that creates a session (the answer carries its id, 0 if none)
  (0, -1)  a full fetch without a session (what librdkafka and josefk's client send)
  (N, 0)   close session N and create a new one with this full fetch
  (N, -1)  close session N; this fetch is sessionless
  (N, E)   an incremental fetch; E must be the session's next epoch (1, 2, ... wrapping
           to 1 after 2**31-1)

Eviction: the cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions,
kept in least-recently-used order. A follower's session (replica id >= 0) is privileged: when
the cache is full, a new follower session evicts the least recently used consumer session
(or, with none, the least recently used follower session); a new consumer session evicts only
the least recently used consumer session. Simpler than Kafka's rule (which also weighs idle
time and partition counts) and with the same aim: replication never loses its sessions to a
crowd of consumers.

Runs on the event loop; no method awaits. Must not import the handlers or the protocol: the
session stores plain values, the fetch handler maps them to and from messages.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "CachedPartition",
    "FetchSession",
    "FetchSessionCache",
    "next_epoch",
]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``; past the int32 range it wraps to 1 (0 means "new")."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session. The request fields carry the protocol's names so the
    fetch handler reads a cached partition as it reads a requested one."""

    # The topic's key in the session (its name, or its id from fetch v13).
    topic_key: Any
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    # What the last answer that included this partition said; -2 ("never answered") makes
    # the first answer after the partition joins include it.
    high_watermark: int = -2
    last_stable_offset: int = -2
    answered_log_start_offset: int = -2
    # Set when a fetch found this partition with nothing to answer: what the replica
    # manager needs to tell, without looking again, that it still has nothing (the broker's
    # partition, its log's change count then, ...; opaque here). Cleared by a request that
    # names the partition and by an answer that includes it.
    quiet: Any = None
    # The standing watch on the partition while it is quiet (made at its first stamp).
    watch: QuietWatch | None = None

    def update_request(
        self,
        *,
        fetch_offset: int,
        partition_max_bytes: int,
        current_leader_epoch: int,
        log_start_offset: int,
    ) -> None:
        self.quiet = None
        self.fetch_offset = fetch_offset
        self.partition_max_bytes = partition_max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.log_start_offset = log_start_offset

    def known_offsets(self) -> tuple[int, int, int] | None:
        """(high watermark, last stable offset, log start offset) last answered, if any."""
        if self.high_watermark == -2:
            return None
        return (self.high_watermark, self.last_stable_offset, self.answered_log_start_offset)

    def answer_changed(self, high_watermark: int, last_stable_offset: int, log_start: int) -> bool:
        """Whether an answer with these offsets says something new; remembers them if so."""
        if (
            high_watermark == self.high_watermark
            and last_stable_offset == self.last_stable_offset
            and log_start == self.answered_log_start_offset
        ):
            return False
        self.quiet = None
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.answered_log_start_offset = log_start
        return True


class QuietWatch:
    """A session's standing watch on one of its quiet partitions in the fetch purgatory
    (josefk.broker.purgatory's ``watch``). Taken as a future takes a result: notified, it
    lapses the partition's stamp (the next look reads it) and wakes the session's parked
    fetch, or leaves ``news`` when none is parked."""

    __slots__ = ("cached", "cancel", "session")

    def __init__(self, cached: CachedPartition, session: FetchSession) -> None:
        self.cached = cached
        self.session = session
        # Drops the registration (set by whoever registered it).
        self.cancel: Callable[[], None] | None = None

    def done(self) -> bool:
        return False

    def set_result(self, result: None, /) -> None:
        self.cached.quiet = None
        self.session.news = True
        self.session.wake()

    def release(self) -> None:
        if self.cancel is not None:
            self.cancel()
            self.cancel = None


@dataclass(slots=True)
class FetchSession:
    """One session: its partitions keyed by (topic key, partition), where the topic key is
    the name before fetch v13 and the topic id from v13, in the order fetches read them
    (see the module docstring: a partition that answered records goes to the back)."""

    session_id: int
    # The replica id of the fetch that created it (-1 for consumers): a follower's session
    # is privileged in eviction.
    replica_id: int
    uses_topic_ids: bool
    # The epoch the next incremental request must carry.
    epoch: int = 1
    # OrderedDict for an O(1) move_to_end: a fetch rotates only the partitions it answered.
    _partitions: OrderedDict[tuple[Any, int], CachedPartition] = field(
        default_factory=OrderedDict, init=False
    )
    # The fetch of this session parked now, if any (an asyncio future), and whether a
    # quiet partition's watch fired since the session's last look (see QuietWatch).
    parked: Any = field(default=None, init=False)
    news: bool = field(default=False, init=False)
    # Closed or evicted: a fetch of it still running answers what it has and watches nothing.
    released: bool = field(default=False, init=False)

    @property
    def privileged(self) -> bool:
        return self.replica_id >= 0

    def partition_count(self) -> int:
        return len(self._partitions)

    def __iter__(self) -> Iterator[CachedPartition]:
        """The partitions in the order the next fetch reads them."""
        return iter(self._partitions.values())

    def upsert(
        self,
        topic_key: Any,
        partition: int,
        *,
        fetch_offset: int,
        partition_max_bytes: int,
        current_leader_epoch: int,
        log_start_offset: int,
    ) -> None:
        """A partition of a request: a new one joins at the back, a known one keeps its place."""
        cached = self._partitions.get((topic_key, partition))
        if cached is None:
            self._partitions[(topic_key, partition)] = CachedPartition(
                topic_key,
                partition,
                fetch_offset,
                partition_max_bytes,
                current_leader_epoch,
                log_start_offset,
            )
        else:
            cached.update_request(
                fetch_offset=fetch_offset,
                partition_max_bytes=partition_max_bytes,
                current_leader_epoch=current_leader_epoch,
                log_start_offset=log_start_offset,
            )

    def forget(self, topic_key: Any, partition: int) -> None:
        cached = self._partitions.pop((topic_key, partition), None)
        if cached is not None and cached.watch is not None:
            cached.watch.release()

    def release(self) -> None:
        """The session is closed or evicted: its partitions' watches go, and a fetch of it
        parked on them answers now (nothing would wake it for them any more)."""
        self.released = True
        for cached in self._partitions.values():
            if cached.watch is not None:
                cached.watch.release()
        self.wake()

    def wake(self) -> None:
        """End the wait of the fetch parked on this session, if one is."""
        parked = self.parked
        if parked is not None and not parked.done():
            parked.set_result(None)

    def get(self, topic_key: Any, partition: int) -> CachedPartition | None:
        return self._partitions.get((topic_key, partition))

    def move_to_end(self, cached: CachedPartition) -> None:
        """``cached`` answered records: the next fetch reads every other partition first.
        Nothing happens if it has left the session meanwhile (a fetch of the same session
        may have forgotten it while this one waited)."""
        key = (cached.topic_key, cached.partition)
        if self._partitions.get(key) is cached:
            self._partitions.move_to_end(key)


class FetchSessionCache:
    """The broker's sessions, at most ``max_slots``, least recently used first."""

    def __init__(
        self, max_slots: int = 1000, *, random_id: Callable[[], int] | None = None
    ) -> None:
        self.max_slots = max_slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        rng = random.Random()
        # Ids are random so that a session cannot be guessed from another's (Kafka does the
        # same); injectable so tests can force collisions.
        self._random_id = random_id or (lambda: rng.randint(1, _MAX_EPOCH))
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[FetchSession]:
        return iter(self._sessions.values())

    def partitions_cached(self) -> int:
        return sum(s.partition_count() for s in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        """The session, marked as just used; None if unknown (never made, evicted, closed)."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.release()
        return session

    def create(self, *, replica_id: int, uses_topic_ids: bool) -> FetchSession | None:
        """A new empty session, or None when no slot can be had (the fetch then goes on
        without a session and its answer carries session id 0)."""
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots and not self._evict_for(replica_id >= 0):
            return None
        session_id = self._random_id()
        while session_id in self._sessions or session_id <= 0:
            session_id = self._random_id()
        session = FetchSession(session_id, replica_id, uses_topic_ids)
        self._sessions[session_id] = session
        return session

    def _evict_for(self, privileged: bool) -> bool:
        victim = next((s for s in self._sessions.values() if not s.privileged), None)
        if victim is None and privileged:
            victim = next(iter(self._sessions.values()), None)
        if victim is None:
            return False
        del self._sessions[victim.session_id]
        victim.release()
        self.evictions += 1
        return True
