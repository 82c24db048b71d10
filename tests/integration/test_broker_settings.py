"""``josefk serve`` settings as a user passes them: ``--set`` keys with Kafka's names.

A broker with non-default settings (its own process) and a start-up that must refuse a bad
value, naming the key.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, BrokerStartError
from client_helpers import (
    CLIENT_TIMEOUT_S,
    ck_admin,
    ck_config,
    unique_topic,
)
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import ConfigResource, NewTopic

pytestmark = pytest.mark.timeout(120)

T = CLIENT_TIMEOUT_S


@pytest.fixture(scope="module")
def tuned_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("josefk-tuned")
    broker = BrokerProcess(
        base / "data",
        base / "tuned.stderr.log",
        settings=[
            "num.partitions=3",
            "auto.create.topics.enable=false",
            "connections.max.idle.ms=1500",
        ],
    )
    try:
        broker.start()
        yield broker
        broker.stop()
    finally:
        broker.close()


def test_auto_creation_disabled(tuned_broker: BrokerProcess) -> None:
    topic = unique_topic("noauto")
    # A producer's metadata request asks for auto-creation; the broker must decline.
    producer = Producer(ck_config(tuned_broker.bootstrap, **{"enable.idempotence": False}))
    metadata = producer.list_topics(topic=topic, timeout=T)
    error = metadata.topics[topic].error
    assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    admin = ck_admin(tuned_broker.bootstrap)
    assert topic not in admin.list_topics(timeout=T).topics


def test_create_topics_without_partition_count_uses_num_partitions(
    tuned_broker: BrokerProcess,
) -> None:
    topic = unique_topic("defaults")
    admin = ck_admin(tuned_broker.bootstrap)
    futures = admin.create_topics([NewTopic(topic)], request_timeout=T)  # -1 / -1 (KIP-464)
    futures[topic].result(timeout=T)
    metadata = admin.list_topics(topic=topic, timeout=T)
    assert len(metadata.topics[topic].partitions) == 3


async def test_idle_connection_is_closed(tuned_broker: BrokerProcess) -> None:
    reader, writer = await asyncio.open_connection(tuned_broker.host, tuned_broker.port)
    try:
        # Nothing sent: after connections.max.idle.ms the broker hangs up.
        try:
            data = await asyncio.wait_for(reader.read(), T)
        except ConnectionResetError:
            data = b""
        assert data == b""
    finally:
        writer.close()


def test_settings_survive_in_the_broker_config(tuned_broker: BrokerProcess) -> None:
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    admin = ck_admin(tuned_broker.bootstrap)
    entries = admin.describe_configs([resource], request_timeout=T)[resource].result(timeout=T)
    assert entries["num.partitions"].value == "3"
    assert entries["auto.create.topics.enable"].value == "false"


@pytest.mark.parametrize(
    ("setting", "key"),
    [("num.partitions=abc", "num.partitions"), ("num.partitions=0", "num.partitions")],
)
def test_invalid_setting_stops_start_up_naming_the_key(
    tmp_path: Path, setting: str, key: str
) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "bad.stderr.log", settings=[setting])
    try:
        with pytest.raises(BrokerStartError) as info:
            broker.start(timeout=30)
    finally:
        broker.close()
    assert broker.last_exit_code not in (None, 0), info.value
    assert key in broker.stderr_tail(), broker.stderr_tail()


def test_restart_keeps_cluster_id_and_port(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "restart.stderr.log")
    try:
        broker.start()
        admin = ck_admin(broker.bootstrap)
        cluster_id = admin.describe_cluster(request_timeout=T).result(timeout=T).cluster_id
        port = broker.port
        broker.restart()
        assert broker.port == port
        admin = ck_admin(broker.bootstrap)
        assert admin.describe_cluster(request_timeout=T).result(timeout=T).cluster_id == cluster_id
        text = (broker.data_dir / "meta.properties").read_text()
        assert f"cluster.id={cluster_id}" in text
        assert "node.id=1" in text
        broker.stop()
    finally:
        broker.close()


def test_port_in_use_fails_start_up(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        broker = BrokerProcess(tmp_path / "data", tmp_path / "busy.stderr.log")
        broker.port = port
        try:
            with pytest.raises(BrokerStartError):
                broker.start(timeout=30, port_fallback=False)
        finally:
            broker.close()
        assert broker.last_exit_code not in (None, 0)
