"""How long josefk.testing takes to hand a test a broker: ``python bench/testing_start.py``.

Prints the first start in a fresh interpreter (imports included) and the median and maximum
of the following starts and stops (what a function-scoped ``josefk_broker`` costs per test),
and the start of a three-broker JosefkCluster when etcd is installed.
"""

from __future__ import annotations

import statistics
import sys
import time

from josefk.testing import JosefkBroker, JosefkCluster, etcd_binary


def timed_start() -> tuple[float, float]:
    began = time.perf_counter()
    broker = JosefkBroker().start()
    started = time.perf_counter() - began
    began = time.perf_counter()
    broker.stop()
    return started, time.perf_counter() - began


def main(runs: int) -> None:
    first, _ = timed_start()
    starts, stops = zip(*(timed_start() for _ in range(runs)), strict=True)
    print(f"first start (imports included): {first * 1000:.0f} ms")
    print(
        f"next {runs} starts: median {statistics.median(starts) * 1000:.0f} ms, "
        f"max {max(starts) * 1000:.0f} ms; stops: median {statistics.median(stops) * 1000:.0f} ms"
    )
    if etcd_binary() is not None:
        began = time.perf_counter()
        with JosefkCluster():
            print(f"three-broker cluster with etcd: {(time.perf_counter() - began) * 1000:.0f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
