"""KIP-848 consumer group APIs: ConsumerGroupHeartbeat (v0-1) and ConsumerGroupDescribe (v0-1).

Behavior: each handler turns the request into a call on the broker's GroupCoordinator
(``consumer_group_heartbeat``, ``describe_consumer_group``) and its answer into the response.
The heartbeat's owned and assigned partitions travel by topic id; ConsumerGroupDescribe names
each topic too. A group that is not a consumer group (or does not exist) is described with
GROUP_ID_NOT_FOUND, as Kafka does.

Version notes: ConsumerGroupHeartbeat v1 (KIP-1082) has the client generate its member id
(an empty one is INVALID_REQUEST) and adds SubscribedTopicRegex; v0 lets the coordinator
make the id. ConsumerGroupDescribe v1 adds the member type (KIP-1099): 1 for a member of the
consumer protocol, 0 for a classic member a consumer group holds during an online migration.

The per-group error chain before the group is looked at (authorization, no coordinator, an
empty group id, a group another broker coordinates) is ``groups.group_lookup_error``, shared
with the share group handlers; so is the heartbeat's answer once the coordinator was called
(``groups.member_heartbeat_response``).

In a cluster the heartbeat is answered once the group's records in ``__consumer_offsets``
are replicated (COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR when they are not).

Authorization, as Kafka's: READ on the group for the heartbeat, DESCRIBE on the group for
the description (GROUP_AUTHORIZATION_FAILED); a heartbeat subscribing by name to a topic the
member may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED whole, the group untouched
(``groups.subscription_refusal``, shared with the share groups' heartbeat).

Imports josefk.protocol and the group package; must not import the server or network layer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Final

from josefk.broker.context import RequestContext
from josefk.broker.group.consumer import HeartbeatRequest
from josefk.broker.group.coordinator import ConsumerMemberDescription
from josefk.broker.handlers import handles
from josefk.broker.handlers.groups import (
    client_host,
    coordinator_of,
    group_lookup_error,
    member_heartbeat_response,
    subscription_refusal,
)
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

HEARTBEAT: Final = ConsumerGroupHeartbeatResponse
DESCRIBE: Final = ConsumerGroupDescribeResponse

CLASSIC_MEMBER_TYPE: Final = 0
CONSUMER_MEMBER_TYPE: Final = 1
NO_AUTHORIZED_OPERATIONS: Final = -(2**31)


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT)
async def handle_consumer_group_heartbeat(
    context: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    coordinator = coordinator_of(context)
    # The coordinator answers an empty group id (INVALID_REQUEST) and ownership itself.
    error = group_lookup_error(
        context, coordinator, request.group_id, AclOperation.READ, check_id=False
    )
    if error is ErrorCode.GROUP_AUTHORIZATION_FAILED:
        return HEARTBEAT(error_code=error, error_message=error.message)
    if coordinator is None:
        return HEARTBEAT(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    owned = (
        None
        if request.topic_partitions is None
        else {t.topic_id: frozenset(t.partitions) for t in request.topic_partitions}
    )
    names = request.subscribed_topic_names
    if refusal := subscription_refusal(context, names):
        return HEARTBEAT(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=refusal)
    result = coordinator.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=None if names is None else tuple(names),
            subscribed_topic_regex=(
                request.subscribed_topic_regex if context.api_version >= 1 else None
            ),
            server_assignor=request.server_assignor,
            owned=owned,
            client_id=context.header.client_id or "",
            client_host=client_host(context),
            api_version=context.api_version,
        )
    )
    return await member_heartbeat_response(
        context, coordinator, request.group_id, result, HEARTBEAT
    )


def _assignment(
    parts: Iterable[tuple[uuid.UUID, str, list[int]]],
) -> ConsumerGroupDescribeResponse.Assignment:
    return DESCRIBE.Assignment(
        topic_partitions=[
            DESCRIBE.TopicPartitions(topic_id=topic_id, topic_name=name, partitions=partitions)
            for topic_id, name, partitions in parts
        ]
    )


def _member(m: ConsumerMemberDescription) -> ConsumerGroupDescribeResponse.Member:
    return DESCRIBE.Member(
        member_id=m.member_id,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        member_epoch=m.member_epoch,
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex,
        assignment=_assignment(m.assignment),
        target_assignment=_assignment(m.target_assignment),
        member_type=CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
    )


def _not_described(group_id: str, error: ErrorCode) -> ConsumerGroupDescribeResponse.DescribedGroup:
    message = f"Group {group_id} not found." if error is ErrorCode.GROUP_ID_NOT_FOUND else None
    return DESCRIBE.DescribedGroup(
        error_code=error,
        error_message=message or error.message,
        group_id=group_id,
        group_state="",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=[],
    )


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE)
def handle_consumer_group_describe(
    context: RequestContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    coordinator = coordinator_of(context)
    with_operations = bool(request.include_authorized_operations)
    described = []
    for group_id in request.group_ids:
        error = group_lookup_error(context, coordinator, group_id, AclOperation.DESCRIBE)
        description = None
        if not error and coordinator is not None:
            description = coordinator.describe_consumer_group(group_id)
        if description is None:
            described.append(_not_described(group_id, error or ErrorCode.GROUP_ID_NOT_FOUND))
            continue
        described.append(
            DESCRIBE.DescribedGroup(
                error_code=ErrorCode.NONE,
                group_id=group_id,
                group_state=description.state,
                group_epoch=description.group_epoch,
                assignment_epoch=description.assignment_epoch,
                assignor_name=description.assignor_name,
                members=[_member(m) for m in description.members],
                authorized_operations=(
                    context.authorized_operations(ResourceType.GROUP, group_id)
                    if with_operations
                    else NO_AUTHORIZED_OPERATIONS
                ),
            )
        )
    return DESCRIBE(groups=described)
