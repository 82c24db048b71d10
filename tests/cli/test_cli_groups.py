"""``josefk groups``: describe with lag per partition, list, reset-offsets (dry run, earliest,
offset:N) and delete, around ``josefk consume --group``, run as subprocesses against
a real broker.
"""

from __future__ import annotations

import re
from typing import Any

from cli_helpers import (
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    josefk,
)


def group_info(broker: BrokerProcess, group: str) -> Any:
    return josefk(broker, "groups", "describe", group, "--json").json()


def lag_by_partition(info: Any) -> dict[int, tuple[int | None, int | None]]:
    return {p["partition"]: (p["committed_offset"], p["lag"]) for p in info["partitions"]}


def test_groups_describe_shows_lag_and_reset_offsets(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "t-grp", "-p", "2")
    josefk(cli_broker, "produce", "t-grp", "-p", "0", stdin="".join(f"a{i}\n" for i in range(6)))
    josefk(cli_broker, "produce", "t-grp", "-p", "1", stdin="".join(f"b{i}\n" for i in range(4)))

    consumed = josefk(cli_broker, "consume", "t-grp", "--group", "g-lag", "--no-follow").stdout
    assert sorted(consumed.splitlines()) == sorted(
        [f"a{i}" for i in range(6)] + [f"b{i}" for i in range(4)]
    )
    info = group_info(cli_broker, "g-lag")
    assert info["group"] == "g-lag" and info["state"] == "Empty" and info["members"] == []
    assert lag_by_partition(info) == {0: (6, 0), 1: (4, 0)}
    assert info["total_lag"] == 0

    josefk(cli_broker, "produce", "t-grp", "-p", "1", stdin="b4\nb5\nb6\n")
    info = group_info(cli_broker, "g-lag")
    assert lag_by_partition(info) == {0: (6, 0), 1: (4, 3)}
    assert info["total_lag"] == 3
    table = josefk(cli_broker, "groups", "describe", "g-lag").stdout
    assert "LAG" in table and re.search(r"total lag +3\n", table)

    listed = josefk(cli_broker, "groups", "list", "--json").json()
    assert {
        "group": "g-lag",
        "state": "Empty",
        "type": "classic",
        "protocol_type": "consumer",
        "members": 0,
    } in listed

    # A dry run shows the plan and commits nothing.
    plan = josefk(
        cli_broker,
        "groups",
        "reset-offsets",
        "g-lag",
        "--topic",
        "t-grp",
        "--to",
        "earliest",
        "--dry-run",
        "--json",
    ).json()
    assert plan["dry_run"] is True
    assert [(p["partition"], p["old_offset"], p["new_offset"]) for p in plan["partitions"]] == [
        (0, 6, 0),
        (1, 4, 0),
    ]
    assert lag_by_partition(group_info(cli_broker, "g-lag")) == {0: (6, 0), 1: (4, 3)}
    # No record is that late: by time means each partition's end.
    by_time = josefk(
        cli_broker,
        "groups",
        "reset-offsets",
        "g-lag",
        "-t",
        "t-grp",
        "--dry-run",
        "--json",
        "--to",
        "timestamp:2999-01-01T00:00:00",
    ).json()
    assert [p["new_offset"] for p in by_time["partitions"]] == [6, 7]

    # Without --execute: a preview, as Kafka's tool (before: it committed at once).
    preview = josefk(
        cli_broker, "groups", "reset-offsets", "g-lag", "--topic", "t-grp", "--to", "earliest"
    )
    assert "add --execute to apply" in preview.stderr
    assert lag_by_partition(group_info(cli_broker, "g-lag")) == {0: (6, 0), 1: (4, 3)}
    josefk(
        cli_broker, "groups", "reset-offsets", "g-lag", "--topic", "t-grp", "--to", "earliest",
        "--execute",
    )  # fmt: skip
    assert lag_by_partition(group_info(cli_broker, "g-lag")) == {0: (0, 6), 1: (0, 7)}
    josefk(
        cli_broker, "groups", "reset-offsets", "g-lag", "-t", "t-grp", "-p", "1", "--to", "offset:5",
        "--execute",
    )  # fmt: skip
    assert lag_by_partition(group_info(cli_broker, "g-lag")) == {0: (0, 6), 1: (5, 2)}

    # The group resumes where it was moved to: partition 0 from 0, partition 1 from 5.
    rest = josefk(cli_broker, "consume", "t-grp", "--group", "g-lag", "--no-follow").stdout
    assert sorted(rest.splitlines()) == [*(f"a{i}" for i in range(6)), "b5", "b6"]

    unknown = josefk(cli_broker, "groups", "describe", "g-lga", expect=1)
    assert 'unknown group "g-lga"' in unknown.stderr and 'did you mean "g-lag"' in unknown.stderr

    assert josefk(cli_broker, "groups", "delete", "g-lag", "--json").json() == [
        {"group": "g-lag", "ok": True, "error": None}
    ]
    assert "g-lag" not in {
        g["group"] for g in josefk(cli_broker, "groups", "list", "--json").json()
    }


def test_reset_offsets_targets_and_describe_all_groups(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "t-shift", "-p", "1")
    josefk(cli_broker, "topics", "create", "t-shift2", "-p", "1")
    josefk(cli_broker, "produce", "t-shift", stdin="".join(f"s{i}\n" for i in range(10)))
    josefk(cli_broker, "produce", "t-shift2", stdin="x\ny\n")
    josefk(cli_broker, "consume", "t-shift", "t-shift2", "--group", "g-shift", "--no-follow")

    def reset(*args: str) -> list[tuple[str, int | None, int]]:
        plan = josefk(cli_broker, "groups", "reset-offsets", "g-shift", *args, "--json").json()
        return [(p["topic"], p["old_offset"], p["new_offset"]) for p in plan["partitions"]]

    assert reset("-t", "t-shift", "--shift-by", "-3", "--execute") == [("t-shift", 10, 7)]
    # Shifts stay within the log; --to-current keeps the committed offsets.
    assert reset("--all-topics", "--shift-by", "-100") == [("t-shift", 7, 0), ("t-shift2", 2, 0)]
    assert reset("--all-topics", "--to-current") == [("t-shift", 7, 7), ("t-shift2", 2, 2)]
    # Every record is younger than a day: a day back is each partition's start.
    assert reset("-t", "t-shift", "--by-duration", "1d", "--dry-run") == [("t-shift", 7, 0)]
    assert reset("-t", "t-shift", "--by-duration", "P1D") == [("t-shift", 7, 0)]
    josefk(
        cli_broker, "groups", "reset-offsets", "g-shift", "-t", "t-shift", "--shift-by", "1",
        "--to", "earliest", expect=2,
    )  # fmt: skip
    josefk(
        cli_broker, "groups", "reset-offsets", "g-shift", "-t", "t-shift", "--by-duration",
        "soon", expect=2,
    )  # fmt: skip

    every = josefk(cli_broker, "groups", "describe", "--all-groups", "--json").json()
    described = {g["group"]: g for g in every}
    assert "g-shift" in described
    coordinator = described["g-shift"]["coordinator"]
    assert coordinator["id"] == 1 and coordinator["host"] == "127.0.0.1"
    table = josefk(cli_broker, "groups", "describe", "g-shift").stdout
    assert "coordinator  1 (127.0.0.1:" in table
    josefk(cli_broker, "groups", "describe", expect=2)
