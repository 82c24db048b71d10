"""ListOffsets with negative timestamps against a real ``josefk serve``.

A negative timestamp that is none of the special ones (-1 latest, -2 earliest, -3 max
timestamp, -4 earliest local, -5 earliest tiered), or a special one asked with a version older
than the one that defined it, answers UNSUPPORTED_VERSION, as Kafka does. Before, -2^63
answered UNKNOWN_SERVER_ERROR and logged a traceback.
"""

from __future__ import annotations

from typing import Any

import pytest
from client_helpers import ck_create_topic, unique_topic
from raw_client import RawClient, produce_one

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

ListOffsets = request_class(ApiKey.LIST_OFFSETS)


def _list(client: RawClient, topic: str, timestamp: int, version: int) -> Any:
    answer = client.call(
        ApiKey.LIST_OFFSETS,
        version,
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsets.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsets.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0,
                        current_leader_epoch=-1,
                        timestamp=timestamp,
                    )
                ],
            )
        ],
    )
    return answer.topics[0].partitions[0]


def test_negative_timestamps_that_mean_nothing_are_unsupported(broker_factory: Any) -> None:
    broker = broker_factory()
    topic = unique_topic("list-offsets")
    ck_create_topic(broker.bootstrap, topic)
    client = RawClient(broker.bootstrap)
    try:
        assert produce_one(client, topic) == 0
        for timestamp in (-(2**63), -6, -100):
            answer = _list(client, topic, timestamp, 7)
            assert (answer.error_code, answer.offset) == (ErrorCode.UNSUPPORTED_VERSION, -1)
        # -3 (max timestamp) exists from v7 on.
        assert _list(client, topic, -3, 6).error_code == ErrorCode.UNSUPPORTED_VERSION
        found = _list(client, topic, -3, 7)
        assert (found.error_code, found.offset) == (ErrorCode.NONE, 0)
        latest = _list(client, topic, -1, 1)
        assert (latest.error_code, latest.offset) == (ErrorCode.NONE, 1)
        assert _list(client, topic, 0, 7).offset == 0
    finally:
        client.close()
    assert "Traceback" not in broker.log_path.read_text(errors="replace")
