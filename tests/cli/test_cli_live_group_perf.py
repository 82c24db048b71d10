"""``josefk groups`` with a live ``consume --group`` member, and ``josefk perf``, run as
subprocesses against a real broker.
"""

from __future__ import annotations

import signal
import subprocess
from typing import Any

from cli_helpers import (
    COMMAND_TIMEOUT_S,
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    command,
    env_for,
    josefk,
)

# ------------------------------------------------------------------------------ groups


def group_info(broker: BrokerProcess, group: str) -> Any:
    return josefk(broker, "groups", "describe", group, "--json").json()


def lag_by_partition(info: Any) -> dict[int, tuple[int | None, int | None]]:
    return {p["partition"]: (p["committed_offset"], p["lag"]) for p in info["partitions"]}


def test_groups_with_a_live_member(cli_broker: BrokerProcess) -> None:
    """A following ``consume --group`` shows up as a member with its assignment; offsets of
    a group with members are not reset; Ctrl-C commits and leaves."""
    josefk(cli_broker, "topics", "create", "t-live", "-p", "2")
    josefk(cli_broker, "produce", "t-live", "-p", "0", stdin="first\n")
    member = subprocess.Popen(
        command("consume", "t-live", "--group", "g-live"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(cli_broker.bootstrap),
    )
    try:
        assert member.stdout is not None
        # Printing the record proves the member joined and was assigned both partitions.
        assert member.stdout.readline() == b"first\n"
        info = group_info(cli_broker, "g-live")
        assert info["state"] == "Stable"
        (only,) = info["members"]
        assert sorted((a["topic"], a["partition"]) for a in only["assignment"]) == [
            ("t-live", 0),
            ("t-live", 1),
        ]
        assert {p["member_id"] for p in info["partitions"]} == {only["member_id"]}
        assert "Members" in josefk(cli_broker, "groups", "describe", "g-live").stdout

        refused = josefk(
            cli_broker,
            "groups",
            "reset-offsets",
            "g-live",
            "--topic",
            "t-live",
            "--to",
            "earliest",
            expect=1,
        )
        assert "stop its consumers" in refused.stderr
        not_empty = josefk(cli_broker, "groups", "delete", "g-live", "--json", expect=1).json()
        assert "NON_EMPTY_GROUP" in not_empty[0]["error"]
    finally:
        member.send_signal(signal.SIGINT)
        code = member.wait(timeout=COMMAND_TIMEOUT_S)
    assert code in (0, 130), member.stderr.read() if member.stderr else ""
    info = group_info(cli_broker, "g-live")
    assert info["members"] == []
    assert lag_by_partition(info)[0] == (1, 0)


# ------------------------------------------------------------------------------ perf


def test_perf_produce_and_consume_report_rates_and_latency(cli_broker: BrokerProcess) -> None:
    produced = josefk(
        cli_broker,
        "perf",
        "produce",
        "t-perf",
        "-n",
        "2000",
        "-s",
        "64",
        "--partitions",
        "2",
        "--compression",
        "lz4",
        "--json",
    ).json()
    assert produced["kind"] == "produce" and produced["records"] == 2000
    assert produced["bytes"] == 2000 * 64
    assert produced["records_per_second"] > 0 and produced["mb_per_second"] > 0
    lat = produced["latency_ms"]
    assert 0 <= lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    # What the broker's log got, and the requests that carried it.
    assert produced["landed"] == 2000
    requests = produced["requests"]
    assert requests["count"] >= 1 and requests["bytes"] > 0
    assert 0 <= requests["latency_ms"]["p50"] <= requests["latency_ms"]["max"]

    consumed = josefk(cli_broker, "perf", "consume", "t-perf", "-n", "2000", "--json").json()
    assert consumed["records"] == 2000 and consumed["bytes"] == 2000 * 64
    assert "latency_ms" not in consumed

    table = josefk(cli_broker, "perf", "produce", "t-perf", "-n", "100", "--acks", "1").stdout
    assert "records/s" in table and "p99" in table
