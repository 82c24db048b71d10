"""The pure parts of the ``josefk`` client verbs: specs, timestamps, suggestions,
percentiles, record formats, and click's parsing through CliRunner (no broker)."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from josefk.cli.common import (
    StartSpec,
    close_names,
    parse_key_values,
    parse_start,
    parse_timestamp,
    unknown_error,
)
from josefk.cli.consume import formatter, record_json
from josefk.cli.main import _register, cli
from josefk.cli.perf import percentile
from josefk.client import ConsumerRecord, TimestampType


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("beginning", StartSpec("beginning")),
        ("earliest", StartSpec("beginning")),
        ("END", StartSpec("end")),
        ("latest", StartSpec("end")),
        ("offset:42", StartSpec("offset", 42)),
        ("timestamp:1700000000000", StartSpec("timestamp", 1_700_000_000_000)),
        ("timestamp:2023-11-14T22:13:20", StartSpec("timestamp", 1_700_000_000_000)),
        ("timestamp:2023-11-14T23:13:20+01:00", StartSpec("timestamp", 1_700_000_000_000)),
        # A bare ISO date, as Kafka's tools take it (--to-datetime).
        ("2023-11-14T22:13:20", StartSpec("timestamp", 1_700_000_000_000)),
        ("2023-11-14", StartSpec("timestamp", 1_699_920_000_000)),
    ],
)
def test_parse_start(text: str, expected: StartSpec) -> None:
    assert parse_start(text) == expected


@pytest.mark.parametrize(
    "text", ["", "offset:", "offset:x", "offset:--1", "timestamp:", "soon", "2023-13-45"]
)
def test_parse_start_rejects(text: str) -> None:
    with pytest.raises(click.BadParameter):
        parse_start(text)


def test_relative_offsets_count_back_from_the_end() -> None:
    assert parse_start("offset:-5") == StartSpec("offset", -5)
    assert parse_start("-5") == StartSpec("offset", -5)
    assert parse_start("42") == StartSpec("offset", 42)
    with pytest.raises(click.BadParameter):
        parse_start("offset:-1", param="--to", relative=False)


@given(st.integers(min_value=0, max_value=2**53))
def test_parse_timestamp_of_milliseconds_is_identity(ms: int) -> None:
    assert parse_timestamp(str(ms)) == ms


def test_parse_key_values() -> None:
    assert parse_key_values(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(click.BadParameter):
        parse_key_values(["novalue"])


def test_unknown_names_suggest_close_ones() -> None:
    assert close_names("ordres", ["orders", "payments", "order-events"])[0] == "orders"
    message = unknown_error("topic", "ordres", ["orders", "payments"], "josefk topics list").message
    assert message == 'unknown topic "ordres"; did you mean "orders"?'
    far = unknown_error("topic", "zzz", ["orders"], "josefk topics list").message
    assert "did you mean" not in far and "josefk topics list" in far
    assert "no topics yet" in unknown_error("topic", "x", [], "josefk topics list").message


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=200))
def test_percentiles_are_ordered_members(values: list[float]) -> None:
    ordered = sorted(values)
    p50, p95, p99 = (percentile(ordered, f) for f in (0.5, 0.95, 0.99))
    assert ordered[0] <= p50 <= p95 <= p99 <= ordered[-1]
    assert {p50, p95, p99} <= set(ordered)


def test_percentile_nearest_rank() -> None:
    ordered = [float(i) for i in range(1, 101)]
    assert (percentile(ordered, 0.5), percentile(ordered, 0.99)) == (50.0, 99.0)
    assert percentile([], 0.5) == 0.0


def record(key: bytes | None, value: bytes | None) -> ConsumerRecord:
    return ConsumerRecord(
        "t", 1, 7, 1_700_000_000_000, TimestampType.CREATE_TIME, key, value, (("h", b"v"),)
    )


def test_record_formats() -> None:
    assert formatter("value", b":")(record(b"k", b"v")) == b"v\n"
    assert formatter("key:value", b"\t")(record(b"k", b"v")) == b"k\tv\n"
    # A tombstone (null value) shows as null; a missing key stays empty.
    assert formatter("key:value", b":")(record(None, None)) == b":null\n"
    line = formatter("json", b":")(record(b"k", "é".encode()))
    assert json.loads(line) == {
        "topic": "t",
        "partition": 1,
        "offset": 7,
        "timestamp": 1_700_000_000_000,
        "timestamp_type": "CREATE_TIME",
        "key": "k",
        "value": "é",
        "headers": [{"key": "h", "value": "v"}],
    }


def test_binary_values_are_base64_in_json() -> None:
    data = record_json(record(None, b"\xff\x00"))
    assert (data["key"], data["value"], data["value_encoding"]) == (None, "/wA=", "base64")
    assert "key_encoding" not in data


def test_every_client_verb_has_help_and_json_where_it_prints_data() -> None:
    _register()
    runner = CliRunner()
    for verb in (
        ["topics", "create"],
        ["topics", "list"],
        ["topics", "describe"],
        ["topics", "alter"],
        ["topics", "delete"],
        ["produce"],
        ["consume"],
        ["groups", "list"],
        ["groups", "describe"],
        ["groups", "reset-offsets"],
        ["groups", "delete"],
        ["cluster", "info"],
        ["perf", "produce"],
        ["perf", "consume"],
    ):
        result = runner.invoke(cli, [*verb, "--help"])
        assert result.exit_code == 0, (verb, result.output)
        assert "--json" in result.output and "--bootstrap" in result.output, verb


def test_group_and_partition_or_offsets_do_not_mix() -> None:
    _register()
    runner = CliRunner()
    mixed = runner.invoke(cli, ["consume", "t", "--group", "g", "--from", "offset:3"])
    assert mixed.exit_code == 2 and "reset-offsets" in mixed.output
    mixed = runner.invoke(cli, ["consume", "t", "--group", "g", "-p", "0"])
    assert mixed.exit_code == 2
    nothing = runner.invoke(cli, ["topics", "alter", "t"])
    assert nothing.exit_code == 2 and "nothing to change" in nothing.output


@pytest.mark.parametrize(
    ("where", "bootstrap", "named"),
    [
        ("verb", "127.0.0.1:99999", "port 99999 is outside 1..65535"),
        ("group", ":abc", "port 'abc' is not a number"),
        ("env", "localhost:-5", "port '-5' is not a number"),
        ("verb", "127.0.0.1:9092,broker2", "'broker2': no port"),
        ("verb", ":9092", "no host before the port"),
        # Kafka's tools spell it --bootstrap-server: the same option.
        ("verb-kafka", "127.0.0.1:99999", "port 99999 is outside 1..65535"),
        ("group-kafka", ":abc", "port 'abc' is not a number"),
    ],
)
def test_a_malformed_bootstrap_is_a_usage_error_naming_the_bad_part(
    where: str, bootstrap: str, named: str
) -> None:
    """Before: a Python traceback from deep in the client."""
    _register()
    args = ["topics", "list"]
    env = {"JOSEFK_BOOTSTRAP": ""}
    if where == "verb":
        args += ["--bootstrap", bootstrap]
    elif where == "verb-kafka":
        args += ["--bootstrap-server", bootstrap]
    elif where == "group":
        args = ["--bootstrap", bootstrap, *args]
    elif where == "group-kafka":
        args = ["--bootstrap-server", bootstrap, *args]
    else:
        env["JOSEFK_BOOTSTRAP"] = bootstrap
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 2, result.output
    assert named in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _command_paths(command: click.Command, path: list[str]) -> list[list[str]]:
    paths = [path]
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            paths += _command_paths(sub, [*path, name])
    return paths


def test_no_rest_markup_leaks_into_help() -> None:
    """Docstrings are help text: ``double backquotes`` would be printed as they stand.
    Before: topics create, topics alter and configs alter showed them."""
    _register()
    leaking = {}
    for path in _command_paths(cli, []):
        output = CliRunner().invoke(cli, [*path, "--help"]).output
        lines = [line for line in output.splitlines() if "``" in line]
        if lines:
            leaking[" ".join(path)] = lines
    assert leaking == {}
