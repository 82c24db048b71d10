"""Partition creation with a real ``josefk serve``: bounded per request, and off the loop.

Kafka's controller refuses a request creating more than 10,000 partitions with
POLICY_VIOLATION (a validate-only request for a million was answered NONE before). Creating
thousands of partitions writes their files in the executor: another client is answered while
it runs (before, 5,000 partitions held every client for 109 s).
"""

from __future__ import annotations

import select
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from client_helpers import CLIENT_TIMEOUT_S, ck_create_topic, unique_topic
from raw_client import RawClient

from josefk.protocol.api import ApiKey, decode_response, request_class
from josefk.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(300)

CreateTopics = request_class(ApiKey.CREATE_TOPICS)
CreatePartitions = request_class(ApiKey.CREATE_PARTITIONS)


def _create_request(topics: dict[str, int], *, validate_only: bool) -> Any:
    return CreateTopics(
        topics=[
            CreateTopics.CreatableTopic(
                name=name,
                num_partitions=count,
                replication_factor=1,
                assignments=[],
                configs=[],
            )
            for name, count in topics.items()
        ],
        timeout_ms=600_000,
        validate_only=validate_only,
    )


@pytest.mark.parametrize("validate_only", [True, False])
def test_more_than_10000_partitions_in_one_request_is_a_policy_violation(
    broker_factory: Any, validate_only: bool
) -> None:
    broker = broker_factory()
    client = RawClient(broker.bootstrap)
    try:
        small, large = unique_topic("small"), unique_topic("large")
        _, frame = client.frame(
            ApiKey.CREATE_TOPICS,
            7,
            _create_request({small: 1, large: 10_000}, validate_only=validate_only),
        )
        _, answer = client.send_frame(frame, ApiKey.CREATE_TOPICS, 7)
        assert [(t.name, t.error_code) for t in answer.topics] == [
            (small, ErrorCode.POLICY_VIOLATION),
            (large, ErrorCode.POLICY_VIOLATION),
        ]
        assert not any(p.name.startswith((small, large)) for p in Path(broker.data_dir).iterdir())

        grown = unique_topic("grown")
        ck_create_topic(broker.bootstrap, grown)
        answer = client.call(
            ApiKey.CREATE_PARTITIONS,
            3,
            topics=[
                CreatePartitions.CreatePartitionsTopic(name=grown, count=10_002, assignments=None)
            ],
            timeout_ms=60_000,
            validate_only=validate_only,
        )
        assert answer.results[0].error_code == ErrorCode.POLICY_VIOLATION
    finally:
        client.close()


def _readable(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


def test_other_clients_are_served_while_3000_partitions_are_created(broker_factory: Any) -> None:
    broker = broker_factory()
    topic = unique_topic("many")
    creator, other = RawClient(broker.bootstrap), RawClient(broker.bootstrap)
    try:
        correlation_id, frame = creator.frame(
            ApiKey.CREATE_TOPICS, 7, _create_request({topic: 3000}, validate_only=False)
        )
        creator.sock.sendall(frame)
        # The creation is under way once its first partition directory exists.
        first = Path(broker.data_dir) / f"{topic}-0"
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while not first.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first.exists()
        assert other.call(ApiKey.API_VERSIONS, 3, client_software_name="t").error_code == 0
        # Answered while the creation still runs: its response has not come yet.
        assert not _readable(creator.sock)
        creator.sock.settimeout(240)
        (size,) = struct.unpack(">i", creator._read_exactly(4))
        got_id, answer = decode_response(creator._read_exactly(size), ApiKey.CREATE_TOPICS, 7)
        assert got_id == correlation_id
        assert [(t.name, t.error_code, t.num_partitions) for t in answer.topics] == [
            (topic, ErrorCode.NONE, 3000)
        ]
    finally:
        creator.close()
        other.close()
