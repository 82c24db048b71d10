"""Exactly-once with confluent-kafka's transactions against a real ``josefk serve``.

A consume-transform-produce loop (eos_worker.py, its own process) copies 100,000 input
records to an output topic, one transaction per batch, the input offsets committed inside the
transaction. The test driver follows the worker's progress lines and, at fixed points of the
run, SIGKILLs the worker while it holds an open transaction (a new worker fences it and goes
on) and SIGKILLs the broker the same way (restarted on the same data dir; the worker's client
rides it out). Afterwards the output topic read with read_committed holds every input record
exactly once, and the records of aborted transactions (the worker aborts some on purpose) are
seen only by a read_uncommitted reader.

``JOSEFKTEST_EOS_RECORDS`` shrinks the run for a quick local try; the default is the issue's
100,000.
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import ck_create_topic, unique_topic
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

pytestmark = pytest.mark.timeout(900)

WORKER = Path(__file__).resolve().parent / "eos_worker.py"
RECORDS = int(os.environ.get("JOSEFKTEST_EOS_RECORDS", "100000"))
PARTITIONS = 4
BATCH = 500
ABORT_EVERY = 9
# Fractions of the input committed at which the driver kills, on the next open transaction.
WORKER_KILLS = (0.1, 0.3, 0.55, 0.8)
BROKER_KILLS = (0.2, 0.45, 0.7)
RUN_DEADLINE_S = 600.0
MAX_WORKER_STARTS = 30


@dataclass
class Worker:
    """One eos_worker.py process and the lines it printed, read by a thread."""

    proc: subprocess.Popen[str]
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    transcript: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, args: list[str], log: Path) -> Worker:
        with log.open("a") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(WORKER), *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        worker = cls(proc)
        threading.Thread(target=worker._pump, daemon=True).start()
        return worker

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


def produce_input(bootstrap: str, topic: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20}
    )
    for i in range(RECORDS):
        producer.produce(topic, key=b"%07d" % i, value=b"in", partition=i % PARTITIONS)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "input not fully acknowledged"


def read_all(bootstrap: str, topic: str, isolation: str) -> list[tuple[bytes, bytes]]:
    """Every record of ``topic`` a consumer with ``isolation`` is given, up to the end (the
    last stable offset for read_committed) of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-verifier",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
        }
    )
    try:
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got: list[tuple[bytes, bytes]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 120
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{isolation} read of {topic} did not finish"
            for message in consumer.consume(num_messages=1000, timeout=1.0):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                        continue
                    raise KafkaException(error)
                at_end.discard(message.partition())
                got.append((message.key(), message.value()))
        return got
    finally:
        consumer.close()


def test_consume_transform_produce_exactly_once_through_kills(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    broker: BrokerProcess = broker_factory(
        settings=[
            f"num.partitions={PARTITIONS}",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
        ]
    )
    input_topic, output_topic = unique_topic("eos-in"), unique_topic("eos-out")
    for topic in (input_topic, output_topic):
        ck_create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    produce_input(broker.bootstrap, input_topic)

    args = [broker.bootstrap, input_topic, output_topic, "eos-group", "eos-worker", str(BATCH)]
    args.append(str(ABORT_EVERY))
    log = tmp_path / "workers.log"
    kills = sorted([(f, "worker") for f in WORKER_KILLS] + [(f, "broker") for f in BROKER_KILLS])
    done: list[tuple[float, str]] = []
    starts, aborted_lines = 1, 0
    worker = Worker.start(args, log)
    started = time.monotonic()
    finished = False
    try:
        while not finished:
            assert time.monotonic() - started < RUN_DEADLINE_S, (
                f"no end after {RUN_DEADLINE_S:.0f}s; kills done: {done}; last lines: "
                f"{worker.transcript[-10:]}\n{log.read_text()[-3000:]}"
            )
            try:
                line = worker.lines.get(timeout=5.0)
            except queue.Empty:
                continue
            if line is None:
                code = worker.proc.wait(timeout=30)
                assert code != 0, "worker exited 0 without saying done"
                assert starts < MAX_WORKER_STARTS, f"worker keeps failing:\n{log.read_text()}"
                starts += 1
                worker = Worker.start(args, log)
                continue
            worker.transcript.append(line)
            verb, _, count = line.partition(" ")
            if verb == "done":
                assert int(count) == RECORDS
                assert worker.proc.wait(timeout=60) == 0
                finished = True
            elif verb == "aborted":
                aborted_lines += 1
            elif verb == "open" and kills and int(count) >= kills[0][0] * RECORDS:
                fraction, target = kills.pop(0)
                done.append((fraction, target))
                if target == "worker":
                    worker.kill()
                    starts += 1
                    worker = Worker.start(args, log)
                else:
                    broker.kill()
                    broker.restart()
    finally:
        if worker.proc.poll() is None:
            worker.kill()
    assert not kills, f"the run ended before every kill point: {kills} left"

    committed = read_all(broker.bootstrap, output_topic, "read_committed")
    uncommitted = read_all(broker.bootstrap, output_topic, "read_uncommitted")
    counts = collections.Counter(key for key, _ in committed)
    expected = {b"%07d" % i for i in range(RECORDS)}
    missing = expected - counts.keys()
    duplicated = sorted(key for key, n in counts.items() if n > 1)
    assert not missing, f"{len(missing)} input records never committed, e.g. {sorted(missing)[:5]}"
    assert not duplicated, f"{len(duplicated)} records committed twice, e.g. {duplicated[:5]}"
    assert counts.keys() == expected
    assert all(value == b"out:" + key for key, value in committed)

    aborted = len(uncommitted) - len(committed)
    assert aborted > 0, "the deliberate aborts left nothing for read_uncommitted to see"
    assert aborted_lines > 0
    assert counts.keys() <= {key for key, _ in uncommitted}
    print(
        f"exactly-once: {RECORDS} records, {len(done)} kills ({done}), {starts} worker starts, "
        f"{aborted} aborted records seen by read_uncommitted only, "
        f"{time.monotonic() - started:.0f}s"
    )
