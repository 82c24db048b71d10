"""A partition as the broker sees it: the local log plus leadership and replication state.

Owns ``Partition``: the leader epoch, the replica set and ISR, each follower's progress as
the leader sees it, and the rule that moves the high watermark: the smallest log end offset
among the in-sync replicas, never backwards (``maybeIncrementHighWatermark`` in Kafka).

Roles come from outside (the metadata: a single node's catalog, or etcd in a cluster):
``make_leader`` and ``make_follower`` take a ``PartitionState``. On a single node the ISR is
the leader alone, so the high watermark follows the log end offset at once.

As leader, a follower's fetch (``update_follower_fetch_state``) records its log end offset
and when it was last caught up: a follower is caught up at a fetch if it asked for the
leader's log end offset as of that fetch, or as of its previous fetch (then it was caught up
at the previous fetch's time: it fetched everything there was then). The ISR is changed
only through the metadata (Kafka's AlterPartition): ``isr_expansion`` and
``isr_shrink`` say what to propose, ``apply_isr`` takes the accepted result. While an
expansion is proposed, the high watermark already counts the joining replica (Kafka's
"maximal ISR"), so a proposal that later fails never moved the HW past what that replica has.
Each fetch also carries the follower's log start offset: the smallest of those of live
replicas and the leader's own is the low watermark (``low_watermark``), which a
DeleteRecords waits for.

Every method runs on the event loop thread and never awaits, so a state change and the high
watermark move it causes are seen together.

Imports josefk.storage and josefk.cluster's value types; must not import josefk.protocol or
the handlers.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import ClassVar

from josefk.broker.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
)
from josefk.cluster.values import PartitionState
from josefk.records.compression import DecompressionBudget
from josefk.storage.log import Log
from josefk.storage.offsets import (
    AbortedTxn,
    AppendOrigin,
    FetchIsolation,
    LogAppendInfo,
    TopicPartition,
    TxnMarker,
)
from josefk.storage.segment import FetchDataInfo, LogOffsetMetadata
from josefk.util.clock import Clock, SystemClock

__all__ = [
    "FencedLeaderEpochError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "Partition",
    "PartitionRead",
    "ReplicaProgress",
    "RequestTimedOutError",
    "TopicPartition",
    "UnknownLeaderEpochError",
]


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """A read and the offsets the fetch response reports with it, taken at the same moment."""

    info: FetchDataInfo
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    # read_committed only: the aborted transactions that may overlap the batches read.
    aborted_transactions: list[AbortedTxn] | None = None


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one follower. Offsets are -1 until its first fetch."""

    broker_id: int
    log_end_offset: int = -1
    log_start_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    # The leader's log end offset when the follower last fetched: reaching it at the next
    # fetch means the follower was caught up at that earlier time.
    last_fetch_leader_log_end_offset: int = -1


class Partition:
    """Leader or follower state of one partition."""

    # How many times any partition of this process took a new state (leader, epochs,
    # replicas, ISR): the single node's metadata compares it to know whether a partition it
    # describes may report something else. Process-wide, so another broker's changes in the
    # same process (tests) only make that reader look again.
    state_changes: ClassVar[int] = 0

    def __init__(
        self,
        tp: TopicPartition,
        log: Log,
        *,
        local_broker_id: int,
        clock: Clock | None = None,
        state: PartitionState | None = None,
    ) -> None:
        self.tp = tp
        self.log = log
        self.local_broker_id = local_broker_id
        self._clock: Clock = clock if clock is not None else SystemClock()
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        # Moves with every new state (leader, epoch, replicas, ISR): what a fetch session's
        # quiet stamp compares (josefk.broker.replica_manager.QuietPartition).
        self.state_version = 0
        self._progress: dict[int, ReplicaProgress] = {}
        self._pending_isr: frozenset[int] = frozenset()
        # The log end offset when this replica became leader in its current epoch: a
        # follower must reach it (as well as the HW) to rejoin the ISR, so that it holds
        # everything the previous leaders committed.
        self._leader_epoch_start_offset = 0
        # As a follower: the leader's high watermark minus our log end offset at the last
        # fetch (Kafka's FetcherLagMetrics ConsumerLag), set by the replica fetcher; None
        # while leading or before the first fetch.
        self.fetcher_lag: int | None = None
        if state is None:
            # The single node: this replica alone, leading from epoch 0.
            state = PartitionState((local_broker_id,), local_broker_id, 0, (local_broker_id,))
        if state.leader == local_broker_id:
            self.make_leader(state)
        else:
            self.make_follower(state)

    # -- roles ----------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def make_leader(self, state: PartitionState) -> bool:
        """Become (or stay) leader as ``state`` says. True when this is a new leadership
        (a new leader epoch), False for an ISR or replica change of the same epoch."""
        if state.leader != self.local_broker_id:
            raise ValueError(f"{self.tp}: state names leader {state.leader}, not this broker")
        new_epoch = state.leader_epoch != self.leader_epoch or not self.is_leader
        self._set_state(state)
        if new_epoch:
            self._leader_epoch_start_offset = self.log.log_end_offset
            # The epoch begins here even before its first append (OffsetForLeaderEpoch
            # answers followers from it).
            self.log.maybe_assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
            now = self._clock.monotonic_ms()
            # Followers in the ISR are given the benefit of the doubt for one lag period,
            # as Kafka does: they were in sync under the previous leader.
            self._progress = {
                b: ReplicaProgress(b, last_caught_up_ms=now if b in state.isr else 0)
                for b in state.replicas
                if b != self.local_broker_id
            }
        else:
            for b in state.replicas:
                if b != self.local_broker_id and b not in self._progress:
                    self._progress[b] = ReplicaProgress(b)
            for b in list(self._progress):
                if b not in state.replicas:
                    del self._progress[b]
        self._pending_isr = frozenset()
        self._maybe_increment_high_watermark()
        return new_epoch

    def make_follower(self, state: PartitionState) -> bool:
        """Follow ``state.leader`` (-1: no leader yet). True when leader or epoch changed:
        the caller must then find the divergence point before fetching."""
        if state.leader == self.local_broker_id:
            raise ValueError(f"{self.tp}: state names this broker as leader")
        changed = state.leader != self.leader_id or state.leader_epoch != self.leader_epoch
        self._set_state(state)
        self._progress.clear()
        self._pending_isr = frozenset()
        return changed

    def _set_state(self, state: PartitionState) -> None:
        Partition.state_changes += 1
        self.state_version += 1
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)

    # -- leader: appends and the high watermark --------------------------------------------

    def append_records_to_leader(
        self,
        records: memoryview,
        *,
        acks: int = 1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        budget: DecompressionBudget | None = None,
    ) -> LogAppendInfo:
        """Append a producer's batches (or a coordinator's, by ``origin``); the HW moves at
        once when the ISR is this replica alone, else as followers fetch. Raises
        NotLeaderOrFollowerError, and for acks=all NotEnoughReplicasError when the ISR is
        below ``min.insync.replicas`` (nothing is appended then). ``budget`` bounds what the
        request's compressed batches may inflate to, shared by its partitions."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} does not lead {self.tp}")
        if acks == -1 and not self.has_enough_replicas():
            raise NotEnoughReplicasError(
                f"{self.tp} has {len(self.isr)} in-sync replicas, fewer than "
                f"min.insync.replicas={self.log.config.min_insync_replicas}"
            )
        info = self.log.append_as_leader(records, self.leader_epoch, origin=origin, budget=budget)
        self._maybe_increment_high_watermark()
        return info

    def append_txn_marker(self, marker: TxnMarker) -> LogAppendInfo:
        """Write a transaction marker as leader (WriteTxnMarkers appends with acks=all: the
        caller waits for the HW like an acks=all produce). Raises NotLeaderOrFollowerError,
        NotEnoughReplicasError, and the log's marker errors."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} does not lead {self.tp}")
        if not self.has_enough_replicas():
            raise NotEnoughReplicasError(
                f"{self.tp} has {len(self.isr)} in-sync replicas, fewer than "
                f"min.insync.replicas={self.log.config.min_insync_replicas}"
            )
        info = self.log.append_txn_marker(marker, self.leader_epoch)
        self._maybe_increment_high_watermark()
        return info

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR plus replicas whose joining is proposed: what the HW must wait for."""
        return frozenset(self.isr) | self._pending_isr

    def _maybe_increment_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        log = self.log
        log_end: LogOffsetMetadata = log.log_end_offset_metadata
        lowest = log_end.message_offset
        # Every follower fetch comes here: the maximal ISR is walked without building it.
        for members in (self.isr, self._pending_isr):
            for broker_id in members:
                if broker_id != self.local_broker_id:
                    progress = self._progress.get(broker_id)
                    follower_leo = progress.log_end_offset if progress is not None else -1
                    if follower_leo < lowest:
                        lowest = max(follower_leo, 0)
        if lowest == log_end.message_offset:
            return log.maybe_increment_high_watermark(log_end) is not None
        if lowest <= log.high_watermark:
            return False
        # A follower's offset alone (no segment position) is enough: the log resolves the
        # position lazily when a read needs it.
        return log.maybe_increment_high_watermark(LogOffsetMetadata(lowest)) is not None

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, follower_log_start_offset: int
    ) -> bool:
        """A follower fetched from ``fetch_offset``: that is its log end offset. True when
        the high watermark moved (acks=all produces and consumers may be woken)."""
        progress = self._progress.get(replica_id)
        if progress is None:
            return False
        now = self._clock.monotonic_ms()
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            progress.last_caught_up_ms = now
        elif fetch_offset >= progress.last_fetch_leader_log_end_offset >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.last_fetch_ms = now
        progress.last_fetch_leader_log_end_offset = leader_leo
        if progress.log_end_offset == fetch_offset:
            # The follower's end did not move: neither can the high watermark, which every
            # other input of (an append, an ISR change) recomputes itself. Most fetches of
            # a follower's session are of idle partitions.
            progress.log_start_offset = follower_log_start_offset
            return False
        progress.log_end_offset = fetch_offset
        progress.log_start_offset = follower_log_start_offset
        return self._maybe_increment_high_watermark()

    def progress(self, replica_id: int) -> ReplicaProgress | None:
        return self._progress.get(replica_id)

    def low_watermark(self, live_brokers: Container[int] | None = None) -> int:
        """The smallest log start offset over this leader and every follower on a live
        broker (Kafka's lowWatermarkIfLeader): below it, some live replica may still hold
        records a DeleteRecords asked to delete. A follower that has not fetched in this
        leader epoch counts as -1 (unknown). ``live_brokers`` None counts every follower
        (no liveness known, as on a single node, which has none). Raises
        NotLeaderOrFollowerError on a follower."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} does not lead {self.tp}")
        lowest = self.log.log_start_offset
        for broker_id, progress in self._progress.items():
            if progress.log_start_offset < lowest and (
                live_brokers is None or broker_id in live_brokers
            ):
                lowest = progress.log_start_offset
        return lowest

    # -- leader: the ISR -------------------------------------------------------------------

    def isr_expansion(self, replica_id: int) -> list[int] | None:
        """The ISR to propose when ``replica_id``, an out-of-sync follower that has just
        fetched, has caught up to the high watermark and to where this leader's epoch began
        (Kafka's maybeExpandIsr, judged at that follower's fetch); None otherwise, or while
        another proposal is pending."""
        if not self.is_leader or self._pending_isr or replica_id in self.isr:
            return None
        progress = self._progress.get(replica_id)
        if progress is None:
            return None
        needed = max(self.log.high_watermark, self._leader_epoch_start_offset)
        if progress.log_end_offset < max(needed, 0) or progress.log_end_offset < 0:
            return None
        self._pending_isr = frozenset({replica_id})
        return [*self.isr, replica_id]

    def isr_shrink(self, replica_lag_time_max_ms: int) -> list[int] | None:
        """The ISR to propose without followers that have not caught up for
        ``replica.lag.time.max.ms``; None when all are in time."""
        if not self.is_leader:
            return None
        now = self._clock.monotonic_ms()
        lagging = {
            b
            for b in self.isr
            if b != self.local_broker_id
            and (p := self._progress.get(b)) is not None
            and now - p.last_caught_up_ms > replica_lag_time_max_ms
        }
        if not lagging:
            return None
        return [b for b in self.isr if b not in lagging]

    def isr_proposal_failed(self) -> None:
        """The metadata refused the proposal (stale): forget the pending expansion."""
        self._pending_isr = frozenset()
        self._maybe_increment_high_watermark()

    def apply_isr(self, state: PartitionState) -> None:
        """An accepted ISR change (same leader and epoch)."""
        self.make_leader(state)

    def has_enough_replicas(self) -> bool:
        """``min.insync.replicas`` holds for an acks=all produce."""
        return len(self.isr) >= self.log.config.min_insync_replicas

    def acks_all_satisfied(self, required_offset: int) -> bool:
        """For an acks=all produce waiting for ``required_offset`` (its last offset + 1):
        True once the high watermark has passed it, False while it has not. Raises
        NotLeaderOrFollowerError when leadership moved, and, as Kafka's delayed produce
        decides, NotEnoughReplicasAfterAppendError when the high watermark passed it with
        the ISR below ``min.insync.replicas`` (it shrank while the produce waited)."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"leadership of {self.tp} moved while waiting")
        if self.log.high_watermark < required_offset:
            return False
        if not self.has_enough_replicas():
            raise NotEnoughReplicasAfterAppendError(
                f"{self.tp}: the ISR shrank to {self.isr} while waiting for acks=all"
            )
        return True

    # -- reads ------------------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a request naming a leader epoch (>= 0) must name ours."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.tp}: leader epoch {current_leader_epoch} is older than {self.leader_epoch}"
            )
        raise UnknownLeaderEpochError(
            f"{self.tp}: leader epoch {current_leader_epoch} is newer than {self.leader_epoch}"
        )

    def nothing_new(
        self, fetch_offset: int, isolation: FetchIsolation, known: tuple[int, int, int]
    ) -> bool:
        """Whether a read at ``fetch_offset`` would find no records and report the (high
        watermark, last stable offset, log start offset) ``known``: an incremental fetch
        session's idle partition, answered without reading."""
        log = self.log
        high_watermark = log.high_watermark
        if isolation is FetchIsolation.LOG_END:
            bound = log.log_end_offset
        elif isolation is FetchIsolation.TXN_COMMITTED:
            bound = log.last_stable_offset
        else:
            bound = high_watermark
        return (
            fetch_offset == bound
            and high_watermark == known[0]
            and log.log_start_offset == known[2]
            and log.last_stable_offset == known[1]
        )

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        *,
        min_one_message: bool,
    ) -> PartitionRead:
        log = self.log
        info = log.read(fetch_offset, max_bytes, isolation, min_one_message=min_one_message)
        aborted = None
        if isolation is FetchIsolation.TXN_COMMITTED and info.size:
            aborted = log.aborted_transactions_for_read(info)
        return PartitionRead(
            info=info,
            high_watermark=log.high_watermark,
            last_stable_offset=log.last_stable_offset,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            aborted_transactions=aborted,
        )
