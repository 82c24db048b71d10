"""Client benchmark: josefk's client against aiokafka and kafka-python, same broker, same run.

Starts a real ``josefk serve`` process on a temporary data dir, then for each record size
(100 B and 1 KiB) measures with each client:

* produce: send N records to partition 0 of a fresh topic without waiting for each one,
  then flush; acks=1, no compression, linger 5 ms, 64 KiB batches for every client;
* consume: assign partition 0 of the josefk-produced topic, read the N records from the
  beginning in batches of up to 10 000.

Each figure is the fastest of ``--rounds`` interleaved rounds (default 3): on a shared
machine other work only ever slows a round down. The clients take turns going first.

    python bench/client_bench.py              # full run, prints a Markdown section
    python bench/client_bench.py --quick      # smaller counts, for a smoke run

Not a test: nothing here asserts. Clients and broker share the machine's cores, so every
figure includes the broker's cost too; what matters is the comparison within one run. The
async clients run on uvloop when it is installed (as the broker does).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from serve_process import ServeProcess

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BATCH_SIZE = 65_536
LINGER_MS = 5
POLL_RECORDS = 10_000


@dataclass
class Result:
    client: str
    operation: str
    size: int
    messages: int
    seconds: float
    round_index: int = 0

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.messages * self.size / self.seconds / 1e6


def run_async(factory: Callable[[], Awaitable[float]]) -> float:
    try:
        import uvloop

        return uvloop.run(factory())  # type: ignore[no-any-return]
    except ImportError:
        return asyncio.run(factory())  # type: ignore[arg-type]


# ---------------------------------------------------------------------- josefk


def josefk_produce(bootstrap: str, topic: str, value: bytes, count: int) -> float:
    from josefk.client import AIOProducer

    async def main() -> float:
        async with AIOProducer(
            bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH_SIZE
        ) as producer:
            await producer.send_and_wait(topic, b"warm-up", partition=0)
            start = time.perf_counter()
            send = producer.send
            for _ in range(count):
                await send(topic, value, partition=0)
            await producer.flush()
            return time.perf_counter() - start

    return run_async(main)


def josefk_consume(bootstrap: str, topic: str, count: int) -> float:
    from josefk.client import AIOConsumer, TopicPartition

    async def main() -> float:
        async with AIOConsumer(
            bootstrap_servers=bootstrap, auto_offset_reset="earliest"
        ) as consumer:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.position(tp)
            start = time.perf_counter()
            got = 0
            while got < count:
                batch = await consumer.getmany(timeout_ms=1000, max_records=POLL_RECORDS)
                for records in batch.values():
                    got += len(records)
            return time.perf_counter() - start

    return run_async(main)


# ---------------------------------------------------------------------- aiokafka


def aiokafka_produce(bootstrap: str, topic: str, value: bytes, count: int) -> float:
    from aiokafka import AIOKafkaProducer

    async def main() -> float:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks=1,
            linger_ms=LINGER_MS,
            max_batch_size=BATCH_SIZE,
            enable_idempotence=False,
        )
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"warm-up", partition=0)
            start = time.perf_counter()
            send = producer.send
            for _ in range(count):
                await send(topic, value, partition=0)
            await producer.flush()
            return time.perf_counter() - start
        finally:
            await producer.stop()

    return run_async(main)


def aiokafka_consume(bootstrap: str, topic: str, count: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> float:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            await consumer.position(tp)
            start = time.perf_counter()
            got = 0
            while got < count:
                batch = await consumer.getmany(timeout_ms=1000, max_records=POLL_RECORDS)
                for records in batch.values():
                    got += len(records)
            return time.perf_counter() - start
        finally:
            await consumer.stop()

    return run_async(main)


# ---------------------------------------------------------------------- kafka-python


def kafka_python_produce(bootstrap: str, topic: str, value: bytes, count: int) -> float:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=1,
        linger_ms=LINGER_MS,
        batch_size=BATCH_SIZE,
        enable_idempotence=False,
    )
    try:
        producer.send(topic, b"warm-up", partition=0).get(timeout=30)
        start = time.perf_counter()
        send = producer.send
        for _ in range(count):
            send(topic, value, partition=0)
        producer.flush()
        return time.perf_counter() - start
    finally:
        producer.close()


def kafka_python_consume(bootstrap: str, topic: str, count: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        consumer.position(tp)
        start = time.perf_counter()
        got = 0
        while got < count:
            for records in consumer.poll(timeout_ms=1000, max_records=POLL_RECORDS).values():
                got += len(records)
        return time.perf_counter() - start
    finally:
        consumer.close()


PRODUCERS = {
    "josefk": josefk_produce,
    "aiokafka": aiokafka_produce,
    "kafka-python": kafka_python_produce,
}
CONSUMERS = {
    "josefk": josefk_consume,
    "aiokafka": aiokafka_consume,
    "kafka-python": kafka_python_consume,
}


def run(bootstrap: str, sizes: dict[int, int], rounds: int) -> list[Result]:
    """Every client, every size, ``rounds`` times interleaved; every round's result (the
    summary keeps each one's fastest round, because other work on a shared machine only
    ever slows a round down)."""
    results: list[Result] = []

    def keep(result: Result) -> None:
        results.append(result)
        print(
            f"  {result.client:13} {result.operation} {result.size:5} B: "
            f"{result.msgs_per_s:10,.0f} msg/s",
            flush=True,
        )

    clients = list(PRODUCERS)
    for round_index in range(rounds):
        # Whoever goes first meets the broker's first produce and first read of the round;
        # rotating the order shares that out.
        shift = round_index % len(clients)
        order = clients[shift:] + clients[:shift]
        print(f"round {round_index + 1} of {rounds}: {', '.join(order)}", flush=True)
        for size, count in sizes.items():
            value = (b"0123456789abcdef" * (size // 16 + 1))[:size]
            produced: dict[str, str] = {}
            for client in order:
                topic = f"bench-{client}-{size}-{os.getpid()}-{round_index}"
                seconds = PRODUCERS[client](bootstrap, topic, value, count)
                produced[client] = topic
                keep(Result(client, "produce", size, count, seconds, round_index))
            for client in order:
                consume = CONSUMERS[client]
                # Everyone reads the same records: those josefk's producer wrote (+ warm-up).
                seconds = consume(bootstrap, produced["josefk"], count + 1)
                keep(Result(client, "consume", size, count + 1, seconds, round_index))
    return results


def fastest(results: list[Result]) -> list[Result]:
    best: dict[tuple[str, str, int], Result] = {}
    for result in results:
        key = (result.client, result.operation, result.size)
        if key not in best or result.seconds < best[key].seconds:
            best[key] = result
    return list(best.values())


def markdown(every: list[Result], sizes: dict[int, int], rounds: int) -> str:
    results = fastest(every)
    cpu = platform.processor() or platform.machine()
    lines = [
        "## Client",
        "",
        f"`python bench/client_bench.py` on {os.cpu_count()} cores ({cpu}), Python "
        f"{platform.python_version()}, one `josefk serve` on the same machine. Each client "
        f"sends {', '.join(f'{n:,} records of {s} B' for s, n in sizes.items())} to partition 0 "
        f"(acks=1, no compression, linger {LINGER_MS} ms, {BATCH_SIZE // 1024} KiB batches), "
        "then reads them back from the beginning (assign, batches of up to 10 000). "
        f"Fastest of {rounds} interleaved rounds per figure (the clients take turns going "
        "first).",
        "",
        "| client | size | produce msg/s | produce MB/s | consume msg/s | consume MB/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        for client in PRODUCERS:
            p = next(
                r
                for r in results
                if r.client == client and r.size == size and r.operation == "produce"
            )
            c = next(
                r
                for r in results
                if r.client == client and r.size == size and r.operation == "consume"
            )
            lines.append(
                f"| {client} | {size} B | {p.msgs_per_s:,.0f} | {p.mb_per_s:,.1f} | "
                f"{c.msgs_per_s:,.0f} | {c.mb_per_s:,.1f} |"
            )
    clients = " / ".join(PRODUCERS)
    lines += [
        "",
        f"Per round ({clients}, thousand msg/s):",
        "",
        "| | " + " | ".join(f"round {i + 1}" for i in range(rounds)) + " |",
        "|---|" + "---|" * rounds,
    ]
    for operation in ("produce", "consume"):
        for size in sizes:
            cells = []
            for round_index in range(rounds):
                rates = {
                    r.client: r.msgs_per_s
                    for r in every
                    if r.operation == operation and r.size == size and r.round_index == round_index
                }
                cells.append(" / ".join(f"{rates[c] / 1000:,.0f}" for c in PRODUCERS))
            lines.append(f"| {operation} {size} B | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument("--bootstrap", help="use a running broker instead of starting one")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best kept)")
    args = parser.parse_args()
    sizes = {100: 20_000, 1024: 10_000} if args.quick else {100: 100_000, 1024: 50_000}
    data_dir = Path(tempfile.mkdtemp(prefix="josefk-client-bench-"))
    broker: ServeProcess | None = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            broker = ServeProcess(data_dir)
            bootstrap = broker.bootstrap
        print(f"broker {bootstrap}", flush=True)
        results = run(bootstrap, sizes, 1 if args.quick else args.rounds)
        print()
        print(markdown(results, sizes, 1 if args.quick else args.rounds))
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
