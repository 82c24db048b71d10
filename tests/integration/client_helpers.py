"""Client-side helpers shared by the integration tests: test messages and confluent-kafka I/O.

Owns building distinguishable test messages and producing/consuming them with confluent-kafka
(librdkafka), the reference client the other clients are checked against, and the round trips
(produce, consume, a group's commit) the SASL and TLS tests run per client over a secured
listener. Must not import josefk: the broker is reached only over the network.

Every call that waits carries its own timeout; a consumer loop stops at a deadline rather than
sleeping.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, NewTopic

CLIENT_TIMEOUT_S = 20.0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# A base timestamp fixed for the run, so that timestamp lookups are deterministic, and recent:
# the start of the previous hour. A fixed date in the past would fall outside the default
# 7-day retention, and a broker shared by a module for longer than its first retention check
# (30 s after start) would delete a test's records between produce and consume.
BASE_TIMESTAMP_MS = (int(time.time()) // 3600 - 1) * 3_600_000


@dataclass(frozen=True)
class TestMessage:
    """What a producer sent and a consumer must get back, byte for byte."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int

    __test__ = False  # not a pytest test class


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_messages(
    count: int,
    *,
    tag: str = "m",
    value_size: int = 100,
    headers: bool = True,
    base_timestamp: int = BASE_TIMESTAMP_MS,
    timestamp_step: int = 1000,
) -> list[TestMessage]:
    """Distinct keys, compressible but non-trivial values, headers and increasing timestamps.

    Message 0 has a null key and message 1 a null value so null handling is covered too.
    """
    out = []
    for i in range(count):
        key: bytes | None = f"{tag}-key-{i}".encode()
        body = f"{tag}-value-{i}-".encode()
        value: bytes | None = (body * (value_size // len(body) + 1))[:value_size]
        if i == 0:
            key = None
        if i == 1 and count > 2:
            value = None
        hdrs = (
            (("h-index", str(i).encode()), ("h-bin", bytes([i % 256, 0, 255]))) if headers else ()
        )
        out.append(TestMessage(key, value, hdrs, base_timestamp + i * timestamp_step))
    return out


def from_confluent(message: Message) -> TestMessage:
    _, timestamp = message.timestamp()
    headers = tuple((name, value) for name, value in (message.headers() or []))
    return TestMessage(message.key(), message.value(), headers, timestamp)


# ---------------------------------------------------------------------- confluent-kafka


def ck_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 10000,
        "broker.address.family": "v4",
    }
    conf.update({k.replace("_", "."): v for k, v in overrides.items()})
    return conf


def ck_admin(bootstrap: str) -> AdminClient:
    return AdminClient(ck_config(bootstrap))


def ck_describe_configs(
    bootstrap: str, rtype: ConfigResource.Type, name: str
) -> dict[str, ConfigEntry]:
    """DescribeConfigs of one resource through librdkafka (which always asks for synonyms)."""
    resource = ConfigResource(rtype, name)
    admin = ck_admin(bootstrap)  # kept alive until the future resolves
    futures = admin.describe_configs([resource], request_timeout=CLIENT_TIMEOUT_S)
    entries: dict[str, ConfigEntry] = futures[resource].result(timeout=CLIENT_TIMEOUT_S)
    return entries


def ck_create_topic(
    bootstrap: str,
    topic: str,
    *,
    partitions: int = 1,
    config: dict[str, str] | None = None,
) -> None:
    admin = ck_admin(bootstrap)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=CLIENT_TIMEOUT_S,
        request_timeout=CLIENT_TIMEOUT_S,
    )
    futures[topic].result(timeout=CLIENT_TIMEOUT_S)


@dataclass
class Delivery:
    error: KafkaError | None
    partition: int
    offset: int


def ck_produce(
    bootstrap: str,
    topic: str,
    messages: Sequence[TestMessage],
    *,
    partition: int = 0,
    **conf: Any,
) -> list[Delivery]:
    """Produce and flush; one delivery report per message, in send order."""
    config = ck_config(
        bootstrap,
        **{
            "enable.idempotence": False,
            "linger.ms": 5,
            "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000),
            "request.timeout.ms": 10000,
            **conf,
        },
    )
    producer = Producer(config)
    reports: list[Delivery | None] = [None] * len(messages)

    def on_delivery(index: int) -> Any:
        def callback(err: KafkaError | None, msg: Message) -> None:
            reports[index] = Delivery(err, msg.partition(), msg.offset())

        return callback

    for index, m in enumerate(messages):
        while True:
            try:
                producer.produce(
                    topic,
                    key=m.key,
                    value=m.value,
                    partition=partition,
                    timestamp=m.timestamp,
                    headers=list(m.headers) if m.headers else None,
                    on_delivery=on_delivery(index),
                )
                break
            except BufferError:
                producer.poll(1.0)
        producer.poll(0)
    remaining = producer.flush(CLIENT_TIMEOUT_S + 10)
    assert remaining == 0, f"{remaining} messages still undelivered after flush"
    assert all(r is not None for r in reports)
    return [r for r in reports if r is not None]


def assert_delivered(reports: Iterable[Delivery]) -> None:
    errors = [r.error for r in reports if r.error is not None]
    assert not errors, f"{len(errors)} delivery errors, first: {errors[0]!r}"


def ck_consumer(bootstrap: str, **conf: Any) -> Consumer:
    # group.id is mandatory for the Python binding; with assign() and no commits librdkafka
    # never needs the group (it may still look up a coordinator in the background).
    config = ck_config(
        bootstrap,
        **{
            "group.id": "josefk-integration-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            # Verify every batch's CRC: catches a broker that rewrites fields without it.
            "check.crcs": True,
            **conf,
        },
    )
    return Consumer(config)


def ck_consume(
    bootstrap: str,
    topic: str,
    *,
    partition: int = 0,
    offset: int = OFFSET_BEGINNING,
    count: int,
    timeout: float = CLIENT_TIMEOUT_S,
    **conf: Any,
) -> list[Message]:
    """Assign one partition at ``offset`` and read exactly ``count`` messages (or fail)."""
    consumer = ck_consumer(bootstrap, **conf)
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        got: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=min(1000, count - len(got)), timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(err)
                got.append(msg)
        assert len(got) == count, (
            f"consumed {len(got)} of {count} messages from {topic}[{partition}] "
            f"at offset {offset} within {timeout:.0f}s"
        )
        return got
    finally:
        consumer.close()


def ck_watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    consumer = ck_consumer(bootstrap)
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=CLIENT_TIMEOUT_S, cached=False
        )
        return int(low), int(high)
    finally:
        consumer.close()


def assert_same_messages(got: Sequence[TestMessage], sent: Sequence[TestMessage]) -> None:
    assert len(got) == len(sent), f"got {len(got)} messages, sent {len(sent)}"
    for index, (g, s) in enumerate(zip(got, sent, strict=True)):
        assert g == s, f"message {index} differs:\n got  {g!r}\n sent {s!r}"


def ck_topic_id(bootstrap: str, topic: str) -> str:
    """The topic's id as DescribeTopics (Metadata with topic ids) reports it."""
    admin = ck_admin(bootstrap)
    futures = admin.describe_topics(TopicCollection([topic]), request_timeout=CLIENT_TIMEOUT_S)
    description = futures[topic].result(timeout=CLIENT_TIMEOUT_S)
    topic_id = str(description.topic_id)
    assert topic_id and topic_id != "AAAAAAAAAAAAAAAAAAAAAA", f"{topic} has no topic id"
    return topic_id


def ck_read_partition(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value of partition 0 up to where ``isolation`` lets a consumer read now (the
    last stable offset for read_committed, the high watermark otherwise)."""
    consumer = Consumer(
        ck_config(
            bootstrap,
            **{
                "group.id": "josefk-integration-unused",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "enable.partition.eof": True,
                "isolation.level": isolation,
                "fetch.wait.max.ms": 100,
                "check.crcs": True,
            },
        )
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return values
                raise KafkaException(err)
            values.append(msg.value())
        raise AssertionError(f"no end of {topic}[0] ({isolation}) within {CLIENT_TIMEOUT_S}s")
    finally:
        consumer.close()


def ck_group_round_trip(
    bootstrap: str, plaintext: str, topic: str, messages: Sequence[TestMessage], **auth: Any
) -> None:
    """A secured listener's whole confluent-kafka path: create ``topic`` (at ``plaintext``),
    produce ``messages`` at ``bootstrap``, read them back by assignment, then in a consumer
    group that commits its position."""
    ck_create_topic(plaintext, topic)
    assert_delivered(ck_produce(bootstrap, topic, messages, **auth))
    got = ck_consume(bootstrap, topic, count=len(messages), **auth)
    assert [m.value() for m in got] == [m.value for m in messages]
    consumer = Consumer(
        ck_config(
            bootstrap,
            **{
                "group.id": f"group-{topic}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **auth,
            },
        )
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes | None] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(values) < len(messages) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert values == [m.value for m in messages]
        committed = consumer.commit(asynchronous=False)
        assert committed is not None and committed[0].offset == len(messages)
    finally:
        consumer.close()


def kafka_python_round_trip(bootstrap: str, plaintext: str, topic: str, **auth: Any) -> None:
    """kafka-python over a secured listener: create ``topic`` (at ``plaintext``), produce ten
    values, read them back in a consumer group and commit."""
    from kafka import KafkaConsumer, KafkaProducer

    ck_create_topic(plaintext, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **auth)
    try:
        for i in range(10):
            producer.send(topic, value=f"v{i}".encode(), partition=0).get(timeout=CLIENT_TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"group-{topic}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(CLIENT_TIMEOUT_S * 1000),
        **auth,
    )
    try:
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == 10:
                break
        consumer.commit()
    finally:
        consumer.close()
    assert values == [f"v{i}".encode() for i in range(10)]


def commit_record(consumer: Consumer, message: Any) -> None:
    """A synchronous commit of one record, sent again on STALE_MEMBER_EPOCH: the member's
    heartbeat may move its epoch on while the commit is in flight (Kafka 4 answers such a
    commit STALE_MEMBER_EPOCH too; KIP-1251 relaxes it later). The record's partition is
    still this member's: a revocation is only acknowledged from poll, not from here."""
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while True:
        try:
            consumer.commit(message=message, asynchronous=False)
            return
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() != KafkaError.STALE_MEMBER_EPOCH or time.monotonic() > deadline:
                raise
