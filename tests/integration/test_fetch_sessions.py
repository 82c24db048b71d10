"""Fetch sessions (KIP-227) with raw Fetch requests against a real ``josefk serve``: a full
fetch that creates a session, incremental fetches with and without changes, forgotten
partitions, a wrong epoch, an unknown id, closing, topic ids (v13), the cache's slot limit,
and the session metrics.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_process import BrokerProcess, free_port
from client_helpers import assert_delivered, ck_create_topic, ck_produce, make_messages
from client_helpers import unique_topic as new_topic
from prometheus_client.parser import text_string_to_metric_families
from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode
from josefk.records.batch import split_batches

pytestmark = pytest.mark.timeout(120)

Fetch = request_class(ApiKey.FETCH)
PARTITIONS = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("josefk-fetch-sessions")
    process = BrokerProcess(
        base / "data",
        base / "broker.stderr.log",
        settings=("max.incremental.fetch.session.cache.slots=3",),
        metrics_port=free_port(),
    )
    try:
        process.start()
        yield process
        if process.is_alive():
            process.stop()
    finally:
        process.close()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    raw = RawClient(broker.bootstrap)
    yield raw
    raw.close()


@pytest.fixture
def topic(broker: BrokerProcess) -> str:
    name = new_topic("fetch-session")
    ck_create_topic(broker.bootstrap, name, partitions=PARTITIONS)
    return name


def produce(broker: BrokerProcess, topic: str, partition: int, count: int) -> None:
    assert_delivered(ck_produce(broker.bootstrap, topic, make_messages(count), partition=partition))


def fetch(
    client: RawClient,
    *,
    session_id: int,
    epoch: int,
    topic: str = "",
    offsets: dict[int, int] | None = None,
    forgotten: list[int] | None = None,
    version: int = 12,
    topic_id: uuid.UUID | None = None,
) -> Any:
    """A Fetch (max_wait 0) naming ``offsets`` ({partition: fetch offset}) of ``topic``."""
    partitions = [
        Fetch.FetchTopic.FetchPartition(
            partition=p,
            current_leader_epoch=-1,
            fetch_offset=offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        for p, offset in (offsets or {}).items()
    ]
    by_id = topic_id is not None
    return client.call(
        ApiKey.FETCH,
        version,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 24,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            Fetch.FetchTopic(topic="" if by_id else topic, topic_id=topic_id, partitions=partitions)
        ]
        if partitions
        else [],
        forgotten_topics_data=[
            Fetch.ForgottenTopic(
                topic="" if by_id else topic, topic_id=topic_id, partitions=forgotten
            )
        ]
        if forgotten
        else [],
        rack_id="",
    )


def answered(response: Any) -> dict[int, Any]:
    """The partitions an answer carries, by index (every one must be error-free)."""
    out = {}
    for topic in response.responses:
        for data in topic.partitions:
            assert data.error_code == ErrorCode.NONE, data
            out[data.partition_index] = data
    return out


def record_count(records: Any) -> int:
    return sum(batch.record_count for batch in split_batches(bytes(records or b"")))


def test_full_then_incremental_fetches(
    broker: BrokerProcess, client: RawClient, topic: str
) -> None:
    produce(broker, topic, 0, 3)
    first = fetch(
        client, session_id=0, epoch=0, topic=topic, offsets=dict.fromkeys(range(PARTITIONS), 0)
    )
    assert first.error_code == ErrorCode.NONE
    assert first.session_id > 0
    parts = answered(first)
    assert sorted(parts) == list(range(PARTITIONS))  # a full fetch answers every partition
    assert record_count(parts[0].records) == 3
    assert parts[0].high_watermark == 3
    session = first.session_id

    # We took partition 0's records: say so. Nothing else changed, so nothing is answered.
    second = fetch(client, session_id=session, epoch=1, topic=topic, offsets={0: 3})
    assert (second.error_code, second.session_id) == (ErrorCode.NONE, session)
    assert answered(second) == {}

    # An incremental fetch naming no partition: still nothing.
    third = fetch(client, session_id=session, epoch=2)
    assert (third.error_code, answered(third)) == (ErrorCode.NONE, {})

    # New records on partition 2 (not named since the first fetch): only it comes back,
    # from the offset the session remembers, with its moved high watermark.
    produce(broker, topic, 2, 2)
    fourth = fetch(client, session_id=session, epoch=3)
    parts = answered(fourth)
    assert sorted(parts) == [2]
    assert parts[2].high_watermark == 2
    assert record_count(parts[2].records) == 2

    # Not moving on: the same records again (the session keeps fetch offset 0).
    fifth = fetch(client, session_id=session, epoch=4)
    assert sorted(answered(fifth)) == [2]

    # Moving on, and forgetting partition 1: partition 1's new records are not answered.
    produce(broker, topic, 1, 1)
    sixth = fetch(client, session_id=session, epoch=5, topic=topic, offsets={2: 2}, forgotten=[1])
    assert answered(sixth) == {}

    # Asking for partition 1 again adds it back.
    seventh = fetch(client, session_id=session, epoch=6, topic=topic, offsets={1: 0})
    parts = answered(seventh)
    assert sorted(parts) == [1]
    assert record_count(parts[1].records) == 1

    # Closing: epoch -1 is a sessionless full fetch; the id is gone afterwards.
    closing = fetch(client, session_id=session, epoch=-1, topic=topic, offsets={3: 0})
    assert (closing.error_code, closing.session_id) == (ErrorCode.NONE, 0)
    assert sorted(answered(closing)) == [3]
    gone = fetch(client, session_id=session, epoch=7)
    assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_high_watermark_move_is_answered(
    broker: BrokerProcess, client: RawClient, topic: str
) -> None:
    produce(broker, topic, 0, 2)
    first = fetch(client, session_id=0, epoch=0, topic=topic, offsets={0: 0, 1: 0})
    session = first.session_id
    assert answered(first)[0].high_watermark == 2
    # Fetching from offset 2 of partition 0 now: no records, but the answer must come when
    # the high watermark moves even if we did not consume (here: we fetch at 2, produce 1).
    assert answered(fetch(client, session_id=session, epoch=1, topic=topic, offsets={0: 2})) == {}
    produce(broker, topic, 0, 1)
    parts = answered(fetch(client, session_id=session, epoch=2))
    assert sorted(parts) == [0]
    assert parts[0].high_watermark == 3


def test_wrong_epoch_closes_the_session(client: RawClient, topic: str) -> None:
    first = fetch(client, session_id=0, epoch=0, topic=topic, offsets={0: 0})
    session = first.session_id
    assert session > 0
    wrong = fetch(client, session_id=session, epoch=5)
    assert (wrong.error_code, wrong.session_id) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    # Closed: even the right epoch is refused now.
    again = fetch(client, session_id=session, epoch=1)
    assert again.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_unknown_session_id(client: RawClient) -> None:
    response = fetch(client, session_id=123456, epoch=1)
    assert (response.error_code, response.session_id) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)


def test_replacing_a_session(client: RawClient, topic: str) -> None:
    first = fetch(client, session_id=0, epoch=0, topic=topic, offsets={0: 0})
    # (id, 0): close that session, open a new one with this full fetch.
    second = fetch(client, session_id=first.session_id, epoch=0, topic=topic, offsets={1: 0})
    assert second.error_code == ErrorCode.NONE
    assert second.session_id not in (0, first.session_id)
    assert sorted(answered(second)) == [1]
    old = fetch(client, session_id=first.session_id, epoch=1)
    assert old.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_sessionless_fetch_is_unchanged(
    client: RawClient, broker: BrokerProcess, topic: str
) -> None:
    produce(broker, topic, 3, 1)
    response = fetch(client, session_id=0, epoch=-1, topic=topic, offsets={3: 0, 0: 0})
    assert response.session_id == 0
    assert sorted(answered(response)) == [0, 3]


def test_sessions_by_topic_id(broker: BrokerProcess, client: RawClient, topic: str) -> None:
    metadata = client.call(
        ApiKey.METADATA,
        12,
        topics=[
            request_class(ApiKey.METADATA).MetadataRequestTopic(
                name=topic, topic_id=uuid.UUID(int=0)
            )
        ],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    topic_id = metadata.topics[0].topic_id
    produce(broker, topic, 1, 2)
    first = fetch(
        client, session_id=0, epoch=0, offsets={0: 0, 1: 0}, version=13, topic_id=topic_id
    )
    assert first.session_id > 0
    assert {t.topic_id for t in first.responses} == {topic_id}
    parts = answered(first)
    assert record_count(parts[1].records) == 2
    session = first.session_id
    produce(broker, topic, 0, 1)
    second = fetch(
        client, session_id=session, epoch=1, offsets={1: 2}, version=13, topic_id=topic_id
    )
    assert [t.topic_id for t in second.responses] == [topic_id]
    assert sorted(answered(second)) == [0]
    # A session made with topic ids cannot be used with names.
    third = fetch(client, session_id=session, epoch=2, version=12)
    assert third.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # An unknown topic id is answered as such, in the session too.
    unknown = uuid.uuid4()
    fourth = fetch(client, session_id=0, epoch=0, offsets={0: 0}, version=13, topic_id=unknown)
    fifth = fetch(client, session_id=fourth.session_id, epoch=1, version=13)
    for response in (fourth, fifth):
        [entry] = response.responses
        assert entry.topic_id == unknown
        assert [p.error_code for p in entry.partitions] == [ErrorCode.UNKNOWN_TOPIC_ID]


def test_cache_slots_bound_the_sessions(broker: BrokerProcess, topic: str) -> None:
    # The broker has 3 slots; consumers evict the least recently used consumer session.
    clients = [RawClient(broker.bootstrap) for _ in range(4)]
    try:
        ids = [
            fetch(c, session_id=0, epoch=0, topic=topic, offsets={0: 0}).session_id for c in clients
        ]
        assert all(ids) and len(set(ids)) == 4
        assert fetch(clients[0], session_id=ids[0], epoch=1).error_code == (
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )
        for c, session in zip(clients[1:], ids[1:], strict=True):
            assert fetch(c, session_id=session, epoch=1).error_code == ErrorCode.NONE
        gauges = scrape(broker)
        assert gauges["kafka_server_fetchsessioncache_numincrementalfetchsessions"] == 3
        assert gauges["kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"] == 3
    finally:
        for c in clients:
            c.close()


def scrape(broker: BrokerProcess) -> dict[str, float]:
    assert broker.metrics_port
    with urllib.request.urlopen(f"http://{broker.host}:{broker.metrics_port}/metrics") as answer:
        text = answer.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("kafka_server_fetchsessioncache")
    }


def test_kafka_python_consumes_through_a_session(broker: BrokerProcess, topic: str) -> None:
    # kafka-python 3 opens a fetch session (epoch 0) and then fetches incrementally, as the
    # Java consumer does: what it reads must be all and only what was produced.
    from kafka import KafkaConsumer, TopicPartition

    produce(broker, topic, 0, 5)
    produce(broker, topic, 3, 4)
    made_before = sessions_made(broker)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        got: dict[int, int] = {}
        produced_more = False
        deadline = time.monotonic() + 60
        while sum(got.values()) < 12 and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                got[tp.partition] = got.get(tp.partition, 0) + len(records)
            if not produced_more and sum(got.values()) >= 9:
                produce(broker, topic, 1, 3)  # a partition idle until now
                produced_more = True
        assert got == {0: 5, 1: 3, 3: 4}
        # A session was made (sessions + evictions only grow when one is).
        assert sessions_made(broker) > made_before
    finally:
        consumer.close()


def sessions_made(broker: BrokerProcess) -> float:
    gauges = scrape(broker)
    return (
        gauges["kafka_server_fetchsessioncache_numincrementalfetchsessions"]
        + gauges["kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total"]
    )
