"""The small values the client hands to and receives from users.

Owns ``TopicPartition``, ``RecordMetadata`` (what a delivery future resolves to),
``ConsumerRecord`` (one record as the consumer returns it), ``OffsetAndTimestamp`` and
``ConsumerGroupMetadata`` (what ``send_offsets_to_transaction`` needs of a consumer). They
are named tuples: a consumer creates millions of records and tuple construction is the
cheapest Python offers. Imports josefk.records only (for TimestampType).
"""

from __future__ import annotations

from typing import NamedTuple

from josefk.records import TimestampType

Header = tuple[str, bytes | None]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where a produced record was written. ``timestamp`` is the broker's log append time
    under LogAppendTime, else the record's create time."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class ConsumerGroupMetadata(NamedTuple):
    """A group member's identity as a transactional producer needs it to commit the member's
    offsets in a transaction (KIP-447): the coordinator refuses the commit of a member that
    is no longer in the group's current generation, fencing zombies."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
