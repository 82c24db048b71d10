"""Real josefk brokers for the test suites of applications built on Kafka.

Owns ``JosefkBroker`` (one broker with its own data dir on a free loopback port) and
``JosefkCluster`` (an etcd process and three brokers), both context managers for unittest or
scripts, and ``create_topic`` / ``wait_for_topic`` on either. The pytest fixtures that wrap
them are in ``josefk.testing.pytest_plugin``, registered as a pytest11 entry point, so that
installing josefk is enough to use them.

The brokers run in this process, each on its own event loop in a daemon thread: a start
costs no interpreter start-up and no imports after the first, which keeps a fresh broker per
test affordable. They are the same ``Broker`` class ``josefk serve`` runs, with test-friendly
settings (one partition for each internal topic, no initial rebalance delay, no metrics
endpoint) that ``settings`` can override. The clients under test talk to them over TCP like
to any Kafka broker.

Imports josefk.broker, josefk.config, josefk.client (for the topic helpers) and josefk.util; never
josefk.cli.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Coroutine, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TypeVar

from josefk.util.ports import free_ports

__all__ = [
    "ETCD_MISSING",
    "JosefkBroker",
    "JosefkCluster",
    "etcd_binary",
]

T = TypeVar("T")

# Settings for a broker under test: small internal topics and no waiting meant for
# production (Kafka's group.initial.rebalance.delay.ms is 3 s).
TEST_SETTINGS: Final[Mapping[str, str]] = {
    "josefk.metrics.enable": "false",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}
START_TIMEOUT_S: Final = 60.0
ETCD_MISSING: Final = (
    "no etcd binary on PATH: install Debian's etcd-server package (apt-get install "
    "etcd-server) for the three-broker cluster"
)


def etcd_binary() -> str | None:
    """The etcd program a cluster would run, or None."""
    return shutil.which("etcd")


class _TopicHelpers:
    """``create_topic`` and ``wait_for_topic`` for anything with a ``bootstrap``, run on a
    private event loop so that they work from plain and async tests alike."""

    bootstrap: str

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        with concurrent.futures.ThreadPoolExecutor(1) as runner:
            return runner.submit(asyncio.run, coro).result()

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = -1,
        config: Mapping[str, str] | None = None,
        *,
        timeout_s: float = START_TIMEOUT_S,
    ) -> str:
        """Create topic ``name`` and return once every partition has a leader (so a
        producer's first send does not meet LEADER_NOT_AVAILABLE). -1: the broker's default
        replication factor."""
        from josefk.client import AIOAdmin, NewTopic

        async def create() -> None:
            async with AIOAdmin(bootstrap_servers=self.bootstrap) as admin:
                errors = await admin.create_topics(
                    [NewTopic(name, partitions, replication_factor, dict(config or {}))]
                )
                if (error := errors.get(name)) is not None:
                    raise error

        self._run(create())
        self.wait_for_topic(name, partitions=partitions, timeout_s=timeout_s)
        return name

    def wait_for_topic(
        self, name: str, *, partitions: int | None = None, timeout_s: float = START_TIMEOUT_S
    ) -> None:
        """Return once ``name`` exists (with at least ``partitions`` partitions) and each
        partition has a leader; TimeoutError after ``timeout_s``."""
        from josefk.client import AIOAdmin
        from josefk.client.errors import KafkaError

        async def wait() -> None:
            deadline = time.monotonic() + timeout_s
            async with AIOAdmin(bootstrap_servers=self.bootstrap) as admin:
                while True:
                    with contextlib.suppress(KafkaError):
                        (topic,) = await admin.describe_topics([name])
                        enough = partitions is None or len(topic.partitions) >= partitions
                        if enough and all(p.leader >= 0 for p in topic.partitions):
                            return
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"topic {name} had no leaders within {timeout_s}s")
                    await asyncio.sleep(0.02)  # polling the broker's answer, with a deadline

        self._run(wait())


class JosefkBroker(_TopicHelpers):
    """One josefk broker on ``127.0.0.1`` (a free port unless ``port`` is given), its data in
    ``data_dir`` (a temporary dir removed at stop when not given). ``settings``: broker
    properties over the test defaults. ``start``/``stop``, or ``with JosefkBroker() as b``.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        port: int = 0,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self._owned_dir: tempfile.TemporaryDirectory[str] | None = None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._port = port
        self.settings: dict[str, str] = {**TEST_SETTINGS, **(settings or {})}
        self.bootstrap = ""
        self.port = 0
        self.broker_id = int(self.settings.get("broker.id", self.settings.get("node.id", "1")))
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise RuntimeError("the broker has not started")
        return self._data_dir

    def start(self) -> JosefkBroker:
        """Start the broker; returns once it accepts connections. Raises what stopped it
        from starting (a port in use, say)."""
        if self._thread is not None:
            raise RuntimeError("already started")
        if self._data_dir is None:
            self._owned_dir = tempfile.TemporaryDirectory(prefix="josefk-test-")
            self._data_dir = Path(self._owned_dir.name)
        self._started.clear()
        self._failure = None
        self._thread = threading.Thread(
            target=self._run_broker, name=f"josefk-broker-{self.broker_id}", daemon=True
        )
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S):
            raise TimeoutError(f"the broker did not start within {START_TIMEOUT_S}s")
        if self._failure is not None:
            self._thread.join()
            self._thread = None
            raise self._failure
        return self

    def _config(self) -> Any:
        from josefk.config.broker import BrokerConfig

        properties = {
            **self.settings,
            "listeners": f"PLAINTEXT://127.0.0.1:{self._port}",
            "log.dirs": str(self.data_dir),
        }
        return BrokerConfig.from_properties(properties)

    def _run_broker(self) -> None:
        from josefk.broker.server import Broker

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            broker = Broker(self._config())
            try:
                endpoints = await broker.start()
            except BaseException as exc:  # noqa: BLE001  handed to the thread that called start
                self._failure = exc
                await broker.stop(0)
                self._started.set()
                return
            self.port = endpoints[0].port
            # A fixed port is kept across a restart of this object.
            self._port = self.port
            self.bootstrap = f"127.0.0.1:{self.port}"
            self._started.set()
            await self._stop.wait()
            await broker.stop(5.0)

        asyncio.run(main())

    def stop(self) -> None:
        """Stop the broker cleanly (its data stays in a given ``data_dir``)."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None and thread.is_alive():
            loop.call_soon_threadsafe(stop.set)
        thread.join(START_TIMEOUT_S)
        self._thread = self._loop = self._stop = None
        if self._owned_dir is not None:
            self._owned_dir.cleanup()
            self._owned_dir = None
            self._data_dir = None

    def __enter__(self) -> JosefkBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class JosefkCluster(_TopicHelpers):
    """An etcd process and ``brokers`` josefk brokers (ids 1..N) that form one cluster, with
    their data under ``base_dir`` (temporary when not given). Needs the ``etcd`` program
    (``etcd_binary()``); RuntimeError with ``ETCD_MISSING`` otherwise."""

    def __init__(
        self,
        base_dir: str | Path | None = None,
        *,
        brokers: int = 3,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self._owned_dir: tempfile.TemporaryDirectory[str] | None = None
        self._base_dir = Path(base_dir) if base_dir is not None else None
        self._count = brokers
        self._settings = dict(settings or {})
        self.brokers: list[JosefkBroker] = []
        self.etcd_endpoint = ""
        self.bootstrap = ""
        self._etcd: subprocess.Popen[bytes] | None = None

    def start(self) -> JosefkCluster:
        etcd = etcd_binary()
        if etcd is None:
            raise RuntimeError(ETCD_MISSING)
        if self._base_dir is None:
            self._owned_dir = tempfile.TemporaryDirectory(prefix="josefk-test-cluster-")
            self._base_dir = Path(self._owned_dir.name)
        try:
            self._start_etcd(etcd, self._base_dir)
            replicas = str(min(3, self._count))
            for broker_id in range(1, self._count + 1):
                settings = {
                    "offsets.topic.replication.factor": replicas,
                    "transaction.state.log.replication.factor": replicas,
                    "transaction.state.log.min.isr": str(min(2, self._count)),
                    "share.coordinator.state.topic.replication.factor": replicas,
                    "share.coordinator.state.topic.min.isr": str(min(2, self._count)),
                    "default.replication.factor": replicas,
                    **self._settings,
                    "broker.id": str(broker_id),
                    "josefk.etcd.endpoints": self.etcd_endpoint,
                }
                broker = JosefkBroker(self._base_dir / f"broker{broker_id}", settings=settings)
                self.brokers.append(broker.start())
        except BaseException:
            self.stop()
            raise
        self.bootstrap = ",".join(b.bootstrap for b in self.brokers)
        return self

    def _start_etcd(self, etcd: str, base: Path) -> None:
        client, peer = free_ports(2)
        self.etcd_endpoint = f"127.0.0.1:{client}"
        with (base / "etcd.log").open("ab") as log:
            self._etcd = subprocess.Popen(
                [
                    etcd,
                    "--name", "josefk-test",
                    "--data-dir", str(base / "etcd"),
                    "--listen-client-urls", f"http://{self.etcd_endpoint}",
                    "--advertise-client-urls", f"http://{self.etcd_endpoint}",
                    "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                    "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                    "--initial-cluster", f"josefk-test=http://127.0.0.1:{peer}",
                ],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._etcd.poll() is not None:
                raise RuntimeError(f"etcd exited with {self._etcd.returncode}; see {base}/etcd.log")
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"http://{self.etcd_endpoint}/health", timeout=0.5) as r,
            ):
                if json.loads(r.read()).get("health") == "true":
                    return
            time.sleep(0.05)  # etcd's health endpoint, polled with a deadline
        raise TimeoutError(f"etcd was not healthy within {START_TIMEOUT_S}s")

    def stop(self) -> None:
        # Brokers first (each hands its leaderships over through etcd), then etcd.
        for broker in reversed(self.brokers):
            broker.stop()
        self.brokers.clear()
        if self._etcd is not None:
            self._etcd.terminate()
            try:
                self._etcd.wait(30)
            except subprocess.TimeoutExpired:
                self._etcd.kill()
                self._etcd.wait()
            self._etcd = None
        if self._owned_dir is not None:
            self._owned_dir.cleanup()
            self._owned_dir = None
            self._base_dir = None

    def __enter__(self) -> JosefkCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
