"""The josefk image alone, as ``docker run`` starts it: served from the host with a real client
(confluent-kafka), stopped by ``docker stop`` with a clean shutdown, restarted on its volume."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from docker_support import IMAGE, docker, inspect, wait_healthy

pytestmark = [pytest.mark.timeout(1800), pytest.mark.usefixtures("images")]


def free_port() -> int:
    """A host port free right now (a fixed one was once taken by another process of the same
    machine, and docker run failed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def host_port() -> int:
    return free_port()


@pytest.fixture
def container(host_port: int) -> Iterator[tuple[str, str]]:
    name = f"josefk-test-{uuid.uuid4().hex[:8]}"
    volume = f"{name}-data"
    docker(
        "run", "-d", "--name", name,
        "-p", f"127.0.0.1:{host_port}:9092",
        "-e", f"JOSEFK_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:{host_port}",
        "-v", f"{volume}:/var/lib/josefk",
        IMAGE,
    )  # fmt: skip
    try:
        yield name, volume
    finally:
        docker("rm", "-f", name, check=False)
        docker("volume", "rm", "-f", volume, check=False)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failures: list[str] = []
    for value in values:
        producer.produce(
            topic, value, on_delivery=lambda err, _msg: err and failures.append(str(err))
        )
    assert producer.flush(60) == 0
    assert not failures, failures


def consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(600):
            if len(values) >= count:
                break
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_the_image_serves_stops_cleanly_and_keeps_its_data(
    container: tuple[str, str], host_port: int
) -> None:
    name, volume = container
    wait_healthy([name])
    config = inspect(name)["Config"]
    assert config["User"] == "josefk"
    assert config["Labels"]["org.opencontainers.image.title"] == "josefk"
    bootstrap = f"127.0.0.1:{host_port}"
    values = [f"v{i}".encode() for i in range(500)]
    produce(bootstrap, "orders", values)
    assert consume_all(bootstrap, "orders", len(values)) == values

    # docker stop: SIGTERM, then SIGKILL after 10 s. Exit code 0 (not 137) and the marker
    # mean the broker finished its clean shutdown inside those 10 s.
    docker("stop", "--time", "10", name)
    assert inspect(name)["State"]["ExitCode"] == 0
    listing = docker(
        "run", "--rm", "-v", f"{volume}:/data", "--entrypoint", "ls", IMAGE, "-a", "/data"
    )  # fmt: skip
    assert ".kafka_cleanshutdown" in listing.split()

    docker("start", name)
    wait_healthy([name])
    assert consume_all(bootstrap, "orders", len(values)) == values
