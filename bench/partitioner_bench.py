"""The producer's partitioner alone: CPU per keyless record with many partitions.

Calls ``DefaultPartitioner`` as ``AIOProducer.send`` does for a record without a key or a
partition (the sticky choice), and ``batch_completed`` every ``--per-batch`` records, as the
accumulator does when a batch closes. Prints CPU µs per record (``time.process_time``, median
of ``--rounds``). To measure another commit, run this file with that commit's tree first on
``PYTHONPATH`` (a ``git worktree``). Not a test: nothing here asserts.

    python bench/partitioner_bench.py --partitions 10000
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from josefk.client.partitioner import DefaultPartitioner


def per_record_us(partitions: int, records: int, per_batch: int) -> float:
    ids = tuple(range(partitions))
    partitioner = DefaultPartitioner(random.Random(1))
    started = time.process_time()
    for i in range(records):
        chosen = partitioner("topic", None, ids, ids)
        if i % per_batch == per_batch - 1:
            partitioner.batch_completed("topic", chosen, ids)
    return (time.process_time() - started) / records * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[10, 1_000, 10_000])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--per-batch", type=int, default=16, help="records a batch")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for partitions in args.partitions:
        rounds = [
            per_record_us(partitions, args.records, args.per_batch) for _ in range(args.rounds)
        ]
        print(f"{partitions:>7,} partitions: {statistics.median(rounds):8.2f} CPU µs a record")


if __name__ == "__main__":
    main()
