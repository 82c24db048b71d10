"""Rebalance benchmark: a ten-member group gains an eleventh member, per group protocol.

Starts one real ``josefk serve`` and, for each protocol, a topic of 40 partitions fed by a
steady producer, ten confluent-kafka consumers of one group (each polling in its own
thread), and once all ten consume, an eleventh. It measures, from the moment the eleventh is
started:

- ``pause``: the longest stretch in which the ten original members together consumed
  nothing (the stop-the-world part of a rebalance);
- ``member gap``: each original member's longest gap between two records, the median and
  the worst of the ten (a member that kept partitions but stopped shows here);
- ``newcomer``: how long until the eleventh member consumed its first record.

Protocols: classic with librdkafka's eager ``range`` assignor, classic with
``cooperative-sticky``, and KIP-848's ``consumer`` protocol (the broker's ``uniform``
assignor). Client and broker settings are Kafka's defaults (heartbeat 3 s classic, 5 s
consumer protocol; session 45 s), so the figures show what a default deployment sees.

    python bench/group_rebalance_bench.py            # prints a Markdown table
    python bench/group_rebalance_bench.py --rounds 3

Not a test: nothing here asserts. Clients and broker share the machine's two cores.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from serve_process import ServeProcess

PARTITIONS = 40
MEMBERS = 10
RATE_PER_S = 2000
SETTLE_S = 5.0
OBSERVE_S = 25.0

PROTOCOLS: dict[str, dict[str, Any]] = {
    "classic, eager (range)": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "range",
    },
    "classic, cooperative-sticky": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "cooperative-sticky",
    },
    "consumer (KIP-848, uniform)": {"group.protocol": "consumer"},
}


@dataclass
class MemberThread:
    bootstrap: str
    group: str
    topic: str
    conf: dict[str, Any]
    stop: threading.Event
    times: list[float] = field(default_factory=list)

    def run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "latest",
                "enable.auto.commit": True,
                **self.conf,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                message = consumer.poll(0.01)
                if message is not None and message.error() is None:
                    self.times.append(time.monotonic())
        finally:
            consumer.close()


def produce_steadily(bootstrap: str, topic: str, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    interval = 1.0 / RATE_PER_S
    sent = 0
    started = time.monotonic()
    while not stop.is_set():
        producer.produce(topic, b"x" * 100, partition=sent % PARTITIONS)
        sent += 1
        producer.poll(0)
        ahead = started + sent * interval - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    producer.flush(10)


def longest_gap(times: list[float], start: float, end: float) -> float:
    inside = [start, *(t for t in times if start <= t <= end), end]
    return max(b - a for a, b in itertools.pairwise(inside))


def one_round(bootstrap: str, label: str, conf: dict[str, Any]) -> dict[str, float]:
    topic = f"rebalance-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    producer = threading.Thread(target=produce_steadily, args=(bootstrap, topic, stop))
    producer.start()
    members = [MemberThread(bootstrap, group, topic, conf, stop) for _ in range(MEMBERS)]
    threads = [threading.Thread(target=m.run) for m in members]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(m.times for m in members):
            time.sleep(0.1)
        if not all(m.times for m in members):
            raise RuntimeError(f"{label}: the ten members never all consumed")
        time.sleep(SETTLE_S)  # steady state before the newcomer; nothing to wait on
        start = time.monotonic()
        newcomer = MemberThread(bootstrap, group, topic, conf, stop)
        extra = threading.Thread(target=newcomer.run)
        extra.start()
        threads.append(extra)
        time.sleep(OBSERVE_S)
        end = time.monotonic()
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        producer.join(30)
    together = sorted(t for m in members for t in m.times)
    gaps = [longest_gap(m.times, start, end) for m in members]
    first = next((t for t in newcomer.times if t >= start), None)
    return {
        "pause": longest_gap(together, start, end),
        "gap_median": statistics.median(gaps),
        "gap_max": max(gaps),
        "newcomer": (first - start) if first is not None else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = ServeProcess(Path(tmp) / "data")
        try:
            rows = []
            for label, conf in PROTOCOLS.items():
                results = [one_round(broker.bootstrap, label, conf) for _ in range(args.rounds)]
                rows.append(
                    (label, {k: statistics.median(r[k] for r in results) for k in results[0]})
                )
        finally:
            broker.stop()
    print(f"Ten members on {PARTITIONS} partitions ({RATE_PER_S} records/s) gain an eleventh;")
    print(f"medians of {args.rounds} round(s), seconds from the newcomer's start:\n")
    print(
        "| protocol | pause of the ten | member gap, median | member gap, worst | newcomer's first record |"
    )
    print("| --- | --- | --- | --- | --- |")
    for label, r in rows:
        print(
            f"| {label} | {r['pause']:.2f} | {r['gap_median']:.2f} | {r['gap_max']:.2f} "
            f"| {r['newcomer']:.2f} |"
        )


if __name__ == "__main__":
    main()
