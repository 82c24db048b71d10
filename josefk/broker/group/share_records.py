"""Kafka's ``__consumer_offsets`` records of KIP-932 share groups, encoded and decoded.

The layout is the consumer group records' (``consumer_records``): a key is an int16 record
type followed by non-flexible strings (int16 length); a value is an int16 schema version (0)
followed by a flexible struct (compact strings and arrays, an empty tagged-field section at the
end of each struct); a null value is a tombstone.

Record types as Kafka 4.1 writes them (key fields -> value fields, in field order)::

     9 ShareGroupPartitionMetadata          group          -> (Kafka 4.0 only; read and
                                                               ignored: 4.1 dropped it for
                                                               the metadata hash, KIP-1101)
    10 ShareGroupMemberMetadata             group, member  -> rack_id string?, client_id,
                                                               client_host,
                                                               subscribed_topic_names []string
    11 ShareGroupMetadata                   group          -> epoch int32, metadata_hash int64
    12 ShareGroupTargetAssignmentMetadata   group          -> assignment_epoch int32
    13 ShareGroupTargetAssignmentMember     group, member  -> topic_partitions
                                                               [topic_id uuid, partitions []int32]
    14 ShareGroupCurrentMemberAssignment    group, member  -> member_epoch int32,
                                                               previous_member_epoch int32,
                                                               state int8, assigned_partitions
                                                               [topic_id uuid, partitions []int32]
    15 ShareGroupStatePartitionMetadata     group          -> initializing_topics, initialized_topics
                                                               [topic_id uuid, topic_name string,
                                                                partitions []int32],
                                                               deleting_topics
                                                               [topic_id uuid, topic_name string]

ShareGroupTargetAssignmentMetadata and ShareGroupTargetAssignmentMember have the consumer
group's layouts (``consumer_records.encode_epoch`` and ``encode_target_member``).

The field lists follow Kafka 4.1's message specs as its record formatter's tests print them;
josefk has not compared its bytes with a log written by Kafka. josefk writes 0 as the
metadata hash (Kafka's hash of the subscribed topics, KIP-1101; 0 is what Kafka itself uses
for "no hash" and makes a Kafka coordinator recompute the assignment): josefk notices topic
changes by recomputing the assignment on each heartbeat.

Imports consumer_records' key and value codecs only.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from josefk.broker.group.consumer_records import (
    ValueReader,
    ValueWriter,
    decode_group_key,
    encode_group_key,
)

SHARE_GROUP_PARTITION_METADATA: Final = 9
SHARE_GROUP_MEMBER_METADATA: Final = 10
SHARE_GROUP_METADATA: Final = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: Final = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: Final = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: Final = 14
SHARE_GROUP_STATE_PARTITION_METADATA: Final = 15
SHARE_RECORD_TYPES: Final = frozenset(range(9, 16))
_MEMBER_KEYED: Final = frozenset(
    {
        SHARE_GROUP_MEMBER_METADATA,
        SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
        SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    }
)

__all__ = [
    "SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT",
    "SHARE_GROUP_MEMBER_METADATA",
    "SHARE_GROUP_METADATA",
    "SHARE_GROUP_PARTITION_METADATA",
    "SHARE_GROUP_STATE_PARTITION_METADATA",
    "SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER",
    "SHARE_GROUP_TARGET_ASSIGNMENT_METADATA",
    "SHARE_RECORD_TYPES",
    "ShareCurrentAssignment",
    "ShareGroupMetadataValue",
    "ShareKey",
    "ShareMemberMetadata",
    "StatePartitionMetadata",
    "decode_current_assignment",
    "decode_group_metadata",
    "decode_key",
    "decode_member_metadata",
    "decode_state_partition_metadata",
    "encode_current_assignment",
    "encode_group_metadata",
    "encode_key",
    "encode_member_metadata",
    "encode_state_partition_metadata",
]

# topic id -> (topic name, partitions)
TopicPartitionsInfo = Mapping[uuid.UUID, tuple[str, frozenset[int]]]


@dataclass(frozen=True, slots=True)
class ShareKey:
    record_type: int
    group: str
    member: str | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ShareMemberMetadata:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareCurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class StatePartitionMetadata:
    """Which share partitions of the group have state at the share coordinator."""

    initializing: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)


# -- keys ---------------------------------------------------------------------------------


def encode_key(key: ShareKey) -> bytes:
    member = (key.member or "") if key.record_type in _MEMBER_KEYED else None
    return encode_group_key(key.record_type, key.group, member)


def decode_key(raw: bytes | memoryview) -> ShareKey:
    return ShareKey(*decode_group_key(raw, SHARE_RECORD_TYPES, _MEMBER_KEYED, "share"))


# -- values -------------------------------------------------------------------------------


def encode_group_metadata(value: ShareGroupMetadataValue) -> bytes:
    writer = ValueWriter()
    writer.int32(value.epoch)
    writer.int64(value.metadata_hash)
    return writer.done()


def decode_group_metadata(raw: bytes | memoryview) -> ShareGroupMetadataValue:
    reader = ValueReader(raw)
    epoch = reader.int32()
    return ShareGroupMetadataValue(epoch, reader.int64())


def encode_member_metadata(value: ShareMemberMetadata) -> bytes:
    writer = ValueWriter()
    writer.string(value.rack_id)
    writer.string(value.client_id)
    writer.string(value.client_host)
    writer.uvarint(len(value.subscribed_topic_names) + 1)
    for name in value.subscribed_topic_names:
        writer.string(name)
    return writer.done()


def decode_member_metadata(raw: bytes | memoryview) -> ShareMemberMetadata:
    reader = ValueReader(raw)
    rack_id = reader.string()
    client_id = reader.string() or ""
    client_host = reader.string() or ""
    names = tuple(reader.string() or "" for _ in range(max(reader.uvarint() - 1, 0)))
    return ShareMemberMetadata(rack_id, client_id, client_host, names)


def encode_current_assignment(value: ShareCurrentAssignment) -> bytes:
    writer = ValueWriter()
    writer.int32(value.member_epoch)
    writer.int32(value.previous_member_epoch)
    writer.int8(value.state)
    writer.topic_partitions(value.assigned)
    return writer.done()


def decode_current_assignment(raw: bytes | memoryview) -> ShareCurrentAssignment:
    reader = ValueReader(raw)
    return ShareCurrentAssignment(
        member_epoch=reader.int32(),
        previous_member_epoch=reader.int32(),
        state=reader.int8(),
        assigned=reader.topic_partitions(),
    )


def _topic_partitions_info(writer: ValueWriter, topics: TopicPartitionsInfo) -> None:
    writer.uvarint(len(topics) + 1)
    for topic_id, (name, partitions) in sorted(topics.items()):
        writer.out += topic_id.bytes
        writer.string(name)
        writer.uvarint(len(partitions) + 1)
        for p in sorted(partitions):
            writer.int32(p)
        writer.uvarint(0)  # the struct's tagged fields


def _read_topic_partitions_info(
    reader: ValueReader,
) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
    found: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
    for _ in range(max(reader.uvarint() - 1, 0)):
        topic_id = uuid.UUID(bytes=reader.data[reader.pos : reader.pos + 16])
        reader.pos += 16
        name = reader.string() or ""
        partitions = frozenset(reader.int32() for _ in range(max(reader.uvarint() - 1, 0)))
        reader.tagged()
        found[topic_id] = (name, partitions)
    return found


def encode_state_partition_metadata(value: StatePartitionMetadata) -> bytes:
    writer = ValueWriter()
    _topic_partitions_info(writer, value.initializing)
    _topic_partitions_info(writer, value.initialized)
    writer.uvarint(len(value.deleting) + 1)
    for topic_id, name in sorted(value.deleting.items()):
        writer.out += topic_id.bytes
        writer.string(name)
        writer.uvarint(0)
    return writer.done()


def decode_state_partition_metadata(raw: bytes | memoryview) -> StatePartitionMetadata:
    reader = ValueReader(raw)
    initializing = _read_topic_partitions_info(reader)
    initialized = _read_topic_partitions_info(reader)
    deleting: dict[uuid.UUID, str] = {}
    for _ in range(max(reader.uvarint() - 1, 0)):
        topic_id = uuid.UUID(bytes=reader.data[reader.pos : reader.pos + 16])
        reader.pos += 16
        deleting[topic_id] = reader.string() or ""
        reader.tagged()
    return StatePartitionMetadata(initializing, initialized, deleting)
