"""Dynamic broker configuration (KIP-226) against a real ``josefk serve``, with Kafka clients.

confluent-kafka's AdminClient (incremental_alter_configs / describe_configs on
``ConfigResource(BROKER, "1")``) and kafka-python's admin change log defaults that apply to
existing topics at once, survive a restart, and are refused with Kafka's errors where they
must be. Neither Python client can name the cluster-wide default (``BROKER ""``: both refuse
an empty broker name before sending), so josefk's AIOAdmin sets it, as kafka-configs.sh
--entity-default would; synonyms are read with AIOAdmin too (confluent-kafka keeps them in a
dict by name, so a key's dynamic, static and default values collapse into one). Each test
that changes the broker has a broker of its own.
"""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import (
    CLIENT_TIMEOUT_S,
    assert_delivered,
    ck_admin,
    ck_create_topic,
    ck_describe_configs,
    ck_produce,
    make_messages,
    unique_topic,
)
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from josefk.client import AIOAdmin, ConfigSource, ResourceType
from josefk.client import ConfigEntry as JosefkEntry

pytestmark = pytest.mark.timeout(120)

T = CLIENT_TIMEOUT_S
STATIC = ["log.segment.bytes=1048576", "log.retention.hours=48"]


def set_default(bootstrap: str, changes: dict[str, str | None]) -> None:
    """Set (a value) or delete (None) cluster-wide defaults through josefk's admin."""

    async def go() -> None:
        async with AIOAdmin(bootstrap_servers=bootstrap) as admin:
            await admin.alter_configs((ResourceType.BROKER, ""), changes)

    asyncio.run(go())


def josefk_describe(bootstrap: str, rtype: ResourceType, name: str) -> dict[str, JosefkEntry]:
    """DescribeConfigs with synonyms, through josefk's admin."""

    async def go() -> dict[str, JosefkEntry]:
        async with AIOAdmin(bootstrap_servers=bootstrap) as admin:
            found = await admin.describe_configs([(rtype, name)], include_synonyms=True)
        return found[(rtype, name)]

    return asyncio.run(go())


def alter(bootstrap: str, resource: ConfigResource, *, validate_only: bool = False) -> None:
    admin = ck_admin(bootstrap)
    futures = admin.incremental_alter_configs(
        [resource], request_timeout=T, validate_only=validate_only
    )
    futures[resource].result(timeout=T)


def alter_error(bootstrap: str, resource: ConfigResource) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        alter(bootstrap, resource)
    error: KafkaError = info.value.args[0]
    return error


def set_config(name: str, key: str, value: str) -> ConfigResource:
    return ConfigResource(
        ConfigResource.Type.BROKER,
        name,
        incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)],
    )


def delete_config(name: str, key: str) -> ConfigResource:
    return ConfigResource(
        ConfigResource.Type.BROKER,
        name,
        incremental_configs=[
            ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )


def source(entry: ConfigEntry) -> ConfigSource:
    return ConfigSource(entry.source)


def synonyms(entry: JosefkEntry) -> list[tuple[str, str | None, ConfigSource]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def segment_files(broker: BrokerProcess, topic: str) -> list[Path]:
    return sorted((broker.data_dir / f"{topic}-0").glob("*.log"))


def produce_one_per_batch(broker: BrokerProcess, topic: str, count: int, tag: str) -> None:
    messages = make_messages(count, tag=tag, value_size=200)
    assert_delivered(
        ck_produce(broker.bootstrap, topic, messages, linger_ms=0, batch_num_messages=1)
    )


def test_a_log_default_applies_to_an_existing_topic_and_survives_a_restart(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(settings=STATIC)
    topic = unique_topic("dyn-segment")
    ck_create_topic(broker.bootstrap, topic)
    produce_one_per_batch(broker, topic, 10, "before")
    assert len(segment_files(broker, topic)) == 1

    alter(broker.bootstrap, set_config("1", "log.segment.bytes", "1024"))
    produce_one_per_batch(broker, topic, 20, "after")
    # ~300-byte batches in 1 KiB segments: the next appends rolled, no restart needed.
    rolled = len(segment_files(broker, topic))
    assert rolled >= 5, rolled

    topic_entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert topic_entries["segment.bytes"].value == "1024"
    assert source(topic_entries["segment.bytes"]) == ConfigSource.DYNAMIC_BROKER_CONFIG
    segment = josefk_describe(broker.bootstrap, ResourceType.TOPIC, topic)["segment.bytes"]
    assert synonyms(segment)[:2] == [
        ("log.segment.bytes", "1024", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.segment.bytes", "1048576", ConfigSource.STATIC_BROKER_CONFIG),
    ]

    broker.restart()
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")
    assert entries["log.segment.bytes"].value == "1024"
    assert source(entries["log.segment.bytes"]) == ConfigSource.DYNAMIC_BROKER_CONFIG
    produce_one_per_batch(broker, topic, 10, "restarted")
    assert len(segment_files(broker, topic)) >= rolled + 3

    # DELETE: back to the static value, for new appends too.
    alter(broker.bootstrap, delete_config("1", "log.segment.bytes"))
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")
    assert entries["log.segment.bytes"].value == "1048576"
    assert source(entries["log.segment.bytes"]) == ConfigSource.STATIC_BROKER_CONFIG
    before = len(segment_files(broker, topic))
    produce_one_per_batch(broker, topic, 10, "static-again")
    assert len(segment_files(broker, topic)) <= before + 1


def test_a_cluster_default_applies_and_survives_a_restart(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings=STATIC)
    topic = unique_topic("dyn-default")
    ck_create_topic(broker.bootstrap, topic, config={"retention.ms": "600000"})
    set_default(broker.bootstrap, {"log.retention.ms": "7200000", "log.roll.ms": "3600000"})
    broker.restart()
    defaults = josefk_describe(broker.bootstrap, ResourceType.BROKER, "")
    assert {k: (e.value, e.source) for k, e in defaults.items()} == {
        "log.retention.ms": ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        "log.roll.ms": ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    }
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    # The topic's own override stays on top; the default fills the rest.
    assert (entries["retention.ms"].value, source(entries["retention.ms"])) == (
        "600000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert (entries["segment.ms"].value, source(entries["segment.ms"])) == (
        "3600000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    set_default(broker.bootstrap, {"log.roll.ms": None, "log.retention.ms": None})
    assert josefk_describe(broker.bootstrap, ResourceType.BROKER, "") == {}
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert entries["segment.ms"].value == "604800000"


def test_per_broker_overrides_beat_the_cluster_default(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings=STATIC)
    topic = unique_topic("dyn-precedence")
    ck_create_topic(broker.bootstrap, topic)
    set_default(broker.bootstrap, {"log.retention.bytes": "1000000"})
    alter(broker.bootstrap, set_config("1", "log.retention.bytes", "2000000"))

    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")
    entry = entries["log.retention.bytes"]
    assert entry.value == "2000000"
    assert source(entry) == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert not entry.is_read_only
    full = josefk_describe(broker.bootstrap, ResourceType.BROKER, "1")["log.retention.bytes"]
    assert synonyms(full) == [
        ("log.retention.bytes", "2000000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.bytes", "1000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.bytes", "-1", ConfigSource.DEFAULT_CONFIG),
    ]
    topic_entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert topic_entries["retention.bytes"].value == "2000000"

    alter(broker.bootstrap, delete_config("1", "log.retention.bytes"))
    entry = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")[
        "log.retention.bytes"
    ]
    assert entry.value == "1000000"
    assert source(entry) == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    topic_entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert topic_entries["retention.bytes"].value == "1000000"


def test_a_dynamic_unit_synonym_beats_a_static_finer_one(broker_factory: BrokerFactory) -> None:
    # Kafka removes the lower layers' synonyms of a dynamic key: log.retention.hours set
    # dynamically wins over a static log.retention.ms.
    broker = broker_factory(settings=["log.retention.ms=600000"])
    topic = unique_topic("dyn-synonym")
    ck_create_topic(broker.bootstrap, topic)
    alter(broker.bootstrap, set_config("1", "log.retention.hours", "2"))
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert entries["retention.ms"].value == str(2 * 3_600_000)
    broker_entries = josefk_describe(broker.bootstrap, ResourceType.BROKER, "1")
    hours = broker_entries["log.retention.hours"]
    assert (hours.value, hours.source) == ("2", ConfigSource.DYNAMIC_BROKER_CONFIG)
    # The static log.retention.ms is still described where it was set.
    assert synonyms(broker_entries["log.retention.ms"])[0] == (
        "log.retention.ms",
        "600000",
        ConfigSource.STATIC_BROKER_CONFIG,
    )


def test_describe_sources_synonyms_and_read_only(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings=STATIC)
    alter(broker.bootstrap, set_config("1", "log.retention.ms", "3600000"))
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")
    entry = entries["log.retention.ms"]
    assert (entry.value, source(entry)) == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    full = josefk_describe(broker.bootstrap, ResourceType.BROKER, "1")["log.retention.ms"]
    assert synonyms(full) == [
        ("log.retention.ms", "3600000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.hours", "48", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert not entry.is_read_only
    static = entries["num.partitions"]
    assert (static.value, source(static), static.is_read_only) == (
        "1",
        ConfigSource.DEFAULT_CONFIG,
        True,
    )
    segment = entries["log.segment.bytes"]
    assert (source(segment), segment.is_read_only) == (ConfigSource.STATIC_BROKER_CONFIG, False)
    # The log cleaner's settings are dynamic too (its registered part applies them).
    assert not entries["log.cleaner.threads"].is_read_only


def test_static_unknown_and_invalid_settings_are_refused(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings=STATIC)
    error = alter_error(broker.bootstrap, set_config("1", "auto.create.topics.enable", "false"))
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(auto.create.topics.enable)" in str(
        error.str()
    )

    error = alter_error(broker.bootstrap, set_config("1", "log.segmnt.bytes", "1024"))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "log.segmnt.bytes" in error.str()

    error = alter_error(broker.bootstrap, set_config("1", "log.segment.bytes", "huge"))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "log.segment.bytes" in error.str()

    error = alter_error(broker.bootstrap, set_config("1", "log.cleaner.threads", "5"))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "log.cleaner.threads" in error.str()

    error = alter_error(
        broker.bootstrap,
        ConfigResource(
            ConfigResource.Type.BROKER,
            "1",
            incremental_configs=[
                ConfigEntry(
                    "log.segment.bytes", "2", incremental_operation=AlterConfigOpType.APPEND
                )
            ],
        ),
    )
    assert error.code() == KafkaError.INVALID_REQUEST

    # Nothing of the refused changes was kept.
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")
    assert entries["log.segment.bytes"].value == "1048576"
    assert entries["log.cleaner.threads"].value == "1"
    assert entries["auto.create.topics.enable"].value == "true"
    assert not (broker.data_dir / "broker-configs.json").exists()


def test_validate_only_and_list_operations(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings=STATIC)
    alter(broker.bootstrap, set_config("1", "log.segment.bytes", "4096"), validate_only=True)
    entry = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")[
        "log.segment.bytes"
    ]
    assert (entry.value, source(entry)) == ("1048576", ConfigSource.STATIC_BROKER_CONFIG)

    append = ConfigResource(
        ConfigResource.Type.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry(
                "log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            )
        ],
    )
    alter(broker.bootstrap, append)
    entry = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")[
        "log.cleanup.policy"
    ]
    assert entry.value == "compact,delete"
    topic = unique_topic("dyn-policy")
    ck_create_topic(broker.bootstrap, topic)
    topic_entry = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)[
        "cleanup.policy"
    ]
    assert topic_entry.value == "compact,delete"


def test_no_cluster_default_until_one_is_set(broker: BrokerProcess) -> None:
    assert josefk_describe(broker.bootstrap, ResourceType.BROKER, "") == {}


def test_the_overrides_file_is_private(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    alter(broker.bootstrap, set_config("1", "log.cleaner.backoff.ms", "5000"))
    path = broker.data_dir / "broker-configs.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(path.read_text())
    assert stored["brokers"] == {"1": {"log.cleaner.backoff.ms": "5000"}}


def test_kafka_python_admin_alters_and_describes(broker_factory: BrokerFactory) -> None:
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    broker = broker_factory(settings=STATIC)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        # kafka-python first checks the keys are dynamic (read_only false) by describing.
        result = admin.alter_configs(
            [KpResource(ConfigResourceType.BROKER, "1", configs={"log.roll.ms": "60000"})]
        )
        assert result == {"broker": {"1": "OK"}}
        described = admin.describe_configs(
            [KpResource(ConfigResourceType.BROKER, "1")], config_filter="all"
        )
        assert described["broker"]["1"]["log.roll.ms"]["value"] == "60000"
        admin.alter_configs(
            [KpResource(ConfigResourceType.BROKER, "1", configs={"log.roll.hours": "2"})]
        )
        with pytest.raises(ValueError, match=r"num\.partitions"):
            admin.alter_configs(
                [KpResource(ConfigResourceType.BROKER, "1", configs={"num.partitions": "3"})]
            )
    finally:
        admin.close()
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")
    assert entries["log.roll.ms"].value == "60000"
    assert entries["log.roll.hours"].value == "2"


def test_legacy_alter_configs_replaces_the_whole_set(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings=STATIC)
    alter(broker.bootstrap, set_config("1", "log.roll.ms", "60000"))
    resource = ConfigResource(ConfigResource.Type.BROKER, "1", set_config={"log.roll.hours": "2"})
    admin = ck_admin(broker.bootstrap)
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([resource], request_timeout=T)
    futures[resource].result(timeout=T)
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")
    assert source(entries["log.roll.ms"]) == ConfigSource.DEFAULT_CONFIG
    assert entries["log.roll.ms"].value is None
    assert (entries["log.roll.hours"].value, source(entries["log.roll.hours"])) == (
        "2",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )


async def test_connection_limits_change_without_a_restart(broker_factory: BrokerFactory) -> None:
    from josefk.client.connection import BrokerConnection
    from josefk.client.errors import KafkaConnectionError
    from josefk.protocol.api import ApiKey, request_class

    broker = broker_factory()
    alter_request = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)

    async def connect() -> BrokerConnection:
        return await BrokerConnection.open(
            broker.host, broker.port, node_id=1, client_id="limits", timeout_s=5
        )

    def change(op: int, value: str | None) -> object:
        return alter_request(
            resources=[
                alter_request.AlterConfigsResource(
                    resource_type=int(ResourceType.BROKER),
                    resource_name="1",
                    configs=[
                        alter_request.AlterConfigsResource.AlterableConfig(
                            name="max.connections.per.ip", config_operation=op, value=value
                        )
                    ],
                )
            ],
            validate_only=False,
        )

    # One connection holds the only slot and carries the changes itself.
    held = await connect()
    response = await held.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, change(0, "1"))
    assert [r.error_code for r in response.responses] == [0]
    with pytest.raises(KafkaConnectionError):
        await connect()  # over the new limit: closed at once
    response = await held.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, change(1, None))
    assert [r.error_code for r in response.responses] == [0]
    second = await connect()
    versions = await second.request(ApiKey.API_VERSIONS, request_class(ApiKey.API_VERSIONS)())
    assert versions.error_code == 0
    second.close()
    held.close()
