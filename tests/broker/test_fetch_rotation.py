"""Fetch fairness (Kafka's rotation). Under a response limit (``max_bytes``) smaller than what
the partitions hold, a fetch answers records of the first partition with data in its order
only (its first batch whole, KIP-74), so that order has to rotate or the first partitions
take every answer. The leader's fetch session moves a partition that answered records to
the back of the session (it orders incremental fetches); the follower's ReplicaFetcher moves
one it got records for to the back of its own order (it orders full fetches).

The partitions: "r" 0 to 2 and "s" 0 to 1 on leader broker 0, r-0 idle and the other four
holding BATCHES batches each. With an idle partition first, grouping a topic's partitions
together would starve "s" behind r-1 and r-2; the order must be kept partition by partition.

Real logs and replica managers, the real Fetch handler; requests and answers go through the
real codec (encoded and decoded, as on the wire) but no socket.
"""

from __future__ import annotations

import inspect
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from log_helpers import producer_batch
from replica_helpers import create_topic

from josefk.broker.context import RequestContext
from josefk.broker.fetch_session import FetchSession, FetchSessionCache
from josefk.broker.handlers import registered_handlers
from josefk.broker.replica_fetcher import FetcherSettings, ReplicaFetcher
from josefk.broker.replica_manager import ReplicaManager
from josefk.cluster.metadata_store import PartitionState
from josefk.config.broker import BrokerConfig
from josefk.protocol.api import (
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response_parts,
    request_class,
)
from josefk.protocol.errors import ErrorCode
from josefk.protocol.headers import RequestHeader
from josefk.records.batch import split_batches
from josefk.storage.offsets import TopicPartition

Fetch = request_class(ApiKey.FETCH)
TOPICS = {"r": 3, "s": 2}
ALL = [TopicPartition(t, p) for t, count in TOPICS.items() for p in range(count)]
IDLE = TopicPartition("r", 0)
BUSY = [tp for tp in ALL if tp != IDLE]
BATCHES = 3
STATE = PartitionState((0, 1), 0, 1, (0, 1), 1)  # broker 0 leads, broker 1 follows


def fill_leader(leader: ReplicaManager) -> None:
    for topic, count in TOPICS.items():
        create_topic(leader, topic, count)
    for tp in ALL:
        partition = leader.get_partition(tp.topic, tp.partition)
        assert partition is not None
        partition.make_leader(STATE)
    for _ in range(BATCHES):
        outcomes = leader.append_records(
            [(tp, memoryview(producer_batch(2))) for tp in BUSY], acks=1
        )
        assert all(o.error is None for o in outcomes)


class WireLeader:
    """Leader broker 0's handlers behind the two methods of a BrokerConnection that the
    fetcher uses: the request is encoded and decoded, handled by the registered handler,
    and the answer (records read out of the segment files) encoded and decoded."""

    closed = False

    def __init__(self, leader: ReplicaManager, sessions: FetchSessionCache) -> None:
        self.broker = SimpleNamespace(
            replica_manager=leader,
            fetch_sessions=sessions,
            metrics=None,
            authorizer=None,
            config=BrokerConfig(),
        )
        self.handlers = registered_handlers()

    def version_for(self, api_key: int) -> int:
        return self.handlers[api_key].max_version

    async def request(
        self, api_key: int, body: Any, *, version: int | None = None, timeout_s: float
    ) -> Any:
        version = self.version_for(api_key) if version is None else version
        header = RequestHeader(
            request_api_key=api_key, request_api_version=version, correlation_id=7, client_id="t"
        )
        # A writable frame, as the network layer receives one (a Produce appends in place).
        header, decoded = decode_request(memoryview(bytearray(encode_request(header, body)))[4:])
        context = RequestContext(
            broker=self.broker,  # type: ignore[arg-type]
            header=header,
            api_version=version,
            connection=None,  # type: ignore[arg-type]
        )
        response = self.handlers[api_key].fn(context, decoded)
        if inspect.isawaitable(response):
            response = await response
        _, parts = encode_response_parts(7, response, version, api_key=api_key)
        frame = b"".join(p.read() if hasattr(p, "read") else bytes(p) for p in parts)
        return decode_response(frame[4:], api_key, version)[1]


def assert_served_in_turn(served: list[TopicPartition]) -> None:
    """Every busy partition had all its batches, and each run of len(BUSY) consecutive
    answers served every busy partition once: none waited while another was served twice."""
    assert Counter(served) == dict.fromkeys(BUSY, BATCHES), served
    n = len(BUSY)
    for i in range(len(served) - n + 1):
        assert len(set(served[i : i + n])) == n, served


# -- the session ------------------------------------------------------------------------


def test_a_session_reads_in_its_order_and_sends_a_partition_with_records_back() -> None:
    session = FetchSession(1, replica_id=1, uses_topic_ids=False)
    for tp in ALL:
        session.upsert(
            tp.topic,
            tp.partition,
            fetch_offset=0,
            partition_max_bytes=100,
            current_leader_epoch=-1,
            log_start_offset=-1,
        )

    def order() -> list[tuple[str, int]]:
        return [(p.topic_key, p.partition) for p in session]

    assert order() == [("r", 0), ("r", 1), ("r", 2), ("s", 0), ("s", 1)]
    first = session.get("r", 1)
    assert first is not None
    session.move_to_end(first)
    assert order() == [("r", 0), ("r", 2), ("s", 0), ("s", 1), ("r", 1)]
    # A changed request keeps its place; a new partition joins at the back.
    session.upsert(
        "s",
        0,
        fetch_offset=5,
        partition_max_bytes=100,
        current_leader_epoch=-1,
        log_start_offset=-1,
    )
    session.upsert(
        "t",
        0,
        fetch_offset=0,
        partition_max_bytes=100,
        current_leader_epoch=-1,
        log_start_offset=-1,
    )
    assert order() == [("r", 0), ("r", 2), ("s", 0), ("s", 1), ("r", 1), ("t", 0)]
    # A partition forgotten while a fetch that read it waited is not brought back.
    session.forget("r", 2)
    stale = FetchSession(2, replica_id=1, uses_topic_ids=False)
    stale.upsert(
        "r",
        2,
        fetch_offset=0,
        partition_max_bytes=100,
        current_leader_epoch=-1,
        log_start_offset=-1,
    )
    [gone] = list(stale)
    session.move_to_end(gone)
    assert order() == [("r", 0), ("s", 0), ("s", 1), ("r", 1), ("t", 0)]
    assert session.partition_count() == 5


def next_offset(records: Any) -> int:
    batches = list(split_batches(bytes(records)))
    return batches[-1].last_offset + 1


@pytest.mark.parametrize("version", [12, 13], ids=["by name", "by topic id"])
async def test_incremental_fetches_give_every_partition_its_turn(
    replicas: ReplicaManager, version: int
) -> None:
    fill_leader(replicas)
    leader = WireLeader(replicas, FetchSessionCache(10))
    ids = {t: info.topic_id for t in TOPICS if (info := replicas.catalog.get(t)) is not None}
    names = {topic_id: t for t, topic_id in ids.items()}

    def request(session_id: int, epoch: int, offsets: dict[TopicPartition, int]) -> Any:
        return Fetch(
            replica_id=1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1,  # less than a batch: one batch of one partition per answer
            isolation_level=0,
            session_id=session_id,
            session_epoch=epoch,
            topics=[
                Fetch.FetchTopic(
                    topic=tp.topic if version < 13 else "",
                    topic_id=ids[tp.topic],
                    partitions=[
                        Fetch.FetchTopic.FetchPartition(
                            partition=tp.partition,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        )
                    ],
                )
                for tp, offset in offsets.items()
            ],
            forgotten_topics_data=[],
            rack_id="",
        )

    async def fetch(session_id: int, epoch: int, offsets: dict[TopicPartition, int]) -> Any:
        response = await leader.request(
            ApiKey.FETCH, request(session_id, epoch, offsets), version=version, timeout_s=1
        )
        assert response.error_code == ErrorCode.NONE
        # Each topic once in an answer, however the session's order splits it.
        keys = [t.topic if version < 13 else t.topic_id for t in response.responses]
        assert len(keys) == len(set(keys))
        return response

    def with_records(response: Any) -> dict[TopicPartition, int]:
        found = {}
        for topic in response.responses:
            name = topic.topic if version < 13 else names[topic.topic_id]
            for data in topic.partitions:
                assert data.error_code == ErrorCode.NONE
                if data.records:
                    found[TopicPartition(name, data.partition_index)] = next_offset(data.records)
        return found

    # The full fetch that makes the session; then incremental fetches, each naming only the
    # partition whose fetch offset moved (what a follower sends).
    first = await fetch(0, 0, dict.fromkeys(ALL, 0))
    session_id = first.session_id
    assert session_id > 0
    served = []
    moved = with_records(first)
    epoch = 1
    for _ in range(len(BUSY) * BATCHES + 2):
        assert len(moved) <= 1
        served.extend(moved)
        if len(served) == len(BUSY) * BATCHES:
            break
        moved = with_records(await fetch(session_id, epoch, moved))
        epoch += 1
    assert_served_in_turn(served)


# -- the follower's fetcher ---------------------------------------------------------------


@pytest.mark.parametrize("session_slots", [0, 10], ids=["full fetches", "in a session"])
async def test_a_fetcher_gives_every_partition_its_turn(
    replicas: ReplicaManager, follower_replicas: ReplicaManager, session_slots: int
) -> None:
    # With no session slot on the leader every fetch is a full one, in the fetcher's order.
    fill_leader(replicas)
    leader = WireLeader(replicas, FetchSessionCache(session_slots))
    fetcher = ReplicaFetcher(
        0,
        lambda: None,
        FetcherSettings(broker_id=1, max_wait_ms=0, min_bytes=0, max_bytes=1),
        on_high_watermark=lambda tp: None,
    )
    for topic, count in TOPICS.items():
        create_topic(follower_replicas, topic, count)
    logs = {}
    for tp in ALL:
        partition = follower_replicas.get_partition(tp.topic, tp.partition)
        assert partition is not None
        partition.make_follower(STATE)
        fetcher.follow(partition)
        logs[tp] = partition.log

    served: list[TopicPartition] = []
    for _ in range(len(BUSY) * BATCHES + 2):
        before = {tp: log.log_end_offset for tp, log in logs.items()}
        # One round of the fetcher's loop: truncation (nothing to truncate in empty logs),
        # then a fetch.
        active = dict(fetcher._partitions)
        await fetcher._truncate(leader, active)  # type: ignore[arg-type]
        await fetcher._fetch_once(leader, active)  # type: ignore[arg-type]
        grown = [tp for tp, log in logs.items() if log.log_end_offset > before[tp]]
        assert len(grown) <= 1
        served.extend(grown)
        if len(served) == len(BUSY) * BATCHES:
            break
    assert_served_in_turn(served)
    assert all(log.log_end_offset == (0 if tp == IDLE else 2 * BATCHES) for tp, log in logs.items())
    assert (fetcher._session.session_id != 0) == (session_slots > 0)
