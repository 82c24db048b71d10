"""KIP-932 share group membership APIs: ShareGroupHeartbeat (v1) and ShareGroupDescribe (v1).

Behavior: each handler turns the request into a call on the broker's GroupCoordinator
(``share_group_heartbeat``, ``share_group``) and its answer into the response; assigned
partitions travel by topic id, ShareGroupDescribe names each topic too. A group that is not
a share group (or does not exist) is described with GROUP_ID_NOT_FOUND, as Kafka does.

Version notes: v1 is what Kafka 4.1 and later serve (v0 was 4.0's early access); the member
generates its own id.

Authorization, as Kafka's: READ on the group for the heartbeat, DESCRIBE on the group for
the description (GROUP_AUTHORIZATION_FAILED).

Imports josefk.protocol and the group package; must not import the server or network layer.
"""

from __future__ import annotations

from typing import Any, Final

from josefk.broker.context import RequestContext
from josefk.broker.group.share import SIMPLE_ASSIGNOR, ShareHeartbeatRequest
from josefk.broker.handlers import handles
from josefk.broker.handlers.groups import client_host, coordinator_of, may_read_group
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey, response_class
from josefk.protocol.errors import ErrorCode

HEARTBEAT: Final = response_class(ApiKey.SHARE_GROUP_HEARTBEAT)
DESCRIBE: Final = response_class(ApiKey.SHARE_GROUP_DESCRIBE)


@handles(ApiKey.SHARE_GROUP_HEARTBEAT)
def handle_share_group_heartbeat(context: RequestContext, request: Any) -> Any:
    coordinator = coordinator_of(context)
    if not may_read_group(context, request.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return HEARTBEAT(error_code=error, error_message=error.message)
    if coordinator is None:
        return HEARTBEAT(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    names = request.subscribed_topic_names
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
    if result.error:
        return HEARTBEAT(
            error_code=result.error,
            error_message=result.error_message or result.error.message,
            member_id=result.member_id,
            member_epoch=result.member_epoch,
        )
    assignment = None
    if result.assignment is not None:
        assignment = HEARTBEAT.Assignment(
            topic_partitions=[
                HEARTBEAT.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(result.assignment.items())
            ]
        )
    return HEARTBEAT(
        error_code=ErrorCode.NONE,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )


@handles(ApiKey.SHARE_GROUP_DESCRIBE)
def handle_share_group_describe(context: RequestContext, request: Any) -> Any:
    coordinator = coordinator_of(context)
    with_operations = bool(request.include_authorized_operations)
    names = {} if coordinator is None else coordinator.share.topic_names()
    described = []
    for group_id in request.group_ids:
        error = ErrorCode.NONE
        group = None
        if not context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif coordinator is None:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif not group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif owner_error := coordinator.ownership_error(group_id):
            error = owner_error
        else:
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
                    else -(2**31)
                ),
            )
        )
    return DESCRIBE(groups=described)
