"""Share groups (KIP-932) under the authorizer, as Kafka's table says: READ on the group and
READ on the topic to fetch and acknowledge, READ on the group (and DESCRIBE on the topics it
subscribes to) to heartbeat, DESCRIBE on the group for its offsets, READ (alter) or DELETE
(delete) on the group and READ on the topic to change them, CLUSTER_ACTION for the share
coordinator's inter-broker APIs and FindCoordinator's share keys.

The PLAINTEXT listener's principal (User:ANONYMOUS) is no super user here: it gets exactly
the ACLs a test gives it, from the super user admin over SASL. A real confluent-kafka
ShareConsumer reads with them; the refusals are checked request by request.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from client_helpers import CLIENT_TIMEOUT_S, ck_config, unique_topic
from confluent_kafka import Producer, ShareConsumer, TopicCollection
from confluent_kafka.admin import AclOperation, ResourceType
from raw_client import RawClient
from sasl_broker import SaslBroker, start_plaintext_and_sasl
from test_acls import AUTHORIZER, PASSWORDS, admin_as, allow, create_acls, create_topic_as, sasl

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(180)

ANONYMOUS = "ANONYMOUS"
GROUP_OK = "share-acl-ok"
GROUP_NO = "share-acl-no"
ShareFetch = request_class(ApiKey.SHARE_FETCH)
Alter = request_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
Describe = request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
Delete = request_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    started = start_plaintext_and_sasl(
        tmp_path_factory.mktemp("josefk-share-acls"),
        users=PASSWORDS,
        settings=[
            f"authorizer.class.name={AUTHORIZER}",
            "super.users=User:admin",
            "group.share.heartbeat.interval.ms=300",
        ],
    )
    yield started
    started.stop()


def topic_id(broker: SaslBroker, topic: str) -> Any:
    admin = admin_as(broker, "admin")
    futures = admin.describe_topics(TopicCollection([topic]), request_timeout=CLIENT_TIMEOUT_S)
    return futures[topic].result(timeout=CLIENT_TIMEOUT_S).topic_id


def raw_uuid(broker: SaslBroker, topic: str) -> Any:
    text = str(topic_id(broker, topic))
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def setup(broker: SaslBroker) -> tuple[str, str]:
    """A readable topic with 5 records and an unreadable one; ANONYMOUS may READ and DESCRIBE
    GROUP_OK and READ/DESCRIBE the first topic; GROUP_OK reads from the earliest offset."""
    readable, hidden = unique_topic("acl-share"), unique_topic("acl-hidden")
    for topic in (readable, hidden):
        create_topic_as(broker, "admin", topic)
    producer = Producer(ck_config(broker.sasl, **sasl("admin")))
    for i in range(5):
        producer.produce(readable, value=f"v{i}".encode(), partition=0)
    assert producer.flush(20) == 0
    create_acls(
        broker,
        [
            allow(ANONYMOUS, ResourceType.GROUP, GROUP_OK, AclOperation.READ),
            allow(ANONYMOUS, ResourceType.GROUP, GROUP_OK, AclOperation.DESCRIBE),
            allow(ANONYMOUS, ResourceType.TOPIC, readable, AclOperation.READ),
            allow(ANONYMOUS, ResourceType.TOPIC, readable, AclOperation.DESCRIBE),
        ],
    )
    return readable, hidden


def test_share_groups_need_kafkas_acls(broker: SaslBroker) -> None:
    readable, hidden = setup(broker)
    client = RawClient(broker.plaintext)
    try:
        # READ on the group: heartbeat, fetch and acknowledge of GROUP_NO are refused whole.
        beat = client.call(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            1,
            group_id=GROUP_NO,
            member_id="m-no",
            member_epoch=0,
            rack_id=None,
            subscribed_topic_names=[readable],
        )
        assert beat.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        for api in (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE):
            fields: dict[str, Any] = {
                "group_id": GROUP_NO,
                "member_id": "m-no",
                "share_session_epoch": 0 if api == ApiKey.SHARE_FETCH else 1,
                "topics": [],
            }
            if api == ApiKey.SHARE_FETCH:
                fields.update(
                    max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10
                )
                fields["forgotten_topics_data"] = []
            assert client.call(api, 1, **fields).error_code == (
                ErrorCode.GROUP_AUTHORIZATION_FAILED
            )
        # DESCRIBE on every subscribed topic for the heartbeat.
        beat = client.call(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            1,
            group_id=GROUP_OK,
            member_id="m-hidden",
            member_epoch=0,
            rack_id=None,
            subscribed_topic_names=[hidden],
        )
        assert beat.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        # READ on the topic for the fetch: its partitions answer TOPIC_AUTHORIZATION_FAILED.
        fetched = client.call(
            ApiKey.SHARE_FETCH,
            1,
            group_id=GROUP_OK,
            member_id="m-raw",
            share_session_epoch=0,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=10,
            batch_size=10,
            topics=[
                ShareFetch.FetchTopic(
                    topic_id=raw_uuid(broker, hidden),
                    partitions=[
                        ShareFetch.FetchPartition(partition_index=0, acknowledgement_batches=[])
                    ],
                )
            ],
            forgotten_topics_data=[],
        )
        assert fetched.error_code == ErrorCode.NONE
        codes = [p.error_code for t in fetched.responses for p in t.partitions]
        assert codes == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        client.call(
            ApiKey.SHARE_FETCH,
            1,
            group_id=GROUP_OK,
            member_id="m-raw",
            share_session_epoch=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=10,
            batch_size=10,
            topics=[],
            forgotten_topics_data=[],
        )

        # Offsets: DESCRIBE on the group to describe; READ (alter) / DELETE (delete) to change.
        def describe(group: str) -> int:
            response = client.call(
                ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                1,
                groups=[
                    Describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)
                ],
            )
            return int(response.groups[0].error_code)

        assert describe(GROUP_NO) == ErrorCode.GROUP_AUTHORIZATION_FAILED
        # Allowed, but no such group yet.
        assert describe(GROUP_OK) == ErrorCode.GROUP_ID_NOT_FOUND

        def alter(group: str, topic: str) -> tuple[int, list[int]]:
            response = client.call(
                ApiKey.ALTER_SHARE_GROUP_OFFSETS,
                0,
                group_id=group,
                topics=[
                    Alter.AlterShareGroupOffsetsRequestTopic(
                        topic_name=topic,
                        partitions=[
                            Alter.AlterShareGroupOffsetsRequestPartition(
                                partition_index=0, start_offset=0
                            )
                        ],
                    )
                ],
            )
            return response.error_code, [
                p.error_code for t in response.responses for p in t.partitions
            ]

        assert alter(GROUP_NO, readable)[0] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert alter(GROUP_OK, hidden) == (0, [ErrorCode.TOPIC_AUTHORIZATION_FAILED])
        # The group is made empty by the alter, its start offset 0 (else: latest).
        assert alter(GROUP_OK, readable) == (0, [0])
        assert describe(GROUP_OK) == ErrorCode.NONE
        # With READ on the group and the topic a real ShareConsumer reads every record.
        consumer = ShareConsumer(
            {"bootstrap.servers": broker.plaintext, "group.id": GROUP_OK, "log_level": 3}
        )
        consumer.subscribe([readable])
        got: set[int] = set()
        deadline = time.monotonic() + 40
        try:
            while len(got) < 5:
                assert time.monotonic() < deadline, f"got only {sorted(got)}"
                for message in consumer.poll(0.3):
                    if message.error() is None:
                        got.add(message.offset() or 0)
            consumer.commit_sync()
        finally:
            consumer.close()
        assert got == set(range(5))

        deleted = client.call(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            0,
            group_id=GROUP_OK,
            topics=[Delete.DeleteShareGroupOffsetsRequestTopic(topic_name=readable)],
        )
        assert deleted.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED

        # The share coordinator's APIs are the brokers' own: CLUSTER_ACTION.
        coordinator = client.call(
            ApiKey.FIND_COORDINATOR, 6, key_type=2, coordinator_keys=[f"{GROUP_OK}:AAAA:0"]
        )
        assert coordinator.coordinators[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        read = request_class(ApiKey.READ_SHARE_GROUP_STATE)
        state = client.call(
            ApiKey.READ_SHARE_GROUP_STATE,
            0,
            group_id=GROUP_OK,
            topics=[
                read.ReadStateData(
                    topic_id=raw_uuid(broker, readable),
                    partitions=[read.PartitionData(partition=0, leader_epoch=0)],
                )
            ],
        )
        assert [p.error_code for t in state.results for p in t.partitions] == [
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        ]
    finally:
        client.close()
