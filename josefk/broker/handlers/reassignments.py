"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): moving replicas.

Both are the controller's (KIP-455): a broker that is not the controller answers
NOT_CONTROLLER and the client finds the controller in Metadata. Alter starts a move per
partition (the controller writes target + leaving replicas; the new replicas catch up, join
the ISR, then the old ones leave and delete their copies) or cancels one (null replicas),
answering as soon as the move has started, as Kafka does. List answers from the controller's
view of etcd. The single node has one broker and nothing to move: every target other than
its own id is INVALID_REPLICA_ASSIGNMENT, and nothing is ever in progress.

Imports josefk.cluster's errors (the cluster node only for its type); must not import the network
layer.
"""

from __future__ import annotations

from typing import Final

from josefk.broker.context import RequestContext
from josefk.broker.handlers import handles
from josefk.cluster.errors import (
    ControllerFencedError,
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicError,
)
from josefk.cluster.placement import InvalidReplicationFactorError
from josefk.cluster.reassignment import ReassignmentError
from josefk.protocol.acls import AclOperation
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

ALTER: Final = AlterPartitionReassignmentsResponse
LIST: Final = ListPartitionReassignmentsResponse

_ERRORS: Final[list[tuple[type[Exception], ErrorCode]]] = [
    (UnknownTopicError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (NoReassignmentInProgressError, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
    (InvalidReplicaAssignmentError, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (InvalidReplicationFactorError, ErrorCode.INVALID_REPLICATION_FACTOR),
    (ReassignmentError, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
]


def _code(exc: Exception | None) -> ErrorCode:
    if exc is None:
        return ErrorCode.NONE
    for kind, code in _ERRORS:
        if isinstance(exc, kind):
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _alter_answer(
    request: AlterPartitionReassignmentsRequest,
    results: dict[tuple[str, int], Exception | None],
    top: ErrorCode = ErrorCode.NONE,
) -> AlterPartitionReassignmentsResponse:
    by_topic: dict[str, list[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse]]
    by_topic = {}
    for (topic, partition), exc in results.items():
        code = _code(exc)
        by_topic.setdefault(topic, []).append(
            ALTER.ReassignableTopicResponse.ReassignablePartitionResponse(
                partition_index=partition,
                error_code=code,
                error_message=None if exc is None else str(exc) or code.message,
            )
        )
    return ALTER(
        allow_replication_factor_change=request.allow_replication_factor_change,
        error_code=top,
        error_message=top.message if top else None,
        responses=[
            ALTER.ReassignableTopicResponse(name=name, partitions=partitions)
            for name, partitions in by_topic.items()
        ],
    )


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def handle_alter_partition_reassignments(
    context: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    if not context.authorize_cluster(AclOperation.ALTER):
        return context.refuse_as(ALTER, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    requested: dict[tuple[str, int], list[int] | None] = {
        (topic.name, p.partition_index): p.replicas
        for topic in request.topics
        for p in topic.partitions
    }
    node = context.broker.cluster
    if node is None:
        return _alter_answer(request, _single_node(context, requested))
    controller = node.controller
    if controller is None:
        return _alter_answer(request, {}, ErrorCode.NOT_CONTROLLER)
    try:
        results = await controller.alter_partition_reassignments(
            requested,
            set(node.watcher.view.brokers),
            allow_replication_factor_change=request.allow_replication_factor_change,
        )
    except ControllerFencedError:
        return _alter_answer(request, {}, ErrorCode.NOT_CONTROLLER)
    return _alter_answer(request, results)


def _single_node(
    context: RequestContext, requested: dict[tuple[str, int], list[int] | None]
) -> dict[tuple[str, int], Exception | None]:
    broker_id = context.broker.broker_id
    replicas = context.broker.replica_manager
    results: dict[tuple[str, int], Exception | None] = {}
    for (topic, partition), target in requested.items():
        if replicas.get_partition(topic, partition) is None:
            results[(topic, partition)] = UnknownTopicError(f"{topic}-{partition} does not exist")
        elif target is None:
            results[(topic, partition)] = NoReassignmentInProgressError(
                f"{topic}-{partition} is not moving"
            )
        elif list(target) != [broker_id]:
            results[(topic, partition)] = InvalidReplicaAssignmentError(
                f"broker {broker_id} is the only broker; replicas {list(target)} cannot be"
            )
        else:
            results[(topic, partition)] = None
    return results


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS)
def handle_list_partition_reassignments(
    context: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not context.authorize_cluster(AclOperation.DESCRIBE):
        return context.refuse_as(LIST, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    node = context.broker.cluster
    if node is None:
        return LIST(error_code=ErrorCode.NONE, error_message=None, topics=[])
    if not node.is_controller:
        return LIST(
            error_code=ErrorCode.NOT_CONTROLLER,
            error_message=ErrorCode.NOT_CONTROLLER.message,
            topics=[],
        )
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.name, p) for t in request.topics for p in t.partition_indexes}
    by_topic: dict[str, list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]] = {}
    for (topic, partition), versioned in sorted(node.watcher.view.partitions.items()):
        state = versioned.state
        if not state.reassigning or (wanted is not None and (topic, partition) not in wanted):
            continue
        by_topic.setdefault(topic, []).append(
            LIST.OngoingTopicReassignment.OngoingPartitionReassignment(
                partition_index=partition,
                replicas=list(state.replicas),
                adding_replicas=list(state.adding_replicas),
                removing_replicas=list(state.removing_replicas),
            )
        )
    return LIST(
        error_code=ErrorCode.NONE,
        error_message=None,
        topics=[
            LIST.OngoingTopicReassignment(name=name, partitions=partitions)
            for name, partitions in by_topic.items()
        ],
    )
