"""``josefk dev-cluster``: etcd plus three brokers from one command, a bootstrap list that
real clients use, the web console beside them, and Ctrl-C stops every process."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from broker_process import SOURCE_DIR
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from etcd_server import ETCD, SKIP_REASON

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(ETCD is None, reason=SKIP_REASON)]


def free_port_run(count: int) -> int:
    """A port P such that P .. P+count-1 are all free right now (dev-cluster puts broker N on
    base port + N - 1). The run is drawn from below the kernel's ephemeral range: a run next
    to a port the kernel handed out was once taken between this probe and the broker's bind,
    by a client's outgoing connection or another test's port-0 listener, both of which only
    ever get ephemeral ports."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    chooser = random.Random()
    for _ in range(100):
        base = chooser.randrange(max(1024, low - 12000), low - count)
        probes = []
        try:
            for port in range(base, base + count):
                probe = socket.socket()
                probes.append(probe)
                probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
        return base
    raise AssertionError(f"no run of {count} free ports found")


def start_dev_cluster(data_dir: Path, brokers: int) -> tuple[subprocess.Popen[str], str]:
    """``josefk dev-cluster`` with ``brokers`` brokers, and the bootstrap list it printed
    (the test fails with what it printed instead: a broker that did not start, say)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOSEFK_")}
    env["PYTHONPATH"] = str(SOURCE_DIR)
    process = subprocess.Popen(
        [sys.executable, "-m", "josefk", "dev-cluster", "--data-dir", str(data_dir),
         "--base-port", str(free_port_run(brokers)), "--brokers", str(brokers),
         "--console-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )  # fmt: skip
    assert process.stdout is not None
    said: list[str] = []
    for line in process.stdout:
        said.append(line)
        if line.startswith("bootstrap: "):
            return process, line.split(": ", 1)[1].strip()
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=120)
    raise AssertionError("dev-cluster printed no bootstrap list:\n" + "".join(said))


def test_dev_cluster_starts_three_brokers_and_stops_them(tmp_path: Path) -> None:
    process, bootstrap = start_dev_cluster(tmp_path / "dev", 3)
    try:
        assert bootstrap.count(",") == 2
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert metadata.controller_id in (1, 2, 3)
        # The web console came up with the cluster and printed its URL.
        assert process.stdout is not None
        said = process.stdout.readline()
        assert said.startswith("console: http://127.0.0.1:"), said
        with urllib.request.urlopen(said.split()[1] + "api/overview", timeout=30) as answer:
            assert len(json.load(answer)["brokers"]) == 3
    finally:
        process.send_signal(signal.SIGINT)
        rest = process.communicate(timeout=120)[0]
    assert process.returncode == 0, rest
    assert "stopped" in rest
    # Every broker left cleanly (clean-shutdown markers) and nothing listens any more.
    for broker_id in (1, 2, 3):
        assert (tmp_path / "dev" / f"broker{broker_id}" / ".kafka_cleanshutdown").exists()


def test_a_one_broker_dev_cluster_runs_transactions(tmp_path: Path) -> None:
    """With one broker the internal topics are made with one replica (and
    __transaction_state's min.insync.replicas fits it), so a transaction commits."""
    process, bootstrap = start_dev_cluster(tmp_path / "dev", 1)
    try:
        topic = "dev-txn"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result is in
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "dev-txn"})
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce(topic, b"committed")
        producer.commit_transaction(30)
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "dev-txn",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic])
        message = None
        deadline = time.monotonic() + 60
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(1.0)
            if polled is not None and polled.error() is None:
                message = polled
        consumer.close()
        assert message is not None and message.value() == b"committed"
    finally:
        process.send_signal(signal.SIGINT)
        rest = process.communicate(timeout=120)[0]
    assert process.returncode == 0, rest
