"""The console's parts that need no cluster: the history's rates, the Prometheus counters it
sums (read from josefk's own exporter, through a real HTTP server on loopback), and the
sentence a refusal becomes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from josefk.client.errors import error_for
from josefk.console import app as console_app
from josefk.console.api import describe_kafka_error
from josefk.console.history import History, Series
from josefk.console.metrics import MetricsScraper, sum_counters
from josefk.metrics.probes import TopicProbe
from josefk.protocol.errors import ErrorCode


def test_rates_between_samples() -> None:
    series = Series(capacity=3)
    series.add(1_000, 100)
    series.add(3_000, 300)  # 200 in 2 s
    series.add(4_000, 250)  # went down (a restart): no negative rate
    series.add(4_500, 300)  # 50 in 0.5 s; the first sample fell out
    assert series.points() == [(3_000, 300), (4_000, 250), (4_500, 300)]
    assert series.rates() == [(4_000, 0.0), (4_500, 100.0)]


@given(st.lists(st.tuples(st.integers(1, 10_000), st.integers(0, 10**12)), max_size=50))
def test_rates_are_never_negative_and_one_fewer_than_samples(
    steps: list[tuple[int, int]],
) -> None:
    series = Series(capacity=64)
    now = 0
    for gap, value in steps:
        now += gap
        series.add(now, value)
    rates = series.rates()
    assert len(rates) == max(0, len(steps) - 1)
    assert all(rate >= 0 for _, rate in rates)


def test_history_forgets_series_no_longer_sampled() -> None:
    history = History(capacity=4)
    history.add("topic:a", 1, 1)
    history.add("topic:b", 1, 1)
    history.add("records_in", 1, 1)
    history.retain(["topic:b"], prefix="topic:")
    assert history.points("topic:a") == []
    assert history.points("topic:b") == [(1, 1)]
    assert history.points("records_in") == [(1, 1)]


def exporter_text(bytes_in: int, bytes_out: int) -> str:
    registry = CollectorRegistry()
    probe = TopicProbe(registry)
    probe.produced("orders", messages=3, nbytes=bytes_in)
    probe.produced("events", messages=1, nbytes=1)
    probe.fetched("orders", nbytes=bytes_out)
    return generate_latest(registry).decode()


def test_sum_counters_of_josefks_exporter() -> None:
    totals = sum_counters(exporter_text(1000, 400))
    assert totals == {"bytes_in": 1001.0, "bytes_out": 400.0}
    assert sum_counters("") == {"bytes_in": 0.0, "bytes_out": 0.0}


async def test_scraper_sums_brokers_and_skips_one_that_does_not_answer() -> None:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=exporter_text(int(request.match_info["n"]), 5))

    app = web.Application()
    app.router.add_get("/{n}/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    scraper = MetricsScraper(
        [
            f"http://127.0.0.1:{port}/10/metrics",
            f"http://127.0.0.1:{port}/20/metrics",
            f"http://127.0.0.1:{port}/nothing",  # 404: left out
        ]
    )
    try:
        assert await scraper.scrape() == {"bytes_in": 32.0, "bytes_out": 10.0}
    finally:
        await scraper.close()
        await runner.cleanup()


def test_refusals_read_as_sentences() -> None:
    status, message = describe_kafka_error(
        error_for(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "delete topic orders"
    )
    assert status == 403
    assert message.startswith("Not authorized to delete topic orders: ")
    assert "TOPIC_AUTHORIZATION_FAILED" in message
    status, message = describe_kafka_error(
        error_for(ErrorCode.TOPIC_ALREADY_EXISTS, topic="orders"), "create topic"
    )
    assert status == 409 and "TOPIC_ALREADY_EXISTS" in message and "topic=orders" in message


def test_the_pages_script_parses() -> None:
    """A syntax error stops every page at once; node finds it without a browser."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the browser tests load the script too)")
    script = Path(console_app.__file__).parent / "static" / "console.js"
    checked = subprocess.run([node, "--check", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
