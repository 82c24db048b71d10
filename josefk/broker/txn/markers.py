"""Who writes a transaction's COMMIT or ABORT markers into its partitions.

Owns ``MarkerWriter`` (the one interface the coordinator uses: write this marker to these
partitions, answer an error code per partition), ``LocalMarkerWriter`` (the single node, and
the partitions a cluster broker leads itself: ``ReplicaManager.append_txn_markers``, waiting
for the ISR as acks=all) and ``ClusterMarkerWriter`` (a WriteTxnMarkers request to each
partition's leader over the inter-broker listener, as the replica fetcher connects, and the
local writer for partitions this broker leads).

A writer never raises for one partition's failure; the coordinator retries the partitions
that failed. Imports the replica manager, the metadata cache, josefk.client's connection and
josefk.protocol (the WriteTxnMarkers messages); must not import the handlers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from josefk.broker.errors import error_code_for
from josefk.broker.metadata_cache import MetadataCache
from josefk.broker.replica_manager import ReplicaManager
from josefk.client.connection import BrokerConnection
from josefk.client.security import PLAINTEXT, ClientSecurity
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from josefk.storage.offsets import TopicPartition, TxnMarker

logger = logging.getLogger(__name__)

_MARKER_VERSION: Final = 1


class MarkerWriter(Protocol):
    async def write_markers(
        self, marker: TxnMarker, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Write ``marker`` to each partition; the error code of each (NONE: written and
        replicated)."""
        ...


class LocalMarkerWriter:
    """Markers appended by this broker to the partitions it leads."""

    def __init__(self, replicas: ReplicaManager, *, ack_timeout_ms: int = 30_000) -> None:
        self._replicas = replicas
        self._ack_timeout_ms = ack_timeout_ms

    async def write_markers(
        self, marker: TxnMarker, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        outcomes = self._replicas.append_txn_markers([(tp, marker) for tp in partitions])
        if self._replicas.must_wait_for_acks(outcomes):
            await self._replicas.wait_for_acks(outcomes, self._ack_timeout_ms)
        return {
            o.tp: ErrorCode.NONE if o.error is None else error_code_for(o.error) for o in outcomes
        }


class ClusterMarkerWriter:
    """Markers sent to each partition's leader; this broker's own partitions locally."""

    def __init__(
        self,
        local: LocalMarkerWriter,
        metadata: Callable[[], MetadataCache | None],
        address_of: Callable[[int], tuple[str, int] | None],
        *,
        broker_id: int,
        timeout_s: float = 30.0,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self._local = local
        self._security = security
        self._metadata = metadata
        self._address_of = address_of
        self._broker_id = broker_id
        self._timeout_s = timeout_s
        self._connections: dict[int, BrokerConnection] = {}

    async def write_markers(
        self, marker: TxnMarker, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        results: dict[TopicPartition, ErrorCode] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        metadata = self._metadata()
        for tp in partitions:
            view = None if metadata is None else metadata.partition(tp.topic, tp.partition)
            if view is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif view.leader < 0:
                results[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                by_leader.setdefault(view.leader, []).append(tp)
        sends = [
            self._local.write_markers(marker, tps)
            if leader == self._broker_id
            else self._send(leader, marker, tps)
            for leader, tps in by_leader.items()
        ]
        for answer in await asyncio.gather(*sends):
            results.update(answer)
        return results

    async def _send(
        self, leader: int, marker: TxnMarker, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        failed = dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            connection = await self._connection(leader)
            if connection is None:
                return failed
            response: WriteTxnMarkersResponse = await connection.request(
                ApiKey.WRITE_TXN_MARKERS,
                _marker_request(marker, partitions),
                version=min(_MARKER_VERSION, connection.version_for(ApiKey.WRITE_TXN_MARKERS)),
                timeout_s=self._timeout_s,
            )
        except Exception as exc:  # noqa: BLE001  any failure: drop the connection, retry the markers
            logger.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            stale = self._connections.pop(leader, None)
            if stale is not None:
                stale.close()
            return failed
        results: dict[TopicPartition, ErrorCode] = {}
        for entry in response.markers:
            for topic in entry.topics:
                for p in topic.partitions:
                    results[TopicPartition(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        return {tp: results.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in partitions}

    async def _connection(self, broker_id: int) -> BrokerConnection | None:
        connection = self._connections.get(broker_id)
        if connection is not None and not connection.closed:
            return connection
        address = self._address_of(broker_id)
        if address is None:
            return None
        connection = await BrokerConnection.open(
            *address,
            node_id=broker_id,
            client_id=f"josefk-txn-coordinator-{self._broker_id}",
            timeout_s=self._timeout_s,
            security=self._security,
        )
        self._connections[broker_id] = connection
        return connection

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()


def _marker_request(
    marker: TxnMarker, partitions: Sequence[TopicPartition]
) -> WriteTxnMarkersRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return WriteTxnMarkersRequest(
        markers=[
            WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                transaction_result=marker.committed,
                topics=[
                    WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=ids)
                    for topic, ids in by_topic.items()
                ],
                coordinator_epoch=marker.coordinator_epoch,
            )
        ]
    )
