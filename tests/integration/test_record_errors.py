"""KIP-467: a produce refused for some of its records names them (ProduceResponse v8+).

confluent-kafka (librdkafka) sends one batch per partition; when the answer's
``record_errors`` names records, it fails those with the partition's error and the others of
the batch with _INVALID_DIFFERENT_RECORD, so the application can send the good ones again
(librdkafka's test 0011, test_message_single_partition_record_fail, expects exactly that).
Before, the whole batch failed with the error for every record, and no record was named.
"""

from __future__ import annotations

import asyncio
import struct
import time

import pytest
from broker_process import BrokerProcess
from client_helpers import ck_config, ck_consume, ck_create_topic, ck_watermarks, unique_topic
from confluent_kafka import KafkaError, Producer
from test_poison_records import batch, record

pytestmark = pytest.mark.timeout(120)

DAY_MS = 24 * 3_600_000


def produce_one_batch(
    bootstrap: str, topic: str, messages: list[tuple[bytes | None, bytes, int | None]]
) -> list[KafkaError | None]:
    """Produce ``messages`` (key, value, timestamp) in one batch; each one's delivery error."""
    errors: list[KafkaError | None] = [None] * len(messages)
    done = [False] * len(messages)

    def report(index: int):  # type: ignore[no-untyped-def]
        def on_delivery(err, _msg):  # type: ignore[no-untyped-def]
            errors[index] = err
            done[index] = True

        return on_delivery

    producer = Producer(
        ck_config(bootstrap, **{"linger.ms": 500, "retries": 0, "enable.idempotence": False})
    )
    for i, (key, value, timestamp) in enumerate(messages):
        kwargs = {} if timestamp is None else {"timestamp": timestamp}
        producer.produce(topic, value=value, key=key, partition=0, on_delivery=report(i), **kwargs)
    assert producer.flush(30) == 0
    assert all(done)
    return errors


def codes(errors: list[KafkaError | None]) -> list[int]:
    return [KafkaError.NO_ERROR if e is None else e.code() for e in errors]


async def test_keyless_records_on_a_compacted_topic_fail_alone(broker: BrokerProcess) -> None:
    topic = unique_topic("kip467-keys")
    await asyncio.to_thread(
        ck_create_topic, broker.bootstrap, topic, config={"cleanup.policy": "compact"}
    )
    messages = [(None if i in (2, 5) else b"k%d" % i, b"v%d" % i, None) for i in range(8)]
    errors = await asyncio.to_thread(produce_one_batch, broker.bootstrap, topic, messages)
    expected = [
        KafkaError.INVALID_RECORD if i in (2, 5) else KafkaError._INVALID_DIFFERENT_RECORD
        for i in range(8)
    ]
    assert codes(errors) == expected
    # The good ones, sent again, are appended; nothing of the refused batch is in the log.
    assert await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0) == (0, 0)
    good = [m for i, m in enumerate(messages) if i not in (2, 5)]
    again = await asyncio.to_thread(produce_one_batch, broker.bootstrap, topic, good)
    assert codes(again) == [KafkaError.NO_ERROR] * len(good)
    got = await asyncio.to_thread(ck_consume, broker.bootstrap, topic, count=len(good))
    assert [m.key() for m in got] == [key for key, _, _ in good]


def produce_v8(topic: str, records: bytes) -> bytes:
    client_id = b"josefk-kip467"
    body = struct.pack(">hhih", 0, 8, 467, len(client_id)) + client_id
    body += struct.pack(">hhi", -1, -1, 10_000)  # no transactional id, acks=all, timeout
    name = topic.encode()
    body += struct.pack(">ih", 1, len(name)) + name + struct.pack(">iii", 1, 0, len(records))
    body += records
    return struct.pack(">i", len(body)) + body


def parse_v8_partition(body: bytes) -> tuple[int, list[tuple[int, str]], str | None]:
    """-> (error_code, [(batch_index, message)], error_message) of the one partition."""
    pos = 4 + 4  # correlation id, topic count
    (name_len,) = struct.unpack_from(">h", body, pos)
    pos += 2 + name_len + 4  # name, partition count
    _index, error_code = struct.unpack_from(">ih", body, pos)
    pos += 6 + 24  # base offset, log append time, log start offset

    def string() -> str | None:
        nonlocal pos
        (length,) = struct.unpack_from(">h", body, pos)
        pos += 2
        if length < 0:
            return None
        pos += length
        return body[pos - length : pos].decode()

    (count,) = struct.unpack_from(">i", body, pos)
    pos += 4
    named = []
    for _ in range(count):
        (batch_index,) = struct.unpack_from(">i", body, pos)
        pos += 4
        named.append((batch_index, string() or ""))
    return error_code, named, string()


async def test_records_with_bad_timestamps_are_named(broker: BrokerProcess) -> None:
    """librdkafka splits a batch's fate only for INVALID_RECORD (it fails every record with
    INVALID_TIMESTAMP here), so the answer is read raw: Kafka's INVALID_TIMESTAMP for the
    partition, the one bad record named by index, and the validator's message."""
    topic = unique_topic("kip467-time")
    await asyncio.to_thread(
        ck_create_topic,
        broker.bootstrap,
        topic,
        config={"message.timestamp.before.max.ms": str(DAY_MS)},
    )
    now = int(time.time() * 1000)
    records = [record(i, delta=-3 * DAY_MS if i == 2 else 0) for i in range(4)]
    reader, writer = await asyncio.open_connection(broker.host, broker.port)
    try:
        writer.write(produce_v8(topic, batch(records, base_timestamp=now)))
        await writer.drain()
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30))
        body = await asyncio.wait_for(reader.readexactly(size), 30)
    finally:
        writer.close()
    error_code, named, message = parse_v8_partition(body)
    assert error_code == KafkaError.INVALID_TIMESTAMP
    assert [index for index, _ in named] == [2]
    assert message is not None and "message.timestamp.before.max.ms" in message
    errors = await asyncio.to_thread(
        produce_one_batch,
        broker.bootstrap,
        topic,
        [(b"k%d" % i, b"v", now - 3 * DAY_MS if i == 1 else now) for i in range(3)],
    )
    assert codes(errors) == [KafkaError.INVALID_TIMESTAMP] * 3
    assert await asyncio.to_thread(ck_watermarks, broker.bootstrap, topic, 0) == (0, 0)
