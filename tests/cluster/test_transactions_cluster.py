"""Transactions in a three-broker cluster: the controller creates ``__transaction_state``
(replicated), a transactional id is coordinated by the leader of its partition, and markers
reach partitions led by other brokers through WriteTxnMarkers. When the coordinator dies, the
new leader of the id's partition loads the id and a new producer with the same id fences the
old epoch and aborts its open transaction.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD, SKIP_REASON

from josefk.protocol.api import ApiKey, decode_response, encode_request, request_class
from josefk.protocol.headers import RequestHeader

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]
TOPIC = "payments"
PARTITIONS = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path,
        settings=[
            "offsets.topic.num.partitions=3",
            "transaction.state.log.num.partitions=3",
        ],
    ) as running:
        yield running


def producer(cluster: LocalCluster, transactional_id: str) -> Producer:
    made = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            "log_level": 3,
        }
    )
    made.init_transactions(90)
    return made


def read(cluster: LocalCluster, isolation: str) -> list[bytes]:
    """Every value of every partition up to where ``isolation`` lets a consumer read now."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "verifier",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise KafkaException(error)
            values.append(message.value())
        assert len(at_end) == PARTITIONS, "not every partition reached its end"
        return sorted(values)
    finally:
        consumer.close()


def create_topic(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=3)]).values():
        future.result(30)
    wait_for(
        "__transaction_state created by the controller",
        lambda: cluster.partition_states("__transaction_state"),
    )
    states = wait_for(
        f"{TOPIC} with leaders on several brokers",
        lambda: (
            (s := cluster.partition_states(TOPIC))
            and all(leader >= 0 for leader, _, _ in s.values())
            and s
        ),
    )
    assert len({leader for leader, _, _ in states.values()}) > 1


def send_to_every_partition(made: Producer, prefix: str) -> None:
    for partition in range(PARTITIONS):
        made.produce(TOPIC, f"{prefix}-{partition}".encode(), partition=partition)
    assert made.flush(60) == 0


def test_markers_reach_partitions_led_by_other_brokers(cluster: LocalCluster) -> None:
    create_topic(cluster)
    made = producer(cluster, "cluster-txn")
    made.begin_transaction()
    send_to_every_partition(made, "committed")
    made.commit_transaction(60)
    made.begin_transaction()
    send_to_every_partition(made, "aborted")
    made.abort_transaction(60)

    committed = sorted(f"committed-{p}".encode() for p in range(PARTITIONS))
    aborted = sorted(f"aborted-{p}".encode() for p in range(PARTITIONS))
    assert read(cluster, "read_committed") == committed
    assert read(cluster, "read_uncommitted") == sorted(committed + aborted)


def test_a_new_coordinator_loads_the_id_after_the_old_one_dies(cluster: LocalCluster) -> None:
    create_topic(cluster)
    first = producer(cluster, "failover-txn")
    first.begin_transaction()
    send_to_every_partition(first, "before")
    first.commit_transaction(60)
    first.begin_transaction()
    send_to_every_partition(first, "open")

    # Kill the broker coordinating the id: the leader of its __transaction_state partition.
    victim = _transaction_coordinator(cluster, "failover-txn")
    assert victim > 0
    cluster.brokers[victim].kill()
    wait_for(
        "another transaction coordinator",
        lambda: _transaction_coordinator(cluster, "failover-txn") not in (victim, -1),
    )

    second = producer(cluster, "failover-txn")
    second.begin_transaction()
    send_to_every_partition(second, "after")
    second.commit_transaction(60)
    expected = sorted(
        f"{prefix}-{p}".encode() for prefix in ("before", "after") for p in range(PARTITIONS)
    )
    wait_for("the open transaction aborted", lambda: read(cluster, "read_committed") == expected)


def _transaction_coordinator(cluster: LocalCluster, transactional_id: str) -> int:
    """The broker FindCoordinator names for the id (-1 while none is available)."""
    for broker in cluster.brokers.values():
        if not broker.is_alive():
            continue
        host, port = broker.bootstrap.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                header = RequestHeader(
                    request_api_key=ApiKey.FIND_COORDINATOR,
                    request_api_version=3,
                    correlation_id=1,
                    client_id="txn-cluster-test",
                )
                body = request_class(ApiKey.FIND_COORDINATOR)(key=transactional_id, key_type=1)
                sock.sendall(encode_request(header, body))
                raw = b""
                while len(raw) < 4:
                    raw += sock.recv(4 - len(raw))
                (size,) = struct.unpack(">i", raw)
                data = b""
                while len(data) < size:
                    chunk = sock.recv(size - len(data))
                    if not chunk:
                        break
                    data += chunk
                _, response = decode_response(data, ApiKey.FIND_COORDINATOR, 3)
        except OSError:
            continue
        return int(response.node_id) if response.error_code == 0 else -1
    return -1
