"""The server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

Owns ``assign`` and the two assignors. An assignor maps a group's members (each with the
topics it subscribes to) and the subscribed topics' partition counts to a target assignment:
member id -> topic id -> partitions. Every partition of a topic somebody subscribes to goes to
exactly one member that subscribes to it; nothing else is assigned.

``uniform`` (Kafka's default, ``group.consumer.assignors``'s first entry) is sticky: each
member first keeps the partitions it has in the previous target assignment (as long as it
still subscribes to their topic and the partition still exists), partitions nobody keeps go
to the eligible member with the fewest, and then partitions move one at a time from the
member with the most to an eligible member with at least two fewer until no such move is
left. With identical subscriptions this ends with every member's count within one of every
other's, and a member loses partitions only when it holds more than its share.

``range`` assigns each topic on its own, as the classic range assignor: the topic's
subscribers sorted by member id, each takes a contiguous range of ``partitions / members``
partitions, the first ``partitions % members`` one more. Members subscribing to the same
topics with the same partition counts get the same partition numbers of each (co-partitioned
joins); it is not sticky.

Pure functions over plain data: no clock, no I/O. Imports nothing from josefk.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Final

# member id -> topic id -> partitions
Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]

UNIFORM: Final = "uniform"
RANGE: Final = "range"


class UnknownAssignorError(ValueError):
    pass


def assign(
    assignor: str,
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partition_counts: Mapping[uuid.UUID, int],
    previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
) -> Assignment:
    """The target assignment by ``assignor`` for members subscribing to topics (by id)."""
    run = ASSIGNORS.get(assignor)
    if run is None:
        raise UnknownAssignorError(assignor)
    return run(subscriptions, partition_counts, previous)


def uniform(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partition_counts: Mapping[uuid.UUID, int],
    previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
) -> Assignment:
    members = sorted(subscriptions)
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    taken: set[tuple[uuid.UUID, int]] = set()
    for member in members:
        for topic_id, partitions in sorted(previous.get(member, {}).items()):
            if topic_id not in subscriptions[member]:
                continue
            count = partition_counts.get(topic_id, 0)
            for p in sorted(partitions):
                tp = (topic_id, p)
                if p < count and tp not in taken:
                    taken.add(tp)
                    owned[member].add(tp)
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member in members:
        for topic_id in subscriptions[member]:
            if topic_id in partition_counts:
                subscribers.setdefault(topic_id, []).append(member)
    # Partitions nobody keeps, topic by topic, each to the eligible member with the fewest.
    for topic_id in sorted(subscribers):
        eligible = subscribers[topic_id]
        for p in range(partition_counts[topic_id]):
            if (topic_id, p) in taken:
                continue
            receiver = min(eligible, key=lambda m: (len(owned[m]), m))
            owned[receiver].add((topic_id, p))
            taken.add((topic_id, p))
    _balance(owned, subscriptions)
    return {m: _by_topic(owned[m]) for m in members}


def _balance(
    owned: dict[str, set[tuple[uuid.UUID, int]]],
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
) -> None:
    """Move partitions one at a time from a fuller member to an eligible one with at least
    two fewer, the fullest donors first, until no such move exists. Each move lowers the sum
    of squared counts, so this ends."""
    while True:
        moved = False
        for donor in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            size = len(owned[donor])
            receivers = sorted(
                (m for m in owned if len(owned[m]) <= size - 2),
                key=lambda m: (len(owned[m]), m),
            )
            for receiver in receivers:
                wanted = subscriptions[receiver]
                movable = sorted(tp for tp in owned[donor] if tp[0] in wanted)
                if movable:
                    tp = movable[-1]
                    owned[donor].discard(tp)
                    owned[receiver].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


def range_(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partition_counts: Mapping[uuid.UUID, int],
    previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
) -> Assignment:
    del previous  # not sticky
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in subscriptions}
    for topic_id, count in sorted(partition_counts.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic_id in topics)
        if not members:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            if size:
                result[member][topic_id] = set(range(start, start + size))
            start += size
    return {m: {t: frozenset(ps) for t, ps in topics.items()} for m, topics in result.items()}


def _by_topic(partitions: set[tuple[uuid.UUID, int]]) -> dict[uuid.UUID, frozenset[int]]:
    grouped: dict[uuid.UUID, set[int]] = {}
    for topic_id, p in partitions:
        grouped.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in grouped.items()}


ASSIGNORS: Final[
    dict[
        str,
        Callable[
            [
                Mapping[str, frozenset[uuid.UUID]],
                Mapping[uuid.UUID, int],
                Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
            ],
            Assignment,
        ],
    ]
] = {UNIFORM: uniform, RANGE: range_}
