"""CreateTopics, DeleteTopics and CreatePartitions in a cluster: through the controller.

Admin clients send these requests to the controller named in Metadata; a broker that is not
the controller answers NOT_CONTROLLER so the client refreshes its metadata and retries there,
as Kafka's brokers did before request forwarding. The controller decides placement (Kafka's
rack-aware round robin, or the request's explicit assignments) and writes the topic and its
partition states to etcd in one fenced transaction; every broker then takes its roles by
watch. Internal topics are refused as on the single node, and so are topics the principal
may not CREATE, DELETE or ALTER (``may_on_topic``, both modes).

Not a handler module of its own: topics.py hands cluster-mode requests here.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

import aetcd.exceptions

from josefk.broker.catalog import (
    InvalidTopicError,
    TopicCatalog,
    TopicInfo,
    collision_message,
    internal_topic_refusal,
    is_internal_topic,
    validate_topic_name,
)
from josefk.broker.cluster_node import ClusterNode, topic_uuid
from josefk.broker.context import RequestContext
from josefk.cluster.controller import (
    ControllerFencedError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicExistsError,
    UnknownTopicError,
)
from josefk.cluster.metadata_store import EtcdUnavailableError
from josefk.config.topic import InvalidConfigError, inert_topic_notes
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from josefk.protocol.types import ZERO_UUID

logger = logging.getLogger(__name__)

CreateResponse = CreateTopicsResponse
CreateResult = CreateResponse.CreatableTopicResult
DeleteResponse = DeleteTopicsResponse
DeleteResult = DeleteResponse.DeletableTopicResult
PartitionsResponse = CreatePartitionsResponse
PartitionsResult = PartitionsResponse.CreatePartitionsTopicResult

_ERRORS: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (TopicExistsError, ErrorCode.TOPIC_ALREADY_EXISTS),
    (InvalidReplicationFactorError, ErrorCode.INVALID_REPLICATION_FACTOR),
    (InvalidReplicaAssignmentError, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (InvalidPartitionsError, ErrorCode.INVALID_PARTITIONS),
    (UnknownTopicError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (ControllerFencedError, ErrorCode.NOT_CONTROLLER),
    (InvalidConfigError, ErrorCode.INVALID_CONFIG),
    (InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),
)


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


def _error_of(exc: BaseException) -> tuple[ErrorCode, str]:
    if isinstance(exc, _Refused):
        return exc.error, str(exc)
    for kind, code in _ERRORS:
        if isinstance(exc, kind):
            return code, str(exc)
    if isinstance(exc, aetcd.exceptions.ClientError | EtcdUnavailableError):
        # etcd is away (restarting, cut off): retriable, the client tries again.
        return ErrorCode.REQUEST_TIMED_OUT, f"the cluster metadata is unreachable: {exc}"
    logger.exception("unexpected error in a cluster admin request", exc_info=exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)


def _node(context: RequestContext) -> ClusterNode:
    node = context.broker.cluster
    assert isinstance(node, ClusterNode)
    if not node.is_controller:
        raise _Refused(ErrorCode.NOT_CONTROLLER, f"broker {node.broker_id} is not the controller")
    return node


def may_on_topic(context: RequestContext, operation: AclOperation, name: str) -> bool:
    """The topic checks of CreateTopics (CREATE on the cluster or the topic), DeleteTopics
    (DELETE) and CreatePartitions (ALTER): refused ones are TOPIC_AUTHORIZATION_FAILED."""
    if operation == AclOperation.CREATE and context.authorize_cluster(AclOperation.CREATE):
        return True
    return context.authorize(operation, ResourceType.TOPIC, name)


def deletion_refusal(
    context: RequestContext, name: str | None, topic_id: uuid.UUID | None, catalog: TopicCatalog
) -> tuple[TopicInfo | None, ErrorCode, str | None]:
    """DeleteTopics' checks of one entry, in Kafka's order: the topic (or None), and the
    error (NONE when it may be deleted, as far as existence and ACLs go). A name and an id
    together (v6) is INVALID_REQUEST; a name the principal may not DESCRIBE is
    TOPIC_AUTHORIZATION_FAILED whether it exists or not (no existence leak), then an unknown
    topic, then DELETE."""
    has_id = topic_id is not None and topic_id.int != 0
    if name is not None and has_id:
        return None, ErrorCode.INVALID_REQUEST, "You may not give both a topic name and an id."
    if name is None and not has_id:
        return None, ErrorCode.INVALID_REQUEST, "Neither a topic name nor an id was given."
    if name is not None:
        if not context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        info = catalog.get(name)
        if info is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}"
    else:
        info = catalog.by_id(topic_id)  # type: ignore[arg-type]  # has_id checked
        if info is None:
            return None, ErrorCode.UNKNOWN_TOPIC_ID, f"unknown topic id {topic_id}"
        if not context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
            return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    if not may_on_topic(context, AclOperation.DELETE, info.name):
        return info, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    return info, ErrorCode.NONE, None


def _authorized(context: RequestContext, operation: AclOperation, name: str) -> None:
    if not may_on_topic(context, operation, name):
        raise _Refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")


def _not_internal(name: str, action: str) -> None:
    if is_internal_topic(name):
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, internal_topic_refusal(name, action))


async def create_topics(
    context: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    config = context.broker.config
    counts = Counter(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        name = topic.name
        try:
            if counts[name] > 1:
                raise _Refused(ErrorCode.INVALID_REQUEST, f"topic {name!r} is named twice")
            _authorized(context, AclOperation.CREATE, name)
            validate_topic_name(name)
            _not_internal(name, "create")
            catalog = context.broker.replica_manager.catalog
            if name not in catalog and (colliding := catalog.colliding_topic(name)) is not None:
                raise _Refused(
                    ErrorCode.INVALID_TOPIC_EXCEPTION, collision_message(name, colliding)
                )
            node = _node(context)
            configs = {c.name: c.value for c in topic.configs if c.value is not None}
            context.broker.replica_manager.default_log_config.with_overrides(configs)
            assignments = [list(a.broker_ids) for a in topic.assignments] or None
            partitions = (
                config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
            )
            factor = (
                config.default_replication_factor
                if topic.replication_factor == -1
                else topic.replication_factor
            )
            if request.validate_only:
                record = None
            else:
                record = await node.controller.create_topic(  # type: ignore[union-attr]
                    name,
                    partitions=partitions,
                    replication_factor=factor,
                    live_brokers=node.live_brokers(),
                    configs=configs,
                    assignments=assignments,
                )
                for note in inert_topic_notes(configs):
                    logger.info("topic %s: %s", name, note)
        except Exception as exc:  # noqa: BLE001  per topic, as Kafka answers; _error_of maps it
            error, message = _error_of(exc)
            results.append(
                CreateResult(
                    name=name,
                    error_code=error,
                    error_message=message,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=None,
                )
            )
            continue
        results.append(
            CreateResult(
                name=name,
                topic_id=topic_uuid(record.topic_id) if record else CreateResult().topic_id,
                error_code=ErrorCode.NONE,
                error_message=None,
                num_partitions=record.partitions if record else partitions,
                replication_factor=len(assignments[0]) if assignments else factor,
                configs=None,
            )
        )
    return CreateResponse(topics=results)


async def delete_topics(
    context: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    catalog = context.broker.replica_manager.catalog
    if context.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        # Before v6 topics are named; the id is never looked at.
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        info, error, message = deletion_refusal(context, name, topic_id, catalog)
        try:
            if error != ErrorCode.NONE:
                raise _Refused(error, message or error.name)
            assert info is not None
            _not_internal(info.name, "delete")
            if not context.broker.config.delete_topic_enable:
                raise _Refused(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
            await _node(context).controller.delete_topic(info.name)  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001  per topic, as Kafka answers; _error_of maps it
            error, message = _error_of(exc)
        results.append(
            DeleteResult(
                name=info.name if info is not None else name,
                topic_id=info.topic_id if info is not None else DeleteResult().topic_id,
                error_code=error,
                error_message=message,
            )
        )
    return DeleteResponse(responses=results)


def new_partitions_requested(catalog: TopicCatalog, request: CreatePartitionsRequest) -> int:
    """How many partitions a CreatePartitions request would add, topic by topic."""
    total = 0
    for topic in request.topics:
        info = catalog.get(topic.name)
        total += max(0, topic.count - (info.partitions if info is not None else 0))
    return total


async def create_partitions(
    context: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    results = []
    for topic in request.topics:
        error, message = ErrorCode.NONE, None
        try:
            _authorized(context, AclOperation.ALTER, topic.name)
            _not_internal(topic.name, "add partitions to")
            node = _node(context)
            if not request.validate_only:
                assignments = (
                    [list(a.broker_ids) for a in topic.assignments]
                    if topic.assignments is not None
                    else None
                )
                await node.controller.create_partitions(  # type: ignore[union-attr]
                    topic.name,
                    topic.count,
                    live_brokers=node.live_brokers(),
                    assignments=assignments,
                )
        except Exception as exc:  # noqa: BLE001  per topic, as Kafka answers; _error_of maps it
            error, message = _error_of(exc)
        results.append(PartitionsResult(name=topic.name, error_code=error, error_message=message))
    return PartitionsResponse(results=results)
