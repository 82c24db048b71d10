"""Broker benchmark: produce/fetch throughput and produce latency, load from confluent-kafka.

Starts a real ``josefk serve`` process on a temporary data dir and drives it with
confluent-kafka (librdkafka), then measures Redis Streams on the same machine in the same run
as the baseline: ``redis-benchmark`` sending XADD with values of the same sizes.

    python bench/broker_bench.py                 # full run, prints a Markdown section
    python bench/broker_bench.py --quick         # smaller counts, for a smoke run

Not a test: nothing here asserts. The client runs on the same two cores as the broker, so
every figure includes the client's own cost.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from serve_process import THROUGHPUT_PRODUCER, ServeProcess, fetch_all, produce_all

# How long freed pages take to lose their speed on this VM (measured: written at ~4 GB/s
# right after a delete, at the speed of any other memory 10 s later), and the pause before a
# latency measurement; no event tells when the kernel and the disk are done.
SETTLE_S = 15.0


@dataclass
class Result:
    name: str
    messages: int
    size: int
    seconds: float
    # CPU time the hypervisor gave to others while this ran (both cores, /proc/stat "steal").
    steal_s: float | None = None

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.messages * self.size / self.seconds / 1e6


def host_steal_seconds() -> float | None:
    """CPU time this VM's vCPUs were ready but not run (taken by the host or its other guests),
    summed over all CPUs; None where /proc/stat has no such column. A run with much of it was
    measured on a busy host: its figures say little about the broker."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


def produce(
    bootstrap: str, topic: str, count: int, size: int, acks: str, label: str = ""
) -> Result:
    """Send ``count`` messages as fast as librdkafka takes them; the clock starts after a
    warm-up message has been acknowledged, so connection set-up is not part of the figure."""
    errors = 0

    def delivered(err: object, msg: object) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            **THROUGHPUT_PRODUCER,
            # Failures still reach the callback; successes don't cost a Python call each
            # (at 100 B that call is as expensive as the produce() itself).
            "delivery.report.only.error": True,
            "on_delivery": delivered,
        }
    )
    value = os.urandom(size)
    producer.produce(topic, value)
    producer.flush(30)
    started = time.perf_counter()
    produce_all(producer, topic, value, count)
    producer.flush(120)
    seconds = time.perf_counter() - started
    del producer
    if errors:
        raise RuntimeError(f"{errors} messages were not delivered")
    name = f"produce {size} B acks={acks}"
    if label:
        name += f", {count * size / 1e9:.1f} GB {label}"
    return Result(name, count, size, seconds)


def raw_write(path: Path, total: int, label: str = "") -> Result:
    """The baseline for writing new data on this machine: ``os.write`` of ``total`` bytes in
    1 MiB pieces into a fresh file beside the broker's logs, deleted at once afterwards as the
    broker's topics are. On this VM the same write runs at ~4 GB/s into pages freed moments
    ago, ~1 GB/s into the first GB of others, and ~300 MB/s beyond that (kernel time in the
    copy, for any writer): the host hands the VM new memory slowly."""
    chunk = os.urandom(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        written = 0
        while written < total:
            written += os.write(fd, chunk)
        seconds = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink()
    name = "raw os.write, same bytes (baseline)"
    if label:
        name = f"raw os.write, {written / 1e9:.1f} GB {label} (baseline)"
    return Result(name, written >> 10, 1024, seconds)


@contextlib.contextmanager
def bench_topic(admin: AdminClient, data_dir: Path, name: str) -> Iterator[str]:
    """A one-partition topic for one measurement, deleted with its files when it is done, so
    that every measurement starts from the same page cache instead of the one the
    measurements before it left (``file.delete.delay.ms=0``: no minute-long wait)."""
    new = NewTopic(name, 1, 1, config={"file.delete.delay.ms": "0"})
    admin.create_topics([new])[name].result(30)
    try:
        yield name
    finally:
        admin.delete_topics([name])[name].result(30)
        deadline = time.monotonic() + 30
        while any(data_dir.glob(f"{name}-*")) and time.monotonic() < deadline:
            time.sleep(0.05)  # the broker removes the renamed directory in the background


def fetch(bootstrap: str, topic: str, count: int, size: int) -> Result:
    got, seconds = fetch_all(bootstrap, topic, count)
    return Result(f"fetch {size} B", got, size, seconds)


def fetch_kcat(
    bootstrap: str, topic: str, count: int, size: int, consumers: int = 1
) -> Result | None:
    """The same fetch with kcat (librdkafka without Python's per-message objects): closer to
    what the broker itself can serve. One kcat reads at about one core's worth; with
    ``consumers`` > 1 that many read the whole partition at once and the figure is their
    total, which is what the broker served."""
    kcat = shutil.which("kcat")
    if kcat is None:
        return None
    command = [
        kcat,
        "-b",
        bootstrap,
        "-C",
        "-t",
        topic,
        "-o",
        "beginning",
        "-e",
        "-q",
        "-c",
        str(count),
        "-f",
        "%s",
        "-X",
        "fetch.max.bytes=52428800",
        "-X",
        "max.partition.fetch.bytes=10485760",
        "-X",
        "queued.max.messages.kbytes=1000000",
    ]
    started = time.perf_counter()
    readers = [subprocess.Popen(command, stdout=subprocess.DEVNULL) for _ in range(consumers)]
    for reader in readers:
        if reader.wait() != 0:
            raise RuntimeError(f"kcat exited with {reader.returncode}")
    seconds = time.perf_counter() - started
    name = f"fetch {size} B (kcat)" if consumers == 1 else f"fetch {size} B ({consumers} x kcat)"
    return Result(name, count * consumers, size, seconds)


def latency(bootstrap: str, topic: str, rate_mb_s: float, size: int, seconds: float) -> dict:
    """Produce at a fixed rate with acks=1 and measure send-to-ack latency per message.

    A thread blocks in ``poll()`` to run the delivery reports as they arrive; the sending
    thread sleeps to its next tick. librdkafka's poll takes whole milliseconds, so
    ``poll(0.0004)`` returns at once: waiting for a sub-millisecond tick in it spun a core
    that the broker needed.

    Besides the run's p50/p99, the p99 of each second's messages (by send time) and the host
    steal of that second: a vCPU taken by the host for 20 ms delays every message in flight
    by as much, and at 100 messages per millisecond two such pauses are the whole 1% tail."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 1,
            "enable.idempotence": False,
        }
    )
    value = os.urandom(size)
    per_second = rate_mb_s * 1e6 / size
    tick = 0.001
    per_tick = max(1, int(per_second * tick))
    sent_at: list[float] = []
    latencies: list[float] = []

    def delivered(err: object, msg: object, sent: float) -> None:
        sent_at.append(sent)
        latencies.append(time.perf_counter() - sent)

    producer.produce(topic, value)
    producer.flush(30)
    steal_marks = [host_steal_seconds()]
    sending = threading.Event()
    sending.set()

    def serve_reports(producer: Producer) -> None:
        while sending.is_set():
            producer.poll(0.05)

    reporter = threading.Thread(target=serve_reports, args=(producer,), name="delivery-reports")
    reporter.start()
    start = time.perf_counter()
    next_tick = start
    sent = 0
    try:
        while time.perf_counter() - start < seconds:
            now = time.perf_counter()
            if now < next_tick:
                time.sleep(next_tick - now)
                continue
            if now - start >= len(steal_marks):
                steal_marks.append(host_steal_seconds())
            for _ in range(per_tick):
                producer.produce(topic, value, on_delivery=lambda e, m, s=now: delivered(e, m, s))
            sent += per_tick
            next_tick += tick
        steal_marks.append(host_steal_seconds())
        producer.flush(60)
    finally:
        sending.clear()
        reporter.join()
    elapsed = time.perf_counter() - start
    del producer
    per_second_latencies: list[list[float]] = [[] for _ in range(len(steal_marks) - 1)]
    for sent_time, took in zip(sent_at, latencies, strict=True):
        second = min(int(sent_time - start), len(per_second_latencies) - 1)
        per_second_latencies[second].append(took)
    steals = [None if a is None or b is None else b - a for a, b in itertools.pairwise(steal_marks)]
    ordered = sorted(latencies)
    return {
        "steal_s": None if None in steals else sum(s for s in steals if s is not None),
        "achieved_mb_s": sent * size / elapsed / 1e6,
        "p50_ms": 1000 * _quantile(ordered, 0.5),
        "p99_ms": 1000 * _quantile(ordered, 0.99),
        "messages": len(ordered),
        "per_second": [
            (1000 * _quantile(sorted(window), 0.99), steal)
            for window, steal in zip(per_second_latencies, steals, strict=True)
            if window
        ],
    }


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of an ascending list (nearest rank below)."""
    return ordered[int(len(ordered) * q)]


def _per_second_note(lat: dict) -> str:
    return ", ".join(
        f"{p99:.1f}" + ("" if steal is None else f" ({steal:.2f})")
        for p99, steal in lat["per_second"]
    )


def redis_baseline(count: int, size: int) -> Result | None:
    server = shutil.which("redis-server")
    bench = shutil.which("redis-benchmark")
    if not server or not bench:
        return None
    port = 16379
    process = subprocess.Popen(
        [server, "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            ping = subprocess.run(
                ["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True
            )
            if ping.stdout.strip() == "PONG":
                break
            time.sleep(0.05)  # waiting for a foreign process to accept connections
        value = "x" * size
        out = subprocess.run(
            [
                bench,
                "-p",
                str(port),
                "-n",
                str(count),
                "-P",
                "64",
                "-q",
                "--csv",
                "XADD",
                "bench",
                "*",
                "v",
                value,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rps = float(out.strip().splitlines()[-1].split(",")[1].strip('"'))
        return Result(f"redis XADD {size} B (pipelined 64)", count, size, count / rps)
    finally:
        process.terminate()
        process.wait()


def _steal_note(steal_s: float | None) -> str:
    return "" if steal_s is None else f" (host steal {steal_s:.2f} s)"


def _median(results: list[Result]) -> Result:
    ordered = sorted(results, key=lambda r: r.seconds)
    return ordered[len(ordered) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each measurement")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    counts = {100: int(2_000_000 * scale), 1024: int(500_000 * scale)}

    rounds: dict[str, list[Result]] = {}
    latencies: list[dict] = []

    def record(measure: Callable[..., Result | None], *args: object) -> None:
        steal_before = host_steal_seconds()
        result = measure(*args)
        if result is None:
            return
        steal_after = host_steal_seconds()
        if steal_before is not None and steal_after is not None:
            result.steal_s = steal_after - steal_before
        rounds.setdefault(result.name, []).append(result)
        print(
            f"{result.name}: {result.msgs_per_s:,.0f} msg/s, {result.mb_per_s:,.1f} MB/s"
            f"{_steal_note(result.steal_s)}"
        )

    data_dir = Path(tempfile.mkdtemp(prefix="josefk-bench-"))
    broker = ServeProcess(data_dir)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for n in range(args.rounds):
            # Latency at a moderate rate first, once the machine has settled: right after the
            # previous round wrote and deleted gigabytes, woken threads wait ~30 ms at times
            # for the host to run an idle vCPU (p99 3.6-604 ms measured then, 2.4-5.5 ms after
            # a sync and a pause).
            os.sync()
            time.sleep(SETTLE_S)
            with bench_topic(admin, data_dir, f"latency-r{n}") as topic:
                lat = latency(broker.bootstrap, topic, 100.0 if not args.quick else 20.0, 1024, 5.0)
            latencies.append(lat)
            print(
                f"latency at {lat['achieved_mb_s']:.1f} MB/s: p50 {lat['p50_ms']:.2f} ms, "
                f"p99 {lat['p99_ms']:.2f} ms{_steal_note(lat['steal_s'])}; "
                f"p99 per second (host steal): {_per_second_note(lat)}"
            )
            for size, count in counts.items():
                for acks in ("1", "all"):
                    with bench_topic(admin, data_dir, f"bench-{size}-{acks}-r{n}") as topic:
                        record(produce, broker.bootstrap, topic, count, size, acks)
                        if acks == "1":
                            record(fetch, broker.bootstrap, topic, count, size)
                            record(fetch_kcat, broker.bootstrap, topic, count, size)
                            if size == 1024:
                                record(fetch_kcat, broker.bootstrap, topic, count, size, 2)
                if size == 1024:
                    record(raw_write, data_dir / f"raw-write-r{n}", count * size)
            # Longer than the ~1 GB of new memory this VM's host gives at full speed: what a
            # producer that keeps going gets here, next to a bare write of as many bytes.
            # Each starts after the same pause: pages freed moments ago are written at
            # ~4 GB/s, so whichever ran second would otherwise reuse the first one's.
            sustained = counts[1024] * 6
            time.sleep(SETTLE_S)
            with bench_topic(admin, data_dir, f"sustained-r{n}") as topic:
                record(produce, broker.bootstrap, topic, sustained, 1024, "1", "sustained")
            time.sleep(SETTLE_S)
            record(raw_write, data_dir / f"raw-write-r{n}", sustained * 1024, "sustained")
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)

    for _ in range(args.rounds):
        for size, count in counts.items():
            record(redis_baseline, count, size)

    print(
        f"\n| measurement | msg/s (median of {args.rounds}) | MB/s (median) | MB/s per round "
        "| host steal (s) per round |\n| --- | ---: | ---: | --- | --- |"
    )
    for name, results in rounds.items():
        mid = _median(results)
        each = " / ".join(f"{r.mb_per_s:,.1f}" for r in results)
        steal = " / ".join("-" if r.steal_s is None else f"{r.steal_s:.2f}" for r in results)
        print(f"| {name} | {mid.msgs_per_s:,.0f} | {mid.mb_per_s:,.1f} | {each} | {steal} |")
    print("\nProduce latency, 1 KiB, acks=1, per round:")
    for lat in latencies:
        print(
            f"- offered {lat['achieved_mb_s']:.1f} MB/s: p50 {lat['p50_ms']:.2f} ms, "
            f"p99 {lat['p99_ms']:.2f} ms ({lat['messages']:,} messages)"
            f"{_steal_note(lat['steal_s'])}; p99 per second (host steal): {_per_second_note(lat)}"
        )


if __name__ == "__main__":
    main()
