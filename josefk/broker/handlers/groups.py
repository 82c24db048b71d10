"""Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups, DeleteGroups.

Each handler turns a request of any version into a call on the broker's GroupCoordinator and
its answer into the response shape of that version. The single node coordinates every
group; in a cluster, the leader of a group's ``__consumer_offsets`` partition does.
FindCoordinator for a transactional id (key type 1) is answered by
``transactions.find_transaction_coordinator``. Share coordinators get
COORDINATOR_NOT_AVAILABLE. ``wait_replicated`` is the wait of every handler whose coordinator
call appended to ``__consumer_offsets`` (SyncGroup here, OffsetCommit and TxnOffsetCommit): in
a cluster the answer, and what the coordinator shows others, waits for the in-sync replicas.
``member_heartbeat_response`` is that wait and the answer of the KIP-848 and KIP-932
heartbeats (consumer_groups, share_groups), whose responses have the same shape.

Authorization, as Kafka's: READ on the group for JoinGroup, SyncGroup, Heartbeat and
LeaveGroup; DESCRIBE on the group (or transactional id) for FindCoordinator and
DescribeGroups; DELETE for DeleteGroups (GROUP_AUTHORIZATION_FAILED per group); ListGroups
lists every group with DESCRIBE on the cluster, else the groups the principal may DESCRIBE.

Imports josefk.protocol, the group package and the replica errors of josefk.broker.partition;
must not import the server or network layer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, TypeVar

from josefk.broker.context import RequestContext
from josefk.broker.group.consumer import HeartbeatResult
from josefk.broker.group.coordinator import GroupCoordinator, JoinRequest
from josefk.broker.group.group import JoinResult
from josefk.broker.group.share import ShareHeartbeatResult
from josefk.broker.group.store import OFFSETS_TOPIC
from josefk.broker.handlers import handles
from josefk.broker.handlers.share_state import find_share_coordinator
from josefk.broker.handlers.transactions import find_transaction_coordinator
from josefk.broker.parking import request_parked
from josefk.broker.partition import RequestTimedOutError
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ShareGroupHeartbeatResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

FIND_COORDINATOR: Final = FindCoordinatorResponse
JOIN_GROUP: Final = JoinGroupResponse
SYNC_GROUP: Final = SyncGroupResponse
HEARTBEAT: Final = HeartbeatResponse
LEAVE_GROUP: Final = LeaveGroupResponse
DESCRIBE_GROUPS: Final = DescribeGroupsResponse
LIST_GROUPS: Final = ListGroupsResponse
DELETE_GROUPS: Final = DeleteGroupsResponse

GROUP_KEY_TYPE: Final = 0
TRANSACTION_KEY_TYPE: Final = 1
SHARE_KEY_TYPE: Final = 2
CLASSIC_GROUP_TYPE: Final = "classic"


def coordinator_of(context: RequestContext) -> GroupCoordinator | None:
    coordinator = context.broker.group_coordinator
    return coordinator if isinstance(coordinator, GroupCoordinator) else None


def client_host(context: RequestContext) -> str:
    """Kafka reports the client's address as Java prints an InetAddress: ``/host``."""
    peer = context.connection.peer
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


def may_read_group(context: RequestContext, group_id: str) -> bool:
    """READ on the group: what every group membership API (and OffsetCommit) needs."""
    return context.authorize(AclOperation.READ, ResourceType.GROUP, group_id)


def subscription_refusal(context: RequestContext, names: Iterable[str] | None) -> str | None:
    """For a KIP-848 or share-group heartbeat: why its subscription is refused
    (TOPIC_AUTHORIZATION_FAILED), naming the subscribed topics the member may not DESCRIBE,
    or None when it may describe them all. Kafka refuses the whole heartbeat so, before the
    group is touched: a member learns nothing of a topic it may not see."""
    denied = sorted(
        {
            name
            for name in names or ()
            if not context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        }
    )
    return f"Topic authorization failed for topics {denied}" if denied else None


def group_lookup_error(
    context: RequestContext,
    coordinator: GroupCoordinator | None,
    group_id: str,
    operation: AclOperation,
    *,
    check_id: bool = True,
) -> ErrorCode:
    """What a group API answers for ``group_id`` before it looks the group up:
    GROUP_AUTHORIZATION_FAILED without ``operation`` on the group, COORDINATOR_NOT_AVAILABLE
    without a coordinator, INVALID_GROUP_ID for an empty id (when ``check_id``),
    NOT_COORDINATOR for a group another broker coordinates; NONE to go on."""
    if not context.authorize(operation, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if check_id and not group_id:
        return ErrorCode.INVALID_GROUP_ID
    return coordinator.ownership_error(group_id)


# -- FindCoordinator ----------------------------------------------------------------------


@handles(ApiKey.FIND_COORDINATOR)
def handle_find_coordinator(
    context: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    coordinator = coordinator_of(context)
    placement = context.broker.coordinator_placement
    listener = context.connection.listener_name

    def answer(key_type: int, key: str) -> tuple[ErrorCode, int, str, int]:
        if key_type == TRANSACTION_KEY_TYPE:
            if not context.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
                return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, "", -1
            return find_transaction_coordinator(context, key)
        if key_type == SHARE_KEY_TYPE:
            # KIP-932: a share partition's coordinator (handlers/share_state.py).
            if not context.authorize_cluster(AclOperation.CLUSTER_ACTION):
                return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1, "", -1
            return find_share_coordinator(context, key)
        if key_type == GROUP_KEY_TYPE and not context.authorize(
            AclOperation.DESCRIBE, ResourceType.GROUP, key
        ):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, -1, "", -1
        if key_type != GROUP_KEY_TYPE or coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        # This broker on a single node; in a cluster the leader of the group's
        # __consumer_offsets partition, as in Kafka.
        node = placement.coordinator(OFFSETS_TOPIC, coordinator.partition_for(key), listener)
        if node is None:
            # Not created yet (fewer live brokers than offsets.topic.replication.factor),
            # or the partition has no leader right now: the client retries.
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return ErrorCode.NONE, node.broker_id, node.host, node.port

    key_type = request.key_type
    if key_type not in (0, 1, 2):
        key_type = -1
    if context.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, node, host, port = answer(key_type, key)
            if key_type == GROUP_KEY_TYPE and not key:
                error, node, host, port = ErrorCode.INVALID_REQUEST, -1, "", -1
            coordinators.append(
                FIND_COORDINATOR.Coordinator(
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=error.message if error else None,
                )
            )
        return FIND_COORDINATOR(coordinators=coordinators)
    error, node, host, port = answer(key_type, request.key)
    return FIND_COORDINATOR(
        error_code=error,
        error_message=error.message if error else None,
        node_id=node,
        host=host,
        port=port,
    )


# -- JoinGroup ----------------------------------------------------------------------------


def _join_response(result: JoinResult, version: int) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return JOIN_GROUP(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment and version >= 9,
        member_id=result.member_id,
        members=[
            JOIN_GROUP.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )


@handles(ApiKey.JOIN_GROUP)
async def handle_join_group(
    context: RequestContext, request: JoinGroupRequest
) -> JoinGroupResponse:
    version = context.api_version
    coordinator = coordinator_of(context)
    if not may_read_group(context, request.group_id):
        return _join_response(
            JoinResult(ErrorCode.GROUP_AUTHORIZATION_FAILED, request.member_id), version
        )
    if coordinator is None:
        return _join_response(
            JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id), version
        )
    rebalance_timeout = request.rebalance_timeout_ms if version >= 1 else -1
    if rebalance_timeout < 0:
        rebalance_timeout = request.session_timeout_ms
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=context.header.client_id or "",
        client_host=client_host(context),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    )
    # A join waits for the rest of the group (Kafka's join purgatory): it does not count
    # against queued.max.requests meanwhile, nor does a SyncGroup waiting for the leader.
    request_parked()
    result = await coordinator.join_group(join)
    return _join_response(result, version)


# -- SyncGroup ----------------------------------------------------------------------------


async def wait_replicated(
    context: RequestContext, coordinator: GroupCoordinator
) -> BaseException | None:
    """Wait until the offsets topic's in-sync replicas hold the appends of the coordinator
    call just made (none on the single node, where nothing waits), within
    offsets.commit.timeout.ms, then hand them back to the coordinator, which applies or
    drops what they carry (``appends_settled``). Returns the first failure, None when all
    were replicated. Call it right after that coordinator call, nothing awaited between."""
    appends = coordinator.take_appends()
    if not appends:
        return None
    replicas = context.broker.replica_manager
    try:
        await replicas.wait_for_acks(appends, context.broker.config.offsets_commit_timeout_ms)
    finally:
        # A wait cut short (the request cancelled as its connection went) settles as a
        # failure, as a timeout does: the client, which got no answer, tries again.
        for append in appends:
            if append.error is None and replicas.must_wait_for_acks([append]):
                append.error = RequestTimedOutError("the wait for the in-sync replicas ended")
        coordinator.appends_settled(appends)
    return next((a.error for a in appends if a.error is not None), None)


# The KIP-848 and KIP-932 heartbeats answer in the same shape.
_MemberHeartbeatResponse = TypeVar(
    "_MemberHeartbeatResponse", ConsumerGroupHeartbeatResponse, ShareGroupHeartbeatResponse
)


async def member_heartbeat_response(
    context: RequestContext,
    coordinator: GroupCoordinator,
    group_id: str,
    result: HeartbeatResult | ShareHeartbeatResult,
    response: type[_MemberHeartbeatResponse],
) -> _MemberHeartbeatResponse:
    """The answer to a ConsumerGroupHeartbeat or ShareGroupHeartbeat whose coordinator call
    returned ``result``: once its records are replicated (``wait_replicated``, so call it
    right after that coordinator call), the result's error or the member's epoch and, when it
    changed, its assignment."""
    # The group's records are answered for once the offsets topic's replicas hold them.
    replication_error = await wait_replicated(context, coordinator)
    if replication_error is not None and not result.error:
        error = (
            ErrorCode.NOT_COORDINATOR
            if coordinator.ownership_error(group_id)
            else ErrorCode.COORDINATOR_NOT_AVAILABLE
        )
        return response(error_code=error, error_message=str(replication_error))
    if result.error:
        return response(
            error_code=result.error,
            error_message=result.error_message or result.error.message,
            member_id=result.member_id,
            member_epoch=result.member_epoch,
        )
    assignment = None
    if result.assignment is not None:
        assignment = response.Assignment(
            topic_partitions=[
                response.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(result.assignment.items())
            ]
        )
    return response(
        error_code=ErrorCode.NONE,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )


@handles(ApiKey.SYNC_GROUP)
async def handle_sync_group(
    context: RequestContext, request: SyncGroupRequest
) -> SyncGroupResponse:
    version = context.api_version
    coordinator = coordinator_of(context)
    if not may_read_group(context, request.group_id):
        return SYNC_GROUP(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    if coordinator is None:
        return SYNC_GROUP(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, assignment=b"")
    future = coordinator.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id if version >= 3 else None,
        {a.member_id: bytes(a.assignment) for a in request.assignments},
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
    )
    # The leader's assignment completes the rebalance only once replicated.
    await wait_replicated(context, coordinator)
    if not future.done():
        request_parked()
    result = await future
    return SYNC_GROUP(
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


# -- Heartbeat, LeaveGroup ----------------------------------------------------------------


@handles(ApiKey.HEARTBEAT)
def handle_heartbeat(context: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    coordinator = coordinator_of(context)
    if not may_read_group(context, request.group_id):
        return HEARTBEAT(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if coordinator is None:
        return HEARTBEAT(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    error = coordinator.heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id if context.api_version >= 3 else None,
    )
    return HEARTBEAT(error_code=error)


@handles(ApiKey.LEAVE_GROUP)
def handle_leave_group(context: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    version = context.api_version
    coordinator = coordinator_of(context)
    if version >= 3:
        identities = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        identities = [(request.member_id, None)]
    if not may_read_group(context, request.group_id):
        top, errors = ErrorCode.GROUP_AUTHORIZATION_FAILED, [ErrorCode.NONE] * len(identities)
    elif coordinator is None:
        top, errors = ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.NONE] * len(identities)
    else:
        top, errors = coordinator.leave_group(request.group_id, identities)
    if version < 3:
        return LEAVE_GROUP(error_code=top or errors[0])
    return LEAVE_GROUP(
        error_code=top,
        members=[
            LEAVE_GROUP.MemberResponse(
                member_id=member_id, group_instance_id=instance_id, error_code=error
            )
            for (member_id, instance_id), error in zip(identities, errors, strict=True)
        ]
        if not top
        else [],
    )


# -- DescribeGroups, ListGroups, DeleteGroups ---------------------------------------------


@handles(ApiKey.DESCRIBE_GROUPS)
def handle_describe_groups(
    context: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    version = context.api_version
    coordinator = coordinator_of(context)
    with_operations = version >= 3 and request.include_authorized_operations
    described = []
    for group_id in request.groups:
        if not context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
            described.append(
                DESCRIBE_GROUPS.DescribedGroup(
                    error_code=error,
                    error_message=error.message,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )
            )
            continue
        owner_error = (
            ErrorCode.NONE if coordinator is None else coordinator.ownership_error(group_id)
        )
        description = (
            None if coordinator is None or owner_error else coordinator.describe_group(group_id)
        )
        if coordinator is None:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif owner_error:
            error = owner_error
        elif not group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif description is None and version >= 6:
            error = ErrorCode.GROUP_ID_NOT_FOUND
        else:
            error = ErrorCode.NONE
        # Kafka fills in the authorized operations only of the groups answered without error.
        operations = (
            context.authorized_operations(ResourceType.GROUP, group_id)
            if with_operations and not error
            else -(2**31)
        )
        if description is None:
            if error is ErrorCode.GROUP_ID_NOT_FOUND and coordinator is not None:
                message: str | None = coordinator.describe_group_miss(group_id)
            else:
                message = error.message if error else None
            described.append(
                DESCRIBE_GROUPS.DescribedGroup(
                    error_code=error,
                    error_message=message,
                    group_id=group_id,
                    group_state="Dead",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                    authorized_operations=operations,
                )
            )
            continue
        described.append(
            DESCRIBE_GROUPS.DescribedGroup(
                error_code=ErrorCode.NONE,
                group_id=group_id,
                group_state=description.state,
                protocol_type=description.protocol_type,
                protocol_data=description.protocol_name,
                members=[
                    DESCRIBE_GROUPS.DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in description.members
                ],
                authorized_operations=operations,
            )
        )
    return DESCRIBE_GROUPS(groups=described)


@handles(ApiKey.LIST_GROUPS)
def handle_list_groups(context: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    coordinator = coordinator_of(context)
    if coordinator is None:
        return LIST_GROUPS(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    version = context.api_version
    states = {s.lower() for s in request.states_filter} if version >= 4 else set()
    types = {t.lower() for t in request.types_filter} if version >= 5 else set()
    # Kafka: DESCRIBE on the cluster lists every group, else those the principal may DESCRIBE.
    every = context.broker.authorizer is None or context.authorize_cluster(AclOperation.DESCRIBE)
    return LIST_GROUPS(
        groups=[
            LIST_GROUPS.ListedGroup(
                group_id=listing.group_id,
                protocol_type=listing.protocol_type,
                group_state=listing.state,
                group_type=listing.group_type,
            )
            for listing in coordinator.list_groups()
            if (not states or listing.state.lower() in states)
            and (not types or listing.group_type in types)
            and (
                every
                or context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, listing.group_id)
            )
        ]
    )


@handles(ApiKey.DELETE_GROUPS)
def handle_delete_groups(
    context: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    coordinator = coordinator_of(context)
    names = list(request.groups_names)
    allowed = context.authorized_names(AclOperation.DELETE, ResourceType.GROUP, names)
    if coordinator is None:
        errors = [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(names)
    else:
        deleted = iter(coordinator.delete_groups([n for n in names if n in allowed]))
        errors = [
            next(deleted) if name in allowed else ErrorCode.GROUP_AUTHORIZATION_FAILED
            for name in names
        ]
    return DELETE_GROUPS(
        results=[
            DELETE_GROUPS.DeletableGroupResult(group_id=name, error_code=error)
            for name, error in zip(names, errors, strict=True)
        ]
    )
