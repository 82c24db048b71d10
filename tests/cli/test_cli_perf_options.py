"""``josefk perf``: a rate cap, values from a file, a group consumer and end-to-end latency,
against a real broker. (Rates are checked as bounds that hold on any machine: a cap can only
slow a run down.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import (
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    free_port,
    josefk,
    stop_broker,
)

pytestmark = pytest.mark.timeout(180)


def test_perf_produce_counts_the_records_the_broker_refused(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "perf-small", "-p", "1", "-c", "max.message.bytes=200")
    refused = josefk(
        cli_broker, "perf", "produce", "perf-small", "-n", "3", "-s", "1000", "--acks", "1",
        expect=1,
    )  # fmt: skip
    assert "3 of 3 records not delivered" in refused.stderr
    assert "MESSAGE_TOO_LARGE" in refused.stderr or "too large" in refused.stderr.lower()


def test_throughput_cap_and_payload_file(cli_broker: BrokerProcess, tmp_path: Path) -> None:
    josefk(cli_broker, "topics", "create", "perf-cap", "--partitions", "1")
    capped = josefk(
        cli_broker, "perf", "produce", "perf-cap", "-n", "40", "--throughput", "100", "--json"
    ).json()
    assert capped["records"] == 40 and capped["throughput_cap"] == 100
    # 40 records at most 100 a second: the last one is sent no earlier than 0.39 s in.
    assert capped["seconds"] >= 0.39
    assert capped["records_per_second"] <= 103

    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbravo\ncharlie-delta\n")
    josefk(cli_broker, "topics", "create", "perf-file", "--partitions", "1")
    sent = josefk(
        cli_broker, "perf", "produce", "perf-file", "-n", "30", "--payload-file", str(payloads),
        "--json",
    ).json()  # fmt: skip
    values = josefk(cli_broker, "consume", "perf-file", "--no-follow").stdout.split()
    assert len(values) == 30 and set(values) <= {"alpha", "bravo", "charlie-delta"}
    assert sent["bytes"] == sum(len(v) for v in values)
    (tmp_path / "empty.txt").write_text("")
    josefk(
        cli_broker, "perf", "produce", "perf-file", "--payload-file", str(tmp_path / "empty.txt"),
        expect=2,
    )  # fmt: skip


def test_group_consumer_and_end_to_end(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "perf-grp", "--partitions", "2")
    josefk(cli_broker, "perf", "produce", "perf-grp", "-n", "500", "-s", "10")
    read = josefk(
        cli_broker, "perf", "consume", "perf-grp", "-n", "500", "--group", "perf-g", "--json"
    ).json()
    assert read["records"] == 500 and read["group"] == "perf-g"
    described = josefk(cli_broker, "groups", "describe", "perf-g", "--json").json()
    assert sum(p["committed_offset"] for p in described["partitions"]) == 500

    josefk(cli_broker, "topics", "create", "perf-e2e", "--partitions", "1")
    e2e = josefk(cli_broker, "perf", "end-to-end", "perf-e2e", "-n", "20", "--json").json()
    assert e2e["kind"] == "end-to-end" and e2e["records"] == 20
    latency = e2e["latency_ms"]
    assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]


def test_perf_produce_agrees_with_the_broker_metrics(tmp_path: Path) -> None:
    """--broker-metrics reads the broker's Prometheus endpoint before and after: the records
    and Produce requests it counted are the ones perf sent (nothing else produces here)."""
    broker = BrokerProcess(
        tmp_path / "data", tmp_path / "broker.stderr.log", metrics_port=free_port()
    )
    try:
        broker.start()
        josefk(broker, "topics", "create", "perf-metrics", "--partitions", "2")
        url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
        out = josefk(
            broker,
            "perf", "produce", "perf-metrics", "-n", "3000", "-s", "200", "--acks", "1",
            "--broker-metrics", url, "--json",
        ).json()  # fmt: skip
        seen = out["broker"]
        assert out["landed"] == 3000 == seen["messages_in"]
        assert seen["produce_requests"] == out["requests"]["count"] >= 1
        # The broker counts whole batches: the values plus record and batch overhead.
        assert seen["bytes_in"] == out["requests"]["bytes"] > 3000 * 200
        assert seen["total_time_ms_mean"] >= 0
        table = josefk(
            broker, "perf", "produce", "perf-metrics", "-n", "100", "--broker-metrics", url
        ).stdout
        assert "broker saw" in table and "landed in log" in table
    finally:
        stop_broker(broker)
