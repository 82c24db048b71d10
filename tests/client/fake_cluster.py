"""A scripted two-broker Kafka cluster in-process, for leader changes a single josefk broker
cannot produce.

Owns ``FakeCluster``: two asyncio listeners (node ids 1 and 2) that share one in-memory log
of one topic with one partition. Only the partition's current ``leader`` accepts Produce and
Fetch; the other node answers NOT_LEADER_OR_FOLLOWER, as a real follower does after a leader
change. Metadata always tells the current leader. With ``idempotent`` it also answers
InitProducerId (producer id 77, the epoch going up by one per call), and
``fail_next_produce`` makes the next Produce fail with a chosen error. Uses josefk.protocol to decode requests
and encode responses; versions are capped so that topics travel by name.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from josefk.protocol import ApiKey, ErrorCode, FrameDecoder, decode_request, encode_response
from josefk.protocol.api import response_class
from josefk.records import RecordBatch, split_batches

VERSIONS = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.METADATA: (1, 12),
    ApiKey.PRODUCE: (3, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
}
IDEMPOTENT_VERSIONS = {ApiKey.INIT_PRODUCER_ID: (3, 4)}


class FakeCluster:
    def __init__(self, topic: str, *, idempotent: bool = False) -> None:
        self.topic = topic
        self.versions = {**VERSIONS, **(IDEMPOTENT_VERSIONS if idempotent else {})}
        self.producer_epoch = -1
        # Answer the next Produce with this error once (e.g. OUT_OF_ORDER_SEQUENCE_NUMBER).
        self.fail_next_produce: ErrorCode | None = None
        self.topic_id = uuid.uuid4()
        self.leader = 1
        self.batches: list[bytes] = []  # with broker-assigned base offsets
        self.log_end_offset = 0
        self.requests: list[tuple[int, int]] = []  # (node id, api key)
        self.not_leader_answers = 0
        self.ports: dict[int, int] = {}
        self._servers: list[asyncio.Server] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.ports[1]}"

    async def start(self) -> None:
        for node_id in (1, 2):
            server = await asyncio.start_server(
                lambda r, w, n=node_id: self._serve(n, r, w), "127.0.0.1", 0
            )
            self.ports[node_id] = server.sockets[0].getsockname()[1]
            self._servers.append(server)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
            await server.wait_closed()

    async def _serve(
        self, node_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    header, body = decode_request(frame)
                    self.requests.append((node_id, header.request_api_key))
                    response = self._handle(
                        node_id, header.request_api_key, header.request_api_version, body
                    )
                    writer.write(
                        encode_response(
                            header.correlation_id,
                            response,
                            header.request_api_version,
                            api_key=header.request_api_key,
                        )
                    )
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def _handle(self, node_id: int, api_key: int, version: int, body: Any) -> Any:
        if api_key == ApiKey.API_VERSIONS:
            cls = response_class(api_key)
            return cls(
                error_code=0,
                api_keys=[
                    cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                    for k, (lo, hi) in self.versions.items()
                ],
            )
        if api_key == ApiKey.METADATA:
            cls = response_class(api_key)
            return cls(
                brokers=[
                    cls.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=p)
                    for n, p in self.ports.items()
                ],
                cluster_id="fake",
                controller_id=1,
                topics=[
                    cls.MetadataResponseTopic(
                        error_code=0,
                        name=self.topic,
                        topic_id=self.topic_id,
                        partitions=[
                            cls.MetadataResponsePartition(
                                error_code=0,
                                partition_index=0,
                                leader_id=self.leader,
                                leader_epoch=self.leader,
                                replica_nodes=[1, 2],
                                isr_nodes=[1, 2],
                            )
                        ],
                    )
                ],
            )
        if api_key == ApiKey.INIT_PRODUCER_ID:
            # One producer id; each call (first or bump) moves to the next epoch.
            self.producer_epoch += 1
            return response_class(api_key)(
                error_code=0, producer_id=77, producer_epoch=self.producer_epoch
            )
        if api_key == ApiKey.PRODUCE:
            return self._produce(node_id, body)
        if api_key == ApiKey.FETCH:
            return self._fetch(node_id, body)
        if api_key == ApiKey.LIST_OFFSETS:
            cls = response_class(api_key)
            (topic,) = body.topics
            (part,) = topic.partitions
            offset = 0 if part.timestamp == -2 else self.log_end_offset
            return cls(
                topics=[
                    cls.ListOffsetsTopicResponse(
                        name=topic.name,
                        partitions=[
                            cls.ListOffsetsPartitionResponse(
                                partition_index=0, error_code=0, timestamp=-1, offset=offset
                            )
                        ],
                    )
                ]
            )
        raise AssertionError(f"unexpected api key {api_key}")

    def _produce(self, node_id: int, body: Any) -> Any:
        cls = response_class(ApiKey.PRODUCE)
        (topic,) = body.topic_data
        (part,) = topic.partition_data
        if node_id != self.leader:
            self.not_leader_answers += 1
            error, base = ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        elif self.fail_next_produce is not None:
            error, base = self.fail_next_produce, -1
            self.fail_next_produce = None
        else:
            error, base = ErrorCode.NONE, self.log_end_offset
            for batch in split_batches(bytes(part.records)):
                copy = bytearray(batch.buffer)
                RecordBatch(memoryview(copy)).set_base_offset(self.log_end_offset)
                self.batches.append(bytes(copy))
                self.log_end_offset += batch.record_count
        return cls(
            responses=[
                cls.TopicProduceResponse(
                    name=topic.name,
                    partition_responses=[
                        cls.PartitionProduceResponse(
                            index=0, error_code=int(error), base_offset=base
                        )
                    ],
                )
            ]
        )

    def _fetch(self, node_id: int, body: Any) -> Any:
        cls = response_class(ApiKey.FETCH)
        (topic,) = body.topics
        (part,) = topic.partitions
        if node_id != self.leader:
            self.not_leader_answers += 1
            data = cls.PartitionData(
                partition_index=0,
                error_code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                high_watermark=-1,
            )
        else:
            records = b"".join(
                b
                for b in self.batches
                if RecordBatch(memoryview(b)).next_offset > part.fetch_offset
            )
            data = cls.PartitionData(
                partition_index=0,
                error_code=0,
                high_watermark=self.log_end_offset,
                last_stable_offset=self.log_end_offset,
                log_start_offset=0,
                records=records,
            )
        return cls(responses=[cls.FetchableTopicResponse(topic=topic.topic, partitions=[data])])
