"""A network partition that isolates a partition's leader from etcd and the other brokers
while clients still reach it (each broker in a network namespace of its own, netns.py).

Three brokers, RF=3, min.insync.replicas=2, an idempotent acks=all producer running the whole
time. Once the leader is cut off: the other two elect a new leader and production goes on; a
second producer that knows only the isolated leader gets none of its records acknowledged
(the isolated broker cannot reach the ISR, then fences itself when its etcd session lapses).
After the heal the old leader truncates the unacknowledged tail it had taken, rejoins as a
follower, and all three replicas hold the same bytes. The history checker (history.py) finds
none of Jepsen's anomalies for acknowledged writes, and nothing the isolated leader took
while cut off is ever read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_process import BackgroundProducer, LocalCluster, read_all, wait_for
from confluent_kafka.admin import AdminClient, NewTopic
from etcd_server import ETCD, SKIP_REASON
from history import History
from netns import Mesh, unavailable

WHY_NOT = unavailable()
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
    pytest.mark.skipif(WHY_NOT is not None, reason=f"no network namespaces: {WHY_NOT}"),
]
TOPIC = "cut"
# Produces argv[3:] with acks=all to the broker argv[1] and prints the acknowledged values.
STRANDED_CLIENT = """
import json, sys
from confluent_kafka import Producer
acked = []
producer = Producer({"bootstrap.servers": sys.argv[1], "acks": "all",
                     "message.timeout.ms": 4000, "log_level": 0})
for value in sys.argv[3:]:
    producer.produce(sys.argv[2], value.encode(), partition=0,
                     on_delivery=lambda err, msg: err is None and acked.append(msg.value().decode()))
producer.flush(30)
print(json.dumps(acked))
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    mesh = Mesh(3).up()
    try:
        with LocalCluster(
            tmp_path,
            mesh=mesh,
            settings=["replica.lag.time.max.ms=3000", "auto.leader.rebalance.enable=false"],
        ) as running:
            yield running
    finally:
        mesh.down()


def states_seen_by(cluster: LocalCluster, broker: int) -> tuple[int, list[int], list[int]]:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[broker].bootstrap, "log_level": 3})
    partition = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
    return partition.leader, list(partition.replicas), list(partition.isrs)


def test_an_isolated_leader_loses_nothing_acknowledged(cluster: LocalCluster) -> None:
    mesh = cluster.mesh
    assert mesh is not None
    admin = cluster.admin()
    new = NewTopic(TOPIC, 1, replication_factor=3, config={"min.insync.replicas": "2"})
    for future in admin.create_topics([new]).values():
        future.result(30)
    wait_for(
        "the partition led with a full ISR",
        lambda: (s := cluster.partition_states(TOPIC)[0])[0] > 0 and len(s[2]) == 3,
    )
    leader = cluster.leader_of(TOPIC, 0)
    witness = next(b for b in cluster.brokers if b != leader)

    producer = BackgroundProducer(cluster.bootstrap, TOPIC, 1).start()
    isolated_values = [f"isolated-{i}".encode() for i in range(20)]
    try:
        wait_for("records acknowledged before the cut", lambda: producer.acked_count() > 300)
        mesh.isolate(leader)
        # A client on the isolated leader's side of the cut (in its namespace, so it reaches
        # no other broker): the leader may take its appends until its session lapses, but
        # can never commit them.
        stranded = subprocess.Popen(
            [*mesh.exec_prefix(leader), sys.executable, "-c", STRANDED_CLIENT,
             cluster.brokers[leader].bootstrap, TOPIC, *[v.decode() for v in isolated_values]],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for(
            f"a new leader other than {leader}",
            lambda: states_seen_by(cluster, witness)[0] not in (-1, leader),
        )
        out, _ = stranded.communicate(timeout=60)
        isolated_acked = json.loads(out)
        before = producer.acked_count()
        wait_for("records acknowledged by the new leader", lambda: producer.acked_count() > before)
        assert isolated_acked == [], "the isolated leader acknowledged acks=all writes"
    finally:
        mesh.heal(leader)
    try:
        wait_for(
            f"broker {leader} back in the ISR",
            lambda: len(states_seen_by(cluster, witness)[2]) == 3,
            timeout=90,
        )
        before = producer.acked_count()
        wait_for("records acknowledged after the heal", lambda: producer.acked_count() > before)
    finally:
        producer.stop()
    assert producer.failed == []

    polled = read_all(cluster, TOPIC, 1)[0]
    history = History(
        sent=[f"record-{i}".encode() for i in range(producer.sent)] + isolated_values,
        acked=[(p, o, v) for (p, o), v in producer.acked.items()],
        polled=[(0, offset, value) for offset, value in polled],
    )
    assert history.anomalies() == []
    assert not set(isolated_values) & {value for _, value in polled}

    def log_bytes(broker: int) -> bytes:
        directory = cluster.brokers[broker].data_dir / f"{TOPIC}-0"
        return b"".join(f.read_bytes() for f in sorted(directory.glob("*.log")))

    wait_for(
        "identical replicas",
        lambda: log_bytes(1) == log_bytes(2) == log_bytes(3),
    )
