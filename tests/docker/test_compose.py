"""The compose test cluster (docker-compose.yml: etcd and three brokers) against the real
engine: acknowledged writes survive a killed leader and a broker cut from the network, a group
is shared by a consumer in a container and one on the host, and ``down -v`` leaves nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from docker_support import IMAGE, NOTES, Compose, docker, wait_healthy

pytestmark = [pytest.mark.timeout(1800), pytest.mark.usefixtures("images")]

# Letters only: compose 1.x drops other characters from project names, v2 keeps them.
PROJECT = "josefkit"
NETWORK = f"{PROJECT}_default"
BROKERS = ("broker1", "broker2", "broker3")
BOOTSTRAP = "localhost:19092,localhost:29092,localhost:39092"


@pytest.fixture(scope="module")
def compose(images: None) -> Iterator[Compose]:
    compose = Compose(PROJECT)
    NOTES.append(f"compose tool: {compose.tool}")
    compose("down", "-v", "--remove-orphans", check=False)
    try:
        # The console's health check asks its own /api/overview, which it serves once it
        # has sampled the brokers.
        compose.up(["etcd", *BROKERS, "console"])
        yield compose
    finally:
        compose("down", "-v", "--remove-orphans", check=False)
    assert compose.leftovers() == [], "docker compose down -v left these behind"


def wait_registered(count: int = 3, timeout: float = 180) -> None:
    """Until the cluster's metadata lists ``count`` brokers: a broker cut off and reconnected
    registers again on its own schedule, and Docker still calls it healthy for the few
    checks it takes to notice otherwise."""
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    deadline = time.monotonic() + timeout
    brokers: list[int] = []
    while time.monotonic() < deadline:
        try:
            brokers = sorted(admin.list_topics(timeout=10).brokers)
        except Exception:  # noqa: BLE001  the cluster may not answer yet: ask again
            brokers = []
        if len(brokers) == count:
            return
        time.sleep(0.5)
    raise AssertionError(f"the cluster lists brokers {brokers}, not {count} of them")


def create_topic(name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    (future,) = admin.create_topics([NewTopic(name, num_partitions=partitions)]).values()
    future.result(60)


def leaders(topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    metadata = admin.list_topics(topic, timeout=30).topics[topic]
    return {p.id: p.leader for p in metadata.partitions.values()}


class AckedProducer:
    """An acks=all idempotent producer that remembers what was acknowledged, per partition."""

    def __init__(self, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.failed = 0
        self.sent = 0
        self.producer = Producer(
            {
                "bootstrap.servers": BOOTSTRAP,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 180_000,
            }
        )

    def _delivered(self, err: object, message: object) -> None:
        if err is None:
            self.acked[message.partition()].append(message.value())  # type: ignore[attr-defined]
        else:
            self.failed += 1

    def phase(self, label: str, count: int = 300) -> None:
        for _ in range(count):
            value = f"{label}:{self.sent}".encode()
            self.producer.produce(
                self.topic,
                value,
                partition=self.sent % self.partitions,
                on_delivery=self._delivered,
            )
            self.sent += 1
            self.producer.poll(0)
        assert self.producer.flush(240) == 0, f"{label}: messages still undelivered"


def read_partition(topic: str, partition: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": BOOTSTRAP, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        values: list[bytes] = []
        offset = low
        deadline = time.monotonic() + 120
        while offset < high and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
                offset = message.offset() + 1
        return values
    finally:
        consumer.close()


def test_acked_writes_survive_a_killed_leader_and_a_cut_broker(compose: Compose) -> None:
    topic = "acked"
    create_topic(topic, 3)
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    replicas = admin.list_topics(topic, timeout=30).topics[topic].partitions[0].replicas
    assert len(replicas) == 3  # the compose default replication factor

    producer = AckedProducer(topic, 3)
    producer.phase("before")

    leader = compose.container(f"broker{leaders(topic)[0]}")
    docker("kill", leader)
    producer.phase("leader-killed")
    docker("start", leader)
    wait_healthy([leader])
    wait_registered()
    producer.phase("leader-back")

    cut_id = next(b for b in (1, 2, 3) if compose.container(f"broker{b}") != leader)
    cut = compose.container(f"broker{cut_id}")
    docker("network", "disconnect", NETWORK, cut)
    producer.phase("broker-cut")
    docker("network", "connect", "--alias", f"broker{cut_id}", NETWORK, cut)
    wait_healthy([cut])
    wait_registered()
    producer.phase("reconnected")

    NOTES.append(
        f"compose cluster: {producer.sent} sent with acks=all through a killed leader and a cut "
        f"broker, {sum(map(len, producer.acked.values()))} acknowledged, all read back in order"
    )
    for partition, acked in producer.acked.items():
        read = read_partition(topic, partition)
        acked_set = set(acked)
        # Every acknowledged message is there, once, in the order it was acknowledged.
        assert [v for v in read if v in acked_set] == acked, f"partition {partition}"


def josefk_cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "josefk", "-b", BOOTSTRAP.split(",")[0], *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_group_is_shared_by_a_container_and_the_host(compose: Compose) -> None:
    topic = "shared"
    wait_registered()
    create_topic(topic, 4)
    in_container = f"josefk-consumer-{uuid.uuid4().hex[:6]}"
    docker(
        "run", "-d", "--name", in_container, "--network", NETWORK, "--entrypoint", "josefk",
        IMAGE, "-b", "broker1:9092,broker2:9092", "consume", topic, "--group", "both",
    )  # fmt: skip
    host = Consumer(
        {"bootstrap.servers": BOOTSTRAP, "group.id": "both", "auto.offset.reset": "earliest"}
    )
    try:
        host.subscribe([topic])
        deadline = time.monotonic() + 180
        members: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            host.poll(0.5)
            if len(host.assignment()) == 2:
                members = json.loads(josefk_cli("groups", "describe", "both", "--json"))["members"]
                if len(members) == 2 and all(m["assignment"] for m in members):
                    break
        assert len(host.assignment()) == 2, host.assignment()
        assert len(members) == 2, members
        clients = sorted(str(m["client_id"]) for m in members)
        assert "josefk-cli" in clients, clients
    finally:
        host.close()
        docker("rm", "-f", in_container, check=False)
