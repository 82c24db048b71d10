"""Deleting topics with a real ``josefk serve``: a topic of the longest legal name.

A 249-character topic is renamed ``<topic>-<p>.<uuid>-delete`` on deletion; uncut, that name
passes the 255 bytes a file name may have and the rename failed with ENAMETOOLONG, which
took the whole log dir offline (every partition, ``__consumer_offsets`` included, answered
KAFKA_STORAGE_ERROR) and left the topic to come back at the next start. Kafka cuts the topic
part; so does josefk now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from client_helpers import (
    CLIENT_TIMEOUT_S,
    assert_delivered,
    ck_admin,
    ck_create_topic,
    ck_group_round_trip,
    ck_produce,
    make_messages,
    unique_topic,
)

pytestmark = pytest.mark.timeout(180)


def test_deleting_a_topic_of_249_characters_leaves_the_log_dir_online(
    broker_factory: Any,
) -> None:
    broker = broker_factory(settings=["num.partitions=2", "file.delete.delay.ms=0"])
    long_topic = unique_topic("long")
    long_topic += "x" * (249 - len(long_topic))
    other = unique_topic("other")
    ck_create_topic(broker.bootstrap, long_topic, partitions=2)
    ck_create_topic(broker.bootstrap, other)
    assert_delivered(ck_produce(broker.bootstrap, long_topic, make_messages(3)))

    admin = ck_admin(broker.bootstrap)
    admin.delete_topics([long_topic], operation_timeout=CLIENT_TIMEOUT_S)[long_topic].result(
        CLIENT_TIMEOUT_S
    )
    # The other partitions, and the group coordinator's, go on serving.
    assert_delivered(ck_produce(broker.bootstrap, other, make_messages(3)))
    ck_group_round_trip(broker.bootstrap, broker.bootstrap, unique_topic("after"), make_messages(2))
    assert long_topic not in admin.list_topics(timeout=CLIENT_TIMEOUT_S).topics

    broker.restart()
    topics = ck_admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT_S).topics
    assert long_topic not in topics and other in topics
    data = Path(broker.data_dir)
    assert not [p for p in data.iterdir() if p.name.startswith(long_topic)]
    assert_delivered(ck_produce(broker.bootstrap, other, make_messages(1)))
