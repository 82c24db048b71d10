"""``josefk topics offsets`` (offsets for a time, as kafka-get-offsets.sh) and ``josefk
topics delete-records`` / ``trim`` (as kafka-delete-records.sh), against a real broker."""

from __future__ import annotations

import pytest
from cli_helpers import (
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    josefk,
)

pytestmark = pytest.mark.timeout(180)


def test_offsets_for_times_and_ends(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "offs", "--partitions", "2")
    josefk(cli_broker, "produce", "offs", "-p", "0", stdin="a\nb\nc\n")
    stamps = josefk(cli_broker, "consume", "offs", "--no-follow", "--format", "%T").stdout.split()

    latest = josefk(cli_broker, "topics", "offsets", "offs")
    assert latest.stdout.splitlines() == ["offs:0:3", "offs:1:0"]
    earliest = josefk(cli_broker, "topics", "offsets", "offs:0", "--time", "earliest")
    assert earliest.stdout.splitlines() == ["offs:0:0"]
    at = josefk(cli_broker, "topics", "offsets", "offs:0", "--time", stamps[-1], "--json").json()
    # The first record at or after the time (records of one batch may share a millisecond).
    first = next(i for i, stamp in enumerate(stamps) if int(stamp) >= int(stamps[-1]))
    assert at[0]["offset"] == first and at[0]["timestamp"] == int(stamps[-1])
    future = josefk(
        cli_broker, "topics", "offsets", "offs", "--time", "2999-01-01T00:00:00", "--json"
    ).json()
    assert [(r["offset"], r["after_last_record"]) for r in future] == [(3, True), (0, True)]
    josefk(cli_broker, "topics", "offsets", "offs:7", expect=1)
    josefk(cli_broker, "topics", "offsets", "offs", "--time", "soon", expect=2)


def test_delete_records_and_trim(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "trimmed", "--partitions", "2")
    josefk(cli_broker, "produce", "trimmed", "-p", "0", stdin="".join(f"a{i}\n" for i in range(5)))
    josefk(cli_broker, "produce", "trimmed", "-p", "1", stdin="b0\nb1\n")

    moved = josefk(cli_broker, "topics", "delete-records", "trimmed:0=3", "--json").json()
    assert moved == [{"topic": "trimmed", "partition": 0, "log_start_offset": 3}]
    left = josefk(cli_broker, "consume", "trimmed", "-p", "0", "--no-follow").stdout.split()
    assert left == ["a3", "a4"]

    everything = josefk(cli_broker, "topics", "trim", "trimmed=-1", "--json").json()
    assert [(r["partition"], r["log_start_offset"]) for r in everything] == [(0, 5), (1, 2)]
    assert josefk(cli_broker, "consume", "trimmed", "--no-follow").stdout == ""

    bad = josefk(cli_broker, "topics", "delete-records", "trimmed:0", expect=2)
    assert "TOPIC[:PARTITION]=OFFSET" in bad.stderr
    josefk(cli_broker, "topics", "delete-records", "trimmed:x=1", expect=2)
    josefk(cli_broker, "topics", "delete-records", "trimmd:0=1", expect=1)
