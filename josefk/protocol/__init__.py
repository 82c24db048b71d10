"""The Kafka wire protocol, sans-io: bytes in, typed messages out, and back.

Owns primitive types, message declarations for every API and version, request/response
headers, error codes and framing. Record data stays an opaque memoryview. Must not import
josefk.storage, josefk.broker or anything that does I/O.

Entry points (see api.py): ``decode_request(frame) -> (RequestHeader, body)``,
``encode_response(correlation_id, body, version)``, ``encode_response_parts`` for responses
whose record data goes out with sendfile, ``request_class(api_key)``, ``api_versions_ranges()``
and the ``ApiKey`` / ``ErrorCode`` enums. Generated classes are named after the message
(``ProduceRequest``) with each struct reachable as an attribute (``ProduceRequest.TopicProduceData``).
``josefk.protocol.message_types`` exports them by name, typed for mypy by its generated ``.pyi``.
"""

from josefk.protocol.api import (
    ApiKey,
    RequestDecodeError,
    api_versions_ranges,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
    request_class,
    request_message,
    response_class,
    response_message,
)
from josefk.protocol.errors import (
    BufferUnderflow,
    ErrorCode,
    FrameTooLarge,
    InvalidLength,
    ProtocolDecodeError,
    ProtocolEncodeError,
    UnexpectedNull,
    UnsupportedVersion,
)
from josefk.protocol.framing import FrameDecoder, FrameReceiver, encode_frame
from josefk.protocol.headers import RequestHeader, ResponseHeader

__all__ = [
    "ApiKey",
    "BufferUnderflow",
    "ErrorCode",
    "FrameDecoder",
    "FrameReceiver",
    "FrameTooLarge",
    "InvalidLength",
    "ProtocolDecodeError",
    "ProtocolEncodeError",
    "RequestDecodeError",
    "RequestHeader",
    "ResponseHeader",
    "UnexpectedNull",
    "UnsupportedVersion",
    "api_versions_ranges",
    "decode_request",
    "decode_response",
    "encode_frame",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "request_class",
    "request_message",
    "response_class",
    "response_message",
]
