"""josefk.testing: the brokers and fixtures applications test against.

The pytest plugin is checked the way an application meets it: pytest run on examples/ with
no conftest.py, the fixtures coming from the pytest11 entry point of the installed package.
The context managers are checked directly, with a real client (confluent-kafka)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from josefk.testing import ETCD_MISSING, JosefkBroker, JosefkCluster, etcd_binary

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "t", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    for _ in range(600):
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            values.append(message.value())
            if len(values) == count:
                break
    consumer.close()
    return values


# A pytest process of its own that starts brokers (and etcd where installed): the slow tier's,
# like every test that starts processes (tests/conftest.py sees only Popen-style starts).
@pytest.mark.slow
def test_the_example_runs_on_the_entry_point_fixtures(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOSEFK_", "PYTEST_"))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "examples" / "test_with_josefk.py"),
         "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=200, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    expected = "3 passed" if etcd_binary() is not None else "2 passed, 1 skipped"
    assert expected in result.stdout


def test_a_broker_as_a_context_manager(tmp_path: Path) -> None:
    with JosefkBroker() as broker:
        owned = broker.data_dir
        topic = broker.create_topic("ctx", partitions=2)
        produce(broker.bootstrap, topic, [b"a", b"b"])
        assert sorted(consume(broker.bootstrap, topic, 2)) == [b"a", b"b"]
    assert not owned.exists()  # a temporary data dir goes with the broker

    # A given data dir is kept: stopped and started again, the records are still there.
    kept = JosefkBroker(tmp_path / "kept", settings={"num.partitions": "1"})
    with kept:
        kept.create_topic("durable")
        produce(kept.bootstrap, "durable", [b"kept"])
    with kept:
        kept.wait_for_topic("durable")
        assert consume(kept.bootstrap, "durable", 1) == [b"kept"]


def test_a_port_in_use_fails_the_start() -> None:
    with JosefkBroker() as first:
        second = JosefkBroker(port=first.port)
        with pytest.raises(Exception, match="already in use"):
            second.start()


@pytest.mark.skipif(etcd_binary() is None, reason=ETCD_MISSING)
def test_a_three_broker_cluster() -> None:
    with JosefkCluster() as cluster:
        assert cluster.bootstrap.count(",") == 2
        topic = cluster.create_topic("replicated", partitions=3, replication_factor=3)
        metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=30)
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert all(len(p.replicas) == 3 for p in metadata.topics[topic].partitions.values())
        produce(cluster.bootstrap, topic, [b"x", b"y", b"z"])
        assert sorted(consume(cluster.bootstrap, topic, 3)) == [b"x", b"y", b"z"]
