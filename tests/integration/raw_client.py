"""A raw Kafka protocol connection for the integration tests that need exact requests.

Owns one socket to a broker and framing with josefk's codec: ``call`` sends a request built
from keyword fields and returns the decoded response; ``frame`` and ``send_frame`` build and
send a request frame separately, so that a test can send the same bytes again (what a client
retry does). Tests subclass it with the calls of their API family. ``produce_one``: a
Produce of one record, for tests that only need to know whether a write is taken.
"""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any

from josefk.protocol.api import ApiKey, decode_response, encode_request, request_class
from josefk.protocol.headers import RequestHeader
from josefk.records.builder import BatchBuilder


class RawClient:
    """One connection; each call sends one request and reads its response."""

    def __init__(self, bootstrap: str, *, client_id: str = "raw-client") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.client_id = client_id
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.sock.close()

    def frame(self, api_key: ApiKey, version: int, body: Any) -> tuple[int, bytes]:
        """A request frame and its correlation id, to send (once or more) with send_frame."""
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=next(self._ids),
            client_id=self.client_id,
        )
        return header.correlation_id, encode_request(header, body)

    def send_frame(self, frame: bytes, api_key: ApiKey, version: int) -> tuple[int, Any]:
        self.sock.sendall(frame)
        (size,) = struct.unpack(">i", self._read_exactly(4))
        return decode_response(self._read_exactly(size), api_key, version)

    def call(self, api_key: ApiKey, version: int, **fields: Any) -> Any:
        correlation_id, frame = self.frame(api_key, version, request_class(api_key)(**fields))
        got_id, response = self.send_frame(frame, api_key, version)
        assert got_id == correlation_id
        return response

    def _read_exactly(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self.sock.recv(size - len(chunks))
            assert chunk, "connection closed by the broker"
            chunks += chunk
        return bytes(chunks)


def produce_one(client: RawClient, topic: str) -> int:
    """Produce one record to partition 0 of ``topic`` (acks=1): the partition's error code."""
    builder = BatchBuilder(base_offset=0)
    builder.append(b"k", b"v")
    req = request_class(ApiKey.PRODUCE)
    answer = client.call(
        ApiKey.PRODUCE,
        9,
        transactional_id=None,
        acks=1,
        timeout_ms=10000,
        topic_data=[
            req.TopicProduceData(
                name=topic,
                partition_data=[
                    req.TopicProduceData.PartitionProduceData(
                        index=0, records=bytes(builder.build())
                    )
                ],
            )
        ],
    )
    return int(answer.responses[0].partition_responses[0].error_code)
