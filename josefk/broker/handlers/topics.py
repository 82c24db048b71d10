"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

In a cluster (``josefk.etcd.endpoints``) the three go to the controller
(``cluster_topics``). Internal topics (``is_internal_topic``) cannot be created by a client
(the broker makes them with the configs they need), deleted or given partitions, in either
mode: INVALID_TOPIC_EXCEPTION with a message saying why.

On the single node, one broker means one replica per partition: a replication factor other
than 1 (or -1, "the broker's default") is refused with INVALID_REPLICATION_FACTOR, as Kafka
refuses a factor larger than the number of live brokers. Manual assignments must name this broker.

On the single node, creating a topic or partitions is all or nothing
(``ReplicaManager.create_topic``); a failure
is that topic's error, with a message naming the path: UNKNOWN_SERVER_ERROR when one partition
directory cannot be made (a file in its place, permissions), INVALID_TOPIC_EXCEPTION when the
filesystem refuses its name, KAFKA_STORAGE_ERROR when the disk failed (its log dir is then
offline). The other topics of the request are created as usual. Each partition's files are
written in the executor (``create_topic_off_loop``), so other clients are served while
thousands are made. A request that would create more than 10,000 partitions (validate-only
included) is refused whole with POLICY_VIOLATION, as Kafka's controller does.
"""

from __future__ import annotations

import logging
from collections import Counter

from josefk.broker.catalog import (
    InvalidTopicError,
    collision_message,
    internal_topic_refusal,
    is_internal_topic,
    validate_topic_name,
)
from josefk.broker.configs import topic_config_entries
from josefk.broker.context import RequestContext
from josefk.broker.errors import error_code_for
from josefk.broker.handlers import Reply, cluster_topics, handles
from josefk.config.topic import InvalidConfigError, inert_topic_notes
from josefk.protocol.acls import AclOperation
from josefk.protocol.acls import ResourceType as AclResource
from josefk.protocol.api import ApiKey
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
from josefk.storage.errors import StorageError

logger = logging.getLogger(__name__)

CreateResponse = CreateTopicsResponse
CreateResult = CreateResponse.CreatableTopicResult
CreateResultConfig = CreateResult.CreatableTopicConfigs
DeleteResponse = DeleteTopicsResponse
DeleteResult = DeleteResponse.DeletableTopicResult
PartitionsResponse = CreatePartitionsResponse
PartitionsResult = PartitionsResponse.CreatePartitionsTopicResult


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


# Kafka's controller refuses a request that would create more partitions than this at once
# (validate-only too): POLICY_VIOLATION for every topic of it.
MAX_PARTITIONS_PER_REQUEST = 10_000
_EXCESSIVE = "Excessively large number of partitions per request."


def _partitions_requested(context: RequestContext, request: CreateTopicsRequest) -> int:
    default = context.broker.config.num_partitions
    total = 0
    for topic in request.topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += default
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _refuse_all_topics(request: CreateTopicsRequest) -> CreateTopicsResponse:
    return CreateResponse(
        topics=[
            CreateResult(
                name=topic.name,
                error_code=ErrorCode.POLICY_VIOLATION,
                error_message=_EXCESSIVE,
                num_partitions=-1,
                replication_factor=-1,
                configs=None,
            )
            for topic in request.topics
        ]
    )


@handles(ApiKey.CREATE_TOPICS)
def handle_create_topics(
    context: RequestContext, request: CreateTopicsRequest
) -> Reply[CreateTopicsResponse]:
    if _partitions_requested(context, request) > MAX_PARTITIONS_PER_REQUEST:
        return _refuse_all_topics(request)
    if context.broker.cluster is not None:
        return cluster_topics.create_topics(context, request)
    return _create_topics(context, request)


async def _create_topics(
    context: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    """The single node's CreateTopics: the partitions' files are written off the loop."""
    broker = context.broker
    replicas = broker.replica_manager
    counts = Counter(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        name = topic.name
        try:
            if counts[name] > 1:
                raise _Refused(ErrorCode.INVALID_REQUEST, f"topic {name!r} is named twice")
            if not cluster_topics.may_on_topic(context, AclOperation.CREATE, name):
                raise _Refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            partitions, configs = _check_creatable(context, topic)
            topic_id = None
            if not request.validate_only:
                try:
                    info = await replicas.create_topic_off_loop(name, partitions, configs)
                    topic_id = info.topic_id
                except StorageError as exc:
                    raise _Refused(error_code_for(exc), str(exc)) from None
                for note in inert_topic_notes(configs):
                    logger.info("topic %s: %s", name, note)
        except _Refused as refused:
            results.append(
                CreateResult(
                    name=name,
                    error_code=refused.error,
                    error_message=refused.message,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=None,
                )
            )
            continue
        entries = topic_config_entries(broker.config_layers(), replicas.default_log_config, configs)
        # Kafka shows the new topic's configs only to a principal that may DESCRIBE_CONFIGS it.
        shown = context.authorize(AclOperation.DESCRIBE_CONFIGS, AclResource.TOPIC, name)
        results.append(
            CreateResult(
                name=name,
                topic_id=topic_id if topic_id is not None else CreateResult().topic_id,
                error_code=ErrorCode.NONE,
                error_message=None,
                num_partitions=partitions,
                replication_factor=1,
                configs=[
                    CreateResultConfig(
                        name=entry.name,
                        value=entry.value,
                        read_only=entry.read_only,
                        config_source=int(entry.source),
                        is_sensitive=entry.is_sensitive,
                    )
                    for entry in entries
                ]
                if shown
                else None,
                topic_config_error_code=(
                    ErrorCode.NONE if shown else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                ),
            )
        )
    return CreateResponse(topics=results)


def _check_creatable(
    context: RequestContext, topic: CreateTopicsRequest.CreatableTopic
) -> tuple[int, dict[str, str]]:
    broker = context.broker
    name = topic.name
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None
    if name in broker.replica_manager.catalog:
        raise _Refused(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if (colliding := broker.replica_manager.catalog.colliding_topic(name)) is not None:
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, collision_message(name, colliding))
    if is_internal_topic(name):
        # The broker creates its internal topics itself, with the configs they need (a
        # compacted log); one made by a client could then not be deleted.
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, internal_topic_refusal(name, "create"))
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise _Refused(
                ErrorCode.INVALID_REQUEST,
                "give either assignments or num_partitions and replication_factor",
            )
        for assignment in topic.assignments:
            if list(assignment.broker_ids) != [broker.broker_id]:
                raise _Refused(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"partition {assignment.partition_index} is assigned to brokers "
                    f"{list(assignment.broker_ids)}; the only broker is {broker.broker_id}",
                )
        partitions = len(topic.assignments)
    else:
        partitions = (
            broker.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        )
        factor = (
            broker.config.default_replication_factor
            if topic.replication_factor == -1
            else topic.replication_factor
        )
        if partitions <= 0:
            raise _Refused(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            )
        if factor <= 0:
            raise _Refused(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0.",
            )
        if factor > 1:
            raise _Refused(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {factor} time(s): "
                "the number of brokers is only 1.",
            )
    configs: dict[str, str] = {}
    for config in topic.configs:
        if config.value is None:
            raise _Refused(ErrorCode.INVALID_CONFIG, f"Null value not supported for {config.name}")
        configs[config.name] = config.value
    try:
        broker.replica_manager.default_log_config.with_overrides(configs)
    except InvalidConfigError as exc:
        raise _Refused(ErrorCode.INVALID_CONFIG, str(exc)) from None
    return partitions, configs


@handles(ApiKey.DELETE_TOPICS)
def handle_delete_topics(
    context: RequestContext, request: DeleteTopicsRequest
) -> Reply[DeleteTopicsResponse]:
    if context.broker.cluster is not None:
        return cluster_topics.delete_topics(context, request)
    replicas = context.broker.replica_manager
    catalog = replicas.catalog
    if context.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        # Before v6 topics are named; the id is never looked at.
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        info, error, message = cluster_topics.deletion_refusal(context, name, topic_id, catalog)
        if error != ErrorCode.NONE or info is None:
            pass
        elif is_internal_topic(info.name):
            error = ErrorCode.INVALID_TOPIC_EXCEPTION
            message = internal_topic_refusal(info.name, "delete")
        elif not context.broker.config.delete_topic_enable:
            error, message = ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false"
        else:
            try:
                replicas.delete_topic(info.name)
                if context.broker.metrics is not None:
                    context.broker.metrics.topics.remove_topic(info.name)
            except StorageError as exc:
                error, message = ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
        results.append(
            DeleteResult(
                name=info.name if info is not None else name,
                topic_id=info.topic_id if info is not None else DeleteResult().topic_id,
                error_code=error,
                error_message=message,
            )
        )
    return DeleteResponse(responses=results)


@handles(ApiKey.CREATE_PARTITIONS)
def handle_create_partitions(
    context: RequestContext, request: CreatePartitionsRequest
) -> Reply[CreatePartitionsResponse]:
    catalog = context.broker.replica_manager.catalog
    if cluster_topics.new_partitions_requested(catalog, request) > MAX_PARTITIONS_PER_REQUEST:
        return PartitionsResponse(
            results=[
                PartitionsResult(
                    name=topic.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=_EXCESSIVE
                )
                for topic in request.topics
            ]
        )
    if context.broker.cluster is not None:
        return cluster_topics.create_partitions(context, request)
    return _create_partitions(context, request)


async def _create_partitions(
    context: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    broker = context.broker
    replicas = broker.replica_manager
    results = []
    for topic in request.topics:
        info = replicas.catalog.get(topic.name)
        error, message = ErrorCode.NONE, None
        if not cluster_topics.may_on_topic(context, AclOperation.ALTER, topic.name):
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            message = f"The topic '{topic.name}' does not exist."
        elif is_internal_topic(topic.name):
            error = ErrorCode.INVALID_TOPIC_EXCEPTION
            message = internal_topic_refusal(topic.name, "add partitions to")
        elif topic.count <= info.partitions:
            error = ErrorCode.INVALID_PARTITIONS
            message = (
                f"Topic currently has {info.partitions} partitions, which is higher than or "
                f"equal to the requested {topic.count}."
            )
        elif topic.assignments is not None and any(
            list(a.broker_ids) != [broker.broker_id] for a in topic.assignments
        ):
            error = ErrorCode.INVALID_REPLICA_ASSIGNMENT
            message = f"new partitions can only be assigned to broker {broker.broker_id}"
        elif not request.validate_only:
            try:
                await replicas.create_partitions_off_loop(topic.name, topic.count)
            except StorageError as exc:
                error, message = error_code_for(exc), str(exc)
        results.append(PartitionsResult(name=topic.name, error_code=error, error_message=message))
    return PartitionsResponse(results=results)
