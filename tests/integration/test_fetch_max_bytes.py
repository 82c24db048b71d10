"""``fetch.max.bytes``, the broker's cap on one Fetch answer, with a real ``josefk serve``.

Kafka answers at most min(the request's max_bytes, fetch.max.bytes), the first batch whole
even when it is larger (KIP-74); before, a Fetch asking for 2^31-1 bytes got everything.
"""

from __future__ import annotations

from typing import Any

import pytest
from client_helpers import ck_create_topic, unique_topic
from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class
from josefk.records.batch import split_batches
from josefk.records.builder import BatchBuilder

pytestmark = pytest.mark.timeout(120)

Fetch = request_class(ApiKey.FETCH)
Produce = request_class(ApiKey.PRODUCE)


def _produce_batch(client: RawClient, topic: str, value_size: int) -> None:
    builder = BatchBuilder(base_offset=0)
    builder.append(b"k", b"v" * value_size)
    answer = client.call(
        ApiKey.PRODUCE,
        9,
        transactional_id=None,
        acks=1,
        timeout_ms=10000,
        topic_data=[
            Produce.TopicProduceData(
                name=topic,
                partition_data=[
                    Produce.TopicProduceData.PartitionProduceData(
                        index=0, records=bytes(builder.build())
                    )
                ],
            )
        ],
    )
    assert answer.responses[0].partition_responses[0].error_code == 0


def _fetch_sizes(client: RawClient, topic: str, max_bytes: int, version: int = 12) -> list[int]:
    """The sizes of the batches a Fetch from offset 0 is answered with."""
    answer: Any = client.call(
        ApiKey.FETCH,
        version,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            Fetch.FetchTopic(
                topic=topic,
                partitions=[
                    Fetch.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    partition = answer.responses[0].partitions[0]
    assert partition.error_code == 0
    return [batch.size_in_bytes for batch in split_batches(bytes(partition.records or b""))]


def test_an_answer_is_capped_by_fetch_max_bytes(broker_factory: Any) -> None:
    broker = broker_factory(settings=["fetch.max.bytes=4096"])
    topic = unique_topic("fetch-max")
    ck_create_topic(broker.bootstrap, topic)
    client = RawClient(broker.bootstrap)
    try:
        for _ in range(10):
            _produce_batch(client, topic, 1000)
        # The request asks for 2^31-1 bytes: fetch.max.bytes (4096) decides.
        sizes = _fetch_sizes(client, topic, 2**31 - 1)
        assert len(sizes) == 3 and sum(sizes) <= 4096
        # A smaller request still wins.
        assert len(_fetch_sizes(client, topic, 2500)) == 2
    finally:
        client.close()


def test_a_first_batch_over_the_cap_is_answered_whole(broker_factory: Any) -> None:
    broker = broker_factory(settings=["fetch.max.bytes=1024"])
    topic = unique_topic("fetch-max-first")
    ck_create_topic(broker.bootstrap, topic)
    client = RawClient(broker.bootstrap)
    try:
        _produce_batch(client, topic, 5000)
        _produce_batch(client, topic, 10)
        sizes = _fetch_sizes(client, topic, 2**31 - 1)
        assert len(sizes) == 1 and sizes[0] > 5000
    finally:
        client.close()
