"""Produce and consume with josefk's client against a real broker: every codec, keys,
headers, timestamps, seeks, batching limits and async iteration."""

from __future__ import annotations

import asyncio

import pytest
from broker_process import BrokerProcess
from client_helpers import (
    BASE_TIMESTAMP_MS,
    CODECS,
    assert_same_messages,
    make_messages,
    unique_topic,
)
from client_suite import TIMEOUT_S, consume, produce, to_message

from josefk.client import AIOAdmin, AIOConsumer, AIOProducer, TimestampType, TopicPartition
from josefk.records import split_batches


@pytest.mark.parametrize("codec", CODECS)
async def test_round_trip_every_codec(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"rt-{codec}")
    sent = make_messages(300, tag=codec)
    delivered = await produce(broker.bootstrap, topic, sent, compression_type=codec, linger_ms=50)
    assert [d.offset for d in delivered] == list(range(300))
    assert {(d.topic, d.partition) for d in delivered} == {(topic, 0)}
    assert [d.timestamp for d in delivered] == [m.timestamp for m in sent]
    got = await consume(broker.bootstrap, topic, 300)
    assert [r.offset for r in got] == list(range(300))
    assert all(r.timestamp_type == TimestampType.CREATE_TIME for r in got)
    assert_same_messages([to_message(r) for r in got], sent)


async def test_small_batches_and_pipelined_requests(broker: BrokerProcess) -> None:
    topic = unique_topic("small-batches")
    sent = make_messages(500, value_size=200)
    # batch_size below two records: many batches, but a request carries one per partition
    # (the broker, as Kafka since Produce v3, refuses more with INVALID_RECORD), so while a
    # request is in flight the partition's open batch grows past batch_size instead.
    delivered = await produce(broker.bootstrap, topic, sent, batch_size=300, linger_ms=0)
    assert [d.offset for d in delivered] == list(range(500))
    got = await consume(broker.bootstrap, topic, 500, max_partition_fetch_bytes=4096)
    assert_same_messages([to_message(r) for r in got], sent)
    log = broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
    counts = [batch.record_count for batch in split_batches(log.read_bytes())]
    assert sum(counts) == 500
    assert max(counts) > 1  # grown while a request was in flight: more than batch_size


async def test_acks_zero_and_one(broker: BrokerProcess) -> None:
    topic = unique_topic("acks")
    sent = make_messages(20)
    one = await produce(broker.bootstrap, topic, sent[:10], acks=1)
    assert [d.offset for d in one] == list(range(10))
    zero = await produce(broker.bootstrap, topic, sent[10:], acks=0)
    assert all(d.offset == -1 for d in zero)
    got = await consume(broker.bootstrap, topic, 20)
    assert_same_messages([to_message(r) for r in got], sent)


async def test_seek_offset_beginning_end_and_timestamp(broker: BrokerProcess) -> None:
    topic = unique_topic("seek")
    sent = make_messages(50, timestamp_step=1000)
    await produce(broker.bootstrap, topic, sent, compression_type="gzip")
    tp = TopicPartition(topic, 0)
    async with AIOConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        assert (await consumer.getone(timeout_ms=int(TIMEOUT_S * 1000))).offset == 0
        consumer.seek(tp, 17)
        assert (await consumer.getone(timeout_ms=int(TIMEOUT_S * 1000))).offset == 17
        await consumer.seek_to_timestamp(BASE_TIMESTAMP_MS + 30_500)
        assert (await consumer.getone(timeout_ms=int(TIMEOUT_S * 1000))).offset == 31
        consumer.seek_to_end(tp)
        assert await consumer.position(tp) == 50
        consumer.seek_to_beginning(tp)
        assert await consumer.position(tp) == 0
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        assert await consumer.end_offsets([tp]) == {tp: 50}
        times = await consumer.offsets_for_times({tp: BASE_TIMESTAMP_MS + 10_000})
        assert times[tp] is not None and times[tp].offset == 10
        assert (await consumer.offsets_for_times({tp: BASE_TIMESTAMP_MS + 10**9}))[tp] is None


async def test_latest_reset_sees_only_new_records(broker: BrokerProcess) -> None:
    topic = unique_topic("latest")
    await produce(broker.bootstrap, topic, make_messages(5, tag="old"))
    tp = TopicPartition(topic, 0)
    async with AIOConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="latest"
    ) as consumer:
        consumer.assign([tp])
        assert await consumer.position(tp) == 5
        new = make_messages(3, tag="new")
        await produce(broker.bootstrap, topic, new)
        got = []
        async with asyncio.timeout(TIMEOUT_S):
            async for record in consumer:
                got.append(record)
                if len(got) == 3:
                    break
        assert [r.offset for r in got] == [5, 6, 7]
        assert_same_messages([to_message(r) for r in got], new)


async def test_max_poll_records_caps_getmany(broker: BrokerProcess) -> None:
    topic = unique_topic("max-poll")
    await produce(broker.bootstrap, topic, make_messages(100))
    async with AIOConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", max_poll_records=7
    ) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        seen: list[int] = []
        async with asyncio.timeout(TIMEOUT_S):
            while len(seen) < 100:
                batch = await consumer.getmany(timeout_ms=1000)
                assert sum(len(r) for r in batch.values()) <= 7
                seen.extend(r.offset for records in batch.values() for r in records)
        assert seen == list(range(100))


async def test_keyed_records_spread_over_partitions_in_order(broker: BrokerProcess) -> None:
    topic = unique_topic("keyed")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=4)
    async with AIOProducer(bootstrap_servers=broker.bootstrap, linger_ms=10) as producer:
        futures = [
            await producer.send(topic, str(i).encode(), key=f"k{i % 13}".encode())
            for i in range(400)
        ]
        delivered = await asyncio.gather(*futures)
    per_key: dict[int, set[int]] = {}
    for i, d in enumerate(delivered):
        per_key.setdefault(i % 13, set()).add(d.partition)
    assert all(len(parts) == 1 for parts in per_key.values())
    assert len({d.partition for d in delivered}) > 1
    for partition in range(4):
        expected = [str(i).encode() for i, d in enumerate(delivered) if d.partition == partition]
        if not expected:
            continue
        got = await consume(broker.bootstrap, topic, len(expected), partition=partition)
        assert [r.value for r in got] == expected


async def test_topics_without_a_group_assign_every_partition(broker: BrokerProcess) -> None:
    topic = unique_topic("no-group")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=3)
    for partition in range(3):
        await produce(
            broker.bootstrap, topic, make_messages(5, tag=f"p{partition}"), partition=partition
        )
    async with AIOConsumer(
        topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest"
    ) as consumer:
        assert consumer.assignment() == {TopicPartition(topic, p) for p in range(3)}
        got = []
        async with asyncio.timeout(TIMEOUT_S):
            async for record in consumer:
                got.append(record)
                if len(got) == 15:
                    break
        assert sorted((r.partition, r.offset) for r in got) == [
            (p, o) for p in range(3) for o in range(5)
        ]


async def test_partitions_that_returned_records_go_to_the_back(broker: BrokerProcess) -> None:
    # fetch_max_bytes below a batch: each answer holds one batch of the first partition with
    # records in the fetch's order (KIP-74). Without the rotation partition 0 would be read
    # until its pending chunks held the fetcher back, or caught up.
    topic = unique_topic("rotation")
    partitions, per_partition = 3, 4
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=partitions)
    async with AIOProducer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
        for i in range(per_partition):
            for partition in range(partitions):
                # One record per batch: wait for each before sending the next.
                future = await producer.send(topic, b"%d" % i, partition=partition)
                async with asyncio.timeout(TIMEOUT_S):
                    await future
    async with AIOConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", fetch_max_bytes=1
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        order = []
        async with asyncio.timeout(TIMEOUT_S):
            while len(order) < partitions * per_partition:
                order.append((await consumer.getone()).partition)
    # Each partition once in every run of three records: none waited while another was read
    # twice.
    for i in range(len(order) - partitions + 1):
        assert len(set(order[i : i + partitions])) == partitions, order
