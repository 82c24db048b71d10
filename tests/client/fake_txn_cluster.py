"""A scripted transaction coordinator on top of ``FakeCluster``, for the transactional
producer's fault paths (fencing, busy coordinators, failed records) that a real broker does
not produce on demand.

Owns ``FakeTxnCluster``: node 1 is the leader of the one partition and the coordinator of
every transactional id and group. It answers FindCoordinator, InitProducerId (producer id 77,
the epoch going up by one per call), AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and
EndTxn, and records each request body in ``calls`` in order. ``script[api_key]`` is a list of
error codes answered (one per request, in order) before the API answers normally again.
Produce refuses a transactional batch for a partition no AddPartitionsToTxn added
(INVALID_TXN_STATE), as Kafka does.
"""

from __future__ import annotations

from typing import Any

from fake_cluster import FakeCluster

from josefk.protocol import ApiKey, ErrorCode
from josefk.protocol.api import response_class
from josefk.records import split_batches

TXN_VERSIONS = {
    ApiKey.FIND_COORDINATOR: (0, 3),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
}


class FakeTxnCluster(FakeCluster):
    def __init__(self, topic: str) -> None:
        super().__init__(topic, idempotent=True)
        self.versions.update(TXN_VERSIONS)
        self.script: dict[int, list[ErrorCode]] = {}
        self.calls: list[tuple[int, Any]] = []  # (api key, request body), txn APIs only
        self.added: set[tuple[str, int]] = set()
        self.transactional_batches = 0

    def _scripted(self, api_key: int) -> int:
        codes = self.script.get(api_key)
        return int(codes.pop(0)) if codes else 0

    def calls_of(self, api_key: int) -> list[Any]:
        return [body for key, body in self.calls if key == api_key]

    def _handle(self, node_id: int, api_key: int, version: int, body: Any) -> Any:
        if api_key in TXN_VERSIONS:
            self.calls.append((api_key, body))
        cls = response_class(api_key)
        if api_key == ApiKey.FIND_COORDINATOR:
            code = self._scripted(api_key)
            return cls(error_code=code, node_id=1, host="127.0.0.1", port=self.ports[1])
        if api_key == ApiKey.INIT_PRODUCER_ID:
            code = self._scripted(api_key)
            if code:
                return cls(error_code=code, producer_id=-1, producer_epoch=-1)
            self.producer_epoch += 1
            return cls(error_code=0, producer_id=77, producer_epoch=self.producer_epoch)
        if api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
            code = self._scripted(api_key)
            results = []
            for topic in body.v3_and_below_topics:
                parts = []
                for p in topic.partitions:
                    if not code:
                        self.added.add((topic.name, p))
                    parts.append(
                        cls.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                            partition_index=p, partition_error_code=code
                        )
                    )
                results.append(
                    cls.AddPartitionsToTxnTopicResult(name=topic.name, results_by_partition=parts)
                )
            return cls(results_by_topic_v3_and_below=results)
        if api_key in (ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN):
            code = self._scripted(api_key)
            if api_key == ApiKey.END_TXN and not code:
                self.added.clear()
            return cls(error_code=code)
        if api_key == ApiKey.TXN_OFFSET_COMMIT:
            code = self._scripted(api_key)
            return cls(
                topics=[
                    cls.TxnOffsetCommitResponseTopic(
                        name=t.name,
                        partitions=[
                            cls.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition(
                                partition_index=p.partition_index, error_code=code
                            )
                        ],
                    )
                    for t in body.topics
                    for p in t.partitions
                ]
            )
        if api_key == ApiKey.PRODUCE:
            (topic,) = body.topic_data
            (part,) = topic.partition_data
            batches = list(split_batches(bytes(part.records)))
            if any(b.is_transactional for b in batches):
                self.transactional_batches += len(batches)
                if (topic.name, part.index) not in self.added or body.transactional_id is None:
                    self.fail_next_produce = ErrorCode.INVALID_TXN_STATE
        return super()._handle(node_id, api_key, version, body)
