"""Idempotent producers against a real ``josefk serve``: real clients, retries, restarts.

- kafka-python (idempotence on by default in 3.x), confluent-kafka (enable.idempotence=true)
  and KafkaJS (idempotent: true) produce; every message is stored exactly once, and every
  stored batch carries the producer id InitProducerId gave the client.
- Retries are forced by replaying a captured Produce request frame on a raw socket (what a
  client does when a response is lost): the retry gets the original base offset with no
  error, nothing is written twice; also after a clean restart and after SIGKILL.
- Sequence gaps, fenced epochs, epoch bumps and transactional ids on the wire.
"""

from __future__ import annotations

import json
import shutil
import signal
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import ck_consume, ck_create_topic, ck_produce, make_messages, unique_topic
from kafkajs_support import needs_kafkajs
from raw_client import RawClient as BaseRawClient

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode
from josefk.records import BatchBuilder

pytestmark = pytest.mark.timeout(120)

JS_DIR = Path(__file__).resolve().parent.parent / "js"
NODE = shutil.which("node")
ProduceRequest = request_class(ApiKey.PRODUCE)
TopicData = ProduceRequest.TopicProduceData
PartitionData = TopicData.PartitionProduceData
PRODUCE_VERSION = 9


class RawClient(BaseRawClient):
    """A raw connection with the idempotence calls; frames can be sent again."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap, client_id="idempotence-test")

    def init_producer_id(self, version: int = 4, **fields: Any) -> Any:
        fields.setdefault("transactional_id", None)
        fields.setdefault("transaction_timeout_ms", 60_000)
        return self.call(ApiKey.INIT_PRODUCER_ID, version, **fields)


def produce_frame(
    client: RawClient, topic: str, producer_id: int, epoch: int, sequence: int, count: int
) -> bytes:
    builder = BatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)
    for i in range(count):
        builder.append(b"k", f"{producer_id}/{epoch}/{sequence + i}".encode())
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            TopicData(name=topic, partition_data=[PartitionData(index=0, records=builder.build())])
        ],
    )
    return client.frame(ApiKey.PRODUCE, PRODUCE_VERSION, body)[1]


def send_produce(client: RawClient, frame: bytes) -> tuple[ErrorCode, int]:
    """Send a (possibly replayed) frame; the response's (error, base offset)."""
    _, response = client.send_frame(frame, ApiKey.PRODUCE, PRODUCE_VERSION)
    partition = response.responses[0].partition_responses[0]
    return ErrorCode(partition.error_code), partition.base_offset


def stored_producers(partition_dir: Path) -> list[tuple[int, int, int, int]]:
    """(base offset, producer id, epoch, base sequence) of every batch on disk."""
    out = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + 61 <= len(data):
            base_offset, batch_length = struct.unpack_from(">qi", data, position)
            producer_id, epoch, sequence = struct.unpack_from(">qhi", data, position + 43)
            out.append((base_offset, producer_id, epoch, sequence))
            position += 12 + batch_length
    return out


def log_end_offset(bootstrap: str, topic: str) -> int:
    from client_helpers import ck_watermarks

    return ck_watermarks(bootstrap, topic)[1]


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    raw = RawClient(broker.bootstrap)
    yield raw
    raw.close()


# -- retries on the wire ------------------------------------------------------------------------


def test_a_replayed_produce_request_is_not_written_twice(
    broker: BrokerProcess, client: RawClient
) -> None:
    topic = unique_topic("idem-replay")
    ck_create_topic(broker.bootstrap, topic)
    init = client.init_producer_id()
    assert init.error_code == ErrorCode.NONE and init.producer_epoch == 0
    pid = init.producer_id
    first = produce_frame(client, topic, pid, 0, 0, 3)
    assert send_produce(client, first) == (ErrorCode.NONE, 0)
    second = produce_frame(client, topic, pid, 0, 3, 2)
    assert send_produce(client, second) == (ErrorCode.NONE, 3)
    # The response to `first` was "lost": the client sends the same bytes again.
    assert send_produce(client, first) == (ErrorCode.NONE, 0)
    assert send_produce(client, second) == (ErrorCode.NONE, 3)
    assert log_end_offset(broker.bootstrap, topic) == 5
    values = [m.value() for m in ck_consume(broker.bootstrap, topic, count=5)]
    assert values == [f"{pid}/0/{i}".encode() for i in range(5)]
    stored = stored_producers(broker.data_dir / f"{topic}-0")
    assert stored == [(0, pid, 0, 0), (3, pid, 0, 3)]


def test_gaps_epochs_and_bumps_on_the_wire(broker: BrokerProcess, client: RawClient) -> None:
    topic = unique_topic("idem-rules")
    ck_create_topic(broker.bootstrap, topic)
    pid = client.init_producer_id().producer_id
    assert send_produce(client, produce_frame(client, topic, pid, 0, 0, 2))[0] == ErrorCode.NONE
    gap = produce_frame(client, topic, pid, 0, 5, 1)
    assert send_produce(client, gap) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    bumped = client.init_producer_id(producer_id=pid, producer_epoch=0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, pid, 1)
    bad_start = produce_frame(client, topic, pid, 1, 2, 1)
    assert send_produce(client, bad_start)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send_produce(client, produce_frame(client, topic, pid, 1, 0, 1)) == (ErrorCode.NONE, 2)
    stale = produce_frame(client, topic, pid, 0, 2, 1)
    assert send_produce(client, stale)[0] == ErrorCode.INVALID_PRODUCER_EPOCH
    # Epoch 0 now is a retry of the bump (answered epoch 1 again); after one more bump it is
    # fenced.
    assert client.init_producer_id(producer_id=pid, producer_epoch=0).producer_epoch == 1
    assert client.init_producer_id(producer_id=pid, producer_epoch=1).producer_epoch == 2
    fenced = client.init_producer_id(producer_id=pid, producer_epoch=0)
    assert fenced.error_code == ErrorCode.PRODUCER_FENCED
    assert log_end_offset(broker.bootstrap, topic) == 3


def test_transactional_ids_get_an_id_and_a_bumped_epoch_each_time(client: RawClient) -> None:
    answers = [client.init_producer_id(version, transactional_id="txn") for version in (0, 2, 4, 5)]
    assert [a.error_code for a in answers] == [ErrorCode.NONE] * 4
    assert len({a.producer_id for a in answers}) == 1
    assert [a.producer_epoch for a in answers] == [0, 1, 2, 3]


@pytest.mark.parametrize("how", ["clean", "sigkill"])
def test_deduplication_and_producer_ids_survive_a_restart(
    broker_factory: BrokerFactory, how: str
) -> None:
    broker = broker_factory()
    topic = unique_topic(f"idem-{how}")
    ck_create_topic(broker.bootstrap, topic)
    client = RawClient(broker.bootstrap)
    try:
        pid = client.init_producer_id().producer_id
        frames = [produce_frame(client, topic, pid, 0, seq * 2, 2) for seq in range(3)]
        assert [send_produce(client, f)[1] for f in frames] == [0, 2, 4]
    finally:
        client.close()
    if how == "clean":
        broker.stop()
    else:
        broker.send_signal(signal.SIGKILL)
        broker.wait_exit()
    broker.start()
    client = RawClient(broker.bootstrap)
    try:
        # The last batch is a duplicate still (Kafka keeps the last batch in a snapshot; after
        # SIGKILL the batches after the newest snapshot are replayed).
        assert send_produce(client, frames[-1]) == (ErrorCode.NONE, 4)
        assert log_end_offset(broker.bootstrap, topic) == 6
        gap = produce_frame(client, topic, pid, 0, 9, 1)
        assert send_produce(client, gap)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send_produce(client, produce_frame(client, topic, pid, 0, 6, 1)) == (
            ErrorCode.NONE,
            6,
        )
        new_pid = client.init_producer_id().producer_id
        assert new_pid > pid, "a producer id was handed out twice"
    finally:
        client.close()


# -- real clients -------------------------------------------------------------------------------


def test_kafka_python_idempotent_producer(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    topic = unique_topic("idem-kafka-python")
    ck_create_topic(broker.bootstrap, topic)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, linger_ms=5, batch_size=2048, acks="all"
    )
    try:
        futures = [producer.send(topic, value=f"kp-{i}".encode(), partition=0) for i in range(300)]
        producer.flush(30)
        offsets = [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(10)
    assert offsets == list(range(300))
    check_exactly_once(broker, topic, [f"kp-{i}".encode() for i in range(300)])


def test_confluent_kafka_idempotent_producer(broker: BrokerProcess) -> None:
    topic = unique_topic("idem-confluent")
    ck_create_topic(broker.bootstrap, topic)
    messages = make_messages(500, tag="ck")
    reports = ck_produce(broker.bootstrap, topic, messages, **{"enable.idempotence": True})
    assert [r.error for r in reports if r.error is not None] == []
    assert [r.offset for r in reports] == list(range(500))
    check_exactly_once(broker, topic, [m.value for m in messages])


@needs_kafkajs
def test_kafkajs_idempotent_producer(broker: BrokerProcess) -> None:
    assert NODE is not None
    topic = unique_topic("idem-kafkajs")
    spec = {"brokers": [broker.bootstrap], "topic": topic, "count": 120, "perSend": 10}
    proc = subprocess.run(
        [NODE, str(JS_DIR / "idempotent.mjs"), json.dumps(spec)],
        cwd=JS_DIR,
        capture_output=True,
        timeout=60,
    )
    lines = proc.stdout.decode().strip().splitlines()
    assert lines, f"no output from node: {proc.stderr.decode()[-3000:]}"
    result = json.loads(lines[-1])
    assert result["ok"], result
    assert result["baseOffsets"] == list(range(0, 120, 10))
    check_exactly_once(broker, topic, [f"kafkajs-{i}".encode() for i in range(120)])


def check_exactly_once(broker: BrokerProcess, topic: str, values: list[bytes | None]) -> None:
    """Every value once, in order, and every stored batch from one idempotent producer."""
    assert log_end_offset(broker.bootstrap, topic) == len(values)
    got = [m.value() for m in ck_consume(broker.bootstrap, topic, count=len(values))]
    assert got == values
    stored = stored_producers(broker.data_dir / f"{topic}-0")
    producer_ids = {pid for _, pid, _, _ in stored}
    assert len(producer_ids) == 1 and min(producer_ids) >= 0, stored
    # Sequences follow offsets: batch n starts at the sequence of its first offset.
    assert all(sequence == offset for offset, _, _, sequence in stored), stored
