"""A handler that raises is answered, not left hanging: every partition or resource of the
request carries the error (UNKNOWN_SERVER_ERROR, or KAFKA_STORAGE_ERROR for a failed disk),
the failure is counted, and the same connection serves the next request.

An in-process Broker with injected faults (fakes only for the fault itself); requests go over
a real socket through josefk's own protocol connection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from josefk.broker.server import Broker
from josefk.client.connection import BrokerConnection
from josefk.config.broker import BrokerConfig
from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode
from josefk.records import BatchBuilder
from josefk.storage.errors import KafkaStorageError

pytestmark = pytest.mark.timeout(60)


class Boom(RuntimeError):
    pass


def fail(*args: Any, **kwargs: Any) -> Any:
    raise Boom("injected failure")


async def fail_in_coroutine(*args: Any, **kwargs: Any) -> Any:
    raise Boom("injected failure")


async def fail_async(*args: Any, **kwargs: Any) -> Any:
    raise KafkaStorageError("injected disk failure", path="/dev/null")


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "offsets.topic.num.partitions": "2",
            "josefk.metrics.port": "0",
        }
    )
    running = Broker(config)
    await running.start()
    running.local_topics.create_topic_now("t", 1, {})  # type: ignore[union-attr]
    yield running
    await running.stop(1)


async def connect(broker: Broker) -> BrokerConnection:
    endpoint = broker.endpoints[0]
    return await BrokerConnection.open(
        endpoint.host, endpoint.port, node_id=0, client_id="faults", timeout_s=10
    )


def produce_request() -> Any:
    P = request_class(ApiKey.PRODUCE)
    builder = BatchBuilder(base_offset=0)
    builder.append(b"k", b"v", timestamp=1_700_000_000_000)
    data = P.TopicProduceData.PartitionProduceData(index=0, records=memoryview(builder.build()))
    return P(
        acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", partition_data=[data])]
    )


def fetch_request() -> Any:
    F = request_class(ApiKey.FETCH)
    partition = F.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)
    return F(max_wait_ms=0, min_bytes=0, topics=[F.FetchTopic(topic="t", partitions=[partition])])


def metadata_request() -> Any:
    M = request_class(ApiKey.METADATA)
    return M(topics=[M.MetadataRequestTopic(name="t")])


def create_topics_request() -> Any:
    C = request_class(ApiKey.CREATE_TOPICS)
    return C(topics=[C.CreatableTopic(name="new", num_partitions=1, replication_factor=1)])


def list_offsets_request() -> Any:
    L = request_class(ApiKey.LIST_OFFSETS)
    partition = L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)
    return L(replica_id=-1, topics=[L.ListOffsetsTopic(name="t", partitions=[partition])])


def errors_of(api_key: int, response: Any) -> list[int]:
    if api_key == ApiKey.PRODUCE:
        return [p.error_code for t in response.responses for p in t.partition_responses]
    if api_key == ApiKey.FETCH:
        return [p.error_code for t in response.responses for p in t.partitions]
    if api_key == ApiKey.METADATA:
        return [t.error_code for t in response.topics]
    if api_key == ApiKey.CREATE_TOPICS:
        return [t.error_code for t in response.topics]
    return [p.error_code for t in response.topics for p in t.partitions]


FAMILIES = [
    (ApiKey.PRODUCE, produce_request, "append_records", fail, ErrorCode.UNKNOWN_SERVER_ERROR),
    (ApiKey.FETCH, fetch_request, "fetch", fail_async, ErrorCode.KAFKA_STORAGE_ERROR),
    (ApiKey.METADATA, metadata_request, "catalog", None, ErrorCode.UNKNOWN_SERVER_ERROR),
    (
        ApiKey.CREATE_TOPICS,
        create_topics_request,
        "host_partitions_off_loop",
        fail_in_coroutine,
        ErrorCode.UNKNOWN_SERVER_ERROR,
    ),
    (
        ApiKey.LIST_OFFSETS,
        list_offsets_request,
        "get_partition",
        fail,
        ErrorCode.UNKNOWN_SERVER_ERROR,
    ),
]


@pytest.mark.parametrize(
    ("api_key", "make_request", "target", "fault", "expected"),
    FAMILIES,
    ids=[ApiKey(f[0]).name for f in FAMILIES],
)
async def test_a_failing_handler_is_answered_and_the_connection_lives(
    broker: Broker,
    monkeypatch: pytest.MonkeyPatch,
    api_key: int,
    make_request: Any,
    target: str,
    fault: Any,
    expected: ErrorCode,
) -> None:
    replicas = broker.replica_manager
    assert replicas is not None
    if target == "catalog":

        class BrokenCatalog:
            def __getattr__(self, name: str) -> Any:
                return fail

            def __contains__(self, name: str) -> bool:
                return fail()  # type: ignore[no-any-return]

        monkeypatch.setattr(replicas, "catalog", BrokenCatalog())
    else:
        monkeypatch.setattr(replicas, target, fault)
    conn = await connect(broker)
    try:
        response = await conn.request(api_key, make_request(), timeout_s=10)
        assert errors_of(api_key, response) == [expected]
        # The same connection goes on serving.
        versions = await conn.request(ApiKey.API_VERSIONS, request_class(ApiKey.API_VERSIONS)())
        assert versions.error_code == 0
    finally:
        conn.close()
    assert broker.metrics is not None
    sample = broker.metrics.registry.get_sample_value(
        "kafka_network_requestmetrics_errors_total",
        {"request": ApiKey(api_key).name.title().replace("_", ""), "error": expected.name},
    )
    # Once per error code the answer carries, as Kafka's errorCounts has it (Fetch: the
    # top-level error and the partition's).
    carried = 2 if api_key == ApiKey.FETCH else 1
    assert sample == carried
