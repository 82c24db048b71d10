"""A real josefk cluster for the tests: one etcd process and N ``josefk serve`` processes,
started the way a user starts them (``--set broker.id=N --set josefk.etcd.endpoints=...``).

Owns ``LocalCluster`` (start, the bootstrap list, which broker leads a partition (asked of
the cluster through a real client's metadata), and the bounded waits that cluster tests need
for state that only the cluster can change: a new leader elected, an ISR grown back), and
``BackgroundProducer`` / ``read_all``, the acks=all idempotent producer that records what was
acknowledged and the reader that checks it all came back, and ``produce_until_rolled``
(records enough to roll a partition at a small segment.bytes on every replica). The waits poll the cluster's own
answers with a deadline; nothing sleeps a fixed time.

Must not import josefk: the tests talk to the cluster through processes and real clients.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from broker_process import LIVE_BROKERS, BrokerProcess, free_port
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from etcd_server import EtcdServer
from netns import Mesh
from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")
WAIT_S = 60.0


class LocalCluster:
    def __init__(
        self,
        base: Path,
        *,
        brokers: int = 3,
        settings: Sequence[str] = (),
        session_timeout_ms: int = 3000,
        metrics: bool = False,
        mesh: Mesh | None = None,
        before_brokers: Callable[[EtcdServer], None] | None = None,
    ) -> None:
        self.base = base
        self.mesh = mesh
        self.etcd = EtcdServer(
            base / "etcd", base / "etcd.log", host=mesh.etcd_ip if mesh else "127.0.0.1"
        )
        self.brokers: dict[int, BrokerProcess] = {}
        self._count = brokers
        self._settings = list(settings)
        self._session_timeout_ms = session_timeout_ms
        self._metrics = metrics
        # Run once etcd serves and before any broker starts (e.g. create the inter-broker user).
        self._before_brokers = before_brokers

    def start(self) -> LocalCluster:
        self.etcd.start()
        if self._before_brokers is not None:
            self._before_brokers(self.etcd)
        for broker_id in range(1, self._count + 1):
            broker = BrokerProcess(
                self.base / f"broker{broker_id}" / "data",
                self.base / f"broker{broker_id}.stderr.log",
                settings=[
                    f"broker.id={broker_id}",
                    f"josefk.etcd.endpoints={self.etcd.endpoint}",
                    f"josefk.etcd.session.timeout.ms={self._session_timeout_ms}",
                    *self._settings,
                ],
                metrics_port=free_port() if self._metrics else 0,
                host=self.mesh.broker_ip(broker_id) if self.mesh else "127.0.0.1",
                command_prefix=self.mesh.exec_prefix(broker_id) if self.mesh else (),
            )
            broker.start()
            self.brokers[broker_id] = broker
        return self

    def __enter__(self) -> LocalCluster:
        try:
            return self.start()
        except BaseException:
            self.close()  # whatever started before the failure
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.is_alive())

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})

    def partition_states(self, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
        """partition -> (leader, replicas, isr) as a live broker reports it."""
        metadata = self.admin().list_topics(topic, timeout=10)
        found = metadata.topics[topic]
        return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in found.partitions.values()}

    def leader_of(self, topic: str, partition: int) -> int:
        return self.partition_states(topic)[partition][0]

    def scrape(self, broker_id: int) -> dict[str, float]:
        """A broker's /metrics (started with ``metrics=True``), unlabelled series summed by
        name and labelled ones as ``name{k="v",...}``."""
        broker = self.brokers[broker_id]
        url = f"http://{broker.host}:{broker.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=20) as response:
            text = response.read().decode()
        samples: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return samples

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.close()
            if broker in LIVE_BROKERS:
                LIVE_BROKERS.remove(broker)
        self.etcd.close()


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = WAIT_S) -> T:
    """Ask ``probe`` until it answers (not None/False) or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = probe()
        except Exception as exc:  # noqa: BLE001  the cluster may be mid-failover: ask again
            last_error = exc
            result = None
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last error: {last_error})")


def produce_until_rolled(cluster: LocalCluster, topic: str, broker_ids: Sequence[int]) -> None:
    """Produce 30 records of 240 bytes to ``topic`` (one partition), a batch each with
    acks=all, then wait until its log holds at least five segments on each of ``broker_ids``:
    what a segment.bytes of 1 KiB in force there does to it."""
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "batch.num.messages": 1,
            "log_level": 3,
        }
    )
    for i in range(30):
        producer.produce(topic, (b"%03d-" % i) * 60)
        producer.poll(0)
    assert producer.flush(60) == 0
    for broker_id in broker_ids:
        log_dir = cluster.brokers[broker_id].data_dir / f"{topic}-0"
        wait_for(
            f"{topic}-0 rolled on broker {broker_id}",
            lambda d=log_dir: len(list(d.glob("*.log"))) >= 5,
        )


class BackgroundProducer:
    """Produces numbered records round robin over the partitions until stopped; keeps what
    was acknowledged: (partition, offset) -> value."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "log_level": 3,
            }
        )
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[(msg.partition(), msg.offset())] = msg.value()  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set():
            value = f"record-{self.sent}".encode()
            try:
                self.producer.produce(
                    self.topic,
                    value=value,
                    partition=self.sent % self.partitions,
                    on_delivery=self._on_delivery,
                )
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        return len(self.acked)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert self.producer.flush(120) == 0, "records still unacknowledged after 120 s"


def read_all(
    cluster: LocalCluster, topic: str, partitions: int
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``topic`` below the high watermarks, per partition, CRCs checked."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "verifier",
            "enable.auto.commit": False,
            "check.crcs": True,
            "log_level": 3,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        found: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        remaining = sum(ends.values())
        deadline = time.monotonic() + 120
        while remaining > 0 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            found[message.partition()].append((message.offset(), message.value()))
            remaining -= 1
        assert remaining == 0, f"{remaining} records below the high watermarks never arrived"
        return found
    finally:
        consumer.close()
