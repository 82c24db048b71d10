"""Metadata (3): brokers, controller, cluster id and topics, auto-creating topics on request;
DescribeTopicPartitions (75, KIP-966): the same partitions for admin clients, paged.

A topic is auto-created when the request allows it (v4+ ``allow_auto_topic_creation``;
always below v4) and ``auto.create.topics.enable`` is on, with ``num.partitions``
partitions, as Kafka does. Names Kafka would refuse get INVALID_TOPIC_EXCEPTION. In a cluster
the controller creates it (with ``default.replication.factor`` replicas; a broker that is not
the controller forwards a CreateTopics to it) while the client hears LEADER_NOT_AVAILABLE and
asks again.

Authorization (with an authorizer): a topic the principal may not DESCRIBE is left out of an
all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named, whether it exists or
not; auto-creation needs CREATE on the cluster or on the topic (TOPIC_AUTHORIZATION_FAILED
otherwise). KIP-430: the topic's and the cluster's authorized operations are the principal's
bit fields when the request asks for them (the cluster's only with DESCRIBE on it, else 0),
Kafka's "not requested" marker otherwise.

An existing topic's entry is built once and reused by later requests (of any version: the
encoder picks each version's fields) while the metadata's generation and the catalog's topic
id and partition count stay as they were (``josefk.broker.metadata_cache.TopicMemo``); the
entries are frozen and shared. Entries with authorized operations depend on the principal
and are built every time, as are error entries; the DESCRIBE filter runs on every request.

DescribeTopicPartitions answers the named topics (every topic the principal may DESCRIBE
when none is named) in name order, from the request's cursor on, at most
``response_partition_limit`` partitions and ``max.request.partition.size.limit``; where it
stops, ``next_cursor`` names the next partition. As Kafka: a named topic that does not exist
is UNKNOWN_TOPIC_OR_PARTITION, one the principal may not DESCRIBE TOPIC_AUTHORIZATION_FAILED,
and a cursor whose topic is not among those named makes the request INVALID_REQUEST (every
named topic is answered with it). josefk has no eligible leader replicas (KIP-966's ELR): their lists
are empty.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from josefk.broker.catalog import (
    InvalidTopicError,
    TopicInfo,
    is_internal_topic,
    validate_topic_name,
)
from josefk.broker.context import RequestContext
from josefk.broker.errors import InvalidRequestError, error_code_for
from josefk.broker.handlers import handles
from josefk.broker.topic_admin import NewTopic
from josefk.protocol.acls import CLUSTER_NAME, AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from josefk.storage.errors import StorageError

# Kafka's "authorized operations not requested" marker.
_NO_OPERATIONS = -(2**31)

Response = MetadataResponse
TopicEntry = Response.MetadataResponseTopic
PartitionEntry = TopicEntry.MetadataResponsePartition
BrokerEntry = Response.MetadataResponseBroker
_P = TypeVar("_P")
PagedTopic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
PagedPartition = PagedTopic.DescribeTopicPartitionsResponsePartition


@handles(ApiKey.METADATA)
def handle_metadata(context: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = context.broker
    replicas = broker.replica_manager
    catalog = replicas.catalog
    version = context.api_version
    checked = broker.authorizer is not None

    def may_describe(name: str) -> bool:
        return not checked or context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    if request.topics is None or (version == 0 and not request.topics):
        wanted: list[TopicInfo | MetadataResponse.MetadataResponseTopic] = [
            info for info in catalog.topics() if may_describe(info.name)
        ]
    else:
        wanted = []
        allow_auto_create = version < 4 or request.allow_auto_topic_creation
        for topic in request.topics:
            name = topic.name
            if name is None:
                info = catalog.by_id(topic.topic_id)
                if info is None:
                    wanted.append(_unknown_id(topic.topic_id))
                elif not may_describe(info.name):
                    wanted.append(_denied_id(topic.topic_id))
                else:
                    wanted.append(info)
                continue
            if not may_describe(name):
                wanted.append(_error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            info = catalog.get(name)
            if info is None:
                wanted.append(_maybe_auto_create(context, name, allow_auto_create))
            else:
                wanted.append(info)

    with_operations = version >= 8 and request.include_topic_authorized_operations
    metadata = broker.metadata
    assert metadata is not None
    if with_operations:
        topics = [
            _topic_entry(context, item, with_operations=True)
            if isinstance(item, TopicInfo)
            else item
            for item in wanted
        ]
    else:
        # Read after any auto-creation above and with no await until the entries are built,
        # so an entry is never stored under a generation newer than what it was built from.
        generation = metadata.generation()
        memo = broker.metadata_topics
        topics = []
        for item in wanted:
            if isinstance(item, TopicInfo):
                key = (item.topic_id, item.partitions)
                entry = memo.get(metadata, generation, item.name, key)
                if entry is None:
                    entry = _topic_entry(context, item, with_operations=False)
                    memo.put(metadata, generation, item.name, key, entry)
                item = entry
            topics.append(item)
    cluster_operations = _NO_OPERATIONS
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_operations = (
            context.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            if context.authorize_cluster(AclOperation.DESCRIBE)
            else 0
        )
    return Response(
        brokers=[
            BrokerEntry(node_id=node.broker_id, host=node.host, port=node.port, rack=node.rack)
            for node in metadata.brokers(context.connection.listener_name)
        ],
        cluster_id=broker.cluster_id,
        controller_id=metadata.controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
    )


def _maybe_auto_create(
    context: RequestContext, name: str, allowed: bool
) -> TopicInfo | MetadataResponse.MetadataResponseTopic:
    broker = context.broker
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not (allowed and broker.config.auto_create_topics_enable) or is_internal_topic(name):
        return _error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not context.authorize_cluster(AclOperation.CREATE) and not context.authorize(
        AclOperation.CREATE, ResourceType.TOPIC, name
    ):
        return _error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if broker.replica_manager.catalog.colliding_topic(name) is not None:
        return _error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    config = broker.config
    try:
        created = broker.topic_admin.auto_create_topic(
            NewTopic(name, config.num_partitions, config.default_replication_factor)
        )
    except StorageError as exc:
        return _error_entry(name, error_code_for(exc))
    if created is None:
        # Under way elsewhere (a cluster's controller): the client asks again, as Kafka's
        # brokers answer while the creation is under way.
        return _error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE)
    return created


def _topic_entry(
    context: RequestContext, info: TopicInfo, *, with_operations: bool
) -> MetadataResponse.MetadataResponseTopic:
    partitions = _partitions(context, info.name, range(info.partitions), PartitionEntry)
    return TopicEntry(
        error_code=ErrorCode.NONE,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.is_internal,
        partitions=partitions,
        topic_authorized_operations=(
            context.authorized_operations(ResourceType.TOPIC, info.name)
            if with_operations
            else _NO_OPERATIONS
        ),
    )


def _partitions(
    context: RequestContext, topic: str, indexes: range, entry: Callable[..., _P], **extra: Any
) -> list[_P]:
    """Each partition's entry (Metadata's or DescribeTopicPartitions' type, ``extra`` its
    fields beyond Metadata's): leader, epoch, replicas, ISR and offline replicas as the
    broker's metadata has them, with its error: LEADER_NOT_AVAILABLE without a leader (or
    not known yet), KAFKA_STORAGE_ERROR where its log dir is offline."""
    metadata = context.broker.metadata
    assert metadata is not None
    out: list[_P] = []
    for index in indexes:
        view = metadata.partition(topic, index)
        if view is None:
            out.append(
                entry(
                    error_code=ErrorCode.LEADER_NOT_AVAILABLE,
                    partition_index=index,
                    leader_id=-1,
                    leader_epoch=-1,
                    replica_nodes=[],
                    isr_nodes=[],
                    offline_replicas=[],
                    **extra,
                )
            )
            continue
        if view.storage_error:
            error = ErrorCode.KAFKA_STORAGE_ERROR
        elif view.leader < 0:
            error = ErrorCode.LEADER_NOT_AVAILABLE
        else:
            error = ErrorCode.NONE
        out.append(
            entry(
                error_code=error,
                partition_index=index,
                leader_id=view.leader,
                leader_epoch=view.leader_epoch,
                replica_nodes=list(view.replicas),
                isr_nodes=list(view.isr),
                offline_replicas=list(view.offline_replicas),
                **extra,
            )
        )
    return out


def _error_entry(name: str, error: ErrorCode) -> MetadataResponse.MetadataResponseTopic:
    return TopicEntry(
        error_code=error,
        name=name,
        partitions=[],
        topic_authorized_operations=_NO_OPERATIONS,
    )


def _denied_id(topic_id: uuid.UUID) -> MetadataResponse.MetadataResponseTopic:
    return TopicEntry(
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        name=None,
        topic_id=topic_id,
        partitions=[],
        topic_authorized_operations=_NO_OPERATIONS,
    )


def _unknown_id(topic_id: uuid.UUID) -> MetadataResponse.MetadataResponseTopic:
    return TopicEntry(
        error_code=ErrorCode.UNKNOWN_TOPIC_ID,
        name=None,
        topic_id=topic_id,
        partitions=[],
        topic_authorized_operations=_NO_OPERATIONS,
    )


@handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
def handle_describe_topic_partitions(
    context: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    broker = context.broker
    catalog = broker.replica_manager.catalog
    metadata = broker.metadata
    assert metadata is not None
    checked = broker.authorizer is not None

    def may_describe(name: str) -> bool:
        return not checked or context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    cursor = request.cursor
    if request.topics:
        names = sorted({topic.name for topic in request.topics})
        if cursor is not None and cursor.topic_name not in names:
            raise InvalidRequestError("The cursor topic must be included in the topic list.")
    else:
        names = sorted(info.name for info in catalog.topics() if may_describe(info.name))
    first = 0
    if cursor is not None:
        names = [name for name in names if name >= cursor.topic_name]
        if names and names[0] == cursor.topic_name:
            first = max(cursor.partition_index, 0)
    # At least one partition a page, so that a cursor always moves on.
    budget = max(
        min(request.response_partition_limit, broker.config.max_request_partition_size_limit), 1
    )
    topics: list[DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic] = []
    next_cursor: tuple[str, int] | None = None
    for position, name in enumerate(names):
        start = first if position == 0 else 0
        info = catalog.get(name)
        if not may_describe(name):
            topics.append(_paged_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if info is None:
            topics.append(_paged_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        start = min(start, info.partitions)
        if budget <= 0:
            next_cursor = (name, start)
            break
        end = min(info.partitions, start + budget)
        budget -= end - start
        topics.append(
            PagedTopic(
                error_code=ErrorCode.NONE,
                name=name,
                topic_id=info.topic_id,
                is_internal=info.is_internal,
                partitions=_partitions(
                    context,
                    name,
                    range(start, end),
                    PagedPartition,
                    eligible_leader_replicas=[],
                    last_known_elr=[],
                ),
                topic_authorized_operations=context.authorized_operations(ResourceType.TOPIC, name),
            )
        )
        if end < info.partitions:
            next_cursor = (name, end)
            break
    return DescribeTopicPartitionsResponse(
        topics=topics,
        next_cursor=None
        if next_cursor is None
        else DescribeTopicPartitionsResponse.Cursor(
            topic_name=next_cursor[0], partition_index=next_cursor[1]
        ),
    )


def _paged_error(
    name: str, error: ErrorCode
) -> DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic:
    return PagedTopic(
        error_code=error,
        name=name,
        topic_id=uuid.UUID(int=0),
        is_internal=False,
        partitions=[],
        topic_authorized_operations=_NO_OPERATIONS,
    )
