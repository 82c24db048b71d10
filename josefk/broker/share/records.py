"""Kafka's ``__share_group_state`` records (KIP-932), encoded and decoded.

Every key starts with an int16 naming the record type, then a non-flexible body: the group id
(int16-length string), the topic id (16 bytes) and the partition (int32). Every value starts
with an int16 schema version (0) followed by a flexible struct: compact (unsigned-varint
length + 1) arrays, and a tagged-field section closing each struct. A null value is a
tombstone (the share partition's state was deleted).

Record types (key -> value)::

    0 ShareSnapshot  group, topic id, partition -> snapshot_epoch int32, state_epoch int32,
                                                   leader_epoch int32, start_offset int64,
                                                   create_timestamp int64,
                                                   write_timestamp int64, state_batches,
                                                   [tag 0] delivery_complete_count int32
    1 ShareUpdate    group, topic id, partition -> snapshot_epoch int32, leader_epoch int32,
                                                   start_offset int64 (-1: unchanged),
                                                   state_batches,
                                                   [tag 0] delivery_complete_count int32

    state_batches: [first_offset int64, last_offset int64, delivery_state int8,
                    delivery_count int16]   (delivery_state 0 available, 2 acknowledged,
                                             4 archived)

A snapshot is the whole state of one share partition; an update carries batches that replace
what the state held for their offsets, and a start offset that drops everything below it
(``ShareState.apply_update``). The field lists follow KIP-932 as Kafka 4.2 keeps them
(``delivery_complete_count`` is 4.2's KIP-1226 addition, a tagged field, written when known);
josefk writes and reads them but has not compared its bytes with a log written by Kafka.

Imports nothing from josefk.
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass, field
from typing import Final

SHARE_SNAPSHOT: Final = 0
SHARE_UPDATE: Final = 1
VALUE_VERSION: Final = 0
UNCHANGED_START_OFFSET: Final = -1

# Kafka's delivery states as kept in the topic (an acquired record is written AVAILABLE).
AVAILABLE: Final = 0
ACKNOWLEDGED: Final = 2
ARCHIVED: Final = 4

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")


class ShareRecordError(ValueError):
    """A ``__share_group_state`` record that no known layout reads."""


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """The share partition a record is about."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's share coordinator key, ``group:topicId:partition``, the topic id written
        as Kafka prints a Uuid (URL-safe base64 without padding): the FindCoordinator key
        type 2 (share) names a share partition so, and its hash picks the partition."""
        topic = base64.urlsafe_b64encode(self.topic_id.bytes).rstrip(b"=").decode()
        return f"{self.group_id}:{topic}:{self.partition}"


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


# -- the varints of flexible structs ----------------------------------------------------------


def _uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ShareRecordError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ShareRecordError("varint too long")


# -- keys ---------------------------------------------------------------------------------


def encode_key(record_type: int, key: ShareStateKey) -> bytes:
    group = key.group_id.encode()
    return (
        _I16.pack(record_type)
        + _I16.pack(len(group))
        + group
        + key.topic_id.bytes
        + _I32.pack(key.partition)
    )


def decode_key(raw: bytes | memoryview) -> tuple[int, ShareStateKey]:
    data = bytes(raw)
    try:
        (record_type,) = _I16.unpack_from(data, 0)
        (length,) = _I16.unpack_from(data, 2)
        if length < 0:
            raise ShareRecordError("null group id")
        pos = 4 + length
        group = data[4:pos].decode()
        topic_id = uuid.UUID(bytes=data[pos : pos + 16])
        (partition,) = _I32.unpack_from(data, pos + 16)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise ShareRecordError(f"unreadable share state key: {exc}") from exc
    if record_type not in (SHARE_SNAPSHOT, SHARE_UPDATE) or pos + 20 != len(data):
        raise ShareRecordError(f"not a share state key (type {record_type})")
    return record_type, ShareStateKey(group, topic_id, partition)


# -- values -------------------------------------------------------------------------------


def _batches(out: bytearray, batches: tuple[StateBatch, ...]) -> None:
    _uvarint(out, len(batches) + 1)
    for b in batches:
        out += _BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        out.append(0)  # the batch's (empty) tagged fields


def _tags(out: bytearray, delivery_complete_count: int) -> None:
    if delivery_complete_count < 0:
        out.append(0)
        return
    out.append(1)  # one tagged field: tag 0, an int32
    out.append(0)
    out.append(4)
    out += _I32.pack(delivery_complete_count)


def encode_snapshot(value: ShareSnapshotValue) -> bytes:
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _I32.pack(value.snapshot_epoch)
    out += _I32.pack(value.state_epoch)
    out += _I32.pack(value.leader_epoch)
    out += _I64.pack(value.start_offset)
    out += _I64.pack(value.create_timestamp)
    out += _I64.pack(value.write_timestamp)
    _batches(out, value.state_batches)
    _tags(out, value.delivery_complete_count)
    return bytes(out)


def encode_update(value: ShareUpdateValue) -> bytes:
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _I32.pack(value.snapshot_epoch)
    out += _I32.pack(value.leader_epoch)
    out += _I64.pack(value.start_offset)
    _batches(out, value.state_batches)
    _tags(out, value.delivery_complete_count)
    return bytes(out)


def _read_batches(data: bytes, pos: int) -> tuple[tuple[StateBatch, ...], int]:
    count, pos = _read_uvarint(data, pos)
    batches = []
    for _ in range(max(count - 1, 0)):
        first, last, state, delivered = _BATCH.unpack_from(data, pos)
        pos = _skip_tags(data, pos + _BATCH.size)[1]
        batches.append(StateBatch(first, last, state, delivered))
    return tuple(batches), pos


def _skip_tags(data: bytes, pos: int) -> tuple[int, int]:
    """Read a tagged-field section; (delivery_complete_count or -1, position after)."""
    count, pos = _read_uvarint(data, pos)
    complete = -1
    for _ in range(count):
        tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        if tag == 0 and size == 4:
            (complete,) = _I32.unpack_from(data, pos)
        pos += size
    return complete, pos


def _version(data: bytes) -> None:
    (version,) = _I16.unpack_from(data, 0)
    if version != VALUE_VERSION:
        raise ShareRecordError(f"unknown share state value version {version}")


def decode_snapshot(raw: bytes | memoryview) -> ShareSnapshotValue:
    data = bytes(raw)
    try:
        _version(data)
        snapshot_epoch, state_epoch, leader_epoch = struct.unpack_from(">iii", data, 2)
        start, created, written = struct.unpack_from(">qqq", data, 14)
        batches, pos = _read_batches(data, 38)
        complete, _ = _skip_tags(data, pos)
    except struct.error as exc:
        raise ShareRecordError(f"unreadable share snapshot: {exc}") from exc
    return ShareSnapshotValue(
        snapshot_epoch, state_epoch, leader_epoch, start, created, written, batches, complete
    )


def decode_update(raw: bytes | memoryview) -> ShareUpdateValue:
    data = bytes(raw)
    try:
        _version(data)
        snapshot_epoch, leader_epoch = struct.unpack_from(">ii", data, 2)
        (start,) = _I64.unpack_from(data, 10)
        batches, pos = _read_batches(data, 18)
        complete, _ = _skip_tags(data, pos)
    except struct.error as exc:
        raise ShareRecordError(f"unreadable share update: {exc}") from exc
    return ShareUpdateValue(snapshot_epoch, leader_epoch, start, batches, complete)


# -- the state a log replays into ------------------------------------------------------------


@dataclass(slots=True)
class ShareState:
    """One share partition's durable state, as the share coordinator keeps it."""

    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = 0
    snapshot_epoch: int = 0
    batches: list[StateBatch] = field(default_factory=list)
    create_timestamp: int = 0
    # ShareUpdate records since the last ShareSnapshot (a snapshot is due past a limit).
    updates_since_snapshot: int = 0

    @classmethod
    def from_snapshot(cls, value: ShareSnapshotValue) -> ShareState:
        return cls(
            state_epoch=value.state_epoch,
            leader_epoch=value.leader_epoch,
            start_offset=value.start_offset,
            snapshot_epoch=value.snapshot_epoch,
            batches=list(value.state_batches),
            create_timestamp=value.create_timestamp,
        )

    def lag(self, high_watermark: int) -> int:
        """Records up to ``high_watermark`` not yet done with (KIP-1226's lag, as a share
        partition made from this state would count it): from the start offset on, less those
        acknowledged or archived in the kept batches."""
        settled = sum(
            min(b.last_offset, high_watermark - 1) - max(b.first_offset, self.start_offset) + 1
            for b in self.batches
            if b.delivery_state in (ACKNOWLEDGED, ARCHIVED)
            and b.last_offset >= self.start_offset
            and b.first_offset < high_watermark
        )
        return max(high_watermark - self.start_offset - settled, 0)

    def apply_update(self, value: ShareUpdateValue) -> None:
        """Merge an update: a later leader epoch, a start offset that only goes forward
        (-1: unchanged), and its batches overlaid on what is kept for their offsets."""
        self.leader_epoch = max(self.leader_epoch, value.leader_epoch)
        if value.start_offset != UNCHANGED_START_OFFSET:
            self.start_offset = max(self.start_offset, value.start_offset)
        self.batches = merge_batches(self.batches, value.state_batches, self.start_offset)
        self.updates_since_snapshot += 1

    def snapshot(self, snapshot_epoch: int, now_ms: int) -> ShareSnapshotValue:
        return ShareSnapshotValue(
            snapshot_epoch=snapshot_epoch,
            state_epoch=self.state_epoch,
            leader_epoch=self.leader_epoch,
            start_offset=self.start_offset,
            create_timestamp=self.create_timestamp or now_ms,
            write_timestamp=now_ms,
            state_batches=tuple(self.batches),
        )


def merge_batches(
    kept: list[StateBatch], updated: tuple[StateBatch, ...] | list[StateBatch], start: int
) -> list[StateBatch]:
    """``kept`` with ``updated`` laid over it (an updated batch wins for its offsets), cut
    below ``start``; sorted by first offset, never overlapping."""
    pieces: list[StateBatch] = []
    for b in kept:
        low = b.first_offset
        for u in sorted(updated, key=lambda x: x.first_offset):
            if u.last_offset < low or u.first_offset > b.last_offset:
                continue
            if u.first_offset > low:
                pieces.append(
                    StateBatch(low, u.first_offset - 1, b.delivery_state, b.delivery_count)
                )
            low = max(low, u.last_offset + 1)
        if low <= b.last_offset:
            pieces.append(StateBatch(low, b.last_offset, b.delivery_state, b.delivery_count))
    pieces.extend(updated)
    out = []
    for b in sorted(pieces, key=lambda x: x.first_offset):
        if b.last_offset < start:
            continue
        if b.first_offset < start:
            b = StateBatch(start, b.last_offset, b.delivery_state, b.delivery_count)
        out.append(b)
    return out
