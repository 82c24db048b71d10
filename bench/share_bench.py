"""Queue benchmark: one partition read by 1, 4 and 16 members of a share group (KIP-932),
beside the same numbers of members of a consumer group on the same partition.

Starts one real ``josefk serve``, fills a one-partition topic, then for each member count and
each kind of group starts that many confluent-kafka members (one thread each) that spend a
simulated 5 ms of work per record (``time.sleep``, which frees the GIL as real I/O would).
After a warm-up it counts, over a fixed window:

- ``records/s``: records processed (share group: acknowledged, implicitly, on the next poll;
  consumer group: consumed, offsets auto-committed) per second by all members together;
- ``broker CPU per record``: the broker process's own CPU time (utime+stime from
  /proc/<pid>/stat) over the window divided by the records processed in it.

A consumer group gives one partition to one member, so its throughput stays that member's
(~200 records/s at 5 ms each) however many join; a share group hands each member the records
it acquires, so throughput grows with members beyond the partition count (the point of
queues). Share members fetch at most ``max.poll.records`` (10) records at a time so that one
member does not hold what the others could work on.

    python bench/share_bench.py                  # prints a Markdown table
    python bench/share_bench.py --window 15

Not a test: nothing here asserts. Clients and broker share the machine's two cores.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from serve_process import ServeProcess, cpu_seconds

from josefk.client.sync import Admin
from josefk.client.types import TopicPartition

WORK_S = 0.005
MEMBERS = (1, 4, 16)
RECORDS = 200_000
VALUE = b"x" * 100


@dataclass
class Member:
    kind: str
    bootstrap: str
    group: str
    topic: str
    stop: threading.Event
    processed: int = 0
    errors: list[str] = field(default_factory=list)

    def run(self) -> None:
        try:
            if self.kind == "share":
                self._share()
            else:
                self._consumer()
        except Exception as exc:  # noqa: BLE001  a bench reports, it does not die
            self.errors.append(repr(exc))

    def _share(self) -> None:
        consumer = ShareConsumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "max.poll.records": 10,
                "log_level": 3,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                for message in consumer.poll(0.2):
                    if message.error() is None:
                        time.sleep(WORK_S)
                        self.processed += 1
        finally:
            consumer.close()

    def _consumer(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "log_level": 3,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    time.sleep(WORK_S)
                    self.processed += 1
        finally:
            consumer.close()


def start_at_zero(bootstrap: str, group: str, topic: str) -> None:
    """The share group's start offset at 0 (AlterShareGroupOffsets on the empty group):
    it reads the topic from its start, as share.auto.offset.reset=earliest would."""
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 0})


def run(server: ServeProcess, kind: str, members: int, window_s: float) -> tuple[float, float]:
    """(records/s, broker CPU microseconds per record) of ``members`` members of a group of
    ``kind`` ("share" or "consumer") reading a new one-partition topic."""
    bootstrap = server.bootstrap
    topic = f"queue-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    # The Java producer's default batch.size (16 KiB): a share fetch returns whole batches.
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 16384, "log_level": 3}
    )
    for _ in range(RECORDS):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.001)
    producer.flush(60)
    group = f"{kind}-{uuid.uuid4().hex[:8]}"
    if kind == "share":
        start_at_zero(bootstrap, group, topic)
    stop = threading.Event()
    crew = [Member(kind, bootstrap, group, topic, stop) for _ in range(members)]
    threads = [threading.Thread(target=m.run, daemon=True) for m in crew]
    for t in threads:
        t.start()
    # Warm-up: every member joined and the group delivers.
    deadline = time.monotonic() + 60
    while sum(m.processed for m in crew) < 50 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2.0)
    before = sum(m.processed for m in crew)
    cpu_before = cpu_seconds(server.process.pid)
    started = time.monotonic()
    time.sleep(window_s)
    done = sum(m.processed for m in crew) - before
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(server.process.pid) - cpu_before
    stop.set()
    for t in threads:
        t.join(30)
    for m in crew:
        for error in m.errors:
            print(f"  {kind} member error: {error}")
    return done / elapsed, (cpu / done * 1e6) if done else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured per run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="josefk-share-bench-") as tmp:
        server = ServeProcess(
            Path(tmp) / "data", settings=["group.share.heartbeat.interval.ms=500"]
        )
        rows: list[tuple[int, Any, Any, Any, Any]] = []
        try:
            for members in MEMBERS:
                share_rate, share_cpu = run(server, "share", members, args.window)
                group_rate, group_cpu = run(server, "consumer", members, args.window)
                rows.append((members, share_rate, share_cpu, group_rate, group_cpu))
                print(
                    f"{members:>2} members: share {share_rate:7.0f} rec/s "
                    f"({share_cpu:6.0f} us CPU/rec), consumer group {group_rate:7.0f} rec/s "
                    f"({group_cpu:6.0f} us CPU/rec)",
                    flush=True,
                )
        finally:
            server.stop()
    print()
    print(
        "| members | share group, records/s | broker CPU per acknowledged record "
        "| consumer group, records/s | broker CPU per record |"
    )
    print("| --- | --- | --- | --- | --- |")
    for members, share_rate, share_cpu, group_rate, group_cpu in rows:
        print(
            f"| {members} | {share_rate:.0f} | {share_cpu:.0f} us | {group_rate:.0f} "
            f"| {group_cpu:.0f} us |"
        )


if __name__ == "__main__":
    main()
