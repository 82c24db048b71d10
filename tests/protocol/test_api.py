"""Public entry points: registry, ApiKey/ErrorCode enums, request/response frames, and the
encode path that leaves record data (file slices) out of the encoded bytes."""

from __future__ import annotations

import uuid

import kafka.errors
import pytest

from josefk import protocol
from josefk.protocol import api
from josefk.protocol.errors import ErrorCode, ProtocolEncodeError
from josefk.protocol.framing import FrameDecoder
from josefk.protocol.headers import RequestHeader


class FileSlice:
    """What the broker's storage hands out for record data: only its size is known here."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


def test_every_declared_api_has_a_name_in_api_key() -> None:
    for key, declared in api.registry().items():
        assert api.ApiKey(key).name.replace("_", "") == declared.name.upper()


def test_api_versions_ranges_cover_the_core_apis() -> None:
    ranges = protocol.api_versions_ranges()
    assert ranges[api.ApiKey.PRODUCE] == (3, 12)
    assert ranges[api.ApiKey.FETCH] == (4, 17)
    assert ranges[api.ApiKey.LIST_OFFSETS] == (1, 10)
    assert ranges[api.ApiKey.METADATA] == (0, 13)
    assert ranges[api.ApiKey.API_VERSIONS] == (0, 4)


def test_generated_classes_are_frozen_slotted_keyword_only() -> None:
    cls = protocol.request_class(api.ApiKey.PRODUCE)
    assert cls.__name__ == "ProduceRequest"
    assert cls.TopicProduceData.__qualname__ == "ProduceRequest.TopicProduceData"
    assert cls.PartitionProduceData is cls.TopicProduceData.PartitionProduceData
    value = cls(acks=-1)
    assert value.transactional_id is None and value.topic_data == [] and value.timeout_ms == 0
    with pytest.raises(AttributeError):
        value.acks = 1  # type: ignore[misc]
    assert not hasattr(value, "__dict__")
    with pytest.raises(TypeError):
        cls(-1)


def test_request_frame_round_trip_through_framing() -> None:
    cls = protocol.request_class(api.ApiKey.FETCH)
    body = cls(
        max_wait_ms=500,
        min_bytes=1,
        topics=[
            cls.FetchTopic(
                topic_id=uuid.UUID(int=7),
                partitions=[cls.FetchPartition(partition=0, fetch_offset=42)],
            )
        ],
    )
    header = RequestHeader(
        request_api_key=1, request_api_version=16, correlation_id=9, client_id="c"
    )
    wire = protocol.encode_request(header, body)
    (frame,) = FrameDecoder().feed(wire)
    decoded_header, decoded = protocol.decode_request(frame)
    assert decoded_header == header
    assert decoded == body
    assert decoded.topics[0].partitions[0].partition_max_bytes == 0
    assert decoded.topics[0].partitions[0].current_leader_epoch == -1


def test_fetch_response_parts_leave_file_slices_out() -> None:
    cls = protocol.response_class(api.ApiKey.FETCH)
    slices = [FileSlice(1000), FileSlice(0), FileSlice(5)]
    body = cls(
        responses=[
            cls.FetchableTopicResponse(
                topic="t",
                partitions=[
                    cls.PartitionData(partition_index=i, high_watermark=10, records=s)
                    for i, s in enumerate(slices)
                ],
            )
        ]
    )
    total, parts = protocol.encode_response_parts(3, body, 11)
    assert [p for p in parts if isinstance(p, FileSlice)] == [slices[0], slices[2]]
    assert total == sum(len(p) for p in parts)
    # Substituting real bytes for the slices gives exactly the fully encoded frame.
    data = {id(s): bytes([65 + i]) * len(s) for i, s in enumerate(slices)}
    joined = b"".join(data[id(p)] if isinstance(p, FileSlice) else bytes(p) for p in parts)
    real = cls(
        responses=[
            cls.FetchableTopicResponse(
                topic="t",
                partitions=[
                    cls.PartitionData(partition_index=i, high_watermark=10, records=data[id(s)])
                    for i, s in enumerate(slices)
                ],
            )
        ]
    )
    assert joined == protocol.encode_response(3, real, 11)
    assert int.from_bytes(joined[:4], "big") == total - 4
    correlation_id, decoded = protocol.decode_response(joined[4:], api.ApiKey.FETCH, 11)
    assert correlation_id == 3
    assert bytes(decoded.responses[0].partitions[0].records) == b"A" * 1000
    # Without the parts path, a file slice cannot be copied in: a clear error.
    with pytest.raises(ProtocolEncodeError):
        protocol.encode_response(3, body, 11)


def test_api_versions_response_header_stays_v0_in_flexible_versions() -> None:
    cls = protocol.response_class(api.ApiKey.API_VERSIONS)
    body = cls(api_keys=[cls.ApiVersion(api_key=0, min_version=3, max_version=12)])
    frame = protocol.encode_response(5, body, 3)
    # size, correlation id, then the body directly: no tagged-field byte in the header.
    assert frame[4:8] == b"\x00\x00\x00\x05"
    assert frame[8:10] == b"\x00\x00"  # error_code
    assert protocol.decode_response(frame[4:], api.ApiKey.API_VERSIONS, 3) == (5, body)


def test_records_decode_zero_copy() -> None:
    cls = protocol.request_class(api.ApiKey.PRODUCE)
    body = cls(
        acks=1,
        topic_data=[
            cls.TopicProduceData(
                name="t", partition_data=[cls.PartitionProduceData(index=0, records=b"batch")]
            )
        ],
    )
    header = RequestHeader(request_api_key=0, request_api_version=9, correlation_id=1)
    frame = memoryview(protocol.encode_request(header, body))[4:]
    _, decoded = protocol.decode_request(frame)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is frame.obj
    assert records == b"batch"


def test_error_codes_match_the_guide_numbers() -> None:
    assert ErrorCode.NONE == 0
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6 and ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert ErrorCode.UNSUPPORTED_VERSION == 35 and not ErrorCode.UNSUPPORTED_VERSION.retriable
    assert ErrorCode.of(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert [e.value for e in ErrorCode] == list(range(-1, 134))
    # kafka-python's table is an independent source for numbers and retriable flags; the
    # protocol guide marks CORRUPT_MESSAGE retriable where kafka-python does not.
    theirs = {
        cls.errno: cls.retriable
        for cls in vars(kafka.errors).values()
        if isinstance(cls, type)
        and issubclass(cls, kafka.errors.BrokerResponseError)
        and isinstance(getattr(cls, "errno", None), int)
    }
    for code, retriable in theirs.items():
        if code == ErrorCode.CORRUPT_MESSAGE:
            continue
        assert ErrorCode(code).retriable == retriable, ErrorCode(code).name
