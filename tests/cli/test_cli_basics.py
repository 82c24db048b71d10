"""``josefk --help``, usage errors, bootstrap resolution, ``cluster info`` and ``topics``, run
as subprocesses against a real broker; ``--json`` outputs parsed with json.loads.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence

import pytest
from cli_helpers import (
    COMMAND_TIMEOUT_S,
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    command,
    env_for,
    free_port,
    josefk,
)
from click.testing import CliRunner

from josefk.cli.main import _register, cli

# ------------------------------------------------------------------------------ help, usage


def test_help_lists_every_verb_on_one_line_and_the_exit_codes() -> None:
    result = josefk(None, "--help")
    lines = result.stdout.splitlines()
    verbs = ["cluster", "consume", "dump-log", "groups", "perf", "produce", "serve", "topics"]
    for verb in verbs:
        (line,) = [ln for ln in lines if ln.strip().startswith(verb + " ")]
        assert len(line.split()) > 1, line  # the verb and its one-line description
    assert "Exit codes" in result.stdout
    for code in ("0", "1", "2"):
        assert any(ln.strip().startswith(code + " ") for ln in lines)
    assert "JOSEFK_BOOTSTRAP" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("topics", "create"),  # missing argument
        ("topics", "list", "--no-such-flag"),
        ("topics", "create", "x", "-c", "retention.ms"),  # not KEY=VALUE
        ("consume", "x", "--from", "yesterday-ish"),
        ("consume", "x", "--format", "xml"),
        ("produce", "x", "--acks", "2"),
        ("groups", "reset-offsets", "g", "--topic", "t", "--to", "offset:abc"),
    ],
)
def test_usage_errors_exit_2(args: Sequence[str]) -> None:
    # Pure parsing: click's runner in-process (the subprocess case is the test below).
    _register()
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 2, result.output
    assert "Usage:" in result.output or "Error" in result.output


def test_usage_error_exit_code_of_the_real_command() -> None:
    result = josefk(None, "consume", "x", "--from", "yesterday-ish", expect=2)
    assert "--from" in result.stderr and "Usage:" in result.stderr


def test_unreachable_broker_names_the_address_and_suggests_bootstrap() -> None:
    address = f"127.0.0.1:{free_port()}"
    result = josefk(None, "--bootstrap", address, "topics", "list", expect=1)
    assert address in result.stderr
    assert "--bootstrap" in result.stderr
    # The environment variable is read too, and the verb's own flag wins over it.
    proc = subprocess.run(
        command("cluster", "info", "--json"),
        capture_output=True,
        env=env_for(address),
        timeout=COMMAND_TIMEOUT_S,
    )
    assert proc.returncode == 1 and address in proc.stderr.decode()


# ------------------------------------------------------------------------------ cluster


def test_cluster_info(cli_broker: BrokerProcess) -> None:
    info = josefk(cli_broker, "cluster", "info", "--json").json()
    assert info["cluster_id"]
    (node,) = info["brokers"]
    assert (node["host"], node["port"]) == (cli_broker.host, cli_broker.port)
    assert info["controller_id"] == node["node_id"]
    assert isinstance(info["topics"], int)
    table = josefk(cli_broker, "cluster", "info").stdout
    assert info["cluster_id"] in table and str(cli_broker.port) in table


def test_bootstrap_flag_on_the_verb_wins_over_the_environment(cli_broker: BrokerProcess) -> None:
    wrong = f"127.0.0.1:{free_port()}"
    proc = subprocess.run(
        command("cluster", "info", "--json", "--bootstrap", cli_broker.bootstrap),
        capture_output=True,
        env=env_for(wrong),
        timeout=COMMAND_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["brokers"][0]["port"] == cli_broker.port


# ------------------------------------------------------------------------------ topics


def test_topics_create_list_describe_alter_delete(cli_broker: BrokerProcess) -> None:
    created = josefk(
        cli_broker,
        "topics",
        "create",
        "t-life",
        "-p",
        "3",
        "-c",
        "retention.ms=3600000",
        "--json",
    ).json()
    assert created == [{"topic": "t-life", "ok": True, "error": None}]

    listed = josefk(cli_broker, "topics", "list", "--json").json()
    row = next(r for r in listed if r["name"] == "t-life")
    assert (row["partitions"], row["replication_factor"], row["internal"]) == (3, 1, False)
    assert "__consumer_offsets" not in {r["name"] for r in listed}
    assert "t-life" in josefk(cli_broker, "topics", "list").stdout

    josefk(cli_broker, "produce", "t-life", "-p", "1", stdin="a\nb\n")
    info = josefk(cli_broker, "topics", "describe", "t-life", "--json").json()
    assert info["name"] == "t-life" and info["internal"] is False
    assert [p["partition"] for p in info["partitions"]] == [0, 1, 2]
    by_partition = {p["partition"]: p for p in info["partitions"]}
    assert by_partition[1]["high_watermark"] == 2
    assert by_partition[0]["high_watermark"] == 0
    assert all(p["log_start_offset"] == 0 for p in info["partitions"])
    assert all(p["leader"] == p["replicas"][0] for p in info["partitions"])
    assert info["configs"]["retention.ms"]["value"] == "3600000"
    assert info["configs"]["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert info["configs"]["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    table = josefk(cli_broker, "topics", "describe", "t-life").stdout
    assert "HIGH-WATERMARK" in table and "retention.ms" in table

    altered = josefk(
        cli_broker,
        "topics",
        "alter",
        "t-life",
        "--set",
        "cleanup.policy=compact",
        "--delete",
        "retention.ms",
        "--partitions",
        "5",
        "--json",
    ).json()
    assert altered == {
        "topic": "t-life",
        "set": {"cleanup.policy": "compact"},
        "deleted": ["retention.ms"],
        "partitions": 5,
    }
    info = josefk(cli_broker, "topics", "describe", "t-life", "--json", "--non-default").json()
    assert len(info["partitions"]) == 5
    assert set(info["configs"]) == {"cleanup.policy"}
    assert info["configs"]["cleanup.policy"]["value"] == "compact"

    shrink = josefk(cli_broker, "topics", "alter", "t-life", "--partitions", "2", expect=1)
    assert "can only be added" in shrink.stderr

    deleted = josefk(cli_broker, "topics", "delete", "t-life", "--json").json()
    assert deleted == [{"topic": "t-life", "ok": True, "error": None}]
    assert "t-life" not in {
        r["name"] for r in josefk(cli_broker, "topics", "list", "--json").json()
    }


def test_topics_create_twice_fails_unless_if_not_exists(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "t-twice")
    again = josefk(cli_broker, "topics", "create", "t-twice", "--json", expect=1).json()
    assert again[0]["ok"] is False and "TOPIC_ALREADY_EXISTS" in again[0]["error"]
    josefk(cli_broker, "topics", "create", "t-twice", "--if-not-exists")


def test_unknown_topic_says_so_and_lists_close_names(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "payments")
    for args in (
        ("topics", "describe", "paymnets"),
        ("consume", "paymnets", "-n", "1"),
        # (produce creates a topic on first use where the broker allows it, as Kafka's
        # producers do: tests/cli/test_cli_produce_auto_create.py)
        ("topics", "alter", "paymnets", "--set", "retention.ms=1"),
        ("topics", "delete", "paymnets"),
    ):
        result = josefk(cli_broker, *args, stdin="x\n", expect=1)
        assert 'unknown topic "paymnets"' in result.stderr, (args, result)
        assert 'did you mean "payments"' in result.stderr, (args, result)
    far = josefk(cli_broker, "topics", "describe", "zzzzzzzzzz", expect=1)
    assert 'unknown topic "zzzzzzzzzz"' in far.stderr and "did you mean" not in far.stderr
    # Nothing was auto-created along the way.
    names = {r["name"] for r in josefk(cli_broker, "topics", "list", "--json").json()}
    assert "paymnets" not in names
