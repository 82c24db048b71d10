"""josefk's transactional producer and read_committed consumer against a real broker.

A real ``josefk serve``: commits are seen by josefk's read_committed consumer and by
confluent-kafka's, aborts only by read_uncommitted ones; transaction markers never reach the
application but positions move past them; a second producer with the same transactional id
fences the first (FatalTransactionError) and aborts its open transaction;
send_offsets_to_transaction commits a group's offsets only with the transaction; the admin
lists and describes transactions and producers. Conditions are polled with a deadline.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from broker_process import BrokerProcess
from client_helpers import CLIENT_TIMEOUT_S, ck_read_partition, unique_topic

from josefk.client import (
    AIOAdmin,
    AIOConsumer,
    AIOProducer,
    NewTopic,
    TopicPartition,
    TransactionState,
)
from josefk.client.cluster import find_coordinator
from josefk.client.errors import FatalTransactionError, KafkaError
from josefk.client.offsets import fetch_committed_offsets
from josefk.client.sync import Consumer, Producer
from josefk.protocol import ApiKey

DEADLINE_S = 30.0


@pytest.fixture
async def admin(broker: BrokerProcess) -> AsyncIterator[AIOAdmin]:
    async with AIOAdmin(bootstrap_servers=broker.bootstrap) as client:
        yield client


async def _topic(admin: AIOAdmin, prefix: str, partitions: int = 1) -> str:
    name = unique_topic(prefix)
    await admin.create_topics([NewTopic(name, partitions, 1)])
    await admin.client.wait_for_topic(name, timeout_s=CLIENT_TIMEOUT_S)
    return name


def _producer(broker: BrokerProcess, transactional_id: str) -> AIOProducer:
    return AIOProducer(
        bootstrap_servers=broker.bootstrap, transactional_id=transactional_id, linger_ms=2
    )


async def _read_all(
    broker: BrokerProcess, topic: str, isolation: str, partitions: int = 1
) -> tuple[list[bytes], dict[int, int]]:
    """Every value up to the end ``isolation`` allows now, and each partition's position
    once there (read until the position reaches the end offset)."""
    async with AIOConsumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    ) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while True:
            positions = {tp: await consumer.position(tp) for tp in tps}
            if all(positions[tp] >= ends[tp] for tp in tps):
                return values, {tp.partition: positions[tp] for tp in tps}
            assert time.monotonic() < deadline, f"stuck at {positions}, ends {ends}"
            for records in (await consumer.getmany(timeout_ms=200)).values():
                values.extend(r.value or b"" for r in records)


async def test_commit_and_abort_as_read_committed_and_uncommitted_see_them(
    broker: BrokerProcess, admin: AIOAdmin
) -> None:
    topic = await _topic(admin, "txn-commit-abort")
    async with _producer(broker, unique_topic("tx-ca")) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        for i in range(5):
            await producer.send(topic, b"committed-%d" % i, partition=0)
        await producer.commit_transaction()
        producer.begin_transaction()
        for i in range(3):
            await producer.send(topic, b"aborted-%d" % i, partition=0)
        await producer.flush()  # written to the log, then aborted
        await producer.abort_transaction()
        producer.begin_transaction()
        await producer.send(topic, b"last", partition=0)
        await producer.commit_transaction()

    committed, positions = await _read_all(broker, topic, "read_committed")
    assert committed == [b"committed-%d" % i for i in range(5)] + [b"last"]
    everything, _ = await _read_all(broker, topic, "read_uncommitted")
    assert everything == (
        [b"committed-%d" % i for i in range(5)] + [b"aborted-%d" % i for i in range(3)] + [b"last"]
    )
    # 9 records and 3 markers: the position is past the last marker, no marker was returned.
    assert positions == {0: 12}
    assert ck_read_partition(broker.bootstrap, topic, "read_committed") == committed


async def test_open_transaction_holds_read_committed_back(
    broker: BrokerProcess, admin: AIOAdmin
) -> None:
    topic = await _topic(admin, "txn-open")
    async with _producer(broker, unique_topic("tx-open")) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send_and_wait(topic, b"pending", partition=0)
        tp = TopicPartition(topic, 0)
        committed_end = await admin.list_offsets(
            {tp: admin.LATEST}, isolation_level="read_committed"
        )
        uncommitted_end = await admin.list_offsets({tp: admin.LATEST})
        assert committed_end[tp] is not None and committed_end[tp].offset == 0  # the LSO
        assert uncommitted_end[tp] is not None and uncommitted_end[tp].offset == 1
        values, _ = await _read_all(broker, topic, "read_committed")
        assert values == []
        listed = {t.transactional_id: t for t in await admin.list_transactions()}
        assert listed[producer.config.transactional_id or ""].state == "Ongoing"
        (described,) = await admin.describe_transactions([producer.config.transactional_id or ""])
        assert described.state == "Ongoing"
        assert described.partitions == [tp]
        assert described.producer_id == producer.producer_id
        producers = await admin.describe_producers([tp])
        states = producers[tp]
        assert not isinstance(states, Exception)
        assert [(p.producer_id, p.current_transaction_start_offset) for p in states] == [
            (producer.producer_id, 0)
        ]
        await producer.commit_transaction()
    values, positions = await _read_all(broker, topic, "read_committed")
    assert values == [b"pending"]
    assert positions == {0: 2}


async def test_second_producer_fences_the_first(broker: BrokerProcess, admin: AIOAdmin) -> None:
    topic = await _topic(admin, "txn-fence")
    transactional_id = unique_topic("tx-fence")
    first = _producer(broker, transactional_id)
    second = _producer(broker, transactional_id)
    await first.start()
    await second.start()
    try:
        await first.init_transactions()
        first.begin_transaction()
        await first.send_and_wait(topic, b"zombie", partition=0)
        await second.init_transactions()  # fences the first and aborts its transaction
        assert second.producer_epoch > first.producer_epoch
        with pytest.raises(FatalTransactionError) as info:
            await first.send(topic, b"more", partition=0)
            await first.commit_transaction()
        assert info.value.cause is not None
        assert info.value.cause.name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
        assert first.transaction_state is TransactionState.FATAL_ERROR
        second.begin_transaction()
        await second.send(topic, b"successor", partition=0)
        await second.commit_transaction()
    finally:
        await first.close()
        await second.close()
    values, _ = await _read_all(broker, topic, "read_committed")
    assert values == [b"successor"]
    everything, _ = await _read_all(broker, topic, "read_uncommitted")
    assert everything[0] == b"zombie"


async def test_close_aborts_and_the_id_is_reusable(broker: BrokerProcess, admin: AIOAdmin) -> None:
    topic = await _topic(admin, "txn-close")
    transactional_id = unique_topic("tx-close")
    async with _producer(broker, transactional_id) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send_and_wait(topic, b"left open", partition=0)
    (described,) = await admin.describe_transactions([transactional_id])
    assert described.state in ("PrepareAbort", "CompleteAbort")
    async with _producer(broker, transactional_id) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send(topic, b"again", partition=0)
        await producer.commit_transaction()
    values, _ = await _read_all(broker, topic, "read_committed")
    assert values == [b"again"]


def test_sync_facade_transactions(broker: BrokerProcess) -> None:
    topic = unique_topic("txn-sync")
    with Producer(bootstrap_servers=broker.bootstrap, transactional_id=unique_topic("tx-s")) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"one")
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"two")
        p.abort_transaction()
    with Consumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    ) as consumer:
        deadline = time.monotonic() + DEADLINE_S
        got: list[bytes] = []
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(200).values():
                got.extend(r.value or b"" for r in records)
        assert got == [b"one"]


async def test_send_offsets_commits_group_offsets_with_the_transaction(
    broker: BrokerProcess, admin: AIOAdmin
) -> None:
    probe = await admin.client.connection(admin.client.least_loaded_node())
    if not probe.supports(ApiKey.TXN_OFFSET_COMMIT):
        pytest.skip(
            "the broker has no TxnOffsetCommit yet (the 'groups' part of issue 18 has not "
            "landed on main)"
        )
    source = await _topic(admin, "txn-ctp-in")
    sink = await _topic(admin, "txn-ctp-out")
    group = unique_topic("txn-ctp-group")
    async with AIOProducer(bootstrap_servers=broker.bootstrap) as plain:
        for i in range(10):
            await plain.send(source, b"in-%d" % i, partition=0)
    async with (
        AIOConsumer(
            source,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        ) as consumer,
        _producer(broker, unique_topic("tx-ctp")) as producer,
    ):
        await producer.init_transactions()
        seen: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < 10:
            assert time.monotonic() < deadline
            batches = await consumer.getmany(timeout_ms=200)
            if not batches:
                continue
            producer.begin_transaction()
            offsets: dict[TopicPartition, int] = {}
            for tp, records in batches.items():
                for r in records:
                    await producer.send(sink, (r.value or b"").upper(), partition=0)
                    seen.append(r.value or b"")
                offsets[tp] = records[-1].offset + 1
            await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            await producer.commit_transaction()
        # One more transaction that aborts: its offsets must not stick.
        producer.begin_transaction()
        await producer.send(sink, b"ABORTED", partition=0)
        await producer.send_offsets_to_transaction(
            {TopicPartition(source, 0): 3}, consumer.group_metadata()
        )
        await producer.abort_transaction()
    assert await admin.list_group_offsets(group) == {TopicPartition(source, 0): 10}
    values, _ = await _read_all(broker, sink, "read_committed")
    assert values == [b"IN-%d" % i for i in range(10)]


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
async def test_read_committed_group_waits_for_pending_transactional_offsets(
    broker: BrokerProcess, admin: AIOAdmin, group_protocol: str
) -> None:
    # Both protocols' members fetch committed offsets through the same code
    # (membership.py); the KIP-848 member once raised UNSTABLE_OFFSET_COMMIT instead.
    topic = await _topic(admin, "txn-stable")
    group = unique_topic("txn-stable-group")
    tp = TopicPartition(topic, 0)
    async with AIOProducer(bootstrap_servers=broker.bootstrap) as plain:
        for i in range(10):
            await plain.send(topic, b"%d" % i, partition=0)
    async with _producer(broker, unique_topic("tx-stable")) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send_offsets_to_transaction({tp: 7}, group)
        # KIP-447: while the transaction is open its offsets are "unstable"; a stable read
        # is refused (the consumer retries), a plain one sees no committed offset yet.
        coordinator = await find_coordinator(admin.client, group)
        with pytest.raises(KafkaError) as info:
            await fetch_committed_offsets(
                admin.client, coordinator, group, [tp], require_stable=True
            )
        assert info.value.name == "UNSTABLE_OFFSET_COMMIT"
        assert await fetch_committed_offsets(admin.client, coordinator, group, [tp]) == {tp: None}
        await producer.commit_transaction()
    async with AIOConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        group_protocol=group_protocol,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as consumer:
        consumer.assign([tp])
        assert await consumer.position(tp) == 7
        assert await consumer.committed(tp) == 7


async def test_abort_of_unsent_records_bumps_the_epoch(
    broker: BrokerProcess, admin: AIOAdmin
) -> None:
    topic = await _topic(admin, "txn-dirty")
    async with AIOProducer(
        bootstrap_servers=broker.bootstrap,
        transactional_id=unique_topic("tx-dirty"),
        linger_ms=60_000,  # the records stay in their batch until the abort drops them
    ) as producer:
        await producer.init_transactions()
        epoch = producer.producer_epoch
        producer.begin_transaction()
        await producer.send(topic, b"sent", partition=0)
        await producer.flush()
        dropped = await producer.send(topic, b"dropped", partition=0)
        await producer.abort_transaction()
        assert dropped.done() and dropped.exception() is not None
        # The dropped record's sequence numbers were never written: a new epoch (KIP-360)
        # starts the partition's sequences again, and the next transaction is accepted.
        assert producer.producer_epoch == epoch + 1
        producer.begin_transaction()
        await producer.send(topic, b"after", partition=0)
        await producer.commit_transaction()
    values, _ = await _read_all(broker, topic, "read_committed")
    assert values == [b"after"]
