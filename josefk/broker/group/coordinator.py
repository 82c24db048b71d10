"""The group coordinator: Kafka's classic group protocol and committed offsets.

Owns ``GroupCoordinator`` (every group of this broker, the rebalance protocol of JoinGroup /
SyncGroup / Heartbeat / LeaveGroup, offset commits and fetches, transactional offset commits
(``txn_commit_offsets``, completed by the transaction's marker through ``complete_txn``),
group listing and deletion, offset retention, loading from ``__consumer_offsets`` at start-up)
and ``GroupConfig``.

The single node coordinates every group. In a cluster a broker coordinates the groups of the
``__consumer_offsets`` partitions it leads (Kafka's ``abs(hashCode) % partitions``), loading
them when it becomes leader (``load_partition``) and dropping them when it stops
(``unload_partition``); for any other group every API answers NOT_COORDINATOR.

Time: heartbeat deadlines, rebalance timeouts and the initial rebalance delay are timers of
the injected ``Scheduler`` over the injected ``Clock``; tests step both, nothing sleeps.
Durability: each commit and each group change Kafka stores (a completed sync, a generation
that leaves the group Empty, a static member's new id, deletion and expiry tombstones) is one
batch appended through the ``OffsetsStore`` before the caller is answered.

Replication of commits: an OffsetCommit whose append the offsets topic's in-sync replicas do
not all hold yet (a cluster) stays pending in its group, invisible to OffsetFetch, until the
handler, having waited for the replicas, hands the append back (``appends_settled``): then it
is applied, or on a failed append (NOT_ENOUGH_REPLICAS, timeout, leadership lost) dropped with
the previous offset kept, as Kafka's pendingOffsetCommits. Where the append is replicated as
it is written (the single node) the offsets are applied at once and nothing is tracked. A
TxnOffsetCommit whose append fails likewise leaves the transaction's pending offsets, and a
leader's SyncGroup completes the rebalance (Stable, assignments answered) only once its
assignment record is replicated.

Concurrency: every method runs on the event loop thread and none awaits halfway through a
change; JoinGroup and SyncGroup return futures that later transitions complete.

Imports the group package, the scheduler and clock of josefk.util, josefk.protocol.errors
(the codes only), the control record type of josefk.records and josefk.metrics value types;
must not import handlers, the codec or the transaction coordinator (markers come in through
``complete_txn``, which the broker wires to the replica manager's marker listeners).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from josefk.broker.group.group import (
    CommittedOffset,
    GroupMetadata,
    GroupState,
    JoinedMember,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from josefk.broker.group.offsets_schema import (
    GroupKey,
    GroupMetadataValue,
    OffsetCommitValue,
    OffsetKey,
    OffsetsSchemaError,
    coordinator_partition,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from josefk.broker.group.store import (
    KeyValue,
    OffsetsStore,
    StoreAppendError,
    StoreWrite,
    replication_error,
)
from josefk.metrics.collectors import GroupPartitionStats, GroupStats
from josefk.protocol.errors import ErrorCode
from josefk.records.record import ControlRecordType
from josefk.util.clock import Clock
from josefk.util.scheduler import Scheduler

if TYPE_CHECKING:
    from josefk.broker.replica_manager import AppendOutcome
    from josefk.config.broker import BrokerConfig
    from josefk.metrics.probes import GroupProbe

logger = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID: Final = ""
DEFAULT_OFFSET_METADATA_MAX_BYTES: Final = 4096

# A record while replaying a partition: its batch's base offset and its value (None: a
# tombstone).
_Record = tuple[int, bytes | None]


def _committed(value_bytes: bytes, append_offset: int) -> CommittedOffset:
    v = decode_offset_value(value_bytes)
    return CommittedOffset(
        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp, append_offset
    )


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_group_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = DEFAULT_OFFSET_METADATA_MAX_BYTES

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupConfig:
        return cls(
            offsets_partitions=config.offsets_topic_num_partitions,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            max_group_size=config.group_max_size,
            offsets_retention_ms=config.offsets_retention_ms,
            retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes=int(
                getattr(config, "offset_metadata_max_bytes", DEFAULT_OFFSET_METADATA_MAX_BYTES)
            ),
        )


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True
    supports_skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class _InFlightCommit:
    """Offsets whose append waits for the offsets topic's in-sync replicas; a producer id
    for a transactional commit, else -1."""

    outcome: AppendOutcome
    group: GroupMetadata
    offsets: list[tuple[tuple[str, int], CommittedOffset]]
    producer_id: int = -1


@dataclass(frozen=True, slots=True)
class _InFlightSync:
    """A leader's SyncGroup whose assignment record waits for the in-sync replicas: the
    generation it is for and every member's assignment."""

    outcome: AppendOutcome
    group: GroupMetadata
    generation_id: int
    assignments: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


class GroupCoordinator:
    """Every classic group of this broker, with their offsets. Event loop thread only."""

    def __init__(
        self,
        config: GroupConfig,
        store: OffsetsStore,
        *,
        scheduler: Scheduler,
        clock: Clock,
        probe: GroupProbe | None = None,
        new_member_suffix: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.config = config
        self._store = store
        self._scheduler = scheduler
        self._clock = clock
        self._probe = probe
        self._suffix = new_member_suffix
        self._groups: dict[str, GroupMetadata] = {}
        self._retention_task: Any = None
        self._stopped = False
        # The offsets topic partitions whose groups this broker coordinates; None: all of
        # them (the single node). In a cluster, those it leads (load_partition/unload_partition).
        self._owned: set[int] | None = None
        # Producer id -> groups that may hold its pending transactional offsets, so that a
        # marker finds them without a walk over every group (an entry may outlive the
        # offsets; it is checked and dropped when the marker comes).
        self._txn_groups: dict[int, set[str]] = {}
        # id(outcome) of an append not yet replicated -> the commit it holds (the record
        # keeps the outcome alive, so the id is not reused while it is here).
        self._in_flight: dict[int, _InFlightCommit | _InFlightSync] = {}

    # -- lifecycle ------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return coordinator_partition(group_id, self._store.partition_count)

    def take_appends(self) -> list[AppendOutcome]:
        """The offsets-topic appends of the last call still to be replicated (see
        TopicOffsetsStore.take_appends); the caller waits for them, then hands them back
        through ``appends_settled`` whatever happened."""
        return self._store.take_appends()

    def appends_settled(self, appends: Iterable[AppendOutcome]) -> None:
        """The wait for ``appends`` is over: one without ``error`` is replicated and its
        commit's offsets become committed (unless a commit further on in the log already
        is); one with an error is not, and its offsets are dropped. A leader's SyncGroup
        completes the rebalance once its assignment is replicated, or fails every member's
        sync and rebalances again. Appends that hold neither (other group changes) are
        ignored, as is one whose group was unloaded or deleted meanwhile."""
        for outcome in appends:
            in_flight = self._in_flight.pop(id(outcome), None)
            if in_flight is None or in_flight.outcome is not outcome:
                continue
            group = in_flight.group
            if self._groups.get(group.group_id) is not group:
                continue
            replicated = outcome.error is None
            if isinstance(in_flight, _InFlightSync):
                if group.generation_id != in_flight.generation_id or not group.is_in(
                    GroupState.COMPLETING_REBALANCE
                ):
                    continue  # the group moved on (a member left or joined) meanwhile
                if outcome.error is None:
                    self._complete_sync(group, in_flight.assignments)
                else:
                    self._fail_assignment(group, replication_error(outcome.error))
                continue
            if in_flight.producer_id >= 0:
                if not replicated:
                    group.drop_pending_txn_offsets(in_flight.producer_id, in_flight.offsets)
                    self._report_pending()
                continue
            applied = sum(
                group.complete_offset_commit(tp, committed, replicated=replicated)
                for tp, committed in in_flight.offsets
            )
            if not replicated:
                logger.info(
                    "group %s: a commit of %d offsets was not replicated: %s",
                    group.group_id,
                    len(in_flight.offsets),
                    outcome.error,
                )
            if applied and self._probe is not None:
                self._probe.offsets_committed(group.group_id, applied)

    def ownership_error(self, group_id: str) -> ErrorCode:
        """NOT_COORDINATOR when another broker coordinates ``group_id`` (or this one stops):
        the client then asks FindCoordinator again."""
        if self._stopped:
            return ErrorCode.NOT_COORDINATOR
        if self._owned is not None and self.partition_for(group_id) not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def coordinate_by_leadership(self) -> None:
        """Cluster mode: coordinate only the groups of the partitions this broker leads."""
        self._owned = set()

    def load_partition(self, partition: int) -> None:
        """This broker became leader of ``partition``: its groups are now coordinated here,
        rebuilt from the partition's log (which holds every record the old leader committed)."""
        if self._owned is None or partition in self._owned:
            return
        self._owned.add(partition)
        self.load([partition])

    def unload_partition(self, partition: int) -> None:
        """This broker no longer leads ``partition``: its groups move to the new leader.
        Parked joins and syncs are answered NOT_COORDINATOR so their clients move too."""
        if self._owned is None or partition not in self._owned:
            return
        self._owned.discard(partition)
        for group in [
            g for g in self._groups.values() if self.partition_for(g.group_id) == partition
        ]:
            self._release(group, ErrorCode.NOT_COORDINATOR)
            del self._groups[group.group_id]
            if self._probe is not None:
                self._probe.remove_group(group.group_id)
        self._report_pending()
        logger.info("unloaded the groups of %s-%d", "__consumer_offsets", partition)

    def _release(self, group: GroupMetadata, error: ErrorCode) -> None:
        self._cancel_join_timer(group)
        for member in group.members.values():
            if member.heartbeat_task is not None:
                member.heartbeat_task.cancel()
                member.heartbeat_task = None
            self._fail_join(member, error)
            self._fail_sync(member, error)

    def load(self, partitions: Iterable[int] | None = None) -> None:
        """Rebuild the groups of ``partitions`` (all by default) from the offsets topic: the
        last record of a key wins and a tombstone deletes it. Groups with members come back
        Stable and their members must heartbeat within a session timeout, as after a
        coordinator move in Kafka.

        Transactional offset commits are replayed as Kafka's loader does: kept per producer
        until that producer's marker; a COMMIT applies each one unless the key's current
        record is further on in the log, an ABORT drops them, and those of transactions
        still open come back pending. A plain tombstone of an offset also drops the pending
        offsets of that partition (as OffsetDelete and DeleteGroups do live)."""
        offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        pending: dict[str, dict[int, dict[tuple[str, int], CommittedOffset]]] = {}
        values: dict[str, GroupMetadataValue | None] = {}
        if partitions is None:
            partitions = range(self._store.partition_count)
        loaded = 0
        for partition in partitions:
            latest, open_txns = self._replay(partition)
            for key_bytes, (append_offset, value_bytes) in latest.items():
                try:
                    key = decode_key(key_bytes)
                    if isinstance(key, OffsetKey):
                        group_offsets = offsets.setdefault(key.group, {})
                        tp = (key.topic, key.partition)
                        if value_bytes is None:
                            group_offsets.pop(tp, None)
                        else:
                            group_offsets[tp] = _committed(value_bytes, append_offset)
                    else:
                        values[key.group] = (
                            None if value_bytes is None else decode_group_value(value_bytes)
                        )
                except OffsetsSchemaError as exc:
                    logger.warning("skipping unreadable record in partition %d: %s", partition, exc)
            for producer_id, records in open_txns.items():
                for key_bytes, (append_offset, value_bytes) in records.items():
                    try:
                        key = decode_key(key_bytes)
                        if not isinstance(key, OffsetKey) or value_bytes is None:
                            continue
                        committed = _committed(value_bytes, append_offset)
                    except OffsetsSchemaError as exc:
                        logger.warning(
                            "skipping unreadable record in partition %d: %s", partition, exc
                        )
                        continue
                    by_producer = pending.setdefault(key.group, {})
                    by_producer.setdefault(producer_id, {})[(key.topic, key.partition)] = committed
        now = self._clock.milliseconds()
        for group_id in sorted(set(offsets) | set(values) | set(pending)):
            value = values.get(group_id)
            group_offsets = offsets.get(group_id, {})
            group_pending = pending.get(group_id, {})
            if value is None and not group_offsets and not group_pending:
                continue
            group = GroupMetadata(group_id, now_ms=now)
            group.offsets = group_offsets
            group.pending_txn_offsets = group_pending
            for producer_id in group_pending:
                self._txn_groups.setdefault(producer_id, set()).add(group_id)
            if value is not None:
                self._restore(group, value)
            self._groups[group_id] = group
            loaded += 1
        self._report_pending()
        logger.info("loaded %d groups from the offsets topic", loaded)

    def _replay(
        self, partition: int
    ) -> tuple[dict[bytes, _Record], dict[int, dict[bytes, _Record]]]:
        """The partition's last record of each key (with its batch's base offset), in order
        of last write, and the records of transactions still open, by producer."""
        # Only a key's last record counts: keep the raw bytes while replaying and decode
        # once per key at the end (an uncompacted partition repeats each key many times).
        # Re-inserting keeps the dict in order of last write, so that two encodings of
        # one key (schema versions) still resolve to the later record.
        latest: dict[bytes, _Record] = {}
        open_txns: dict[int, dict[bytes, _Record]] = {}
        pop = latest.pop
        for batch in self._store.read(partition):
            if batch.control is not None:
                records = open_txns.pop(batch.producer_id, None)
                if records is None or batch.control is not ControlRecordType.COMMIT:
                    continue
                for key_bytes, record in records.items():
                    current = latest.get(key_bytes)
                    if current is None or current[0] < record[0]:
                        pop(key_bytes, None)
                        latest[key_bytes] = record
                continue
            if batch.is_transactional and batch.producer_id >= 0:
                txn = open_txns.setdefault(batch.producer_id, {})
                for key_bytes, value_bytes in batch.records:
                    if value_bytes is None:
                        txn.pop(key_bytes, None)
                    else:
                        txn[key_bytes] = (batch.base_offset, value_bytes)
                continue
            for key_bytes, value_bytes in batch.records:
                pop(key_bytes, None)
                latest[key_bytes] = (batch.base_offset, value_bytes)
                if value_bytes is None:
                    for txn in open_txns.values():
                        txn.pop(key_bytes, None)
        return latest, open_txns

    def _restore(self, group: GroupMetadata, value: GroupMetadataValue) -> None:
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        if value.current_state_timestamp >= 0:
            group.current_state_timestamp = value.current_state_timestamp
        for record in value.members:
            member = MemberMetadata(
                member_id=record.member_id,
                group_instance_id=record.group_instance_id,
                client_id=record.client_id,
                client_host=record.client_host,
                rebalance_timeout_ms=record.rebalance_timeout_ms,
                session_timeout_ms=record.session_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", record.subscription)],
            )
            member.assignment = record.assignment
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        if group.members:
            group.state = GroupState.STABLE
            for member in group.members.values():
                self._reset_heartbeat(group, member)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)

    def start(self) -> None:
        """Schedule the periodic offset retention check."""
        self._retention_task = self._scheduler.schedule(
            "group-offsets-retention",
            self._run_retention,
            delay_ms=self.config.retention_check_interval_ms,
            period_ms=self.config.retention_check_interval_ms,
        )

    def _run_retention(self) -> None:
        self.expire_offsets()

    def stop(self) -> None:
        """Answer every parked JoinGroup/SyncGroup (the client finds the coordinator again)
        and cancel the timers, so a shutdown does not wait for rebalance timeouts."""
        self._stopped = True
        if self._retention_task is not None:
            self._retention_task.cancel()
        for group in self._groups.values():
            self._release(group, ErrorCode.NOT_COORDINATOR)

    # -- reads ----------------------------------------------------------------------------

    def group(self, group_id: str) -> GroupMetadata | None:
        return self._groups.get(group_id)

    @property
    def groups(self) -> list[GroupMetadata]:
        return list(self._groups.values())

    # -- JoinGroup ------------------------------------------------------------------------

    def join_group(self, request: JoinRequest) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        error = self.ownership_error(request.group_id) or self._validate_join(request)
        if error:
            future.set_result(JoinResult(error, request.member_id))
            return future
        group = self._groups.get(request.group_id)
        if request.member_id == UNKNOWN_MEMBER_ID:
            if group is None:
                group = GroupMetadata(request.group_id, now_ms=self._clock.milliseconds())
                self._groups[request.group_id] = group
            self._join_unknown_member(group, request, future)
        elif group is None:
            future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id))
        else:
            self._join_known_member(group, request, future)
        return future

    def _validate_join(self, request: JoinRequest) -> ErrorCode:
        if not request.group_id:
            return ErrorCode.INVALID_GROUP_ID
        if not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return ErrorCode.INVALID_SESSION_TIMEOUT
        return ErrorCode.NONE

    def _join_unknown_member(
        self, group: GroupMetadata, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        names = [name for name, _ in request.protocols]
        if group.is_in(GroupState.DEAD):
            future.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(request.protocol_type, names):
            future.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID))
            return
        instance_id = request.group_instance_id
        new_id = f"{instance_id if instance_id is not None else request.client_id}-{self._suffix()}"
        if instance_id is not None and instance_id in group.static_members:
            self._replace_static_member(
                group, group.static_members[instance_id], new_id, request, future
            )
            return
        if group.size >= self.config.max_group_size:
            future.set_result(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
            return
        if instance_id is None and request.require_known_member_id:
            # KIP-394: the member learns its id first, so a retried first join does not
            # leave a ghost member behind that the group must wait out.
            group.pending_members.add(new_id)
            self._scheduler.schedule(
                f"group-pending-member-{group.group_id}",
                lambda: self._expire_pending_member(group, new_id),
                delay_ms=request.session_timeout_ms,
            )
            future.set_result(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
            return
        self._add_member_and_rebalance(group, new_id, request, future)

    def _join_known_member(
        self, group: GroupMetadata, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        member_id = request.member_id
        names = [name for name, _ in request.protocols]
        if group.is_in(GroupState.DEAD):
            future.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(request.protocol_type, names):
            future.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, request, future)
            return
        error = self._check_member(group, member_id, request.group_instance_id)
        if error:
            future.set_result(JoinResult(error, member_id))
            return
        member = group.members[member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, request, future)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # A lost JoinGroup response: answer again with the current generation.
                future.set_result(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, request, future)
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                # The leader's rejoin asks for a new assignment (metadata may have changed).
                self._update_member_and_rebalance(group, member, request, future)
            else:
                future.set_result(self._join_result(group, member, with_members=False))
        else:
            future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _check_member(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _join_result(
        self, group: GroupMetadata, member: MemberMetadata, *, with_members: bool = True
    ) -> JoinResult:
        members: tuple[JoinedMember, ...] = ()
        if with_members and group.is_leader(member.member_id):
            members = tuple(
                JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=members,
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        request: JoinRequest,
        future: asyncio.Future[JoinResult],
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
        )
        member.is_new = True
        member.join_future = future
        group.pending_members.discard(member_id)
        group.add_member(member)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.initial_join:
            group.new_member_added = True
        self._reset_heartbeat(group, member)
        self._maybe_prepare_rebalance(group)
        self._try_complete_join(group)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        request: JoinRequest,
        future: asyncio.Future[JoinResult],
    ) -> None:
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        # A second JoinGroup replaces the first; the first is answered so it does not hang.
        self._fail_join(member, ErrorCode.REBALANCE_IN_PROGRESS)
        member.join_future = future
        self._maybe_prepare_rebalance(group)
        self._try_complete_join(group)

    def _replace_static_member(
        self,
        group: GroupMetadata,
        old_id: str,
        new_id: str,
        request: JoinRequest,
        future: asyncio.Future[JoinResult],
    ) -> None:
        """KIP-345: a static member rejoining with an unknown member id takes over its
        instance's place; the old id is fenced. A Stable group with unchanged protocols
        does not rebalance: the member gets the current generation and assignment back."""
        old = group.members[old_id]
        self._fail_join(old, ErrorCode.FENCED_INSTANCE_ID)
        self._fail_sync(old, ErrorCode.FENCED_INSTANCE_ID)
        instance_id = request.group_instance_id
        assert instance_id is not None
        protocols_unchanged = old.matches(request.protocols)
        was_leader = group.is_leader(old_id)
        member = group.replace_static_member(instance_id, old_id, new_id)
        old_session, old_rebalance = member.session_timeout_ms, member.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.client_id = request.client_id
        member.client_host = request.client_host
        self._reset_heartbeat(group, member)
        if (
            group.is_in(GroupState.STABLE)
            and protocols_unchanged
            and (not was_leader or request.supports_skip_assignment)
        ):
            try:
                self._store_group(group)
            except StoreAppendError as exc:
                # Undo: the old id stays the member's, as Kafka reverts on a failed write.
                group.replace_static_member(instance_id, new_id, old_id)
                member.session_timeout_ms, member.rebalance_timeout_ms = old_session, old_rebalance
                future.set_result(JoinResult(exc.error, UNKNOWN_MEMBER_ID))
                return
            result = self._join_result(group, member, with_members=was_leader)
            if was_leader:
                result = JoinResult(
                    result.error,
                    result.member_id,
                    generation_id=result.generation_id,
                    protocol_type=result.protocol_type,
                    protocol_name=result.protocol_name,
                    leader_id=result.leader_id,
                    members=result.members,
                    skip_assignment=True,
                )
            future.set_result(result)
            return
        self._update_member_and_rebalance(group, member, request, future)

    # -- rebalance ------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The assignment being synced is void: members must rejoin.
            for member in group.members.values():
                member.assignment = b""
                self._fail_sync(member, ErrorCode.REBALANCE_IN_PROGRESS)
        initial = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._clock.milliseconds())
        self._cancel_join_timer(group)
        rebalance_timeout = group.rebalance_timeout_ms
        group.initial_join = initial
        if initial:
            # A new group waits for more members before the first generation, so that a
            # fleet of consumers starting together does not rebalance once per member.
            delay = self.config.initial_rebalance_delay_ms
            group.new_member_added = False
            self._schedule_join(
                group,
                min(delay, rebalance_timeout),
                remaining_ms=max(rebalance_timeout - delay, 0),
            )
        else:
            self._schedule_join(group, rebalance_timeout, remaining_ms=None)

    def _schedule_join(
        self, group: GroupMetadata, delay_ms: int, *, remaining_ms: int | None
    ) -> None:
        group.join_timer_token += 1
        token = group.join_timer_token
        group.join_timer = self._scheduler.schedule(
            f"group-join-{group.group_id}",
            lambda: self._on_join_timer(group, token, remaining_ms),
            delay_ms=delay_ms,
        )

    def _cancel_join_timer(self, group: GroupMetadata) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.join_timer_token += 1

    def _on_join_timer(self, group: GroupMetadata, token: int, remaining_ms: int | None) -> None:
        if token != group.join_timer_token or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        group.join_timer = None
        if remaining_ms is not None and group.new_member_added and remaining_ms > 0:
            delay = self.config.initial_rebalance_delay_ms
            group.new_member_added = False
            self._schedule_join(
                group, min(delay, remaining_ms), remaining_ms=max(remaining_ms - delay, 0)
            )
            return
        self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.initial_join
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        self._cancel_join_timer(group)
        group.initial_join = False
        for member in list(group.members.values()):
            if not member.is_awaiting_join:
                logger.info(
                    "group %s: member %s did not rejoin in time; removing it",
                    group.group_id,
                    member.member_id,
                )
                self._drop_member(group, member)
        if group.leader_id is not None and group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        now = self._clock.milliseconds()
        group.init_next_generation(now)
        if self._probe is not None:
            self._probe.rebalance_completed(group.group_id)
        logger.info(
            "group %s: generation %d with %d members (%s)",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )
        if group.is_in(GroupState.EMPTY):
            try:
                self._store_group(group)
            except StoreAppendError as exc:
                logger.warning("group %s: storing the empty group failed: %s", group.group_id, exc)
            return
        for member in group.members.values():
            future = member.join_future
            member.join_future = None
            member.is_new = False
            if future is not None and not future.done():
                future.set_result(self._join_result(group, member))
            self._reset_heartbeat(group, member)

    # -- SyncGroup ------------------------------------------------------------------------

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> asyncio.Future[SyncResult]:
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        group = self._groups.get(group_id)
        error = self.ownership_error(group_id)
        if error:
            pass
        elif group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif group.is_in(GroupState.DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            error = self._check_member(group, member_id, group_instance_id)
            if not error and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            if not error and (
                (protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)
            ):
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            if not error and group.is_in(GroupState.EMPTY):
                error = ErrorCode.UNKNOWN_MEMBER_ID
            if not error and group.is_in(GroupState.PREPARING_REBALANCE):
                error = ErrorCode.REBALANCE_IN_PROGRESS
        if error or group is None:
            future.set_result(SyncResult(error))
            return future
        member = group.members[member_id]
        if group.is_in(GroupState.STABLE):
            self._reset_heartbeat(group, member)
            future.set_result(self._sync_result(group, member))
            return future
        # CompletingRebalance: park until the leader's assignment arrives.
        self._fail_sync(member, ErrorCode.REBALANCE_IN_PROGRESS)
        member.sync_future = future
        self._reset_heartbeat(group, member)
        if group.is_leader(member_id):
            full = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
            try:
                write = self._store_group(group, full)
            except StoreAppendError as exc:
                self._fail_assignment(group, exc.error)
                return future
            if write.awaiting is not None:
                # As Kafka: the group becomes Stable and the members hear their assignment
                # only once the in-sync replicas hold it (``appends_settled``).
                self._in_flight[id(write.awaiting)] = _InFlightSync(
                    write.awaiting, group, group.generation_id, full
                )
                return future
            self._complete_sync(group, full)
        return future

    def _complete_sync(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        for mid, member in group.members.items():
            member.assignment = assignments.get(mid, b"")
        group.transition_to(GroupState.STABLE, self._clock.milliseconds())
        for member in group.members.values():
            if member.sync_future is not None and not member.sync_future.done():
                member.sync_future.set_result(self._sync_result(group, member))
            member.sync_future = None

    def _fail_assignment(self, group: GroupMetadata, error: int) -> None:
        """The leader's assignment could not be stored: every parked sync hears ``error``
        and the group rebalances again."""
        for member in group.members.values():
            member.assignment = b""
            self._fail_sync(member, error)
        self._maybe_prepare_rebalance(group)

    @staticmethod
    def _sync_result(group: GroupMetadata, member: MemberMetadata) -> SyncResult:
        return SyncResult(
            ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
        )

    @staticmethod
    def _fail_join(member: MemberMetadata, error: int) -> None:
        future = member.join_future
        member.join_future = None
        if future is not None and not future.done():
            future.set_result(JoinResult(error, member.member_id))

    @staticmethod
    def _fail_sync(member: MemberMetadata, error: int) -> None:
        future = member.sync_future
        member.sync_future = None
        if future is not None and not future.done():
            future.set_result(SyncResult(error))

    # -- Heartbeat and session timeouts ---------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if error := self.ownership_error(group_id):
            return error
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._check_member(group, member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._reset_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _reset_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Move the member's session deadline; one timer per member follows the deadline
        instead of a new timer per heartbeat."""
        if self._stopped:
            return
        member.heartbeat_deadline_ms = self._clock.monotonic_ms() + member.session_timeout_ms
        if member.heartbeat_task is None:
            self._schedule_heartbeat_check(group, member, member.session_timeout_ms)

    def _schedule_heartbeat_check(
        self, group: GroupMetadata, member: MemberMetadata, delay_ms: int
    ) -> None:
        member.heartbeat_task = self._scheduler.schedule(
            f"group-heartbeat-{group.group_id}",
            lambda: self._on_heartbeat_timer(group, member),
            delay_ms=delay_ms,
        )

    def _on_heartbeat_timer(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_task = None
        if group.members.get(member.member_id) is not member or self._stopped:
            return
        now = self._clock.monotonic_ms()
        if member.is_awaiting_join or member.is_awaiting_sync:
            # A member parked in JoinGroup/SyncGroup cannot heartbeat; the rebalance
            # timeout bounds its wait instead.
            member.heartbeat_deadline_ms = now + member.session_timeout_ms
        if now < member.heartbeat_deadline_ms:
            self._schedule_heartbeat_check(group, member, member.heartbeat_deadline_ms - now)
            return
        logger.info(
            "group %s: member %s missed its session timeout of %d ms",
            group.group_id,
            member.member_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update_group(group, member)

    def _expire_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(group)

    def _drop_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        group.remove_member(member.member_id)
        if member.heartbeat_task is not None:
            member.heartbeat_task.cancel()
            member.heartbeat_task = None
        self._fail_join(member, ErrorCode.UNKNOWN_MEMBER_ID)
        self._fail_sync(member, ErrorCode.UNKNOWN_MEMBER_ID)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._drop_member(group, member)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        self._try_complete_join(group)

    # -- LeaveGroup -----------------------------------------------------------------------

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members given as (member id, instance id); the top-level error and one
        error per member."""
        if error := self.ownership_error(group_id):
            return error, [ErrorCode.NONE] * len(members)
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.NONE] * len(members)
        errors = []
        for member_id, instance_id in members:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id != UNKNOWN_MEMBER_ID and member_id != known:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._try_complete_join(group)
                errors.append(ErrorCode.NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            logger.info("group %s: member %s leaves", group_id, member_id)
            self._remove_member_and_update_group(group, member)
            errors.append(ErrorCode.NONE)
        return ErrorCode.NONE, errors

    # -- offsets --------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: Sequence[OffsetCommitEntry],
        *,
        retention_ms: int = -1,
    ) -> list[ErrorCode]:
        """Commit offsets for a group; one error per entry, in order."""
        if not group_id:
            return [ErrorCode.INVALID_GROUP_ID] * len(entries)
        if error := self.ownership_error(group_id):
            return [error] * len(entries)
        group = self._groups.get(group_id)
        error = ErrorCode.NONE
        if group is None:
            if generation_id >= 0:
                # A commit from a generation of a group this coordinator never had.
                return [ErrorCode.ILLEGAL_GENERATION] * len(entries)
            # A "simple" consumer (no group management) commits to a new, empty group.
            group = GroupMetadata(group_id, now_ms=self._clock.milliseconds())
            self._groups[group_id] = group
        elif group.is_in(GroupState.DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif (
            group_instance_id is not None
            and group.static_members.get(group_instance_id, member_id) != member_id
        ):
            error = ErrorCode.FENCED_INSTANCE_ID
        elif generation_id < 0 and group.is_in(GroupState.EMPTY):
            pass
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        elif member_id not in group.members:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        else:
            self._reset_heartbeat(group, group.members[member_id])
        if error:
            return [error] * len(entries)
        return self._store_offsets(group, entries, retention_ms)

    def _store_offsets(
        self, group: GroupMetadata, entries: Sequence[OffsetCommitEntry], retention_ms: int
    ) -> list[ErrorCode]:
        errors, accepted, awaiting = self._write_offsets(group, entries, retention_ms)
        if awaiting is not None:
            group.prepare_offset_commits(accepted)
            self._in_flight[id(awaiting)] = _InFlightCommit(awaiting, group, accepted)
            return errors
        for tp, committed in accepted:
            group.offsets[tp] = committed
        if accepted and self._probe is not None:
            self._probe.offsets_committed(group.group_id, len(accepted))
        return errors

    def _write_offsets(
        self,
        group: GroupMetadata,
        entries: Sequence[OffsetCommitEntry],
        retention_ms: int,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[
        list[ErrorCode], list[tuple[tuple[str, int], CommittedOffset]], AppendOutcome | None
    ]:
        """Append the entries as one batch (transactional with a producer id); one error per
        entry, the offsets written (none when the append failed) and the append's outcome
        when it is still to be replicated."""
        now = self._clock.milliseconds()
        expire = now + retention_ms if retention_ms >= 0 else None
        errors: list[ErrorCode] = []
        records: list[KeyValue] = []
        accepted: list[tuple[tuple[str, int], CommittedOffset]] = []
        limit = self.config.offset_metadata_max_bytes
        for entry in entries:
            metadata = entry.metadata or ""
            if len(metadata.encode()) > limit:
                errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(ErrorCode.NONE)
            committed = CommittedOffset(entry.offset, entry.leader_epoch, metadata, now, expire)
            accepted.append(((entry.topic, entry.partition), committed))
            records.append(
                (
                    encode_offset_key(OffsetKey(group.group_id, entry.topic, entry.partition)),
                    encode_offset_value(
                        OffsetCommitValue(entry.offset, metadata, now, entry.leader_epoch, expire)
                    ),
                )
            )
        if not records:
            return errors, [], None
        try:
            write: StoreWrite = self._store.append(
                self.partition_for(group.group_id),
                records,
                now,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
            )
        except StoreAppendError as exc:
            return [e if e else ErrorCode(exc.error) for e in errors], [], None
        for _, committed in accepted:
            committed.append_offset = write.base_offset
        return errors, accepted, write.awaiting

    def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: Sequence[OffsetCommitEntry],
    ) -> list[ErrorCode]:
        """TxnOffsetCommit: write the offsets as the producer's transactional batch and keep
        them pending until its marker (``complete_txn``); one error per entry, in order.

        The KIP-447 fields are checked as Kafka's coordinator does for a transactional
        commit: a static member's instance id must map to ``member_id``, a non-empty
        ``member_id`` must be a member and a generation >= 0 must be the group's (a
        rebalance in progress is no error here: the transaction's offsets only become
        visible at its commit). A group this coordinator does not know is created Empty."""
        if not group_id:
            return [ErrorCode.INVALID_GROUP_ID] * len(entries)
        if error := self.ownership_error(group_id):
            return [error] * len(entries)
        group = self._groups.get(group_id)
        known = group is not None
        if group is None:
            group = GroupMetadata(group_id, now_ms=self._clock.milliseconds())
        error = ErrorCode.NONE
        if group.is_in(GroupState.DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif (
            group_instance_id is not None
            and group.static_members.get(group_instance_id, member_id) != member_id
        ):
            error = ErrorCode.FENCED_INSTANCE_ID
        elif member_id != UNKNOWN_MEMBER_ID and member_id not in group.members:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif generation_id >= 0 and generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error:
            return [error] * len(entries)
        errors, accepted, awaiting = self._write_offsets(
            group, entries, -1, producer_id=producer_id, producer_epoch=producer_epoch
        )
        if accepted:
            if not known:
                self._groups[group_id] = group
            if awaiting is not None:
                self._in_flight[id(awaiting)] = _InFlightCommit(
                    awaiting, group, accepted, producer_id
                )
            group.add_pending_txn_offsets(producer_id, accepted)
            self._txn_groups.setdefault(producer_id, set()).add(group_id)
            self._report_pending()
        return errors

    def complete_txn(self, partition: int, producer_id: int, *, committed: bool) -> int:
        """A COMMIT or ABORT marker of ``producer_id`` was written to ``partition`` of the
        offsets topic (ReplicaManager.txn_marker_listeners): the pending offsets of that
        producer in the partition's groups become committed or are dropped. Returns how many
        offsets became committed. Markers of partitions this broker does not coordinate are
        none of its business (their groups load from the log when it does)."""
        if self._owned is not None and partition not in self._owned:
            return 0
        group_ids = self._txn_groups.get(producer_id)
        if not group_ids:
            return 0
        applied = 0
        for group_id in [g for g in group_ids if self.partition_for(g) == partition]:
            group_ids.discard(group_id)
            group = self._groups.get(group_id)
            if group is None:
                continue
            count = group.complete_txn(producer_id, committed=committed)
            applied += count
            if count and self._probe is not None:
                self._probe.offsets_committed(group_id, count)
        if not group_ids:
            del self._txn_groups[producer_id]
        self._report_pending()
        return applied

    def _report_pending(self) -> None:
        if self._probe is None:
            return
        group_ids = set().union(*self._txn_groups.values())
        total = 0
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if group is not None:
                total += group.pending_txn_offset_count
        self._probe.pending_txn_offsets(total)

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> list[tuple[str, int, CommittedOffset | None]]:
        """Committed offsets of the partitions (all the group has when None); a partition
        or group without a commit comes back with None, which is not an error. Offsets of
        transactions not yet committed are not among them (``is_unstable``)."""
        group = self._groups.get(group_id)
        offsets = {} if group is None else group.offsets
        if partitions is None:
            return [(topic, p, committed) for (topic, p), committed in sorted(offsets.items())]
        return [(topic, p, offsets.get((topic, p))) for topic, p in partitions]

    def is_unstable(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether a transaction, or a commit still being replicated, has an offset of the
        partition pending: OffsetFetch with ``require_stable`` (v7+, KIP-447) answers
        UNSTABLE_OFFSET_COMMIT for it, and the client retries until it completes instead of
        starting from an offset about to change (Kafka counts both kinds)."""
        group = self._groups.get(group_id)
        return group is not None and (
            group.has_pending_txn_offsets((topic, partition))
            or group.has_pending_offset_commits((topic, partition))
        )

    def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """OffsetDelete: a top-level error and one per partition."""
        group = self._groups.get(group_id)
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        if error := self.ownership_error(group_id):
            return error, []
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        subscribed: set[str] = set()
        if not group.is_in(GroupState.EMPTY):
            topics = group.subscribed_topics()
            if topics is None:
                return ErrorCode.NON_EMPTY_GROUP, []
            subscribed = topics
        errors = []
        doomed = []
        for tp in partitions:
            if tp[0] in subscribed:
                errors.append(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
            else:
                errors.append(ErrorCode.NONE)
                if (
                    tp in group.offsets
                    or group.has_pending_txn_offsets(tp)
                    or group.has_pending_offset_commits(tp)
                ):
                    doomed.append(tp)
        if doomed:
            try:
                self._write_offset_tombstones(group, doomed)
            except StoreAppendError as exc:
                return ErrorCode(exc.error), []
        return ErrorCode.NONE, errors

    def _write_offset_tombstones(
        self,
        group: GroupMetadata,
        partitions: Iterable[tuple[str, int]],
        *,
        with_group: bool = False,
    ) -> None:
        partitions = list(partitions)
        records: list[KeyValue] = [
            (encode_offset_key(OffsetKey(group.group_id, topic, p)), None)
            for topic, p in partitions
        ]
        if with_group:
            records.append((encode_group_key(GroupKey(group.group_id)), None))
        if records:
            self._store.append(
                self.partition_for(group.group_id), records, self._clock.milliseconds()
            )
        # Pending transactional offsets of these partitions go too: the tombstone drops
        # them when the partition is loaded again, so a later commit marker must not bring
        # them back now.
        had_pending = group.has_pending_txn_offsets()
        group.remove_offsets(partitions)
        if had_pending:
            self._report_pending()

    def remove_offsets_of_topic(self, topic: str) -> None:
        """A deleted topic's committed offsets go (tombstones), as Kafka's
        onPartitionsDeleted does, so a topic created again under the name starts clean."""
        for group in list(self._groups.values()):
            doomed = [tp for tp in group.offset_partitions() if tp[0] == topic]
            if not doomed:
                continue
            try:
                self._write_offset_tombstones(group, doomed)
            except StoreAppendError as exc:
                logger.warning(
                    "group %s: offsets of deleted topic %s not removed: %s",
                    group.group_id,
                    topic,
                    exc,
                )

    def expire_offsets(self) -> int:
        """Apply ``offsets.retention.minutes``: expire offsets (tombstones), then remove
        Empty groups left without offsets. Returns the number of offsets expired."""
        now = self._clock.milliseconds()
        total = 0
        for group in list(self._groups.values()):
            expired = group.expired_offsets(now, self.config.offsets_retention_ms)
            # A group with offsets pending (a transaction's, or a commit being
            # replicated) stays, as Kafka's hasOffsets.
            remove_group = (
                group.is_in(GroupState.EMPTY)
                and not group.pending_members
                and not group.has_pending_txn_offsets()
                and not group.has_pending_offset_commits()
                and len(expired) == len(group.offsets)
            )
            if not expired and not remove_group:
                continue
            try:
                self._write_offset_tombstones(group, expired, with_group=remove_group)
            except StoreAppendError as exc:
                logger.warning("group %s: offset expiry not written: %s", group.group_id, exc)
                continue
            total += len(expired)
            if remove_group:
                group.transition_to(GroupState.DEAD, now)
                del self._groups[group.group_id]
                if self._probe is not None:
                    self._probe.remove_group(group.group_id)
        if total:
            logger.info("expired %d committed offsets", total)
        if self._probe is not None:
            self._probe.offsets_expired(total)
        return total

    # -- describe, list, delete -----------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription | None:
        group = self._groups.get(group_id)
        if group is None:
            return None
        stable = group.is_in(GroupState.STABLE)
        return GroupDescription(
            group_id=group_id,
            state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_name=(group.protocol_name or "") if stable else "",
            members=tuple(
                MemberDescription(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    metadata=m.metadata_for(group.protocol_name) if stable else b"",
                    assignment=m.assignment if stable else b"",
                )
                for m in group.members.values()
            ),
        )

    def list_groups(self) -> list[GroupListing]:
        return [
            GroupListing(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if not g.is_in(GroupState.DEAD)
        ]

    def delete_groups(self, group_ids: Sequence[str]) -> list[ErrorCode]:
        errors = []
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if not group_id:
                errors.append(ErrorCode.INVALID_GROUP_ID)
            elif error := self.ownership_error(group_id):
                errors.append(error)
            elif group is None or group.is_in(GroupState.DEAD):
                errors.append(ErrorCode.GROUP_ID_NOT_FOUND)
            elif not group.is_in(GroupState.EMPTY):
                errors.append(ErrorCode.NON_EMPTY_GROUP)
            else:
                try:
                    # Pending transactional offsets are deleted with the group, so that
                    # the transaction's commit does not resurrect it (as Kafka's
                    # removeAllOffsets drops them).
                    self._write_offset_tombstones(group, group.offset_partitions(), with_group=True)
                except StoreAppendError as exc:
                    errors.append(ErrorCode(exc.error))
                    continue
                group.transition_to(GroupState.DEAD, self._clock.milliseconds())
                del self._groups[group_id]
                if self._probe is not None:
                    self._probe.remove_group(group_id)
                errors.append(ErrorCode.NONE)
        return errors

    # -- persistence of group metadata ----------------------------------------------------

    def _store_group(
        self, group: GroupMetadata, assignments: dict[str, bytes] | None = None
    ) -> StoreWrite:
        value = encode_group_value(group.to_record(assignments))
        return self._store.append(
            self.partition_for(group.group_id),
            [(encode_group_key(GroupKey(group.group_id)), value)],
            self._clock.milliseconds(),
        )

    # -- metrics --------------------------------------------------------------------------

    def group_stats(self, high_watermark: Callable[[str, int], int | None]) -> list[GroupStats]:
        """Members, state, generation and per-partition committed offset and lag."""
        stats = []
        for group in self._groups.values():
            offsets = []
            for (topic, partition), committed in sorted(group.offsets.items()):
                hw = high_watermark(topic, partition)
                lag = None if hw is None else max(hw - committed.offset, 0)
                offsets.append(GroupPartitionStats(topic, partition, committed.offset, lag))
            stats.append(
                GroupStats(
                    group=group.group_id,
                    state=group.state.value,
                    members=len(group.members),
                    generation=group.generation_id,
                    offsets=tuple(offsets),
                )
            )
        return stats
