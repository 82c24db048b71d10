"""The transactional producer's state machine against a scripted coordinator
(fake_txn_cluster.py): the order of its requests, retries of busy or moved coordinators,
fencing as a fatal error, failed records as an abortable one, and the epoch bump after an
abort that dropped records. The real broker's behaviour is in test_client_transactions.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fake_txn_cluster import FakeTxnCluster

from josefk.client import (
    AIOProducer,
    ConsumerGroupMetadata,
    KafkaClient,
    PreparedTransaction,
    TopicPartition,
    TransactionState,
    complete_transaction,
)
from josefk.client.errors import (
    AbortableTransactionError,
    FatalTransactionError,
    IllegalStateError,
    TransactionAbortedError,
)
from josefk.protocol import ApiKey, ErrorCode
from josefk.records import RecordBatch

TOPIC = "txn-unit"


@pytest.fixture
async def cluster() -> AsyncIterator[FakeTxnCluster]:
    fake = FakeTxnCluster(TOPIC)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


def _producer(cluster: FakeTxnCluster, **settings: object) -> AIOProducer:
    options: dict[str, object] = {
        "bootstrap_servers": cluster.bootstrap,
        "transactional_id": "tx-1",
        "retry_backoff_ms": 1,
        "retry_backoff_max_ms": 5,
        "linger_ms": 0,
    }
    options.update(settings)
    return AIOProducer(**options)  # type: ignore[arg-type]


def _api_order(cluster: FakeTxnCluster) -> list[str]:
    return [ApiKey(key).name for key, _ in cluster.calls]


async def test_commit_adds_the_partition_before_producing(cluster: FakeTxnCluster) -> None:
    async with _producer(cluster) as producer:
        assert producer.transaction_state is TransactionState.UNINITIALIZED
        with pytest.raises(IllegalStateError):
            await producer.send(TOPIC, b"too early")
        await producer.init_transactions()
        assert (producer.producer_id, producer.producer_epoch) == (77, 0)
        producer.begin_transaction()
        with pytest.raises(IllegalStateError):
            producer.begin_transaction()
        futures = [await producer.send(TOPIC, b"v%d" % i, partition=0) for i in range(3)]
        await producer.commit_transaction()
        assert all(f.done() and f.exception() is None for f in futures)
        assert producer.transaction_state is TransactionState.READY
    assert _api_order(cluster) == [
        "FIND_COORDINATOR",
        "INIT_PRODUCER_ID",
        "ADD_PARTITIONS_TO_TXN",
        "END_TXN",
    ]
    (init,) = cluster.calls_of(ApiKey.INIT_PRODUCER_ID)
    assert init.transactional_id == "tx-1"
    assert init.transaction_timeout_ms == 60_000
    (end,) = cluster.calls_of(ApiKey.END_TXN)
    assert end.committed is True
    assert (end.producer_id, end.producer_epoch) == (77, 0)
    assert cluster.transactional_batches >= 1
    batch = RecordBatch(memoryview(cluster.batches[0]))
    assert batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 0, 0)


async def test_init_retries_busy_and_moved_coordinators(cluster: FakeTxnCluster) -> None:
    cluster.script[ApiKey.INIT_PRODUCER_ID] = [
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    ]
    async with _producer(cluster) as producer:
        await producer.init_transactions()
        assert producer.transaction_state is TransactionState.READY
    # NOT_COORDINATOR sends the producer back to FindCoordinator, the others only wait.
    assert _api_order(cluster) == [
        "FIND_COORDINATOR",
        "INIT_PRODUCER_ID",
        "INIT_PRODUCER_ID",
        "INIT_PRODUCER_ID",
        "FIND_COORDINATOR",
        "INIT_PRODUCER_ID",
    ]


async def test_init_refused_is_fatal(cluster: FakeTxnCluster) -> None:
    cluster.script[ApiKey.INIT_PRODUCER_ID] = [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
    async with _producer(cluster) as producer:
        with pytest.raises(FatalTransactionError) as info:
            await producer.init_transactions()
        assert info.value.cause is not None
        assert info.value.cause.name == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
        assert producer.transaction_state is TransactionState.FATAL_ERROR
        with pytest.raises(FatalTransactionError):
            producer.begin_transaction()


async def test_fenced_produce_makes_the_producer_fatal(cluster: FakeTxnCluster) -> None:
    async with _producer(cluster) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        cluster.fail_next_produce = ErrorCode.PRODUCER_FENCED
        future = await producer.send(TOPIC, b"zombie", partition=0)
        with pytest.raises(FatalTransactionError) as info:
            await producer.commit_transaction()
        assert info.value.cause is not None and info.value.cause.name == "PRODUCER_FENCED"
        assert future.done() and future.exception() is not None
        assert producer.transaction_state is TransactionState.FATAL_ERROR
        with pytest.raises(FatalTransactionError):
            await producer.send(TOPIC, b"more", partition=0)
        with pytest.raises(FatalTransactionError):
            await producer.abort_transaction()
    assert not cluster.calls_of(ApiKey.END_TXN)


async def test_failed_record_needs_abort_then_epoch_bump(cluster: FakeTxnCluster) -> None:
    async with _producer(cluster) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        cluster.fail_next_produce = ErrorCode.INVALID_RECORD
        await producer.send(TOPIC, b"bad", partition=0)
        with pytest.raises(AbortableTransactionError):
            await producer.commit_transaction()
        assert producer.transaction_state is TransactionState.ABORTABLE_ERROR
        with pytest.raises(AbortableTransactionError):
            await producer.send(TOPIC, b"not now", partition=0)
        await producer.abort_transaction()
        assert producer.transaction_state is TransactionState.READY
        # The failed record's sequence numbers are lost: a new epoch starts them at 0.
        assert producer.producer_epoch == 1
        producer.begin_transaction()
        await producer.send_and_wait(TOPIC, b"good", partition=0)
        await producer.commit_transaction()
    ends = cluster.calls_of(ApiKey.END_TXN)
    assert [e.committed for e in ends] == [False, True]
    bump = cluster.calls_of(ApiKey.INIT_PRODUCER_ID)[1]
    assert (bump.producer_id, bump.producer_epoch) == (77, 0)
    last = RecordBatch(memoryview(cluster.batches[-1]))
    assert (last.producer_epoch, last.base_sequence) == (1, 0)


async def test_abort_drops_records_not_yet_sent(cluster: FakeTxnCluster) -> None:
    # A long linger keeps the records in their open batch until the abort.
    async with _producer(cluster, linger_ms=60_000) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        future = await producer.send(TOPIC, b"never", partition=0)
        await producer.abort_transaction()
        assert isinstance(future.exception(), TransactionAbortedError)
    # Nothing reached the coordinator, so there was nothing for EndTxn to end.
    assert _api_order(cluster) == ["FIND_COORDINATOR", "INIT_PRODUCER_ID", "INIT_PRODUCER_ID"]
    assert cluster.batches == []


async def test_add_partitions_refused_is_abortable(cluster: FakeTxnCluster) -> None:
    cluster.script[ApiKey.ADD_PARTITIONS_TO_TXN] = [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    async with _producer(cluster) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        future = await producer.send(TOPIC, b"x", partition=0)
        with pytest.raises(AbortableTransactionError):
            await producer.commit_transaction()
        assert isinstance(future.exception(), AbortableTransactionError)
        await producer.abort_transaction()
    assert cluster.batches == []


async def test_add_partitions_retries_concurrent_transactions(cluster: FakeTxnCluster) -> None:
    cluster.script[ApiKey.ADD_PARTITIONS_TO_TXN] = [ErrorCode.CONCURRENT_TRANSACTIONS] * 3
    async with _producer(cluster) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        metadata = await producer.send_and_wait(TOPIC, b"x", partition=0)
        await producer.commit_transaction()
    assert metadata.offset == 0
    assert len(cluster.calls_of(ApiKey.ADD_PARTITIONS_TO_TXN)) == 4


async def test_send_offsets_carries_the_group_generation(cluster: FakeTxnCluster) -> None:
    async with _producer(cluster) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send_offsets_to_transaction(
            {TopicPartition("in", 0): 42, TopicPartition("in", 1): 7},
            ConsumerGroupMetadata("g", 3, "member-a", "instance-a"),
        )
        await producer.commit_transaction()
    assert _api_order(cluster) == [
        "FIND_COORDINATOR",
        "INIT_PRODUCER_ID",
        "ADD_OFFSETS_TO_TXN",
        "FIND_COORDINATOR",
        "TXN_OFFSET_COMMIT",
        "END_TXN",
    ]
    (add,) = cluster.calls_of(ApiKey.ADD_OFFSETS_TO_TXN)
    assert add.group_id == "g"
    (commit,) = cluster.calls_of(ApiKey.TXN_OFFSET_COMMIT)
    assert (commit.generation_id, commit.member_id, commit.group_instance_id) == (
        3,
        "member-a",
        "instance-a",
    )
    offsets = {
        (t.name, p.partition_index): p.committed_offset for t in commit.topics for p in t.partitions
    }
    assert offsets == {("in", 0): 42, ("in", 1): 7}
    finds = cluster.calls_of(ApiKey.FIND_COORDINATOR)
    assert [(f.key, f.key_type) for f in finds] == [("tx-1", 1), ("g", 0)]


async def test_fenced_offset_commit_is_fatal(cluster: FakeTxnCluster) -> None:
    cluster.script[ApiKey.TXN_OFFSET_COMMIT] = [ErrorCode.PRODUCER_FENCED]
    async with _producer(cluster) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        with pytest.raises(FatalTransactionError):
            await producer.send_offsets_to_transaction({TopicPartition("in", 0): 1}, "g")


async def test_rebalanced_member_offsets_are_abortable(cluster: FakeTxnCluster) -> None:
    cluster.script[ApiKey.TXN_OFFSET_COMMIT] = [ErrorCode.ILLEGAL_GENERATION]
    async with _producer(cluster) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        with pytest.raises(AbortableTransactionError):
            await producer.send_offsets_to_transaction({TopicPartition("in", 0): 1}, "g")
        await producer.abort_transaction()
        assert producer.transaction_state is TransactionState.READY


async def test_commit_retries_concurrent_transactions_and_fenced_end_is_fatal(
    cluster: FakeTxnCluster,
) -> None:
    cluster.script[ApiKey.END_TXN] = [ErrorCode.CONCURRENT_TRANSACTIONS]
    async with _producer(cluster) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send(TOPIC, b"a", partition=0)
        await producer.commit_transaction()
        producer.begin_transaction()
        await producer.send(TOPIC, b"b", partition=0)
        cluster.script[ApiKey.END_TXN] = [ErrorCode.PRODUCER_FENCED]
        with pytest.raises(FatalTransactionError):
            await producer.commit_transaction()
    assert len(cluster.calls_of(ApiKey.END_TXN)) == 3


async def test_close_aborts_the_open_transaction(cluster: FakeTxnCluster) -> None:
    producer = _producer(cluster)
    await producer.start()
    await producer.init_transactions()
    producer.begin_transaction()
    await producer.send_and_wait(TOPIC, b"half", partition=0)
    await producer.close()
    (end,) = cluster.calls_of(ApiKey.END_TXN)
    assert end.committed is False


def test_transactional_id_needs_acks_all_and_idempotence() -> None:
    with pytest.raises(ValueError, match="acks"):
        AIOProducer(transactional_id="t", acks=1)
    with pytest.raises(ValueError, match="idempotence"):
        AIOProducer(transactional_id="t", enable_idempotence=False)


async def test_non_transactional_producer_has_no_transaction_api(cluster: FakeTxnCluster) -> None:
    async with AIOProducer(bootstrap_servers=cluster.bootstrap) as producer:
        assert producer.transaction_state is None
        with pytest.raises(IllegalStateError):
            producer.begin_transaction()


async def test_prepared_transaction_is_ended_by_someone_else(cluster: FakeTxnCluster) -> None:
    async with _producer(cluster) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send(TOPIC, b"handed over", partition=0)
        prepared = await producer.prepare_transaction()
        assert producer.transaction_state is TransactionState.PREPARED
        with pytest.raises(IllegalStateError):
            producer.begin_transaction()
    # Closing a producer with a prepared transaction does not abort it.
    assert not cluster.calls_of(ApiKey.END_TXN)
    assert prepared == PreparedTransaction("tx-1", 77, 0, True)
    client = KafkaClient(bootstrap_servers=cluster.bootstrap)
    await client.start()
    try:
        await complete_transaction(client, prepared, commit=True)
        await complete_transaction(client, prepared._replace(started=False), commit=True)
    finally:
        await client.close()
    (end,) = cluster.calls_of(ApiKey.END_TXN)
    assert (end.transactional_id, end.producer_id, end.producer_epoch, end.committed) == (
        "tx-1",
        77,
        0,
        True,
    )
