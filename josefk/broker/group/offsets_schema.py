"""The record formats of Kafka's ``__consumer_offsets`` topic, byte for byte.

Owns the encoders and decoders of the keys and values the group coordinator writes, so that
Kafka's own tools (kafka-dump-log's offsets decoder, kafka-consumer-groups reading a copied
log dir) understand a josefk offsets topic and josefk loads one written by Kafka.

Every key and value starts with an int16 schema version. Strings are int16-length UTF-8
(-1 for null), bytes int32-length. None of these versions is flexible.

Keys (the version says which kind of record it is)::

    OffsetCommitKey   v0, v1  group string, topic string, partition int32
    GroupMetadataKey  v2      group string

Values::

    OffsetCommitValue  v0  offset int64, metadata string, commit_timestamp int64
                       v1  offset int64, metadata string, commit_timestamp int64,
                           expire_timestamp int64
                       v2  offset int64, metadata string, commit_timestamp int64
                       v3  offset int64, leader_epoch int32, metadata string,
                           commit_timestamp int64

    GroupMetadataValue v0-v3  protocol_type string, generation int32,
                              protocol string (nullable), leader string (nullable),
                              current_state_timestamp int64 (v2+),
                              members [member_id string, group_instance_id string (nullable,
                              v3+), client_id string, client_host string,
                              rebalance_timeout int32 (v1+), session_timeout int32,
                              subscription bytes, assignment bytes]

Kafka writes OffsetCommitKey v1, GroupMetadataKey v2, OffsetCommitValue v3 (v1 when the
commit carried an explicit retention time, the only version with an expire timestamp) and
GroupMetadataValue v3; so does josefk. A null value is a tombstone.

Imports nothing from josefk.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

OFFSET_COMMIT_KEY_VERSION: Final = 1
GROUP_METADATA_KEY_VERSION: Final = 2
OFFSET_COMMIT_VALUE_VERSION: Final = 3
OFFSET_COMMIT_VALUE_EXPIRING_VERSION: Final = 1
GROUP_METADATA_VALUE_VERSION: Final = 3

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")


class OffsetsSchemaError(ValueError):
    """A key or value of ``__consumer_offsets`` that no known schema version reads."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    """The key of a committed offset: one group's position on one partition."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    """The key of a group's metadata record."""

    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """One member as stored in a GroupMetadataValue: the subscription is the member's
    metadata for the group's chosen protocol, the assignment what the leader gave it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberRecord, ...] = field(default_factory=tuple)


# -- writing --------------------------------------------------------------------------------


def _put_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise OffsetsSchemaError(f"string of {len(raw)} bytes does not fit an int16 length")
    out += _I16.pack(len(raw))
    out += raw


def _put_bytes(out: bytearray, value: bytes) -> None:
    out += _I32.pack(len(value))
    out += value


def encode_offset_key(key: OffsetKey, *, version: int = OFFSET_COMMIT_KEY_VERSION) -> bytes:
    if version not in (0, 1):
        raise OffsetsSchemaError(f"OffsetCommitKey has no version {version}")
    out = bytearray(_I16.pack(version))
    _put_string(out, key.group)
    _put_string(out, key.topic)
    out += _I32.pack(key.partition)
    return bytes(out)


def encode_group_key(key: GroupKey) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_KEY_VERSION))
    _put_string(out, key.group)
    return bytes(out)


def encode_offset_value(value: OffsetCommitValue, *, version: int | None = None) -> bytes:
    """Encode as Kafka chooses: v1 when an expire timestamp is set, v3 otherwise."""
    if version is None:
        version = (
            OFFSET_COMMIT_VALUE_VERSION
            if value.expire_timestamp is None
            else OFFSET_COMMIT_VALUE_EXPIRING_VERSION
        )
    if not 0 <= version <= 3:
        raise OffsetsSchemaError(f"OffsetCommitValue has no version {version}")
    out = bytearray(_I16.pack(version))
    out += _I64.pack(value.offset)
    if version == 3:
        out += _I32.pack(value.leader_epoch)
    _put_string(out, value.metadata)
    out += _I64.pack(value.commit_timestamp)
    if version == 1:
        expire = -1 if value.expire_timestamp is None else value.expire_timestamp
        out += _I64.pack(expire)
    return bytes(out)


def encode_group_value(
    value: GroupMetadataValue, *, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    if not 0 <= version <= 3:
        raise OffsetsSchemaError(f"GroupMetadataValue has no version {version}")
    out = bytearray(_I16.pack(version))
    _put_string(out, value.protocol_type)
    out += _I32.pack(value.generation)
    _put_string(out, value.protocol)
    _put_string(out, value.leader)
    if version >= 2:
        out += _I64.pack(value.current_state_timestamp)
    out += _I32.pack(len(value.members))
    for member in value.members:
        _put_string(out, member.member_id)
        if version >= 3:
            _put_string(out, member.group_instance_id)
        _put_string(out, member.client_id)
        _put_string(out, member.client_host)
        if version >= 1:
            out += _I32.pack(member.rebalance_timeout_ms)
        out += _I32.pack(member.session_timeout_ms)
        _put_bytes(out, member.subscription)
        _put_bytes(out, member.assignment)
    return bytes(out)


# -- reading --------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("_buffer", "_position")

    def __init__(self, buffer: bytes | memoryview) -> None:
        self._buffer = buffer
        self._position = 0

    def _take(self, unpacker: struct.Struct) -> int:
        end = self._position + unpacker.size
        if end > len(self._buffer):
            raise OffsetsSchemaError("record ends in the middle of a field")
        (value,) = unpacker.unpack_from(self._buffer, self._position)
        self._position = end
        return int(value)

    def int16(self) -> int:
        return self._take(_I16)

    def int32(self) -> int:
        return self._take(_I32)

    def int64(self) -> int:
        return self._take(_I64)

    def _raw(self, length: int) -> bytes:
        end = self._position + length
        if end > len(self._buffer):
            raise OffsetsSchemaError("record ends in the middle of a field")
        raw = bytes(self._buffer[self._position : end])
        self._position = end
        return raw

    def nullable_string(self) -> str | None:
        length = self.int16()
        if length < 0:
            return None
        try:
            return self._raw(length).decode()
        except UnicodeDecodeError as exc:
            raise OffsetsSchemaError(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise OffsetsSchemaError("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        length = self.int32()
        return b"" if length < 0 else self._raw(length)


def decode_key(raw: bytes | memoryview) -> OffsetKey | GroupKey:
    """Read a key; the version tells an offset key (0, 1) from a group key (2)."""
    reader = _Reader(raw)
    version = reader.int16()
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.int32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupKey(reader.string())
    raise OffsetsSchemaError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(raw: bytes | memoryview) -> OffsetCommitValue:
    reader = _Reader(raw)
    version = reader.int16()
    if not 0 <= version <= 3:
        raise OffsetsSchemaError(f"unknown OffsetCommitValue version {version}")
    offset = reader.int64()
    leader_epoch = reader.int32() if version == 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.int64()
    expire_timestamp = None
    if version == 1:
        expire = reader.int64()
        expire_timestamp = None if expire < 0 else expire
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def decode_group_value(raw: bytes | memoryview) -> GroupMetadataValue:
    reader = _Reader(raw)
    version = reader.int16()
    if not 0 <= version <= 3:
        raise OffsetsSchemaError(f"unknown GroupMetadataValue version {version}")
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    current_state_timestamp = reader.int64() if version >= 2 else -1
    count = reader.int32()
    members = []
    for _ in range(max(count, 0)):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        if version >= 1:
            rebalance_timeout = reader.int32()
            session_timeout = reader.int32()
        else:
            # v0 had no rebalance timeout; Kafka used the session timeout for both.
            session_timeout = reader.int32()
            rebalance_timeout = session_timeout
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                reader.bytes_(),
                reader.bytes_(),
            )
        )
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members)
    )


def coordinator_partition(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group, as Kafka computes it:
    ``Utils.abs(groupId.hashCode()) % partitions``.

    Java's String.hashCode runs over UTF-16 code units with int32 overflow, and Kafka's
    Utils.abs maps Integer.MIN_VALUE to 0 (where Math.abs would leave it negative).
    """
    h = 0
    raw = group_id.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    magnitude = 0 if h == -0x80000000 else abs(h)
    return magnitude % num_partitions
