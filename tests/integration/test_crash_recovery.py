"""Durability across process death: SIGKILL during acks=all production, and SIGTERM.

Each test owns its broker (they kill and restart it). An acknowledged message is one whose
delivery report came back without error; after a SIGKILL and a restart on the same data dir
every one of them must be readable at the offset it was acknowledged with, and new appends
continue after the recovered log end.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from broker_process import BrokerFactory
from client_helpers import (
    CLIENT_TIMEOUT_S,
    assert_delivered,
    assert_same_messages,
    ck_config,
    ck_consume,
    ck_create_topic,
    ck_produce,
    ck_watermarks,
    from_confluent,
    make_messages,
    unique_topic,
)
from confluent_kafka import KafkaError, Message, Producer

pytestmark = pytest.mark.timeout(180)

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


def test_sigkill_during_acks_all_production_loses_no_acknowledged_message(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(settings=["log.segment.bytes=262144"])
    topic = unique_topic("crash")
    ck_create_topic(broker.bootstrap, topic, partitions=2)

    acked: dict[bytes, tuple[int, int]] = {}  # key -> (partition, offset)
    failed: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            key = msg.key()
            assert key is not None
            acked[key] = (msg.partition(), msg.offset())
        else:
            failed.append(err)

    producer = Producer(
        ck_config(
            broker.bootstrap,
            **{
                "acks": "all",
                "enable.idempotence": False,
                "linger.ms": 2,
                "batch.num.messages": 50,
                "compression.type": "lz4",
                "message.timeout.ms": 8000,
                "request.timeout.ms": 5000,
                "retries": 0,
                "reconnect.backoff.max.ms": 500,
            },
        )
    )
    value = b"v" * 200
    sent = 0
    kill_after_acks = 4000
    # Keep producing while the broker dies: the kill lands with requests in flight.
    while len(acked) < kill_after_acks:
        try:
            producer.produce(
                topic,
                key=f"k{sent}".encode(),
                value=value,
                partition=sent % 2,
                on_delivery=on_delivery,
            )
            sent += 1
        except BufferError:
            producer.poll(0.5)
        producer.poll(0)
        assert not failed, f"delivery failed before the kill: {failed[0]!r}"
    broker.kill()
    for i in range(sent, sent + 500):
        try:
            producer.produce(
                topic, key=f"k{i}".encode(), value=value, partition=i % 2, on_delivery=on_delivery
            )
        except BufferError:
            break
    producer.flush(CLIENT_TIMEOUT_S)
    acked_at_kill = dict(acked)
    assert len(acked_at_kill) >= kill_after_acks

    broker.start()
    for partition in (0, 1):
        expected = {k: off for k, (p, off) in acked_at_kill.items() if p == partition}
        low, high = ck_watermarks(broker.bootstrap, topic, partition)
        assert low == 0
        assert high > max(expected.values()), (
            f"partition {partition}: high watermark {high} after restart, but offset "
            f"{max(expected.values())} was acknowledged (a single-replica leader's HW must "
            f"reach its recovered log end offset)"
        )
        got = ck_consume(broker.bootstrap, topic, partition=partition, count=high, timeout=60)
        by_offset = {m.offset(): m.key() for m in got}
        missing = [(k, off) for k, off in expected.items() if by_offset.get(off) != k]
        assert not missing, (
            f"partition {partition}: {len(missing)} of {len(expected)} acknowledged messages "
            f"lost or moved, first: {missing[:3]}"
        )
        # Offsets continue after the recovered log end.
        after = make_messages(3, tag=f"after{partition}")
        reports = ck_produce(broker.bootstrap, topic, after, partition=partition, acks="all")
        assert_delivered(reports)
        assert [r.offset for r in reports] == [high, high + 1, high + 2]
    broker.stop()


def test_sigterm_exits_cleanly_leaves_marker_and_data_survives_restart(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory()
    topic = unique_topic("graceful")
    sent = make_messages(500, value_size=500)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, acks="all", compression_type="zstd"))
    broker.stop()  # asserts exit code 0
    data_dir = Path(broker.data_dir)
    assert (data_dir / CLEAN_SHUTDOWN_MARKER).exists(), (
        f"no {CLEAN_SHUTDOWN_MARKER} in {data_dir}: {sorted(p.name for p in data_dir.iterdir())}"
    )
    partition_dir = data_dir / f"{topic}-0"
    assert partition_dir.is_dir()
    assert (partition_dir / f"{0:020d}.log").stat().st_size > 0

    old_port = broker.port
    broker.start()
    assert broker.port == old_port, "restart did not get the same port back"
    # Start-up consumes the marker: a crash now must not be mistaken for a clean shutdown.
    assert not (data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    got = ck_consume(broker.bootstrap, topic, count=len(sent))
    assert_same_messages([from_confluent(m) for m in got], sent)
    more = make_messages(2, tag="more")
    reports = ck_produce(broker.bootstrap, topic, more)
    assert [r.offset for r in reports] == [500, 501]


def test_sigint_also_shuts_down_cleanly(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    assert_delivered(ck_produce(broker.bootstrap, unique_topic("sigint"), make_messages(5)))
    broker.send_signal(signal.SIGINT)
    assert broker.wait_exit() == 0
    assert (Path(broker.data_dir) / CLEAN_SHUTDOWN_MARKER).exists()
