"""Durability across process death: SIGKILL during acks=all production, and SIGTERM.

Each test owns its broker (they kill and restart it). An acknowledged message is one whose
delivery report came back without error; after a SIGKILL and a restart on the same data dir
every one of them must be readable at the offset it was acknowledged with, and new appends
continue after the recovered log end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import (
    CLIENT_TIMEOUT_S,
    assert_delivered,
    assert_same_messages,
    ck_admin,
    ck_config,
    ck_consume,
    ck_consumer,
    ck_create_topic,
    ck_produce,
    ck_topic_id,
    ck_watermarks,
    from_confluent,
    make_messages,
    unique_topic,
)
from confluent_kafka import KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewPartitions

pytestmark = pytest.mark.timeout(180)

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
T = CLIENT_TIMEOUT_S
QUIET_LOGGER = logging.getLogger("josefk.tests.rdkafka-quiet")
QUIET_LOGGER.setLevel(logging.CRITICAL)


def produce_through_a_stop(
    broker: BrokerProcess, topic: str, *, stop_after_acks: int, stop: Callable[[], None]
) -> dict[bytes, tuple[int, int]]:
    """Produce with acks=all to partitions 0 and 1 until ``stop_after_acks`` are acknowledged,
    call ``stop`` (which returns once the process is gone) while production goes on, and
    return key -> (partition, offset) of every acknowledged message."""
    acked: dict[bytes, tuple[int, int]] = {}
    failed: list[KafkaError] = []
    stopped = False

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            key, partition, offset = msg.key(), msg.partition(), msg.offset()
            assert key is not None and partition is not None and offset is not None
            acked[key] = (partition, offset)
        elif not stopped:
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
                # Drop the connection-refused noise that follows the stop.
                "logger": QUIET_LOGGER,
            },
        )
    )
    value = b"v" * 200
    sent = 0
    # Keep producing while the broker goes down: the stop lands with requests in flight.
    while len(acked) < stop_after_acks:
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
        assert not failed, f"delivery failed before the stop: {failed[0]!r}"
    stopped = True
    stop()
    for i in range(sent, sent + 500):
        try:
            producer.produce(
                topic, key=f"k{i}".encode(), value=value, partition=i % 2, on_delivery=on_delivery
            )
        except BufferError:
            break
    # The broker is gone by now: what is still queued or in flight can never be acknowledged,
    # so drop it instead of waiting out message.timeout.ms.
    producer.purge(in_queue=True, in_flight=True, blocking=True)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    assert len(acked) >= stop_after_acks
    return dict(acked)


def check_acknowledged_after_restart(
    broker: BrokerProcess, topic: str, acked: dict[bytes, tuple[int, int]]
) -> None:
    """Every acknowledged message at its offset; new appends continue after the log end."""
    for partition in (0, 1):
        expected = {k: off for k, (p, off) in acked.items() if p == partition}
        last_acked = max(expected.values())
        low, high = ck_watermarks(broker.bootstrap, topic, partition)
        assert low == 0
        assert high > last_acked, (
            f"partition {partition}: high watermark {high} after restart, but offset "
            f"{last_acked} was acknowledged (a single-replica leader's HW must reach its "
            f"recovered log end offset)"
        )
        got = ck_consume(broker.bootstrap, topic, partition=partition, count=high, timeout=60)
        by_offset = {m.offset(): m.key() for m in got}
        missing = [(k, off) for k, off in expected.items() if by_offset.get(off) != k]
        assert not missing, (
            f"partition {partition}: {len(missing)} of {len(expected)} acknowledged messages "
            f"lost or moved, first: {missing[:3]}"
        )
        after = make_messages(3, tag=f"after{partition}")
        reports = ck_produce(broker.bootstrap, topic, after, partition=partition, acks="all")
        assert_delivered(reports)
        assert [r.offset for r in reports] == [high, high + 1, high + 2]


def test_sigkill_during_acks_all_production_loses_no_acknowledged_message(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(settings=["log.segment.bytes=262144"])
    topic = unique_topic("crash")
    ck_create_topic(broker.bootstrap, topic, partitions=2)
    acked = produce_through_a_stop(broker, topic, stop_after_acks=4000, stop=broker.kill)
    broker.start()
    check_acknowledged_after_restart(broker, topic, acked)
    broker.stop()


def test_sigterm_during_acks_all_production_exits_cleanly_and_keeps_acknowledged(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(settings=["log.segment.bytes=262144"])
    topic = unique_topic("sigterm-load")
    ck_create_topic(broker.bootstrap, topic, partitions=2)

    def sigterm() -> None:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait_exit() == 0, broker.describe()

    acked = produce_through_a_stop(broker, topic, stop_after_acks=3000, stop=sigterm)
    assert (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    broker.start()
    check_acknowledged_after_restart(broker, topic, acked)
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


def test_sigterm_delivered_twice_still_shuts_down_cleanly(broker_factory: BrokerFactory) -> None:
    """What ``timeout 10 josefk serve`` does when time is up: SIGTERM to the process, then
    to its whole process group (the broker leads its own group here)."""
    broker = broker_factory()
    assert_delivered(ck_produce(broker.bootstrap, unique_topic("twice"), make_messages(5)))
    pid = broker.pid
    announced = "received SIGTERM, shutting down"
    before = broker.log_path.read_text(errors="replace").count(announced)
    os.kill(pid, signal.SIGTERM)
    # Sent together, the two would merge into one pending signal; the second must reach a
    # broker that is already shutting down, as it does under timeout.
    deadline = time.monotonic() + T
    while broker.log_path.read_text(errors="replace").count(announced) == before:
        assert broker.is_alive() and time.monotonic() < deadline, broker.describe()
        time.sleep(0.001)  # polling another process's log: no event to wait on
    with contextlib.suppress(ProcessLookupError):  # the shutdown may already be over
        os.killpg(pid, signal.SIGTERM)
    assert broker.wait_exit() == 0, broker.describe()
    assert (Path(broker.data_dir) / CLEAN_SHUTDOWN_MARKER).exists()


def test_torn_tail_after_sigkill_is_truncated_on_recovery(broker_factory: BrokerFactory) -> None:
    """A half-written batch at the end of the active segment (what a crash mid-write leaves)
    is cut off at start-up; everything before it is served and appends continue from there."""
    broker = broker_factory()
    topic = unique_topic("torn")
    sent = make_messages(100)
    reports = ck_produce(broker.bootstrap, topic, sent, acks="all", batch_num_messages=10)
    assert_delivered(reports)
    broker.kill()
    segment = Path(broker.data_dir) / f"{topic}-0" / f"{0:020d}.log"
    size = segment.stat().st_size
    with segment.open("ab") as log:
        # A batch header promising 4 KiB, then only part of it.
        log.write(b"\x00" * 8 + (4096).to_bytes(4, "big") + b"\x00\x00\x00\x00\x02" + b"\xab" * 100)
    broker.start()
    assert segment.stat().st_size == size, "the torn tail was not truncated"
    assert ck_watermarks(broker.bootstrap, topic) == (0, 100)
    got = ck_consume(broker.bootstrap, topic, count=100)
    assert_same_messages([from_confluent(m) for m in got], sent)
    more = ck_produce(broker.bootstrap, topic, make_messages(2, tag="more"))
    assert [r.offset for r in more] == [100, 101]


def test_admin_changes_survive_a_clean_restart(broker_factory: BrokerFactory) -> None:
    """Topic configs, added partitions, a raised log start offset and a deleted topic are all
    still true after SIGTERM and a new start on the same data dir."""
    broker = broker_factory()
    kept = unique_topic("kept")
    gone = unique_topic("gone")
    ck_create_topic(broker.bootstrap, kept, partitions=1, config={"retention.ms": "7200000"})
    ck_create_topic(broker.bootstrap, gone, partitions=2)
    sent = make_messages(10)
    assert_delivered(ck_produce(broker.bootstrap, kept, sent, batch_num_messages=1))
    assert_delivered(ck_produce(broker.bootstrap, gone, make_messages(3)))
    admin = ck_admin(broker.bootstrap)
    admin.create_partitions([NewPartitions(kept, 3)], request_timeout=T)[kept].result(timeout=T)
    futures = admin.delete_records([TopicPartition(kept, 0, 4)], request_timeout=T)
    next(iter(futures.values())).result(timeout=T)
    admin.delete_topics([gone], request_timeout=T, operation_timeout=T)[gone].result(timeout=T)
    kept_id = ck_topic_id(broker.bootstrap, kept)
    broker.stop()

    broker.start()
    admin = ck_admin(broker.bootstrap)
    metadata = admin.list_topics(timeout=T)
    assert gone not in metadata.topics
    assert not list(broker.data_dir.glob(f"{gone}-*[0-9]")), "deleted topic's logs are back"
    assert len(metadata.topics[kept].partitions) == 3
    assert ck_topic_id(broker.bootstrap, kept) == kept_id
    resource = ConfigResource(ConfigResource.Type.TOPIC, kept)
    entries = admin.describe_configs([resource], request_timeout=T)[resource].result(timeout=T)
    assert entries["retention.ms"].value == "7200000"
    assert ck_watermarks(broker.bootstrap, kept, 0) == (4, 10)
    got = ck_consume(broker.bootstrap, kept, count=6)
    assert_same_messages([from_confluent(m) for m in got], sent[4:])
    broker.stop()


def test_missing_and_damaged_index_files_are_rebuilt(broker_factory: BrokerFactory) -> None:
    """Index files are derived data: gone or cut to a partial entry, the broker rebuilds them
    and offset and timestamp lookups in those segments still find the right records."""
    broker = broker_factory()
    topic = unique_topic("reindex")
    ck_create_topic(broker.bootstrap, topic, config={"segment.bytes": "1048576"})
    count = 12_000
    sent = make_messages(count, tag="ix", value_size=250, headers=False, timestamp_step=10)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, batch_num_messages=200))
    broker.stop()
    partition_dir = broker.data_dir / f"{topic}-0"
    segments = sorted(partition_dir.glob("*.log"))
    assert len(segments) >= 3, [p.name for p in segments]
    first, second = segments[0].with_suffix(""), segments[1].with_suffix("")
    first.with_suffix(".index").unlink()
    first.with_suffix(".timeindex").unlink()
    with second.with_suffix(".index").open("r+b") as index:
        index.truncate(13)  # not a whole number of 8-byte entries
    with second.with_suffix(".timeindex").open("r+b") as index:
        index.truncate(7)

    broker.start()
    second_base = int(second.name)
    for offset in (5, 1234, second_base + 7, count - 3):
        got = ck_consume(broker.bootstrap, topic, offset=offset, count=3)
        assert [m.offset() for m in got] == [offset, offset + 1, offset + 2]
        assert_same_messages([from_confluent(m) for m in got], sent[offset : offset + 3])
    consumer = ck_consumer(broker.bootstrap)
    try:
        for target in (100, second_base + 50):
            query = TopicPartition(topic, 0, sent[target].timestamp - 5)
            (found,) = consumer.offsets_for_times([query], timeout=T)
            assert found.offset == target
    finally:
        consumer.close()
    broker.stop()
