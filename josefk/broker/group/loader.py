"""Loading ``__consumer_offsets``: the replay of a partition's log into the groups it holds.

Owns ``replay`` (a partition's last record per key, with Kafka's handling of transactional
commits) and ``read_groups`` (those records decoded per group: committed offsets, the
offsets of transactions still open, the classic group's record, a consumer group's
records, a share group's records). The coordinator builds its
groups from what this returns; this module builds no group and keeps no state.

Transactional offset commits are replayed as Kafka's loader does: kept per producer until
that producer's marker; a COMMIT applies each one unless the key's current record is further
on in the log, an ABORT drops them, and those of transactions still open come back pending. A
plain tombstone of an offset also drops the pending offsets of that partition (as
OffsetDelete and DeleteGroups do live). Unreadable records are logged and skipped.

Imports the group package's schema and store and the control record type of josefk.records;
must not import the coordinator or its managers.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from josefk.broker.group.consumer_records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    CONSUMER_RECORD_TYPES,
    ConsumerKey,
    ConsumerRecordError,
    CurrentAssignmentValue,
    MemberMetadataValue,
    decode_current_assignment,
    decode_epoch,
    decode_member_metadata,
    decode_target_member,
    encode_key,
    record_type,
)
from josefk.broker.group.consumer_records import decode_key as decode_consumer_key
from josefk.broker.group.group_offsets import CommittedOffset
from josefk.broker.group.offsets_schema import (
    GroupMetadataValue,
    OffsetKey,
    OffsetsSchemaError,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from josefk.broker.group.share_records import (
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_STATE_PARTITION_METADATA,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    SHARE_RECORD_TYPES,
    ShareCurrentAssignment,
    ShareKey,
    ShareMemberMetadata,
    StatePartitionMetadata,
    decode_group_metadata,
    decode_state_partition_metadata,
)
from josefk.broker.group.share_records import (
    decode_current_assignment as decode_share_current_assignment,
)
from josefk.broker.group.share_records import decode_key as decode_share_key
from josefk.broker.group.share_records import decode_member_metadata as decode_share_member
from josefk.broker.group.share_records import encode_key as encode_share_key
from josefk.broker.group.store import OffsetsStore
from josefk.records.record import ControlRecordType

logger = logging.getLogger(__name__)

# A record while replaying a partition: its batch's base offset and its value (None: a
# tombstone).
_Record = tuple[int, bytes | None]


def _committed(value_bytes: bytes, append_offset: int) -> CommittedOffset:
    v = decode_offset_value(value_bytes)
    return CommittedOffset(
        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp, append_offset
    )


@dataclass(slots=True)
class LoadedConsumerGroup:
    """The records of one KIP-848 consumer group (``consumer_records``)."""

    epoch: int | None = None
    assignment_epoch: int = 0
    members: dict[str, MemberMetadataValue] = field(default_factory=dict)
    targets: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    current: dict[str, CurrentAssignmentValue] = field(default_factory=dict)
    # The live value of each key, as read (the coordinator writes only what differs).
    written: dict[bytes, bytes] = field(default_factory=dict)

    def apply(self, key: ConsumerKey, value: bytes | None) -> None:
        kind, member = key.record_type, key.member or ""
        if value is None:
            self.written.pop(encode_key(key), None)
        else:
            self.written[encode_key(key)] = bytes(value)
        if kind == CONSUMER_GROUP_METADATA:
            self.epoch = None if value is None else decode_epoch(value)
        elif kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = 0 if value is None else decode_epoch(value)
        elif kind == CONSUMER_GROUP_MEMBER_METADATA:
            if value is None:
                self.members.pop(member, None)
            else:
                self.members[member] = decode_member_metadata(value)
        elif kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.targets.pop(member, None)
            else:
                self.targets[member] = decode_target_member(value)
        elif kind == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            if value is None:
                self.current.pop(member, None)
            else:
                self.current[member] = decode_current_assignment(value)


@dataclass(slots=True)
class LoadedShareGroup:
    """The records of one KIP-932 share group (``share_records``)."""

    epoch: int | None = None
    assignment_epoch: int = 0
    members: dict[str, ShareMemberMetadata] = field(default_factory=dict)
    targets: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    current: dict[str, ShareCurrentAssignment] = field(default_factory=dict)
    state_partitions: StatePartitionMetadata = field(default_factory=StatePartitionMetadata)
    # The live value of each key, as read (the coordinator writes only what differs).
    written: dict[bytes, bytes] = field(default_factory=dict)

    def apply(self, key: ShareKey, value: bytes | None) -> None:
        kind, member = key.record_type, key.member or ""
        if kind not in (
            SHARE_GROUP_METADATA,
            SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
            SHARE_GROUP_MEMBER_METADATA,
            SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
            SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
            SHARE_GROUP_STATE_PARTITION_METADATA,
        ):
            return  # Kafka 4.0's ShareGroupPartitionMetadata: 4.1 no longer has it
        if value is None:
            self.written.pop(encode_share_key(key), None)
        else:
            self.written[encode_share_key(key)] = bytes(value)
        if kind == SHARE_GROUP_METADATA:
            self.epoch = None if value is None else decode_group_metadata(value).epoch
        elif kind == SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = 0 if value is None else decode_epoch(value)
        elif kind == SHARE_GROUP_STATE_PARTITION_METADATA:
            self.state_partitions = (
                StatePartitionMetadata()
                if value is None
                else decode_state_partition_metadata(value)
            )
        elif kind == SHARE_GROUP_MEMBER_METADATA:
            if value is None:
                self.members.pop(member, None)
            else:
                self.members[member] = decode_share_member(value)
        elif kind == SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.targets.pop(member, None)
            else:
                self.targets[member] = decode_target_member(value)
        elif value is None:
            self.current.pop(member, None)
        else:
            self.current[member] = decode_share_current_assignment(value)


@dataclass(slots=True)
class LoadedGroup:
    """What the log holds of one group."""

    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    pending: dict[int, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    classic: GroupMetadataValue | None = None
    consumer: LoadedConsumerGroup | None = None
    share: LoadedShareGroup | None = None


def read_groups(store: OffsetsStore, partitions: Iterable[int]) -> dict[str, LoadedGroup]:
    """The groups of ``partitions`` as their logs leave them (a group whose records are all
    tombstoned is absent), by group id, sorted."""
    offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
    pending: dict[str, dict[int, dict[tuple[str, int], CommittedOffset]]] = {}
    values: dict[str, GroupMetadataValue | None] = {}
    consumer: dict[str, LoadedConsumerGroup] = {}
    share: dict[str, LoadedShareGroup] = {}
    for partition in partitions:
        latest, open_txns = replay(store, partition)
        for key_bytes, (append_offset, value_bytes) in latest.items():
            try:
                kind = record_type(key_bytes)
                if kind in CONSUMER_RECORD_TYPES:
                    ckey = decode_consumer_key(key_bytes)
                    consumer.setdefault(ckey.group, LoadedConsumerGroup()).apply(ckey, value_bytes)
                    continue
                if kind in SHARE_RECORD_TYPES:
                    skey = decode_share_key(key_bytes)
                    share.setdefault(skey.group, LoadedShareGroup()).apply(skey, value_bytes)
                    continue
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
            except (OffsetsSchemaError, ConsumerRecordError) as exc:
                logger.warning("skipping unreadable record in partition %d: %s", partition, exc)
        for producer_id, records in open_txns.items():
            for key_bytes, (append_offset, value_bytes) in records.items():
                try:
                    key = decode_key(key_bytes)
                    if not isinstance(key, OffsetKey) or value_bytes is None:
                        continue
                    committed = _committed(value_bytes, append_offset)
                except OffsetsSchemaError as exc:
                    logger.warning("skipping unreadable record in partition %d: %s", partition, exc)
                    continue
                by_producer = pending.setdefault(key.group, {})
                by_producer.setdefault(producer_id, {})[(key.topic, key.partition)] = committed
    found: dict[str, LoadedGroup] = {}
    for group_id in sorted(set(offsets) | set(values) | set(pending) | set(consumer) | set(share)):
        value = values.get(group_id)
        group_offsets = offsets.get(group_id, {})
        group_pending = pending.get(group_id, {})
        kip848 = consumer.get(group_id)
        if kip848 is not None and kip848.epoch is None:
            kip848 = None  # tombstoned: the group went (or became a classic group)
        kip932 = share.get(group_id)
        if kip932 is not None and kip932.epoch is None:
            kip932 = None  # tombstoned: the share group was deleted
        if (
            value is None
            and kip848 is None
            and kip932 is None
            and not group_offsets
            and not group_pending
        ):
            continue
        found[group_id] = LoadedGroup(group_offsets, group_pending, value, kip848, kip932)
    return found


def replay(
    store: OffsetsStore, partition: int
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
    for batch in store.read(partition):
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
