"""Public entry points of the codec: API keys, the registry of declared APIs, and turning
frames into (header, body) and back.

Owns ``ApiKey`` (every API key Kafka defines), the registry built from
``josefk.protocol.messages.all_specs()`` (``request_message``, ``request_class``,
``api_versions_ranges`` ...), and the frame-level helpers the broker and the client use:
``decode_request``, ``encode_response`` / ``encode_response_parts``, ``encode_request`` and
``decode_response``. Frames here are payloads without their 4-byte size prefix (see
framing.py) unless a function says otherwise. Imports only josefk.protocol modules; no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from typing import Any

from josefk.protocol import headers as h
from josefk.protocol import types as t
from josefk.protocol.compiler import (
    CompiledMessage,
    as_byte_view,
    compile_message,
    split_parts,
)
from josefk.protocol.errors import (
    ProtocolDecodeError,
    UnknownApiKey,
    UnsupportedVersion,
)
from josefk.protocol.headers import RequestHeader, RequestHeaderInfo
from josefk.protocol.messages import all_specs
from josefk.protocol.schema import MessageSpec


class ApiKey(IntEnum):
    """Kafka's API keys (the numbers of the protocol guide)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CLIENT_METRICS_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass(frozen=True, slots=True)
class Api:
    """A declared API: its compiled request and response."""

    api_key: int
    name: str
    request: CompiledMessage
    response: CompiledMessage

    @property
    def min_version(self) -> int:
        return self.request.spec.valid_versions.low

    @property
    def max_version(self) -> int:
        high = self.request.spec.valid_versions.high
        assert high is not None, f"{self.name}: valid versions need an upper bound"
        return high


@cache
def registry() -> dict[int, Api]:
    """Every declared API by key; compiled (classes only, codecs on first use) once."""
    apis: dict[int, Api] = {}
    for req, resp in all_specs():
        apis[req.api_key] = Api(req.api_key, req.name, compile_message(req), compile_message(resp))
    return apis


def api(api_key: int) -> Api:
    found = registry().get(api_key)
    if found is None:
        raise UnknownApiKey(api_key)
    return found


def request_message(api_key: int) -> CompiledMessage:
    return api(api_key).request


def response_message(api_key: int) -> CompiledMessage:
    return api(api_key).response


def request_class(api_key: int) -> Any:
    """The generated dataclass of the API's request (e.g. ``ProduceRequest``)."""
    return api(api_key).request.cls


def response_class(api_key: int) -> Any:
    return api(api_key).response.cls


def api_versions_ranges() -> dict[int, tuple[int, int]]:
    """api key -> (min version, max version) for every declared API.

    The broker intersects this with the handlers it has before advertising anything.
    """
    return {key: (a.min_version, a.max_version) for key, a in sorted(registry().items())}


def spec_pairs() -> list[tuple[MessageSpec, MessageSpec]]:
    return all_specs()


class RequestDecodeError(ProtocolDecodeError):
    """A request whose body could not be decoded; ``info`` says what the header held, so the
    broker can still answer with the right correlation id (or close the connection)."""

    def __init__(self, info: RequestHeaderInfo, cause: ProtocolDecodeError) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.info = info
        self.cause = cause


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Any]:
    """Decode a request frame (payload without size prefix) into its header and body.

    Raises ``RequestDecodeError`` (carrying the tolerant header parse) for an unknown API key,
    an unsupported version or a malformed body, and ``BufferUnderflow`` when even the 8
    fixed header bytes are missing.
    """
    buf = as_byte_view(frame)
    # The common case in a few steps: a declared API and version, a readable client id and
    # an empty tagged-field section. Anything else takes the tolerant parse below.
    if len(buf) >= _HEAD.size:
        api_key, api_version, correlation_id, length = _HEAD.unpack_from(buf, 0)
        known = _request_decoders().get((api_key << 16) | (api_version & 0xFFFF))
        if known is not None and length >= -1:
            header_version, message = known
            pos = _HEAD.size
            client_id: str | None = None
            if length >= 0:
                pos += length
                try:
                    client_id = str(buf[_HEAD.size : pos], "utf-8") if pos <= len(buf) else None
                except UnicodeDecodeError:
                    client_id = None
            if client_id is not None or length == -1:
                if header_version == 2:
                    pos = pos + 1 if pos < len(buf) and buf[pos] == 0 else -1
                if pos >= 0:
                    header = _new_request_header(api_key, api_version, correlation_id, client_id)
                    try:
                        body, _ = message.decode_from(buf, pos, api_version)
                    except ProtocolDecodeError as exc:
                        raise RequestDecodeError(h.parse_request_header(buf), exc) from None
                    return header, body
    return _decode_request_tolerantly(buf)


# api key, api version, correlation id and the length of the client id (header v1 and v2).
_HEAD = struct.Struct(">hhih")


@cache
def _request_decoders() -> dict[int, tuple[int, CompiledMessage]]:
    """(api_key << 16 | api_version) -> (request header version, compiled request) for
    every declared version whose header carries a client id (v1 or v2)."""
    found: dict[int, tuple[int, CompiledMessage]] = {}
    for api_key, entry in registry().items():
        spec = entry.request.spec
        low, high = spec.valid_versions.low, spec.valid_versions.high
        for version in range(low, (high if high is not None else low) + 1):
            header_version = h.request_header_version(api_key, version)
            if header_version >= 1 and spec.valid_versions.contains(version):
                found[(api_key << 16) | version] = (header_version, entry.request)
    return found


_set_key = RequestHeader.__dict__["request_api_key"].__set__
_set_version = RequestHeader.__dict__["request_api_version"].__set__
_set_correlation_id = RequestHeader.__dict__["correlation_id"].__set__
_set_client_id = RequestHeader.__dict__["client_id"].__set__


def _new_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> RequestHeader:
    # Through the slot descriptors: a frozen dataclass's __init__ costs three times as much,
    # once per request.
    header: RequestHeader = object.__new__(RequestHeader)
    _set_key(header, api_key)
    _set_version(header, api_version)
    _set_correlation_id(header, correlation_id)
    _set_client_id(header, client_id)
    return header


def _decode_request_tolerantly(buf: memoryview) -> tuple[RequestHeader, Any]:
    info = h.parse_request_header(buf)
    found = registry().get(info.api_key)
    if found is None:
        raise RequestDecodeError(info, UnknownApiKey(info.api_key))
    message = found.request
    if not message.spec.valid_versions.contains(info.api_version):
        raise RequestDecodeError(info, UnsupportedVersion(info.api_key, info.api_version))
    if info.body_offset is None:
        # Header version known but unreadable: re-parse strictly for the precise error.
        try:
            h.decode_request_header(buf, info.header_version or 1)
        except ProtocolDecodeError as exc:
            raise RequestDecodeError(info, exc) from None
        raise RequestDecodeError(info, ProtocolDecodeError("unreadable request header"))
    header = RequestHeader(
        request_api_key=info.api_key,
        request_api_version=info.api_version,
        correlation_id=info.correlation_id,
        client_id=info.client_id,
    )
    try:
        body, _ = message.decode_from(buf, info.body_offset, info.api_version)
    except ProtocolDecodeError as exc:
        raise RequestDecodeError(info, exc) from None
    return header, body


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """A complete request frame, size prefix included (what a client writes)."""
    message = request_message(header.request_api_key)
    out = bytearray(4)
    h.encode_request_header(
        out,
        header,
        h.request_header_version(header.request_api_key, header.request_api_version),
    )
    message.encode_into(out, body, header.request_api_version)
    out[0:4] = t.INT32.pack(len(out) - 4)
    return bytes(out)


def _response_compiled(body: Any, api_key: int | None) -> CompiledMessage:
    if api_key is not None:
        return response_message(api_key)
    compiled = getattr(type(body), "COMPILED", None)
    if not isinstance(compiled, CompiledMessage) or compiled.spec.kind != "response":
        raise TypeError(f"{type(body).__name__} is not a generated response class")
    return compiled


def encode_response(
    correlation_id: int, body: Any, version: int, *, api_key: int | None = None
) -> bytes:
    """A complete response frame, size prefix included, records copied in."""
    message = _response_compiled(body, api_key)
    out = bytearray(4)
    h.encode_response_header(
        out, correlation_id, h.response_header_version(message.api_key, version)
    )
    message.encode_into(out, body, version)
    out[0:4] = t.INT32.pack(len(out) - 4)
    return bytes(out)


def encode_response_parts(
    correlation_id: int, body: Any, version: int, *, api_key: int | None = None
) -> tuple[int, list[Any]]:
    """A response frame as (total bytes, parts), records left out of the encoded bytes.

    The parts are memoryviews of the encoded prefix and whatever objects the body's
    ``records`` fields held (bytes, memoryviews, or file slices with ``__len__``), in wire
    order; the size prefix is included and counts the records. The caller writes the
    memoryviews and sends file slices with ``os.sendfile``.
    """
    message = _response_compiled(body, api_key)
    out = bytearray(4)
    h.encode_response_header(
        out, correlation_id, h.response_header_version(message.api_key, version)
    )
    external = message.encode_parts_into(out, body, version)
    total = len(out) + sum(len(records) for _, records in external)
    out[0:4] = t.INT32.pack(total - 4)
    return total, split_parts(out, external)


def decode_response(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[int, Any]:
    """(correlation id, body) of a response frame (payload without size prefix)."""
    buf = as_byte_view(frame)
    header, pos = h.decode_response_header(buf, h.response_header_version(api_key, api_version))
    body, _ = response_message(api_key).decode_from(buf, pos, api_version)
    return header.correlation_id, body
