"""Consumer groups with josefk's client against a real broker: two members share the
partitions, a member leaving hands its partitions over, commits survive a restart of the
consumer, and a kafka-python consumer can be in the same group."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence

import pytest
from broker_process import BrokerProcess
from client_helpers import make_messages, unique_topic
from client_suite import TIMEOUT_S, produce, start_module_broker

from josefk.client import (
    AIOAdmin,
    AIOConsumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    RoundRobinAssignor,
    TopicPartition,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """No initial rebalance delay: the first join completes at once."""
    yield from start_module_broker(
        tmp_path_factory, "groups", ["group.initial.rebalance.delay.ms=0"]
    )


async def _create(bootstrap: str, topic: str, partitions: int) -> None:
    async with AIOAdmin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topic(topic, num_partitions=partitions)


def _group_consumer(bootstrap: str, group: str, *topics: str, **settings: object) -> AIOConsumer:
    return AIOConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        heartbeat_interval_ms=200,
        session_timeout_ms=6000,
        **settings,
    )


async def _wait_assignment(
    consumers: Sequence[AIOConsumer], total: int
) -> dict[int, list[ConsumerRecord]]:
    """Poll every member until their assignments are disjoint and cover ``total``
    partitions; returns what the polls delivered meanwhile, by member index."""
    got: dict[int, list[ConsumerRecord]] = {i: [] for i in range(len(consumers))}
    async with asyncio.timeout(TIMEOUT_S):
        while True:
            results = await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
            for i, batch in enumerate(results):
                for records in batch.values():
                    got[i].extend(records)
            parts = [c.assignment() for c in consumers]
            union = set().union(*parts)
            if len(union) == total and sum(len(p) for p in parts) == total and all(parts):
                return got


async def _drain(
    consumers: Sequence[AIOConsumer],
    count: int,
    got: dict[int, list[ConsumerRecord]] | None = None,
) -> dict[int, list[ConsumerRecord]]:
    """Poll until ``count`` records arrived in all (including those already in ``got``)."""
    if got is None:
        got = {i: [] for i in range(len(consumers))}
    async with asyncio.timeout(TIMEOUT_S):
        while sum(len(v) for v in got.values()) < count:
            results = await asyncio.gather(*(c.getmany(timeout_ms=200) for c in consumers))
            for i, batch in enumerate(results):
                for records in batch.values():
                    got[i].extend(records)
    return got


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
async def test_two_members_split_the_partitions(broker: BrokerProcess, assignor: str) -> None:
    topic = unique_topic(f"group-{assignor}")
    group = unique_topic("g")
    await _create(broker.bootstrap, topic, 4)
    strategy = [RoundRobinAssignor()] if assignor == "roundrobin" else []
    a = _group_consumer(broker.bootstrap, group, topic, partition_assignment_strategy=strategy)
    b = _group_consumer(broker.bootstrap, group, topic, partition_assignment_strategy=strategy)
    await a.start()
    await b.start()
    try:
        await _wait_assignment([a, b], 4)
        assert len(a.assignment()) == 2 and len(b.assignment()) == 2
        sent = make_messages(200)
        keyed = [m for m in sent if m.key is not None]
        await produce(broker.bootstrap, topic, keyed, partition=None)
        got = await _drain([a, b], len(keyed))
        assert got[0] and got[1]
        values = sorted(r.value or b"" for records in got.values() for r in records)
        assert values == sorted(m.value or b"" for m in keyed)
        for i, consumer in enumerate((a, b)):
            assert {TopicPartition(r.topic, r.partition) for r in got[i]} <= consumer.assignment()
    finally:
        await a.close()
        await b.close()


async def test_leaving_member_hands_over_and_commits_are_kept(broker: BrokerProcess) -> None:
    topic = unique_topic("group-leave")
    group = unique_topic("g")
    await _create(broker.bootstrap, topic, 2)
    sent = [m for m in make_messages(101) if m.key is not None]
    a = _group_consumer(broker.bootstrap, group, topic, enable_auto_commit=False)
    b = _group_consumer(broker.bootstrap, group, topic, enable_auto_commit=False)
    await a.start()
    await b.start()
    try:
        assert not any((await _wait_assignment([a, b], 2)).values())
        await produce(broker.bootstrap, topic, sent, partition=None)
        got = await _drain([a, b], len(sent))
        assert sum(len(v) for v in got.values()) == len(sent)
        await a.commit()
        await b.commit()
        await b.close()
        # a takes over both partitions; nothing is redelivered because b committed.
        async with asyncio.timeout(TIMEOUT_S):
            while len(a.assignment()) != 2:
                assert not await a.getmany(timeout_ms=100)
        assert not await a.getmany(timeout_ms=300)
        positions = {tp: await a.position(tp) for tp in a.assignment()}
        assert sum(positions.values()) == len(sent)
        for tp, offset in positions.items():
            assert await a.committed(tp) == offset
    finally:
        await a.close()
        await b.close()
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
        offsets = await admin.list_group_offsets(group)
        assert sum(offsets.values()) == len(sent)
        (described,) = await admin.describe_groups([group])
        assert described.state in ("Empty", "Dead")
        # Offsets of an empty group can be reset on its behalf.
        reset = await admin.reset_group_offsets(group, sorted(offsets), to="earliest")
        assert set(reset.values()) == {0}
        assert set((await admin.list_group_offsets(group)).values()) == {0}


async def test_auto_commit_on_close(broker: BrokerProcess) -> None:
    topic = unique_topic("group-autocommit")
    group = unique_topic("g")
    await produce(broker.bootstrap, topic, make_messages(10))
    consumer = _group_consumer(broker.bootstrap, group, topic)
    await consumer.start()
    try:
        got = await _drain([consumer], 10, await _wait_assignment([consumer], 1))
        assert len(got[0]) == 10
    finally:
        await consumer.close()
    again = _group_consumer(broker.bootstrap, group, topic)
    await again.start()
    try:
        await _wait_assignment([again], 1)
        assert await again.position(TopicPartition(topic, 0)) == 10
    finally:
        await again.close()


async def test_kafka_python_member_in_the_same_group(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer

    topic = unique_topic("group-mixed")
    group = unique_topic("g")
    await _create(broker.bootstrap, topic, 4)
    theirs_assignment: list[set[tuple[str, int]]] = []
    stop = threading.Event()

    def run_kafka_python() -> None:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=200,
            session_timeout_ms=6000,
            enable_auto_commit=False,
        )
        try:
            while not stop.is_set():
                consumer.poll(timeout_ms=100)
                theirs_assignment.append({(tp.topic, tp.partition) for tp in consumer.assignment()})
        finally:
            consumer.close()

    thread = threading.Thread(target=run_kafka_python, daemon=True)
    thread.start()
    ours = _group_consumer(broker.bootstrap, group, topic, enable_auto_commit=False)
    await ours.start()
    try:
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                await ours.getmany(timeout_ms=100)
                mine = {(tp.topic, tp.partition) for tp in ours.assignment()}
                theirs = theirs_assignment[-1] if theirs_assignment else set()
                if len(mine) == 2 and len(theirs) == 2 and not mine & theirs:
                    break
    finally:
        stop.set()
        await ours.close()
        await asyncio.to_thread(thread.join, TIMEOUT_S)


class _Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", assigned))


async def test_rebalance_listener_sees_each_rebalance(broker: BrokerProcess) -> None:
    topic = unique_topic("group-listener")
    group = unique_topic("g")
    await _create(broker.bootstrap, topic, 2)
    both = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    recorder = _Recorder()
    a = _group_consumer(broker.bootstrap, group)
    await a.start()
    a.subscribe([topic], listener=recorder)
    b = _group_consumer(broker.bootstrap, group, topic)
    try:
        await _wait_assignment([a], 2)
        assert recorder.events == [("assigned", both)]
        await b.start()
        await _wait_assignment([a, b], 2)
        assert recorder.events[1] == ("revoked", both)
        assert recorder.events[-1] == ("assigned", a.assignment())
    finally:
        await b.close()
        await a.close()
    assert recorder.events[-1][0] == "revoked"
