"""Creating a topic is all or nothing, and a path problem is that topic's problem only.

A file where a partition directory will go fails that topic (with a message naming the path)
and nothing else: no catalog entry, no directory left, the log dir stays online, and another
topic of the same request, and later ones, are created. A crash part way through a creation
(the on-disk state it would leave, made by hand) is completed at the next start, never left
with fewer partitions; a partition the next start cannot make is reported unavailable while
the broker serves the rest. Real ``josefk serve`` processes, confluent-kafka and kafka-python.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import (
    CLIENT_TIMEOUT_S,
    assert_delivered,
    ck_admin,
    ck_create_topic,
    ck_produce,
    make_messages,
    unique_topic,
)
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient

pytestmark = pytest.mark.timeout(180)

T = CLIENT_TIMEOUT_S
CATALOG = "josefk-topics.json"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


def catalog_topics(data_dir: Path) -> dict[str, int]:
    document = json.loads((data_dir / CATALOG).read_text())
    return {t["name"]: t["partitions"] for t in document["topics"]}


def leftovers(data_dir: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.name.startswith(f"{topic}-"))


def partition_counts(broker: BrokerProcess) -> dict[str, int]:
    metadata = ck_admin(broker.bootstrap).list_topics(timeout=T)
    return {name: len(t.partitions) for name, t in metadata.topics.items()}


def log_dir_errors(broker: BrokerProcess) -> list[int]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(T * 1000))
    try:
        described: Any = admin.describe_log_dirs()
    finally:
        admin.close()
    text = repr(described)
    assert str(broker.data_dir) in text
    codes = []
    for per_broker in described if isinstance(described, list) else [described]:
        for entry in _log_dir_entries(per_broker):
            codes.append(int(entry["error_code"]))
    assert codes, f"no log dir in {text}"
    return codes


def _log_dir_entries(described: Any) -> list[dict[str, Any]]:
    if isinstance(described, dict):
        for key in ("results", "log_dirs"):
            if key in described:
                return list(described[key])
    results = getattr(described, "results", None)
    if results is not None:
        return [r if isinstance(r, dict) else {"error_code": r[0]} for r in results]
    raise AssertionError(f"unexpected DescribeLogDirs shape: {described!r}")


def test_a_file_in_the_way_fails_that_topic_only(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    blocked, fine, later = unique_topic("blocked"), unique_topic("fine"), unique_topic("later")
    in_the_way = broker.data_dir / f"{blocked}-1"
    in_the_way.write_bytes(b"not a partition directory")

    admin = ck_admin(broker.bootstrap)
    futures = admin.create_topics(
        [
            NewTopic(blocked, num_partitions=3, replication_factor=1),
            NewTopic(fine, num_partitions=2, replication_factor=1),
        ],
        operation_timeout=T,
        request_timeout=T,
    )
    futures[fine].result(timeout=T)
    with pytest.raises(KafkaException) as info:
        futures[blocked].result(timeout=T)
    error = info.value.args[0]
    assert error.code() == KafkaError.UNKNOWN  # UNKNOWN_SERVER_ERROR (-1)
    assert str(in_the_way) in error.str() and "a file is in the way" in error.str()

    assert leftovers(broker.data_dir, blocked) == [in_the_way.name]
    assert in_the_way.read_bytes() == b"not a partition directory"
    assert blocked not in catalog_topics(broker.data_dir)
    assert blocked not in partition_counts(broker)
    # The log dir is online: it serves the new topic and takes more.
    assert log_dir_errors(broker) == [0]
    assert_delivered(ck_produce(broker.bootstrap, fine, make_messages(3), partition=1))
    ck_create_topic(broker.bootstrap, later, partitions=2)
    assert_delivered(ck_produce(broker.bootstrap, later, make_messages(3), partition=1))

    broker.restart()
    counts = partition_counts(broker)
    assert (counts[fine], counts[later]) == (2, 2)
    assert blocked not in counts
    assert leftovers(broker.data_dir, blocked) == [in_the_way.name]

    in_the_way.unlink()
    ck_create_topic(broker.bootstrap, blocked, partitions=3)
    assert partition_counts(broker)[blocked] == 3
    assert_delivered(ck_produce(broker.bootstrap, blocked, make_messages(2), partition=1))


def crash_part_way(broker: BrokerProcess, topic: str, partitions: int) -> str:
    """Create ``topic``, then leave the log dir as a SIGKILL part way through its creation
    would: the catalog entry written, partition 0's directory made, the others not (or, for
    partition 1, renamed ``-delete`` by a rollback the crash cut short). Returns its id."""
    ck_create_topic(broker.bootstrap, topic, partitions=partitions)
    document = json.loads((broker.data_dir / CATALOG).read_text())
    [topic_id] = [t["topic_id"] for t in document["topics"] if t["name"] == topic]
    broker.kill()
    data = broker.data_dir
    (data / f"{topic}-1").rename(data / f"{topic}-1.{uuid.uuid4().hex}-delete")
    for index in range(2, partitions):
        for child in (data / f"{topic}-{index}").iterdir():
            child.unlink()
        (data / f"{topic}-{index}").rmdir()
    (data / CLEAN_SHUTDOWN_MARKER).unlink(missing_ok=True)
    return str(topic_id)


def test_a_creation_cut_short_by_a_crash_is_completed(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    topic = unique_topic("half")
    crash_part_way(broker, topic, 4)

    broker.start()
    assert partition_counts(broker)[topic] == 4
    # Start-up removes the rollback's "-delete" directory off the event loop, on the
    # scheduler's executor: it may still be there when the broker starts listening.
    expected = [f"{topic}-{i}" for i in range(4)]
    deadline = time.monotonic() + T
    while leftovers(broker.data_dir, topic) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers(broker.data_dir, topic) == expected
    for index in range(4):
        assert_delivered(ck_produce(broker.bootstrap, topic, make_messages(2), partition=index))
        metadata = (broker.data_dir / f"{topic}-{index}" / "partition.metadata").read_text()
        assert metadata.startswith("version: 0\ntopic_id: ")


def test_a_partition_start_up_cannot_make_leaves_the_rest_served(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory()
    topic, other = unique_topic("stuck"), unique_topic("other")
    ck_create_topic(broker.bootstrap, other)
    crash_part_way(broker, topic, 3)
    # Before the restart completes it, something took partition 2's place.
    (broker.data_dir / f"{topic}-2").write_bytes(b"in the way")

    broker.start()
    assert log_dir_errors(broker) == [0]
    assert_delivered(ck_produce(broker.bootstrap, other, make_messages(2)))
    assert_delivered(ck_produce(broker.bootstrap, topic, make_messages(2), partition=1))
    assert "partition " + topic + "-2 is unavailable" in broker.stderr_tail()
