"""Offset ranges: what one Spark task reads, and how a micro-batch is cut.

Owns ``OffsetRange`` (topic, partition, from_offset inclusive, until_offset exclusive),
``split_ranges`` (``minPartitions``: large ranges cut into several tasks, in proportion to
their sizes, as Spark's Kafka source does) and ``rate_limit`` (``maxOffsetsPerTrigger``: a
budget of offsets shared between partitions in proportion to their lag).

Pure arithmetic on plain values: imports nothing from josefk, pyspark or pyarrow, so it is
picklable and testable on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one partition, read by one task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)


def split_ranges(ranges: Sequence[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """One range per partition, or more when ``min_partitions`` asks for more tasks.

    Each range gets a share of ``min_partitions`` proportional to its size, rounded up (so
    there are at least ``min_partitions`` tasks when the offsets allow it), so a partition
    with most of the data is the one cut up. Empty ranges are dropped. Example: sizes 90 and
    10 with min_partitions=4 -> parts ceil(3.6)=4 and ceil(0.4)=1: four ranges of 22/23
    offsets and one of 10.
    """
    live = [r for r in ranges if r.size > 0]
    if min_partitions is None or min_partitions <= len(live):
        return live
    total = sum(r.size for r in live)
    out: list[OffsetRange] = []
    for r in live:
        parts = max(1, min(r.size, -(-min_partitions * r.size // total)))
        for i in range(parts):
            start = r.from_offset + r.size * i // parts
            end = r.from_offset + r.size * (i + 1) // parts
            if end > start:
                out.append(OffsetRange(r.topic, r.partition, start, end))
    return out


def rate_limit(
    start: Mapping[TopicPartitionKey, int],
    latest: Mapping[TopicPartitionKey, int],
    max_offsets: int,
) -> dict[TopicPartitionKey, int]:
    """End offsets advancing at most ``max_offsets`` in total beyond ``start``.

    Each partition gets ``max_offsets * lag / total_lag`` rounded down; the offsets left over
    by rounding go one each to the partitions with the largest lag, so a small budget still
    moves (a budget of 1 over ten lagging partitions moves one of them). Partitions absent
    from ``start`` are returned at their ``latest`` value untouched by the caller's choice:
    the caller passes only partitions it wants limited.
    """
    lags = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(lags.values())
    if total <= max_offsets:
        return dict(latest)
    share = {tp: max_offsets * lag // total for tp, lag in lags.items()}
    left = max_offsets - sum(share.values())
    for tp in sorted(lags, key=lambda k: (-(lags[k] - share[k]), k)):
        if left <= 0:
            break
        if share[tp] < lags[tp]:
            share[tp] += 1
            left -= 1
    return {tp: (start[tp] + share[tp] if tp in start else latest[tp]) for tp in latest}
