"""``decode_request``'s fast path (declared API and version, readable client id, empty
tagged fields) against the tolerant parse it falls back to: same header and body, or the
same error carrying the same header information, for any bytes."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.protocol.api import (
    ApiKey,
    RequestDecodeError,
    _decode_request_tolerantly,
    decode_request,
    encode_request,
    request_class,
)
from josefk.protocol.compiler import as_byte_view
from josefk.protocol.errors import ProtocolDecodeError
from josefk.protocol.headers import RequestHeader


def outcome(fn: Any, frame: bytes) -> tuple[str, Any]:
    try:
        return "ok", fn(frame)
    except RequestDecodeError as exc:
        return "request-error", (exc.info, type(exc.cause))
    except ProtocolDecodeError as exc:
        return "error", type(exc)


def tolerant(frame: bytes) -> Any:
    return _decode_request_tolerantly(as_byte_view(frame))


def heartbeat(version: int, client_id: str | None) -> bytes:
    body = request_class(ApiKey.HEARTBEAT)(group_id="g", generation_id=3, member_id="m-1")
    header = RequestHeader(
        request_api_key=ApiKey.HEARTBEAT,
        request_api_version=version,
        correlation_id=42,
        client_id=client_id,
    )
    return encode_request(header, body)[4:]


def test_both_paths_agree_on_well_formed_requests() -> None:
    for version in range(5):
        for client_id in (None, "", "rdkafka", "ünïcode"):
            frame = heartbeat(version, client_id)
            assert outcome(decode_request, frame) == outcome(tolerant, frame)
            assert decode_request(frame)[0].client_id == client_id


def test_header_edge_cases_fall_back_to_the_tolerant_parse() -> None:
    good = heartbeat(4, "abc")
    head = good[:8]
    cases = [
        head + struct.pack(">h", -2) + good[13:],  # impossible client id length
        head + struct.pack(">h", 3) + b"\xff\xfe\xfd" + good[13:],  # not UTF-8
        head + struct.pack(">h", 500) + b"abc",  # longer than the frame
        good[:13] + b"\x01\x00\x00" + good[14:],  # a tagged field in the header
        good[:13],  # nothing after the header
        struct.pack(">hhih", 12, 99, 1, -1),  # unsupported version
        struct.pack(">hhih", 999, 0, 1, -1),  # unknown api key
        struct.pack(">hhih", 12, -1, 1, -1),  # negative version
    ]
    for frame in cases:
        assert outcome(decode_request, frame) == outcome(tolerant, frame)


@settings(max_examples=400, deadline=None)
@given(
    version=st.integers(0, 4),
    client_id=st.none() | st.text(max_size=8),
    position=st.integers(0, 40),
    value=st.integers(0, 255),
    cut=st.integers(0, 60),
)
def test_both_paths_agree_on_mutated_frames(
    version: int, client_id: str | None, position: int, value: int, cut: int
) -> None:
    frame = bytearray(heartbeat(version, client_id))
    if position < len(frame):
        frame[position] = value
    mutated = bytes(frame[: len(frame) - cut // 10])
    assert outcome(decode_request, mutated) == outcome(tolerant, mutated)
