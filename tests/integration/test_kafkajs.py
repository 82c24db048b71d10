"""KafkaJS 2.2.4 (node) against a real ``josefk serve``, through tests/js/kafkajs_actions.mjs.

KafkaJS only ships the GZIP codec (Snappy, LZ4 and ZSTD need extra npm packages), so its
produce tests cover none and gzip. Its consumer always joins a group (no manual assignment), so
what KafkaJS produces is read back with confluent-kafka (manual assignment), and the KafkaJS
group consumer has a test of its own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from client_helpers import (
    BASE_TIMESTAMP_MS,
    TestMessage,
    assert_same_messages,
    ck_consume,
    ck_produce,
    from_confluent,
    make_messages,
    unique_topic,
)
from kafkajs_support import needs_kafkajs

JS_DIR = Path(__file__).resolve().parent.parent / "js"
SCRIPT = JS_DIR / "kafkajs_actions.mjs"
NODE = shutil.which("node")
RUN_TIMEOUT_S = 60.0

pytestmark = [
    pytest.mark.timeout(120),
    needs_kafkajs,
]


def run_actions(broker: BrokerProcess, *actions: dict[str, Any]) -> list[Any]:
    """Run the actions; fail with KafkaJS's own error if one of them failed."""
    results = run_actions_raw(broker, *actions)
    for result in results:
        assert result["ok"], f"KafkaJS {result['op']} failed: {json.dumps(result['error'])}"
    assert len(results) == len(actions)
    return [r["result"] for r in results]


def run_actions_raw(broker: BrokerProcess, *actions: dict[str, Any]) -> list[Any]:
    assert NODE is not None
    spec = {"brokers": [broker.bootstrap], "actions": list(actions)}
    proc = subprocess.run(
        [NODE, str(SCRIPT), json.dumps(spec)],
        cwd=JS_DIR,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
    )
    stdout = proc.stdout.decode().strip()
    assert stdout, f"no output from node (exit {proc.returncode}): {proc.stderr.decode()[-3000:]}"
    results: list[Any] = json.loads(stdout.splitlines()[-1])
    return results


def js_messages(messages: list[TestMessage]) -> list[dict[str, Any]]:
    return [
        {
            "key": None if m.key is None else m.key.decode(),
            "value": None if m.value is None else m.value.decode(),
            "timestamp": m.timestamp,
            "headers": {name: value.decode("latin-1") for name, value in m.headers},
        }
        for m in messages
    ]


def text_messages(count: int, tag: str) -> list[TestMessage]:
    """KafkaJS sends strings as UTF-8: keep header values printable so they survive."""
    return [
        TestMessage(m.key, m.value, (("h-index", str(i).encode()),), m.timestamp)
        for i, m in enumerate(make_messages(count, tag=tag, value_size=200))
    ]


def test_admin_create_describe_partitions_delete(broker: BrokerProcess) -> None:
    topic = unique_topic("js-admin")
    created, metadata, configs, _, metadata_after, cluster = run_actions(
        broker,
        {
            "op": "createTopics",
            "topics": [
                {"topic": topic, "numPartitions": 2, "configs": {"retention.ms": "86400000"}}
            ],
        },
        {"op": "fetchTopicMetadata", "topics": [topic]},
        {"op": "describeConfigs", "topic": topic},
        {"op": "createPartitions", "topic": topic, "count": 3},
        {"op": "fetchTopicMetadata", "topics": [topic]},
        {"op": "describeCluster"},
    )
    assert created is True
    (meta,) = metadata["topics"]
    assert meta["name"] == topic
    assert sorted(p["partitionId"] for p in meta["partitions"]) == [0, 1]
    entries = {e["configName"]: e for e in configs["resources"][0]["configEntries"]}
    assert entries["retention.ms"]["configValue"] == "86400000"
    assert len(metadata_after["topics"][0]["partitions"]) == 3
    assert [b["nodeId"] for b in cluster["brokers"]] == [1]
    assert cluster["controller"] == 1
    assert cluster["clusterId"]

    alter, configs_after, _, listed = run_actions(
        broker,
        {"op": "alterConfigs", "topic": topic, "configs": {"retention.ms": "1000000"}},
        {"op": "describeConfigs", "topic": topic},
        {"op": "deleteTopics", "topics": [topic]},
        {"op": "listTopics"},
    )
    assert alter["resources"][0]["errorCode"] == 0
    entries = {e["configName"]: e for e in configs_after["resources"][0]["configEntries"]}
    assert entries["retention.ms"]["configValue"] == "1000000"
    assert topic not in listed


@pytest.mark.parametrize("compression", ["NONE", "GZIP"])
@pytest.mark.parametrize("acks", [-1, 1, 0])
def test_produce_with_kafkajs_consume_with_confluent(
    broker: BrokerProcess, acks: int, compression: str
) -> None:
    topic = unique_topic(f"js-{compression.lower()}-acks{acks}")
    sent = text_messages(100, f"js{compression}{acks}")
    actions: list[dict[str, Any]] = [
        {"op": "createTopics", "topics": [{"topic": topic}]},
        {
            "op": "send",
            "topic": topic,
            "acks": acks,
            "compression": compression,
            "messages": js_messages(sent),
        },
    ]
    if acks != 0:  # with acks=0 there is no answer, the offsets check below does the waiting
        actions.append({"op": "fetchTopicOffsets", "topic": topic})
    results = run_actions(broker, *actions)
    if acks != 0:
        (sent_meta,) = results[1]
        assert sent_meta["errorCode"] == 0
        assert sent_meta["baseOffset"] == "0"
        (offsets,) = results[2]
        assert offsets["high"] == "100" and offsets["low"] == "0"
    got = ck_consume(broker.bootstrap, topic, count=len(sent))
    assert_same_messages([from_confluent(m) for m in got], sent)


def test_offsets_by_timestamp_and_delete_records(broker: BrokerProcess) -> None:
    topic = unique_topic("js-offsets")
    sent = make_messages(30)
    ck_produce(broker.bootstrap, topic, sent, batch_num_messages=10)
    by_time, _, offsets = run_actions(
        broker,
        {
            "op": "fetchTopicOffsetsByTimestamp",
            "topic": topic,
            "timestamp": BASE_TIMESTAMP_MS + 14_500,
        },
        {
            "op": "deleteTopicRecords",
            "topic": topic,
            "partitions": [{"partition": 0, "offset": "12"}],
        },
        {"op": "fetchTopicOffsets", "topic": topic},
    )
    assert by_time == [{"partition": 0, "offset": "15"}]
    (after,) = offsets
    assert after["low"] == "12" and after["high"] == "30"


def test_kafkajs_reads_what_librdkafka_wrote_through_a_group_consumer(
    broker: BrokerProcess,
) -> None:
    """KafkaJS has no manual assignment: its consumer joins a group (FindCoordinator,
    JoinGroup, SyncGroup, Heartbeat, OffsetFetch) before it fetches."""
    topic = unique_topic("js-consume")
    sent = text_messages(20, "jsc")
    ck_produce(broker.bootstrap, topic, sent)
    (got,) = run_actions(
        broker,
        {
            "op": "consume",
            "topic": topic,
            "groupId": unique_topic("js-group"),
            "count": 20,
            "timeoutMs": 20000,
        },
    )
    assert [int(m["offset"]) for m in got] == list(range(20))
    assert [m["key"] for m in got] == [m.key.decode() if m.key else None for m in sent]
    assert [m["value"] for m in got] == [m.value.decode() if m.value else None for m in sent]
    assert [int(m["timestamp"]) for m in got] == [m.timestamp for m in sent]
