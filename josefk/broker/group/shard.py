"""The state one group coordinator owns, shared by the halves it is built from.

Kafka's group coordinator is one shard object composed of managers: the group metadata
manager (membership, one module per group type) beside the offset metadata manager
(commits). josefk keeps that shape: ``GroupShard`` holds what they share (the groups by id,
the offsets store, the clock and scheduler, which ``__consumer_offsets`` partitions are
coordinated here, the appends still waiting for the in-sync replicas) and ``ShardPart`` is
the base of each manager, giving it the shard's objects under the names the coordinator used
before it was split. One ``GroupCoordinator`` creates one shard; nothing else does.

Owns ``GroupConfig`` (the broker settings the coordinator reads) too.

Concurrency: event loop thread only, like the coordinator.

Imports the group package's data modules, the store, josefk.storage's clock and scheduler and
josefk.protocol.errors (codes only); must not import handlers, the codec or the managers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from josefk.broker.group.consumer_group import ConsumerGroup
from josefk.broker.group.group import GroupMetadata
from josefk.broker.group.offsets_schema import coordinator_partition
from josefk.broker.group.store import OffsetsStore
from josefk.protocol.errors import ErrorCode
from josefk.util.clock import Clock
from josefk.util.scheduler import Scheduler

if TYPE_CHECKING:
    from josefk.config.broker import BrokerConfig
    from josefk.metrics.probes import GroupProbe

UNKNOWN_MEMBER_ID: Final = ""
DEFAULT_OFFSET_METADATA_MAX_BYTES: Final = 4096


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
    # KIP-848's consumer groups (Kafka's group.consumer.* settings and their defaults).
    consumer_heartbeat_interval_ms: int = 5000
    consumer_min_heartbeat_interval_ms: int = 5000
    consumer_max_heartbeat_interval_ms: int = 15000
    consumer_session_timeout_ms: int = 45000
    consumer_min_session_timeout_ms: int = 45000
    consumer_max_session_timeout_ms: int = 60000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_migration_policy: str = "bidirectional"
    # KIP-932's share groups (Kafka's group.share.* settings and their defaults).
    share_heartbeat_interval_ms: int = 5000
    share_session_timeout_ms: int = 45000
    share_max_size: int = 200
    share_record_lock_duration_ms: int = 30000
    share_min_record_lock_duration_ms: int = 15000
    share_max_record_lock_duration_ms: int = 60000
    share_delivery_count_limit: int = 5
    share_partition_max_record_locks: int = 2000

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupConfig:
        assignors = getattr(config, "group_consumer_assignors", None)
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
            consumer_heartbeat_interval_ms=int(
                getattr(config, "group_consumer_heartbeat_interval_ms", 5000)
            ),
            consumer_min_heartbeat_interval_ms=int(
                getattr(config, "group_consumer_min_heartbeat_interval_ms", 5000)
            ),
            consumer_max_heartbeat_interval_ms=int(
                getattr(config, "group_consumer_max_heartbeat_interval_ms", 15000)
            ),
            consumer_session_timeout_ms=int(
                getattr(config, "group_consumer_session_timeout_ms", 45000)
            ),
            consumer_min_session_timeout_ms=int(
                getattr(config, "group_consumer_min_session_timeout_ms", 45000)
            ),
            consumer_max_session_timeout_ms=int(
                getattr(config, "group_consumer_max_session_timeout_ms", 60000)
            ),
            consumer_max_size=int(getattr(config, "group_consumer_max_size", 2**31 - 1)),
            consumer_assignors=_assignor_names(assignors),
            consumer_migration_policy=str(
                getattr(config, "group_consumer_migration_policy", "bidirectional")
            ).lower(),
            share_heartbeat_interval_ms=int(
                getattr(config, "group_share_heartbeat_interval_ms", 5000)
            ),
            share_session_timeout_ms=int(getattr(config, "group_share_session_timeout_ms", 45000)),
            share_max_size=int(getattr(config, "group_share_max_size", 200)),
            share_record_lock_duration_ms=int(
                getattr(config, "group_share_record_lock_duration_ms", 30000)
            ),
            share_min_record_lock_duration_ms=int(
                getattr(config, "group_share_min_record_lock_duration_ms", 15000)
            ),
            share_max_record_lock_duration_ms=int(
                getattr(config, "group_share_max_record_lock_duration_ms", 60000)
            ),
            share_delivery_count_limit=int(getattr(config, "group_share_delivery_count_limit", 5)),
            share_partition_max_record_locks=int(
                getattr(config, "group_share_partition_max_record_locks", 2000)
            ),
        )


def _assignor_names(value: object) -> tuple[str, ...]:
    """``group.consumer.assignors``: a list, or a comma-separated string. Kafka accepts class
    names too; the last dotted part, lower-cased and without ``Assignor``, names ours
    (``org.apache.kafka.coordinator.group.assignor.RangeAssignor`` is ``range``)."""
    if value is None:
        return ("uniform", "range")
    items = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    names = []
    for item in items:
        name = str(item).strip().rsplit(".", 1)[-1]
        if name.endswith("Assignor"):
            name = name[: -len("Assignor")]
        if name:
            names.append(name.lower())
    return tuple(names) or ("uniform", "range")


@dataclass(slots=True)
class GroupShard:
    """What every manager of one coordinator shares. Event loop thread only."""

    config: GroupConfig
    store: OffsetsStore
    scheduler: Scheduler
    clock: Clock
    probe: GroupProbe | None = None
    # Every group of this coordinator, classic or consumer, by group id.
    groups: dict[str, GroupMetadata | ConsumerGroup] = field(default_factory=dict)
    # The offsets topic partitions whose groups this broker coordinates; None: all of them
    # (the single node). In a cluster, those it leads (load_partition/unload_partition).
    owned: set[int] | None = None
    stopped: bool = False
    # Producer id -> groups that may hold its pending transactional offsets, so that a
    # marker finds them without a walk over every group (an entry may outlive the offsets;
    # it is checked and dropped when the marker comes).
    txn_groups: dict[int, set[str]] = field(default_factory=dict)
    # id(outcome) of an append not yet replicated -> what it holds (a commit, a classic
    # group's assignment); the record keeps the outcome alive, so the id is not reused
    # while it is here.
    in_flight: dict[int, Any] = field(default_factory=dict)


class ShardPart:
    """Base of the coordinator and its managers: the shard's objects by their short names."""

    def __init__(self, shard: GroupShard) -> None:
        self._shard = shard
        self.config = shard.config
        self._store = shard.store
        self._scheduler = shard.scheduler
        self._clock = shard.clock
        self._groups = shard.groups
        self._txn_groups = shard.txn_groups
        self._in_flight = shard.in_flight

    @property
    def _probe(self) -> GroupProbe | None:
        return self._shard.probe

    @_probe.setter
    def _probe(self, probe: GroupProbe | None) -> None:
        self._shard.probe = probe

    @property
    def _stopped(self) -> bool:
        return self._shard.stopped

    @property
    def _owned(self) -> set[int] | None:
        return self._shard.owned

    def _classic_group(self, group_id: str) -> GroupMetadata | None:
        """The classic group ``group_id``, None when there is none (or it is a consumer
        group: the coordinator routes those before a classic API gets here)."""
        group = self._groups.get(group_id)
        return group if isinstance(group, GroupMetadata) else None

    def _consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self._groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def partition_for(self, group_id: str) -> int:
        return coordinator_partition(group_id, self._store.partition_count)

    def ownership_error(self, group_id: str) -> ErrorCode:
        """NOT_COORDINATOR when another broker coordinates ``group_id`` (or this one stops):
        the client then asks FindCoordinator again."""
        if self._shard.stopped:
            return ErrorCode.NOT_COORDINATOR
        owned = self._shard.owned
        if owned is not None and self.partition_for(group_id) not in owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

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
