"""Request and response headers of the Kafka protocol, and which version each API uses.

Owns ``RequestHeader`` (v0: api key, api version, correlation id; v1 adds the nullable
client id; v2 adds a tagged-field section, with the client id still a non-compact nullable
string), ``ResponseHeader`` (v0: correlation id; v1 adds tagged fields), the rule choosing
them per API and version (flexible versions use the new headers, except that the ApiVersions
response header is always v0 so a client can read it before it knows our versions), and a
tolerant request-header parser for frames the broker cannot fully decode (unknown API key or
version), so it can still answer. Imports the declarations through josefk.protocol.messages
and the primitives; must not import api.py (which imports this module) or do I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache
from typing import Final

from josefk.protocol import types as t
from josefk.protocol.errors import BufferUnderflow, ProtocolDecodeError
from josefk.protocol.schema import Versions

API_VERSIONS_KEY: Final = 18
CONTROLLED_SHUTDOWN_KEY: Final = 7
_FIXED: Final = struct.Struct(">hhi")


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeader:
    request_api_key: int
    request_api_version: int
    correlation_id: int
    client_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseHeader:
    correlation_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeaderInfo:
    """What could be read of a request header, however unknown its API or version.

    ``header_version`` and ``body_offset`` are None when the header's layout cannot be
    known (an API key josefk has no declaration for); ``client_id`` is None when absent or
    unreadable.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int | None
    body_offset: int | None


@cache
def _flexible_versions() -> dict[int, tuple[Versions, Versions, Versions]]:
    from josefk.protocol.messages import all_specs

    return {
        req.api_key: (req.valid_versions, req.flexible_versions, resp.flexible_versions)
        for req, resp in all_specs()
    }


def request_header_version(api_key: int, api_version: int) -> int:
    """The request header version a client uses for this API and version."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    entry = _flexible_versions().get(api_key)
    if entry is None:
        return 1
    return 2 if entry[1].contains(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """The response header version the broker answers with for this API and version."""
    if api_key == API_VERSIONS_KEY:
        return 0
    entry = _flexible_versions().get(api_key)
    if entry is None:
        return 0
    return 1 if entry[2].contains(api_version) else 0


def encode_request_header(out: bytearray, header: RequestHeader, header_version: int) -> None:
    out += _FIXED.pack(header.request_api_key, header.request_api_version, header.correlation_id)
    if header_version >= 1:
        t.write_string(out, header.client_id)
    if header_version >= 2:
        out.append(0)


def decode_request_header(
    buf: memoryview, header_version: int, pos: int = 0
) -> tuple[RequestHeader, int]:
    if pos + 8 > len(buf):
        raise BufferUnderflow("request header shorter than 8 bytes")
    api_key, api_version, correlation_id = _FIXED.unpack_from(buf, pos)
    pos += 8
    client_id = None
    if header_version >= 1:
        client_id, pos = t.read_string(buf, pos, nullable=True)
    if header_version >= 2:
        pos = t.skip_tagged_fields(buf, pos)
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return header, pos


def parse_request_header(frame: memoryview) -> RequestHeaderInfo:
    """Read as much of a request header as possible without knowing the API.

    Raises ``BufferUnderflow`` only when the frame is shorter than the 8 fixed bytes (api key,
    api version, correlation id): without a correlation id there is nothing to answer. For
    ApiVersions of a version newer than declared the header is taken as v2 when the version
    is 3 or more, as KIP-511 specifies, so the broker can answer UNSUPPORTED_VERSION.
    """
    if len(frame) < 8:
        raise BufferUnderflow("request header shorter than 8 bytes")
    api_key, api_version, correlation_id = _FIXED.unpack_from(frame, 0)
    entry = _flexible_versions().get(api_key)
    header_version: int | None
    if entry is None:
        header_version = None
    elif api_key == API_VERSIONS_KEY:
        header_version = 2 if api_version >= 3 else 1
    else:
        header_version = request_header_version(api_key, api_version)
        if not entry[0].contains(api_version) and api_version > (entry[0].high or api_version):
            # Newer than declared: later versions stay flexible once an API becomes so.
            header_version = 2 if entry[1].high is None and entry[1].low <= api_version else 1
    client_id = None
    body_offset: int | None = None
    try:
        client_id, pos = t.read_string(frame, 8, nullable=True)
        if header_version == 2:
            pos = t.skip_tagged_fields(frame, pos)
        if header_version is not None:
            body_offset = pos
    except ProtocolDecodeError:
        client_id = None
        body_offset = None
    if header_version == 0:
        client_id, body_offset = None, 8
    return RequestHeaderInfo(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
        header_version=header_version,
        body_offset=body_offset,
    )


def encode_response_header(out: bytearray, correlation_id: int, header_version: int) -> None:
    out += t.INT32.pack(correlation_id)
    if header_version >= 1:
        out.append(0)


def decode_response_header(
    buf: memoryview, header_version: int, pos: int = 0
) -> tuple[ResponseHeader, int]:
    if pos + 4 > len(buf):
        raise BufferUnderflow("response header shorter than 4 bytes")
    correlation_id = t.INT32.unpack_from(buf, pos)[0]
    pos += 4
    if header_version >= 1:
        pos = t.skip_tagged_fields(buf, pos)
    return ResponseHeader(correlation_id=correlation_id), pos
