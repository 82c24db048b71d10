"""The ``josefk`` verbs against a broker whose only listener is SASL_PLAINTEXT: the client's
security settings come from ``--command-config FILE`` (Kafka tools' properties file, with
sasl.jaas.config as Java clients write it) or repeated ``-X key=value`` (as kcat), on the verb
or on ``josefk`` itself; a wrong password and missing settings exit 1 saying why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import BrokerProcess, josefk
from sasl_broker import start_sasl_broker, stop_broker

pytestmark = pytest.mark.timeout(180)

SCRAM_256 = (
    "-X",
    "security.protocol=SASL_PLAINTEXT",
    "-X",
    "sasl.mechanism=SCRAM-SHA-256",
    "-X",
    "sasl.username=alice",
    "-X",
    "sasl.password=alice-secret",
)


@pytest.fixture(scope="module")
def sasl_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_sasl_broker(
        tmp_path_factory.mktemp("josefk-cli-sasl"),
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        users={"alice": "alice-secret"},
        settings=["group.initial.rebalance.delay.ms=0"],
    )
    yield broker
    stop_broker(broker)


@pytest.fixture
def command_config(tmp_path: Path) -> str:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" password="alice-secret";\n'
    )
    return str(path)


def test_users_topics_produce_consume_with_command_config_and_x(
    sasl_only: BrokerProcess, command_config: str
) -> None:
    listed = josefk(sasl_only, "users", "list", "--json", "--command-config", command_config)
    assert [row["user"] for row in listed.json()] == ["alice"]

    josefk(sasl_only, "topics", "create", "secured", "-p", "2", *SCRAM_256)
    produced = josefk(
        sasl_only,
        "produce",
        "secured",
        "-k",
        ":",
        "--json",
        *SCRAM_256,
        stdin="a:1\nb:2\nc:3\n",
    ).json()
    assert produced["records"] == 3
    records = josefk(
        sasl_only,
        "consume",
        "secured",
        "--from",
        "beginning",
        "-n",
        "3",
        "--format",
        "json",
        "--command-config",
        command_config,
    ).json_lines()
    assert sorted((r["key"], r["value"]) for r in records) == [("a", "1"), ("b", "2"), ("c", "3")]

    # A new user, added over SASL, logs in with PLAIN; the settings given to josefk itself.
    josefk(sasl_only, "users", "add", "bob", "--password", "bob-secret", *SCRAM_256)
    as_bob = josefk(
        sasl_only,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=PLAIN",
        "-X",
        "sasl.username=bob",
        "-X",
        "sasl.password=bob-secret",
        "users",
        "list",
        "--json",
    ).json()
    assert [row["user"] for row in as_bob] == ["alice", "bob"]


def test_wrong_password_missing_settings_and_bad_settings(sasl_only: BrokerProcess) -> None:
    wrong = josefk(sasl_only, "topics", "list", *SCRAM_256[:-1], "sasl.password=wrong", expect=1)
    assert "SASL_AUTHENTICATION_FAILED" in wrong.stderr
    assert "Invalid username or password" in wrong.stderr
    missing = josefk(sasl_only, "topics", "list", expect=1)
    assert "--command-config" in missing.stderr
    unknown = josefk(sasl_only, "topics", "list", "-X", "ssl.keystore.password=x", expect=2)
    assert "unknown client security setting" in unknown.stderr
    incomplete = josefk(
        sasl_only, "topics", "list", "-X", "security.protocol=SASL_PLAINTEXT", expect=2
    )
    assert "sasl.mechanism" in incomplete.stderr
    no_file = josefk(sasl_only, "topics", "list", "--command-config", "/nonexistent", expect=2)
    assert "/nonexistent" in no_file.stderr
