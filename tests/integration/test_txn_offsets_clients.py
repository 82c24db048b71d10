"""Transactional offsets with confluent-kafka against a real ``josefk serve``: the
consume-transform-produce loop's ``send_offsets_to_transaction`` moves the group's committed
offsets when the transaction commits and leaves them where they were when it aborts; a
restarted broker replays them from ``__consumer_offsets``. The same with kafka-python's
transactional producer and its KIP-447 group metadata.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import (
    CLIENT_TIMEOUT_S,
    assert_delivered,
    ck_config,
    ck_create_topic,
    ck_produce,
    make_messages,
    unique_topic,
)
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.timeout(180)

T = CLIENT_TIMEOUT_S
INPUT_COUNT = 30
BATCH = 10


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> Iterator[BrokerProcess]:
    yield broker_factory(
        settings=[
            "group.initial.rebalance.delay.ms=0",
            "offsets.topic.num.partitions=3",
            "transaction.state.log.num.partitions=3",
        ]
    )


def consumer_for(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        ck_config(
            bootstrap,
            **{
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 100,
                "session.timeout.ms": 10000,
            },
        )
    )


def producer_for(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        ck_config(
            bootstrap,
            **{"transactional.id": transactional_id, "transaction.timeout.ms": 60000},
        )
    )
    producer.init_transactions(T)
    return producer


def consume(consumer: Consumer, count: int) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + T
    while len(got) < count and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=count - len(got), timeout=0.5):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(err)
            got.append(msg)
    assert len(got) == count, f"consumed {len(got)} of {count} within {T:.0f}s"
    return got


def committed(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offset of ``topic``-0, read by a fresh consumer (librdkafka asks
    with require_stable under read_committed, so a pending transaction is waited out)."""
    probe = consumer_for(bootstrap, group)
    try:
        [tp] = probe.committed([TopicPartition(topic, 0)], timeout=T)
        assert tp.error is None, tp.error
        return int(tp.offset)
    finally:
        probe.close()


def transform_batch(consumer: Consumer, producer: Producer, output: str, *, commit: bool) -> int:
    """One turn of the loop: read BATCH records, write them to ``output`` and the consumer's
    positions to the transaction, then commit or abort. Returns the position sent."""
    producer.begin_transaction()
    for msg in consume(consumer, BATCH):
        producer.produce(output, key=msg.key(), value=msg.value())
    positions = consumer.position(consumer.assignment())
    [position] = [tp.offset for tp in positions if tp.partition == 0]
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), T)
    if commit:
        producer.commit_transaction(T)
    else:
        producer.abort_transaction(T)
    return int(position)


def test_send_offsets_to_transaction_moves_the_committed_offsets_only_on_commit(
    broker: BrokerProcess,
) -> None:
    bootstrap = broker.bootstrap
    source, output = unique_topic("txn-in"), unique_topic("txn-out")
    group = unique_topic("txn-group")
    ck_create_topic(bootstrap, source)
    ck_create_topic(bootstrap, output)
    assert_delivered(ck_produce(bootstrap, source, make_messages(INPUT_COUNT)))

    consumer = consumer_for(bootstrap, group)
    consumer.subscribe([source])
    producer = producer_for(bootstrap, "txn-offsets-loop")
    try:
        position = transform_batch(consumer, producer, output, commit=True)
        assert position == BATCH
        assert committed(bootstrap, group, source) == BATCH

        position = transform_batch(consumer, producer, output, commit=False)
        assert position == 2 * BATCH
        assert committed(bootstrap, group, source) == BATCH, "an aborted transaction's offsets"

        # After the abort the loop rewinds to the committed offset, as an EOS app does.
        consumer.seek(TopicPartition(source, 0, BATCH))
        position = transform_batch(consumer, producer, output, commit=True)
        assert position == 2 * BATCH
        assert committed(bootstrap, group, source) == 2 * BATCH
    finally:
        consumer.close()
        producer.flush(T)

    broker.restart()
    assert committed(bootstrap, group, source) == 2 * BATCH
    # The output holds exactly the committed transactions' records for read_committed.
    reader = consumer_for(bootstrap, unique_topic("txn-reader"))
    reader.assign([TopicPartition(output, 0, 0)])
    try:
        values = [m.value() for m in consume(reader, 2 * BATCH)]
        extra: list[Any] = reader.consume(num_messages=1, timeout=1.0)
        assert [m for m in extra if m.error() is None] == []
    finally:
        reader.close()
    expected = [m.value for m in make_messages(INPUT_COUNT)]
    assert values == expected[:BATCH] + expected[BATCH : 2 * BATCH]


def test_pending_offsets_are_unstable_and_survive_a_broker_kill(broker: BrokerProcess) -> None:
    """While the transaction is open a read_committed consumer gets no committed offset
    (OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT, retried until its timeout); the
    broker is SIGKILLed and restarted with the transaction open, replays the pending offsets,
    and the producer's commit then makes them the group's."""
    bootstrap = broker.bootstrap
    source, output = unique_topic("txn-kill-in"), unique_topic("txn-kill-out")
    group = unique_topic("txn-kill-group")
    ck_create_topic(bootstrap, source)
    ck_create_topic(bootstrap, output)
    assert_delivered(ck_produce(bootstrap, source, make_messages(INPUT_COUNT)))

    consumer = consumer_for(bootstrap, group)
    consumer.subscribe([source])
    producer = producer_for(bootstrap, "txn-offsets-kill")
    try:
        assert transform_batch(consumer, producer, output, commit=True) == BATCH
        producer.begin_transaction()
        for msg in consume(consumer, BATCH):
            producer.produce(output, key=msg.key(), value=msg.value())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), T)
        assert producer.flush(T) == 0

        probe = consumer_for(bootstrap, group)
        try:
            with pytest.raises(KafkaException):
                probe.committed([TopicPartition(source, 0)], timeout=3)
        finally:
            probe.close()

        broker.kill()
        broker.start()
        producer.commit_transaction(T)
        assert committed(bootstrap, group, source) == 2 * BATCH
    finally:
        consumer.close()
        producer.flush(T)


def test_kafka_python_send_offsets_to_transaction(broker: BrokerProcess) -> None:
    """kafka-python's transactional producer with KIP-447 group metadata: commit moves the
    committed offset, abort leaves it."""
    bootstrap = broker.bootstrap
    source, output = unique_topic("kp-txn-in"), unique_topic("kp-txn-out")
    group = unique_topic("kp-txn-group")
    ck_create_topic(bootstrap, source)
    ck_create_topic(bootstrap, output)
    assert_delivered(ck_produce(bootstrap, source, make_messages(INPUT_COUNT)))
    partition = KTopicPartition(source, 0)

    consumer = KafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_poll_records=BATCH,
    )
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn-offsets")
    try:
        producer.init_transactions()

        def turn(*, commit: bool) -> int:
            producer.begin_transaction()
            got = 0
            deadline = time.monotonic() + T
            while got < BATCH and time.monotonic() < deadline:
                batches = consumer.poll(timeout_ms=500, max_records=BATCH - got)
                for records in batches.values():
                    for record in records:
                        producer.send(output, key=record.key, value=record.value)
                        got += 1
            assert got == BATCH
            position = consumer.position(partition)
            producer.send_offsets_to_transaction(
                {partition: OffsetAndMetadata(position, "", -1)}, consumer.group_metadata()
            )
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
            return int(position)

        assert turn(commit=True) == BATCH
        assert consumer.committed(partition, timeout_ms=int(T * 1000)) == BATCH
        assert turn(commit=False) == 2 * BATCH
        assert consumer.committed(partition, timeout_ms=int(T * 1000)) == BATCH
    finally:
        consumer.close()
        producer.close()
