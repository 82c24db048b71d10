"""ReadShareGroupState (84), WriteShareGroupState (85) and DeleteShareGroupState (86), v0: the
share coordinator's inter-broker APIs (KIP-932).

Behavior: each partition of the request is a call on this broker's ``ShareCoordinator``
(``read`` / ``write``), answered per partition: NOT_COORDINATOR when this broker does not lead
the key's ``__share_group_state`` partition (the caller looks the leader up again),
FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH as the coordinator fences, COORDINATOR_NOT_AVAILABLE
when the write could not be replicated. A write is answered once its record is replicated.
A read of a share partition without state answers state epoch 0, start offset -1 and no
batches (Kafka's "no state yet").

Also FindCoordinator's share key type (``find_share_coordinator``).

Authorization, as Kafka's: CLUSTER_ACTION on the cluster (the brokers' own requests).

Imports josefk.protocol and the share coordinator; must not import the server or network layer.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Final

from josefk.broker.context import RequestContext
from josefk.broker.group.offsets_schema import coordinator_partition
from josefk.broker.handlers import handles
from josefk.broker.share.coordinator import SHARE_STATE_TOPIC, ShareCoordinator
from josefk.broker.share.records import ShareStateKey, StateBatch
from josefk.protocol.acls import AclOperation
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

READ: Final = ReadShareGroupStateResponse
WRITE: Final = WriteShareGroupStateResponse
DELETE: Final = DeleteShareGroupStateResponse
NO_STATE_OFFSET: Final = -1


def _coordinator(context: RequestContext) -> ShareCoordinator | None:
    found = context.broker.share_coordinator
    return found if isinstance(found, ShareCoordinator) else None


def _refused(context: RequestContext) -> ErrorCode:
    if not context.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if _coordinator(context) is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE


def find_share_coordinator(context: RequestContext, key: str) -> tuple[ErrorCode, int, str, int]:
    """FindCoordinator key type 2: ``group:topicId:partition`` (the topic id as Kafka prints a
    Uuid) to the leader of its ``__share_group_state`` partition; this broker on one node."""
    coordinator = _coordinator(context)
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[2].lstrip("-").isdigit():
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    node = context.broker.coordinator_placement.coordinator(
        SHARE_STATE_TOPIC,
        coordinator_partition(key, coordinator.partition_count),
        context.connection.listener_name,
    )
    if node is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return ErrorCode.NONE, node.broker_id, node.host, node.port


@handles(ApiKey.READ_SHARE_GROUP_STATE)
async def handle_read_share_group_state(
    context: RequestContext, request: ReadShareGroupStateRequest
) -> ReadShareGroupStateResponse:
    refused = _refused(context)
    coordinator = _coordinator(context)

    async def one(
        topic_id: uuid.UUID, p: ReadShareGroupStateRequest.PartitionData
    ) -> ReadShareGroupStateResponse.PartitionResult:
        if refused or coordinator is None:
            return READ.PartitionResult(
                partition=p.partition,
                error_code=refused,
                error_message=refused.message,
                state_epoch=0,
                start_offset=NO_STATE_OFFSET,
                state_batches=[],
            )
        key = ShareStateKey(request.group_id, topic_id, p.partition)
        result = await coordinator.read(key, p.leader_epoch)
        state = result.state
        return READ.PartitionResult(
            partition=p.partition,
            error_code=result.error,
            error_message=result.error.message if result.error else None,
            state_epoch=0 if state is None else state.state_epoch,
            start_offset=NO_STATE_OFFSET if state is None else state.start_offset,
            state_batches=[]
            if state is None
            else [
                READ.StateBatch(
                    first_offset=b.first_offset,
                    last_offset=b.last_offset,
                    delivery_state=b.delivery_state,
                    delivery_count=b.delivery_count,
                )
                for b in state.batches
            ],
        )

    results = []
    for topic in request.topics:
        partitions = await asyncio.gather(*(one(topic.topic_id, p) for p in topic.partitions))
        results.append(READ.ReadStateResult(topic_id=topic.topic_id, partitions=list(partitions)))
    return READ(results=results)


@handles(ApiKey.WRITE_SHARE_GROUP_STATE)
async def handle_write_share_group_state(
    context: RequestContext, request: WriteShareGroupStateRequest
) -> WriteShareGroupStateResponse:
    refused = _refused(context)
    coordinator = _coordinator(context)

    async def one(
        topic_id: uuid.UUID, p: WriteShareGroupStateRequest.PartitionData
    ) -> WriteShareGroupStateResponse.PartitionResult:
        error = refused
        if not refused and coordinator is not None:
            error = await coordinator.write(
                ShareStateKey(request.group_id, topic_id, p.partition),
                state_epoch=p.state_epoch,
                leader_epoch=p.leader_epoch,
                start_offset=p.start_offset,
                batches=[
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in p.state_batches
                ],
            )
        return WRITE.PartitionResult(
            partition=p.partition,
            error_code=error,
            error_message=error.message if error else None,
        )

    results = []
    for topic in request.topics:
        partitions = await asyncio.gather(*(one(topic.topic_id, p) for p in topic.partitions))
        results.append(WRITE.WriteStateResult(topic_id=topic.topic_id, partitions=list(partitions)))
    return WRITE(results=results)


@handles(ApiKey.DELETE_SHARE_GROUP_STATE)
async def handle_delete_share_group_state(
    context: RequestContext, request: DeleteShareGroupStateRequest
) -> DeleteShareGroupStateResponse:
    refused = _refused(context)
    coordinator = _coordinator(context)

    async def one(
        topic_id: uuid.UUID, p: DeleteShareGroupStateRequest.PartitionData
    ) -> DeleteShareGroupStateResponse.PartitionResult:
        error = refused
        if not refused and coordinator is not None:
            error = await coordinator.delete(ShareStateKey(request.group_id, topic_id, p.partition))
        return DELETE.PartitionResult(
            partition=p.partition, error_code=error, error_message=error.message if error else None
        )

    results = []
    for topic in request.topics:
        partitions = await asyncio.gather(*(one(topic.topic_id, p) for p in topic.partitions))
        results.append(
            DELETE.DeleteStateResult(topic_id=topic.topic_id, partitions=list(partitions))
        )
    return DELETE(results=results)
