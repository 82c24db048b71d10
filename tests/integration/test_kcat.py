"""kcat (Debian's build, its own librdkafka) against a real ``josefk serve``.

Produce with ``-P``, consume with ``-C -e -o ...``, list metadata with ``-L``, every codec via
``-z``; and cross-checked with confluent-kafka in both directions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
from broker_process import BrokerProcess
from client_helpers import (
    CODECS,
    assert_delivered,
    ck_consume,
    ck_create_topic,
    ck_produce,
    make_messages,
    unique_topic,
)

KCAT = shutil.which("kcat")
pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)"),
]

RUN_TIMEOUT_S = 60.0


def kcat(broker: BrokerProcess, *args: str, stdin: bytes | None = None) -> str:
    assert KCAT is not None
    cmd = [KCAT, "-b", broker.bootstrap, "-X", "broker.address.family=v4", *args]
    result = subprocess.run(cmd, input=stdin, capture_output=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, (
        f"{' '.join(cmd)} exited {result.returncode}\nstderr: {result.stderr.decode(errors='replace')}"
    )
    return result.stdout.decode()


def kcat_consume(broker: BrokerProcess, topic: str, *, offset: str = "beginning") -> list[Any]:
    out = kcat(broker, "-C", "-t", topic, "-p", "0", "-o", offset, "-e", "-J", "-q")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_metadata_listing(broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-meta")
    ck_create_topic(broker.bootstrap, topic, partitions=3)
    metadata = json.loads(kcat(broker, "-L", "-J"))
    assert [b["id"] for b in metadata["brokers"]] == [1]
    assert metadata["brokers"][0]["name"] == broker.bootstrap
    topics = {t["topic"]: t for t in metadata["topics"]}
    assert topic in topics
    partitions = topics[topic]["partitions"]
    assert sorted(p["partition"] for p in partitions) == [0, 1, 2]
    assert all(p["leader"] == 1 and p["replicas"] == [{"id": 1}] for p in partitions)
    # Asking for one topic only.
    single = json.loads(kcat(broker, "-L", "-J", "-t", topic))
    assert [t["topic"] for t in single["topics"]] == [topic]


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_with_codec(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"kcat-{codec}")
    ck_create_topic(broker.bootstrap, topic)
    lines = [f"key-{i}:{codec}-value-{i}-" + "x" * (i % 50) for i in range(200)]
    kcat(
        broker,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-K",
        ":",
        "-z",
        codec,
        "-H",
        "origin=kcat",
        "-X",
        "acks=all",
        stdin="\n".join(lines).encode() + b"\n",
    )
    got = kcat_consume(broker, topic)
    assert [m["offset"] for m in got] == list(range(200))
    assert [f"{m['key']}:{m['payload']}" for m in got] == lines
    assert all(m["headers"] == ["origin", "kcat"] for m in got)
    # And librdkafka through Python reads the same bytes.
    via_ck = ck_consume(broker.bootstrap, topic, count=200)
    assert [(m.key() or b"") + b":" + (m.value() or b"") for m in via_ck] == [
        line.encode() for line in lines
    ]


def test_consume_from_offset_and_end(broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-offset")
    sent = make_messages(30, headers=False)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, batch_num_messages=4))
    got = kcat_consume(broker, topic, offset="17")
    assert [m["offset"] for m in got] == list(range(17, 30))
    assert [m["key"] for m in got] == [s.key.decode() for s in sent[17:] if s.key is not None]
    assert [m["ts"] for m in got] == [s.timestamp for s in sent[17:]]
    # Relative to the end: the last 5.
    tail = kcat_consume(broker, topic, offset="-5")
    assert [m["offset"] for m in tail] == list(range(25, 30))


def test_query_offset_by_timestamp(broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-query")
    sent = make_messages(20, headers=False)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, batch_num_messages=6))
    out = kcat(broker, "-Q", "-J", "-t", f"{topic}:0:{sent[13].timestamp - 1}")
    answer = json.loads(out)
    # {"<topic>": {"topic": ..., "0": {"partition": 0, "offset": 13}}}
    assert answer[topic]["0"]["offset"] == 13
