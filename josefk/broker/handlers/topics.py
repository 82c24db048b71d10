"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

Behaviour: the handlers check what does not depend on where topics live (the principal's
ACLs, the name's syntax, a name given twice, null config values, a request's size) and hand
each topic to the broker's ``TopicAdmin`` (``josefk.broker.topic_admin``): on a single node
the catalog and logs of this broker, in a cluster the controller (a broker that is not the
controller answers NOT_CONTROLLER). The admin checks the rest in Kafka's order, existence
first, and its errors become each topic's error code (``error_code_for``) with a message.

- A topic named (or, in DeleteTopics, identified) more than once in a request is answered
  once, INVALID_REQUEST "Duplicate topic name." (or id), and left alone, as Kafka's
  controller answers CreateTopics, DeleteTopics and CreatePartitions.
- Internal topics (``is_internal_topic``) cannot be created by a client (the broker makes
  them with the configs they need), deleted or given partitions: INVALID_TOPIC_EXCEPTION
  with a message saying why.
- A request that would create more than 10,000 partitions (validate-only included) is
  refused whole with POLICY_VIOLATION, as Kafka's controller does.
- On a single node one broker is every replica: a replication factor other than 1 is
  INVALID_REPLICATION_FACTOR, as Kafka refuses one above the live brokers; creating is all or
  nothing, each partition's files written off the event loop. A failure is that topic's
  error, with a message naming the path: UNKNOWN_SERVER_ERROR when one partition directory
  cannot be made, INVALID_TOPIC_EXCEPTION when the filesystem refuses its name,
  KAFKA_STORAGE_ERROR when the disk failed (its log dir is then offline).
- Authorization: CREATE on the cluster or the topic, DELETE (after DESCRIBE: no existence
  leak) and ALTER on the topic; refused topics are TOPIC_AUTHORIZATION_FAILED. CreateTopics
  shows a new topic's configs only to a principal that may DESCRIBE_CONFIGS it.

Version notes: DeleteTopics before v6 names topics only; v6 names or ids them (both at once
is INVALID_REQUEST).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Hashable, Iterable

from josefk.broker.catalog import (
    InvalidTopicError,
    TopicCatalog,
    TopicInfo,
    internal_topic_refusal,
    is_internal_topic,
    validate_topic_name,
)
from josefk.broker.configs import topic_config_entries
from josefk.broker.context import RequestContext
from josefk.broker.errors import InvalidRequestError, error_code_for
from josefk.broker.handlers import Reply, handles
from josefk.broker.topic_admin import NewTopic
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


def _error_of(exc: Exception) -> tuple[ErrorCode, str]:
    """A topic's error code and message for what stopped it (an unexpected one, a bug, is
    logged by ``error_code_for`` and answered UNKNOWN_SERVER_ERROR)."""
    if isinstance(exc, _Refused):
        return exc.error, str(exc)
    return error_code_for(exc), str(exc)


# Kafka's controller refuses a request that would create more partitions than this at once
# (validate-only too): POLICY_VIOLATION for every topic of it.
MAX_PARTITIONS_PER_REQUEST = 10_000
_EXCESSIVE = "Excessively large number of partitions per request."


_DUPLICATE_NAME = "Duplicate topic name."


def _named_more_than_once(names: Iterable[Hashable]) -> dict[Hashable, bool]:
    """The names (or ids) a request gives more than once, each mapped to False: Kafka's
    controller answers such a topic once, INVALID_REQUEST, and does nothing with it; the
    handlers set True once they have answered it."""
    return {name: False for name, count in Counter(names).items() if count > 1}


def may_on_topic(context: RequestContext, operation: AclOperation, name: str) -> bool:
    """The topic checks of CreateTopics (CREATE on the cluster or the topic), DeleteTopics
    (DELETE) and CreatePartitions (ALTER): refused ones are TOPIC_AUTHORIZATION_FAILED."""
    if operation == AclOperation.CREATE and context.authorize_cluster(AclOperation.CREATE):
        return True
    return context.authorize(operation, AclResource.TOPIC, name)


def _authorized(context: RequestContext, operation: AclOperation, name: str) -> None:
    if not may_on_topic(context, operation, name):
        raise _Refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")


# -- CreateTopics --------------------------------------------------------------------------


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
    return _create_topics(context, request)


def _new_topic(context: RequestContext, topic: CreateTopicsRequest.CreatableTopic) -> NewTopic:
    """The request's topic with the broker's defaults for -1, checked for what does not
    depend on where topics live."""
    config = context.broker.config
    configs: dict[str, str] = {}
    for entry in topic.configs:
        if entry.value is None:
            raise _Refused(ErrorCode.INVALID_CONFIG, f"Null value not supported for {entry.name}")
        configs[entry.name] = entry.value
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise InvalidRequestError(
                "give either assignments or num_partitions and replication_factor"
            )
        assignments = [list(a.broker_ids) for a in topic.assignments]
        return NewTopic(topic.name, len(assignments), len(assignments[0]), configs, assignments)
    return NewTopic(
        topic.name,
        config.num_partitions if topic.num_partitions == -1 else topic.num_partitions,
        (
            config.default_replication_factor
            if topic.replication_factor == -1
            else topic.replication_factor
        ),
        configs,
    )


async def _create_topics(
    context: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    broker = context.broker
    admin = broker.topic_admin
    duplicated = _named_more_than_once(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        name = topic.name
        try:
            if name in duplicated:
                if duplicated[name]:
                    continue  # answered at its first place
                duplicated[name] = True
                raise _Refused(ErrorCode.INVALID_REQUEST, _DUPLICATE_NAME)
            _authorized(context, AclOperation.CREATE, name)
            validate_topic_name(name)
            new = _new_topic(context, topic)
            created = await admin.create_topic(new, validate_only=request.validate_only)
        except Exception as exc:  # noqa: BLE001  per topic, as Kafka answers; mapped to its code
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
        entries = topic_config_entries(
            broker.config_layers(), broker.replica_manager.default_log_config, new.configs
        )
        # Kafka shows the new topic's configs only to a principal that may DESCRIBE_CONFIGS it.
        shown = context.authorize(AclOperation.DESCRIBE_CONFIGS, AclResource.TOPIC, name)
        results.append(
            CreateResult(
                name=name,
                topic_id=created.topic_id if created.topic_id is not None else ZERO_UUID,
                error_code=ErrorCode.NONE,
                error_message=None,
                num_partitions=created.partitions,
                replication_factor=created.replication_factor,
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


# -- DeleteTopics --------------------------------------------------------------------------


_DUPLICATE_ID = "Duplicate topic id."


def _has_id(topic_id: uuid.UUID | None) -> bool:
    return topic_id is not None and topic_id.int != 0


def _deletion_key(name: str | None, topic_id: uuid.UUID | None) -> str | uuid.UUID | None:
    """What a DeleteTopics entry names the topic by: its name or its id; None for an entry
    giving both or neither, which deletion_refusal refuses on its own."""
    if name is not None and not _has_id(topic_id):
        return name
    if name is None and _has_id(topic_id):
        return topic_id
    return None


def deletion_refusal(
    context: RequestContext, name: str | None, topic_id: uuid.UUID | None, catalog: TopicCatalog
) -> tuple[TopicInfo | None, ErrorCode, str | None]:
    """DeleteTopics' checks of one entry, in Kafka's order: the topic (or None), and the
    error (NONE when it may be deleted, as far as existence and ACLs go). A name and an id
    together (v6) is INVALID_REQUEST; a name the principal may not DESCRIBE is
    TOPIC_AUTHORIZATION_FAILED whether it exists or not (no existence leak), then an unknown
    topic, then DELETE."""
    has_id = _has_id(topic_id)
    if name is not None and has_id:
        return None, ErrorCode.INVALID_REQUEST, "You may not give both a topic name and an id."
    if name is None and not has_id:
        return None, ErrorCode.INVALID_REQUEST, "Neither a topic name nor an id was given."
    if name is not None:
        if not context.authorize(AclOperation.DESCRIBE, AclResource.TOPIC, name):
            return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        info = catalog.get(name)
        if info is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}"
    else:
        info = catalog.by_id(topic_id)  # type: ignore[arg-type]  # has_id checked
        if info is None:
            return None, ErrorCode.UNKNOWN_TOPIC_ID, f"unknown topic id {topic_id}"
        if not context.authorize(AclOperation.DESCRIBE, AclResource.TOPIC, info.name):
            return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    if not may_on_topic(context, AclOperation.DELETE, info.name):
        return info, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    return info, ErrorCode.NONE, None


@handles(ApiKey.DELETE_TOPICS)
async def handle_delete_topics(
    context: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    catalog = context.broker.replica_manager.catalog
    admin = context.broker.topic_admin
    if context.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        # Before v6 topics are named; the id is never looked at.
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    duplicated = _named_more_than_once(
        key for name, topic_id in wanted if (key := _deletion_key(name, topic_id)) is not None
    )
    results = []
    for name, topic_id in wanted:
        key = _deletion_key(name, topic_id)
        if key is not None and key in duplicated:
            if not duplicated[key]:
                duplicated[key] = True
                results.append(
                    DeleteResult(
                        name=name,
                        topic_id=topic_id if _has_id(topic_id) else ZERO_UUID,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message=_DUPLICATE_NAME if name is not None else _DUPLICATE_ID,
                    )
                )
            continue
        info, error, message = deletion_refusal(context, name, topic_id, catalog)
        if error != ErrorCode.NONE or info is None:
            pass
        elif is_internal_topic(info.name):
            error = ErrorCode.INVALID_TOPIC_EXCEPTION
            message = internal_topic_refusal(info.name, "delete")
        elif not context.broker.config.delete_topic_enable:
            error, message = ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false"
        else:
            try:
                await admin.delete_topic(info.name)
            except StorageError as exc:
                error, message = ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
            except Exception as exc:  # noqa: BLE001  per topic, as Kafka answers; mapped to its code
                error, message = _error_of(exc)
        results.append(
            DeleteResult(
                name=info.name if info is not None else name,
                topic_id=info.topic_id if info is not None else ZERO_UUID,
                error_code=error,
                error_message=message,
            )
        )
    return DeleteResponse(responses=results)


# -- CreatePartitions ------------------------------------------------------------------------


def new_partitions_requested(catalog: TopicCatalog, request: CreatePartitionsRequest) -> int:
    """How many partitions a CreatePartitions request would add, topic by topic."""
    total = 0
    for topic in request.topics:
        info = catalog.get(topic.name)
        total += max(0, topic.count - (info.partitions if info is not None else 0))
    return total


@handles(ApiKey.CREATE_PARTITIONS)
def handle_create_partitions(
    context: RequestContext, request: CreatePartitionsRequest
) -> Reply[CreatePartitionsResponse]:
    catalog = context.broker.replica_manager.catalog
    if new_partitions_requested(catalog, request) > MAX_PARTITIONS_PER_REQUEST:
        return PartitionsResponse(
            results=[
                PartitionsResult(
                    name=topic.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=_EXCESSIVE
                )
                for topic in request.topics
            ]
        )
    return _create_partitions(context, request)


async def _create_partitions(
    context: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    admin = context.broker.topic_admin
    duplicated = _named_more_than_once(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        error, message = ErrorCode.NONE, None
        try:
            if topic.name in duplicated:
                if duplicated[topic.name]:
                    continue  # answered at its first place
                duplicated[topic.name] = True
                raise _Refused(ErrorCode.INVALID_REQUEST, _DUPLICATE_NAME)
            _authorized(context, AclOperation.ALTER, topic.name)
            if is_internal_topic(topic.name):
                raise InvalidTopicError(internal_topic_refusal(topic.name, "add partitions to"))
            assignments = (
                [list(a.broker_ids) for a in topic.assignments]
                if topic.assignments is not None
                else None
            )
            await admin.create_partitions(
                topic.name,
                topic.count,
                assignments=assignments,
                validate_only=request.validate_only,
            )
        except Exception as exc:  # noqa: BLE001  per topic, as Kafka answers; mapped to its code
            error, message = _error_of(exc)
        results.append(PartitionsResult(name=topic.name, error_code=error, error_message=message))
    return PartitionsResponse(results=results)
