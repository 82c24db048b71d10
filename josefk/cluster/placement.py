"""Where a new topic's replicas go: Kafka's replica assignment, rack-unaware and rack-aware.

Owns ``assign_replicas``. The rules are Kafka's (its admin utilities' documented placement):

- Rack-unaware: the first replica of partition ``p`` is broker ``(p + start) % n`` of the
  sorted broker list; the others follow it at a shift that is the same for ``n``
  consecutive partitions and grows by one after each such round, so that followers of one
  broker's leaderships spread over all other brokers instead of always sitting on its
  neighbour. Example, brokers [1, 2, 3], start 0, shift 0, RF 2: partitions 0, 1, 2 get
  [1, 2], [2, 3], [3, 1]; partitions 3, 4, 5 (shift 1) get [1, 3], [2, 1], [3, 2].
- Rack-aware (every broker has a rack): the broker list is first re-ordered to alternate
  racks (rack a's first broker, rack b's first, ..., rack a's second, ...), then each
  partition's followers are taken along that list, skipping a broker whose rack already holds
  a replica of the partition until every rack holds one, and never taking a broker twice.
  Each partition then spans ``min(RF, racks)`` racks.

``start`` and ``shift`` are random in Kafka (so that topics created one after another do not
all lead on the same broker); here they come from an injected ``random.Random``.

Imports the standard library only.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

__all__ = ["InvalidReplicationFactorError", "assign_replicas", "rack_alternated"]


class InvalidReplicationFactorError(ValueError):
    """More replicas asked for than there are live brokers (Kafka's INVALID_REPLICATION_FACTOR)."""


def assign_replicas(
    partitions: int,
    replication_factor: int,
    brokers: Mapping[int, str | None],
    *,
    rng: random.Random | None = None,
    first_partition: int = 0,
) -> list[list[int]]:
    """Replica lists for partitions ``first_partition .. first_partition + partitions - 1``.

    ``brokers`` maps each live broker id to its rack (None when unset). Racks are used only
    when every broker has one; Kafka refuses a mix, josefk falls back to rack-unaware
    placement then.
    """
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("replication factor must be larger than 0")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} larger than the {len(brokers)} "
            "available brokers"
        )
    rng = rng if rng is not None else random.Random()
    racks = dict(brokers)
    if all(rack is not None for rack in racks.values()) and len(set(racks.values())) > 1:
        ordered = rack_alternated({b: str(r) for b, r in racks.items()})
        return _assign(partitions, replication_factor, ordered, racks, rng, first_partition)
    return _assign(partitions, replication_factor, sorted(racks), None, rng, first_partition)


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered so that consecutive brokers sit in different racks where possible:
    {1: a, 2: a, 3: b, 4: c} -> [1, 3, 4, 2]."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(racks):
        for queue in queues:
            if depth < len(queue):
                result.append(queue[depth])
        depth += 1
    return result


def _follower_index(first: int, shift: int, nth: int, count: int) -> int:
    # 1 + (...) % (count - 1) is never 0, so a follower is never the first replica itself.
    return (first + 1 + (shift + nth) % (count - 1)) % count


def _assign(
    partitions: int,
    replication_factor: int,
    ordered: Sequence[int],
    racks: Mapping[int, str | None] | None,
    rng: random.Random,
    first_partition: int,
) -> list[list[int]]:
    count = len(ordered)
    start = rng.randrange(count)
    shift = rng.randrange(count)
    rack_count = len(set(racks.values())) if racks is not None else 1
    result: list[list[int]] = []
    for partition in range(first_partition, first_partition + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        replicas = [ordered[first]]
        if racks is None:
            replicas += [
                ordered[_follower_index(first, shift, nth, count)]
                for nth in range(replication_factor - 1)
            ]
        else:
            used_racks = {racks[ordered[first]]}
            nth = 0
            while len(replicas) < replication_factor:
                broker = ordered[_follower_index(first, shift * rack_count, nth, count)]
                nth += 1
                rack = racks[broker]
                if broker in replicas:
                    continue
                if rack in used_racks and len(used_racks) < rack_count:
                    continue
                replicas.append(broker)
                used_racks.add(rack)
        result.append(replicas)
    return result
