"""A real Prometheus (Debian's ``prometheus`` binary) scraping test brokers, and the
dashboards' queries as Grafana would send them.

Owns ``PrometheusServer`` (loopback only, a one-second scrape interval, its TSDB in the
test's directory; ready when its own ``/-/ready`` says so), ``dashboard_queries`` (every
panel target's expression of deploy/grafana/*.json, with the template variables
substituted as "All" would) and ``variable_queries`` (each ``label_values(metric, label)``
variable as the PromQL query that answers it).

``Load`` is the traffic the dashboards are checked under: a paced producer and a consumer
group, each on a thread.

Must not import josefk: Prometheus reaches the brokers only through their metrics ports.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from broker_process import free_port
from confluent_kafka import Consumer, KafkaException, Producer

PROMETHEUS = shutil.which("prometheus")
SKIP_REASON = (
    "prometheus is not installed (Debian package prometheus; ./scripts/test.sh installs it)"
)
DASHBOARDS = Path(__file__).resolve().parents[2] / "deploy" / "grafana"
START_TIMEOUT_S = 60.0
# "All" of a multi-value variable is allValue ".*"; a rate window of several scrapes.
SUBSTITUTIONS = {
    "$__rate_interval": "10s",
    "$instance": ".*",
    "$topic": ".*",
    "$group": ".*",
    "$request": ".*",
}


class PrometheusServer:
    """``prometheus`` scraping ``targets`` (``host:port`` of /metrics) as job ``josefk``."""

    def __init__(self, base: Path, targets: Sequence[str]) -> None:
        self.base = base
        self.port = free_port()
        self._targets = list(targets)
        self._process: subprocess.Popen[bytes] | None = None
        self._log = base / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        assert PROMETHEUS is not None, SKIP_REASON
        self.base.mkdir(parents=True, exist_ok=True)
        config = self.base / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: josefk\n    static_configs:\n"
            f"      - targets: {json.dumps(self._targets)}\n"
        )
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.base / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.enable-lifecycle",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready in {START_TIMEOUT_S:.0f}s: {self.log_tail()}")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (raises on a PromQL error)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


def _substitute(expr: str) -> str:
    for name, value in SUBSTITUTIONS.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"a template variable the test does not know: {expr}"
    return expr


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, expression) for every target of every panel."""
    found = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                found.append((path.name, panel["title"], _substitute(target["expr"])))
    return found


def variable_queries() -> list[tuple[str, str, str]]:
    """(dashboard file, variable name, PromQL) for each label_values() variable."""
    found = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        for variable in json.loads(path.read_text())["templating"]["list"]:
            if variable["type"] != "query":
                continue
            match = re.fullmatch(r"label_values\((\w+), *(\w+)\)", variable["definition"])
            assert match, f"{path.name}: variable {variable['name']}: {variable['definition']}"
            metric, label = match.groups()
            found.append((path.name, variable["name"], f"count by ({label}) ({metric})"))
    return found


class Load:
    """A paced producer (a small batch every 50 ms) and a subscribed consumer in a group
    with auto-commit, each on its own thread until ``stop``."""

    def __init__(self, bootstrap: str, topic: str, group: str, *, partitions: int) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._group = group
        self._partitions = partitions
        self._stop = threading.Event()
        self.errors: list[str] = []
        self.consumed = 0
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def _produce(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self._bootstrap, "acks": "all", "linger.ms": 5, "log_level": 3}
        )
        n = 0
        while not self._stop.is_set():
            for _ in range(20):
                producer.produce(
                    self._topic, value=b"record-%d" % n, partition=n % self._partitions
                )
                n += 1
            producer.poll(0)
            self._stop.wait(0.05)  # pacing the load, not waiting for a state
        producer.flush(30)

    def _consume(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self._bootstrap,
                "group.id": self._group,
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 500,
                "log_level": 3,
            }
        )
        consumer.subscribe([self._topic])
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    self.consumed += 1
        except KafkaException as exc:
            self.errors.append(str(exc))
        finally:
            consumer.close()

    def start(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)


def wait_for_data(
    prometheus: PrometheusServer, entries: set[tuple[str, str, str]], timeout: float
) -> None:
    """Query each (dashboard, panel, expression) until all have answered a non-empty
    vector; on the deadline fail naming those that never did."""
    waiting = set(entries)
    deadline = time.monotonic() + timeout
    while True:
        for entry in sorted(waiting):
            if prometheus.query(entry[2]):
                waiting.discard(entry)
        if not waiting:
            return
        if time.monotonic() > deadline:
            missing = "\n".join(f"{n}: {t}: {e}" for n, t, e in sorted(waiting))
            raise AssertionError(
                f"panels with no data after {timeout:.0f}s:\n{missing}\n"
                f"prometheus log:\n{prometheus.log_tail()}"
            )
        time.sleep(0.5)  # the next scrapes, a second apart
