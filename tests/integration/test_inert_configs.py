"""Kafka's keys for features josefk does not run, set by real clients against ``josefk serve``.

librdkafka's test 0081 sets ``sasl.kerberos.min.time.before.relogin`` on a broker that has no
Kerberos (AlterConfigs), and 0092 sets ``message.format.version`` on a topic, as Kafka 3.x
accepted it as a deprecated no-op. Kafka accepts both; josefk refused both (INVALID_CONFIG
"Unknown config name" / "unknown topic config"). Now such keys are stored, described with
their source, change nothing, and the broker logs that they change nothing; a key whose
effect a user would rely on (tiered storage switched on) is still refused, naming why.
DescribeConfigs answers each key's documentation when asked (it was always empty).
"""

from __future__ import annotations

import asyncio

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import (
    CLIENT_TIMEOUT_S,
    ck_admin,
    ck_create_topic,
    ck_describe_configs,
    unique_topic,
)
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from josefk.client import AIOAdmin, ConfigSource, ResourceType
from josefk.config.broker import BROKER_KEYS
from josefk.config.topic import TOPIC_KEYS

pytestmark = [
    pytest.mark.timeout(120),
    # librdkafka 0081 uses the non-incremental AlterConfigs, which the client deprecates.
    pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning"),
]

T = CLIENT_TIMEOUT_S
RELOGIN = "sasl.kerberos.min.time.before.relogin"
FORMAT = "message.format.version"


def alter_whole(bootstrap: str, resource: ConfigResource) -> None:
    """AlterConfigs (the non-incremental API librdkafka's 0081 uses)."""
    admin = ck_admin(bootstrap)
    futures = admin.alter_configs([resource], request_timeout=T)
    futures[resource].result(timeout=T)


def alter_incremental(bootstrap: str, resource: ConfigResource) -> None:
    admin = ck_admin(bootstrap)
    futures = admin.incremental_alter_configs([resource], request_timeout=T)
    futures[resource].result(timeout=T)


def set_one(rtype: ConfigResource.Type, name: str, key: str, value: str) -> ConfigResource:
    return ConfigResource(
        rtype,
        name,
        incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)],
    )


def logged(broker: BrokerProcess, text: str) -> bool:
    return text in broker.stderr_tail(400)


def test_a_kerberos_setting_on_a_broker_without_kerberos_is_kept_without_effect(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory()
    alter_whole(
        broker.bootstrap, ConfigResource(ConfigResource.Type.BROKER, "1", {RELOGIN: "58000"})
    )
    entry = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")[RELOGIN]
    assert entry.value == "58000"
    assert ConfigSource(entry.source) == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert logged(broker, f"{RELOGIN} accepted; it has no effect in josefk")

    alter_incremental(broker.bootstrap, set_one(ConfigResource.Type.BROKER, "1", RELOGIN, "61000"))
    entry = ck_describe_configs(broker.bootstrap, ConfigResource.Type.BROKER, "1")[RELOGIN]
    assert entry.value == "61000"
    # Kafka's rule for a per-broker key: not at the cluster-wide default.
    assert BROKER_KEYS[RELOGIN].dynamic.value == "per-broker"


def test_a_removed_message_format_setting_on_a_topic_is_kept_without_effect(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory()
    topic = unique_topic("msgver")
    ck_create_topic(broker.bootstrap, topic, config={FORMAT: "2.8"})
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert entries[FORMAT].value == "2.8"
    assert logged(broker, f"topic {topic}: {FORMAT}=2.8 accepted; it has no effect")

    alter_whole(
        broker.bootstrap,
        ConfigResource(
            ConfigResource.Type.TOPIC, topic, {FORMAT: "0.10.0.0", "retention.ms": "1000"}
        ),
    )
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert entries[FORMAT].value == "0.10.0.0"
    assert ConfigSource(entries[FORMAT].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert entries["retention.ms"].value == "1000"
    assert logged(broker, f"topic {topic}: {FORMAT}=0.10.0.0 accepted; it has no effect")

    alter_incremental(broker.bootstrap, set_one(ConfigResource.Type.TOPIC, topic, FORMAT, "3.0"))
    entries = ck_describe_configs(broker.bootstrap, ConfigResource.Type.TOPIC, topic)
    assert entries[FORMAT].value == "3.0"
    assert entries["retention.ms"].value == "1000"


def test_a_setting_whose_effect_josefk_cannot_give_is_refused_with_the_reason(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory()
    topic = unique_topic("tiered")
    ck_create_topic(broker.bootstrap, topic)
    with pytest.raises(KafkaException) as info:
        alter_incremental(
            broker.bootstrap,
            set_one(ConfigResource.Type.TOPIC, topic, "remote.storage.enable", "true"),
        )
    error: KafkaError = info.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "tiered storage is not offered" in error.str()


def test_describe_configs_answers_the_documentation_when_asked(broker: BrokerProcess) -> None:
    topic = unique_topic("documented")
    ck_create_topic(broker.bootstrap, topic)

    async def describe(documentation: bool) -> tuple[dict[str, object], dict[str, object]]:
        async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
            found = await admin.describe_configs(
                [(ResourceType.BROKER, "1"), (ResourceType.TOPIC, topic)],
                include_documentation=documentation,
            )
        return (
            {k: e.documentation for k, e in found[(ResourceType.BROKER, "1")].items()},
            {k: e.documentation for k, e in found[(ResourceType.TOPIC, topic)].items()},
        )

    broker_docs, topic_docs = asyncio.run(describe(True))
    assert broker_docs["log.segment.bytes"] == BROKER_KEYS["log.segment.bytes"].doc
    assert topic_docs["retention.ms"] == TOPIC_KEYS["retention.ms"].doc
    assert all(broker_docs[name] for name in broker_docs if name in BROKER_KEYS)
    inert = broker_docs["num.io.threads"]
    assert isinstance(inert, str) and "Accepted without effect in josefk" in inert
    broker_docs, topic_docs = asyncio.run(describe(False))
    assert set(broker_docs.values()) == {None}
    assert set(topic_docs.values()) == {None}
