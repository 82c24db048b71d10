"""``josefk groups``: describe with lag per partition, list, reset-offsets (dry run, earliest,
offset:N) and delete, around ``josefk consume --group``, run as subprocesses against
a real broker.
"""

from __future__ import annotations

import re
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


def test_share_group_describe_and_reset_offsets(cli_broker: BrokerProcess) -> None:
    """A share group's describe names its members' epochs and the share-partition start
    offset (not a committed offset), and reset-offsets is refused while a member is active
    (AlterShareGroupOffsets' rule) and moves the start offset once the group is empty."""
    josefk(cli_broker, "topics", "create", "t-share", "-p", "1")
    josefk(cli_broker, "produce", "t-share", stdin="".join(f"r{i}\n" for i in range(4)))
    josefk(
        cli_broker, "configs", "alter", "--group", "g-share", "--set",
        "share.auto.offset.reset=earliest",
    )  # fmt: skip
    process = subprocess.Popen(
        command("consume", "t-share", "--share-group", "g-share"),
        env=env_for(cli_broker.bootstrap),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "r0"  # a member, consuming
        info = group_info(cli_broker, "g-share")
        assert info["type"] == "share" and info["state"] == "Stable"
        (member,) = info["members"]
        assert member["member_epoch"] >= 1 and "target_assignment" not in member
        assert member["assignment"] == [{"topic": "t-share", "partition": 0}]
        table = josefk(cli_broker, "groups", "describe", "g-share").stdout
        assert re.search(r"MEMBER +EPOCH +CLIENT-ID", table)
        assert "START-OFFSET" in table and "COMMITTED" not in table
        assert re.search(r"assignor +simple\n", table)

        refused = josefk(
            cli_broker, "groups", "reset-offsets", "g-share", "-t", "t-share", "--to",
            "earliest", "--execute", expect=1,
        )  # fmt: skip
        assert "stop its consumers" in refused.stderr
    finally:
        process.terminate()
        process.communicate(timeout=COMMAND_TIMEOUT_S)

    info = group_info(cli_broker, "g-share")
    assert info["state"] == "Empty" and info["members"] == []
    assert [(p["start_offset"], p["lag"]) for p in info["partitions"]] == [(4, 0)]
    done = josefk(
        cli_broker, "groups", "reset-offsets", "g-share", "-t", "t-share", "--to", "offset:1",
        "--execute",
    )  # fmt: skip
    assert "committed 1 offset for group g-share" in done.stderr
    info = group_info(cli_broker, "g-share")
    assert [(p["start_offset"], p["lag"]) for p in info["partitions"]] == [(1, 3)]
    again = josefk(cli_broker, "consume", "t-share", "--share-group", "g-share", "-n", "3")
    assert again.stdout.splitlines() == ["r1", "r2", "r3"]
