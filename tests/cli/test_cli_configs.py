"""``josefk configs describe|alter`` against a real broker: broker (per broker and cluster
default, KIP-226) and topic configs, kafka-configs.sh's spelling, the broker's refusals."""

from __future__ import annotations

from cli_helpers import (
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    josefk,
)


def test_broker_default_and_per_broker_configs(cli_broker: BrokerProcess) -> None:
    altered = josefk(
        cli_broker,
        "configs",
        "alter",
        "--broker-defaults",
        "--add-config",
        "log.retention.ms=3600000,log.cleanup.policy=[compact,delete]",
        "--json",
    ).json()
    assert altered == {
        "resource": {"type": "broker", "name": ""},
        "set": {"log.retention.ms": "3600000", "log.cleanup.policy": "compact,delete"},
        "deleted": [],
        "validate_only": False,
    }
    defaults = josefk(cli_broker, "configs", "describe", "--broker-defaults", "--json").json()
    assert {k: v["value"] for k, v in defaults["configs"].items()} == {
        "log.retention.ms": "3600000",
        "log.cleanup.policy": "compact,delete",
    }

    # kafka-configs.sh's spelling: a per-broker value above the default.
    josefk(
        cli_broker,
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--add-config",
        "log.retention.ms=60000",
    )
    described = josefk(cli_broker, "configs", "describe", "--broker", "1", "--json").json()
    retention = described["configs"]["log.retention.ms"]
    assert (retention["value"], retention["source"], retention["read_only"]) == (
        "60000",
        "DYNAMIC_BROKER_CONFIG",
        False,
    )
    assert [(s["value"], s["source"]) for s in retention["synonyms"]] == [
        ("60000", "DYNAMIC_BROKER_CONFIG"),
        ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("168", "DEFAULT_CONFIG"),
    ]
    # Without --all only the configs set somewhere are listed.
    assert "num.partitions" not in described["configs"]
    everything = josefk(cli_broker, "configs", "describe", "--broker", "1", "--all", "--json")
    assert everything.json()["configs"]["num.partitions"]["read_only"] is True
    table = josefk(cli_broker, "configs", "describe", "--broker", "1", "--synonyms").stdout
    assert (
        "READ-ONLY" in table and "log.retention.ms=3600000(DYNAMIC_DEFAULT_BROKER_CONFIG)" in table
    )

    deleted = josefk(
        cli_broker, "configs", "alter", "--broker", "1", "--delete-config", "log.retention.ms"
    )
    assert "broker 1: deleted log.retention.ms" in deleted.stdout
    josefk(
        cli_broker,
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--delete-config",
        "log.retention.ms,log.cleanup.policy",
    )
    assert (
        josefk(cli_broker, "configs", "describe", "--broker-defaults", "--json").json()["configs"]
        == {}
    )


def test_topic_configs_and_validate_only(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "cfg-topic")
    josefk(
        cli_broker, "configs", "alter", "--topic", "cfg-topic", "--add-config", "retention.ms=1000"
    )
    checked = josefk(
        cli_broker,
        "configs",
        "alter",
        "--broker",
        "1",
        "--add-config",
        "log.segment.bytes=4096",
        "--validate-only",
    )
    assert "would set log.segment.bytes=4096" in checked.stdout
    described = josefk(
        cli_broker, "configs", "describe", "--topic", "cfg-topic", "--all", "--json"
    ).json()
    assert described["configs"]["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert described["configs"]["segment.bytes"]["value"] == "1073741824"


def test_refusals_and_usage_errors(cli_broker: BrokerProcess) -> None:
    static = josefk(
        cli_broker,
        "configs",
        "alter",
        "--broker",
        "1",
        "--add-config",
        "num.partitions=3",
        expect=1,
    )
    assert "Cannot update these configs dynamically: Set(num.partitions)" in static.stderr
    bad = josefk(
        cli_broker, "configs", "alter", "--broker", "1", "--set", "log.segment.bytes=x", expect=1
    )
    assert "INVALID_CONFIG" in bad.stderr and "log.segment.bytes" in bad.stderr
    both = josefk(cli_broker, "configs", "describe", "--broker", "1", "--topic", "t", expect=2)
    assert "exactly one" in both.stderr
    josefk(cli_broker, "configs", "alter", "--broker", "1", expect=2)
    josefk(cli_broker, "topics", "create", "cfg-orders")
    unknown = josefk(cli_broker, "configs", "describe", "--topic", "cfg-ordres", expect=1)
    assert 'did you mean "cfg-orders"' in unknown.stderr
    josefk(cli_broker, "configs", "describe", "--broker", "one", expect=2)
    absent = josefk(cli_broker, "configs", "describe", "--broker", "2", expect=1)
    assert "has no such broker" in absent.stderr and "its brokers: 1" in absent.stderr
    assert "Is `josefk serve` running" not in absent.stderr
