"""KIP-932 share group APIs of the coordinator: ShareGroupHeartbeat (v1), ShareGroupDescribe
(v1) and DescribeShareGroupOffsets (v0-1).

Behavior: each handler turns the request into a call on the broker's GroupCoordinator
(``share_group_heartbeat``, ``share_group``) and its answer into the response; assigned
partitions travel by topic id, ShareGroupDescribe names each topic too. A group that is not
a share group (or does not exist) is described with GROUP_ID_NOT_FOUND, as Kafka does.

Version notes: v1 is what Kafka 4.1 and later serve (v0 was 4.0's early access); the member
generates its own id.

DescribeShareGroupOffsets answers each partition's share-partition start offset (-1 when the
group has no share state for it) and, from v1, its lag: from the share partition when this
broker holds it, else from the state its share coordinator keeps (start offset and settled
batches against the high watermark; -1 where this broker has no replica of the partition).

Authorization, as Kafka's: READ on the group for the heartbeat (and DESCRIBE on every topic
it subscribes to: TOPIC_AUTHORIZATION_FAILED), DESCRIBE on the group for
the description and the offsets (GROUP_AUTHORIZATION_FAILED), and DESCRIBE on each topic for
the offsets (TOPIC_AUTHORIZATION_FAILED).

Imports josefk.protocol and the group package; must not import the server or network layer.
"""

from __future__ import annotations

from typing import Final

from josefk.broker.context import RequestContext
from josefk.broker.group.share import SIMPLE_ASSIGNOR, ShareHeartbeatRequest
from josefk.broker.handlers import handles
from josefk.broker.handlers.groups import (
    client_host,
    coordinator_of,
    group_lookup_error,
    member_heartbeat_response,
    subscription_refusal,
)
from josefk.broker.partition import TopicPartition
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from josefk.protocol.types import ZERO_UUID

HEARTBEAT: Final = ShareGroupHeartbeatResponse
DESCRIBE: Final = ShareGroupDescribeResponse
OFFSETS: Final = DescribeShareGroupOffsetsResponse
NO_AUTHORIZED_OPERATIONS: Final = -(2**31)


@handles(ApiKey.SHARE_GROUP_HEARTBEAT)
async def handle_share_group_heartbeat(
    context: RequestContext, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    coordinator = coordinator_of(context)
    # The coordinator answers an empty group id and ownership itself.
    error = group_lookup_error(
        context, coordinator, request.group_id, AclOperation.READ, check_id=False
    )
    if error is ErrorCode.GROUP_AUTHORIZATION_FAILED:
        return HEARTBEAT(error_code=error, error_message=error.message)
    if coordinator is None:
        return HEARTBEAT(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    names = request.subscribed_topic_names
    if refusal := subscription_refusal(context, names):
        return HEARTBEAT(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=refusal)
    result = coordinator.share_group_heartbeat(
        ShareHeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            rack_id=request.rack_id,
            subscribed_topic_names=None if names is None else tuple(names),
            client_id=context.header.client_id or "",
            client_host=client_host(context),
        )
    )
    return await member_heartbeat_response(
        context, coordinator, request.group_id, result, HEARTBEAT
    )


@handles(ApiKey.SHARE_GROUP_DESCRIBE)
def handle_share_group_describe(
    context: RequestContext, request: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    coordinator = coordinator_of(context)
    with_operations = bool(request.include_authorized_operations)
    names = {} if coordinator is None else coordinator.share.topic_names()
    described = []
    for group_id in request.group_ids:
        group = None
        error = group_lookup_error(context, coordinator, group_id, AclOperation.DESCRIBE)
        if not error and coordinator is not None:
            group = coordinator.share_group(group_id)
            if group is None:
                error = ErrorCode.GROUP_ID_NOT_FOUND
        if group is None:
            message = (
                f"Group {group_id} not found." if error is ErrorCode.GROUP_ID_NOT_FOUND else None
            )
            described.append(
                DESCRIBE.DescribedGroup(
                    error_code=error,
                    error_message=message or error.message,
                    group_id=group_id,
                    group_state="Dead",
                    group_epoch=-1,
                    assignment_epoch=-1,
                    assignor_name="",
                    members=[],
                )
            )
            continue
        described.append(
            DESCRIBE.DescribedGroup(
                error_code=ErrorCode.NONE,
                group_id=group_id,
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=SIMPLE_ASSIGNOR,
                members=[
                    DESCRIBE.Member(
                        member_id=m.member_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        assignment=DESCRIBE.Assignment(
                            topic_partitions=[
                                DESCRIBE.TopicPartitions(
                                    topic_id=topic_id,
                                    topic_name=names.get(topic_id, ""),
                                    partitions=sorted(partitions),
                                )
                                for topic_id, partitions in sorted(m.assignment.items())
                            ]
                        ),
                    )
                    for m in group.members.values()
                ],
                authorized_operations=(
                    context.authorized_operations(ResourceType.GROUP, group_id)
                    if with_operations
                    else NO_AUTHORIZED_OPERATIONS
                ),
            )
        )
    return DESCRIBE(groups=described)


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
async def handle_describe_share_group_offsets(
    context: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    coordinator = coordinator_of(context)
    manager = context.broker.share_partitions
    replicas = context.broker.replica_manager
    groups = []
    for wanted in request.groups:
        group_id = wanted.group_id
        # Without a share partition manager there is no coordinator of share groups either.
        error = group_lookup_error(
            context,
            None if manager is None else coordinator,
            group_id,
            AclOperation.DESCRIBE,
            check_id=False,
        )
        if not error and coordinator is not None and coordinator.share_group(group_id) is None:
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error or manager is None:
            groups.append(
                OFFSETS.DescribeShareGroupOffsetsResponseGroup(
                    group_id=group_id, topics=[], error_code=error, error_message=error.message
                )
            )
            continue
        held = manager.of_group(group_id)
        group = None if coordinator is None else coordinator.share_group(group_id)
        asked: dict[str, list[int]] = {}
        if wanted.topics is None:
            # Every partition with share state: those held here, and those of the topics
            # the group read (their state is at their share coordinators).
            names = {tp.topic for tp in held} | (set() if group is None else group.topics)
            for name in sorted(names):
                info = replicas.catalog.get(name)
                if info is not None:
                    asked[name] = list(range(info.partitions))
        else:
            for t in wanted.topics:
                asked.setdefault(t.topic_name, []).extend(t.partitions)
        topics = []
        for name, partitions in asked.items():
            info = replicas.catalog.get(name)
            denied = not context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            entries = []
            for index in partitions:
                code = (
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if denied
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if info is None
                    else ErrorCode.NONE
                )
                sp = None if code else held.get(TopicPartition(name, index))
                partition = None if code else replicas.get_partition(name, index)
                start, lag, epoch = -1, -1, -1
                if sp is not None:
                    start = sp.start_offset
                    if partition is not None:
                        lag = sp.lag(partition.log.high_watermark)
                        epoch = partition.leader_epoch
                elif not code and info is not None:
                    # Not held here (no session reads it now): the share coordinator's
                    # state, and the lag it implies where this broker has the log.
                    read = await manager.read_state(
                        group_id, TopicPartition(name, index), info.topic_id
                    )
                    if read.state is not None:
                        start = read.state.start_offset
                        if partition is not None:
                            lag = read.state.lag(partition.log.high_watermark)
                entries.append(
                    OFFSETS.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=index,
                        start_offset=start,
                        leader_epoch=epoch,
                        lag=lag,
                        error_code=code,
                        error_message=code.message if code else None,
                    )
                )
            topics.append(
                OFFSETS.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name,
                    topic_id=info.topic_id if info is not None else ZERO_UUID,
                    partitions=entries,
                )
            )
        groups.append(
            OFFSETS.DescribeShareGroupOffsetsResponseGroup(
                group_id=group_id, topics=topics, error_code=ErrorCode.NONE
            )
        )
    return OFFSETS(groups=groups)
