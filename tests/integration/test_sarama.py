"""sarama, a Go client (Debian's golang-github-shopify-sarama-dev, 1.22.1), against a real
``josefk serve``, through tests/go/sarama/main.go built here with Debian's Go.

Each test crosses clients: what sarama produces, confluent-kafka (librdkafka) reads back byte
for byte, and the other way round; a sarama consumer group's commits are read with
confluent-kafka. sarama runs at ``V2_1_0_0`` (Produce v7, Fetch v10), the newest protocol it
knows but one: its older requests are the versions Kafka 4 removed (KIP-896), which josefk
refuses as Kafka 4 does. It also commits with OffsetCommit v1 unless a retention is set, so
the program sets one (a Kafka 4 user of sarama 1.22 must too). Its zstd goes in Produce v3,
which Kafka refuses (zstd needs v7, KIP-110) and so does josefk.

Skips, saying why, without Go or the sarama sources (``scripts/test.sh`` installs Debian's
``golang-go`` and ``golang-github-shopify-sarama-dev``).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from client_helpers import (
    TestMessage,
    assert_same_messages,
    ck_consume,
    ck_create_topic,
    ck_produce,
    ck_watermarks,
    from_confluent,
    make_messages,
    unique_topic,
)
from confluent_kafka import Consumer, TopicPartition

PROGRAM = Path(__file__).resolve().parent.parent / "go" / "sarama" / "main.go"
# Debian installs Go libraries' sources here (GOPATH layout).
GOCODE = Path("/usr/share/gocode")
SARAMA = GOCODE / "src" / "github.com" / "Shopify" / "sarama"
GO = shutil.which("go")
RUN_TIMEOUT_S = 60.0

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        GO is None or not SARAMA.is_dir(),
        reason="sarama's tests need Debian's golang-go and golang-github-shopify-sarama-dev"
        " (scripts/test.sh installs them)",
    ),
]


@pytest.fixture(scope="module")
def sarama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The program, built once per module from Debian's sources (no module download)."""
    assert GO is not None
    base = tmp_path_factory.mktemp("sarama")
    package = base / "gopath" / "src" / "saramaactions"
    package.mkdir(parents=True)
    shutil.copy(PROGRAM, package / "main.go")
    binary = base / "sarama-actions"
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": f"{base / 'gopath'}:{GOCODE}",
        "GOCACHE": str(base / "gocache"),
        "GOFLAGS": "",
    }
    built = subprocess.run(
        [GO, "build", "-o", str(binary), "saramaactions"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, f"go build failed:\n{built.stderr[-3000:]}"
    yield binary


def run(sarama: Path, broker: BrokerProcess, **spec: Any) -> Any:
    """One action; its result, or the test fails with sarama's own error."""
    answer = run_raw(sarama, broker, **spec)
    assert answer["ok"], f"sarama {spec['op']} failed: {answer['error']}"
    return answer["result"]


def run_raw(sarama: Path, broker: BrokerProcess, **spec: Any) -> dict[str, Any]:
    done = subprocess.run(
        [str(sarama), broker.bootstrap],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, f"no answer from sarama (exit {done.returncode}): {done.stderr[-3000:]}"
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def to_sarama(messages: list[TestMessage]) -> list[dict[str, Any]]:
    return [
        {
            "key": _b64(m.key),
            "value": _b64(m.value),
            "headers": [{"key": name, "value": _b64(value)} for name, value in m.headers],
            "timestamp": m.timestamp,
        }
        for m in messages
    ]


def from_sarama(message: dict[str, Any]) -> TestMessage:
    headers = tuple((h["key"], _bytes(h["value"]) or b"") for h in message["headers"])
    return TestMessage(
        _bytes(message["key"]), _bytes(message["value"]), headers, message["timestamp"]
    )


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("acks", [-1, 1])
def test_sarama_produces_and_librdkafka_reads_it_back(
    sarama: Path, broker: BrokerProcess, acks: int, compression: str
) -> None:
    topic = unique_topic(f"go-{compression}-acks{-acks}")
    ck_create_topic(broker.bootstrap, topic)
    sent = make_messages(50, tag=f"go{compression}")
    placed = run(
        sarama,
        broker,
        op="produce",
        topic=topic,
        acks=acks,
        compression=compression,
        messages=to_sarama(sent),
    )
    assert [(p["partition"], p["offset"]) for p in placed] == [(0, i) for i in range(50)]
    got = ck_consume(broker.bootstrap, topic, count=len(sent))
    assert_same_messages([from_confluent(m) for m in got], sent)


def test_sarama_zstd_in_produce_v3_is_refused_as_kafka_refuses_it(
    sarama: Path, broker: BrokerProcess
) -> None:
    """sarama 1.22 sends zstd batches in Produce v3 (fixed in sarama 1.26); zstd needs v7
    (KIP-110), and the broker answers UNSUPPORTED_COMPRESSION_TYPE (76) for the partition
    and appends nothing, as Kafka does since KAFKA-7549."""
    topic = unique_topic("go-zstd")
    ck_create_topic(broker.bootstrap, topic)
    answer = run_raw(
        sarama,
        broker,
        op="produce",
        topic=topic,
        acks=-1,
        compression="zstd",
        messages=to_sarama(make_messages(5, tag="goz")),
    )
    assert not answer["ok"]
    assert "compression type" in answer["error"], answer["error"]
    assert ck_watermarks(broker.bootstrap, topic) == (0, 0)


def test_librdkafka_produces_and_sarama_reads_it_back(sarama: Path, broker: BrokerProcess) -> None:
    topic = unique_topic("go-consume")
    sent = make_messages(80, tag="goc")
    ck_produce(broker.bootstrap, topic, sent, compression_type="lz4", batch_num_messages=25)
    got = run(sarama, broker, op="consume", topic=topic, partition=0, count=len(sent))
    assert [m["offset"] for m in got] == list(range(80))
    assert_same_messages([from_sarama(m) for m in got], sent)


def test_sarama_idempotent_producer_writes_each_record_once(
    sarama: Path, broker: BrokerProcess
) -> None:
    """InitProducerId, then sequenced batches: every record lands once, in order."""
    topic = unique_topic("go-idempotent")
    ck_create_topic(broker.bootstrap, topic)
    sent = make_messages(40, tag="goi", headers=False)
    for _ in range(2):  # two producers, two producer ids, one after the other
        run(
            sarama,
            broker,
            op="produce",
            topic=topic,
            acks=-1,
            idempotent=True,
            messages=to_sarama(sent),
        )
    assert ck_watermarks(broker.bootstrap, topic) == (0, 80)
    got = ck_consume(broker.bootstrap, topic, count=80)
    assert [m.value() for m in got] == [m.value for m in sent] * 2


def test_a_sarama_consumer_group_reads_every_partition_and_commits(
    sarama: Path, broker: BrokerProcess
) -> None:
    """FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetFetch, Fetch and OffsetCommit
    v2 from one sarama member; the commits are read with librdkafka."""
    topic = unique_topic("go-group")
    group = unique_topic("go-group")
    ck_create_topic(broker.bootstrap, topic, partitions=3)
    for partition in range(3):
        ck_produce(
            broker.bootstrap,
            topic,
            make_messages(10, tag=f"g{partition}"),
            partition=partition,
        )
    got = run(sarama, broker, op="group", topic=topic, group=group, count=30)
    assert sorted((m["partition"], m["offset"]) for m in got) == [
        (p, o) for p in range(3) for o in range(10)
    ]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=20)
    finally:
        consumer.close()
    assert [tp.offset for tp in committed] == [10, 10, 10]


def test_sarama_reads_the_cluster_as_its_metadata_and_list_offsets_give_it(
    sarama: Path, broker: BrokerProcess
) -> None:
    topic = unique_topic("go-metadata")
    ck_create_topic(broker.bootstrap, topic, partitions=4)
    ck_produce(broker.bootstrap, topic, make_messages(7, headers=False))
    answer = run(sarama, broker, op="metadata", topic=topic)
    assert answer == {"partitions": [0, 1, 2, 3], "controller": 1, "newest_offset_0": 7}
