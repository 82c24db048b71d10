"""The consumer protocol's subscription bytes, as far as the coordinator needs to read them.

Owns ``subscribed_topics``: the topics a member of a group with protocol type ``consumer``
subscribes to, read from the metadata it sent with JoinGroup (Kafka's
ConsumerProtocolSubscription: int16 version, an int32-counted array of int16-length topic
names, then user data, owned partitions, generation and rack in later versions, which the
coordinator does not need). OffsetDelete refuses to delete the offsets of a subscribed topic
and retention keeps them, so only the topic list is read.

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
