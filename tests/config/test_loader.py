"""load_broker_config: precedence of sources, environment names, flags, warnings, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from josefk.config import BrokerConfigError, Listener, env_key, env_name, load_broker_config
from josefk.config.broker import BROKER_CONFIG_KEYS
from josefk.config.loader import env_properties, parse_overrides


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_sources_gives_the_embedded_defaults() -> None:
    config = load_broker_config(env={})
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.log_dirs == ("./josefk-data",)
    assert config.warnings == ()


def test_precedence_file_env_set_flags(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "num.partitions=2\nlog.segment.bytes=1000\nmessage.max.bytes=5000\n"
        "log.dirs=/from/file\njosefk.metrics.port=1111\n",
    )
    env = {"JOSEFK_LOG_SEGMENT_BYTES": "2000", "JOSEFK_MESSAGE_MAX_BYTES": "6000"}
    config = load_broker_config(
        path,
        env=env,
        overrides=["message.max.bytes=7000", "log.dirs=/from/set"],
        data_dir="/from/flag",
        metrics_port=2222,
    )
    assert config.num_partitions == 2
    assert config.log_segment_bytes == 2000
    assert config.message_max_bytes == 7000
    assert config.log_dirs == ("/from/flag",)
    assert config.metrics_port == 2222
    assert config.origin("num.partitions") == f"file {path}, line 1"
    assert config.origin("log.segment.bytes") == "environment variable JOSEFK_LOG_SEGMENT_BYTES"
    assert config.origin("message.max.bytes") == "--set"
    assert config.origin("log.dirs") == "--data-dir"
    assert config.origin("josefk.metrics.port") == "--metrics-port"
    assert config.is_default("log.retention.hours")


def test_later_set_items_win() -> None:
    config = load_broker_config(env={}, overrides=["num.partitions=2", "num.partitions=5"])
    assert config.num_partitions == 5


def test_overrides_as_mapping() -> None:
    assert load_broker_config(env={}, overrides={"num.partitions": "4"}).num_partitions == 4


def test_higher_source_replaces_a_synonym_group(tmp_path: Path) -> None:
    path = write(tmp_path, "log.retention.ms=1000\nbroker.id=4\nlog.dirs=/a\n")
    config = load_broker_config(
        path, env={"JOSEFK_LOG_RETENTION_HOURS": "2"}, overrides=["node.id=9", "log.dir=/b"]
    )
    assert config.retention_ms == 7_200_000
    assert config.node_id == 9
    assert config.log_dirs == ("/b",)


def test_within_one_source_kafkas_precedence_holds(tmp_path: Path) -> None:
    path = write(tmp_path, "log.retention.hours=2\nlog.retention.ms=1000\n")
    assert load_broker_config(path, env={}).retention_ms == 1000


def test_listen_flag_replaces_first_client_listener(tmp_path: Path) -> None:
    assert load_broker_config(env={}, listen="0.0.0.0:19092").listeners == (
        Listener("PLAINTEXT", "0.0.0.0", 19092),
    )
    path = write(
        tmp_path,
        "listeners=CONTROLLER://:9093,CLIENT://:9092\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT\n"
        "controller.listener.names=CONTROLLER\n",
    )
    config = load_broker_config(path, env={}, listen="[::1]:0")
    assert config.listeners == (Listener("CONTROLLER", "", 9093), Listener("CLIENT", "::1", 0))
    assert config.origin("listeners") == "--listen"


def test_bad_flags_name_the_flag(tmp_path: Path) -> None:
    with pytest.raises(BrokerConfigError, match="--listen"):
        load_broker_config(env={}, listen="nohostport")
    with pytest.raises(BrokerConfigError, match="--metrics-port"):
        load_broker_config(env={}, metrics_port=70000)
    with pytest.raises(BrokerConfigError, match="--set=oops: expected KEY=VALUE"):
        load_broker_config(env={}, overrides=["oops"])
    with pytest.raises(BrokerConfigError, match="cannot read"):
        load_broker_config(tmp_path / "missing.properties", env={})


def test_invalid_value_from_a_file_names_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "num.partitions = zero\n")
    with pytest.raises(BrokerConfigError) as info:
        load_broker_config(path, env={})
    assert [p.key for p in info.value.problems] == ["num.partitions"]
    assert "num.partitions=zero" in str(info.value)


def test_unknown_keys_warn_and_do_not_fail(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "log.retention.hour=1\nsome.plugin.setting=x\n"
        "process.roles=broker,controller\n"
        "controller.quorum.voters=1@localhost:9093\n",
    )
    config = load_broker_config(path, env={"JOSEFK_NOT_A_KEY": "1"}, overrides=["made.up=2"])
    text = "\n".join(config.warnings)
    assert "'log.retention.hour'" in text and "did you mean log.retention.hours?" in text
    assert "'some.plugin.setting'" in text
    assert "'made.up' from --set" in text
    assert "JOSEFK_NOT_A_KEY" in text and "'not.a.key'" in text
    # Keys of a Kafka KRaft server.properties whose job josefk does another way: no warning.
    assert "process.roles" not in text
    assert "controller.quorum" not in text
    assert len(config.warnings) == 4


def test_a_kafka_quickstart_server_properties_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
# KRaft combined mode, as Kafka's quickstart ships it
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
""",
    )
    config = load_broker_config(path, env={})
    assert config.warnings == ()
    assert config.client_listeners() == (Listener("PLAINTEXT", "", 9092),)
    assert config.offsets_topic_replication_factor == 1
    assert config.log_dirs == ("/tmp/kraft-combined-logs",)


# ------------------------------------------------------------------------------ environment


def test_env_names() -> None:
    assert env_name("log.segment.bytes") == "JOSEFK_LOG_SEGMENT_BYTES"
    assert env_key("JOSEFK_LOG_SEGMENT_BYTES") == "log.segment.bytes"
    assert env_key("JOSEFK_LOG_ROLL_JITTER_MS") == "log.roll.jitter.ms"
    assert env_key("JOSEFK_METRICS_PORT") == "josefk.metrics.port"
    assert env_key("JOSEFK_JOSEFK_METRICS_PORT") == "josefk.metrics.port"
    assert env_key("JOSEFK_NOPE") is None
    assert env_key("KAFKA_LOG_DIRS") is None


def test_every_known_key_has_its_own_env_name() -> None:
    for key in BROKER_CONFIG_KEYS:
        assert env_key(env_name(key)) == key


def test_env_ignores_other_variables_and_long_form_wins() -> None:
    source = env_properties(
        {
            "PATH": "/bin",
            "KAFKA_NUM_PARTITIONS": "3",
            "JOSEFK_METRICS_PORT": "1",
            "JOSEFK_JOSEFK_METRICS_PORT": "2",
            "JOSEFK_AUTO_CREATE_TOPICS_ENABLE": "false",
        }
    )
    assert source.properties == {
        "josefk.metrics.port": "2",
        "auto.create.topics.enable": "false",
    }
    assert source.warnings == []


def test_env_values_are_validated_with_the_key_named() -> None:
    with pytest.raises(BrokerConfigError) as info:
        load_broker_config(env={"JOSEFK_NUM_PARTITIONS": "lots"})
    assert [p.key for p in info.value.problems] == ["num.partitions"]


def test_per_listener_tls_keys_from_every_source(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0\n"
        "ssl.keystore.location=/etc/josefk/all.pem\n"
        "listener.name.ssl.ssl.keystore.location=/etc/josefk/ssl.pem\n"
    )
    config = load_broker_config(
        path,
        env={"JOSEFK_LISTENER_NAME_SASL__SSL_SSL_CLIENT_AUTH": "requested"},
        overrides=["listener.name.ssl.ssl.client.auth=required"],
    )
    assert config.ssl_settings("SSL")["ssl.keystore.location"] == "/etc/josefk/ssl.pem"
    assert config.ssl_settings("SSL")["ssl.client.auth"] == "required"
    assert config.ssl_settings("SASL_SSL")["ssl.keystore.location"] == "/etc/josefk/all.pem"
    assert config.ssl_settings("SASL_SSL")["ssl.client.auth"] == "requested"
    assert config.origin("listener.name.ssl.ssl.client.auth") == "--set"
    assert (
        config.to_properties(include_defaults=False)["listener.name.sasl_ssl.ssl.client.auth"]
        == "requested"
    )


def test_default_env_is_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOSEFK_NUM_PARTITIONS", "6")
    assert load_broker_config().num_partitions == 6


def test_parse_overrides_keeps_equals_in_values() -> None:
    source = parse_overrides(["listeners=PLAINTEXT://h:1", "a.b=x=y"])
    assert source.properties == {"listeners": "PLAINTEXT://h:1", "a.b": "x=y"}


def test_the_authorizer_settings() -> None:
    config = load_broker_config(
        env={},
        overrides=[
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin; User:ops",
            "allow.everyone.if.no.acl.found=true",
        ],
    )
    assert config.super_user_principals == ("User:admin", "User:ops")
    assert config.allow_everyone_if_no_acl_found
    assert (
        load_broker_config(env={}, overrides=["authorizer.class.name="]).authorizer_class_name == ""
    )
    with pytest.raises(BrokerConfigError, match="unknown authorizer"):
        load_broker_config(env={}, overrides=["authorizer.class.name=com.example.Other"])
    with pytest.raises(BrokerConfigError, match="not a Type:name principal"):
        load_broker_config(env={}, overrides=["super.users=admin"])


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("ssl.engine.factory.class", "JVM TLS engines"),
        ("ssl.some.future.key", "TLS setting is not offered"),
        ("listener.name.ssl.sasl.jaas.config", "per-listener settings other than"),
        ("sasl.server.callback.handler.class", "plug-in classes cannot be loaded"),
        ("quota.window.num", "quotas"),
        ("remote.log.storage.system.enable", "tiered storage"),
        ("metric.reporters", "Prometheus"),
    ],
)
def test_a_capability_josefk_lacks_is_refused_by_name(key: str, why: str) -> None:
    """Before, these keys were accepted and dropped: a user who set ssl.* ran plaintext."""
    with pytest.raises(BrokerConfigError, match=rf"{key}=x \(--set\): .*{why}"):
        load_broker_config(env={}, overrides=[f"{key}=x"])


def test_keys_of_features_that_are_off_are_kept_without_effect() -> None:
    """Kafka's keys for features josefk does not run (Kerberos, a KRaft quorum, tiered
    storage switched off) load, are described with their source and change nothing; before,
    the Kerberos one stopped start-up and the others were dropped unseen."""
    config = load_broker_config(
        env={},
        overrides=[
            "sasl.kerberos.min.time.before.relogin=58000",
            "controller.quorum.voters=1@localhost:9093",
            "remote.log.storage.system.enable=false",
        ],
    )
    entries = {entry.name: entry for entry in config.describe_entries()}
    relogin = entries["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source) == ("58000", "STATIC_BROKER_CONFIG")
    assert relogin.origin == "--set"
    assert entries["controller.quorum.voters"].value == "1@localhost:9093"
    notes = config.inert_notes()
    assert any(n.startswith("sasl.kerberos.min.time.before.relogin=58000") for n in notes)
    assert any("GSSAPI" in n for n in notes)
    with pytest.raises(BrokerConfigError, match="tiered storage is not offered"):
        load_broker_config(env={}, overrides=["remote.log.storage.system.enable=true"])
    from_env = load_broker_config(
        env={
            "JOSEFK_SASL_KERBEROS_SERVICE_NAME": "kafka",
            "JOSEFK_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        }
    )
    assert from_env.value_of("sasl.kerberos.service.name") == "kafka"
    assert from_env.value_of("controller.quorum.voters") == "1@localhost:9093"
    assert from_env.warnings == ()


def test_plaintext_between_brokers_is_accepted() -> None:
    assert load_broker_config(env={}, overrides=["security.inter.broker.protocol=PLAINTEXT"])


def test_inter_broker_security_settings() -> None:
    """Kafka's rules: the inter-broker listener is named after security.inter.broker.protocol
    (or given by inter.broker.listener.name, not both), its SASL mechanism must be enabled,
    and the broker's own credentials come from the listener- and mechanism-prefixed JAAS
    line, else sasl.jaas.config."""
    listeners = "listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093"
    jaas = 'x.ScramLoginModule required username="admin" password="admin-secret";'
    config = load_broker_config(
        env={},
        overrides=[
            listeners,
            "security.inter.broker.protocol=SASL_PLAINTEXT",
            f"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config={jaas}",
            "sasl.jaas.config=other",
        ],
    )
    assert config.inter_broker_listener() == "SASL_PLAINTEXT"
    assert config.inter_broker_security_protocol() == "SASL_PLAINTEXT"
    assert config.sasl_mechanism_inter_broker_protocol == "SCRAM-SHA-512"
    assert config.sasl_jaas_config_for("SASL_PLAINTEXT", "SCRAM-SHA-512") == jaas
    assert config.sasl_jaas_config_for("SASL_PLAINTEXT", "PLAIN") == "other"
    assert {e.name: e for e in config.describe_entries()}["sasl.jaas.config"].sensitive

    with pytest.raises(BrokerConfigError, match="no listener is named SSL"):
        load_broker_config(env={}, overrides=["security.inter.broker.protocol=SSL"])
    with pytest.raises(BrokerConfigError, match="not both"):
        load_broker_config(
            env={},
            overrides=[
                listeners,
                "security.inter.broker.protocol=SASL_PLAINTEXT",
                "inter.broker.listener.name=PLAINTEXT",
            ],
        )
    single_node = [
        listeners,
        "inter.broker.listener.name=SASL_PLAINTEXT",
        "sasl.enabled.mechanisms=PLAIN",
    ]
    # A single node never connects to another broker; a cluster's brokers would fail.
    assert load_broker_config(env={}, overrides=single_node)
    with pytest.raises(BrokerConfigError, match=r"sasl\.enabled\.mechanisms"):
        load_broker_config(env={}, overrides=[*single_node, "josefk.etcd.endpoints=127.0.0.1:2379"])
    # Other listener-prefixed keys are still refused by name.
    with pytest.raises(BrokerConfigError, match="per-listener"):
        load_broker_config(env={}, overrides=["listener.name.x.sasl.login.class=y"])
