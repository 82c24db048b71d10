"""Idempotence: on when the broker supports InitProducerId, a clean fallback (with a log
line) when it does not, and per-partition sequences that number every record once."""

from __future__ import annotations

import asyncio
import logging

import pytest
from broker_process import BrokerProcess
from client_helpers import unique_topic

from josefk.client import AIOAdmin, AIOProducer, KafkaClient, TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.api import request_class
from josefk.records import split_batches


async def _raw_batches(bootstrap: str, tp: TopicPartition) -> list[tuple[int, int, int, int, int]]:
    """(base_offset, producer_id, producer_epoch, base_sequence, record_count) per batch."""
    client = KafkaClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        await client.refresh_metadata([tp.topic])
        leader = client.metadata.leader_for(tp.topic, tp.partition)
        assert leader is not None
        req = request_class(ApiKey.FETCH)
        body = req(
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 24,
            topics=[
                req.FetchTopic(
                    topic=tp.topic,
                    topic_id=client.metadata.topics[tp.topic].topic_id,
                    partitions=[
                        req.FetchPartition(
                            partition=tp.partition, fetch_offset=0, partition_max_bytes=1 << 24
                        )
                    ],
                )
            ],
        )
        response = await client.request(leader, ApiKey.FETCH, body)
        (part,) = response.responses[0].partitions
        return [
            (b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence, b.record_count)
            for b in split_batches(part.records)
        ]
    finally:
        await client.close()


async def test_idempotence_follows_broker_support(
    broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="josefk.client.producer")
    client = KafkaClient(bootstrap_servers=broker.bootstrap)
    await client.start()
    try:
        conn = await client.connection(client.least_loaded_node())
        supported = conn.supports(ApiKey.INIT_PRODUCER_ID)
    finally:
        await client.close()
    async with AIOProducer(bootstrap_servers=broker.bootstrap) as producer:
        assert producer.idempotent == supported
        await producer.send_and_wait(unique_topic("idem"), b"v")
    if not supported:
        assert any("without idempotence" in r.getMessage() for r in caplog.records)
    async with AIOProducer(
        bootstrap_servers=broker.bootstrap, enable_idempotence=False
    ) as producer:
        assert not producer.idempotent


async def test_sequences_number_each_partitions_records(
    broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def fake_init(self: AIOProducer) -> None:
        # As if InitProducerId had answered: what the batches carry is what is checked.
        self.producer_id, self.producer_epoch = 4242, 3

    monkeypatch.setattr(AIOProducer, "_init_idempotence", fake_init)
    topic = unique_topic("sequences")
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=2)
    async with AIOProducer(
        bootstrap_servers=broker.bootstrap, batch_size=400, linger_ms=1
    ) as producer:
        futures = [await producer.send(topic, b"x" * 50, partition=i % 2) for i in range(300)]
        await asyncio.gather(*futures)
    for partition in (0, 1):
        batches = await _raw_batches(broker.bootstrap, TopicPartition(topic, partition))
        assert len(batches) > 1
        expected_sequence = 0
        for base_offset, producer_id, epoch, base_sequence, count in batches:
            assert (producer_id, epoch) == (4242, 3)
            assert base_sequence == expected_sequence == base_offset
            expected_sequence += count
        assert expected_sequence == 150
