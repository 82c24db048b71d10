"""The group coordinator: one object owning every group of this broker and their offsets.

Owns ``GroupCoordinator``, the facade the handlers call. It is composed as Kafka's group
coordinator shard is: the state it shares with its managers (``shard.GroupShard``), the
membership of classic groups (``classic.ClassicGroupManager``: JoinGroup, SyncGroup,
Heartbeat, LeaveGroup), the offsets half (``offsets.OffsetManager``: commit, fetch, delete,
expiry, transactional offsets) and the load of ``__consumer_offsets`` (``loader``). The
coordinator routes each call to the manager of the group's type, asks that manager whether a
member may commit, and keeps what concerns every group: ownership of the offsets topic's
partitions, load and unload, describe, list, delete, metrics.

The single node coordinates every group. In a cluster a broker coordinates the groups of the
``__consumer_offsets`` partitions it leads (Kafka's ``abs(hashCode) % partitions``), loading
them when it becomes leader (``load_partition``) and dropping them when it stops
(``unload_partition``); for any other group every API answers NOT_COORDINATOR.

Replication: appends the offsets topic's in-sync replicas do not all hold yet come back
through ``appends_settled`` once the handler's wait is over; each goes to the manager whose
change it holds (a commit to the offsets half, a leader's assignment to the classic half).

Concurrency: every method runs on the event loop thread and none awaits halfway through a
change; JoinGroup and SyncGroup return futures that later transitions complete.

Imports the group package, the scheduler and clock of josefk.util, josefk.protocol.errors
(the codes only) and josefk.metrics value types;
must not import handlers, the codec or the transaction coordinator (markers come in through
``complete_txn``, which the broker wires to the replica manager's marker listeners).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from josefk.broker.group.classic import ClassicGroupManager, InFlightSync, JoinRequest
from josefk.broker.group.consumer import (
    ConsumerGroupManager,
    HeartbeatRequest,
    HeartbeatResult,
    TopicsView,
    describe_assignment,
)
from josefk.broker.group.consumer_group import ConsumerGroup, ConsumerGroupState
from josefk.broker.group.group import GroupMetadata, GroupState, JoinResult, SyncResult
from josefk.broker.group.group_configs import GroupConfigs
from josefk.broker.group.group_offsets import CommittedOffset
from josefk.broker.group.loader import read_groups
from josefk.broker.group.migration import MigrationManager
from josefk.broker.group.offsets import InFlightCommit, OffsetCommitEntry, OffsetManager
from josefk.broker.group.shard import (
    DEFAULT_OFFSET_METADATA_MAX_BYTES,
    UNKNOWN_MEMBER_ID,
    GroupConfig,
    GroupShard,
    ShardPart,
)
from josefk.broker.group.share import (
    ShareGroup,
    ShareGroupManager,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
)
from josefk.broker.group.store import OffsetsStore, StoreAppendError
from josefk.metrics.collectors import GroupPartitionStats, GroupStats
from josefk.protocol.errors import ErrorCode
from josefk.util.clock import Clock
from josefk.util.scheduler import Scheduler

if TYPE_CHECKING:
    from josefk.broker.replica_manager import AppendOutcome
    from josefk.metrics.probes import GroupProbe

__all__ = [
    "DEFAULT_OFFSET_METADATA_MAX_BYTES",
    "UNKNOWN_MEMBER_ID",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupListing",
    "JoinRequest",
    "MemberDescription",
    "OffsetCommitEntry",
]

logger = logging.getLogger(__name__)


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
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    # (topic id, topic name, partitions)
    assignment: list[tuple[uuid.UUID, str, list[int]]]
    target_assignment: list[tuple[uuid.UUID, str, list[int]]]
    # A classic member of the group (online migration, ``migration.py``).
    uses_classic_protocol: bool = False


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ConsumerMemberDescription, ...]


class GroupCoordinator(ShardPart):
    """Every group of this broker, with their offsets. Event loop thread only."""

    def __init__(
        self,
        config: GroupConfig,
        store: OffsetsStore,
        *,
        scheduler: Scheduler,
        clock: Clock,
        probe: GroupProbe | None = None,
        new_member_suffix: Callable[[], str] = lambda: str(uuid.uuid4()),
        topics: TopicsView | None = None,
        group_configs: GroupConfigs | None = None,
    ) -> None:
        shard = GroupShard(config, store, scheduler, clock, probe)
        super().__init__(shard)
        self._classic = ClassicGroupManager(shard, new_member_suffix=new_member_suffix)
        self._consumer = ConsumerGroupManager(
            shard, topics, new_member_id=_new_member_id, group_configs=group_configs
        )
        self._migration = MigrationManager(shard, self._classic, self._consumer)
        # Per-group configs (GROUP config resources); None where they are not stored.
        self.group_configs = group_configs
        self._offsets = OffsetManager(shard)
        # Share groups (KIP-932) are kept apart from the groups with offsets: they commit
        # none; their membership records are in __consumer_offsets (group/share.py).
        self.share_groups: dict[str, ShareGroup] = {}
        self.share = ShareGroupManager(
            shard,
            self.share_groups,
            topics,
            session_timeout_ms=config.share_session_timeout_ms,
            heartbeat_interval_ms=config.share_heartbeat_interval_ms,
            max_size=config.share_max_size,
            group_configs=group_configs,
        )
        self._retention_task: Any = None

    # -- lifecycle ------------------------------------------------------------------------

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
            if self._groups.get(in_flight.group.group_id) is not in_flight.group:
                continue
            if isinstance(in_flight, InFlightSync):
                self._classic.settle_sync(in_flight, outcome.error)
            elif isinstance(in_flight, InFlightCommit):
                self._offsets.settle_commit(in_flight, outcome.error)

    def coordinate_by_leadership(self) -> None:
        """Cluster mode: coordinate only the groups of the partitions this broker leads."""
        self._shard.owned = set()

    def load_partition(self, partition: int) -> None:
        """This broker became leader of ``partition``: its groups are now coordinated here,
        rebuilt from the partition's log (which holds every record the old leader committed)."""
        owned = self._shard.owned
        if owned is None or partition in owned:
            return
        owned.add(partition)
        self.load([partition])

    def unload_partition(self, partition: int) -> None:
        """This broker no longer leads ``partition``: its groups move to the new leader.
        Parked joins and syncs are answered NOT_COORDINATOR so their clients move too."""
        owned = self._shard.owned
        if owned is None or partition not in owned:
            return
        owned.discard(partition)
        for group in [
            g for g in self._groups.values() if self.partition_for(g.group_id) == partition
        ]:
            self._release(group)
            del self._groups[group.group_id]
            if self._probe is not None:
                self._probe.remove_group(group.group_id)
        self.share.unload(partition)
        self._report_pending()
        logger.info("unloaded the groups of %s-%d", "__consumer_offsets", partition)

    def load(self, partitions: Iterable[int] | None = None) -> None:
        """Rebuild the groups of ``partitions`` (all by default) from the offsets topic
        (``loader.read_groups``: the last record of a key wins, a tombstone deletes it,
        transactions are replayed as Kafka's loader does). Groups with members come back
        Stable and their members must heartbeat within a session timeout, as after a
        coordinator move in Kafka."""
        if partitions is None:
            partitions = range(self._store.partition_count)
        now = self._clock.milliseconds()
        loaded = read_groups(self._store, partitions)
        for group_id, found in loaded.items():
            if found.share is not None:
                self.share.restore(group_id, found.share)
                continue
            if found.consumer is not None:
                consumer = self._consumer.restore(group_id, found.consumer)
                consumer.offsets = found.offsets
                consumer.pending_txn_offsets = found.pending
                for producer_id in found.pending:
                    self._txn_groups.setdefault(producer_id, set()).add(group_id)
                continue
            group = GroupMetadata(group_id, now_ms=now)
            group.offsets = found.offsets
            group.pending_txn_offsets = found.pending
            for producer_id in found.pending:
                self._txn_groups.setdefault(producer_id, set()).add(group_id)
            if found.classic is not None:
                self._classic.restore(group, found.classic)
            self._groups[group_id] = group
        self._report_pending()
        logger.info("loaded %d groups from the offsets topic", len(loaded))

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
        self._shard.stopped = True
        if self._retention_task is not None:
            self._retention_task.cancel()
        for group in self._groups.values():
            self._release(group)
        self.share.release()

    def _release(self, group: GroupMetadata | ConsumerGroup) -> None:
        if isinstance(group, ConsumerGroup):
            self._consumer.release(group)
        else:
            self._classic.release(group, ErrorCode.NOT_COORDINATOR)

    # -- reads ----------------------------------------------------------------------------

    def group(self, group_id: str) -> GroupMetadata | None:
        """The classic group ``group_id``."""
        return self._classic_group(group_id)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The KIP-848 consumer group ``group_id``."""
        return self._consumer_group(group_id)

    @property
    def groups(self) -> list[GroupMetadata | ConsumerGroup]:
        return list(self._groups.values())

    # -- consumer groups (KIP-848) --------------------------------------------------------

    def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat. An empty classic group becomes a consumer group on its
        first heartbeat (keeping its offsets) where ``group.consumer.migration.policy``
        allows an upgrade; one with members is upgraded online (``migration.py``)."""
        if error := self.ownership_error(request.group_id):
            return HeartbeatResult(error)
        if request.group_id in self.share_groups:
            return HeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Group {request.group_id} is not a consumer group.",
            )
        classic = self._classic_group(request.group_id)
        if (
            classic is not None
            and request.member_epoch == 0
            and classic.is_empty
            and not classic.has_pending_members
            and self.config.consumer_migration_policy in ("bidirectional", "upgrade")
        ):
            self._convert(classic, ConsumerGroup(classic.group_id))
        elif classic is not None and request.member_epoch == 0 and not classic.is_empty:
            error, message = self._migration.upgrade(classic)
            if error:
                return HeartbeatResult(error, message)
        return self._consumer.heartbeat(request)

    def _convert(
        self, old: GroupMetadata | ConsumerGroup, new: GroupMetadata | ConsumerGroup
    ) -> None:
        """Replace an empty group by one of the other type with the same offsets."""
        new.offsets = old.offsets
        new.pending_txn_offsets = old.pending_txn_offsets
        new.pending_offset_commits = old.pending_offset_commits
        self._release(old)
        try:
            self._store.append(
                self.partition_for(old.group_id),
                [(key, None) for key in old.group_record_keys()],
                self._clock.milliseconds(),
            )
        except StoreAppendError as exc:
            logger.warning("group %s: conversion not stored: %s", old.group_id, exc)
        self._groups[new.group_id] = new
        logger.info(
            "group %s: converted from a %s group to a %s group",
            new.group_id,
            _group_type(old),
            _group_type(new),
        )

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription | None:
        group = self._consumer_group(group_id)
        if group is None or group.is_dead:
            return None
        names = self._consumer.topic_names()
        return ConsumerGroupDescription(
            group_id=group_id,
            state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor_name,
            members=tuple(
                ConsumerMemberDescription(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=m.subscribed_topic_names,
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=describe_assignment(m.assigned, names),
                    target_assignment=describe_assignment(group.target.get(m.member_id, {}), names),
                    uses_classic_protocol=m.uses_classic_protocol,
                )
                for m in group.members.values()
            ),
        )

    # -- share groups (KIP-932) ----------------------------------------------------------------

    def share_group_heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        """ShareGroupHeartbeat; a group id a classic or consumer group holds is
        GROUP_ID_NOT_FOUND (not a share group), as Kafka answers."""
        if error := self.ownership_error(request.group_id):
            return ShareHeartbeatResult(error)
        other = self._groups.get(request.group_id)
        if other is not None and not other.is_dead:
            return ShareHeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a share group."
            )
        return self.share.heartbeat(request)

    def share_group(self, group_id: str) -> ShareGroup | None:
        return self.share_groups.get(group_id)

    def ensure_share_group(self, group_id: str) -> ShareGroup | None:
        """The share group, made empty when no group has the id (AlterShareGroupOffsets);
        None when a classic or consumer group holds it."""
        other = self._groups.get(group_id)
        if group_id not in self.share_groups and other is not None and not other.is_dead:
            return None
        return self.share.ensure_group(group_id)

    def is_consumer_group(self, group_id: str) -> bool:
        return self._consumer_group(group_id) is not None

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        """OffsetFetch v9+ from a consumer group member: the member must be known and fetch
        at its epoch (STALE_MEMBER_EPOCH); requests without them (the admin client's) pass."""
        group = self._consumer_group(group_id)
        if group is None:
            return ErrorCode.NONE
        return self._consumer.validate_offset_fetch(group, member_id, member_epoch)

    # -- classic membership -----------------------------------------------------------------

    def join_group(self, request: JoinRequest) -> asyncio.Future[JoinResult]:
        """JoinGroup. An empty consumer group becomes a classic group on a classic member's
        join where ``group.consumer.migration.policy`` allows a downgrade; a consumer group
        with members takes the member as a classic member (``migration.py``)."""
        if request.group_id in self.share_groups and not self.ownership_error(request.group_id):
            refused: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
            refused.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id))
            return refused
        consumer = self._consumer_group(request.group_id)
        if consumer is not None and not self.ownership_error(request.group_id):
            if consumer.is_empty and self.config.consumer_migration_policy in (
                "bidirectional",
                "downgrade",
            ):
                self._convert(
                    consumer, GroupMetadata(consumer.group_id, now_ms=self._clock.milliseconds())
                )
            elif not consumer.is_empty:
                joined: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
                joined.set_result(self._migration.join(consumer, request))
                return joined
            else:
                future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
                future.set_result(
                    JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
                )
                return future
        return self._classic.join_group(request)

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
        consumer = self._consumer_group(group_id)
        if consumer is not None and not self.ownership_error(group_id):
            synced: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
            synced.set_result(
                self._migration.sync(
                    consumer,
                    generation_id,
                    member_id,
                    group_instance_id,
                    protocol_type=protocol_type,
                    protocol_name=protocol_name,
                )
            )
            return synced
        return self._classic.sync_group(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            assignments,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
        )

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        consumer = self._consumer_group(group_id)
        if consumer is not None and not self.ownership_error(group_id):
            return self._migration.heartbeat(consumer, generation_id, member_id, group_instance_id)
        return self._classic.heartbeat(group_id, generation_id, member_id, group_instance_id)

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members given as (member id, instance id); the top-level error and one
        error per member."""
        consumer = self._consumer_group(group_id)
        if consumer is not None and not self.ownership_error(group_id):
            return self._migration.leave(consumer, members)
        return self._classic.leave_group(group_id, members)

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
        api_version: int | None = None,
    ) -> list[ErrorCode]:
        """Commit offsets for a group; one error per entry, in order. ``generation_id`` is
        the member epoch for a consumer group (OffsetCommit v9+)."""
        if not group_id:
            return [ErrorCode.INVALID_GROUP_ID] * len(entries)
        if error := self.ownership_error(group_id):
            return [error] * len(entries)
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A commit from a generation of a group this coordinator never had: v9+
                # says so (GROUP_ID_NOT_FOUND), older versions as before.
                if api_version is not None and api_version >= 9:
                    return [ErrorCode.GROUP_ID_NOT_FOUND] * len(entries)
                return [ErrorCode.ILLEGAL_GENERATION] * len(entries)
            # A "simple" consumer (no group management) commits to a new, empty group.
            group = GroupMetadata(group_id, now_ms=self._clock.milliseconds())
            self._groups[group_id] = group
        else:
            if isinstance(group, ConsumerGroup):
                error = self._consumer.validate_offset_commit(
                    group, generation_id, member_id, api_version=api_version
                )
            else:
                error = self._classic.validate_offset_commit(
                    group, generation_id, member_id, group_instance_id
                )
            if error:
                return [error] * len(entries)
        return self._offsets.store_offsets(group, entries, retention_ms)

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
        them pending until its marker (``complete_txn``); one error per entry, in order. The
        member is checked as its group type says; a group this coordinator does not know is
        created Empty."""
        if not group_id:
            return [ErrorCode.INVALID_GROUP_ID] * len(entries)
        if error := self.ownership_error(group_id):
            return [error] * len(entries)
        group = self._groups.get(group_id)
        known = group is not None
        if group is None:
            group = GroupMetadata(group_id, now_ms=self._clock.milliseconds())
        if isinstance(group, ConsumerGroup):
            error = self._consumer.validate_offset_commit(
                group, generation_id, member_id, api_version=None, transactional=True
            )
        else:
            error = self._classic.validate_txn_offset_commit(
                group, generation_id, member_id, group_instance_id
            )
        if error:
            return [error] * len(entries)
        return self._offsets.txn_store_offsets(
            group, producer_id, producer_epoch, entries, known=known
        )

    def complete_txn(self, partition: int, producer_id: int, *, committed: bool) -> int:
        """A COMMIT or ABORT marker of ``producer_id`` was written to ``partition`` of the
        offsets topic: see ``OffsetManager.complete_txn``."""
        return self._offsets.complete_txn(partition, producer_id, committed=committed)

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> list[tuple[str, int, CommittedOffset | None]]:
        return self._offsets.fetch_offsets(group_id, partitions)

    def is_unstable(self, group_id: str, topic: str, partition: int) -> bool:
        return self._offsets.is_unstable(group_id, topic, partition)

    def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """OffsetDelete: a top-level error and one per partition."""
        return self._offsets.delete_offsets(group_id, partitions)

    def remove_offsets_of_topic(self, topic: str) -> None:
        self._offsets.remove_offsets_of_topic(topic)

    def expire_offsets(self) -> int:
        """Apply ``offsets.retention.minutes``; the number of offsets expired."""
        return self._offsets.expire_offsets()

    # -- describe, list, delete -----------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription | None:
        """A classic group's description; None for any other group. Kafka's DescribeGroups
        describes classic groups only: a consumer group, also one that holds classic members
        during an online migration, and a share group are answered as a missing group is
        (Dead; GROUP_ID_NOT_FOUND from v6, ``describe_group_miss`` says why); their members
        are seen with ConsumerGroupDescribe / ShareGroupDescribe."""
        group = self._classic_group(group_id)
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

    def describe_group_miss(self, group_id: str) -> str:
        """The message of DescribeGroups' GROUP_ID_NOT_FOUND for a group it does not
        describe, Kafka's words: another type of group holds the id, or none does."""
        group = self._groups.get(group_id)
        if (group is not None and not group.is_dead) or group_id in self.share_groups:
            return f"Group {group_id} is not a classic group."
        return f"Group {group_id} not found."

    def list_groups(self) -> list[GroupListing]:
        return [
            GroupListing(g.group_id, "consumer", g.state.value, "consumer")
            if isinstance(g, ConsumerGroup)
            else GroupListing(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if not g.is_dead
        ] + [
            GroupListing(g.group_id, "share", g.state, "share") for g in self.share_groups.values()
        ]

    def delete_groups(self, group_ids: Sequence[str]) -> list[ErrorCode]:
        errors = []
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if not group_id:
                errors.append(ErrorCode.INVALID_GROUP_ID)
            elif error := self.ownership_error(group_id):
                errors.append(error)
            elif group_id in self.share_groups:
                errors.append(self.share.delete(group_id))
            elif group is None or group.is_dead:
                errors.append(ErrorCode.GROUP_ID_NOT_FOUND)
            elif not group.is_empty:
                errors.append(ErrorCode.NON_EMPTY_GROUP)
            else:
                try:
                    # Pending transactional offsets are deleted with the group, so that
                    # the transaction's commit does not resurrect it (as Kafka's
                    # removeAllOffsets drops them).
                    self._offsets.write_offset_tombstones(
                        group, group.offset_partitions(), with_group=True
                    )
                except StoreAppendError as exc:
                    errors.append(ErrorCode(exc.error))
                    continue
                group.mark_dead(self._clock.milliseconds())
                del self._groups[group_id]
                if self._probe is not None:
                    self._probe.remove_group(group_id)
                errors.append(ErrorCode.NONE)
        return errors

    # -- metrics --------------------------------------------------------------------------

    def group_stats(self, high_watermark: Callable[[str, int], int | None]) -> list[GroupStats]:
        """Members, state, generation and per-partition committed offset and lag; share groups
        with their group epoch as the generation (they commit no offsets)."""
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
                    generation=(
                        group.group_epoch
                        if isinstance(group, ConsumerGroup)
                        else group.generation_id
                    ),
                    offsets=tuple(offsets),
                    group_type=_group_type(group),
                )
            )
        for share_group in self.share_groups.values():
            stats.append(
                GroupStats(
                    group=share_group.group_id,
                    state=share_group.state,
                    members=len(share_group.members),
                    generation=share_group.group_epoch,
                    group_type="share",
                )
            )
        return stats


def _new_member_id() -> str:
    """A member id as Kafka makes one (a random Uuid in base64), for v0 joins."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _group_type(group: GroupMetadata | ConsumerGroup) -> str:
    return "consumer" if isinstance(group, ConsumerGroup) else "classic"


__all__ += ["ConsumerGroupDescription", "ConsumerGroupState", "ConsumerMemberDescription"]
