"""Memory under load (issue 34): the broker's resident memory over a long run at half its peak.

One real ``josefk serve`` (from this tree) with short retention so the disk stays bounded
(64 MiB segments, 256 MiB per partition, a retention check every 10 s). A librdkafka
(confluent-kafka) producer, acks=1, 1 KiB records round robin over ``--partitions``
partitions of one topic:

1. peak: as fast as it goes for ``--peak-seconds``: the peak MB/s;
2. soak: ``--fraction`` of that rate (paced in 100 ms slots) for ``--duration`` seconds, while
   a consumer reads the topic along; the broker's VmRSS (and CPU seconds, open fds) sampled
   every ``--sample`` seconds.

Prints the samples as a Markdown table and a summary: RSS at the start and end of the soak,
its minimum and maximum, and the growth over the second half (flat means the second half
grew by no more than a few MB). Loopback only, bounded in time.

    .venv/bin/python bench/memory_soak.py --duration 1800 --sample 60
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from scale_bench import Broker  # noqa: E402
from serve_process import THROUGHPUT_PRODUCER  # noqa: E402

RECORD = b"m" * 1024
TOPIC = "soak-memory"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=1800.0)
    parser.add_argument("--sample", type=float, default=60.0)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--peak-seconds", type=float, default=20.0)
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--tmp", default=None)
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the source tree the broker runs from"
    )
    args = parser.parse_args()

    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    work = Path(tempfile.mkdtemp(prefix="memory-soak-", dir=args.tmp))
    broker = Broker(
        args.root,
        work / "data",
        work / "broker.log",
        settings=("log.retention.check.interval.ms=10000",),
    )
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = NewTopic(
            TOPIC,
            args.partitions,
            1,
            config={"segment.bytes": str(64 << 20), "retention.bytes": str(256 << 20)},
        )
        admin.create_topics([topic])[TOPIC].result(timeout=60)
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "acks": 1, **THROUGHPUT_PRODUCER}
        )
        partitions = args.partitions
        sent = 0

        def send(count: int) -> None:
            nonlocal sent
            for _ in range(count):
                while True:
                    try:
                        producer.produce(TOPIC, RECORD, partition=sent % partitions)
                        break
                    except BufferError:
                        producer.poll(0.001)
                sent += 1
            producer.poll(0)

        # 1. peak
        started = time.perf_counter()
        while time.perf_counter() - started < args.peak_seconds:
            send(1000)
        producer.flush(120)
        peak = sent * len(RECORD) / 1e6 / (time.perf_counter() - started)
        target = peak * args.fraction
        print(f"# peak {peak:.1f} MB/s; soak at {target:.1f} MB/s", file=sys.stderr, flush=True)

        # 2. soak, with a consumer reading along
        stop = threading.Event()
        consumed = 0

        def consume() -> None:
            nonlocal consumed
            consumer = Consumer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": "memory-soak",
                    "auto.offset.reset": "latest",
                    "enable.auto.commit": True,
                }
            )
            consumer.subscribe([TOPIC])
            while not stop.is_set():
                consumed += sum(1 for m in consumer.consume(10_000, 0.5) if m.error() is None)
            consumer.close()

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        per_slot = max(1, int(target * 1e6 / len(RECORD) / 10))
        samples: list[tuple[float, float, float, int, int]] = []
        begin = time.perf_counter()
        next_sample = begin
        slot = begin
        sent_at_start = sent
        while True:
            now = time.perf_counter()
            if now >= next_sample:
                samples.append(
                    (now - begin, broker.rss_mb(), broker.cpu(), broker.fds(), sent - sent_at_start)
                )
                print(
                    f"# t={now - begin:.0f}s rss={samples[-1][1]:.0f} MB",
                    file=sys.stderr,
                    flush=True,
                )
                next_sample += args.sample
            if now - begin >= args.duration:
                break
            send(per_slot)
            slot += 0.1
            pause = slot - time.perf_counter()
            if pause > 0:
                # Not poll(pause): it returns as soon as a delivery report is served.
                time.sleep(pause)
        producer.flush(120)
        stop.set()
        reader.join(timeout=30)
        elapsed = time.perf_counter() - begin
        rate = (sent - sent_at_start) * len(RECORD) / 1e6 / elapsed
        print(
            f"peak {peak:.1f} MB/s; soak {rate:.1f} MB/s for {elapsed:.0f} s; "
            f"consumed {consumed:,} records"
        )
        print("| t (s) | RSS (MB) | broker CPU (s) | open fds | records sent |")
        print("|---|---|---|---|---|")
        for t, rss, cpu, fds, count in samples:
            print(f"| {t:.0f} | {rss:.0f} | {cpu:.0f} | {fds} | {count:,} |")
        rss_values = [s[1] for s in samples]
        half = [s[1] for s in samples if s[0] >= args.duration / 2]
        print(
            f"RSS start {rss_values[0]:.0f} MB, end {rss_values[-1]:.0f} MB, "
            f"min {min(rss_values):.0f}, max {max(rss_values):.0f}; "
            f"second half grew {half[-1] - half[0]:+.0f} MB"
        )
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
