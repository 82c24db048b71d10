"""ACLs on a real ``josefk serve`` with the authorizer, over SASL_PLAINTEXT with SCRAM users.

alice is given WRITE/READ on a topic prefix and READ on her group (through confluent-kafka's
AdminClient, as the super user admin over SASL); she produces and consumes in her group. bob
has no ACL: his produce is TOPIC_AUTHORIZATION_FAILED, his group GROUP_AUTHORIZATION_FAILED,
and Metadata hides the topics from him. The super user does everything without ACLs. The
``josefk acls`` CLI (over the PLAINTEXT listener, whose User:ANONYMOUS is a super user here)
adds, lists and deletes; ACLs survive a restart; without an authorizer the ACL APIs answer
SECURITY_DISABLED.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acl_requests import acl_api_errors, acl_creation
from broker_process import BrokerProcess, run_josefk, start_or_close, stop_broker
from client_helpers import (
    CLIENT_TIMEOUT_S,
    assert_delivered,
    ck_config,
    ck_consume,
    ck_produce,
    make_messages,
    unique_topic,
)
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from raw_client import RawClient
from sasl_broker import SaslBroker, start_plaintext_and_sasl

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(180)

PASSWORDS = {
    "alice": "alice-secret",
    "bob": "bob-secret",
    "carol": "carol-secret",
    "admin": "admin-secret",
}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
DeleteTopics = request_class(ApiKey.DELETE_TOPICS)
Metadata = request_class(ApiKey.METADATA)
OffsetFetch = request_class(ApiKey.OFFSET_FETCH)
ZERO_UUID = uuid.UUID(int=0)


def start_acl_broker(base: Path, *settings: str) -> SaslBroker:
    """A broker with a PLAINTEXT and a SASL_PLAINTEXT listener and the authorizer on;
    User:admin and the PLAINTEXT principal User:ANONYMOUS are super users."""
    return start_plaintext_and_sasl(
        base,
        users=PASSWORDS,
        settings=[
            f"authorizer.class.name={AUTHORIZER}",
            "super.users=User:admin;User:ANONYMOUS",
            *settings,
        ],
    )


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    started = start_acl_broker(tmp_path_factory.mktemp("josefk-acls"))
    yield started
    started.stop()


def sasl(user: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def admin_as(broker: SaslBroker, user: str) -> AdminClient:
    return AdminClient(ck_config(broker.sasl, **sasl(user)))


def create_acls(broker: SaslBroker, bindings: list[AclBinding]) -> None:
    admin = admin_as(broker, "admin")  # kept alive until the futures resolve
    futures = admin.create_acls(bindings, request_timeout=CLIENT_TIMEOUT_S)
    for future in futures.values():
        future.result(timeout=CLIENT_TIMEOUT_S)


def allow(user: str, rtype: ResourceType, name: str, op: AclOperation, **kw: Any) -> AclBinding:
    return AclBinding(
        rtype,
        name,
        kw.get("pattern", ResourcePatternType.LITERAL),
        f"User:{user}",
        "*",
        op,
        AclPermissionType.ALLOW,
    )


def create_topic_as(broker: SaslBroker, user: str, topic: str) -> None:
    admin = admin_as(broker, user)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1)],
        request_timeout=CLIENT_TIMEOUT_S,
    )
    futures[topic].result(timeout=CLIENT_TIMEOUT_S)


def produce_error(broker: SaslBroker, user: str, topic: str) -> KafkaError | None:
    reports = ck_produce(
        broker.sasl, topic, make_messages(1), **sasl(user), **{"message.timeout.ms": 10000}
    )
    return reports[0].error


def test_alice_allowed_bob_refused_per_topic_and_group(acl_broker: SaslBroker) -> None:
    prefix = unique_topic("alice")
    topic, group = f"{prefix}-orders", f"group-{prefix}"
    create_topic_as(acl_broker, "admin", topic)
    create_acls(
        acl_broker,
        [
            allow(
                "alice",
                ResourceType.TOPIC,
                prefix,
                AclOperation.WRITE,
                pattern=ResourcePatternType.PREFIXED,
            ),
            allow(
                "alice",
                ResourceType.TOPIC,
                prefix,
                AclOperation.READ,
                pattern=ResourcePatternType.PREFIXED,
            ),
            allow("alice", ResourceType.GROUP, group, AclOperation.READ),
        ],
    )
    messages = make_messages(10)
    assert_delivered(ck_produce(acl_broker.sasl, topic, messages, **sasl("alice")))
    consumer = Consumer(
        ck_config(
            acl_broker.sasl,
            **{"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False},
            **sasl("alice"),
        )
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes | None] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(values) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert values == [m.value for m in messages]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    # bob: no ACL on the topic or the group.
    error = produce_error(acl_broker, "bob", topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    metadata = admin_as(acl_broker, "bob").list_topics(timeout=CLIENT_TIMEOUT_S)
    assert topic not in metadata.topics
    metadata = admin_as(acl_broker, "alice").list_topics(timeout=CLIENT_TIMEOUT_S)
    assert topic in metadata.topics
    bob = Consumer(
        ck_config(
            acl_broker.sasl,
            **{"group.id": group, "auto.offset.reset": "earliest"},
            **sasl("bob"),
        )
    )
    try:
        bob.subscribe([topic])
        codes: set[int] = set()
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while not codes and time.monotonic() < deadline:
            msg = bob.poll(0.5)
            if msg is not None and msg.error() is not None:
                codes.add(msg.error().code())
            assert msg is None or msg.error() is not None, "bob read a record"
        assert codes & {
            KafkaError.GROUP_AUTHORIZATION_FAILED,
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
        }
    finally:
        bob.close()

    # alice may not create topics (no CREATE), nor write outside her prefix.
    with pytest.raises(KafkaException) as refused:
        create_topic_as(acl_broker, "alice", unique_topic("elsewhere"))
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_the_super_user_does_everything_without_acls(acl_broker: SaslBroker) -> None:
    topic = unique_topic("admin-only")
    create_topic_as(acl_broker, "admin", topic)
    assert_delivered(ck_produce(acl_broker.sasl, topic, make_messages(3), **sasl("admin")))
    got = ck_consume(acl_broker.sasl, topic, count=3, **sasl("admin"))
    assert len(got) == 3
    admin = admin_as(acl_broker, "admin")
    described = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        ),
        request_timeout=CLIENT_TIMEOUT_S,
    ).result(timeout=CLIENT_TIMEOUT_S)
    assert isinstance(described, list)


def raw_as(broker: SaslBroker, user: str) -> RawClient:
    """A raw connection to the SASL listener, authenticated as ``user`` with PLAIN."""
    client = RawClient(broker.sasl)
    assert client.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == 0
    token = b"\0" + user.encode() + b"\0" + PASSWORDS[user].encode()
    assert client.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=token).error_code == 0
    return client


def test_acl_apis_need_cluster_permissions(acl_broker: SaslBroker) -> None:
    """(librdkafka's describe_acls drops the top-level error: asked raw.)"""
    bob = raw_as(acl_broker, "bob")
    try:
        everything_to_bob = acl_creation(2, "*", 3, "User:bob", operation=2, permission=3)
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert acl_api_errors(bob, everything_to_bob) == (refused, [refused])
    finally:
        bob.close()
    bob_admin = admin_as(acl_broker, "bob")
    futures = bob_admin.create_acls(
        [allow("bob", ResourceType.TOPIC, "*", AclOperation.ALL)], request_timeout=CLIENT_TIMEOUT_S
    )
    for f in futures.values():
        with pytest.raises(KafkaException) as refused:
            f.result(timeout=CLIENT_TIMEOUT_S)
        assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_acls_cli_round_trip_and_restart(tmp_path: Path) -> None:
    broker = start_acl_broker(tmp_path)
    try:
        topic = unique_topic("cli")
        run_josefk(
            broker.plaintext,
            "acls",
            "add",
            "--allow-principal",
            "User:carol",
            "--operation",
            "Read",
            "--operation",
            "describe-configs",
            "--topic",
            topic,
        )
        run_josefk(
            broker.plaintext,
            "acls",
            "add",
            "--deny-principal",
            "User:mallory",
            "--topic",
            "secret",
            "--resource-pattern-type",
            "prefixed",
            "--host",
            "10.0.0.1",
        )
        run_josefk(
            broker.plaintext,
            "acls",
            "add",
            "--allow-principal",
            "User:ops",
            "--cluster",
            "--operation",
            "Alter",
        )
        listed = json.loads(run_josefk(broker.plaintext, "acls", "list", "--json"))
        assert {
            (
                r["resource_type"],
                r["resource_name"],
                r["principal"],
                r["operation"],
                r["permission"],
            )
            for r in listed
        } == {
            ("TOPIC", topic, "User:carol", "READ", "ALLOW"),
            ("TOPIC", topic, "User:carol", "DESCRIBE_CONFIGS", "ALLOW"),
            ("TOPIC", "secret", "User:mallory", "ALL", "DENY"),
            ("CLUSTER", "kafka-cluster", "User:ops", "ALTER", "ALLOW"),
        }
        matching = json.loads(
            run_josefk(
                broker.plaintext,
                "acls",
                "list",
                "--topic",
                "secret-plans",
                "--resource-pattern-type",
                "match",
                "--json",
            )
        )
        assert [(r["principal"], r["host"], r["pattern_type"]) for r in matching] == [
            ("User:mallory", "10.0.0.1", "PREFIXED")
        ]
        # A bad operation name is the CLI's clear error, not a broker round trip.
        run_josefk(
            broker.plaintext,
            "acls",
            "add",
            "--allow-principal",
            "User:x",
            "--topic",
            "t",
            "--operation",
            "fly",
            expect=1,
        )

        broker.process.restart()
        listed_again = json.loads(run_josefk(broker.plaintext, "acls", "list", "--json"))
        assert len(listed_again) == 4

        deleted = json.loads(
            run_josefk(broker.plaintext, "acls", "delete", "--topic", topic, "--json")
        )
        assert {r["operation"] for r in deleted} == {"READ", "DESCRIBE_CONFIGS"}
        # kafka-acls.sh's spellings: a host per kind of principal, and --force on delete.
        run_josefk(
            broker.plaintext,
            "acls", "add", "--topic", "hosts",
            "--allow-principal", "User:dave", "--allow-host", "10.0.0.2", "--allow-host", "10.0.0.3",
            "--deny-principal", "User:eve", "--deny-host", "10.0.0.4",
        )  # fmt: skip
        hosts = json.loads(
            run_josefk(broker.plaintext, "acls", "list", "--topic", "hosts", "--json")
        )
        assert sorted((r["principal"], r["host"], r["permission"]) for r in hosts) == [
            ("User:dave", "10.0.0.2", "ALLOW"),
            ("User:dave", "10.0.0.3", "ALLOW"),
            ("User:eve", "10.0.0.4", "DENY"),
        ]
        removed = run_josefk(
            broker.plaintext,
            "acls", "delete", "--force", "--topic", "hosts",
            "--allow-principal", "User:dave", "--allow-host", "10.0.0.3", "--json",
        )  # fmt: skip
        deleted = json.loads(removed)
        assert [(r["principal"], r["host"]) for r in deleted] == [("User:dave", "10.0.0.3")]
        run_josefk(broker.plaintext, "acls", "delete", expect=1)  # no filter: refused without --all
        run_josefk(broker.plaintext, "acls", "delete", "--all")
        assert json.loads(run_josefk(broker.plaintext, "acls", "list", "--json")) == []
    finally:
        broker.stop()


def test_without_an_authorizer_the_acl_apis_are_security_disabled(tmp_path: Path) -> None:
    broker = start_or_close(BrokerProcess(tmp_path / "data", tmp_path / "stderr.log"))
    try:
        client = RawClient(broker.bootstrap)
        try:
            read_t = acl_creation(2, "t", 3, "User:a", operation=3, permission=3)
            disabled = ErrorCode.SECURITY_DISABLED
            assert acl_api_errors(client, read_t) == (disabled, [disabled])
        finally:
            client.close()
    finally:
        stop_broker(broker)


def test_delete_topics_leaks_no_existence_to_a_principal_without_describe(
    acl_broker: SaslBroker,
) -> None:
    """carol has no ACL: a missing topic and an existing one both answer
    TOPIC_AUTHORIZATION_FAILED (Kafka); before, a missing one said UNKNOWN_TOPIC_OR_PARTITION."""
    existing, missing = unique_topic("acl-del"), unique_topic("acl-missing")
    create_topic_as(acl_broker, "admin", existing)
    carol = raw_as(acl_broker, "carol")
    try:
        answer = carol.call(
            ApiKey.DELETE_TOPICS,
            6,
            topics=[
                DeleteTopics.DeleteTopicState(name=existing, topic_id=ZERO_UUID),
                DeleteTopics.DeleteTopicState(name=missing, topic_id=ZERO_UUID),
            ],
            timeout_ms=30_000,
        )
        assert [(r.name, r.error_code) for r in answer.responses] == [
            (existing, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            (missing, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ]
    finally:
        carol.close()


def test_delete_topics_with_both_a_name_and_an_id_is_an_invalid_request(
    acl_broker: SaslBroker,
) -> None:
    topic = unique_topic("acl-both")
    create_topic_as(acl_broker, "admin", topic)
    admin = RawClient(acl_broker.plaintext)
    try:
        metadata = admin.call(
            ApiKey.METADATA,
            12,
            topics=[Metadata.MetadataRequestTopic(name=topic, topic_id=ZERO_UUID)],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        topic_id = metadata.topics[0].topic_id
        answer = admin.call(
            ApiKey.DELETE_TOPICS,
            6,
            topics=[DeleteTopics.DeleteTopicState(name=topic, topic_id=topic_id)],
            timeout_ms=30_000,
        )
        assert answer.responses[0].error_code == ErrorCode.INVALID_REQUEST
        still = admin.call(
            ApiKey.METADATA,
            12,
            topics=[Metadata.MetadataRequestTopic(name=topic, topic_id=ZERO_UUID)],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        assert still.topics[0].error_code == ErrorCode.NONE
    finally:
        admin.close()


def test_offset_fetch_v1_on_an_unauthorized_group_fails_each_partition(
    acl_broker: SaslBroker,
) -> None:
    """v0-v1 have no top-level error: GROUP_AUTHORIZATION_FAILED goes on every partition
    asked for (Kafka); before, the answer was empty and looked like 'nothing committed'."""
    carol = raw_as(acl_broker, "carol")
    try:
        answer = carol.call(
            ApiKey.OFFSET_FETCH,
            1,
            group_id="carol-may-not",
            topics=[OffsetFetch.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])],
        )
        assert [
            (t.name, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions
        ] == [
            ("t", 0, ErrorCode.GROUP_AUTHORIZATION_FAILED),
            ("t", 1, ErrorCode.GROUP_AUTHORIZATION_FAILED),
        ]
    finally:
        carol.close()


def test_a_groups_authorized_operations_include_the_configs_pair(acl_broker: SaslBroker) -> None:
    """Kafka 4 counts DESCRIBE_CONFIGS and ALTER_CONFIGS among a group's operations (group
    configs, KIP-848): librdkafka's 0081 asks for all five as a principal allowed everything
    (found by it), and for READ with its implied DESCRIBE as one given READ alone."""
    group = f"ops-{uuid.uuid4().hex[:8]}"
    create_acls(acl_broker, [allow("carol", ResourceType.GROUP, group, AclOperation.READ)])

    def operations(user: str) -> set[AclOperation]:
        client = raw_as(acl_broker, user)
        try:
            [described] = client.call(
                ApiKey.DESCRIBE_GROUPS, 5, groups=[group], include_authorized_operations=True
            ).groups
        finally:
            client.close()
        assert described.error_code == ErrorCode.NONE
        return {op for op in AclOperation if described.authorized_operations >> op.value & 1}

    assert operations("admin") == {
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
    assert operations("carol") == {AclOperation.READ, AclOperation.DESCRIBE}
