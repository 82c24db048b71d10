"""A broker with many partitions of many segments: creation, and start-up after a clean
shutdown and after SIGKILL, without holding index files open.

A real ``josefk serve``; confluent-kafka (librdkafka) creates a topic of more partitions than
one creation window, with small segments, and writes records to every partition. Each
partition directory gets its ``partition.metadata`` and a ``leader-epoch-checkpoint`` naming
epoch 0 at offset 0 (written with it, off the loop). After a clean restart and after a
SIGKILL the broker maps no index file at all until a client reads or writes (its
``/proc/<pid>/maps`` and ``/proc/<pid>/fd`` name no ``.index``/``.timeindex``), and every
record is still there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import CLIENT_TIMEOUT_S, ck_admin, ck_create_topic, ck_watermarks
from confluent_kafka import Producer

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 70  # more than one creation window (32)
PER_PARTITION = 30


def index_files_held(broker: BrokerProcess) -> list[str]:
    """The index files the broker process has mapped or open."""
    held: set[str] = set()
    with open(f"/proc/{broker.pid}/maps") as maps:
        for line in maps:
            name = line.rsplit(" ", 1)[-1].strip()
            if name.endswith((".index", ".timeindex")):
                held.add(name)
    fd_dir = f"/proc/{broker.pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except FileNotFoundError:
            continue
        if target.endswith((".index", ".timeindex")):
            held.add(target)
    return sorted(held)


def produce_everywhere(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.size": 200})
    for n in range(PER_PARTITION):
        for partition in range(PARTITIONS):
            producer.produce(topic, b"v" * 100, key=b"%d" % n, partition=partition)
        producer.poll(0)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0


def end_offsets(bootstrap: str, topic: str) -> list[int]:
    return [ck_watermarks(bootstrap, topic, p)[1] for p in range(PARTITIONS)]


def test_many_partitions_start_up_without_mapping_indexes(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    topic = "many"
    ck_create_topic(
        broker.bootstrap,
        topic,
        partitions=PARTITIONS,
        config={"segment.bytes": "1024", "segment.index.bytes": "4096"},
    )
    data = Path(broker.data_dir)
    for p in range(PARTITIONS):
        directory = data / f"{topic}-{p}"
        assert (directory / "partition.metadata").read_text().startswith("version: 0\n")
        assert (directory / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    produce_everywhere(broker.bootstrap, topic)
    ends = end_offsets(broker.bootstrap, topic)
    assert ends == [PER_PARTITION] * PARTITIONS
    segments = [len(list((data / f"{topic}-{p}").glob("*.log"))) for p in range(PARTITIONS)]
    assert min(segments) > 3

    broker.restart()  # clean shutdown
    assert index_files_held(broker) == []
    assert end_offsets(broker.bootstrap, topic) == ends

    produce_everywhere(broker.bootstrap, topic)  # unflushed tails, then a crash
    broker.kill()
    broker.start()
    assert index_files_held(broker) == []
    assert end_offsets(broker.bootstrap, topic) == [2 * PER_PARTITION] * PARTITIONS
    metadata = ck_admin(broker.bootstrap).list_topics(topic, timeout=CLIENT_TIMEOUT_S)
    assert len(metadata.topics[topic].partitions) == PARTITIONS


def test_empty_partitions_keep_their_leader_epoch_across_restarts(
    broker_factory: BrokerFactory,
) -> None:
    """An empty log's epoch entry (epoch 0 at offset 0) is removed by the load's truncation
    and assigned again when the partition becomes leader; start-up writes those checkpoints
    side by side in the executor, and each still names the epoch after a clean restart and
    after a SIGKILL."""
    broker = broker_factory()
    topic = "empty"
    ck_create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    data = Path(broker.data_dir)

    def checkpoints() -> set[str]:
        return {
            (data / f"{topic}-{p}" / "leader-epoch-checkpoint").read_text()
            for p in range(PARTITIONS)
        }

    assert checkpoints() == {"0\n1\n0 0\n"}
    broker.restart()
    assert checkpoints() == {"0\n1\n0 0\n"}
    broker.kill()
    broker.start()
    assert checkpoints() == {"0\n1\n0 0\n"}
    metadata = ck_admin(broker.bootstrap).list_topics(topic, timeout=CLIENT_TIMEOUT_S)
    assert all(p.leader >= 0 for p in metadata.topics[topic].partitions.values())


def test_start_up_rewrites_a_missing_or_stale_partition_metadata(
    broker_factory: BrokerFactory,
) -> None:
    """Start-up reads every partition.metadata in the executor; one that is missing or names
    another topic id is written again (on the loop, as at creation)."""
    broker = broker_factory()
    topic = "meta"
    ck_create_topic(broker.bootstrap, topic, partitions=3)
    data = Path(broker.data_dir)
    files = [data / f"{topic}-{p}" / "partition.metadata" for p in range(3)]
    written = [f.read_text() for f in files]
    assert len(set(written)) == 1 and written[0].startswith("version: 0\ntopic_id: ")
    broker.stop()
    files[0].unlink()
    files[1].write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    broker.start()
    assert [f.read_text() for f in files] == written
