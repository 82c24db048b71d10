"""Partition assignors of the classic group protocol: "range" and "roundrobin".

Owns the ``Assignor`` protocol and ``RangeAssignor`` / ``RoundRobinAssignor``, which compute
the same assignment as Kafka's assignors of those names, so a josefk consumer elected group
leader assigns exactly what a Java or librdkafka leader would:

* range: per topic, members subscribed to it sorted by member id; partitions sorted; each
  member gets ``n // m`` consecutive partitions and the first ``n % m`` members one more.
* roundrobin: all partitions of all subscribed topics sorted by (topic, partition), dealt to
  the members sorted by member id in turn, skipping members not subscribed to the topic.

Imports josefk.client.types only; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from josefk.client.types import TopicPartition


class Assignor(Protocol):
    name: str

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Sequence[str]]
    ) -> dict[str, list[TopicPartition]]:
        """member id -> partitions, given each topic's partition count and each member's
        subscribed topics. Topics with no known partitions are skipped."""
        ...


class RangeAssignor:
    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Sequence[str]]
    ) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        topics = sorted({t for topics in subscriptions.values() for t in topics})
        for topic in topics:
            count = partitions_per_topic.get(topic, 0)
            if count <= 0:
                continue
            members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
            per_member, extra = divmod(count, len(members))
            start = 0
            for i, member in enumerate(members):
                length = per_member + (1 if i < extra else 0)
                out[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
                start += length
        return out


class RoundRobinAssignor:
    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Sequence[str]]
    ) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        members = sorted(subscriptions)
        if not members:
            return out
        subscribed = {m: set(subscriptions[m]) for m in members}
        topics = sorted({t for topics in subscriptions.values() for t in topics})
        index = 0
        for topic in topics:
            for partition in range(partitions_per_topic.get(topic, 0)):
                # Deal to the next member (in the circular order) subscribed to the topic.
                for _ in range(len(members)):
                    member = members[index % len(members)]
                    index += 1
                    if topic in subscribed[member]:
                        out[member].append(TopicPartition(topic, partition))
                        break
        return out


DEFAULT_ASSIGNORS: tuple[Assignor, ...] = (RangeAssignor(), RoundRobinAssignor())
