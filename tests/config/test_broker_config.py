"""BrokerConfig: Kafka's keys and defaults, validation messages, derived values, listeners."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.config import BrokerConfig, BrokerConfigError, Listener, LogConfig, parse_host_port
from josefk.config.broker import BROKER_CONFIG_KEYS, LONG_MAX

# Kafka 4.0's documented defaults (josefk's deliberate differences are tested separately).
KAFKA_DEFAULTS: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "message.max.bytes": "1048588",
    "socket.request.max.bytes": "104857600",
    "connections.max.idle.ms": "600000",
    "queued.max.requests": "500",
    "num.network.threads": "3",
    "num.io.threads": "8",
    "num.recovery.threads.per.data.dir": "2",
    "log.segment.bytes": "1073741824",
    "log.roll.hours": "168",
    "log.roll.jitter.hours": "0",
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "300000",
    "log.index.size.max.bytes": "10485760",
    "log.index.interval.bytes": "4096",
    "log.flush.interval.messages": str(LONG_MAX),
    "log.flush.scheduler.interval.ms": str(LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.flush.start.offset.checkpoint.interval.ms": "60000",
    "log.segment.delete.delay.ms": "60000",
    "log.cleanup.policy": "delete",
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.after.max.ms": "3600000",
    "log.preallocate": "false",
    "log.cleaner.enable": "true",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "compression.type": "producer",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.commit.timeout.ms": "5000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.max.size": "2147483647",
    "group.consumer.migration.policy": "bidirectional",
    "transactional.id.expiration.ms": "604800000",
    "transaction.max.timeout.ms": "900000",
    "producer.id.expiration.ms": "86400000",
    "fetch.max.bytes": "57671680",
    "max.incremental.fetch.session.cache.slots": "1000",
    "replica.fetch.max.bytes": "1048576",
    "replica.lag.time.max.ms": "30000",
}


def test_defaults_equal_kafkas() -> None:
    config = BrokerConfig()
    actual = config.to_properties()
    for key, expected in KAFKA_DEFAULTS.items():
        assert actual[key] == expected, key


def test_josefk_defaults() -> None:
    config = BrokerConfig()
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.log_dirs == ("./josefk-data",)
    assert config.node_id == 1
    assert config.broker_id == 1
    assert config.metrics_port == 9404
    # The OS's socket buffers (autotuned) rather than Kafka's fixed 102400: see BrokerConfig.
    assert config.socket_send_buffer_bytes == -1
    assert config.socket_receive_buffer_bytes == -1
    assert config.advertised_listeners is None
    assert config.warnings == ()


def test_nullable_keys_are_unset_by_default() -> None:
    props = BrokerConfig().to_properties()
    for key in (
        "log.retention.ms",
        "log.retention.minutes",
        "log.roll.ms",
        "log.roll.jitter.ms",
        "log.flush.interval.ms",
        "advertised.listeners",
    ):
        assert key not in props


def test_every_key_is_a_kafka_or_josefk_name() -> None:
    for key in BROKER_CONFIG_KEYS:
        assert key == key.lower() and "_" not in key, key


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 300_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "42"}, 42),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.hours": "-5"}, -1),
        ({"log.retention.ms": "", "log.retention.minutes": "2"}, 120_000),
    ],
)
def test_retention_precedence(props: dict[str, str], expected: int) -> None:
    assert BrokerConfig.from_properties(props).retention_ms == expected


def test_roll_and_jitter_and_flush_fallbacks() -> None:
    config = BrokerConfig.from_properties({"log.roll.hours": "2", "log.roll.jitter.hours": "1"})
    assert (config.roll_ms, config.roll_jitter_ms) == (7_200_000, 3_600_000)
    config = BrokerConfig.from_properties({"log.roll.hours": "2", "log.roll.ms": "10"})
    assert config.roll_ms == 10
    assert BrokerConfig().flush_interval_ms == LONG_MAX
    config = BrokerConfig.from_properties({"log.flush.scheduler.interval.ms": "500"})
    assert config.flush_interval_ms == 500
    config = BrokerConfig.from_properties({"log.flush.interval.ms": "7"})
    assert config.flush_interval_ms == 7
    assert BrokerConfig().offsets_retention_ms == 10080 * 60_000


def test_default_log_config_follows_log_settings() -> None:
    config = BrokerConfig.from_properties(
        {
            "log.segment.bytes": "1048576",
            "log.roll.hours": "2",
            "log.retention.minutes": "5",
            "message.max.bytes": "2000",
            "log.cleanup.policy": "compact,delete",
            "log.message.timestamp.type": "LogAppendTime",
            "log.index.interval.bytes": "100",
            "min.insync.replicas": "2",
            "log.flush.interval.messages": "10",
        }
    )
    log_config = config.default_log_config()
    assert isinstance(log_config, LogConfig)
    assert log_config.segment_bytes == 1_048_576
    assert log_config.segment_ms == 7_200_000
    assert log_config.retention_ms == 300_000
    assert log_config.max_message_bytes == 2000
    assert log_config.cleanup_policy == ("compact", "delete")
    assert log_config.message_timestamp_type == "LogAppendTime"
    assert log_config.index_interval_bytes == 100
    assert log_config.min_insync_replicas == 2
    assert log_config.flush_messages == 10


def test_default_log_config_of_defaults_is_kafkas_topic_default() -> None:
    assert BrokerConfig().default_log_config() == LogConfig()


def _problem_keys(exc: BrokerConfigError) -> list[str]:
    return [problem.key for problem in exc.problems]


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("num.partitions", "0", "greater than or equal to 1"),
        ("num.partitions", "many", "valid integer"),
        ("log.segment.bytes", "13", "greater than or equal to 14"),
        ("auto.create.topics.enable", "yes", "true or false"),
        ("log.cleanup.policy", "compact,forever", "forever"),
        ("compression.type", "brotli", "producer"),
        ("log.message.timestamp.type", "NowTime", "CreateTime"),
        ("listeners", "PLAINTEXT:9092", "NAME://host:port"),
        ("listeners", "PLAINTEXT://h:70000", "65535"),
        ("listener.security.protocol.map", "PLAINTEXT", "NAME:PROTOCOL"),
        ("socket.request.max.bytes", "99999999999", "less than or equal to"),
        ("compression.gzip.level", "12", "between 1 and 9"),
    ],
)
def test_invalid_value_names_key_and_reason(key: str, value: str, words: str) -> None:
    with pytest.raises(BrokerConfigError) as info:
        BrokerConfig.from_properties({key: value})
    assert _problem_keys(info.value) == [key]
    message = str(info.value)
    assert f"{key}={value}" in message
    assert words in message


def test_a_sasl_plaintext_listener_beside_a_plaintext_one() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "connections.max.reauth.ms": "60000",
        }
    )
    assert [config.security_protocol_of(x.name) for x in config.listeners] == [
        "PLAINTEXT",
        "SASL_PLAINTEXT",
    ]
    assert config.sasl_enabled_mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert config.connections_max_reauth_ms == 60000
    assert BrokerConfig().sasl_enabled_mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")


def test_every_invalid_key_is_reported_at_once() -> None:
    with pytest.raises(BrokerConfigError) as info:
        BrokerConfig.from_properties({"num.partitions": "-1", "log.preallocate": "maybe"})
    assert sorted(_problem_keys(info.value)) == ["log.preallocate", "num.partitions"]
    assert "2 settings" in str(info.value)


@pytest.mark.parametrize(
    ("props", "key", "words"),
    [
        ({"listeners": "SSL://:9093"}, "ssl.keystore.location", "needs a keystore"),
        ({"listeners": "SASL_SSL://:9093"}, "ssl.keystore.location", "needs a keystore"),
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type", "keytool -importkeystore"),
        ({"ssl.truststore.type": "PKCS12"}, "ssl.truststore.type", "reads PEM"),
        (
            {"listener.name.ssl.ssl.keystore.location": "/k.pem"},
            "listener.name.ssl.ssl.keystore.location",
            "names no listener",
        ),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms", "not supported"),
        ({"listeners": "CLIENT://:9093"}, "listeners", "no security protocol for listener CLIENT"),
        ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "listeners", "used twice"),
        (
            {
                "listeners": "PLAINTEXT://:9092,OTHER://:9092",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            },
            "listeners",
            "port 9092",
        ),
        (
            {"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
            "advertised.listeners",
            "non-routable",
        ),
        ({"advertised.listeners": "OTHER://h:1"}, "advertised.listeners", "not in listeners"),
        ({"node.id": "1", "broker.id": "2"}, "broker.id", "node.id"),
        (
            {"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"},
            "group.min.session.timeout.ms",
            "above",
        ),
        ({"josefk.metrics.port": "9092"}, "josefk.metrics.port", "listener"),
        (
            {"listener.security.protocol.map": "PLAINTEXT:TLS"},
            "listener.security.protocol.map",
            "TLS",
        ),
        ({"log.dirs": "/a,/a"}, "log.dirs", "twice"),
        ({"log.retention.bytes": "-5"}, "log.retention.bytes", "topic config retention.bytes"),
    ],
)
def test_inconsistent_settings_name_the_key(props: dict[str, str], key: str, words: str) -> None:
    with pytest.raises(BrokerConfigError) as info:
        BrokerConfig.from_properties(props)
    assert key in _problem_keys(info.value)
    assert words in str(info.value)


def test_unknown_key_is_refused_by_the_model() -> None:
    with pytest.raises(BrokerConfigError, match=r"no\.such\.key"):
        BrokerConfig.from_properties({"no.such.key": "1"})


def test_synonyms_broker_id_and_log_dir() -> None:
    config = BrokerConfig.from_properties({"broker.id": "7", "log.dir": "/data/k"})
    assert (config.node_id, config.broker_id) == (7, 7)
    assert config.log_dirs == ("/data/k",)
    config = BrokerConfig.from_properties({"log.dir": "/x", "log.dirs": "/a, /b"})
    assert config.log_dirs == ("/a", "/b")
    config = BrokerConfig.from_properties({"node.id": "3", "broker.id": "3"})
    assert config.node_id == 3


def test_values_are_trimmed_and_booleans_any_case() -> None:
    config = BrokerConfig.from_properties(
        {"num.partitions": " 4 ", "delete.topic.enable": "FALSE", "compression.type": " lz4"}
    )
    assert (config.num_partitions, config.delete_topic_enable, config.compression_type) == (
        4,
        False,
        "lz4",
    )


def test_the_model_is_frozen() -> None:
    config = BrokerConfig()
    with pytest.raises(ValueError):
        config.num_partitions = 3  # type: ignore[misc]


def test_provenance_and_describe_forms() -> None:
    config = BrokerConfig.from_properties(
        {"num.partitions": "3"}, origins={"num.partitions": "--set"}
    )
    assert config.origin("num.partitions") == "--set"
    assert not config.is_default("num.partitions")
    assert config.is_default("log.segment.bytes")
    assert config.value_of("log.retention.ms") is None
    assert config.value_of("listeners") == "PLAINTEXT://127.0.0.1:9092"
    assert config.to_properties(include_defaults=False) == {"num.partitions": "3"}


def test_to_properties_round_trips() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://[::1]:9092,CONTROLLER://:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": "/a,/b",
            "log.cleanup.policy": "delete,compact",
            "log.retention.minutes": "9",
        }
    )
    again = BrokerConfig.from_properties(config.to_properties())
    assert again == config


# ------------------------------------------------------------------------------ listeners


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PLAINTEXT://127.0.0.1:9092", Listener("PLAINTEXT", "127.0.0.1", 9092)),
        ("plaintext://host.example:1", Listener("PLAINTEXT", "host.example", 1)),
        ("PLAINTEXT://:9092", Listener("PLAINTEXT", "", 9092)),
        ("CONTROLLER://[::1]:9093", Listener("CONTROLLER", "::1", 9093)),
        (" PLAINTEXT://0.0.0.0:0 ", Listener("PLAINTEXT", "0.0.0.0", 0)),
    ],
)
def test_listener_parse(text: str, expected: Listener) -> None:
    assert Listener.parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "PLAINTEXT://host",
        "host:9092",
        "://h:1",
        "PLAINTEXT://h:-1",
        "PLAINTEXT://h:x",
        "A://[::1:9",
    ],
)
def test_listener_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        Listener.parse(text)


@given(
    name=st.from_regex(r"[A-Z][A-Z_]{0,10}", fullmatch=True),
    host=st.one_of(
        st.just(""),
        st.from_regex(r"[a-z0-9][a-z0-9.-]{0,20}", fullmatch=True),
        st.ip_addresses().map(str),
    ),
    port=st.integers(0, 65535),
)
def test_listener_text_round_trips(name: str, host: str, port: int) -> None:
    listener = Listener(name, host, port)
    assert Listener.parse(str(listener)) == listener


def test_listener_helpers() -> None:
    listener = Listener.parse("PLAINTEXT://:0")
    assert listener.binds_all_interfaces and listener.bind_host is None
    assert listener.with_port(4000).port == 4000
    assert parse_host_port("[::1]:9092") == ("::1", 9092)
    assert parse_host_port("localhost:1") == ("localhost", 1)


def test_advertised_listeners_derivation() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://0.0.0.0:0,CONTROLLER://:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
        }
    )
    assert config.client_listeners() == (Listener("PLAINTEXT", "0.0.0.0", 0),)
    advertised = config.effective_advertised_listeners(
        bound={"PLAINTEXT": 45678}, hostname=lambda: "broker1.example"
    )
    assert advertised == (Listener("PLAINTEXT", "broker1.example", 45678),)
    explicit = BrokerConfig.from_properties({"advertised.listeners": "PLAINTEXT://public:19092"})
    assert explicit.effective_advertised_listeners() == (Listener("PLAINTEXT", "public", 19092),)
    assert explicit.security_protocol("plaintext") == "PLAINTEXT"


def test_describe_entries() -> None:
    config = BrokerConfig.from_properties(
        {"num.partitions": "3"}, origins={"num.partitions": "file server.properties"}
    )
    entries = {entry.name: entry for entry in config.describe_entries()}
    assert set(entries) == set(BROKER_CONFIG_KEYS)
    assert entries["num.partitions"].value == "3"
    assert entries["num.partitions"].source == "STATIC_BROKER_CONFIG"
    assert entries["num.partitions"].origin == "file server.properties"
    assert entries["log.segment.bytes"].source == "DEFAULT_CONFIG"
    assert entries["log.retention.ms"].value is None
    assert all(entry.read_only for entry in entries.values())
    # Kafka's PASSWORD-typed keys, as declared (the inline PEM chain and trusted
    # certificates are PASSWORD-typed in Kafka too).
    assert {name for name, entry in entries.items() if entry.sensitive} == {
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.key.password",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "sasl.jaas.config",
    }


def test_consumer_group_settings_are_checked_as_kafka_checks_them() -> None:
    from josefk.broker.group.shard import GroupConfig

    config = BrokerConfig.model_validate(
        {
            "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform",
            "group.consumer.session.timeout.ms": "50000",
        }
    )
    group = GroupConfig.from_broker_config(config)
    assert group.consumer_assignors == ("range", "uniform")
    assert group.consumer_session_timeout_ms == 50000
    with pytest.raises(BrokerConfigError) as refused:
        BrokerConfig.model_validate(
            {
                "group.consumer.session.timeout.ms": "1000",
                "group.consumer.heartbeat.interval.ms": "5000",
                "group.consumer.assignors": "sticky",
            }
        )
    problems = {p.key for p in refused.value.problems}
    assert {
        "group.consumer.session.timeout.ms",
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.assignors",
    } <= problems
