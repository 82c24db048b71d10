"""Helpers of the client suite: josefk-client I/O with TestMessage values.

Owns producing and reading ``client_helpers.TestMessage`` lists with josefk's own client,
each call bounded by a timeout (no sleeps). Imports josefk.client and the integration
suite's client_helpers (on sys.path through conftest.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from broker_process import BrokerProcess
from client_helpers import TestMessage

from josefk.client import AIOConsumer, AIOProducer, ConsumerRecord, TopicPartition

TIMEOUT_S = 20.0


def to_message(record: ConsumerRecord) -> TestMessage:
    return TestMessage(record.key, record.value, tuple(record.headers), record.timestamp)


async def produce(
    bootstrap: str,
    topic: str,
    messages: Sequence[TestMessage],
    *,
    partition: int | None = 0,
    **settings: Any,
) -> list[Any]:
    async with AIOProducer(bootstrap_servers=bootstrap, **settings) as producer:
        futures = [
            await producer.send(
                topic,
                m.value,
                m.key,
                partition=partition,
                timestamp_ms=m.timestamp,
                headers=list(m.headers),
            )
            for m in messages
        ]
        async with asyncio.timeout(TIMEOUT_S):
            return list(await asyncio.gather(*futures))


async def consume(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    partition: int = 0,
    offset: int | None = None,
    **settings: Any,
) -> list[ConsumerRecord]:
    """Assign one partition (from ``offset``, else the beginning) and read ``count`` records."""
    settings.setdefault("auto_offset_reset", "earliest")
    async with AIOConsumer(bootstrap_servers=bootstrap, **settings) as consumer:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if offset is not None:
            consumer.seek(tp, offset)
        got: list[ConsumerRecord] = []
        async with asyncio.timeout(TIMEOUT_S):
            while len(got) < count:
                batch = await consumer.getmany(timeout_ms=1000, max_records=count - len(got))
                for records in batch.values():
                    got.extend(records)
        return got


def start_module_broker(
    tmp_path_factory: pytest.TempPathFactory, name: str, settings: Sequence[str]
) -> Iterator[BrokerProcess]:
    """A broker with ``settings`` for a module that overrides the ``broker`` fixture."""
    base = tmp_path_factory.mktemp(f"josefk-{name}")
    started = BrokerProcess(base / "data", base / f"{name}.stderr.log", settings=settings)
    try:
        started.start()
        yield started
        if started.is_alive():
            started.stop()
    finally:
        started.close()
