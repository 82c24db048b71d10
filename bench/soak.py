"""A soak run: real clients against a broker that is SIGKILLed and restarted every few seconds.

One real ``josefk serve`` with segment rolls and retention on short settings (1 MiB segments,
a retention check every second, and a second topic whose records expire after 5 s so that
segments are deleted all along), driven by confluent-kafka (librdkafka):

- an idempotent acks=all producer sends numbered records round robin to 3 partitions of
  ``soak`` the whole time and keeps what was acknowledged;
- a second producer writes to the expiring topic ``churn``;
- a consumer group of two members reads ``soak``, committing every second; the committed
  offsets are sampled all along;
- every ``--kill-every`` seconds the broker is SIGKILLed and restarted on the same data dir.

At the end every acknowledged record must be read back exactly once, at its acknowledged
offset, in order per partition (a fresh reader from offset 0); no committed offset may ever
have gone backwards; the broker's log must hold no traceback. Prints the counts and a
PASS/FAIL line; exits 1 on FAIL. Loopback only, bounded in time.

    .venv/bin/python bench/soak.py --duration 180 --kill-every 5
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from broker_process import BrokerProcess  # noqa: E402
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 3
SETTINGS = [
    "log.segment.bytes=1048576",
    "log.retention.check.interval.ms=1000",
    "offsets.topic.num.partitions=3",
    "group.initial.rebalance.delay.ms=0",
]


class Soak:
    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.stop = threading.Event()
        self.acked: dict[tuple[int, int], bytes] = {}
        self.produce_errors: list[str] = []
        self.sent = 0
        self.consumed = 0
        self.commit_samples = 0
        self.backwards: list[str] = []
        self._committed: dict[int, int] = {}
        self._lock = threading.Lock()

    def producer(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.broker.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 300_000,
                "log_level": 0,
            }
        )

        def done(err: Any, msg: Any) -> None:
            if err is not None:
                self.produce_errors.append(str(err))
            else:
                self.acked[(msg.partition(), msg.offset())] = msg.value()

        while not self.stop.is_set():
            try:
                p.produce(
                    "soak", f"record-{self.sent}".encode(), partition=self.sent % PARTITIONS,
                    on_delivery=done,
                )  # fmt: skip
                self.sent += 1
            except BufferError:
                pass
            p.poll(0.001)
        if p.flush(300) != 0:
            self.produce_errors.append("records still unacknowledged at the end")

    def churn(self) -> None:
        p = Producer({"bootstrap.servers": self.broker.bootstrap, "linger.ms": 20, "log_level": 0})
        while not self.stop.is_set():
            try:
                p.produce("churn", b"x" * 1000)
            except BufferError:
                pass
            p.poll(0.001)
        p.flush(30)

    def member(self, name: str) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.broker.bootstrap,
                "group.id": "soak-group",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 1000,
                "session.timeout.ms": 10_000,
                "log_level": 0,
            }
        )
        c.subscribe(["soak"])
        last_sample = time.monotonic()
        try:
            while not self.stop.is_set():
                message = c.poll(0.2)
                if message is not None and not message.error():
                    self.consumed += 1
                if time.monotonic() - last_sample > 1.0:
                    last_sample = time.monotonic()
                    self.sample(c)
        finally:
            c.close()

    def sample(self, consumer: Consumer) -> None:
        try:
            offsets = consumer.committed(
                [TopicPartition("soak", p) for p in range(PARTITIONS)], timeout=5
            )
        except KafkaException:
            return  # the broker is down right now
        with self._lock:
            self.commit_samples += 1
            for tp in offsets:
                if tp.offset < 0:
                    continue
                before = self._committed.get(tp.partition, -1)
                if tp.offset < before:
                    self.backwards.append(f"partition {tp.partition}: {before} -> {tp.offset}")
                self._committed[tp.partition] = max(before, tp.offset)


def read_back(bootstrap: str) -> dict[int, list[tuple[int, bytes]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-verifier", "log_level": 0})
    ends = {
        p: c.get_watermark_offsets(TopicPartition("soak", p), timeout=30)[1]
        for p in range(PARTITIONS)
    }
    c.assign([TopicPartition("soak", p, 0) for p in range(PARTITIONS)])
    found: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    remaining = sum(ends.values())
    deadline = time.monotonic() + 300
    while remaining and time.monotonic() < deadline:
        message = c.poll(0.5)
        if message is None or message.error():
            continue
        found[message.partition()].append((message.offset(), message.value()))
        remaining -= 1
    c.close()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=180.0)
    parser.add_argument("--kill-every", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="josefk-soak-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", Path(tmp) / "broker.log", settings=SETTINGS)
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = [
            NewTopic("soak", PARTITIONS, 1),
            NewTopic("churn", 1, 1, config={"retention.ms": "5000", "segment.bytes": "262144"}),
        ]
        for future in admin.create_topics(topics).values():
            future.result(30)
        soak = Soak(broker)
        threads = [
            threading.Thread(target=soak.producer),
            threading.Thread(target=soak.churn),
            threading.Thread(target=soak.member, args=("m1",)),
            threading.Thread(target=soak.member, args=("m2",)),
        ]
        for thread in threads:
            thread.start()
        kills = 0
        end = time.monotonic() + args.duration
        try:
            while time.monotonic() < end:
                time.sleep(args.kill_every)
                broker.kill()
                broker.start()
                kills += 1
        finally:
            soak.stop.set()
            for thread in threads:
                thread.join(360)
        found = read_back(broker.bootstrap)
        log = (Path(tmp) / "broker.log").read_text(errors="replace")
        broker.stop()

    problems = []
    for partition, records in found.items():
        offsets = [o for o, _ in records]
        if offsets != list(range(len(offsets))):
            problems.append(f"partition {partition}: offsets not contiguous from 0")
        values = [v for _, v in records]
        if len(values) != len(set(values)):
            problems.append(f"partition {partition}: {len(values) - len(set(values))} duplicates")
    read = {(p, o): v for p, records in found.items() for o, v in records}
    lost = [key for key, value in soak.acked.items() if read.get(key) != value]
    if lost:
        problems.append(f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:3]}")
    if soak.backwards:
        problems.append(f"committed offsets went backwards: {soak.backwards[:3]}")
    tracebacks = log.count("Traceback")
    if tracebacks:
        problems.append(f"{tracebacks} tracebacks in the broker log")
    if soak.produce_errors:
        problems.append(
            f"{len(soak.produce_errors)} produce errors, e.g. {soak.produce_errors[:2]}"
        )
    print(f"duration {args.duration:.0f} s, broker SIGKILLed and restarted {kills} times")
    print(f"records sent {soak.sent}, acknowledged {len(soak.acked)}, read back {len(read)}")
    print(
        f"group members consumed {soak.consumed}; committed offsets sampled {soak.commit_samples} times"
    )
    print("PASS" if not problems else "FAIL: " + "; ".join(problems))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
