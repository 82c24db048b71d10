"""Topic names that collide in metric names, against a real ``josefk serve``.

Kafka turns '.' into '_' in metric names, so ``a.b`` and ``a_b`` cannot both exist: the second
is refused with INVALID_TOPIC_EXCEPTION, whether created or auto-created. Before, both were
accepted.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from client_helpers import CLIENT_TIMEOUT_S, ck_admin, ck_create_topic
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic
from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

Metadata = request_class(ApiKey.METADATA)


def test_a_name_colliding_with_an_existing_one_is_refused(broker_factory: Any) -> None:
    broker = broker_factory()
    stem = uuid.uuid4().hex[:10]
    dotted, underscored = f"metrics.{stem}", f"metrics_{stem}"
    ck_create_topic(broker.bootstrap, dotted)
    admin = ck_admin(broker.bootstrap)
    futures = admin.create_topics(
        [NewTopic(underscored, num_partitions=1, replication_factor=1)],
        request_timeout=CLIENT_TIMEOUT_S,
    )
    with pytest.raises(KafkaException) as refused:
        futures[underscored].result(timeout=CLIENT_TIMEOUT_S)
    error = refused.value.args[0]
    assert error.code() == KafkaError.TOPIC_EXCEPTION
    assert dotted in error.str()

    # Auto-creation (Metadata naming it) is refused the same way.
    client = RawClient(broker.bootstrap)
    try:
        answer = client.call(
            ApiKey.METADATA,
            8,
            topics=[Metadata.MetadataRequestTopic(name=underscored)],
            allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        assert answer.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    finally:
        client.close()
    topics = admin.list_topics(timeout=CLIENT_TIMEOUT_S).topics
    assert dotted in topics and underscored not in topics
