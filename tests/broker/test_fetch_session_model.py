"""Fetch sessions (KIP-227) against a model: for a random sequence of appends and incremental
fetches (advancing some partitions, forgetting and adding others), every incremental answer
carries exactly the partitions for which a sessionless full fetch at the same offsets finds
records or offsets the fetcher has not been told, and for those the very same data. Also
the cache's eviction rule. Real logs and replica manager, the real Fetch handler; no sockets.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from log_helpers import producer_batch
from replica_helpers import create_topic, replica_manager

from josefk.broker.context import RequestContext
from josefk.broker.fetch_session import FetchSessionCache
from josefk.broker.handlers.fetch import handle_fetch
from josefk.config.broker import BrokerConfig
from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode
from josefk.records.batch import split_batches
from josefk.storage.offsets import TopicPartition

Fetch = request_class(ApiKey.FETCH)
TOPIC = "t"
PARTITIONS = 3
VERSION = 12

appends = st.tuples(st.just("append"), st.integers(0, PARTITIONS - 1), st.integers(1, 3))
fetches = st.tuples(
    st.just("fetch"),
    st.lists(st.booleans(), min_size=PARTITIONS, max_size=PARTITIONS),  # advance?
    st.one_of(st.none(), st.integers(0, PARTITIONS - 1)),  # forget
    st.one_of(st.none(), st.integers(0, PARTITIONS - 1)),  # add (or re-send)
)


def request(
    session_id: int,
    epoch: int,
    offsets: dict[int, int],
    forgotten: list[int],
    replica_id: int = -1,
) -> Any:
    return Fetch(
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 24,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            Fetch.FetchTopic(
                topic=TOPIC,
                partitions=[
                    Fetch.FetchTopic.FetchPartition(
                        partition=p,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for p, offset in offsets.items()
                ],
            )
        ]
        if offsets
        else [],
        forgotten_topics_data=[Fetch.ForgottenTopic(topic=TOPIC, partitions=forgotten)]
        if forgotten
        else [],
        rack_id="",
    )


def answered(response: Any) -> dict[int, Any]:
    assert response.error_code == ErrorCode.NONE
    return {d.partition_index: d for t in response.responses for d in t.partitions}


def record_bytes(records: Any) -> bytes:
    # The handler answers a slice of a segment file (sent with sendfile): read it.
    return records.read() if hasattr(records, "read") else bytes(records or b"")


def count_records(records: Any) -> int:
    return sum(b.record_count for b in split_batches(record_bytes(records)))


def same_answer(got: Any, expected: Any) -> bool:
    fields = ("error_code", "high_watermark", "last_stable_offset", "log_start_offset")
    return all(getattr(got, f) == getattr(expected, f) for f in fields) and record_bytes(
        got.records
    ) == record_bytes(expected.records)


async def run(directory: Path, operations: list[Any], replica_id: int) -> None:
    async with replica_manager(directory, 0) as replicas:
        create_topic(replicas, TOPIC, PARTITIONS)
        broker = SimpleNamespace(
            replica_manager=replicas,
            fetch_sessions=FetchSessionCache(10),
            metrics=None,
            authorizer=None,
            config=BrokerConfig(),
        )
        context = RequestContext(
            broker=broker,  # type: ignore[arg-type]
            header=None,  # type: ignore[arg-type]
            api_version=VERSION,
            connection=None,  # type: ignore[arg-type]
        )
        offsets = {0: 0, 1: 0}  # what the session holds: partition -> fetch offset
        told: dict[int, tuple[int, int, int]] = {}  # (hw, lso, log start) last answered
        first = await handle_fetch(context, request(0, 0, dict(offsets), [], replica_id))
        session_id = first.session_id
        assert session_id > 0
        parts = answered(first)
        assert sorted(parts) == sorted(offsets)
        for p, data in parts.items():
            told[p] = (data.high_watermark, data.last_stable_offset, data.log_start_offset)
        epoch = 1
        for op in operations:
            if op[0] == "append":
                _, p, n = op
                outcome = replicas.append_records(
                    [(TopicPartition(TOPIC, p), memoryview(producer_batch(n)))], acks=1
                )
                assert outcome[0].error is None
                continue
            _, advance, forget, add = op
            changed: dict[int, int] = {}
            forgotten: list[int] = []
            if forget is not None and forget in offsets and forget != add:
                del offsets[forget]
                told.pop(forget, None)
                forgotten.append(forget)
            for p in offsets:
                if advance[p]:
                    hw = told[p][0] if p in told else 0
                    if hw > offsets[p]:
                        offsets[p] = hw
                        changed[p] = hw
            if add is not None:
                offsets.setdefault(add, 0)
                changed[add] = offsets[add]
            response = await handle_fetch(
                context, request(session_id, epoch, changed, forgotten, replica_id)
            )
            epoch += 1
            assert response.session_id == session_id
            got = answered(response)
            full = answered(
                await handle_fetch(context, request(0, -1, dict(offsets), [], replica_id))
            )
            assert set(got) <= set(offsets)
            for p in offsets:
                expected = full[p]
                state = (
                    expected.high_watermark,
                    expected.last_stable_offset,
                    expected.log_start_offset,
                )
                news = count_records(expected.records) > 0 or told.get(p) != state
                assert (p in got) == news, (p, state, told.get(p), got)
                if news:
                    assert same_answer(got[p], expected)
                    told[p] = state


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(appends, fetches), max_size=25), st.sampled_from([-1, 1]))
def test_incremental_fetches_answer_what_a_full_fetch_finds(
    operations: list[Any], replica_id: int
) -> None:
    # Replica id 1 reads as a follower does (to the log end offset), -1 as a consumer.
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(run(Path(directory), operations, replica_id))


def test_followers_evict_consumers_and_consumers_only_consumers() -> None:
    cache = FetchSessionCache(2)
    follower = cache.create(replica_id=1, uses_topic_ids=False)
    consumer = cache.create(replica_id=-1, uses_topic_ids=False)
    assert follower is not None and consumer is not None
    # Full: a consumer may only evict a consumer.
    newer = cache.create(replica_id=-1, uses_topic_ids=False)
    assert newer is not None
    assert cache.get(consumer.session_id) is None
    assert cache.get(follower.session_id) is follower
    # A follower evicts the least recently used consumer first.
    second_follower = cache.create(replica_id=2, uses_topic_ids=False)
    assert second_follower is not None and cache.get(newer.session_id) is None
    # Only followers left: a consumer gets no session, a follower evicts the oldest one.
    assert cache.create(replica_id=-1, uses_topic_ids=False) is None
    third = cache.create(replica_id=3, uses_topic_ids=False)
    assert third is not None and cache.get(follower.session_id) is None
    assert len(cache) == 2 and cache.evictions == 3
    assert FetchSessionCache(0).create(replica_id=1, uses_topic_ids=False) is None
