"""DescribeTopicPartitions (KIP-966) against a real ``josefk serve``: the named topics in name
order with the partitions Metadata has, paged by the response limit and resumed from the
cursor until every partition came once; every topic when none is named; an unknown topic
named with its error; a cursor outside the named topics refused; the broker's own limit
(``max.request.partition.size.limit``) caps what a client asks for."""

from __future__ import annotations

from typing import Any

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import ck_create_topic, unique_topic
from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

REQUEST = request_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS)


def describe(
    client: RawClient, names: list[str], limit: int, cursor: tuple[str, int] | None = None
) -> Any:
    return client.call(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        0,
        topics=[REQUEST.TopicRequest(name=name) for name in names],
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else REQUEST.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )


def pages(client: RawClient, names: list[str], limit: int) -> list[list[tuple[str, int]]]:
    """Every page of the answer, followed by its cursor: (topic, partition) per page."""
    out: list[list[tuple[str, int]]] = []
    cursor = None
    while True:
        response = describe(client, names, limit, cursor)
        out.append([(t.name, p.partition_index) for t in response.topics for p in t.partitions])
        if response.next_cursor is None:
            return out
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
        assert len(out) < 1000, "the cursor does not move on"


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(settings=["max.request.partition.size.limit=4"])


def test_pages_cover_every_partition_once_in_name_order(broker: BrokerProcess) -> None:
    prefix = unique_topic("dtp")
    b, a = f"{prefix}-b", f"{prefix}-a"
    ck_create_topic(broker.bootstrap, a, partitions=3)
    ck_create_topic(broker.bootstrap, b, partitions=2)
    client = RawClient(broker.bootstrap)
    try:
        got = pages(client, [b, a], limit=2)
        assert got == [[(a, 0), (a, 1)], [(a, 2), (b, 0)], [(b, 1)]]
        # The broker's own limit (4) caps a client's larger one.
        assert pages(client, [a, b], limit=100) == [[(a, 0), (a, 1), (a, 2), (b, 0)], [(b, 1)]]
        response = describe(client, [a], limit=10)
        [topic] = response.topics
        assert topic.error_code == ErrorCode.NONE
        assert not topic.is_internal
        metadata = client.call(
            ApiKey.METADATA,
            12,
            topics=[request_class(ApiKey.METADATA).MetadataRequestTopic(name=a)],
        )
        [described] = metadata.topics
        assert topic.topic_id == described.topic_id
        assert [
            (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) for p in topic.partitions
        ] == [
            (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in described.partitions
        ]
        assert all(p.eligible_leader_replicas == [] for p in topic.partitions)
    finally:
        client.close()


def test_all_topics_unknown_topics_and_a_stray_cursor(broker: BrokerProcess) -> None:
    name = unique_topic("dtp-all")
    ck_create_topic(broker.bootstrap, name, partitions=1)
    client = RawClient(broker.bootstrap)
    try:
        every = [entry for page in pages(client, [], limit=3) for entry in page]
        assert (name, 0) in every
        assert every == sorted(every)
        missing = unique_topic("dtp-missing")
        response = describe(client, [missing, name], limit=10)
        errors = {t.name: t.error_code for t in response.topics}
        assert errors == {missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name: ErrorCode.NONE}
        refused = describe(client, [name], limit=10, cursor=(missing, 0))
        assert [t.error_code for t in refused.topics] == [ErrorCode.INVALID_REQUEST]
        # A limit below one still moves on; a cursor past a topic's end skips to the next.
        assert pages(client, [name], limit=0) == [[(name, 0)]]
        past = describe(client, [name, missing], limit=10, cursor=(name, 5))
        assert [(t.name, len(t.partitions)) for t in past.topics] == [(name, 0), (missing, 0)]
        assert past.next_cursor is None
    finally:
        client.close()
