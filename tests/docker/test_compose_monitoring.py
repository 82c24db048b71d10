"""``docker compose --profile monitoring up``: Prometheus (Debian's package on the local
base image, deploy/prometheus) scrapes the three brokers of docker-compose.yml, and the
cluster's controller and brokers are in it. Skips where no Docker engine answers."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from docker_support import NOTES, Compose

pytestmark = [pytest.mark.timeout(1800), pytest.mark.usefixtures("images")]

PROJECT = "josefkmon"
BROKERS = ("broker1", "broker2", "broker3")
PROMETHEUS = "http://localhost:9090"
DEADLINE_S = 180.0


@pytest.fixture(scope="module")
def monitored(images: None) -> Iterator[Compose]:
    compose = Compose(PROJECT)
    NOTES.append(f"compose tool (monitoring profile): {compose.tool}")
    compose("--profile", "monitoring", "down", "-v", "--remove-orphans", check=False)
    try:
        compose("--profile", "monitoring", "up", "-d", "--no-build")
        yield compose
    finally:
        compose("--profile", "monitoring", "down", "-v", "--remove-orphans", check=False)
    assert compose.leftovers() == [], "docker compose down -v left these behind"


def query(expr: str) -> list[dict[str, object]]:
    url = f"{PROMETHEUS}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    result: list[dict[str, object]] = answer["data"]["result"]
    return result


def value_of(expr: str) -> float | None:
    try:
        result = query(expr)
    except (urllib.error.URLError, ConnectionError):
        return None  # Prometheus still starting
    if not result:
        return None
    sample = result[0]["value"]
    assert isinstance(sample, list)
    return float(sample[1])


def test_prometheus_scrapes_the_three_brokers(monitored: Compose) -> None:
    assert set(BROKERS) <= set(monitored("ps", "--services").split())
    deadline = time.monotonic() + DEADLINE_S
    expectations = {
        'sum(up{job="josefk"})': 3.0,
        "sum(kafka_controller_kafkacontroller_activecontrollercount)": 1.0,
        "count(josefk_broker_info)": 3.0,
    }
    seen: dict[str, float | None] = {}
    while time.monotonic() < deadline:
        seen = {expr: value_of(expr) for expr in expectations}
        if seen == expectations:
            return
        time.sleep(1)  # the next scrape
    raise AssertionError(f"Prometheus in the monitoring profile answered {seen}")
