"""The "consumer" protocol type's member metadata and assignment bytes (ConsumerProtocol).

Owns ``Subscription`` and ``Assignment`` and their byte format, the one every Kafka client
puts in JoinGroup's protocol metadata and SyncGroup's assignment so that consumers of
different clients can share a group:

* Subscription: int16 version; v0 topics ([int32 count] of int16-length strings) and
  user_data (int32-length bytes, -1 null); v1 adds owned_partitions ([topic, [int32]]);
  v2 adds generation_id (int32); v3 adds rack_id (nullable string).
* Assignment: int16 version; assigned partitions ([topic, [int32 partition]]) and user_data.

Encoding writes version 1 of the subscription (with the partitions the member owns) and
version 0 of the assignment (the same layout for every version). Decoding accepts any version
and ignores fields past those it knows, as Kafka's own parser does. Malformed bytes raise
ValueError. Imports only josefk.client.types; no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from josefk.client.types import TopicPartition

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 1


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: list[TopicPartition]
    user_data: bytes | None = None
    version: int = 0


def _put_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    data = value.encode()
    out += _I16.pack(len(data))
    out += data


def _put_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(value))
    out += value


def _put_partitions(out: bytearray, partitions: Sequence[TopicPartition]) -> None:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += _I32.pack(len(by_topic))
    for topic in sorted(by_topic):
        _put_string(out, topic)
        parts = sorted(by_topic[topic])
        out += _I32.pack(len(parts))
        for p in parts:
            out += _I32.pack(p)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = bytes(data)
        self.pos = 0

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("consumer protocol bytes end early")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise ValueError("invalid UTF-8 in consumer protocol bytes") from exc

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def count(self) -> int:
        n = self.i32()
        if n < 0:
            return 0
        if n > len(self.data) - self.pos:
            raise ValueError(f"array of {n} elements cannot fit")
        return n

    def partitions(self) -> list[TopicPartition]:
        out: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string() or ""
            for _ in range(self.count()):
                out.append(TopicPartition(topic, self.i32()))
        return out


def encode_subscription(sub: Subscription) -> bytes:
    out = bytearray(_I16.pack(sub.version))
    out += _I32.pack(len(sub.topics))
    for topic in sub.topics:
        _put_string(out, topic)
    _put_bytes(out, sub.user_data)
    if sub.version >= 1:
        _put_partitions(out, sub.owned_partitions)
    if sub.version >= 2:
        out += _I32.pack(sub.generation_id)
    if sub.version >= 3:
        _put_string(out, sub.rack_id)
    return bytes(out)


def decode_subscription(data: bytes | memoryview) -> Subscription:
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise ValueError(f"subscription version {version}")
    topics = [r.string() or "" for _ in range(r.count())]
    user_data = r.bytes_()
    owned: list[TopicPartition] = []
    generation_id = -1
    rack_id = None
    if version >= 1 and not r.at_end:
        owned = r.partitions()
    if version >= 2 and not r.at_end:
        generation_id = r.i32()
    if version >= 3 and not r.at_end:
        rack_id = r.string()
    return Subscription(topics, user_data, owned, generation_id, rack_id, version)


def encode_assignment(assignment: Assignment) -> bytes:
    out = bytearray(_I16.pack(assignment.version))
    _put_partitions(out, assignment.partitions)
    _put_bytes(out, assignment.user_data)
    return bytes(out)


def decode_assignment(data: bytes | memoryview) -> Assignment:
    """An empty byte string (what a member without partitions may get) is no partitions."""
    if len(data) == 0:
        return Assignment([])
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise ValueError(f"assignment version {version}")
    partitions = r.partitions()
    user_data = r.bytes_() if not r.at_end else None
    return Assignment(partitions, user_data, version)
