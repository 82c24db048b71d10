"""Compaction benchmark: the log cleaner against a raw copy, produce latency while it runs, and
a broker's start-up after a million offset commits.

1. Cleaner throughput: a compacted log of keyed 200-byte records (``--log-mb``, 50,000 keys)
   is cleaned by ``LogCleaner.clean_once`` in this process (the code a worker process runs,
   plus the swap); MB/s of dirty log cleaned, next to a raw copy of the same segment files
   (read, write, fsync) measured in the same run.
2. Produce p99 with and without cleaning: one ``josefk serve``; a topic of ``--log-mb`` keyed
   records is made compacted at run time while a librdkafka producer sends 1 KB records at a
   fixed rate to another topic (acks=1); p99 of that window against the same window measured
   just before, with nothing to clean. The broker's own CPU seconds and the cleaner worker's
   are reported apart.
3. Start-up after 1,000,000 offset commits from 1,000 groups (OffsetCommit requests of 10
   partitions, josefk's client, 50 offsets partitions): the time from starting
   ``josefk serve`` to its ready line, without cleaning (``log.cleaner.enable=false``, every
   commit replayed) and after the cleaner ran (``offsets.topic.segment.bytes`` as given, so
   the offsets partitions roll and have something to clean; the active segment of each is
   never cleaned, as in Kafka).

Usage: ``python bench/compaction_bench.py [--log-mb N] [--commits N] [--skip-startup]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serve_process import ServeProcess  # noqa: E402

from josefk.config.topic import LogConfig  # noqa: E402
from josefk.records import BatchBuilder  # noqa: E402
from josefk.storage.log import Log  # noqa: E402
from josefk.storage.log_cleaner import CleanerConfig, LogCleaner  # noqa: E402
from josefk.util.clock import SystemClock  # noqa: E402
from josefk.util.scheduler import InlineExecutor  # noqa: E402

MB = 1_000_000
KEYS = 50_000


def keyed_batches(total_bytes: int, seed: int = 1) -> list[bytearray]:
    rnd = random.Random(seed)
    value = os.urandom(200)
    batches, size = [], 0
    while size < total_bytes:
        builder = BatchBuilder()
        for _ in range(100):
            builder.append(f"key-{rnd.randrange(KEYS):06d}".encode(), value, timestamp=1)
        batch = builder.build()
        batches.append(batch)
        size += len(batch)
    return batches


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_of(pid: int) -> list[int]:
    result = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                result.append(int(entry.name))
    return result


# -- 1. cleaner throughput ----------------------------------------------------------------------


def cleaner_throughput(base: Path, log_mb: int) -> dict[str, float]:
    directory = base / "cleaned-0"
    config = LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=64 * 1024 * 1024,
        min_cleanable_dirty_ratio=0.0,
    )
    clock = SystemClock()
    log = Log.load(directory, config, clock=clock, executor=InlineExecutor())
    for batch in keyed_batches(log_mb * MB):
        log.append_as_leader(batch, 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    dirty = log.size()
    files = [s.path for s in log.log_segments() if s.size()]
    # Baseline: copy the same files, read and written whole, fsynced.
    copy_dir = base / "copy"
    copy_dir.mkdir()
    started = time.perf_counter()
    for path in files:
        target = copy_dir / path.name
        shutil.copyfile(path, target)
        fd = os.open(target, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    copy_s = time.perf_counter() - started
    shutil.rmtree(copy_dir)
    cleaner = LogCleaner(
        CleanerConfig(), logs=lambda: [log], clock=clock, executor=InlineExecutor()
    )
    cpu_before = time.process_time()
    started = time.perf_counter()
    assert asyncio.run(cleaner.clean_once())
    clean_s = time.perf_counter() - started
    clean_cpu = time.process_time() - cpu_before
    after = log.size()
    log.close()
    return {
        "dirty_mb": dirty / MB,
        "kept_mb": after / MB,
        "clean_mb_s": dirty / MB / clean_s,
        "clean_cpu_s_per_gb": clean_cpu / (dirty / 1e9),
        "copy_mb_s": dirty / MB / copy_s,
    }


# -- a broker ------------------------------------------------------------------------------------


def checkpoint(data_dir: Path) -> dict[tuple[str, int], int]:
    try:
        lines = (data_dir / "cleaner-offset-checkpoint").read_text().splitlines()[2:]
    except FileNotFoundError:
        return {}
    out = {}
    for line in lines:
        topic, partition, offset = line.split()
        out[(topic, int(partition))] = int(offset)
    return out


# -- 2. produce latency while cleaning -----------------------------------------------------------


def latency_window(bootstrap: str, topic: str, seconds: float, rate: int = 2000) -> list[float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 1})
    value = os.urandom(1000)
    latencies: list[float] = []
    running = threading.Event()
    running.set()

    def reports() -> None:
        while running.is_set():
            producer.poll(0.05)

    thread = threading.Thread(target=reports)
    thread.start()
    start = time.perf_counter()
    tick = 0.001
    next_tick = start
    per_tick = max(1, int(rate * tick))
    try:
        while time.perf_counter() - start < seconds:
            now = time.perf_counter()
            if now < next_tick:
                time.sleep(next_tick - now)
                continue
            for _ in range(per_tick):
                producer.produce(
                    topic,
                    value,
                    on_delivery=lambda err, msg, s=now: latencies.append(time.perf_counter() - s),
                )
            next_tick += tick
        producer.flush(60)
    finally:
        running.clear()
        thread.join()
    return sorted(latencies)


def p99(ordered: list[float]) -> float:
    return 1000 * ordered[int(len(ordered) * 0.99)]


def produce_while_cleaning(base: Path, log_mb: int) -> dict[str, float]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    data_dir = base / "latency"
    broker = ServeProcess(data_dir, ["log.cleaner.backoff.ms=200"])
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = [
            NewTopic(
                "table",
                1,
                1,
                config={
                    "segment.bytes": str(min(8 * 1024 * 1024, log_mb * MB // 8)),
                    "min.cleanable.dirty.ratio": "0.01",
                },
            ),
            NewTopic("events", 1, 1),
        ]
        for future in admin.create_topics(topics).values():
            future.result(30)
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 1_000_000}
        )
        rnd = random.Random(2)
        value = os.urandom(200)
        for _ in range(log_mb * MB // 230):
            producer.produce("table", value, key=f"key-{rnd.randrange(KEYS):06d}".encode())
            if len(producer) > 100_000:
                producer.poll(0.1)
        producer.produce("table", value, key=b"roll")
        producer.flush(120)
        del producer
        latency_window(broker.bootstrap, "events", 2)  # warm-up
        broker_pid = broker.process.pid
        cpu0 = cpu_seconds(broker_pid)
        quiet = latency_window(broker.bootstrap, "events", 8)
        cpu1 = cpu_seconds(broker_pid)
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            "table",
            incremental_configs=[
                ConfigEntry(
                    "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET
                )
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        started = time.perf_counter()
        done: list[float] = []

        def watch() -> None:
            deadline = time.monotonic() + 120
            while ("table", 0) not in checkpoint(data_dir):
                if time.monotonic() > deadline:  # too little data to roll a segment
                    done.append(float("nan"))
                    return
                time.sleep(0.05)
            done.append(time.perf_counter() - started)

        watcher = threading.Thread(target=watch)
        watcher.start()
        busy = latency_window(broker.bootstrap, "events", 8)
        cpu2 = cpu_seconds(broker_pid)
        watcher.join()
        cleaned_s = done[0]
        worker_cpu = sum(cpu_seconds(pid) for pid in children_of(broker_pid))
        return {
            "quiet_p99_ms": p99(quiet),
            "busy_p99_ms": p99(busy),
            "quiet_p50_ms": 1000 * quiet[len(quiet) // 2],
            "busy_p50_ms": 1000 * busy[len(busy) // 2],
            "cleaning_s": cleaned_s,
            "broker_cpu_quiet_s": cpu1 - cpu0,
            "broker_cpu_busy_s": cpu2 - cpu1,
            "worker_cpu_s": worker_cpu,
        }
    finally:
        broker.stop()


# -- 3. start-up after a million commits -------------------------------------------------------


async def commit_many(bootstrap: str, commits: int, groups: int) -> float:
    from josefk.client.cluster import KafkaClient
    from josefk.client.offsets import commit_offsets
    from josefk.client.types import TopicPartition

    client = KafkaClient(bootstrap_servers=bootstrap)
    await client.start()
    node = next(iter(client.metadata.brokers))
    per_request = 10
    requests_per_group = commits // groups // per_request
    started = time.perf_counter()

    async def one_group(group: int) -> None:
        name = f"bench-group-{group:04d}"
        for round_ in range(requests_per_group):
            await commit_offsets(
                client,
                node,
                name,
                {TopicPartition("source", p): round_ for p in range(per_request)},
            )

    await asyncio.gather(*(one_group(g) for g in range(groups)))
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


def startup_after_commits(base: Path, commits: int, segment_bytes: int) -> dict[str, float]:
    data_dir = base / "offsets"
    settings = [f"offsets.topic.segment.bytes={segment_bytes}", "log.cleaner.backoff.ms=500"]
    broker = ServeProcess(data_dir, [*settings, "log.cleaner.enable=false"])
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("source", 10, 1)])["source"].result(30)
        commit_s = asyncio.run(commit_many(broker.bootstrap, commits, 1000))
    finally:
        broker.stop()
    size = sum(p.stat().st_size for p in data_dir.glob("__consumer_offsets-*/*.log"))
    timings = []
    for _ in range(2):
        broker = ServeProcess(data_dir, [*settings, "log.cleaner.enable=false"])
        timings.append(broker.ready_s)
        broker.stop()
    without = min(timings)
    broker = ServeProcess(data_dir, settings)
    try:
        rolled = {
            int(d.name.rsplit("-", 1)[1])
            for d in data_dir.glob("__consumer_offsets-*")
            if len(list(d.glob("*.log"))) > 1
        }
        deadline = time.monotonic() + 600
        while not rolled <= {p for (t, p) in checkpoint(data_dir) if t == "__consumer_offsets"}:
            assert time.monotonic() < deadline, "the cleaner did not finish"
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        broker.stop()
    cleaned_size = sum(p.stat().st_size for p in data_dir.glob("__consumer_offsets-*/*.log"))
    timings = []
    for _ in range(2):
        broker = ServeProcess(data_dir, settings)
        timings.append(broker.ready_s)
        broker.stop()
    return {
        "commit_s": commit_s,
        "offsets_mb": size / MB,
        "cleaned_mb": cleaned_size / MB,
        "startup_without_s": without,
        "startup_cleaned_s": min(timings),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-mb", type=int, default=300)
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--offsets-segment-bytes", type=int, default=1024 * 1024)
    parser.add_argument("--skip-startup", action="store_true")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="josefk-compaction-bench-"))
    try:
        result = cleaner_throughput(base, args.log_mb)
        print(
            f"cleaner: {result['dirty_mb']:.0f} MB dirty -> {result['kept_mb']:.1f} MB kept, "
            f"{result['clean_mb_s']:.1f} MB/s ({result['clean_cpu_s_per_gb']:.1f} CPU s/GB); "
            f"raw copy of the same files {result['copy_mb_s']:.0f} MB/s",
            flush=True,
        )
        lat = produce_while_cleaning(base, args.log_mb)
        print(
            f"produce 2,000 x 1 KB/s acks=1: p99 {lat['quiet_p99_ms']:.1f} ms without cleaning, "
            f"{lat['busy_p99_ms']:.1f} ms while cleaning (p50 {lat['quiet_p50_ms']:.1f} / "
            f"{lat['busy_p50_ms']:.1f}); cleaning took {lat['cleaning_s']:.1f} s; broker CPU "
            f"{lat['broker_cpu_quiet_s']:.1f} s / {lat['broker_cpu_busy_s']:.1f} s per 8 s "
            f"window, cleaner worker {lat['worker_cpu_s']:.1f} s",
            flush=True,
        )
        if not args.skip_startup:
            up = startup_after_commits(base, args.commits, args.offsets_segment_bytes)
            print(
                f"{args.commits:,} commits from 1,000 groups in {up['commit_s']:.0f} s "
                f"({up['offsets_mb']:.0f} MB of __consumer_offsets, {up['cleaned_mb']:.1f} MB "
                f"after cleaning); start-up {up['startup_without_s']:.2f} s without cleaning, "
                f"{up['startup_cleaned_s']:.2f} s after cleaning "
                f"(offsets.topic.segment.bytes={args.offsets_segment_bytes})",
                flush=True,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
