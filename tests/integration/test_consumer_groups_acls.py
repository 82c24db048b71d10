"""KIP-848 consumer groups under the authorizer, against a real ``josefk serve``: a heartbeat
subscribing to a topic the member may not DESCRIBE is refused whole with
TOPIC_AUTHORIZATION_FAILED, naming the topic, and the group gets no member from it (Kafka's
KafkaApis check before the coordinator is asked); with DESCRIBE on every subscribed topic the
member joins. librdkafka's test 0109 (``group.protocol=consumer``) expects this error on the
consumer for an unauthorized topic in its subscription; the same check already held for share
groups (tests/integration/test_share_groups_acls.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from client_helpers import unique_topic
from confluent_kafka.admin import AclOperation, ResourceType
from raw_client import RawClient
from sasl_broker import SaslBroker, start_plaintext_and_sasl
from test_acls import AUTHORIZER, PASSWORDS, allow, create_acls, create_topic_as

from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(180)

ANONYMOUS = "ANONYMOUS"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    started = start_plaintext_and_sasl(
        tmp_path_factory.mktemp("josefk-consumer-group-acls"),
        users=PASSWORDS,
        settings=[f"authorizer.class.name={AUTHORIZER}", "super.users=User:admin"],
    )
    yield started
    started.stop()


def test_a_heartbeat_subscribing_to_a_topic_it_may_not_describe_is_refused(
    broker: SaslBroker,
) -> None:
    group = unique_topic("acl-848-group")
    readable, hidden = unique_topic("acl-848"), unique_topic("acl-848-hidden")
    for topic in (readable, hidden):
        create_topic_as(broker, "admin", topic)
    create_acls(
        broker,
        [
            allow(ANONYMOUS, ResourceType.GROUP, group, AclOperation.READ),
            allow(ANONYMOUS, ResourceType.GROUP, group, AclOperation.DESCRIBE),
            allow(ANONYMOUS, ResourceType.TOPIC, readable, AclOperation.DESCRIBE),
        ],
    )
    client = RawClient(broker.plaintext)

    def join(member: str, topics: list[str]) -> Any:
        return client.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            group_id=group,
            member_id=member,
            member_epoch=0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=topics,
            topic_partitions=[],
        )

    try:
        refused = join("m-hidden", [readable, hidden])
        assert refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert hidden in refused.error_message
        assert readable not in refused.error_message
        described = client.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, group_ids=[group])
        assert described.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND, "no member joined"

        joined = join("m-readable", [readable])
        assert joined.error_code == ErrorCode.NONE
        assert joined.member_epoch > 0
    finally:
        client.close()
