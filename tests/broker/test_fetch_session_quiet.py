"""A follower's fetch session of idle partitions: the leader leaves a partition with nothing to
answer out of the fetch after one look (``ReplicaManager.session_partition_quiet``) and, at
the next fetches, tells it is still quiet from its stamp alone (``QuietPartition``: its
log's change count, its state's version). Whatever a fetch can see must still reach the
follower at the next fetch: records, a new log start offset, a change of leadership or of
the ISR; a fetch parked on quiet partitions wakes for an append to one of them; and a
quiet partition's fetch still counts as the follower's, or it would fall out of the ISR.
On the follower's side, the fetcher passes over
a partition whose log has not changed since it sent its state, yet sends a moved log start
offset and brings back, whole, a partition it held back for a while.

Real logs and replica managers and the real Fetch handler, through the codec, no socket
(``WireLeader`` of test_fetch_rotation).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from log_helpers import producer_batch
from replica_helpers import create_topic
from test_fetch_rotation import WireLeader

from josefk.broker.fetch_session import FetchSessionCache
from josefk.broker.replica_fetcher import FetcherSettings, ReplicaFetcher
from josefk.broker.replica_manager import ReplicaManager
from josefk.cluster.metadata_store import PartitionState
from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode
from josefk.storage.offsets import TopicPartition

Fetch = request_class(ApiKey.FETCH)
TOPIC = "q"
PARTITIONS = 20
STATE = PartitionState((0, 1), 0, 1, (0, 1), 1)  # broker 0 leads, broker 1 follows in the ISR
FOLLOWER = 1


class Follower:
    """Broker 1's side of one fetch session with leader broker 0, as the replica fetcher
    drives it: a full fetch, then incremental fetches naming only what moved."""

    def __init__(self, leader: ReplicaManager) -> None:
        self.replicas = leader
        self.wire = WireLeader(leader, FetchSessionCache(10))
        self.offsets = {TopicPartition(TOPIC, p): 0 for p in range(PARTITIONS)}
        self.session_id = 0
        self.epoch = 0

    async def fetch(
        self, moved: dict[TopicPartition, int] | None = None, max_wait_ms: int = 0
    ) -> dict[TopicPartition, Any]:
        """One fetch; the answered partitions. The full fetch names every partition."""
        named = self.offsets if self.session_id == 0 else (moved or {})
        request = Fetch(
            replica_id=FOLLOWER,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=self.session_id,
            session_epoch=self.epoch,
            topics=[
                Fetch.FetchTopic(
                    topic=TOPIC,
                    partitions=[
                        Fetch.FetchTopic.FetchPartition(
                            partition=tp.partition,
                            current_leader_epoch=STATE.leader_epoch,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=0,
                            partition_max_bytes=1 << 20,
                        )
                        for tp, offset in named.items()
                    ],
                )
            ]
            if named
            else [],
            forgotten_topics_data=[],
            rack_id="",
        )
        response = await self.wire.request(ApiKey.FETCH, request, version=12, timeout_s=5)
        assert response.error_code == ErrorCode.NONE
        if self.session_id == 0:
            self.session_id = response.session_id
            assert self.session_id > 0
        self.epoch += 1
        return {
            TopicPartition(topic.topic, data.partition_index): data
            for topic in response.responses
            for data in topic.partitions
        }

    def quiet_count(self) -> int:
        session = self.wire.broker.fetch_sessions.get(self.session_id)
        assert session is not None
        return sum(1 for cached in session if cached.quiet is not None)


async def _leader(replicas: ReplicaManager) -> Follower:
    create_topic(replicas, TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        partition = replicas.get_partition(TOPIC, p)
        assert partition is not None
        partition.make_leader(STATE)
    follower = Follower(replicas)
    answered = await follower.fetch()
    assert len(answered) == PARTITIONS  # a full fetch answers every partition
    return follower


def _append(replicas: ReplicaManager, tp: TopicPartition, records: int = 2) -> None:
    [outcome] = replicas.append_records([(tp, memoryview(producer_batch(records)))], acks=1)
    assert outcome.error is None


async def test_idle_partitions_become_quiet_and_records_still_reach_the_follower(
    replicas: ReplicaManager,
) -> None:
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    assert follower.quiet_count() == PARTITIONS
    busy = TopicPartition(TOPIC, 7)
    _append(replicas, busy)
    answered = await follower.fetch()
    assert list(answered) == [busy]
    assert answered[busy].records
    assert answered[busy].high_watermark == 0  # the follower has not fetched past 0 yet
    # Its next fetch names the new offset and moves the high watermark (after its read,
    # as Kafka's leader does); the fetch after that answers the new high watermark.
    assert await follower.fetch({busy: 2}) == {}
    answered = await follower.fetch()
    assert list(answered) == [busy]
    assert answered[busy].high_watermark == 2
    assert not answered[busy].records
    assert await follower.fetch() == {}
    assert follower.quiet_count() == PARTITIONS


async def test_a_new_log_start_offset_of_a_quiet_partition_is_answered(
    replicas: ReplicaManager,
) -> None:
    follower = await _leader(replicas)
    tp = TopicPartition(TOPIC, 3)
    _append(replicas, tp, records=4)
    await follower.fetch()
    await follower.fetch({tp: 4})  # the follower has all 4: the high watermark moves to 4
    assert (await follower.fetch())[tp].high_watermark == 4
    assert await follower.fetch() == {}
    assert follower.quiet_count() == PARTITIONS
    partition = replicas.get_partition(TOPIC, 3)
    assert partition is not None
    partition.log.maybe_increment_log_start_offset(2)  # what DeleteRecords does
    answered = await follower.fetch()
    assert list(answered) == [tp]
    assert answered[tp].log_start_offset == 2


async def test_a_quiet_partition_whose_leadership_moved_answers_the_error(
    replicas: ReplicaManager,
) -> None:
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    tp = TopicPartition(TOPIC, 11)
    partition = replicas.get_partition(TOPIC, 11)
    assert partition is not None
    partition.make_follower(PartitionState((0, 1), 1, 2, (0, 1), 2))
    replicas.partition_changed(tp)
    answered = await follower.fetch()
    assert list(answered) == [tp]
    assert answered[tp].error_code == ErrorCode.FENCED_LEADER_EPOCH


async def test_a_quiet_partition_whose_isr_dropped_the_follower_proposes_it_back(
    replicas: ReplicaManager,
) -> None:
    """The same leader and epoch, a new ISR: the stamp lapses with the partition's state,
    and the follower's next fetch, at the log end, asks for its expansion."""
    proposed: list[tuple[TopicPartition, list[int]]] = []
    replicas.isr_proposer = lambda partition, isr: proposed.append((partition.tp, isr))
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    assert follower.quiet_count() == PARTITIONS
    partition = replicas.get_partition(TOPIC, 4)
    assert partition is not None
    partition.apply_isr(PartitionState((0, 1), 0, 1, (0,), 2))  # the follower is out
    assert await follower.fetch() == {}
    assert proposed == [(TopicPartition(TOPIC, 4), [0, 1])]


async def test_a_quiet_partition_deleted_and_made_again_is_not_taken_for_the_old_one(
    replicas: ReplicaManager,
) -> None:
    follower = await _leader(replicas)
    tp = TopicPartition(TOPIC, 9)
    _append(replicas, tp, records=3)
    assert (await follower.fetch())[tp].records  # the follower is at 0: records answered
    await follower.fetch({tp: 3})  # the follower's fetch at 3 moves the high watermark
    await follower.fetch()
    assert await follower.fetch() == {}
    assert follower.quiet_count() == PARTITIONS
    old = replicas.get_partition(TOPIC, 9)
    assert old is not None
    # The partition is hosted anew, empty, in the same epoch (as a replica moved away and
    # back would be): its log end is 0, not the 3 the session's stamp was made against.
    replicas.remove_partition(tp, delete=True)
    await replicas.host_partition_off_loop(tp, STATE)
    answered = await follower.fetch()
    assert list(answered) == [tp]
    assert answered[tp].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


async def test_a_fetch_parked_on_quiet_partitions_wakes_for_an_append_to_one(
    replicas: ReplicaManager,
) -> None:
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    parked = asyncio.create_task(follower.fetch(max_wait_ms=30_000))
    for _ in range(3):  # the fetch runs up to its wait (no await before it but the wait's)
        await asyncio.sleep(0)
    assert replicas.fetch_purgatory.size == 1
    tp = TopicPartition(TOPIC, 15)
    _append(replicas, tp)
    answered = await parked
    assert list(answered) == [tp]
    assert answered[tp].records


async def test_a_fetch_parked_on_quiet_partitions_answers_when_the_broker_stops(
    replicas: ReplicaManager,
) -> None:
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    parked = asyncio.create_task(follower.fetch(max_wait_ms=30_000))
    for _ in range(3):
        await asyncio.sleep(0)
    assert replicas.fetch_purgatory.size == 1
    replicas.fetch_purgatory.close()  # what a stopping broker does: no fetch waits on
    assert await asyncio.wait_for(parked, 10) == {}


def _watches(replicas: ReplicaManager) -> int:
    """Standing watches and parked fetches held in the fetch purgatory, over all keys."""
    return sum(len(watchers) for watchers in replicas.fetch_purgatory._watchers.values())


async def test_a_fetch_parked_on_quiet_partitions_registers_no_key_for_them(
    replicas: ReplicaManager,
) -> None:
    """Each quiet partition is watched once, standing, not at every wait: a parked fetch
    of a session of idle partitions adds nothing under their keys."""
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    assert _watches(replicas) == PARTITIONS
    parked = asyncio.create_task(follower.fetch(max_wait_ms=30_000))
    for _ in range(3):
        await asyncio.sleep(0)
    assert replicas.fetch_purgatory.size == 1
    assert _watches(replicas) == PARTITIONS
    tp = TopicPartition(TOPIC, 2)
    _append(replicas, tp)
    assert list(await parked) == [tp]
    # The append fired partition 2's watch (taken out); the answer lapsed its stamp.
    assert _watches(replicas) == PARTITIONS - 1


async def test_news_of_a_quiet_partition_with_no_fetch_parked_ends_the_next_wait_at_once(
    replicas: ReplicaManager,
) -> None:
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    session = follower.wire.broker.fetch_sessions.get(follower.session_id)
    assert session is not None
    tp = TopicPartition(TOPIC, 6)
    replicas.fetch_purgatory.notify(tp)  # as an append would, while nothing is parked
    assert session.news
    cached = session.get(TOPIC, 6)
    assert cached is not None and cached.quiet is None  # looked at again next time
    parked = asyncio.create_task(follower.fetch(max_wait_ms=30_000))
    for _ in range(3):
        await asyncio.sleep(0)
    # The fetch looked at the session (nothing new in fact), stamped 6 again and waits.
    assert replicas.fetch_purgatory.size == 1 and not session.news
    assert cached.quiet is not None
    _append(replicas, tp)
    assert list(await parked) == [tp]


async def test_an_append_between_the_look_at_the_session_and_the_wait_is_not_missed(
    replicas: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look at the session and the wait are apart by the read of the partitions it
    left: news that comes in between (its watch fires with no fetch parked) must end the
    wait at once, not after the fetch's whole max wait."""
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    tp = TopicPartition(TOPIC, 13)
    read = replicas.fetch
    appended = False

    async def read_then_append(*args: Any, **kwargs: Any) -> Any:
        nonlocal appended
        found = await read(*args, **kwargs)
        if not appended:
            appended = True
            _append(replicas, tp)
        return found

    monkeypatch.setattr(replicas, "fetch", read_then_append)
    answered = await asyncio.wait_for(follower.fetch(max_wait_ms=60_000), 10)
    assert list(answered) == [tp]


async def test_a_sessions_watches_go_with_its_partitions_and_with_it(
    replicas: ReplicaManager,
) -> None:
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    assert _watches(replicas) == PARTITIONS
    forget = Fetch(
        replica_id=FOLLOWER,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=follower.session_id,
        session_epoch=follower.epoch,
        topics=[],
        forgotten_topics_data=[Fetch.ForgottenTopic(topic=TOPIC, partitions=[0, 1, 2])],
        rack_id="",
    )
    await follower.wire.request(ApiKey.FETCH, forget, version=12, timeout_s=5)
    assert _watches(replicas) == PARTITIONS - 3
    follower.wire.broker.fetch_sessions.remove(follower.session_id)  # closed
    assert _watches(replicas) == 0
    # Evicted: a cache of one slot gives a second follower session the first one's slot.
    sessions = FetchSessionCache(1)
    follower.wire.broker.fetch_sessions = sessions
    follower.session_id, follower.epoch = 0, 0
    await follower.fetch()
    assert await follower.fetch() == {}
    assert _watches(replicas) == PARTITIONS
    assert sessions.create(replica_id=2, uses_topic_ids=False) is not None
    assert sessions.evictions == 1
    assert _watches(replicas) == 0


@pytest.mark.parametrize("how", ["closed", "evicted"])
async def test_a_fetch_parked_on_quiet_partitions_answers_when_its_session_goes(
    replicas: ReplicaManager, how: str
) -> None:
    """Closing or evicting a session takes its watches out, so nothing would wake its parked
    fetch for the quiet partitions any more: it answers then, instead of at its max wait,
    and leaves no watch behind when it does."""
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    sessions = follower.wire.broker.fetch_sessions
    parked = asyncio.create_task(follower.fetch(max_wait_ms=60_000))
    for _ in range(3):
        await asyncio.sleep(0)
    assert replicas.fetch_purgatory.size == 1
    if how == "closed":
        assert sessions.remove(follower.session_id) is not None
    else:
        sessions.max_slots = 1
        assert sessions.create(replica_id=2, uses_topic_ids=False) is not None
        assert sessions.evictions == 1
    assert await asyncio.wait_for(parked, 10) == {}
    assert replicas.fetch_purgatory.size == 0
    assert _watches(replicas) == 0
    _append(replicas, TopicPartition(TOPIC, 4))  # fires nothing of the session gone
    assert _watches(replicas) == 0


async def test_a_parked_fetch_counts_as_the_followers_once_however_often_it_wakes(
    replicas: ReplicaManager,
) -> None:
    # The follower is out of the ISR: each time its fetch is recorded it is caught up, and
    # the leader proposes its return. A wake-up of the parked fetch (any change to any of
    # the session's partitions) must not record it again: seen, a storm of proposals to etcd
    # while the ISR changes of a restarted broker came in.
    proposals: list[int] = []
    replicas.isr_proposer = lambda partition, isr: proposals.append(partition.tp.partition)
    create_topic(replicas, TOPIC, PARTITIONS)
    out_of_sync = PartitionState((0, 1), 0, 1, (0,), 1)
    partitions = []
    for p in range(PARTITIONS):
        partition = replicas.get_partition(TOPIC, p)
        assert partition is not None
        partition.make_leader(out_of_sync)
        partitions.append(partition)
    follower = Follower(replicas)
    await follower.fetch()
    assert sorted(proposals) == list(range(PARTITIONS))
    for partition in partitions:
        partition.isr_proposal_failed()  # refused: the next fetch proposes again
    parked = asyncio.create_task(follower.fetch(max_wait_ms=30_000))
    for _ in range(3):
        await asyncio.sleep(0)
    assert replicas.fetch_purgatory.size == 1
    assert len(proposals) == 2 * PARTITIONS
    for partition in partitions:
        partition.isr_proposal_failed()
    for _ in range(5):
        replicas.partition_changed(TopicPartition(TOPIC, 0))  # wakes the parked fetch
        for _ in range(3):
            await asyncio.sleep(0)
        assert replicas.fetch_purgatory.size == 1
    assert len(proposals) == 2 * PARTITIONS
    replicas.fetch_purgatory.close()
    await asyncio.wait_for(parked, 10)


async def test_a_quiet_partition_fetch_keeps_the_follower_caught_up(
    replicas: ReplicaManager,
) -> None:
    follower = await _leader(replicas)
    assert await follower.fetch() == {}
    assert follower.quiet_count() == PARTITIONS
    progress = []
    for p in range(PARTITIONS):
        partition = replicas.get_partition(TOPIC, p)
        assert partition is not None
        record = partition.progress(FOLLOWER)
        assert record is not None
        record.last_caught_up_ms = record.last_fetch_ms = 0  # long ago
        progress.append(record)
    assert await follower.fetch() == {}  # every partition still quiet
    assert all(record.last_caught_up_ms > 0 for record in progress)
    assert all(record.last_fetch_ms > 0 for record in progress)


# -- the follower's side: what its fetcher sends -------------------------------------------


class RecordingLeader(WireLeader):
    """The leader behind the fetcher's connection, keeping each Fetch request it answers."""

    def __init__(self, leader: ReplicaManager) -> None:
        super().__init__(leader, FetchSessionCache(10))
        self.fetches: list[Any] = []

    async def request(
        self, api_key: int, body: Any, *, version: int | None = None, timeout_s: float
    ) -> Any:
        if api_key == ApiKey.FETCH:
            self.fetches.append(body)
        return await super().request(api_key, body, version=version, timeout_s=timeout_s)


def _named(request: Any) -> dict[int, tuple[int, int]]:
    """The partitions a fetch request names: index -> (fetch offset, log start offset)."""
    return {
        p.partition: (p.fetch_offset, p.log_start_offset)
        for topic in request.topics
        for p in topic.partitions
    }


def _forgotten(request: Any) -> set[int]:
    return {index for topic in request.forgotten_topics_data for index in topic.partitions}


async def _fetch_round(fetcher: ReplicaFetcher, wire: RecordingLeader) -> Any:
    """One round of the fetcher's loop, as ``ReplicaFetcher._run`` makes it."""
    active = fetcher._active(asyncio.get_running_loop().time())
    await fetcher._truncate(wire, active)  # type: ignore[arg-type]
    await fetcher._fetch_once(wire, active)  # type: ignore[arg-type]
    return wire.fetches[-1]


def _follower(
    follower_replicas: ReplicaManager, indexes: range
) -> tuple[ReplicaFetcher, list[Any]]:
    fetcher = ReplicaFetcher(
        0,
        lambda: None,
        FetcherSettings(broker_id=FOLLOWER, max_wait_ms=0, min_bytes=0),
        on_high_watermark=lambda tp: None,
    )
    create_topic(follower_replicas, TOPIC, PARTITIONS)
    partitions = []
    for p in range(PARTITIONS):
        partition = follower_replicas.get_partition(TOPIC, p)
        assert partition is not None
        partition.make_follower(STATE)
        partitions.append(partition)
        if p in indexes:
            fetcher.follow(partition)
    return fetcher, partitions


async def test_a_fetcher_swapping_one_partition_for_another_forgets_the_one_it_left(
    replicas: ReplicaManager, follower_replicas: ReplicaManager
) -> None:
    """The same number of partitions before and after: the session still learns which."""
    leader = await _leader(replicas)
    wire = RecordingLeader(leader.replicas)
    fetcher, partitions = _follower(follower_replicas, range(PARTITIONS - 1))
    assert len(_named(await _fetch_round(fetcher, wire))) == PARTITIONS - 1
    assert _named(await _fetch_round(fetcher, wire)) == {}
    fetcher.unfollow(TopicPartition(TOPIC, 3))
    fetcher.follow(partitions[PARTITIONS - 1])  # an empty log: nothing to truncate
    request = await _fetch_round(fetcher, wire)
    assert _named(request) == {PARTITIONS - 1: (0, 0)}
    assert _forgotten(request) == {3}
    assert _named(await _fetch_round(fetcher, wire)) == {}


async def test_a_partition_held_back_across_a_new_session_is_sent_to_it_when_it_comes_back(
    replicas: ReplicaManager, follower_replicas: ReplicaManager
) -> None:
    leader = await _leader(replicas)
    wire = RecordingLeader(leader.replicas)
    fetcher, _ = _follower(follower_replicas, range(PARTITIONS))
    await _fetch_round(fetcher, wire)
    assert _named(await _fetch_round(fetcher, wire)) == {}
    held = fetcher._partitions[TopicPartition(TOPIC, 12)]
    fetcher._delay(held.partition.tp, held, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    fetcher._session = type(fetcher._session)()  # a new connection: a new session
    full = await _fetch_round(fetcher, wire)
    assert len(_named(full)) == PARTITIONS - 1 and 12 not in _named(full)
    held.delayed_until = 0  # the backoff is over
    assert _named(await _fetch_round(fetcher, wire)) == {12: (0, 0)}


async def test_a_fetcher_drops_an_answer_for_a_partition_followed_anew_while_it_was_sent(
    replicas: ReplicaManager, follower_replicas: ReplicaManager
) -> None:
    leader = await _leader(replicas)
    wire = RecordingLeader(leader.replicas)
    fetcher, partitions = _follower(follower_replicas, range(PARTITIONS))
    await _fetch_round(fetcher, wire)
    await _fetch_round(fetcher, wire)
    moved = TopicPartition(TOPIC, 7)
    _append(replicas, moved, records=3)
    answered = wire.request

    async def refollow_then_answer(api_key: int, body: Any, **kwargs: Any) -> Any:
        response = await answered(api_key, body, **kwargs)
        fetcher.follow(partitions[7])  # new metadata while the fetch was out
        return response

    wire.request = refollow_then_answer  # type: ignore[method-assign]
    await _fetch_round(fetcher, wire)
    # The records were for the old following: not appended. The new one finds where to
    # start (its empty log: at 0, where the leader's session still has it) and gets them.
    assert partitions[7].log.log_end_offset == 0
    wire.request = answered  # type: ignore[method-assign]
    await _fetch_round(fetcher, wire)
    assert partitions[7].log.log_end_offset == 3
    assert _named(await _fetch_round(fetcher, wire)) == {7: (3, 0)}


async def test_a_fetcher_sends_only_what_moved_and_forgets_what_it_stops_fetching(
    replicas: ReplicaManager, follower_replicas: ReplicaManager
) -> None:
    leader = await _leader(replicas)  # the leader's partitions; its own session is unused
    wire = RecordingLeader(leader.replicas)
    fetcher = ReplicaFetcher(
        0,
        lambda: None,
        FetcherSettings(broker_id=FOLLOWER, max_wait_ms=0, min_bytes=0),
        on_high_watermark=lambda tp: None,
    )
    create_topic(follower_replicas, TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        partition = follower_replicas.get_partition(TOPIC, p)
        assert partition is not None
        partition.make_follower(STATE)
        fetcher.follow(partition)

    async def fetch_round() -> Any:
        return await _fetch_round(fetcher, wire)

    assert len(_named(await fetch_round())) == PARTITIONS  # the full fetch
    assert _named(await fetch_round()) == {}
    moved = TopicPartition(TOPIC, 5)
    _append(replicas, moved, records=4)
    assert _named(await fetch_round()) == {}  # answered with the records, appended here
    assert _named(await fetch_round()) == {5: (4, 0)}
    assert _named(await fetch_round()) == {}
    # The follower's own log start moves (its retention, say): the leader must hear of it.
    follower_log = follower_replicas.get_partition(TOPIC, 5)
    assert follower_log is not None and follower_log.log.high_watermark == 4
    follower_log.log.maybe_increment_log_start_offset(2)
    assert _named(await fetch_round()) == {5: (4, 2)}
    # A partition held back (an error's backoff) leaves the session and comes back whole.
    held = fetcher._partitions[TopicPartition(TOPIC, 12)]
    fetcher._delay(held.partition.tp, held, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    request = await fetch_round()
    assert _named(request) == {} and _forgotten(request) == {12}
    held.delayed_until = 0  # the backoff is over
    assert _named(await fetch_round()) == {12: (0, 0)}
    assert _named(await fetch_round()) == {}
