"""``josefk produce`` and ``josefk consume`` as a user runs them: stdin and files, keys and
headers, codecs, where reading starts, formats, and a real ``consume | produce`` pipe.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_helpers import (
    COMMAND_TIMEOUT_S,
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    command,
    env_for,
    josefk,
)

# ------------------------------------------------------------------------------ produce/consume


def test_produce_consume_round_trip_with_keys_and_headers(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "t-round", "-p", "1")
    lines = ["alice:1", 'bob:{"n": 2}', "no separator here", "carol:ünïcode:with:colons"]
    summary = josefk(
        cli_broker,
        "produce",
        "t-round",
        "--key-separator",
        ":",
        "-H",
        "source=cli",
        "-H",
        "trace=a=b",
        "--json",
        stdin="\n".join(lines) + "\n",
    ).json()
    assert summary["records"] == 4 and summary["topic"] == "t-round"
    assert summary["partitions"] == [
        {"partition": 0, "records": 4, "first_offset": 0, "last_offset": 3}
    ]

    records = josefk(cli_broker, "consume", "t-round", "-n", "4", "--format", "json").json_lines()
    assert [r["offset"] for r in records] == [0, 1, 2, 3]
    assert [(r["key"], r["value"]) for r in records] == [
        ("alice", "1"),
        ("bob", '{"n": 2}'),
        (None, "no separator here"),
        ("carol", "ünïcode:with:colons"),
    ]
    for r in records:
        assert r["topic"] == "t-round" and r["partition"] == 0
        assert isinstance(r["timestamp"], int) and r["timestamp"] > 0
        assert r["headers"] == [{"key": "source", "value": "cli"}, {"key": "trace", "value": "a=b"}]

    # key:value output is produce's input again (a keyless record prints an empty key).
    text = josefk(cli_broker, "consume", "t-round", "-n", "4", "-f", "key:value").stdout
    assert text.splitlines() == [*lines[:2], ":no separator here", lines[3]]
    values = josefk(cli_broker, "consume", "t-round", "--no-follow").stdout
    assert values.splitlines() == ["1", '{"n": 2}', "no separator here", "ünïcode:with:colons"]


def test_consume_pipes_into_produce(cli_broker: BrokerProcess) -> None:
    """``josefk consume A --no-follow | josefk produce B``: a real shell pipe."""
    josefk(cli_broker, "topics", "create", "t-pipe-a", "-p", "1")
    josefk(cli_broker, "topics", "create", "t-pipe-b", "-p", "1")
    lines = [f"k{i}\tvalue {i}" for i in range(200)]
    josefk(cli_broker, "produce", "t-pipe-a", "-k", "\t", stdin="\n".join(lines))
    env = env_for(cli_broker.bootstrap)
    reader = subprocess.Popen(
        command("consume", "t-pipe-a", "--no-follow", "-f", "key:value", "-k", "\t"),
        stdout=subprocess.PIPE,
        env=env,
    )
    assert reader.stdout is not None
    writer = subprocess.run(
        command("produce", "t-pipe-b", "-k", "\t", "--json"),
        stdin=reader.stdout,
        capture_output=True,
        env=env,
        timeout=COMMAND_TIMEOUT_S,
    )
    reader.stdout.close()
    assert reader.wait(timeout=COMMAND_TIMEOUT_S) == 0
    assert writer.returncode == 0, writer.stderr
    assert json.loads(writer.stdout)["records"] == 200
    copied = josefk(cli_broker, "consume", "t-pipe-b", "--no-follow", "--json").json_lines()
    assert [(r["key"], r["value"]) for r in copied] == [tuple(x.split("\t")) for x in lines]


def test_produce_from_file_with_each_codec_partition_and_acks(
    cli_broker: BrokerProcess, tmp_path: Path
) -> None:
    codecs = ["gzip", "snappy", "lz4", "zstd"]
    josefk(cli_broker, "topics", "create", "t-codecs", "-p", str(len(codecs)))
    for partition, codec in enumerate(codecs):
        source = tmp_path / f"{codec}.txt"
        source.write_text("".join(f"{codec} {i}\n" for i in range(50)))
        summary = josefk(
            cli_broker,
            "produce",
            "t-codecs",
            "--file",
            str(source),
            "--partition",
            str(partition),
            "--compression",
            codec,
            "--acks",
            "1",
            "--json",
        ).json()
        assert summary["compression"] == codec and summary["acks"] == "1"
        assert summary["partitions"] == [
            {"partition": partition, "records": 50, "first_offset": 0, "last_offset": 49}
        ]
    records = josefk(cli_broker, "consume", "t-codecs", "--no-follow", "--json").json_lines()
    for partition, codec in enumerate(codecs):
        assert [r["value"] for r in records if r["partition"] == partition] == [
            f"{codec} {i}" for i in range(50)
        ]
    only = josefk(cli_broker, "consume", "t-codecs", "--partition", "3", "-n", "2").stdout
    assert only.splitlines() == ["zstd 0", "zstd 1"]


def test_produce_acks_0_and_bad_partition(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "t-acks0", "-p", "1")
    summary = josefk(cli_broker, "produce", "t-acks0", "--acks", "0", "--json", stdin="x\ny\n")
    assert summary.json()["records"] == 2
    assert josefk(cli_broker, "consume", "t-acks0", "-n", "2").stdout.splitlines() == ["x", "y"]
    bad = josefk(cli_broker, "produce", "t-acks0", "--partition", "3", stdin="x\n", expect=1)
    assert "partitions 0..0" in bad.stderr


def test_produce_reports_records_the_broker_refused(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "t-small", "-p", "1", "-c", "max.message.bytes=200")
    refused = josefk(cli_broker, "produce", "t-small", "--json", stdin="x" * 1000, expect=1)
    summary = refused.json()
    assert (summary["records"], summary["failed"]) == (0, 1)
    assert "MESSAGE_TOO_LARGE" in summary["error"]
    assert "1 of 1 records not delivered" in refused.stderr


def test_consume_from_offset_timestamp_and_end(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "t-from", "-p", "1")
    josefk(cli_broker, "produce", "t-from", stdin="".join(f"v{i}\n" for i in range(10)))
    records = josefk(cli_broker, "consume", "t-from", "--no-follow", "--json").json_lines()
    assert len(records) == 10

    from_offset = josefk(cli_broker, "consume", "t-from", "--from", "offset:7", "--no-follow")
    assert from_offset.stdout.splitlines() == ["v7", "v8", "v9"]

    stamp = records[4]["timestamp"]
    by_time = josefk(
        cli_broker, "consume", "t-from", "--from", f"timestamp:{stamp}", "--json", "--no-follow"
    ).json_lines()
    assert by_time[0]["timestamp"] >= stamp and by_time[-1]["offset"] == 9
    assert all(r["timestamp"] >= stamp for r in by_time)
    future = josefk(
        cli_broker, "consume", "t-from", "--from", "timestamp:2999-01-01T00:00:00", "--no-follow"
    )
    assert future.stdout == ""

    at_end = josefk(cli_broker, "consume", "t-from", "--from", "end", "--no-follow")
    assert at_end.stdout == ""
    assert josefk(cli_broker, "consume", "t-from", "-n", "2").stdout.splitlines() == ["v0", "v1"]
