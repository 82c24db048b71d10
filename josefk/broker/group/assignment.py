"""The consumer protocol's subscription bytes, as far as the coordinator needs to read them.

Owns ``subscribed_topics``: the topics a member of a group with protocol type ``consumer``
subscribes to, read from the metadata it sent with JoinGroup (Kafka's
ConsumerProtocolSubscription: int16 version, an int32-counted array of int16-length topic
names, then user data, owned partitions, generation and rack in later versions, which the
coordinator does not need). OffsetDelete refuses to delete the offsets of a subscribed topic
and retention keeps them, so only the topic list is read there.

For classic members of a KIP-848 consumer group (online migration) the coordinator also
reads the partitions a member says it owns (``decode_subscription``: v1+ carries them) and
writes each member's assignment itself (``encode_assignment``: ConsumerProtocolAssignment
v0, an int32-counted array of topics with int32-counted partitions, then null user data), and
reads a classic group's assignments when the group is converted (``decode_assignment``).

Imports nothing from josefk.
"""

from __future__ import annotations

import struct
from typing import Final

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


class SubscriptionFormatError(ValueError):
    """Subscription bytes that do not parse as the consumer protocol."""


def subscribed_topics(metadata: bytes | memoryview) -> list[str]:
    """The topic names of a ConsumerProtocolSubscription (any version)."""
    buffer = memoryview(metadata)
    try:
        (version,) = _I16.unpack_from(buffer, 0)
        if version < 0:
            raise SubscriptionFormatError(f"subscription version {version}")
        (count,) = _I32.unpack_from(buffer, 2)
        position = 6
        topics = []
        for _ in range(max(count, 0)):
            (length,) = _I16.unpack_from(buffer, position)
            position += 2
            if length < 0 or position + length > len(buffer):
                raise SubscriptionFormatError("topic name runs past the end")
            topics.append(bytes(buffer[position : position + length]).decode())
            position += length
        return topics
    except (struct.error, UnicodeDecodeError) as exc:
        raise SubscriptionFormatError(f"unreadable consumer subscription: {exc}") from None


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    """A version 0 ConsumerProtocolSubscription (tests and josefk's own tools)."""
    out = bytearray(_I16.pack(0))
    out += _I32.pack(len(topics))
    for topic in topics:
        raw = topic.encode()
        out += _I16.pack(len(raw))
        out += raw
    if user_data is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(user_data))
        out += user_data
    return bytes(out)


def _string(buffer: memoryview, position: int) -> tuple[str, int]:
    (length,) = _I16.unpack_from(buffer, position)
    position += 2
    if length < 0 or position + length > len(buffer):
        raise SubscriptionFormatError("a string runs past the end")
    return bytes(buffer[position : position + length]).decode(), position + length


def _partitions(buffer: memoryview, position: int) -> tuple[list[tuple[str, int]], int]:
    (topics,) = _I32.unpack_from(buffer, position)
    position += 4
    found = []
    for _ in range(max(topics, 0)):
        topic, position = _string(buffer, position)
        (count,) = _I32.unpack_from(buffer, position)
        position += 4
        if count < 0 or position + 4 * count > len(buffer):
            raise SubscriptionFormatError("a partition list runs past the end")
        for _ in range(count):
            found.append((topic, _I32.unpack_from(buffer, position)[0]))
            position += 4
    return found, position


def decode_subscription(metadata: bytes | memoryview) -> tuple[list[str], list[tuple[str, int]]]:
    """The topics and owned partitions of a ConsumerProtocolSubscription; a v0 subscription
    (or one that ends before them) owns nothing, as an eager member that rejoins."""
    buffer = memoryview(metadata)
    topics = subscribed_topics(buffer)
    try:
        (version,) = _I16.unpack_from(buffer, 0)
        position = 6 + sum(2 + len(t.encode()) for t in topics)
        (user_data,) = _I32.unpack_from(buffer, position)
        position += 4 + max(user_data, 0)
        if version < 1 or position >= len(buffer):
            return topics, []
        owned, _ = _partitions(buffer, position)
        return topics, owned
    except (struct.error, UnicodeDecodeError) as exc:
        raise SubscriptionFormatError(f"unreadable consumer subscription: {exc}") from None


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    """A version 0 ConsumerProtocolAssignment with null user data."""
    out = bytearray(_I16.pack(0))
    out += _I32.pack(len(partitions))
    for topic, numbers in sorted(partitions.items()):
        raw = topic.encode()
        out += _I16.pack(len(raw))
        out += raw
        out += _I32.pack(len(numbers))
        for number in sorted(numbers):
            out += _I32.pack(number)
    out += _I32.pack(-1)
    return bytes(out)


def decode_assignment(data: bytes | memoryview) -> list[tuple[str, int]]:
    """The partitions of a ConsumerProtocolAssignment (any version); empty bytes are none."""
    buffer = memoryview(data)
    if len(buffer) == 0:
        return []
    try:
        (version,) = _I16.unpack_from(buffer, 0)
        if version < 0:
            raise SubscriptionFormatError(f"assignment version {version}")
        found, _ = _partitions(buffer, 2)
        return found
    except (struct.error, UnicodeDecodeError) as exc:
        raise SubscriptionFormatError(f"unreadable consumer assignment: {exc}") from None
