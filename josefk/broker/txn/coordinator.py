"""The transaction coordinator: Kafka's transactional producer protocol (KIP-98, KIP-360).

Owns ``TransactionCoordinator`` (InitProducerId for a transactional id, AddPartitionsToTxn and
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions answers, the markers that
complete a transaction, the timeout and expiration checks, loading from
``__transaction_state``) and ``TxnConfig``.

Where a transactional id lives: ``abs(hashCode) % transaction.state.log.num.partitions`` of
``__transaction_state``, as Kafka. The single node coordinates every id and loads every
partition before its listeners open; in a cluster a broker coordinates the ids of the
partitions it leads (``load_partition`` / ``unload_partition``), and NOT_COORDINATOR is the
answer for any other id.

Each change of an id's metadata is prepared (``TxnMetadata.prepare`` marks it pending), its
record written to the log through the ``TxnStore`` (which waits for acks=all), and only then
applied; a failed write leaves the metadata as it was. While a change is pending, or markers
are being written (PrepareCommit / PrepareAbort), other requests for the id get
CONCURRENT_TRANSACTIONS, which clients retry. EndTxn is answered once PrepareCommit or
PrepareAbort is written; the markers and CompleteCommit / CompleteAbort follow in a task. A
producer whose open transaction must go (a new InitProducerId, or the transaction's timeout)
is fenced: its epoch is bumped and the transaction aborted with markers of the new epoch.

Time: the timeout and expiration checks are periodic tasks of the injected ``Scheduler`` over
the injected ``Clock``; the pause between marker retries is ``sleep`` (injectable). Event loop
thread only; no method awaits between its checks and ``prepare``.

Imports the txn package, the scheduler and clock of josefk.util, josefk.protocol.errors
(the codes only) and the group package's partition hash; must not import handlers or the codec.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from josefk.broker.group.offsets_schema import coordinator_partition
from josefk.broker.txn.log_schema import (
    TxnLogSchemaError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from josefk.broker.txn.markers import MarkerWriter
from josefk.broker.txn.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransitionError,
    TxnMetadata,
    TxnState,
    TxnTransition,
    is_epoch_exhausted,
)
from josefk.broker.txn.store import TxnStore, TxnStoreError
from josefk.protocol.errors import ErrorCode
from josefk.storage.offsets import TopicPartition, TxnMarker
from josefk.util.clock import Clock
from josefk.util.scheduler import Scheduler

if TYPE_CHECKING:
    from josefk.config.broker import BrokerConfig

logger = logging.getLogger(__name__)

MAX_TRANSACTIONAL_ID_BYTES: Final = 0x7FFF
_COMPLETE: Final = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
_IDLE: Final = _COMPLETE | {TxnState.EMPTY}
# Marker errors after which a partition needs no marker from this transaction any more: the
# topic is gone, or the partition already moved past this producer epoch or coordinator.
_MARKER_DONE: Final = frozenset(
    {
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    }
)


@dataclass(frozen=True, slots=True)
class TxnConfig:
    state_partitions: int = 50
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    marker_retry_backoff_ms: int = 100

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> TxnConfig:
        return cls(
            state_partitions=config.transaction_state_log_num_partitions,
            max_timeout_ms=config.transaction_max_timeout_ms,
            id_expiration_ms=config.transactional_id_expiration_ms,
            abort_timed_out_interval_ms=(
                config.transaction_abort_timed_out_transaction_cleanup_interval_ms
            ),
            remove_expired_interval_ms=(
                config.transaction_remove_expired_transaction_cleanup_interval_ms
            ),
        )


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TxnDescription:
    transactional_id: str
    state: str
    timeout_ms: int
    start_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


class TransactionCoordinator:
    """Every transactional id of this broker. Event loop thread only."""

    def __init__(
        self,
        config: TxnConfig,
        store: TxnStore,
        markers: MarkerWriter,
        new_producer_id: Callable[[], int],
        *,
        scheduler: Scheduler,
        clock: Clock,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config
        self._store = store
        self._markers = markers
        self._new_producer_id = new_producer_id
        self._scheduler = scheduler
        self._clock = clock
        self._sleep = sleep
        self._txns: dict[str, TxnMetadata] = {}
        # Coordinator epoch (the partition's leader epoch) of each loaded partition.
        self._epochs: dict[int, int] = {}
        # None: every partition (the single node); in a cluster, those this broker leads.
        self._owned: set[int] | None = None
        self._loading: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: list[Any] = []
        self._stopped = False

    # -- ownership and lifecycle ----------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return coordinator_partition(transactional_id, self._store.partition_count)

    def owns(self, transactional_id: str) -> bool:
        return self.ownership_error(transactional_id) == ErrorCode.NONE

    def ownership_error(self, transactional_id: str) -> ErrorCode:
        """NOT_COORDINATOR when another broker coordinates the id (the client asks
        FindCoordinator again), COORDINATOR_LOAD_IN_PROGRESS while its partition loads."""
        if self._stopped:
            return ErrorCode.NOT_COORDINATOR
        partition = self.partition_for(transactional_id)
        if self._owned is not None and partition not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def coordinate_by_leadership(self) -> None:
        """Cluster mode: coordinate only the ids of the partitions this broker leads."""
        self._owned = set()

    def load_partition(self, partition: int) -> None:
        """This broker became leader of ``partition``: its ids are coordinated here."""
        if self._owned is None or partition in self._owned:
            return
        self._owned.add(partition)
        self.load([partition])

    def unload_partition(self, partition: int) -> None:
        """This broker no longer leads ``partition``: its ids move to the new leader, which
        finishes any transaction left in PrepareCommit / PrepareAbort from the log."""
        if self._owned is None or partition not in self._owned:
            return
        self._owned.discard(partition)
        self._epochs.pop(partition, None)
        for transactional_id in [t for t in self._txns if self.partition_for(t) == partition]:
            del self._txns[transactional_id]
        logger.info("unloaded the transactional ids of __transaction_state-%d", partition)

    def load(self, partitions: Iterable[int] | None = None) -> None:
        """Rebuild the ids of ``partitions`` (all by default) from the log: a key's last
        record wins, a tombstone deletes it. Transactions found in PrepareCommit or
        PrepareAbort get their markers written again (markers are idempotent for a
        partition that already has them); Ongoing ones wait for their producer or timeout."""
        if partitions is None:
            partitions = range(self._store.partition_count)
        for partition in partitions:
            self._loading.add(partition)
            try:
                epoch = self._store.coordinator_epoch(partition)
                latest: dict[bytes, bytes | None] = {}
                for key, value in self._store.read(partition):
                    latest.pop(key, None)
                    latest[key] = value
                for transactional_id in [
                    t for t in self._txns if self.partition_for(t) == partition
                ]:
                    del self._txns[transactional_id]
                loaded = 0
                for key, value in latest.items():
                    try:
                        transactional_id = decode_key(key)
                        if value is None:
                            continue
                        meta = TxnMetadata.from_log(
                            transactional_id, decode_value(value), coordinator_epoch=epoch
                        )
                    except (TxnLogSchemaError, IllegalTransitionError) as exc:
                        logger.warning(
                            "skipping unreadable record in __transaction_state-%d: %s",
                            partition,
                            exc,
                        )
                        continue
                    self._txns[transactional_id] = meta
                    loaded += 1
                self._epochs[partition] = epoch
            finally:
                self._loading.discard(partition)
            for meta in [
                m
                for m in self._txns.values()
                if self.partition_for(m.transactional_id) == partition
            ]:
                if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                    self._spawn(self._complete(meta, meta.state == TxnState.PREPARE_COMMIT))
            if loaded:
                logger.info(
                    "loaded %d transactional ids from __transaction_state-%d", loaded, partition
                )

    def start(self) -> None:
        """Schedule the timeout and expiration checks."""
        config = self.config
        self._timers = [
            self._scheduler.schedule(
                "transaction-abort-timed-out",
                lambda: self._spawn(self.abort_timed_out_transactions()),
                delay_ms=config.abort_timed_out_interval_ms,
                period_ms=config.abort_timed_out_interval_ms,
            ),
            self._scheduler.schedule(
                "transactional-id-expiration",
                lambda: self._spawn(self.remove_expired_transactional_ids()),
                delay_ms=config.remove_expired_interval_ms,
                period_ms=config.remove_expired_interval_ms,
            ),
        ]

    def stop(self) -> None:
        """Stop answering and cancel the timers and marker tasks (a new coordinator, or this
        one after a restart, finishes them from the log)."""
        self._stopped = True
        for timer in self._timers:
            timer.cancel()
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def idle(self) -> None:
        """Wait until no marker or check task runs (for tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def metadata(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    # -- writing --------------------------------------------------------------------------

    async def _write(self, meta: TxnMetadata, transition: TxnTransition) -> ErrorCode:
        """Write the prepared transition and apply it; the error code otherwise (the
        metadata then stays as it was)."""
        try:
            key, value = encode_key(meta.transactional_id), encode_value(transition.log_value())
        except TxnLogSchemaError as exc:
            meta.abandon()
            logger.warning("cannot encode %r: %s", meta.transactional_id, exc)
            return ErrorCode.INVALID_REQUEST
        try:
            await self._store.write(
                self.partition_for(meta.transactional_id), key, value, self._clock.milliseconds()
            )
        except TxnStoreError as exc:
            meta.abandon()
            logger.warning(
                "writing %s for %r failed: %s",
                transition.state.display_name,
                meta.transactional_id,
                exc,
            )
            return exc.error
        except BaseException:
            meta.abandon()
            raise
        if self._txns.get(meta.transactional_id) is not meta:
            # Unloaded (or stopped) while the write was in flight: the new owner has it.
            return ErrorCode.NOT_COORDINATOR
        meta.apply(transition)
        return ErrorCode.NONE

    # -- InitProducerId -------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitResult:
        """A producer id and epoch for ``transactional_id``: a new id at epoch 0, or the
        epoch bumped (a new id once exhausted). An open transaction of the previous epoch is
        aborted first and the caller told CONCURRENT_TRANSACTIONS, so it retries."""
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if len(transactional_id.encode()) > MAX_TRANSACTIONAL_ID_BYTES:
            # A flexible request may carry a longer string than the log's int16 length holds.
            return InitResult(ErrorCode.INVALID_REQUEST)
        error = self.ownership_error(transactional_id)
        if error:
            return InitResult(error)
        now = self._clock.milliseconds()
        meta = self._txns.get(transactional_id)
        created = meta is None
        if meta is None:
            try:
                new_id = self._new_producer_id()
            except Exception as exc:  # noqa: BLE001  no id, whatever the cause: the client retries
                logger.warning("no producer id for %r: %s", transactional_id, exc)
                return InitResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            meta = TxnMetadata(
                transactional_id=transactional_id,
                producer_id=new_id,
                producer_epoch=NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                last_update_timestamp_ms=now,
                coordinator_epoch=self._epochs.get(self.partition_for(transactional_id), 0),
            )
            self._txns[transactional_id] = meta
        if meta.pending is not None:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if producer_id != NO_PRODUCER_ID and not self._valid_producer_id(
            meta, producer_id, producer_epoch
        ):
            return InitResult(ErrorCode.PRODUCER_FENCED)
        state = meta.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state == TxnState.ONGOING:
            # The epoch bumped here never reaches a client: the retry after the abort
            # bumps it again (or moves to a new producer id if this exhausted it).
            error = await self._fence_and_abort(meta)
            return InitResult(error or ErrorCode.CONCURRENT_TRANSACTIONS)
        if state not in _IDLE:
            return InitResult(ErrorCode.INVALID_TXN_STATE)
        bump = self._next_epoch(meta, producer_id, producer_epoch)
        if isinstance(bump, ErrorCode):
            return InitResult(bump)
        if bump == (meta.producer_id, meta.producer_epoch):
            return InitResult(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)
        new_producer_id, new_epoch, last_id, last_epoch = (*bump, *self._last_of(meta))
        transition = meta.prepare(
            TxnState.EMPTY,
            now,
            producer_id=new_producer_id,
            producer_epoch=new_epoch,
            last_producer_id=last_id,
            last_producer_epoch=last_epoch,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_timestamp_ms=-1,
        )
        error = await self._write(meta, transition)
        if error:
            if created and self._txns.get(transactional_id) is meta:
                del self._txns[transactional_id]
            return InitResult(error)
        return InitResult(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)

    @staticmethod
    def _last_of(meta: TxnMetadata) -> tuple[int, int]:
        return meta.producer_id, meta.producer_epoch

    @staticmethod
    def _valid_producer_id(meta: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
        """KIP-360: a request naming an id is fenced unless the metadata is new, the id is
        the current one (its epoch is checked by ``_next_epoch``), or it is the previous id
        at an exhausted epoch (a retry of the bump that moved to a new id)."""
        return (
            meta.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == meta.producer_id
            or (producer_id == meta.last_producer_id and is_epoch_exhausted(producer_epoch))
        )

    def _next_epoch(
        self, meta: TxnMetadata, producer_id: int, producer_epoch: int
    ) -> tuple[int, int] | ErrorCode:
        """The (producer id, epoch) the bump gives; the current pair for a retry of the
        last bump, PRODUCER_FENCED for an older epoch."""
        if producer_id != NO_PRODUCER_ID and meta.producer_epoch != NO_PRODUCER_EPOCH:
            is_retry = (producer_id, producer_epoch) == (
                meta.last_producer_id,
                meta.last_producer_epoch,
            )
            if is_retry:
                return meta.producer_id, meta.producer_epoch
            if producer_id != meta.producer_id or producer_epoch != meta.producer_epoch:
                return ErrorCode.PRODUCER_FENCED
        if is_epoch_exhausted(meta.producer_epoch):
            try:
                return self._new_producer_id(), 0
            except Exception as exc:  # noqa: BLE001  no id, whatever the cause: the client retries
                logger.warning("no producer id for %r: %s", meta.transactional_id, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return meta.producer_id, meta.producer_epoch + 1

    async def _fence_and_abort(self, meta: TxnMetadata) -> ErrorCode:
        """Bump the epoch of an Ongoing transaction's producer (so its further requests are
        PRODUCER_FENCED) and abort the transaction with markers of the new epoch."""
        epoch = meta.producer_epoch
        bumped = epoch if is_epoch_exhausted(epoch) else epoch + 1
        transition = meta.prepare(
            TxnState.PREPARE_ABORT,
            self._clock.milliseconds(),
            producer_epoch=bumped,
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )
        error = await self._write(meta, transition)
        if not error:
            logger.info(
                "fenced producer %d epoch %d of %r and aborting its transaction",
                meta.producer_id,
                epoch,
                meta.transactional_id,
            )
            self._spawn(self._complete(meta, False))
        return error

    # -- the transaction's partitions -----------------------------------------------------

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TxnMetadata | None]:
        error = self.ownership_error(transactional_id)
        if error:
            return error, None
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if meta.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return ErrorCode.NONE, meta

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> ErrorCode:
        """Add partitions to the producer's transaction (starting it if none is open)."""
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        state = meta.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state == TxnState.ONGOING and meta.partitions.issuperset(partitions):
            return ErrorCode.NONE
        if state not in _IDLE and state != TxnState.ONGOING:
            return ErrorCode.INVALID_TXN_STATE
        now = self._clock.milliseconds()
        transition = meta.prepare(
            TxnState.ONGOING,
            now,
            partitions=frozenset(meta.partitions).union(partitions),
            start_timestamp_ms=meta.start_timestamp_ms if state == TxnState.ONGOING else now,
        )
        return await self._write(meta, transition)

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890's verify-only AddPartitionsToTxn: which partitions are already in the
        producer's open transaction (INVALID_TXN_STATE for the others); changes nothing."""
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return dict.fromkeys(partitions, error)
        return {
            tp: ErrorCode.NONE
            if meta.state == TxnState.ONGOING and tp in meta.partitions
            else ErrorCode.INVALID_TXN_STATE
            for tp in partitions
        }

    def verify_produce(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """KIP-890 for this broker's own partition leaders (no request): NONE if ``tp`` is in
        the open transaction of this producer and epoch, INVALID_PRODUCER_EPOCH for an
        epoch older than the id's (a fenced producer hears it is fenced, as the log would
        tell it), INVALID_TXN_STATE otherwise. A transition being written (AddPartitionsToTxn
        of another partition, say) does not matter: ``tp`` was added before it."""
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_TXN_STATE
        if producer_epoch < meta.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if (
            meta.producer_epoch == producer_epoch
            and meta.state == TxnState.ONGOING
            and tp in meta.partitions
        ):
            return ErrorCode.NONE
        return ErrorCode.INVALID_TXN_STATE

    # -- EndTxn ---------------------------------------------------------------------------

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode:
        """Commit or abort: answered once PrepareCommit / PrepareAbort is in the log; the
        markers and the completion follow. A retry after completion is answered NONE."""
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        state = meta.state
        wanted_prepare = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
        wanted_complete = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        if state == TxnState.ONGOING:
            transition = meta.prepare(wanted_prepare, self._clock.milliseconds())
            error = await self._write(meta, transition)
            if not error:
                self._spawn(self._complete(meta, committed))
            return error
        if state == wanted_complete:
            return ErrorCode.NONE
        if state == wanted_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    async def _complete(self, meta: TxnMetadata, committed: bool) -> None:
        """Write the markers to every partition of the transaction (retrying those that
        fail) and then CompleteCommit / CompleteAbort; stops when the id moves away."""
        marker = TxnMarker(
            producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            coordinator_epoch=meta.coordinator_epoch,
            committed=committed,
        )
        remaining = set(meta.partitions)
        backoff_s = self.config.marker_retry_backoff_ms / 1000
        while remaining:
            if self._txns.get(meta.transactional_id) is not meta:
                return
            try:
                results = await self._markers.write_markers(marker, sorted(remaining))
            except Exception:
                logger.exception("writing markers for %r failed", meta.transactional_id)
                results = {}
            for tp, error in results.items():
                if error in _MARKER_DONE:
                    if error:
                        logger.warning(
                            "marker of %r to %s not written: %s",
                            meta.transactional_id,
                            tp,
                            error.name,
                        )
                    remaining.discard(tp)
            if remaining:
                await self._sleep(backoff_s)
        complete = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        while self._txns.get(meta.transactional_id) is meta and meta.state != complete:
            transition = meta.prepare(complete, self._clock.milliseconds(), partitions=frozenset())
            if await self._write(meta, transition):
                await self._sleep(backoff_s)

    # -- timers ---------------------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> int:
        """Abort every Ongoing transaction open longer than its timeout, fencing its
        producer; returns how many were started."""
        now = self._clock.milliseconds()
        expired = [
            meta
            for meta in self._txns.values()
            if meta.state == TxnState.ONGOING
            and meta.pending is None
            and meta.start_timestamp_ms + meta.timeout_ms <= now
            and self.owns(meta.transactional_id)
        ]
        aborted = 0
        for meta in expired:
            if meta.pending is not None or meta.state != TxnState.ONGOING:
                continue
            logger.info(
                "transaction of %r open for %d ms (timeout %d ms): aborting it",
                meta.transactional_id,
                now - meta.start_timestamp_ms,
                meta.timeout_ms,
            )
            if not await self._fence_and_abort(meta):
                aborted += 1
        return aborted

    async def remove_expired_transactional_ids(self) -> int:
        """Forget ids idle for ``transactional.id.expiration.ms`` (a tombstone in the log);
        returns how many."""
        now = self._clock.milliseconds()
        expired = [
            meta
            for meta in self._txns.values()
            if meta.state in _IDLE
            and meta.pending is None
            and meta.last_update_timestamp_ms + self.config.id_expiration_ms <= now
            and self.owns(meta.transactional_id)
        ]
        removed = 0
        for meta in expired:
            if meta.pending is not None or meta.state not in _IDLE:
                continue
            meta.prepare(TxnState.DEAD, now)
            try:
                await self._store.write(
                    self.partition_for(meta.transactional_id),
                    encode_key(meta.transactional_id),
                    None,
                    now,
                )
            except TxnStoreError as exc:
                meta.abandon()
                logger.warning("expiring %r failed: %s", meta.transactional_id, exc)
                continue
            if self._txns.get(meta.transactional_id) is meta:
                del self._txns[meta.transactional_id]
                meta.state = TxnState.DEAD
                meta.pending = None
                removed += 1
        if removed:
            logger.info("expired %d transactional ids", removed)
        return removed

    # -- operators ------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnDescription | None]:
        error = self.ownership_error(transactional_id)
        if error:
            return error, None
        meta = self._txns.get(transactional_id)
        if meta is None or meta.state == TxnState.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(meta.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return ErrorCode.NONE, TxnDescription(
            transactional_id=transactional_id,
            state=meta.state.display_name,
            timeout_ms=meta.timeout_ms,
            start_timestamp_ms=meta.start_timestamp_ms,
            producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            partitions=tuple((topic, tuple(ids)) for topic, ids in by_topic.items()),
        )

    def list_transactions(
        self,
        *,
        states: Iterable[TxnState] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
        transactional_id_pattern: str | None = None,
    ) -> list[TxnListing]:
        """The ids this broker coordinates, filtered as ListTransactions asks (an empty
        filter matches everything)."""
        wanted_states = frozenset(states)
        wanted_ids = frozenset(producer_ids)
        pattern = re.compile(transactional_id_pattern) if transactional_id_pattern else None
        now = self._clock.milliseconds()
        listings = []
        for transactional_id, meta in sorted(self._txns.items()):
            if not self.owns(transactional_id) or meta.state == TxnState.DEAD:
                continue
            if wanted_states and meta.state not in wanted_states:
                continue
            if wanted_ids and meta.producer_id not in wanted_ids:
                continue
            if min_duration_ms >= 0 and (
                meta.state != TxnState.ONGOING or now - meta.start_timestamp_ms < min_duration_ms
            ):
                continue
            if pattern is not None and pattern.fullmatch(transactional_id) is None:
                continue
            listings.append(TxnListing(transactional_id, meta.producer_id, meta.state.display_name))
        return listings
