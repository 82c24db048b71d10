"""The long replication run of Kafka's own system tests: bounce the leader while producing.

A real etcd and three ``josefk serve`` brokers on this machine; a topic of ``--partitions``
partitions, RF=3, min.insync.replicas=2; an idempotent confluent-kafka producer with
acks=all producing numbered records the whole time. The leader of partition 0 is stopped
cleanly (SIGTERM: controlled shutdown) and restarted ``--bounces`` times, then SIGKILLed and
restarted as many times; after each restart the run waits for the full ISR again.

Afterwards every acknowledged record must be read back exactly once at the offset its
acknowledgement gave, offsets must run without gaps, and every replica's log must hold the
same batches (base offsets and CRCs compared across the three brokers). Prints, per bounce,
the seconds until a new leader was named and until the ISR was full again, then the verdict;
exits 1 on any anomaly. Too long for the test suite; figures go into docs/benchmarks.md.

    .venv/bin/python bench/cluster_bounce.py            # 5 clean stops, 5 SIGKILLs
    .venv/bin/python bench/cluster_bounce.py --bounces 1
"""

from __future__ import annotations

import argparse
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from cluster_bench import Cluster
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

TOPIC = "bounced"


class Load:
    """Numbered records round robin over the partitions; keeps what was acknowledged."""

    def __init__(self, bootstrap: str, partitions: int) -> None:
        self.partitions = partitions
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 300_000,
                "log_level": 2,
            }
        )
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _done(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[(msg.partition(), msg.offset())] = msg.value()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.produce(
                    TOPIC,
                    f"record-{self.sent}".encode(),
                    partition=self.sent % self.partitions,
                    on_delivery=self._done,
                )
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.001)

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        left = self.producer.flush(300)
        if left:
            self.failed.append(f"{left} records never acknowledged")


def wait(what: str, probe: Any, timeout: float = 120.0) -> float:
    """Seconds until ``probe()`` is true; exits if it never is."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if probe():
                return time.monotonic() - start
        except KafkaException:
            pass
        time.sleep(0.05)
    sys.exit(f"timed out waiting for {what}")


def states(cluster: Cluster) -> dict[int, tuple[int, int]]:
    """partition -> (leader, ISR size)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 2})
    found = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    return {p: (m.leader, len(m.isrs)) for p, m in found.items()}


def read_back(cluster: Cluster, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "bounce-verifier",
            "enable.auto.commit": False,
            "check.crcs": True,
            "log_level": 2,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        found: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        remaining = sum(ends.values())
        deadline = time.monotonic() + 300
        while remaining > 0 and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error():
                    raise KafkaException(message.error())
                found[message.partition()].append((message.offset(), message.value()))
                remaining -= 1
        return found
    finally:
        consumer.close()


def batches(directory: Path) -> list[tuple[int, int]]:
    """(base offset, CRC) of every batch in a partition directory's segments."""
    out = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, position)
            (crc,) = struct.unpack_from(">I", data, position + 17)
            out.append((base, crc))
            position += 12 + length
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bounces", type=int, default=5, help="clean stops, then as many kills")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--session-ms", type=int, default=6000)
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="josefk-bounce-"))
    cluster = Cluster(base, args.session_ms).start()
    anomalies: list[str] = []
    try:
        cluster.create(TOPIC, args.partitions, 3, 2)
        load = Load(cluster.bootstrap, args.partitions).start()
        wait("first acknowledgements", lambda: len(load.acked) > 1000)
        print(f"{'bounce':>8} {'how':>5} {'leader':>6} {'new leader s':>12} {'full ISR s':>10}")
        for number, how in enumerate(["stop"] * args.bounces + ["kill"] * args.bounces, 1):
            leader = states(cluster)[0][0]
            process = cluster.brokers[leader]
            started = time.monotonic()
            process.send_signal(signal.SIGTERM if how == "stop" else signal.SIGKILL)
            process.wait(60)
            wait("a new leader", lambda leader=leader: states(cluster)[0][0] not in (-1, leader))
            elected = time.monotonic() - started
            acked = len(load.acked)
            wait("acknowledgements from the new leader", lambda a=acked: len(load.acked) > a + 100)
            cluster.start_broker(leader)
            wait("the full ISR", lambda: all(n == 3 for _, n in states(cluster).values()))
            print(
                f"{number:>8} {how:>5} {leader:>6} {elected:>12.2f} "
                f"{time.monotonic() - started:>10.2f}",
                flush=True,
            )
        load.stop()
        anomalies += load.failed

        found = read_back(cluster, args.partitions)
        for partition, records in found.items():
            offsets = [o for o, _ in records]
            if offsets != list(range(len(offsets))):
                anomalies.append(f"partition {partition}: offsets not contiguous from 0")
            values = [v for _, v in records]
            if len(values) != len(set(values)):
                anomalies.append(f"partition {partition}: duplicate records")
        consumed = {(p, o): v for p, records in found.items() for o, v in records}
        lost = [key for key, value in load.acked.items() if consumed.get(key) != value]
        if lost:
            anomalies.append(f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:3]}")

        def replicas_agree() -> bool:
            return all(
                len({tuple(batches(base / f"broker{b}" / f"{TOPIC}-{p}")) for b in (1, 2, 3)}) == 1
                for p in range(args.partitions)
            )

        wait("identical replicas", replicas_agree, timeout=60)
        total = sum(len(r) for r in found.values())
        print(
            f"\nacknowledged {len(load.acked)} of {load.sent} sent; read back {total}; "
            f"replicas identical (base offsets and CRCs of every batch)"
        )
    finally:
        cluster.stop()
    if anomalies:
        print("ANOMALIES:\n  " + "\n  ".join(anomalies))
        return 1
    shutil.rmtree(base, ignore_errors=True)
    print("no anomalies: every acknowledged record read back once, in order, no gaps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
