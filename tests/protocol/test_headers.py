"""Request and response headers, their versions per API, and the tolerant header parser."""

from __future__ import annotations

import pytest

from josefk.protocol import api
from josefk.protocol.errors import BufferUnderflow
from josefk.protocol.headers import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    request_header_version,
    response_header_version,
)


def test_header_versions_follow_flexible_versions() -> None:
    assert request_header_version(api.ApiKey.PRODUCE, 8) == 1
    assert request_header_version(api.ApiKey.PRODUCE, 9) == 2
    assert response_header_version(api.ApiKey.PRODUCE, 8) == 0
    assert response_header_version(api.ApiKey.PRODUCE, 9) == 1
    assert request_header_version(api.ApiKey.FETCH, 12) == 2
    assert request_header_version(api.ApiKey.METADATA, 8) == 1
    assert request_header_version(api.ApiKey.METADATA, 9) == 2


def test_api_versions_response_header_is_always_v0() -> None:
    for version in range(5):
        assert response_header_version(api.ApiKey.API_VERSIONS, version) == 0
    assert request_header_version(api.ApiKey.API_VERSIONS, 3) == 2


@pytest.mark.parametrize("header_version", [1, 2])
@pytest.mark.parametrize("client_id", [None, "", "rdkafka", "ü" * 20])
def test_request_header_round_trip(header_version: int, client_id: str | None) -> None:
    header = RequestHeader(
        request_api_key=3, request_api_version=12, correlation_id=-5, client_id=client_id
    )
    out = bytearray()
    encode_request_header(out, header, header_version)
    out += b"body"
    decoded, pos = decode_request_header(memoryview(bytes(out)), header_version)
    assert decoded == header
    assert bytes(out[pos:]) == b"body"


def test_v2_request_header_keeps_client_id_non_compact() -> None:
    header = RequestHeader(
        request_api_key=18, request_api_version=3, correlation_id=1, client_id="ab"
    )
    out = bytearray()
    encode_request_header(out, header, 2)
    assert bytes(out) == b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x02ab\x00"


def test_response_header_round_trip() -> None:
    for version in (0, 1):
        out = bytearray()
        encode_response_header(out, 42, version)
        assert len(out) == 4 + version
        header, pos = decode_response_header(memoryview(bytes(out)), version)
        assert header.correlation_id == 42
        assert pos == len(out)


def test_parse_tolerates_unknown_api_key() -> None:
    frame = b"\x03\xe7\x00\x07\x00\x00\x00\x09\x00\x03abcrest"
    info = parse_request_header(memoryview(frame))
    assert (info.api_key, info.api_version, info.correlation_id) == (999, 7, 9)
    assert info.client_id == "abc"
    assert info.header_version is None
    assert info.body_offset is None


def test_parse_tolerates_unknown_api_versions_version() -> None:
    # ApiVersions v9 (newer than ours): KIP-511 says the header is v2, answer v0-shaped.
    frame = b"\x00\x12\x00\x09\x00\x00\x00\x01\x00\x01x\x00\x02\x02a"
    info = parse_request_header(memoryview(frame))
    assert info.header_version == 2
    assert info.body_offset == 12
    assert info.client_id == "x"


def test_parse_short_frames() -> None:
    with pytest.raises(BufferUnderflow):
        parse_request_header(memoryview(b"\x00\x12\x00"))
    info = parse_request_header(memoryview(b"\x00\x03\x00\x01\x00\x00\x00\x02\x00\x09ab"))
    assert info.correlation_id == 2
    assert info.client_id is None
    assert info.body_offset is None


def test_decode_request_reports_header_on_unsupported_version() -> None:
    frame = b"\x00\x00\x00\x01\x00\x00\x00\x05\xff\xff"  # Produce v1: below 3, unsupported
    with pytest.raises(api.RequestDecodeError) as caught:
        api.decode_request(frame)
    assert caught.value.info.correlation_id == 5
    assert type(caught.value.cause).__name__ == "UnsupportedVersion"
    with pytest.raises(api.RequestDecodeError) as caught:
        api.decode_request(b"\x7f\x00\x00\x00\x00\x00\x00\x06\xff\xff")
    assert type(caught.value.cause).__name__ == "UnknownApiKey"
