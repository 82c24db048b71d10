"""AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), v0: operators' changes to a
share group's share-partition state (KIP-932), on the group's coordinator.

Behavior, as Kafka's: the group must be empty (NON_EMPTY_GROUP, top level); a group id held by
a classic or consumer group is GROUP_ID_NOT_FOUND; AlterShareGroupOffsets on an id no group has
makes an empty share group (as Kafka does, so that offsets can be set before any member
joins). Alter writes, per partition, a new state (the next state epoch, the given start
offset, nothing in flight) to the share coordinator (``SharePartitionManager.reset``); a leader
still holding the old state is fenced by the state epoch at its next write and reads the new
one. A start offset below 0 is INVALID_REQUEST; an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION. Delete forgets the state of every partition of each topic (the
group then starts them afresh, by ``share.auto.offset.reset``).

Authorization, as Kafka's table: READ on the group (Alter) or DELETE on the group (Delete)
(GROUP_AUTHORIZATION_FAILED, top level), and READ on each topic (TOPIC_AUTHORIZATION_FAILED).

Imports josefk.protocol, the group coordinator's share groups and the share partition manager;
must not import the server or network layer.
"""

from __future__ import annotations

import asyncio
from typing import Final

from josefk.broker.catalog import TopicInfo
from josefk.broker.context import RequestContext
from josefk.broker.handlers import handles
from josefk.broker.handlers.groups import coordinator_of
from josefk.broker.partition import TopicPartition
from josefk.broker.share.manager import SharePartitionManager
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from josefk.protocol.types import ZERO_UUID

ALTER: Final = AlterShareGroupOffsetsResponse
DELETE: Final = DeleteShareGroupOffsetsResponse


def _group_error(
    context: RequestContext, group_id: str, operation: AclOperation, *, create: bool
) -> ErrorCode:
    """The group's error, or NONE when it is an empty share group (made when ``create``)."""
    coordinator = coordinator_of(context)
    if not context.authorize(operation, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    if coordinator is None or not isinstance(
        context.broker.share_partitions, SharePartitionManager
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error := coordinator.ownership_error(group_id):
        return error
    group = (
        coordinator.ensure_share_group(group_id) if create else coordinator.share_group(group_id)
    )
    if group is None:
        return ErrorCode.GROUP_ID_NOT_FOUND
    if not group.is_empty:
        return ErrorCode.NON_EMPTY_GROUP
    return ErrorCode.NONE


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
async def handle_alter_share_group_offsets(
    context: RequestContext, request: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    group_id = request.group_id
    error = _group_error(context, group_id, AclOperation.READ, create=True)
    coordinator = coordinator_of(context)
    catalog = context.broker.replica_manager.catalog
    manager = context.broker.share_partitions
    topics = []
    for topic in request.topics:
        info = catalog.get(topic.topic_name)
        readable = context.authorize(AclOperation.READ, ResourceType.TOPIC, topic.topic_name)

        async def one(
            p: AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition,
            info: TopicInfo | None = info,
            readable: bool = readable,
        ) -> AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponsePartition:
            code = error
            # (Without a manager _group_error answered COORDINATOR_NOT_AVAILABLE.)
            if not code and manager is not None:
                if not readable:
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif info is None or not 0 <= p.partition_index < info.partitions:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.start_offset < 0:
                    code = ErrorCode.INVALID_REQUEST
                else:
                    code = await manager.reset(
                        group_id,
                        TopicPartition(info.name, p.partition_index),
                        info.topic_id,
                        p.start_offset,
                    )
                    if not code and coordinator is not None:
                        # The group has share state in this topic now: DescribeShareGroupOffsets
                        # of all topics lists it, DeleteGroups deletes it (also after a
                        # restart: ShareGroupStatePartitionMetadata).
                        coordinator.share.topic_initialized(
                            group_id, info.topic_id, info.name, p.partition_index
                        )
            return ALTER.AlterShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index,
                error_code=code,
                error_message=code.message if code else None,
            )

        partitions = await asyncio.gather(*(one(p) for p in topic.partitions))
        topics.append(
            ALTER.AlterShareGroupOffsetsResponseTopic(
                topic_name=topic.topic_name,
                topic_id=ZERO_UUID if info is None else info.topic_id,
                partitions=list(partitions),
            )
        )
    return ALTER(
        throttle_time_ms=0,
        error_code=error,
        error_message=error.message if error else None,
        responses=topics,
    )


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
async def handle_delete_share_group_offsets(
    context: RequestContext, request: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    group_id = request.group_id
    error = _group_error(context, group_id, AclOperation.DELETE, create=False)
    coordinator = coordinator_of(context)
    catalog = context.broker.replica_manager.catalog
    manager = context.broker.share_partitions
    topics = []
    for topic in request.topics:
        info = catalog.get(topic.topic_name)
        code = error
        # (Without a manager _group_error answered COORDINATOR_NOT_AVAILABLE.)
        if not code and manager is not None:
            if not context.authorize(AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                errors = await asyncio.gather(
                    *(
                        manager.delete_state(group_id, TopicPartition(info.name, i), info.topic_id)
                        for i in range(info.partitions)
                    )
                )
                code = next((e for e in errors if e), ErrorCode.NONE)
                if not code and coordinator is not None:
                    coordinator.share.topic_deleted(group_id, info.topic_id, info.name)
        topics.append(
            DELETE.DeleteShareGroupOffsetsResponseTopic(
                topic_name=topic.topic_name,
                topic_id=ZERO_UUID if info is None else info.topic_id,
                error_code=code,
                error_message=code.message if code else None,
            )
        )
    return DELETE(
        throttle_time_ms=0,
        error_code=error,
        error_message=error.message if error else None,
        responses=topics,
    )
