"""The transaction coordinator's state machine on a manual clock, an in-memory log and a fake
marker writer.

Timers are the storage Scheduler's, stepped with ``ManualClock.advance`` + ``run_due``; a
"restart" is a new coordinator loading the same MemoryTxnStore. The marker writer records
every marker and can fail partitions or hold the markers back, to show what clients see while
markers are in flight.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from josefk.broker.txn.coordinator import TransactionCoordinator, TxnConfig
from josefk.broker.txn.log_schema import TxnLogValue, decode_key, decode_value, encode_key
from josefk.broker.txn.log_schema import encode_value as encode_log_value
from josefk.broker.txn.metadata import (
    MAX_BUMPABLE_EPOCH,
    IllegalTransitionError,
    TxnMetadata,
    TxnState,
)
from josefk.broker.txn.store import MemoryTxnStore
from josefk.protocol.errors import ErrorCode
from josefk.storage.offsets import TopicPartition, TxnMarker
from josefk.util.clock import ManualClock
from josefk.util.scheduler import Scheduler

TID = "txn-a"
TIMEOUT_MS = 60_000
T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)
OFFSETS = TopicPartition("__consumer_offsets", 7)


@dataclass
class FakeMarkers:
    """Records markers; ``failures[tp]`` answers that error for that many calls; while
    ``gate`` is set, writes wait for it to open."""

    written: list[tuple[TxnMarker, TopicPartition]] = field(default_factory=list)
    failures: dict[TopicPartition, list[ErrorCode]] = field(default_factory=dict)
    gate: asyncio.Event | None = None
    calls: int = 0

    async def write_markers(
        self, marker: TxnMarker, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        results = {}
        for tp in partitions:
            pending = self.failures.get(tp)
            if pending:
                results[tp] = pending.pop(0)
                continue
            self.written.append((marker, tp))
            results[tp] = ErrorCode.NONE
        return results


async def no_sleep(_: float) -> None:
    await asyncio.sleep(0)


@dataclass
class Env:
    clock: ManualClock
    scheduler: Scheduler
    store: MemoryTxnStore
    markers: FakeMarkers
    coordinator: TransactionCoordinator
    ids: itertools.count[int]

    def new_coordinator(self) -> TransactionCoordinator:
        coordinator = TransactionCoordinator(
            TxnConfig(
                state_partitions=4,
                max_timeout_ms=900_000,
                id_expiration_ms=3_600_000,
                abort_timed_out_interval_ms=1_000,
                remove_expired_interval_ms=10_000,
            ),
            self.store,
            self.markers,
            lambda: next(self.ids),
            scheduler=self.scheduler,
            clock=self.clock,
            sleep=no_sleep,
        )
        return coordinator

    async def restart(self) -> TransactionCoordinator:
        await self.coordinator.idle()
        self.coordinator.stop()
        self.coordinator = self.new_coordinator()
        self.coordinator.load()
        self.coordinator.start()
        return self.coordinator

    async def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        await self.scheduler.run_due()
        await self.coordinator.idle()

    def records(self) -> list[tuple[str, TxnLogValue | None]]:
        out = []
        for records in self.store.records.values():
            for key, value in records:
                out.append((decode_key(key), None if value is None else decode_value(value)))
        return out

    def states(self) -> list[TxnState]:
        return [TxnState(v.state) for k, v in self.records() if k == TID and v is not None]


@pytest.fixture
def env() -> Env:
    clock = ManualClock()
    scheduler = Scheduler(clock)
    store = MemoryTxnStore(partition_count=4)
    ids = itertools.count(1000)
    env = Env(clock, scheduler, store, FakeMarkers(), None, ids)  # type: ignore[arg-type]
    env.coordinator = env.new_coordinator()
    env.coordinator.load()
    env.coordinator.start()
    return env


async def begin(env: Env, *partitions: TopicPartition) -> tuple[int, int]:
    init = await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    assert init.error == ErrorCode.NONE
    error = await env.coordinator.add_partitions(
        TID, init.producer_id, init.producer_epoch, list(partitions or (T0,))
    )
    assert error == ErrorCode.NONE
    return init.producer_id, init.producer_epoch


# -- InitProducerId -----------------------------------------------------------------------


async def test_a_new_id_gets_epoch_0_and_each_init_bumps_it(env: Env) -> None:
    first = await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    assert (first.error, first.producer_id, first.producer_epoch) == (ErrorCode.NONE, 1000, 0)
    second = await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    assert (second.producer_id, second.producer_epoch) == (1000, 1)
    assert env.states() == [TxnState.EMPTY, TxnState.EMPTY]
    assert env.records()[-1][1] == TxnLogValue(
        1000, 1, TIMEOUT_MS, 0, (), env.clock.milliseconds(), -1
    )


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
async def test_timeouts_out_of_range_are_refused(env: Env, timeout_ms: int) -> None:
    result = await env.coordinator.init_producer_id(TID, timeout_ms)
    assert result.error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert env.store.writes == 0


async def test_ids_and_topics_the_log_cannot_hold_are_refused_without_a_trace(env: Env) -> None:
    result = await env.coordinator.init_producer_id("x" * 0x8000, TIMEOUT_MS)
    assert result.error == ErrorCode.INVALID_REQUEST
    assert env.coordinator.metadata("x" * 0x8000) is None
    init = await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    huge = TopicPartition("t" * 0x8000, 0)
    assert await env.coordinator.add_partitions(
        TID, init.producer_id, init.producer_epoch, [huge]
    ) == (ErrorCode.INVALID_REQUEST)
    meta = env.coordinator.metadata(TID)
    assert meta is not None and (meta.state, meta.pending) == (TxnState.EMPTY, None)
    assert await env.coordinator.add_partitions(
        TID, init.producer_id, init.producer_epoch, [T0]
    ) == (ErrorCode.NONE)


async def test_kip360_bumps_retries_and_fences(env: Env) -> None:
    first = await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    pid = first.producer_id
    bumped = await env.coordinator.init_producer_id(TID, TIMEOUT_MS, pid, 0)
    assert (bumped.error, bumped.producer_id, bumped.producer_epoch) == (ErrorCode.NONE, pid, 1)
    # The same request again (its answer was lost): the same answer, nothing written.
    writes = env.store.writes
    retry = await env.coordinator.init_producer_id(TID, TIMEOUT_MS, pid, 0)
    assert (retry.error, retry.producer_epoch) == (ErrorCode.NONE, 1)
    assert env.store.writes == writes
    await env.coordinator.init_producer_id(TID, TIMEOUT_MS, pid, 1)
    stale = await env.coordinator.init_producer_id(TID, TIMEOUT_MS, pid, 0)
    assert stale.error == ErrorCode.PRODUCER_FENCED
    other = await env.coordinator.init_producer_id(TID, TIMEOUT_MS, pid + 50, 0)
    assert other.error == ErrorCode.PRODUCER_FENCED


async def test_an_exhausted_epoch_moves_to_a_new_producer_id(env: Env) -> None:
    partition = env.coordinator.partition_for(TID)
    env.store.records[partition] = [
        (
            encode_key(TID),
            encode_log_value(TxnLogValue(77, MAX_BUMPABLE_EPOCH, TIMEOUT_MS, 4, (), 1, 1)),
        )
    ]
    coordinator = await env.restart()
    moved = await coordinator.init_producer_id(TID, TIMEOUT_MS, 77, MAX_BUMPABLE_EPOCH)
    assert (moved.error, moved.producer_id, moved.producer_epoch) == (ErrorCode.NONE, 1000, 0)
    # A retry of that request names the old id at its exhausted epoch: same answer.
    retry = await coordinator.init_producer_id(TID, TIMEOUT_MS, 77, MAX_BUMPABLE_EPOCH)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (ErrorCode.NONE, 1000, 0)


async def test_init_with_an_open_transaction_aborts_it_with_the_bumped_epoch(env: Env) -> None:
    pid, epoch = await begin(env, T0, T1)
    env.markers.gate = asyncio.Event()
    fenced = await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    assert fenced.error == ErrorCode.CONCURRENT_TRANSACTIONS
    meta = env.coordinator.metadata(TID)
    assert meta is not None and meta.state == TxnState.PREPARE_ABORT
    assert meta.producer_epoch == epoch + 1
    # Until the markers are written, the producer retries.
    again = await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    assert again.error == ErrorCode.CONCURRENT_TRANSACTIONS
    env.markers.gate.set()
    await env.coordinator.idle()
    assert {tp for _, tp in env.markers.written} == {T0, T1}
    assert all(m == TxnMarker(pid, epoch + 1, 0, committed=False) for m, _ in env.markers.written)
    assert meta.state == TxnState.COMPLETE_ABORT
    # The old producer is fenced; the retried init gets the epoch bumped once more.
    assert await env.coordinator.end_txn(TID, pid, epoch, True) == ErrorCode.PRODUCER_FENCED
    assert await env.coordinator.add_partitions(TID, pid, epoch, [T0]) == (
        ErrorCode.PRODUCER_FENCED
    )
    done = await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    assert (done.error, done.producer_id, done.producer_epoch) == (ErrorCode.NONE, pid, epoch + 2)


# -- AddPartitionsToTxn, EndTxn -----------------------------------------------------------


async def test_add_partitions_checks_the_producer(env: Env) -> None:
    assert await env.coordinator.add_partitions("nobody", 1, 0, [T0]) == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    init = await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    pid, epoch = init.producer_id, init.producer_epoch
    assert await env.coordinator.add_partitions(TID, pid + 1, epoch, [T0]) == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    assert await env.coordinator.add_partitions(TID, pid, epoch + 1, [T0]) == (
        ErrorCode.PRODUCER_FENCED
    )
    env.clock.advance(5)
    assert await env.coordinator.add_partitions(TID, pid, epoch, [T0]) == ErrorCode.NONE
    meta = env.coordinator.metadata(TID)
    assert meta is not None
    assert (meta.state, meta.partitions) == (TxnState.ONGOING, {T0})
    started = meta.start_timestamp_ms
    assert started == env.clock.milliseconds()
    # Known partitions write nothing; new ones are added, the start time kept.
    writes = env.store.writes
    assert await env.coordinator.add_partitions(TID, pid, epoch, [T0]) == ErrorCode.NONE
    assert env.store.writes == writes
    env.clock.advance(5)
    assert await env.coordinator.add_partitions(TID, pid, epoch, [T1, OFFSETS]) == ErrorCode.NONE
    assert meta.partitions == {T0, T1, OFFSETS}
    assert meta.start_timestamp_ms == started
    assert env.records()[-1][1] == TxnLogValue(
        pid,
        epoch,
        TIMEOUT_MS,
        TxnState.ONGOING,
        (("__consumer_offsets", (7,)), ("orders", (0, 1))),
        env.clock.milliseconds(),
        started,
    )


async def test_commit_writes_prepare_then_markers_then_complete(env: Env) -> None:
    pid, epoch = await begin(env, T0, OFFSETS)
    env.markers.gate = asyncio.Event()
    assert await env.coordinator.end_txn(TID, pid, epoch, True) == ErrorCode.NONE
    meta = env.coordinator.metadata(TID)
    assert meta is not None and meta.state == TxnState.PREPARE_COMMIT
    # While markers are in flight.
    assert await env.coordinator.end_txn(TID, pid, epoch, True) == (
        ErrorCode.CONCURRENT_TRANSACTIONS
    )
    assert await env.coordinator.end_txn(TID, pid, epoch, False) == ErrorCode.INVALID_TXN_STATE
    assert await env.coordinator.add_partitions(TID, pid, epoch, [T1]) == (
        ErrorCode.CONCURRENT_TRANSACTIONS
    )
    init = await env.coordinator.init_producer_id(TID, TIMEOUT_MS, pid, epoch)
    assert init.error == ErrorCode.CONCURRENT_TRANSACTIONS
    env.markers.gate.set()
    await env.coordinator.idle()
    assert sorted(env.markers.written, key=lambda w: w[1]) == [
        (TxnMarker(pid, epoch, 0, committed=True), OFFSETS),
        (TxnMarker(pid, epoch, 0, committed=True), T0),
    ]
    assert env.states() == [
        TxnState.EMPTY,
        TxnState.ONGOING,
        TxnState.PREPARE_COMMIT,
        TxnState.COMPLETE_COMMIT,
    ]
    assert meta.partitions == set()
    # A retry after completion is answered NONE; the other outcome is refused.
    assert await env.coordinator.end_txn(TID, pid, epoch, True) == ErrorCode.NONE
    assert await env.coordinator.end_txn(TID, pid, epoch, False) == ErrorCode.INVALID_TXN_STATE
    # The next transaction starts from CompleteCommit.
    assert await env.coordinator.add_partitions(TID, pid, epoch, [T1]) == ErrorCode.NONE
    assert await env.coordinator.end_txn(TID, pid, epoch, False) == ErrorCode.NONE
    await env.coordinator.idle()
    assert meta.state == TxnState.COMPLETE_ABORT
    assert env.markers.written[-1] == (TxnMarker(pid, epoch, 0, committed=False), T1)


async def test_end_txn_without_a_transaction_is_invalid(env: Env) -> None:
    init = await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    assert await env.coordinator.end_txn(TID, init.producer_id, init.producer_epoch, True) == (
        ErrorCode.INVALID_TXN_STATE
    )
    assert await env.coordinator.end_txn("nobody", 1, 0, True) == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )


async def test_failed_markers_are_retried_and_a_deleted_topic_is_skipped(env: Env) -> None:
    gone = TopicPartition("deleted", 0)
    pid, epoch = await begin(env, T0, T1, gone)
    env.markers.failures = {
        T1: [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT],
        gone: [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
    }
    assert await env.coordinator.end_txn(TID, pid, epoch, True) == ErrorCode.NONE
    await env.coordinator.idle()
    assert env.markers.calls == 3
    assert sorted(tp for _, tp in env.markers.written) == [T0, T1]
    meta = env.coordinator.metadata(TID)
    assert meta is not None and meta.state == TxnState.COMPLETE_COMMIT


async def test_a_failed_log_write_changes_nothing(env: Env) -> None:
    pid, epoch = await begin(env)
    env.store.fail_with = ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert await env.coordinator.end_txn(TID, pid, epoch, True) == (
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    )
    meta = env.coordinator.metadata(TID)
    assert meta is not None
    assert (meta.state, meta.pending) == (TxnState.ONGOING, None)
    assert env.markers.calls == 0
    fresh = await env.coordinator.init_producer_id("txn-new", TIMEOUT_MS)
    assert fresh.error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert env.coordinator.metadata("txn-new") is None
    env.store.fail_with = None
    assert await env.coordinator.end_txn(TID, pid, epoch, True) == ErrorCode.NONE


# -- timers -------------------------------------------------------------------------------


async def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    env: Env,
) -> None:
    init = await env.coordinator.init_producer_id(TID, 5_000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert await env.coordinator.add_partitions(TID, pid, epoch, [T0]) == ErrorCode.NONE
    await env.advance(4_000)
    assert env.markers.written == []
    await env.advance(1_000)
    assert env.markers.written == [(TxnMarker(pid, epoch + 1, 0, committed=False), T0)]
    meta = env.coordinator.metadata(TID)
    assert meta is not None and meta.state == TxnState.COMPLETE_ABORT
    assert await env.coordinator.end_txn(TID, pid, epoch, True) == ErrorCode.PRODUCER_FENCED


async def test_idle_ids_expire_with_a_tombstone(env: Env) -> None:
    await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    pid, epoch = (await env.coordinator.init_producer_id("busy", TIMEOUT_MS)).producer_id, 0
    await env.coordinator.add_partitions("busy", pid, epoch, [T0])
    await env.advance(3_600_000)
    assert env.coordinator.describe(TID) == (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None)
    assert [value for key, value in env.records() if key == TID][-1] is None
    # An open transaction is not idle (its timeout aborts it first, then it may expire).
    assert env.coordinator.metadata("busy") is not None
    coordinator = await env.restart()
    assert coordinator.metadata(TID) is None
    assert coordinator.metadata("busy") is not None


# -- loading ------------------------------------------------------------------------------


async def test_a_restart_reloads_every_id_from_the_log(env: Env) -> None:
    pid, epoch = await begin(env, T0, T1)
    await env.coordinator.init_producer_id("done", TIMEOUT_MS)
    coordinator = await env.restart()
    meta = coordinator.metadata(TID)
    assert meta is not None
    assert (meta.producer_id, meta.producer_epoch, meta.state, meta.partitions) == (
        pid,
        epoch,
        TxnState.ONGOING,
        {T0, T1},
    )
    # The producer carries on where it was.
    assert await coordinator.end_txn(TID, pid, epoch, True) == ErrorCode.NONE
    await coordinator.idle()
    assert {tp for _, tp in env.markers.written} == {T0, T1}
    done = coordinator.metadata("done")
    assert done is not None and done.state == TxnState.EMPTY


async def test_a_transaction_reloaded_in_prepare_commit_gets_its_markers(env: Env) -> None:
    pid, epoch = await begin(env, T0)
    env.markers.gate = asyncio.Event()
    assert await env.coordinator.end_txn(TID, pid, epoch, True) == ErrorCode.NONE
    # The broker dies before the markers are out.
    env.coordinator.stop()
    env.markers.gate = None
    env.coordinator = env.new_coordinator()
    env.coordinator.load()
    await env.coordinator.idle()
    assert env.markers.written == [(TxnMarker(pid, epoch, 0, committed=True), T0)]
    meta = env.coordinator.metadata(TID)
    assert meta is not None and meta.state == TxnState.COMPLETE_COMMIT


async def test_unreadable_records_are_skipped(env: Env) -> None:
    env.store.records[0] = [(b"\x00\x09junk", b"\x00\x00"), (encode_key("x"), b"\x00")]
    coordinator = await env.restart()
    assert coordinator.list_transactions() == []


async def test_in_a_cluster_only_led_partitions_are_coordinated(env: Env) -> None:
    await env.coordinator.init_producer_id(TID, TIMEOUT_MS)
    coordinator = env.new_coordinator()
    coordinator.coordinate_by_leadership()
    partition = coordinator.partition_for(TID)
    assert coordinator.ownership_error(TID) == ErrorCode.NOT_COORDINATOR
    result = await coordinator.init_producer_id(TID, TIMEOUT_MS)
    assert result.error == ErrorCode.NOT_COORDINATOR
    assert coordinator.describe(TID)[0] == ErrorCode.NOT_COORDINATOR
    coordinator.load_partition(partition)
    meta = coordinator.metadata(TID)
    assert meta is not None and meta.producer_epoch == 0
    assert (await coordinator.init_producer_id(TID, TIMEOUT_MS)).producer_epoch == 1
    coordinator.unload_partition(partition)
    assert coordinator.metadata(TID) is None
    assert (await coordinator.init_producer_id(TID, TIMEOUT_MS)).error == (
        ErrorCode.NOT_COORDINATOR
    )


# -- operators ----------------------------------------------------------------------------


async def test_describe_and_list(env: Env) -> None:
    pid, epoch = await begin(env, T1, T0)
    other = await env.coordinator.init_producer_id("other", TIMEOUT_MS)
    error, found = env.coordinator.describe(TID)
    assert error == ErrorCode.NONE and found is not None
    assert (found.state, found.producer_id, found.producer_epoch) == ("Ongoing", pid, epoch)
    assert found.partitions == (("orders", (0, 1)),)
    assert found.timeout_ms == TIMEOUT_MS
    assert env.coordinator.describe("missing") == (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None)
    listed = env.coordinator.list_transactions()
    assert [(t.transactional_id, t.state) for t in listed] == [("other", "Empty"), (TID, "Ongoing")]
    assert [
        t.transactional_id for t in env.coordinator.list_transactions(states=[TxnState.ONGOING])
    ] == [TID]
    assert [
        t.transactional_id
        for t in env.coordinator.list_transactions(producer_ids=[other.producer_id])
    ] == ["other"]
    env.clock.advance(10)
    assert [t.transactional_id for t in env.coordinator.list_transactions(min_duration_ms=10)] == [
        TID
    ]
    assert env.coordinator.list_transactions(min_duration_ms=11) == []
    assert [
        t.transactional_id
        for t in env.coordinator.list_transactions(transactional_id_pattern="oth.*")
    ] == ["other"]


def test_the_state_machine_refuses_illegal_transitions() -> None:
    meta = TxnMetadata("t", 1, 0, 1000)
    with pytest.raises(IllegalTransitionError):
        meta.prepare(TxnState.PREPARE_COMMIT, 0)
    transition = meta.prepare(TxnState.ONGOING, 5, partitions=frozenset({T0}))
    with pytest.raises(IllegalTransitionError, match="pending"):
        meta.prepare(TxnState.ONGOING, 6)
    meta.apply(transition)
    assert (meta.state, meta.partitions, meta.pending) == (TxnState.ONGOING, {T0}, None)
    with pytest.raises(IllegalTransitionError):
        meta.prepare(TxnState.COMPLETE_COMMIT, 7)
    with pytest.raises(IllegalTransitionError):
        meta.prepare(TxnState.EMPTY, 7)
    meta.prepare(TxnState.PREPARE_COMMIT, 7)
    meta.abandon()
    assert (meta.state, meta.pending) == (TxnState.ONGOING, None)
    assert TxnState.from_display_name("PrepareEpochFence") == TxnState.PREPARE_EPOCH_FENCE
