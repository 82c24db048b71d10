"""confluent-kafka (librdkafka) against a real ``josefk serve``: admin, produce, consume.

One broker for the module; every test uses its own topics.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from broker_process import BrokerProcess
from client_helpers import (
    BASE_TIMESTAMP_MS,
    CLIENT_TIMEOUT_S,
    CODECS,
    TestMessage,
    assert_delivered,
    assert_same_messages,
    ck_admin,
    ck_config,
    ck_consume,
    ck_consumer,
    ck_create_topic,
    ck_describe_configs,
    ck_produce,
    ck_topic_id,
    ck_watermarks,
    from_confluent,
    make_messages,
    unique_topic,
)
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

pytestmark = pytest.mark.timeout(120)

T = CLIENT_TIMEOUT_S


def source(entry: ConfigEntry) -> ConfigSource:
    return ConfigSource(entry.source)


def partition_count(bootstrap: str, topic: str) -> int:
    metadata = ck_admin(bootstrap).list_topics(topic=topic, timeout=T)
    info = metadata.topics[topic]
    assert info.error is None, info.error
    return len(info.partitions)


# ---------------------------------------------------------------------- cluster and topics


def test_metadata_lists_the_broker(broker: BrokerProcess) -> None:
    metadata = ck_admin(broker.bootstrap).list_topics(timeout=T)
    assert list(metadata.brokers) == [1]
    node = metadata.brokers[1]
    assert (node.host, node.port) == (broker.host, broker.port)
    assert metadata.controller_id == 1
    assert metadata.cluster_id


def test_describe_cluster(broker: BrokerProcess) -> None:
    admin = ck_admin(broker.bootstrap)
    cluster = admin.describe_cluster(request_timeout=T).result(timeout=T)
    assert cluster.cluster_id
    assert [node.id for node in cluster.nodes] == [1]
    assert cluster.controller is not None and cluster.controller.id == 1
    assert cluster.nodes[0].port == broker.port


def test_produce_auto_creates_topic_with_one_partition(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-auto")
    sent = make_messages(5)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent))
    assert partition_count(broker.bootstrap, topic) == 1
    got = ck_consume(broker.bootstrap, topic, count=len(sent))
    assert_same_messages([from_confluent(m) for m in got], sent)


def test_create_topics_with_configs_and_describe(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-create")
    ck_create_topic(
        broker.bootstrap,
        topic,
        partitions=3,
        config={"retention.ms": "3600000", "segment.bytes": "1048576", "cleanup.policy": "delete"},
    )
    assert partition_count(broker.bootstrap, topic) == 3
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert entries["retention.ms"].value == "3600000"
    assert source(entries["retention.ms"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert not entries["retention.ms"].is_default
    assert entries["segment.bytes"].value == "1048576"
    assert entries["cleanup.policy"].value == "delete"
    # A key left alone reports the broker's default.
    assert entries["max.message.bytes"].value == "1048588"
    assert source(entries["max.message.bytes"]) in (
        ConfigSource.DEFAULT_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    admin = ck_admin(broker.bootstrap)
    described = admin.describe_topics(TopicCollection([topic]), request_timeout=T)
    description = described[topic].result(timeout=T)
    assert [p.id for p in description.partitions] == [0, 1, 2]
    assert all(p.leader is not None and p.leader.id == 1 for p in description.partitions)


def test_create_topic_validate_only_creates_nothing(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-validate")
    admin = ck_admin(broker.bootstrap)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=2, replication_factor=1)],
        validate_only=True,
        request_timeout=T,
    )
    futures[topic].result(timeout=T)
    metadata = admin.list_topics(timeout=T)
    assert topic not in metadata.topics


def test_create_existing_topic_is_refused(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-exists")
    ck_create_topic(broker.bootstrap, topic)
    admin = ck_admin(broker.bootstrap)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1)], request_timeout=T
    )
    with pytest.raises(KafkaException) as info:
        futures[topic].result(timeout=T)
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_invalid_topic_name_is_refused(broker: BrokerProcess) -> None:
    topic = "bad/topic name"
    admin = ck_admin(broker.bootstrap)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1)], request_timeout=T
    )
    with pytest.raises(KafkaException) as info:
        futures[topic].result(timeout=T)
    assert info.value.args[0].code() == KafkaError.TOPIC_EXCEPTION


def test_metadata_for_invalid_topic_names(broker: BrokerProcess) -> None:
    """A producer's metadata request asks for auto-creation; invalid names are refused."""
    producer = Producer(ck_config(broker.bootstrap, **{"enable.idempotence": False}))
    for name in ("bad name!", "x" * 250, "..", "."):
        metadata = producer.list_topics(topic=name, timeout=T)
        error = metadata.topics[name].error
        assert error is not None and error.code() == KafkaError.TOPIC_EXCEPTION, (name, error)


def test_replication_factor_above_broker_count_is_refused(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-rf3")
    admin = ck_admin(broker.bootstrap)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=3)], request_timeout=T
    )
    with pytest.raises(KafkaException) as info:
        futures[topic].result(timeout=T)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert topic not in admin.list_topics(timeout=T).topics


def test_describe_configs_lists_every_topic_config(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-allconfigs")
    ck_create_topic(broker.bootstrap, topic)
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    for key, default in {
        "cleanup.policy": "delete",
        "compression.type": "producer",
        "retention.ms": "604800000",
        "retention.bytes": "-1",
        "segment.bytes": "1073741824",
        "segment.ms": "604800000",
        "min.insync.replicas": "1",
        "message.timestamp.type": "CreateTime",
        "max.message.bytes": "1048588",
    }.items():
        assert key in entries, f"{key} missing from DescribeConfigs"
        assert entries[key].value == default, (key, entries[key].value)
        assert source(entries[key]) in (
            ConfigSource.DEFAULT_CONFIG,
            ConfigSource.STATIC_BROKER_CONFIG,
        ), (key, entries[key].source)


def test_incremental_alter_configs(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-incalter")
    ck_create_topic(broker.bootstrap, topic, config={"retention.ms": "600000"})
    admin = ck_admin(broker.bootstrap)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("segment.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([resource], request_timeout=T)[resource].result(timeout=T)
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert entries["segment.ms"].value == "7200000"
    assert source(entries["segment.ms"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    # Deleting the override falls back to the default (7 days).
    assert entries["retention.ms"].value == "604800000"
    assert source(entries["retention.ms"]) != ConfigSource.DYNAMIC_TOPIC_CONFIG


def test_legacy_alter_configs_replaces_overrides(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-alter")
    ck_create_topic(broker.bootstrap, topic, config={"retention.ms": "600000"})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC, topic, set_config={"max.message.bytes": "200000"}
    )
    admin = ck_admin(broker.bootstrap)
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([resource], request_timeout=T)
    futures[resource].result(timeout=T)
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert entries["max.message.bytes"].value == "200000"
    # AlterConfigs replaces the whole set of overrides: retention.ms is back to its default.
    assert entries["retention.ms"].value == "604800000"


def test_alter_configs_rejects_unknown_and_invalid_values(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-alter-bad")
    ck_create_topic(broker.bootstrap, topic)
    admin = ck_admin(broker.bootstrap)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "not-a-number", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([resource], request_timeout=T)[resource].result(timeout=T)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_describe_broker_config(broker: BrokerProcess) -> None:
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    admin = ck_admin(broker.bootstrap)
    entries = admin.describe_configs([resource], request_timeout=T)[resource].result(timeout=T)
    assert entries["num.partitions"].value == "1"
    assert entries["auto.create.topics.enable"].value == "true"
    assert entries["message.max.bytes"].value == "1048588"


def test_create_partitions(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-parts")
    ck_create_topic(broker.bootstrap, topic, partitions=1)
    admin = ck_admin(broker.bootstrap)
    admin.create_partitions([NewPartitions(topic, 4)], request_timeout=T)[topic].result(timeout=T)
    assert partition_count(broker.bootstrap, topic) == 4
    sent = make_messages(3, tag="p3")
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, partition=3))
    got = ck_consume(broker.bootstrap, topic, partition=3, count=3)
    assert_same_messages([from_confluent(m) for m in got], sent)
    # Shrinking is not allowed.
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([NewPartitions(topic, 2)], request_timeout=T)[topic].result(
            timeout=T
        )
    assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_delete_records_moves_log_start(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-delrec")
    ck_create_topic(broker.bootstrap, topic)
    sent = make_messages(10)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, linger_ms=0, batch_num_messages=1))
    admin = ck_admin(broker.bootstrap)
    futures = admin.delete_records([TopicPartition(topic, 0, 6)], request_timeout=T)
    deleted = next(iter(futures.values())).result(timeout=T)
    low_after = getattr(deleted, "low_watermark", None)
    if low_after is None:  # older binding shapes: a TopicPartition with the new offset
        low_after = deleted.offset
    assert low_after == 6
    assert ck_watermarks(broker.bootstrap, topic) == (6, 10)
    got = ck_consume(broker.bootstrap, topic, offset=OFFSET_BEGINNING, count=4)
    assert [m.offset() for m in got] == [6, 7, 8, 9]
    assert_same_messages([from_confluent(m) for m in got], sent[6:])


def test_delete_records_beyond_the_high_watermark_is_refused(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-delrec-oor")
    assert_delivered(ck_produce(broker.bootstrap, topic, make_messages(5)))
    admin = ck_admin(broker.bootstrap)
    futures = admin.delete_records([TopicPartition(topic, 0, 50)], request_timeout=T)
    with pytest.raises(KafkaException) as info:
        next(iter(futures.values())).result(timeout=T)
    assert info.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    assert ck_watermarks(broker.bootstrap, topic) == (0, 5)


def test_delete_topic(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-delete")
    ck_create_topic(broker.bootstrap, topic, partitions=2)
    assert_delivered(ck_produce(broker.bootstrap, topic, make_messages(3)))
    first_id = ck_topic_id(broker.bootstrap, topic)
    admin = ck_admin(broker.bootstrap)
    admin.delete_topics([topic], request_timeout=T, operation_timeout=T)[topic].result(timeout=T)
    assert topic not in admin.list_topics(timeout=T).topics
    # Deleting it again names the topic as unknown.
    with pytest.raises(KafkaException) as info:
        admin.delete_topics([topic], request_timeout=T)[topic].result(timeout=T)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # The name can be used again, from an empty log.
    ck_create_topic(broker.bootstrap, topic)
    assert ck_watermarks(broker.bootstrap, topic) == (0, 0)
    # A new topic under the old name is a different topic: a new id.
    assert ck_topic_id(broker.bootstrap, topic) != first_id


# ---------------------------------------------------------------------- produce and consume


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_acks_and_codec_round_trip(broker: BrokerProcess, acks: str, codec: str) -> None:
    topic = unique_topic(f"ck-{codec}-acks{acks}")
    ck_create_topic(broker.bootstrap, topic)
    sent = make_messages(300, tag=f"{codec}{acks}", value_size=300)
    reports = ck_produce(
        broker.bootstrap, topic, sent, acks=acks, compression_type=codec, batch_num_messages=100
    )
    assert_delivered(reports)
    if acks != "0":
        assert [r.offset for r in reports] == list(range(len(sent)))
    got = ck_consume(broker.bootstrap, topic, count=len(sent))
    assert [m.offset() for m in got] == list(range(len(sent)))
    assert_same_messages([from_confluent(m) for m in got], sent)
    assert ck_watermarks(broker.bootstrap, topic) == (0, len(sent))


def test_consume_from_an_offset(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-from-offset")
    sent = make_messages(50)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, batch_num_messages=7))
    # Offset 23 sits inside a batch: the consumer must still start exactly there.
    got = ck_consume(broker.bootstrap, topic, offset=23, count=27)
    assert [m.offset() for m in got] == list(range(23, 50))
    assert_same_messages([from_confluent(m) for m in got], sent[23:])
    # librdkafka defaults to read_committed (reads up to the LSO); read_uncommitted reads to
    # the HW. Without transactions both see the same records.
    uncommitted = ck_consume(
        broker.bootstrap, topic, offset=23, count=27, isolation_level="read_uncommitted"
    )
    assert_same_messages([from_confluent(m) for m in uncommitted], sent[23:])


def test_consume_from_a_timestamp(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-from-ts")
    sent = make_messages(40, timestamp_step=1000)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, batch_num_messages=8))
    consumer = ck_consumer(broker.bootstrap)
    try:
        # Between message 24 and 25: the first message at or after it is 25.
        query = [TopicPartition(topic, 0, BASE_TIMESTAMP_MS + 24_500)]
        (found,) = consumer.offsets_for_times(query, timeout=T)
        assert found.error is None
        assert found.offset == 25
        # Exactly a message's timestamp finds that message.
        (exact,) = consumer.offsets_for_times(
            [TopicPartition(topic, 0, BASE_TIMESTAMP_MS + 10_000)], timeout=T
        )
        assert exact.offset == 10
        # After the last message: no offset (end of log).
        (after,) = consumer.offsets_for_times(
            [TopicPartition(topic, 0, BASE_TIMESTAMP_MS + 10_000_000)], timeout=T
        )
        assert after.offset in (OFFSET_END, -1)
    finally:
        consumer.close()
    got = ck_consume(broker.bootstrap, topic, offset=found.offset, count=15)
    assert_same_messages([from_confluent(m) for m in got], sent[25:])


def test_admin_list_offsets(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-listoffsets")
    sent = make_messages(20, timestamp_step=1000)
    # The largest timestamp in the middle, so max_timestamp is not simply the last message.
    sent[7] = type(sent[7])(sent[7].key, sent[7].value, sent[7].headers, BASE_TIMESTAMP_MS + 99_000)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, batch_num_messages=5))
    admin = ck_admin(broker.bootstrap)
    tp = TopicPartition(topic, 0)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max": OffsetSpec.max_timestamp(),
        "ts": OffsetSpec.for_timestamp(BASE_TIMESTAMP_MS + 12_000),
    }
    results = {}
    for name, spec in specs.items():
        futures = admin.list_offsets({tp: spec}, request_timeout=T)
        results[name] = futures[tp].result(timeout=T)
    assert results["earliest"].offset == 0
    assert results["latest"].offset == 20
    assert results["max"].offset == 7
    assert results["max"].timestamp == BASE_TIMESTAMP_MS + 99_000
    # Message 7 (t+99s) is the first at or after t+12s.
    assert results["ts"].offset == 7


# ---------------------------------------------------------------------- limits


def test_message_larger_than_topic_max_message_bytes_is_rejected(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-toolarge")
    ck_create_topic(broker.bootstrap, topic, config={"max.message.bytes": "10000"})
    big = make_messages(1, tag="big", value_size=20_000)
    (report,) = ck_produce(broker.bootstrap, topic, big, compression_type="none", retries=0)
    assert report.error is not None, "the broker accepted a batch above max.message.bytes"
    assert report.error.code() == KafkaError.MSG_SIZE_TOO_LARGE  # error code 10
    # The broker keeps serving, on a new connection and on this topic.
    small = make_messages(3, tag="small", value_size=100)
    assert_delivered(ck_produce(broker.bootstrap, topic, small, compression_type="none"))
    got = ck_consume(broker.bootstrap, topic, count=3)
    assert_same_messages([from_confluent(m) for m in got], small)
    assert ck_watermarks(broker.bootstrap, topic) == (0, 3)


def test_message_larger_than_broker_message_max_bytes_is_rejected(
    broker: BrokerProcess,
) -> None:
    topic = unique_topic("ck-toolarge-broker")
    ck_create_topic(broker.bootstrap, topic)
    big = make_messages(1, tag="big", value_size=1_200_000)
    (report,) = ck_produce(
        broker.bootstrap,
        topic,
        big,
        compression_type="none",
        retries=0,
        message_max_bytes=4_000_000,
    )
    assert report.error is not None, "the broker accepted a batch above message.max.bytes"
    assert report.error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    small = make_messages(2, tag="after")
    assert_delivered(ck_produce(broker.bootstrap, topic, small))
    assert ck_watermarks(broker.bootstrap, topic) == (0, 2)


# ---------------------------------------------------------------------- fetch behaviour


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_topic_stamps_batches(broker: BrokerProcess, codec: str) -> None:
    """The broker rewrites max timestamp and the CRC in place; librdkafka checks the CRC."""
    topic = unique_topic(f"ck-logappend-{codec}")
    ck_create_topic(broker.bootstrap, topic, config={"message.timestamp.type": "LogAppendTime"})
    sent = make_messages(50, tag=f"lat{codec}")
    reports = ck_produce(broker.bootstrap, topic, sent, compression_type=codec)
    assert_delivered(reports)
    got = ck_consume(broker.bootstrap, topic, count=50)
    assert all(m.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME for m in got)
    stamps = {m.timestamp()[1] for m in got}
    # Not the producer's create times: the broker's clock, one stamp per batch.
    assert not stamps & {m.timestamp for m in sent}
    assert min(stamps) > BASE_TIMESTAMP_MS
    for g, s in zip(got, sent, strict=True):
        assert (g.key(), g.value(), g.headers() or []) == (s.key, s.value, list(s.headers))


def test_fetch_waits_and_is_woken_by_an_append(broker: BrokerProcess) -> None:
    """A consumer at the log end with a long max wait gets a new record without waiting out
    fetch.wait.max.ms: the delayed fetch is completed by the append."""
    topic = unique_topic("ck-longpoll")
    ck_create_topic(broker.bootstrap, topic)
    consumer = ck_consumer(broker.bootstrap, fetch_wait_max_ms=60_000, fetch_min_bytes=1)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert consumer.poll(1.0) is None  # parked in the purgatory, nothing to read yet
        sent = make_messages(1, tag="wake")
        assert_delivered(ck_produce(broker.bootstrap, topic, sent))
        msg = None
        # Far below the 60 s max wait: only an append-driven completion gets here in time.
        for _ in range(20):
            msg = consumer.poll(0.5)
            if msg is not None:
                break
        assert msg is not None and msg.error() is None, msg and msg.error()
        assert_same_messages([from_confluent(msg)], sent)
    finally:
        consumer.close()


def test_fetch_returns_a_batch_larger_than_the_fetch_limits(broker: BrokerProcess) -> None:
    """KIP-74: the first batch comes back even when it exceeds max.partition.fetch.bytes."""
    topic = unique_topic("ck-kip74")
    ck_create_topic(broker.bootstrap, topic)
    sent = make_messages(3, tag="big", value_size=200_000)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, compression_type="none"))
    got = ck_consume(
        broker.bootstrap,
        topic,
        count=3,
        max_partition_fetch_bytes=1024,
        fetch_max_bytes=1024,
        message_max_bytes=1000,
        receive_message_max_bytes=1_000_000,
    )
    assert_same_messages([from_confluent(m) for m in got], sent)


def test_fetch_out_of_range_resets_to_earliest(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-oor")
    sent = make_messages(10)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent))
    got = ck_consume(broker.bootstrap, topic, offset=1000, count=10, auto_offset_reset="earliest")
    assert [m.offset() for m in got] == list(range(10))
    # With no reset policy the client surfaces the broker's OFFSET_OUT_OF_RANGE.
    consumer = ck_consumer(broker.bootstrap, auto_offset_reset="error")
    try:
        consumer.assign([TopicPartition(topic, 0, 1000)])
        errors = []
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                errors.append(msg.error())
                break
        assert errors, "no error for a fetch offset beyond the log end"
        assert errors[0].code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
    finally:
        consumer.close()


def test_one_consumer_reads_several_partitions(broker: BrokerProcess) -> None:
    topic = unique_topic("ck-multi")
    ck_create_topic(broker.bootstrap, topic, partitions=3)
    sent = {p: make_messages(40, tag=f"p{p}") for p in range(3)}
    for p, messages in sent.items():
        assert_delivered(ck_produce(broker.bootstrap, topic, messages, partition=p))
    consumer = ck_consumer(broker.bootstrap)
    got: dict[int, list[TestMessage]] = {0: [], 1: [], 2: []}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
        for _ in range(60):
            if sum(len(v) for v in got.values()) == 120:
                break
            for msg in consumer.consume(num_messages=200, timeout=0.5):
                assert msg.error() is None, msg.error()
                got[msg.partition()].append(from_confluent(msg))
    finally:
        consumer.close()
    for p in range(3):
        assert_same_messages(got[p], sent[p])


def test_many_segments_read_across_boundaries(broker: BrokerProcess) -> None:
    """Enough data for several 1 MiB segments: reads, time lookups and DeleteRecords cross
    segment boundaries the way they do in a long-lived log."""
    topic = unique_topic("ck-segments")
    ck_create_topic(broker.bootstrap, topic, config={"segment.bytes": "1048576"})
    count = 30_000
    sent = make_messages(count, tag="seg", value_size=250, headers=False, timestamp_step=10)
    assert_delivered(
        ck_produce(broker.bootstrap, topic, sent, compression_type="none", batch_num_messages=500)
    )
    assert ck_watermarks(broker.bootstrap, topic) == (0, count)
    segments = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) >= 7, [p.name for p in segments]
    got = ck_consume(broker.bootstrap, topic, count=count, timeout=60)
    assert [m.offset() for m in got] == list(range(count))
    assert_same_messages([from_confluent(m) for m in got], sent)
    # From the middle of a later segment.
    middle = ck_consume(broker.bootstrap, topic, offset=17_345, count=100)
    assert_same_messages([from_confluent(m) for m in middle], sent[17_345:17_445])
    consumer = ck_consumer(broker.bootstrap)
    try:
        (found,) = consumer.offsets_for_times(
            [TopicPartition(topic, 0, BASE_TIMESTAMP_MS + 23_456 * 10 - 5)], timeout=T
        )
        assert found.offset == 23_456
    finally:
        consumer.close()
    admin = ck_admin(broker.bootstrap)
    futures = admin.delete_records([TopicPartition(topic, 0, 20_001)], request_timeout=T)
    next(iter(futures.values())).result(timeout=T)
    assert ck_watermarks(broker.bootstrap, topic) == (20_001, count)
    tail = ck_consume(broker.bootstrap, topic, count=count - 20_001, timeout=60)
    assert tail[0].offset() == 20_001


def stored_batches(log_file: Path) -> list[tuple[int, int, int]]:
    """(base offset, record count, codec id) of every batch in a segment file."""
    data = log_file.read_bytes()
    out = []
    pos = 0
    while pos + 61 <= len(data):
        base_offset, batch_length = struct.unpack_from(">qi", data, pos)
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        (record_count,) = struct.unpack_from(">i", data, pos + 57)
        out.append((base_offset, record_count, attributes & 0x7))
        pos += 12 + batch_length
    assert pos == len(data), f"{log_file} ends inside a batch at {pos} of {len(data)}"
    return out


@pytest.mark.parametrize(
    ("codec", "codec_id"), [("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)]
)
def test_batches_are_stored_with_the_producers_codec(
    broker: BrokerProcess, codec: str, codec_id: int
) -> None:
    topic = unique_topic(f"ck-stored-{codec}")
    ck_create_topic(broker.bootstrap, topic)
    assert_delivered(
        ck_produce(
            broker.bootstrap,
            topic,
            make_messages(100),
            compression_type=codec,
            batch_num_messages=25,
        )
    )
    batches = stored_batches(broker.data_dir / f"{topic}-0" / f"{0:020d}.log")
    assert sum(count for _, count, _ in batches) == 100
    assert {codec for _, _, codec in batches} == {codec_id}
    # Offsets assigned in place, contiguous from 0.
    expected_base = 0
    for base_offset, count, _ in batches:
        assert base_offset == expected_base
        expected_base += count
