"""Kafka's ``__consumer_offsets`` records of KIP-848 consumer groups, encoded and decoded.

Every key starts with an int16 that names the record type (the key's "version", as for the
classic records: 0/1 offset commits, 2 a classic group); the rest of a key is non-flexible
(int16-length strings). Every value starts with an int16 schema version (0 here) followed by
a flexible struct: compact (unsigned-varint length + 1) strings and arrays, and an empty
tagged-field section at the end of each struct. A null value is a tombstone.

Record types (key fields -> value fields)::

    3 ConsumerGroupMetadata            group           -> epoch int32
    4 ConsumerGroupPartitionMetadata   group           -> (read and ignored: Kafka 4 drops it)
    5 ConsumerGroupMemberMetadata      group, member   -> instance_id string?, rack_id string?,
                                                          client_id, client_host,
                                                          subscribed_topic_names []string,
                                                          subscribed_topic_regex string?,
                                                          rebalance_timeout_ms int32,
                                                          server_assignor string?,
                                                          tag 0: classic_member_metadata
                                                          {session_timeout_ms int32,
                                                           supported_protocols
                                                           [name string, metadata bytes]}?
    6 ConsumerGroupTargetAssignmentMetadata group          -> assignment_epoch int32
    7 ConsumerGroupTargetAssignmentMember  group, member   -> topic_partitions
                                                          [topic_id uuid, partitions []int32]
    8 ConsumerGroupCurrentMemberAssignment group, member   -> member_epoch int32,
                                                          previous_member_epoch int32,
                                                          state int8, assigned_partitions,
                                                          partitions_pending_revocation

The field lists follow KIP-848 as Kafka 4 stores it; josefk writes and reads them but has not
compared its bytes with a log written by Kafka.

Imports nothing from josefk.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

CONSUMER_GROUP_METADATA: Final = 3
CONSUMER_GROUP_PARTITION_METADATA: Final = 4
CONSUMER_GROUP_MEMBER_METADATA: Final = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: Final = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: Final = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: Final = 8
CONSUMER_RECORD_TYPES: Final = frozenset(range(3, 9))
_MEMBER_KEYED: Final = frozenset(
    {
        CONSUMER_GROUP_MEMBER_METADATA,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    }
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I8 = struct.Struct(">b")

TopicPartitions = Mapping[uuid.UUID, frozenset[int]]


class ConsumerRecordError(ValueError):
    """A consumer group record that no known layout reads."""


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    record_type: int
    group: str
    member: str | None = None


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # A member that uses the classic protocol in a consumer group (online migration): its
    # JoinGroup session timeout and protocols; None for a consumer-protocol member.
    classic_session_timeout_ms: int | None = None
    classic_protocols: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: dict[uuid.UUID, frozenset[int]]
    pending_revocation: dict[uuid.UUID, frozenset[int]]


# -- keys ---------------------------------------------------------------------------------


def _string16(out: bytearray, value: str) -> None:
    data = value.encode()
    out += _I16.pack(len(data))
    out += data


def encode_group_key(record_type: int, group: str, member: str | None) -> bytes:
    """A KIP-848 or KIP-932 group record's key: the int16 record type, the group id and, when
    ``member`` is given, the member id, as int16-length strings."""
    out = bytearray(_I16.pack(record_type))
    _string16(out, group)
    if member is not None:
        _string16(out, member)
    return bytes(out)


def decode_group_key(
    raw: bytes | memoryview, record_types: Collection[int], member_keyed: Collection[int], kind: str
) -> tuple[int, str, str | None]:
    """(record type, group, member) of a key ``encode_group_key`` wrote: one of
    ``record_types``, with a member id when its type is one of ``member_keyed``. ``kind``
    names the group type in the errors."""
    data = bytes(raw)
    try:
        (record_type,) = _I16.unpack_from(data, 0)
        (length,) = _I16.unpack_from(data, 2)
        group = data[4 : 4 + length].decode()
        pos = 4 + length
        member = None
        if record_type in member_keyed:
            (length,) = _I16.unpack_from(data, pos)
            member = data[pos + 2 : pos + 2 + length].decode()
            pos += 2 + length
    except (struct.error, UnicodeDecodeError) as exc:
        raise ConsumerRecordError(f"unreadable {kind} group key: {exc}") from exc
    if record_type not in record_types or pos != len(data):
        raise ConsumerRecordError(f"not a {kind} group key (type {record_type})")
    return record_type, group, member


def encode_key(key: ConsumerKey) -> bytes:
    return encode_group_key(key.record_type, key.group, key.member)


def decode_key(raw: bytes | memoryview) -> ConsumerKey:
    return ConsumerKey(*decode_group_key(raw, CONSUMER_RECORD_TYPES, _MEMBER_KEYED, "consumer"))


def record_type(raw: bytes | memoryview) -> int:
    """The record type of a ``__consumer_offsets`` key (its leading int16)."""
    if len(raw) < 2:
        raise ConsumerRecordError("a key shorter than its type")
    return int(_I16.unpack_from(raw, 0)[0])


# -- flexible values ------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray(_I16.pack(0))

    def uvarint(self, value: int) -> None:
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)

    def int32(self, value: int) -> None:
        self.out += _I32.pack(value)

    def int64(self, value: int) -> None:
        self.out += _I64.pack(value)

    def int8(self, value: int) -> None:
        self.out += _I8.pack(value)

    def string(self, value: str | None) -> None:
        if value is None:
            self.uvarint(0)
            return
        data = value.encode()
        self.uvarint(len(data) + 1)
        self.out += data

    def topic_partitions(self, parts: TopicPartitions) -> None:
        self.uvarint(len(parts) + 1)
        for topic_id, partitions in sorted(parts.items()):
            self.out += topic_id.bytes
            self.uvarint(len(partitions) + 1)
            for p in sorted(partitions):
                self.int32(p)
            self.uvarint(0)  # the topic's tagged fields

    def bytes_(self, value: bytes) -> None:
        self.uvarint(len(value) + 1)
        self.out += value

    def done(self, tagged: dict[int, bytes] | None = None) -> bytes:
        """End the value with its tagged fields (tag -> the field's encoded bytes)."""
        tagged = tagged or {}
        self.uvarint(len(tagged))
        for tag, raw in sorted(tagged.items()):
            self.uvarint(tag)
            self.uvarint(len(raw))
            self.out += raw
        return bytes(self.out)


class _Reader:
    def __init__(self, raw: bytes | memoryview) -> None:
        self.data = bytes(raw)
        self.pos = 0
        version = self._unpack(_I16)
        if version != 0:
            raise ConsumerRecordError(f"unknown consumer group value version {version}")

    def _unpack(self, fmt: struct.Struct) -> int:
        try:
            (value,) = fmt.unpack_from(self.data, self.pos)
        except struct.error as exc:
            raise ConsumerRecordError("a consumer group value ends early") from exc
        self.pos += fmt.size
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise ConsumerRecordError("a consumer group value ends early")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def int32(self) -> int:
        return self._unpack(_I32)

    def int64(self) -> int:
        return self._unpack(_I64)

    def int8(self) -> int:
        return self._unpack(_I8)

    def string(self) -> str | None:
        length = self.uvarint()
        if length == 0:
            return None
        end = self.pos + length - 1
        if end > len(self.data):
            raise ConsumerRecordError("a consumer group value ends early")
        value = self.data[self.pos : end].decode()
        self.pos = end
        return value

    def tagged(self) -> dict[int, bytes]:
        """The tagged fields here, by tag (their raw bytes)."""
        found = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            found[tag] = self.data[self.pos : self.pos + size]
            self.pos += size
        return found

    def bytes_(self) -> bytes:
        length = self.uvarint()
        end = self.pos + max(length - 1, 0)
        if end > len(self.data):
            raise ConsumerRecordError("a consumer group value ends early")
        value = self.data[self.pos : end]
        self.pos = end
        return value

    def topic_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        found: dict[uuid.UUID, frozenset[int]] = {}
        for _ in range(max(self.uvarint() - 1, 0)):
            topic_id = uuid.UUID(bytes=self.data[self.pos : self.pos + 16])
            self.pos += 16
            found[topic_id] = frozenset(self.int32() for _ in range(max(self.uvarint() - 1, 0)))
            self.tagged()
        return found


# The flexible value codec, for the share group records (share_records) that share it.
ValueWriter = _Writer
ValueReader = _Reader


def encode_epoch(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue."""
    writer = _Writer()
    writer.int32(epoch)
    return writer.done()


def decode_epoch(raw: bytes | memoryview) -> int:
    reader = _Reader(raw)
    return reader.int32()


def encode_member_metadata(value: MemberMetadataValue) -> bytes:
    writer = _Writer()
    writer.string(value.instance_id)
    writer.string(value.rack_id)
    writer.string(value.client_id)
    writer.string(value.client_host)
    writer.uvarint(len(value.subscribed_topic_names) + 1)
    for name in value.subscribed_topic_names:
        writer.string(name)
    writer.string(value.subscribed_topic_regex)
    writer.int32(value.rebalance_timeout_ms)
    writer.string(value.server_assignor)
    if value.classic_session_timeout_ms is None:
        return writer.done()
    classic = _Writer()
    del classic.out[:]  # a nested struct has no version of its own
    classic.int32(value.classic_session_timeout_ms)
    classic.uvarint(len(value.classic_protocols) + 1)
    for name, metadata in value.classic_protocols:
        classic.string(name)
        classic.bytes_(metadata)
        classic.uvarint(0)
    classic.uvarint(0)
    return writer.done({0: bytes(classic.out)})


def decode_member_metadata(raw: bytes | memoryview) -> MemberMetadataValue:
    reader = _Reader(raw)
    instance_id = reader.string()
    rack_id = reader.string()
    client_id = reader.string() or ""
    client_host = reader.string() or ""
    names = tuple(reader.string() or "" for _ in range(max(reader.uvarint() - 1, 0)))
    regex = reader.string()
    rebalance_timeout_ms = reader.int32()
    assignor = reader.string()
    session_timeout_ms = None
    protocols: list[tuple[str, bytes]] = []
    classic = reader.tagged().get(0) if reader.pos < len(reader.data) else None
    if classic:
        nested = _Reader.__new__(_Reader)  # a nested struct has no version of its own
        nested.data = classic
        nested.pos = 0
        session_timeout_ms = nested.int32()
        for _ in range(max(nested.uvarint() - 1, 0)):
            name = nested.string() or ""
            protocols.append((name, nested.bytes_()))
            nested.tagged()
    return MemberMetadataValue(
        instance_id,
        rack_id,
        client_id,
        client_host,
        names,
        regex,
        rebalance_timeout_ms,
        assignor,
        session_timeout_ms,
        tuple(protocols),
    )


def encode_target_member(parts: TopicPartitions) -> bytes:
    writer = _Writer()
    writer.topic_partitions(parts)
    return writer.done()


def decode_target_member(raw: bytes | memoryview) -> dict[uuid.UUID, frozenset[int]]:
    return _Reader(raw).topic_partitions()


def encode_current_assignment(value: CurrentAssignmentValue) -> bytes:
    writer = _Writer()
    writer.int32(value.member_epoch)
    writer.int32(value.previous_member_epoch)
    writer.int8(value.state)
    writer.topic_partitions(value.assigned)
    writer.topic_partitions(value.pending_revocation)
    return writer.done()


def decode_current_assignment(raw: bytes | memoryview) -> CurrentAssignmentValue:
    reader = _Reader(raw)
    return CurrentAssignmentValue(
        member_epoch=reader.int32(),
        previous_member_epoch=reader.int32(),
        state=reader.int8(),
        assigned=reader.topic_partitions(),
        pending_revocation=reader.topic_partitions(),
    )
