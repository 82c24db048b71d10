"""Transactions benchmark: transactional produce against idempotent produce, and commit latency.

Starts a real ``josefk serve`` and drives it with confluent-kafka (librdkafka) in the same run:

- the baseline, an idempotent non-transactional producer (acks=all, as a transactional one is);
- transactional producers committing every 100 and every 1,000 records;
- commit latency at a modest rate: for transactions of 100 records, the time from calling
  ``commit_transaction()`` to its return (EndTxn answered: the PrepareCommit record is in
  ``__transaction_state``) and to the moment a read_committed consumer, parked in a fetch on
  the partition, receives the transaction's last record (the markers are written and the last
  stable offset has moved: what a downstream reader waits for).

Each throughput figure sits beside the broker process's own CPU seconds per GB moved, the
steadier measure on two cores shared with the load generator.

    python bench/txn_bench.py            # full run, prints a Markdown table
    python bench/txn_bench.py --quick    # smaller counts, for a smoke run

Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from serve_process import ServeProcess, cpu_seconds, produce_all

SIZE = 512


@dataclass
class Result:
    name: str
    messages: int
    seconds: float
    broker_cpu_s: float

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.messages * SIZE / self.seconds / 1e6

    @property
    def cpu_s_per_gb(self) -> float:
        return self.broker_cpu_s / (self.messages * SIZE / 1e9)


def new_topic(admin: AdminClient, name: str) -> str:
    topic = f"{name}-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    return topic


def producer_config(bootstrap: str, transactional_id: str | None) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 32 * 1024,
    }
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    return config


def produce(broker: ServeProcess, topic: str, count: int, per_transaction: int | None) -> Result:
    """``count`` records of SIZE bytes; ``per_transaction`` None is the idempotent baseline."""
    transactional_id = None if per_transaction is None else f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(producer_config(broker.bootstrap, transactional_id))
    value = b"v" * SIZE
    if transactional_id is not None:
        producer.init_transactions(30)
    # Warm-up: connections and metadata are not part of the figure.
    if transactional_id is not None:
        producer.begin_transaction()
    producer.produce(topic, value)
    producer.flush(30)
    if transactional_id is not None:
        producer.commit_transaction(30)
    pid = broker.process.pid
    cpu0, started = cpu_seconds(pid), time.perf_counter()
    sent = 0
    while sent < count:
        batch = count - sent if per_transaction is None else min(per_transaction, count - sent)
        if per_transaction is not None:
            producer.begin_transaction()
        produce_all(producer, topic, value, batch)
        sent += batch
        if per_transaction is not None:
            producer.commit_transaction(30)
    producer.flush(120)
    seconds = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu0
    name = (
        "idempotent, no transactions"
        if per_transaction is None
        else f"transactional, {per_transaction:,} records per transaction"
    )
    return Result(name, count, seconds, cpu)


def commit_latency(broker: ServeProcess, topic: str, transactions: int) -> dict[str, float]:
    """Transactions of 100 records, one at a time; per transaction the commit call's own time
    and the time until a read_committed consumer holds the last record."""
    producer = Producer(producer_config(broker.bootstrap, f"lat-{uuid.uuid4().hex[:8]}"))
    producer.init_transactions(30)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "txn-bench",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 500,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: dict[bytes, float] = {}
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            # poll(), not consume(): a batch consume() returns only when its batch is full
            # or its timeout passed, which would be the figure measured.
            message = consumer.poll(0.2)
            if message is not None and message.error() is None and message.key() is not None:
                seen[message.key()] = time.perf_counter()

    reader = threading.Thread(target=read)
    reader.start()
    commit_ms: list[float] = []
    visible_ms: list[float] = []
    try:
        for n in range(transactions):
            producer.begin_transaction()
            last = f"t{n}".encode()
            for _ in range(99):
                producer.produce(topic, b"v" * SIZE)
            producer.produce(topic, b"v" * SIZE, key=last)
            producer.flush(30)
            started = time.perf_counter()
            producer.commit_transaction(30)
            commit_ms.append((time.perf_counter() - started) * 1000)
            deadline = time.perf_counter() + 30
            while last not in seen and time.perf_counter() < deadline:
                time.sleep(0.0005)
            if last in seen:
                visible_ms.append((seen[last] - started) * 1000)
    finally:
        stop.set()
        reader.join()
        consumer.close()

    def quantile(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "transactions": transactions,
        "commit_p50": statistics.median(commit_ms),
        "commit_p99": quantile(commit_ms, 0.99),
        "visible_p50": statistics.median(visible_ms),
        "visible_p99": quantile(visible_ms, 0.99),
        "visible_count": len(visible_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    count = 40_000 if args.quick else 400_000
    data_dir = Path(tempfile.mkdtemp(prefix="josefk-txn-bench-"))
    broker = ServeProcess(data_dir)
    results: dict[str, list[Result]] = {}
    latencies: list[dict[str, float]] = []
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for n in range(args.rounds):
            for per_transaction in (None, 100, 1000):
                topic = new_topic(admin, f"txn-bench-r{n}")
                result = produce(broker, topic, count, per_transaction)
                results.setdefault(result.name, []).append(result)
                print(
                    f"{result.name}: {result.msgs_per_s:,.0f} msg/s, {result.mb_per_s:.1f} MB/s,"
                    f" broker {result.cpu_s_per_gb:.1f} CPU s/GB"
                )
                admin.delete_topics([topic])[topic].result(30)
            topic = new_topic(admin, f"txn-latency-r{n}")
            lat = commit_latency(broker, topic, 100 if args.quick else 300)
            latencies.append(lat)
            print(
                f"commit latency: commit_transaction() p50 {lat['commit_p50']:.2f} ms p99 "
                f"{lat['commit_p99']:.2f} ms; visible to read_committed p50 "
                f"{lat['visible_p50']:.2f} ms p99 {lat['visible_p99']:.2f} ms"
            )
            admin.delete_topics([topic])[topic].result(30)
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)

    print(
        f"\n| {SIZE} B records, acks=all | msg/s (median of {args.rounds}) | MB/s | "
        "broker CPU s/GB | MB/s per round |\n| --- | ---: | ---: | ---: | --- |"
    )
    for name, rounds in results.items():
        mid = sorted(rounds, key=lambda r: r.seconds)[len(rounds) // 2]
        each = " / ".join(f"{r.mb_per_s:.1f}" for r in rounds)
        print(
            f"| {name} | {mid.msgs_per_s:,.0f} | {mid.mb_per_s:.1f} | {mid.cpu_s_per_gb:.1f} "
            f"| {each} |"
        )
    print("\n| commit latency (100-record transactions) | p50 ms | p99 ms |\n| --- | ---: | ---: |")
    for key, label in (
        ("commit", "commit_transaction() returns"),
        ("visible", "read_committed sees"),
    ):
        p50 = statistics.median(lat[f"{key}_p50"] for lat in latencies)
        p99 = statistics.median(lat[f"{key}_p99"] for lat in latencies)
        print(f"| {label} | {p50:.2f} | {p99:.2f} |")


if __name__ == "__main__":
    main()
