"""Counting a response's error codes (Kafka's errorCounts) from the declarations."""

from __future__ import annotations

from josefk.broker.error_counts import response_error_counts
from josefk.protocol.api import ApiKey, response_class
from josefk.protocol.errors import ErrorCode


def test_produce_partitions_are_counted_by_name() -> None:
    R = response_class(ApiKey.PRODUCE)
    partition = R.PartitionProduceResponse
    response = R(
        responses=[
            R.TopicProduceResponse(
                name="a",
                partition_responses=[
                    partition(index=0, error_code=0),
                    partition(index=1, error_code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER)),
                    partition(index=2, error_code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER)),
                ],
            ),
            R.TopicProduceResponse(
                name="b",
                partition_responses=[
                    partition(index=0, error_code=int(ErrorCode.MESSAGE_TOO_LARGE))
                ],
            ),
        ]
    )
    assert response_error_counts(ApiKey.PRODUCE, 9, response) == {
        "NOT_LEADER_OR_FOLLOWER": 2,
        "MESSAGE_TOO_LARGE": 1,
    }


def test_top_level_error_and_none() -> None:
    R = response_class(ApiKey.API_VERSIONS)
    assert response_error_counts(ApiKey.API_VERSIONS, 3, R(error_code=0)) == {}
    unsupported = R(error_code=int(ErrorCode.UNSUPPORTED_VERSION))
    assert response_error_counts(ApiKey.API_VERSIONS, 3, unsupported) == {"UNSUPPORTED_VERSION": 1}


def test_an_unknown_code_is_named_by_its_number() -> None:
    R = response_class(ApiKey.API_VERSIONS)
    assert response_error_counts(ApiKey.API_VERSIONS, 3, R(error_code=9999)) == {
        "UNKNOWN_ERROR_CODE_9999": 1
    }
