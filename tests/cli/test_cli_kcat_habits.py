"""``josefk produce`` and ``josefk consume`` with the habits kcat and Kafka's tools taught:
relative start offsets, a stop offset or time, several topics and a regex, format strings,
tombstones both ways, whole files and binary values, custom delimiters. Each against a real
broker through the real command."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import (
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    josefk,
)

pytestmark = pytest.mark.timeout(180)


def fill(broker: BrokerProcess, topic: str, lines: list[str], *extra: str) -> None:
    josefk(broker, "topics", "create", topic, "--partitions", "1")
    josefk(broker, "produce", topic, *extra, stdin="".join(f"{line}\n" for line in lines))


def test_from_a_relative_offset_reads_the_last_records(cli_broker: BrokerProcess) -> None:
    fill(cli_broker, "rel", [f"r{i}" for i in range(10)])
    last = josefk(cli_broker, "consume", "rel", "--from", "offset:-3", "--no-follow")
    assert last.stdout.split() == ["r7", "r8", "r9"]
    # kcat's bare -o -N, and more than the partition holds starts at its beginning.
    bare = josefk(cli_broker, "consume", "rel", "-o", "-2", "--no-follow")
    assert bare.stdout.split() == ["r8", "r9"]
    everything = josefk(cli_broker, "consume", "rel", "--from", "offset:-50", "--no-follow")
    assert len(everything.stdout.split()) == 10


def test_until_an_offset_or_a_time(cli_broker: BrokerProcess) -> None:
    fill(cli_broker, "upto", [f"u{i}" for i in range(6)])
    first = josefk(cli_broker, "consume", "upto", "--until", "offset:4")
    assert first.stdout.split() == ["u0", "u1", "u2", "u3"]
    # A time after every record: stops at the end, as --no-follow does.
    stamped = josefk(cli_broker, "consume", "upto", "--format", "%T", "--no-follow")
    times = [int(t) for t in stamped.stdout.split()]
    later = josefk(cli_broker, "consume", "upto", "--until", f"timestamp:{times[-1] + 1}")
    assert len(later.stdout.split()) == 6
    before = josefk(cli_broker, "consume", "upto", "--until", f"timestamp:{times[0]}")
    assert before.stdout == ""
    # A bare ISO date, as Kafka's tools take one: the year 2000 is before every record.
    dated = josefk(cli_broker, "consume", "upto", "--until", "2000-01-01T00:00:00")
    assert dated.stdout == ""
    josefk(cli_broker, "consume", "upto", "--until", "beginning", expect=2)


def test_several_topics_and_a_regex(cli_broker: BrokerProcess) -> None:
    fill(cli_broker, "multi-a", ["a1"])
    fill(cli_broker, "multi-b", ["b1"])
    fill(cli_broker, "other-c", ["c1"])
    both = josefk(cli_broker, "consume", "multi-a", "other-c", "--no-follow")
    assert sorted(both.stdout.split()) == ["a1", "c1"]
    matched = josefk(cli_broker, "consume", "^multi-.*", "--no-follow", "--format", "%t=%s")
    assert sorted(matched.stdout.split()) == ["multi-a=a1", "multi-b=b1"]
    none = josefk(cli_broker, "consume", "^nothing-.*", "--no-follow", expect=1)
    assert "no topic matches ^nothing-.*" in none.stderr


def test_format_strings_and_tombstones(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "fmt", "--partitions", "1")
    josefk(cli_broker, "produce", "fmt", "-k", ":", "-H", "src=cli", "-Z", stdin="alice:1\nbob:\n")
    shown = josefk(
        cli_broker, "consume", "fmt", "--no-follow", "--format", "%t [%p] @%o: %k=%s %h|%S"
    )
    assert shown.stdout.splitlines() == [
        "fmt [0] @0: alice=1 src=cli|1",
        "fmt [0] @1: bob=null src=cli|-1",
    ]
    values = josefk(cli_broker, "consume", "fmt", "--no-follow")
    assert values.stdout.splitlines() == ["1", "null"]
    as_json = josefk(cli_broker, "consume", "fmt", "--no-follow", "--json").json_lines()
    assert [r["value"] for r in as_json] == ["1", None]
    # Without -Z an empty value is an empty value, not a tombstone.
    josefk(cli_broker, "produce", "fmt", "-k", ":", stdin="carol:\n")
    last = josefk(cli_broker, "consume", "fmt", "--from", "offset:-1", "--no-follow", "--json")
    assert last.json_lines()[0]["value"] == ""
    bad = josefk(cli_broker, "consume", "fmt", "--format", "%q", "--no-follow", expect=2)
    assert "unknown token %q" in bad.stderr


def test_whole_files_binary_values_and_delimiters(
    cli_broker: BrokerProcess, tmp_path: Path
) -> None:
    josefk(cli_broker, "topics", "create", "files", "--partitions", "1")
    binary = bytes(range(256)) + b"\n\r\nend"
    (tmp_path / "blob.bin").write_bytes(binary)
    (tmp_path / "two.txt").write_text("line one\nline two\n")
    josefk(
        cli_broker, "produce", "files", "--whole-file",
        "--file", str(tmp_path / "blob.bin"), "--file", str(tmp_path / "two.txt"),
    )  # fmt: skip
    records = josefk(cli_broker, "consume", "files", "--no-follow", "--json").json_lines()
    assert len(records) == 2
    import base64

    assert records[0]["value_encoding"] == "base64"
    assert base64.b64decode(records[0]["value"]) == binary
    assert records[1]["value"] == "line one\nline two\n"

    josefk(cli_broker, "topics", "create", "delimited", "--partitions", "1")
    josefk(cli_broker, "produce", "delimited", "-D", ";", stdin="a;b\nc;d")
    josefk(cli_broker, "produce", "delimited", "--delimiter", "\\0", stdin=b"x\x00y")
    split = josefk(cli_broker, "consume", "delimited", "--no-follow", "--json").json_lines()
    assert [r["value"] for r in split] == ["a", "b\nc", "d", "x", "y"]
