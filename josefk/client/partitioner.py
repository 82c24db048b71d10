"""Choosing a partition for a record, as the Java client's default partitioner does.

Owns ``murmur2`` (the 32-bit MurmurHash2 variant Kafka's Java client uses, seed 0x9747b28c,
over the key's bytes, with little-endian 4-byte words and the tail mixed in the same order as
Java's switch fall-through) and ``DefaultPartitioner``: a keyed record goes to
``(murmur2(key) & 0x7fffffff) % num_partitions``, so the same key lands on the same partition
as with the Java client, librdkafka's ``murmur2``/``murmur2_random`` and kafka-python. A
keyless record goes to a "sticky" partition that changes only when a batch for it is
complete (KIP-480), which fills batches faster than round-robin.

Imports nothing from josefk; no I/O.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from functools import lru_cache
from typing import Final

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF


@lru_cache(maxsize=65536)
def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as an unsigned 32-bit int (Java's int, bits unchanged).

    Cached: keyed workloads reuse a bounded set of keys far more often than not.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    if whole:
        for (k,) in struct.iter_unpack("<I", data[:whole]):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java client's default partitioner picks for ``key``."""
    return (murmur2(bytes(key)) & 0x7FFFFFFF) % num_partitions


class DefaultPartitioner:
    """Keyed: murmur2. Keyless: sticky per topic until ``batch_completed`` is called.

    ``rng`` is injected so tests can make the sticky choice deterministic. Neither call walks
    the topic's partitions: a producer spread over thousands of them calls both for every
    record and batch, so the sticky choice remembers the ``partitions`` sequence it was made
    from and is checked against a new one only when the metadata changed it.
    """

    __slots__ = ("_rng", "_sticky")

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        # topic -> (sticky partition, the partitions sequence it was checked against)
        self._sticky: dict[str, tuple[int, Sequence[int]]] = {}

    def __call__(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        """Pick a partition of ``topic``; ``available`` are those with a known leader."""
        if key is not None:
            return partitions[partition_for_key(key, len(partitions))]
        sticky = self._sticky.get(topic)
        if sticky is not None:
            current, seen = sticky
            if seen is partitions:
                return current
            if current in partitions:
                self._sticky[topic] = (current, partitions)
                return current
        choices = available or partitions
        current = choices[self._rng.randrange(len(choices))]
        self._sticky[topic] = (current, partitions)
        return current

    def batch_completed(self, topic: str, partition: int, partitions: Sequence[int]) -> None:
        """A batch of ``topic``/``partition`` closed: move keyless records elsewhere."""
        sticky = self._sticky.get(topic)
        if sticky is None or sticky[0] != partition or len(partitions) <= 1:
            return
        # Another partition, uniformly: draw until it differs (fewer than two draws on
        # average) rather than build the list of the others.
        while (chosen := partitions[self._rng.randrange(len(partitions))]) == partition:
            pass
        self._sticky[topic] = (chosen, partitions)
