"""A replicated cluster with many partitions: what the idle ones cost while one is busy.

Three ``josefk serve`` brokers on a real etcd (``cluster_bench.Cluster``), a topic of
``--partitions`` partitions at RF=3 (min.insync.replicas=2), and for each tree (this one and
``--baseline-ref``, each on a cluster of its own, both up at once) and each partition count:

- idle: the three brokers' CPU over ``--idle-s`` seconds with nothing produced (followers'
  fetches long-poll, each session holding a third of the partitions);
- one busy partition: ``--mb`` MB of 1 KiB records with acks=all to partition 0 alone
  (librdkafka, linger.ms=1, so requests stay small and each append is a replication round
  trip); MB/s and the brokers' CPU seconds per GB.

Every append ends a follower's long-poll, and the follower's next fetch names its session,
which holds every partition it follows on that leader: a cost per idle partition per fetch
shows here, in the busy partition's CPU per GB, growing with the partition count.

    .venv/bin/python bench/cluster_scale_bench.py --partitions 150,1500 --baseline-ref 5130c41
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cluster_bench import RECORD, Cluster, producer
from serve_process import baseline_tree

ROOT = Path(__file__).resolve().parent.parent


def busy_partition(cluster: Cluster, topic: str, megabytes: int) -> tuple[float, float]:
    """(MB/s, the brokers' CPU s/GB) producing ``megabytes`` to partition 0 with acks=all."""
    p = producer(cluster, "all", **{"linger.ms": 1, "batch.size": 65536})
    failures: list[Any] = []
    count = megabytes * 1024
    cpu0, t0 = cluster.cpu_seconds(), time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(
                    topic, RECORD, partition=0, on_delivery=lambda e, m: e and failures.append(e)
                )
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(300)
    elapsed = time.perf_counter() - t0
    if failures:
        sys.exit(f"{len(failures)} records failed: {failures[:3]}")
    gigabytes = count * 1024 / 1e9
    return megabytes * 1.048576 / elapsed, (cluster.cpu_seconds() - cpu0) / gigabytes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", default="150,1500")
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--settle-s", type=float, default=5.0)
    parser.add_argument("--baseline-ref", default="")
    args = parser.parse_args()
    counts = [int(n) for n in args.partitions.split(",")]
    with contextlib.ExitStack() as stack:
        trees = [("this tree", ROOT)]
        if args.baseline_ref:
            trees.append((args.baseline_ref, stack.enter_context(baseline_tree(args.baseline_ref))))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="josefk-scale-")))
        clusters = []
        for index, (_, root) in enumerate(trees):
            (tmp / str(index)).mkdir()
            cluster = Cluster(tmp / str(index), 6000, root=root).start()
            stack.callback(cluster.stop)
            clusters.append(cluster)
        rows = []
        for count in counts:
            for (name, _), cluster in zip(trees, clusters, strict=True):
                topic = f"scale-{count}"
                started = time.perf_counter()
                cluster.create(topic, count, 3, 2)
                created_s = time.perf_counter() - started
                time.sleep(args.settle_s)
                cpu0 = cluster.cpu_seconds()
                time.sleep(args.idle_s)
                idle = (cluster.cpu_seconds() - cpu0) / args.idle_s * 100
                os.sync()
                rate, cost = busy_partition(cluster, topic, args.mb)
                rows.append((count, name, created_s, idle, rate, cost))
                print(
                    f"{count} partitions, {name}: created in {created_s:.1f} s, idle "
                    f"{idle:.1f}% of a core, one busy partition {rate:.1f} MB/s at "
                    f"{cost:.1f} broker CPU s/GB",
                    file=sys.stderr,
                    flush=True,
                )
    print(
        f"{'partitions (RF=3)':>18} {'code':>12} {'created':>9} {'idle CPU':>10} "
        f"{'busy MB/s':>10} {'CPU s/GB':>9}"
    )
    for count, name, created_s, idle, rate, cost in rows:
        print(
            f"{count:>18} {name[:12]:>12} {created_s:>7.1f} s {idle:>8.1f} % "
            f"{rate:>10.1f} {cost:>9.1f}"
        )
    print(
        "(idle CPU: the three brokers together, % of one core; busy: acks=all to one "
        "partition, linger.ms=1)"
    )


if __name__ == "__main__":
    main()
