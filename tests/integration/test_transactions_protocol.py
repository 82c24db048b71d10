"""Transaction APIs version by version, with raw requests built by josefk's codec against a
real ``josefk serve``: the error codes of each API (fencing by version, unknown ids,
unknown partitions, timeouts), AddOffsetsToTxn adding the group's ``__consumer_offsets``
partition, EndTxn and its retry, DescribeTransactions / ListTransactions / DescribeProducers,
WriteTxnMarkers from another coordinator, FindCoordinator for transactional ids, and the
state a SIGKILLed broker reloads (AddOffsetsToTxn and FindCoordinator right after it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import ck_create_topic, unique_topic
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from raw_client import RawClient as BaseRawClient

from josefk.broker.group.offsets_schema import coordinator_partition
from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode
from josefk.records import BatchBuilder

pytestmark = pytest.mark.timeout(120)

OFFSETS_PARTITIONS = 7
SETTINGS = (f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",)


class RawClient(BaseRawClient):
    """A raw connection with the transaction APIs' calls."""

    # -- the transaction calls ----------------------------------------------------------

    def init(self, tid: str, version: int = 4, timeout_ms: int = 60_000, **fields: Any) -> Any:
        return self.call(
            ApiKey.INIT_PRODUCER_ID,
            version,
            transactional_id=tid,
            transaction_timeout_ms=timeout_ms,
            **fields,
        )

    def add_partitions(
        self, tid: str, pid: int, epoch: int, topics: dict[str, list[int]], version: int = 3
    ) -> dict[tuple[str, int], int]:
        Request = request_class(ApiKey.ADD_PARTITIONS_TO_TXN)
        response = self.call(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            version,
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[
                Request.AddPartitionsToTxnTopic(name=name, partitions=ids)
                for name, ids in topics.items()
            ],
        )
        return {
            (topic.name, p.partition_index): p.partition_error_code
            for topic in response.results_by_topic_v3_and_below
            for p in topic.results_by_partition
        }

    def add_offsets(self, tid: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
        return int(
            self.call(
                ApiKey.ADD_OFFSETS_TO_TXN,
                version,
                transactional_id=tid,
                producer_id=pid,
                producer_epoch=epoch,
                group_id=group,
            ).error_code
        )

    def end(self, tid: str, pid: int, epoch: int, committed: bool, version: int = 3) -> int:
        return int(
            self.call(
                ApiKey.END_TXN,
                version,
                transactional_id=tid,
                producer_id=pid,
                producer_epoch=epoch,
                committed=committed,
            ).error_code
        )

    def describe(self, tid: str) -> Any:
        response = self.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[tid])
        return response.transaction_states[0]

    def wait_for_state(self, tid: str, state: str) -> Any:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            described = self.describe(tid)
            if described.transaction_state == state:
                return described
            time.sleep(0.05)  # polling a condition with a deadline
        raise AssertionError(f"{tid} never reached {state}: {described}")


@pytest.fixture(scope="module")
def broker(broker_factory_module: Any) -> BrokerProcess:
    return broker_factory_module


@pytest.fixture(scope="module")
def broker_factory_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("josefk-txn-raw")
    shared = BrokerProcess(base / "data", base / "shared.stderr.log", settings=SETTINGS)
    shared.start()
    yield shared
    try:
        if shared.is_alive():
            shared.stop()
    finally:
        shared.close()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    raw = RawClient(broker.bootstrap)
    yield raw
    raw.close()


def test_init_producer_id_errors(client: RawClient) -> None:
    tid = unique_topic("tid-init")
    assert client.init(tid, timeout_ms=900_001).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert client.init("").error_code == ErrorCode.INVALID_REQUEST
    first = client.init(tid)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
    # KIP-360: naming an older epoch is fenced; the code depends on the version.
    client.init(tid, producer_id=first.producer_id, producer_epoch=0)
    client.init(tid, producer_id=first.producer_id, producer_epoch=1)
    stale = {"producer_id": first.producer_id, "producer_epoch": 0}
    assert client.init(tid, version=4, **stale).error_code == ErrorCode.PRODUCER_FENCED
    assert client.init(tid, version=3, **stale).error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_add_partitions_errors_by_version(client: RawClient, broker: BrokerProcess) -> None:
    topic = unique_topic("txn-raw-add")
    ck_create_topic(broker.bootstrap, topic, partitions=2)
    tid = unique_topic("tid-add")
    init = client.init(tid)
    pid, epoch = init.producer_id, init.producer_epoch
    stale = client.add_partitions(tid, pid, epoch + 1, {topic: [0]}, version=1)
    assert stale == {(topic, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    fenced = client.add_partitions(tid, pid, epoch + 1, {topic: [0]}, version=2)
    assert fenced == {(topic, 0): ErrorCode.PRODUCER_FENCED}
    unmapped = client.add_partitions(tid, pid + 99, epoch, {topic: [0]})
    assert unmapped == {(topic, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    unknown = client.add_partitions(tid, pid, epoch, {topic: [0, 5], "no-such-topic": [0]})
    assert unknown == {
        (topic, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        (topic, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert client.describe(tid).transaction_state == "Empty"
    assert client.add_partitions(tid, pid, epoch, {topic: [0, 1]}) == {
        (topic, 0): ErrorCode.NONE,
        (topic, 1): ErrorCode.NONE,
    }
    described = client.describe(tid)
    assert described.transaction_state == "Ongoing"
    assert [(t.topic, sorted(t.partitions)) for t in described.topics] == [(topic, [0, 1])]


def test_add_offsets_end_txn_and_the_operator_views(
    client: RawClient, broker: BrokerProcess
) -> None:
    topic = unique_topic("txn-raw-end")
    ck_create_topic(broker.bootstrap, topic)
    tid, group = unique_topic("tid-end"), unique_topic("group-end")
    init = client.init(tid)
    pid, epoch = init.producer_id, init.producer_epoch
    assert client.end(tid, pid, epoch, True) == ErrorCode.INVALID_TXN_STATE
    assert client.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): ErrorCode.NONE}
    assert client.add_offsets(tid, pid, epoch, group) == ErrorCode.NONE
    assert client.add_offsets(tid, pid, epoch + 1, group, version=1) == (
        ErrorCode.INVALID_PRODUCER_EPOCH
    )
    described = client.describe(tid)
    offsets_partition = coordinator_partition(group, OFFSETS_PARTITIONS)
    assert sorted((t.topic, list(t.partitions)) for t in described.topics) == sorted(
        [(topic, [0]), ("__consumer_offsets", [offsets_partition])]
    )
    listed = client.call(
        ApiKey.LIST_TRANSACTIONS,
        0,
        state_filters=["Ongoing", "Bogus"],
        producer_id_filters=[pid],
    )
    assert listed.unknown_state_filters == ["Bogus"]
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        (tid, "Ongoing")
    ]

    assert client.end(tid, pid, epoch, True) == ErrorCode.NONE
    client.wait_for_state(tid, "CompleteCommit")
    assert client.end(tid, pid, epoch, True) == ErrorCode.NONE  # a retry
    assert client.end(tid, pid, epoch, False) == ErrorCode.INVALID_TXN_STATE
    assert client.end(tid, pid, epoch + 1, True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert client.end(tid, pid, epoch + 1, True, version=2) == ErrorCode.PRODUCER_FENCED

    # The COMMIT marker went to both partitions: their producer state names the producer.
    producers = client.call(
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        topics=[
            request_class(ApiKey.DESCRIBE_PRODUCERS).TopicRequest(
                name=topic, partition_indexes=[0, 3]
            ),
            request_class(ApiKey.DESCRIBE_PRODUCERS).TopicRequest(
                name="__consumer_offsets", partition_indexes=[offsets_partition]
            ),
        ],
    )
    by_partition = {(t.name, p.partition_index): p for t in producers.topics for p in t.partitions}
    assert by_partition[(topic, 3)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for key in ((topic, 0), ("__consumer_offsets", offsets_partition)):
        answer = by_partition[key]
        assert answer.error_code == ErrorCode.NONE
        assert [
            (s.producer_id, s.producer_epoch, s.current_txn_start_offset)
            for s in answer.active_producers
        ] == [(pid, epoch, -1)]
    missing = client.describe("never-seen")
    assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_write_txn_markers_from_another_coordinator(
    client: RawClient, broker: BrokerProcess
) -> None:
    topic = unique_topic("txn-raw-markers")
    ck_create_topic(broker.bootstrap, topic)
    Request = request_class(ApiKey.WRITE_TXN_MARKERS)
    response = client.call(
        ApiKey.WRITE_TXN_MARKERS,
        1,
        markers=[
            Request.WritableTxnMarker(
                producer_id=4242,
                producer_epoch=0,
                transaction_result=False,
                topics=[
                    Request.WritableTxnMarkerTopic(name=topic, partition_indexes=[0]),
                    Request.WritableTxnMarkerTopic(name="no-such-topic", partition_indexes=[0]),
                ],
                coordinator_epoch=0,
            )
        ],
    )
    results = {
        (t.name, p.partition_index): p.error_code
        for m in response.markers
        for t in m.topics
        for p in t.partitions
    }
    assert results == {
        (topic, 0): ErrorCode.NONE,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_find_coordinator_for_transactional_ids(client: RawClient, broker: BrokerProcess) -> None:
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    found = client.call(ApiKey.FIND_COORDINATOR, 3, key="some-id", key_type=1)
    assert (found.error_code, found.port) == (ErrorCode.NONE, port)
    batched = client.call(ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=["a", ""])
    assert [c.error_code for c in batched.coordinators] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
    ]


def test_state_reloaded_after_sigkill_answers_add_offsets_at_once(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(settings=list(SETTINGS))
    topic = unique_topic("txn-raw-reload")
    ck_create_topic(broker.bootstrap, topic)
    tid, group = unique_topic("tid-reload"), unique_topic("group-reload")
    client = RawClient(broker.bootstrap)
    try:
        init = client.init(tid)
        pid, epoch = init.producer_id, init.producer_epoch
        assert client.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): ErrorCode.NONE}
    finally:
        client.close()
    broker.kill()
    broker.restart()
    client = RawClient(broker.bootstrap)
    try:
        described = client.describe(tid)
        assert (described.transaction_state, described.producer_id) == ("Ongoing", pid)
        group_coordinator = client.call(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)
        assert group_coordinator.error_code == ErrorCode.NONE
        assert client.add_offsets(tid, pid, epoch, group) == ErrorCode.NONE
        assert client.end(tid, pid, epoch, False) == ErrorCode.NONE
        client.wait_for_state(tid, "CompleteAbort")
    finally:
        client.close()


def test_api_versions_advertise_the_transaction_apis(client: RawClient) -> None:
    response = client.call(
        ApiKey.API_VERSIONS,
        3,
        client_software_name="raw-txn-client",
        client_software_version="1",
    )
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[ApiKey.INIT_PRODUCER_ID] == (0, 5)  # not v6: KIP-939's two-phase commit
    assert ranges[ApiKey.ADD_PARTITIONS_TO_TXN] == (0, 5)
    assert ranges[ApiKey.ADD_OFFSETS_TO_TXN] == (0, 4)
    assert ranges[ApiKey.END_TXN] == (0, 4)  # not v5: KIP-890's epoch bump per transaction
    assert ranges[ApiKey.WRITE_TXN_MARKERS] == (1, 2)
    for api in (ApiKey.DESCRIBE_PRODUCERS, ApiKey.DESCRIBE_TRANSACTIONS):
        assert ranges[api] == (0, 0)
    assert ranges[ApiKey.LIST_TRANSACTIONS] == (0, 2)


def test_a_transactional_batch_outside_the_transaction_is_refused(
    client: RawClient, broker: BrokerProcess
) -> None:
    """KIP-890's server-side defence: a producer's first transactional batch on a partition
    its open transaction does not hold (no AddPartitionsToTxn, or after the transaction
    ended) is INVALID_TXN_STATE and nothing is written, so no transaction opens that no
    marker would close; after AddPartitionsToTxn the same batch is appended."""
    topic = unique_topic("txn-raw-verify")
    ck_create_topic(broker.bootstrap, topic, partitions=1)
    tid = unique_topic("tid-verify")
    init = client.init(tid)
    pid, epoch = init.producer_id, init.producer_epoch

    def produce(sequence: int) -> Any:
        builder = BatchBuilder(
            producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True
        )
        builder.append(b"k", b"v%d" % sequence, timestamp=1_700_000_000_000)
        Request = request_class(ApiKey.PRODUCE)
        response = client.call(
            ApiKey.PRODUCE,
            9,
            transactional_id=tid,
            acks=-1,
            timeout_ms=10_000,
            topic_data=[
                Request.TopicProduceData(
                    name=topic,
                    partition_data=[
                        Request.TopicProduceData.PartitionProduceData(
                            index=0, records=builder.build()
                        )
                    ],
                )
            ],
        )
        return response.responses[0].partition_responses[0]

    def end_offsets() -> tuple[int, int]:
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "verify",
                "isolation.level": "read_committed",
            }
        )
        try:
            low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, 0), timeout=20)
            return low, high
        finally:
            consumer.close()

    stray = produce(0)
    assert stray.error_code == ErrorCode.INVALID_TXN_STATE
    assert end_offsets() == (0, 0)
    assert client.describe(tid).transaction_state == "Empty"

    assert client.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): ErrorCode.NONE}
    added = produce(0)
    assert (added.error_code, added.base_offset) == (ErrorCode.NONE, 0)
    assert client.end(tid, pid, epoch, committed=False) == ErrorCode.NONE
    client.wait_for_state(tid, "CompleteAbort")
    # The transaction is over: a late batch of it (sequence 1) may not open another.
    late = produce(1)
    assert late.error_code == ErrorCode.INVALID_TXN_STATE
    assert end_offsets() == (0, 2)  # the aborted record and its marker, nothing after
