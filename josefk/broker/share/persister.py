"""How a share-partition leader reaches the share coordinator of its share partitions in a
cluster.

Owns ``ClusterPersister`` (Kafka's DefaultStatePersister in spirit): ``read`` / ``write`` /
``delete`` of one share partition's state go to the leader of the key's
``__share_group_state`` partition, found in the cluster metadata: this broker's own
``ShareCoordinator`` when it leads that partition, else a ReadShareGroupState /
WriteShareGroupState request over the inter-broker listener (as the transaction coordinator's
markers travel). A coordinator moving (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, no leader yet, a connection failing) is retried with a short
backoff until ``retry_s`` passes: a SIGKILLed coordinator's partition gets a new leader within
the cluster's failover time, and the acknowledgement waiting on the write is answered then.
DeleteShareGroupState the same way.

Imports the share coordinator and records, the metadata cache, josefk.client's connection
and josefk.protocol (the three messages); must not import the handlers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar, cast

from josefk.broker.metadata_cache import MetadataCache
from josefk.broker.share.coordinator import SHARE_STATE_TOPIC, ReadResult, ShareCoordinator
from josefk.broker.share.records import ShareState, ShareStateKey, StateBatch
from josefk.client.connection import BrokerConnection
from josefk.client.security import PLAINTEXT, ClientSecurity
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)

logger = logging.getLogger(__name__)

_RETRIABLE: Final = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
_T = TypeVar("_T")
_BACKOFF_S: Final = 0.1
_MAX_BACKOFF_S: Final = 1.0


class ClusterPersister:
    """Share state through the share coordinator leading the key's partition."""

    def __init__(
        self,
        local: ShareCoordinator,
        metadata: Callable[[], MetadataCache | None],
        address_of: Callable[[int], tuple[str, int] | None],
        *,
        broker_id: int,
        timeout_s: float = 30.0,
        retry_s: float = 20.0,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self._local = local
        self._metadata = metadata
        self._address_of = address_of
        self._broker_id = broker_id
        self._timeout_s = timeout_s
        self._retry_s = retry_s
        self._security = security
        self._connections: dict[int, BrokerConnection] = {}

    def _leader(self, key: ShareStateKey) -> int:
        metadata = self._metadata()
        if metadata is None:
            return -1
        view = metadata.partition(SHARE_STATE_TOPIC, self._local.partition_for(key))
        return -1 if view is None else view.leader

    async def _on_coordinator(
        self,
        key: ShareStateKey,
        local: Callable[[], Awaitable[_T]],
        remote: Callable[[int], Awaitable[_T]],
        failed: Callable[[ErrorCode], _T],
        error_of: Callable[[_T], ErrorCode],
    ) -> _T:
        """One operation on the share coordinator leading ``key``'s partition: ``local()``
        when that is this broker, else ``remote(leader)``; ``failed(code)`` when no broker
        leads it. Retried with a growing backoff while the answer's error (``error_of``) says
        the coordinator is moving, until ``retry_s`` passes; then the last answer stands."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._retry_s
        backoff = _BACKOFF_S
        while True:
            leader = self._leader(key)
            if leader < 0:
                answer = failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            elif leader == self._broker_id:
                answer = await local()
            else:
                answer = await remote(leader)
            if error_of(answer) not in _RETRIABLE or loop.time() + backoff > deadline:
                return answer
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ReadResult:
        return await self._on_coordinator(
            key,
            lambda: self._local.read(key, leader_epoch),
            lambda leader: self._remote_read(leader, key, leader_epoch),
            ReadResult,
            lambda result: result.error,
        )

    async def write(
        self,
        key: ShareStateKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> ErrorCode:
        return await self._on_coordinator(
            key,
            lambda: self._local.write(
                key,
                state_epoch=state_epoch,
                leader_epoch=leader_epoch,
                start_offset=start_offset,
                batches=batches,
            ),
            lambda leader: self._remote_write(
                leader, key, state_epoch, leader_epoch, start_offset, batches
            ),
            _same,
            _same,
        )

    async def delete(self, key: ShareStateKey) -> ErrorCode:
        return await self._on_coordinator(
            key,
            lambda: self._local.delete(key),
            lambda leader: self._remote_delete(leader, key),
            _same,
            _same,
        )

    async def _remote_delete(self, leader: int, key: ShareStateKey) -> ErrorCode:
        request = DeleteShareGroupStateRequest(
            group_id=key.group_id,
            topics=[
                DeleteShareGroupStateRequest.DeleteStateData(
                    topic_id=key.topic_id,
                    partitions=[
                        DeleteShareGroupStateRequest.PartitionData(partition=key.partition)
                    ],
                )
            ],
        )
        response = await self._send(leader, ApiKey.DELETE_SHARE_GROUP_STATE, request)
        if isinstance(response, ErrorCode):
            return response
        return _first_error(cast(DeleteShareGroupStateResponse, response).results)

    # -- requests ---------------------------------------------------------------------------

    async def _request(self, leader: int, api: ApiKey, request: Any) -> Any:
        connection = self._connections.get(leader)
        if connection is None or connection.closed:
            address = self._address_of(leader)
            if address is None:
                return None
            connection = await BrokerConnection.open(
                *address,
                node_id=leader,
                client_id=f"josefk-share-persister-{self._broker_id}",
                timeout_s=self._timeout_s,
                security=self._security,
            )
            self._connections[leader] = connection
        return await connection.request(api, request, version=0, timeout_s=self._timeout_s)

    def _drop(self, leader: int, exc: BaseException) -> None:
        logger.info("share state request to broker %d failed: %s", leader, exc)
        stale = self._connections.pop(leader, None)
        if stale is not None:
            stale.close()

    async def _send(self, leader: int, api: ApiKey, request: Any) -> Any:
        """The response, or the error code that stands for a failure to get one: a failed
        connection (dropped, so the retry opens a new one) or no address for ``leader``."""
        try:
            response = await self._request(leader, api, request)
        except Exception as exc:  # noqa: BLE001  any failure: a new connection, a retry
            self._drop(leader, exc)
            return ErrorCode.NETWORK_EXCEPTION
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if response is None else response

    async def _remote_read(self, leader: int, key: ShareStateKey, leader_epoch: int) -> ReadResult:
        request = ReadShareGroupStateRequest(
            group_id=key.group_id,
            topics=[
                ReadShareGroupStateRequest.ReadStateData(
                    topic_id=key.topic_id,
                    partitions=[
                        ReadShareGroupStateRequest.PartitionData(
                            partition=key.partition, leader_epoch=leader_epoch
                        )
                    ],
                )
            ],
        )
        answer = await self._send(leader, ApiKey.READ_SHARE_GROUP_STATE, request)
        if isinstance(answer, ErrorCode):
            return ReadResult(answer)
        response = cast(ReadShareGroupStateResponse, answer)
        for topic in response.results:
            for p in topic.partitions:
                error = ErrorCode(p.error_code)
                if error:
                    return ReadResult(error)
                if p.start_offset < 0:
                    return ReadResult(ErrorCode.NONE)
                return ReadResult(
                    ErrorCode.NONE,
                    ShareState(
                        state_epoch=p.state_epoch,
                        leader_epoch=leader_epoch,
                        start_offset=p.start_offset,
                        batches=[
                            StateBatch(
                                b.first_offset, b.last_offset, b.delivery_state, b.delivery_count
                            )
                            for b in p.state_batches
                        ],
                    ),
                )
        return ReadResult(ErrorCode.UNKNOWN_SERVER_ERROR)

    async def _remote_write(
        self,
        leader: int,
        key: ShareStateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> ErrorCode:
        request = WriteShareGroupStateRequest(
            group_id=key.group_id,
            topics=[
                WriteShareGroupStateRequest.WriteStateData(
                    topic_id=key.topic_id,
                    partitions=[
                        WriteShareGroupStateRequest.PartitionData(
                            partition=key.partition,
                            state_epoch=state_epoch,
                            leader_epoch=leader_epoch,
                            start_offset=start_offset,
                            state_batches=[
                                WriteShareGroupStateRequest.StateBatch(
                                    first_offset=b.first_offset,
                                    last_offset=b.last_offset,
                                    delivery_state=b.delivery_state,
                                    delivery_count=b.delivery_count,
                                )
                                for b in batches
                            ],
                        )
                    ],
                )
            ],
        )
        response = await self._send(leader, ApiKey.WRITE_SHARE_GROUP_STATE, request)
        if isinstance(response, ErrorCode):
            return response
        return _first_error(cast(WriteShareGroupStateResponse, response).results)

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()


def _same(code: ErrorCode) -> ErrorCode:
    return code


def _first_error(results: Sequence[Any]) -> ErrorCode:
    """The error code of the one partition a write or delete response answers for."""
    for topic in results:
        for p in topic.partitions:
            return ErrorCode(p.error_code)
    return ErrorCode.UNKNOWN_SERVER_ERROR
