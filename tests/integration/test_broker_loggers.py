"""A broker's log levels as Kafka's BROKER_LOGGER config resource (KIP-412), on a real
``josefk serve``: ``josefk configs --entity-type broker-loggers`` lists the loggers and their
levels, a package's level set at run time reaches its modules' log lines (a KIP-848
heartbeat at DEBUG shows up in the broker's log) and deleting it goes back to the parent's
level; unknown loggers and levels, deleting the root's level, another broker's id and the
old AlterConfigs are refused with Kafka's error codes, and a refused request changes
nothing."""

from __future__ import annotations

import json
import time
import uuid

from broker_process import BrokerFactory, BrokerProcess, run_josefk
from client_helpers import ck_config, ck_create_topic, unique_topic
from confluent_kafka import Consumer
from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

BROKER_LOGGER = 8
GROUP_LOGGER = "josefk.broker.group"
HEARTBEAT_LOGGER = "josefk.broker.group.consumer"


def levels(broker: BrokerProcess) -> dict[str, str]:
    out = run_josefk(
        broker.bootstrap,
        "configs",
        "describe",
        "--entity-type",
        "broker-loggers",
        "--entity-name",
        "1",
        "--json",
    )
    return {name: entry["value"] for name, entry in json.loads(out)["configs"].items()}


def alter(broker: BrokerProcess, *args: str) -> None:
    run_josefk(
        broker.bootstrap,
        "configs",
        "alter",
        "--entity-type",
        "broker-loggers",
        "--entity-name",
        "1",
        *args,
    )


def heartbeat_logged(broker: BrokerProcess) -> bool:
    return any(
        HEARTBEAT_LOGGER in line and "heartbeat of" in line
        for line in broker.log_path.read_text(errors="replace").splitlines()
    )


def join_once(broker: BrokerProcess) -> None:
    """A KIP-848 member joins and gets its assignment: heartbeats reach the coordinator."""
    topic = unique_topic("loggers")
    ck_create_topic(broker.bootstrap, topic, partitions=1)
    consumer = Consumer(
        ck_config(
            broker.bootstrap,
            **{"group.id": f"g-{uuid.uuid4().hex[:8]}", "group.protocol": "consumer"},
        )
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not consumer.assignment():
            consumer.poll(0.1)
        assert consumer.assignment()
    finally:
        consumer.close()


def test_a_package_level_set_at_run_time_reaches_its_modules(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory()
    before = levels(broker)
    assert before["root"] == "INFO"
    assert before[HEARTBEAT_LOGGER] == "INFO"

    join_once(broker)
    assert not heartbeat_logged(broker), "a DEBUG line before DEBUG was set"

    alter(broker, "--add-config", f"{GROUP_LOGGER}=DEBUG")
    after = levels(broker)
    assert after[GROUP_LOGGER] == "DEBUG"
    assert after[HEARTBEAT_LOGGER] == "DEBUG"  # effective: inherited from the package
    assert after["josefk.broker.network"] == "INFO"
    join_once(broker)
    assert heartbeat_logged(broker)

    alter(broker, "--delete-config", GROUP_LOGGER)
    assert levels(broker)[HEARTBEAT_LOGGER] == "INFO"


def _incremental(client: RawClient, name: str, changes: list[tuple[str, int, str | None]]) -> int:
    req = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    response = client.call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[
            req.AlterConfigsResource(
                resource_type=BROKER_LOGGER,
                resource_name=name,
                configs=[
                    req.AlterConfigsResource.AlterableConfig(
                        name=logger, config_operation=op, value=value
                    )
                    for logger, op, value in changes
                ],
            )
        ],
        validate_only=False,
    )
    return int(response.responses[0].error_code)


def test_refused_changes_are_named_by_kafka_codes_and_change_nothing(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory()
    client = RawClient(broker.bootstrap)
    try:
        set_, delete, append = 0, 1, 2
        network = "josefk.broker.network"
        assert _incremental(client, "1", [("no.such.logger", set_, "DEBUG")]) == (
            ErrorCode.INVALID_CONFIG
        )
        # Checked whole: a good change beside a bad level is not applied either.
        assert _incremental(client, "1", [(network, set_, "DEBUG"), ("root", set_, "LOUD")]) == (
            ErrorCode.INVALID_CONFIG
        )
        assert _incremental(client, "1", [("root", delete, None)]) == ErrorCode.INVALID_REQUEST
        assert _incremental(client, "1", [(network, append, "DEBUG")]) == (
            ErrorCode.INVALID_REQUEST
        )
        assert _incremental(client, "2", [(network, set_, "DEBUG")]) == ErrorCode.INVALID_REQUEST
        old = request_class(ApiKey.ALTER_CONFIGS)
        response = client.call(
            ApiKey.ALTER_CONFIGS,
            1,
            resources=[
                old.AlterConfigsResource(
                    resource_type=BROKER_LOGGER,
                    resource_name="1",
                    configs=[old.AlterConfigsResource.AlterableConfig(name=network, value="DEBUG")],
                )
            ],
            validate_only=False,
        )
        assert response.responses[0].error_code == ErrorCode.INVALID_REQUEST
        assert levels(broker)[network] == "INFO"
        assert _incremental(client, "1", [(network, set_, "warn")]) == ErrorCode.NONE
        assert levels(broker)[network] == "WARN"
    finally:
        client.close()
