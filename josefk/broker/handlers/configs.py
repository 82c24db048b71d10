"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Topic configs are dynamic: they are stored in the topic catalog and applied to the topic's
logs at once; in a cluster they are stored in the topic's etcd record and every broker holding
a replica applies them from its watch (the receiving broker before it answers). The configs
of an internal topic can be described but not altered (INVALID_TOPIC_EXCEPTION):
``cleanup.policy=delete`` with a short retention on ``__consumer_offsets`` would lose every
group's committed offsets.

Broker configs (KIP-226) are described and altered on the resource ``BROKER "<id>"`` (this
broker only: Kafka's clients send it to the broker it names) or ``BROKER ""`` (the cluster-wide
default, any broker); ``josefk.broker.dynamic_config`` checks, persists and applies them. Errors
as Kafka's: a static key, a per-broker key at the cluster default or another broker's id is
INVALID_REQUEST; an unknown key or a bad value INVALID_CONFIG naming the key (Kafka answers
INVALID_REQUEST for a bad value too, KAFKA-13609; josefk gives the code it should).

Group configs (KIP-848, ConfigResource type 32, ``GROUP "<group id>"``):
``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` per consumer group,
described with the broker's value where the group has none (DEFAULT_CONFIG) and its own
otherwise (GROUP_CONFIG), altered with IncrementalAlterConfigs SET/DELETE within the broker's
``group.consumer.min/max.*`` bounds (INVALID_CONFIG); stored by the single node in
``group-configs.json``, by a cluster in etcd (``josefk.broker.group.group_configs``). Authorization as Kafka's: DESCRIBE_CONFIGS /
ALTER_CONFIGS on the group (GROUP_AUTHORIZATION_FAILED).

Before anything else, as Kafka's ConfigAdminManager: a resource named twice in one alter
request is INVALID_REQUEST at each place (none is altered), and so is a resource naming a key
twice.

Authorization (``_denied``): DESCRIBE_CONFIGS to describe, ALTER_CONFIGS to alter, on the
topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker resource, on the cluster
(CLUSTER_AUTHORIZATION_FAILED), per resource.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from josefk.broker.catalog import internal_topic_refusal, is_internal_topic
from josefk.broker.configs import (
    ConfigEntry,
    ConfigSource,
    ResourceType,
    broker_config_entries,
    cluster_default_entries,
    kafka_defaults,
    topic_config_entries,
)
from josefk.broker.context import RequestContext
from josefk.broker.dynamic_config import (
    DEFAULT_ENTITY,
    InvalidBrokerConfig,
    InvalidBrokerConfigRequest,
    is_list_key,
)
from josefk.broker.errors import MetadataUnavailableError
from josefk.broker.group.coordinator import GroupCoordinator
from josefk.broker.group.group_configs import (
    GROUP_CONFIG_KEYS,
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
    SHARE_GROUP_CONFIG_DEFAULTS,
    SHARE_RECORD_LOCK_DURATION,
    GroupConfigs,
    InvalidGroupConfig,
)
from josefk.broker.handlers import handles
from josefk.broker.loggers import change_levels, logger_entries
from josefk.cluster.errors import MetadataStoreError
from josefk.config.definitions import WIRE_TYPES, ConfigKey, Support
from josefk.config.topic import InvalidConfigError, inert_topic_notes
from josefk.protocol.acls import AclOperation
from josefk.protocol.acls import ResourceType as AclResource
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

DescribeResponse = DescribeConfigsResponse
DescribeResult = DescribeResponse.DescribeConfigsResult
DescribeEntry = DescribeResult.DescribeConfigsResourceResult
DescribeSynonym = DescribeEntry.DescribeConfigsSynonym
AlterResponse = AlterConfigsResponse
AlterResult = AlterResponse.AlterConfigsResourceResponse
AlterResource = AlterConfigsRequest.AlterConfigsResource
IncrementalResponse = IncrementalAlterConfigsResponse
IncrementalResult = IncrementalResponse.AlterConfigsResourceResponse
IncrementalResource = IncrementalAlterConfigsRequest.AlterConfigsResource
IncrementalChange = IncrementalResource.AlterableConfig


class _Resource(Protocol):
    """What every config resource of the three requests names."""

    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...


logger = logging.getLogger(__name__)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# Kafka's ConfigType for DescribeConfigs v3+: josefk reports UNKNOWN (0) for all keys.
_UNKNOWN_TYPE = 0


def _documentation(declared: ConfigKey | None) -> str | None:
    """A key's documentation as DescribeConfigs answers it: what an inert key would do in
    Kafka is followed by why it does nothing here."""
    if declared is None:
        return None
    if declared.support is Support.INERT:
        return f"{declared.doc} Accepted without effect in josefk: {declared.reason}."
    return declared.doc


@handles(ApiKey.DESCRIBE_CONFIGS)
def handle_describe_configs(
    context: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    broker = context.broker
    replicas = broker.replica_manager
    results = []
    for resource in request.resources:
        error, message, entries = ErrorCode.NONE, None, list[ConfigEntry]()
        if denied := _denied(context, resource, AclOperation.DESCRIBE_CONFIGS):
            error, message = denied, denied.message
        elif resource.resource_type == ResourceType.TOPIC:
            info = replicas.catalog.get(resource.resource_name)
            if info is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                message = f"Topic '{resource.resource_name}' does not exist."
            else:
                entries = topic_config_entries(
                    broker.config_layers(), replicas.default_log_config, info.configs
                )
        elif resource.resource_type == ResourceType.GROUP_CONFIG:
            error, message, entries = _group_config_entries(context, resource.resource_name)
        elif resource.resource_type == ResourceType.BROKER:
            if resource.resource_name == DEFAULT_ENTITY:
                entries = cluster_default_entries(broker.config_layers())
            elif resource.resource_name == str(broker.broker_id):
                entries = broker_config_entries(broker.config_layers())
            else:
                error = ErrorCode.INVALID_REQUEST
                message = (
                    f"Unexpected broker id, expected {broker.broker_id} or empty string, "
                    f"but received {resource.resource_name}"
                )
        elif resource.resource_type == ResourceType.BROKER_LOGGER:
            error, message = _this_broker(context, resource)
            if not error:
                entries = logger_entries()
        else:
            error = ErrorCode.INVALID_REQUEST
            message = f"unsupported resource type {resource.resource_type}"
        keys = resource.configuration_keys
        if keys is not None:
            wanted = set(keys)
            entries = [entry for entry in entries if entry.name in wanted]
        results.append(
            DescribeResult(
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[
                    _describe_entry(
                        entry, request.include_synonyms, bool(request.include_documentation)
                    )
                    for entry in entries
                ],
            )
        )
    return DescribeResponse(results=results)


def _describe_entry(
    entry: ConfigEntry, include_synonyms: bool, include_documentation: bool
) -> DescribeConfigsResponse.DescribeConfigsResourceResult:
    """One entry of a DescribeConfigs answer; its type (v3+) and, when asked, documentation
    come from the key's declaration (josefk.config.broker / josefk.config.topic)."""
    declared = entry.declared
    return DescribeEntry(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=entry.is_sensitive,
        synonyms=[
            DescribeSynonym(name=s.name, value=s.value, source=int(s.source))
            for s in entry.synonyms
        ]
        if include_synonyms
        else [],
        config_type=_UNKNOWN_TYPE if declared is None else WIRE_TYPES.get(declared.type, 0),
        documentation=_documentation(declared) if include_documentation else None,
    )


@handles(ApiKey.ALTER_CONFIGS)
async def handle_alter_configs(
    context: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    async def alter(resource: AlterResource) -> tuple[ErrorCode, str | None]:
        if resource.resource_type == ResourceType.BROKER:
            return await _alter_broker(
                context, resource, _replace_all(resource), request.validate_only
            )
        if resource.resource_type == ResourceType.BROKER_LOGGER:
            return ErrorCode.INVALID_REQUEST, (
                "AlterConfigs does not support the resource type BROKER_LOGGER: use "
                "IncrementalAlterConfigs"
            )
        return await _alter_topic(
            context, resource, _replace_topic_configs(resource), request.validate_only
        )

    return AlterResponse(
        responses=[
            AlterResult(
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
            for resource, (error, message) in await _alter_each(context, request.resources, alter)
        ]
    )


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS)
async def handle_incremental_alter_configs(
    context: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    async def alter(resource: IncrementalResource) -> tuple[ErrorCode, str | None]:
        if resource.resource_type == ResourceType.BROKER:
            return await _alter_broker(
                context, resource, _incremental_edit(context, resource), request.validate_only
            )
        if resource.resource_type == ResourceType.GROUP_CONFIG:
            return await _alter_group(context, resource, request.validate_only)
        if resource.resource_type == ResourceType.BROKER_LOGGER:
            error, message = _this_broker(context, resource)
            if error:
                return error, message
            return change_levels(resource.configs, request.validate_only)
        return await _alter_topic(
            context, resource, _incremental_topic_edit(context, resource), request.validate_only
        )

    return IncrementalResponse(
        responses=[
            IncrementalResult(
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
            for resource, (error, message) in await _alter_each(context, request.resources, alter)
        ]
    )


_R = TypeVar("_R", AlterResource, IncrementalResource)


async def _alter_each(
    context: RequestContext,
    resources: list[_R],
    alter: Callable[[_R], Awaitable[tuple[ErrorCode, str | None]]],
) -> list[tuple[_R, tuple[ErrorCode, str | None]]]:
    """Each resource of an alter request with its outcome: the request's own checks, in
    Kafka's order (a resource or key named twice, then ALTER_CONFIGS), then ``alter``, one
    resource after the other."""
    duplicated = _named_more_than_once(resources)
    outcomes = []
    for resource in resources:
        outcome: tuple[ErrorCode, str | None]
        if malformed := _malformed(resource, duplicated):
            outcome = ErrorCode.INVALID_REQUEST, malformed
        elif denied := _denied(context, resource, AclOperation.ALTER_CONFIGS):
            outcome = denied, denied.message
        else:
            outcome = await alter(resource)
        outcomes.append((resource, outcome))
    return outcomes


class _AlteredResource(_Resource, Protocol):
    @property
    def configs(self) -> Sequence[AlterResource.AlterableConfig | IncrementalChange]: ...


def _named_more_than_once(resources: Iterable[_Resource]) -> set[tuple[int, str]]:
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {resource for resource, count in counts.items() if count > 1}


def _malformed(resource: _AlteredResource, duplicated: set[tuple[int, str]]) -> str | None:
    """Kafka's checks of an alter request's resource before its type, ACLs or configs are
    looked at: INVALID_REQUEST, with this message, for every place of a resource named more
    than once (none of them is altered) and for a resource that names a key twice."""
    if (resource.resource_type, resource.resource_name) in duplicated:
        return "Each resource must appear at most once."
    names = [c.name for c in resource.configs]
    if len(set(names)) < len(names):
        return "Error due to duplicate config keys"
    return None


def _this_broker(context: RequestContext, resource: _Resource) -> tuple[ErrorCode, str | None]:
    """A BROKER_LOGGER resource names the broker whose loggers it is: this one only."""
    if resource.resource_name == str(context.broker.broker_id):
        return ErrorCode.NONE, None
    return ErrorCode.INVALID_REQUEST, (
        f"Unexpected broker id, expected {context.broker.broker_id}, "
        f"but received {resource.resource_name}"
    )


def _denied(
    context: RequestContext, resource: _Resource, operation: AclOperation
) -> ErrorCode | None:
    if context.broker.authorizer is None:
        return None
    if resource.resource_type == ResourceType.TOPIC:
        if not context.authorize(operation, AclResource.TOPIC, resource.resource_name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource.resource_type == ResourceType.GROUP_CONFIG:
        if not context.authorize(operation, AclResource.GROUP, resource.resource_name):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif not context.authorize_cluster(operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


class _Invalid(Exception):
    pass


def _list_edited(op: int, items: list[str], given: list[str]) -> str:
    """A list config's value after APPEND (the given items not there yet, at the end) or
    SUBTRACT (every given item removed)."""
    if op == APPEND:
        items = items + [v for v in given if v not in items]
    else:
        items = [v for v in items if v not in given]
    return ",".join(items)


def _incremental(
    configs: dict[str, str], current: dict[str, str], change: IncrementalChange
) -> None:
    name, op = change.name, change.config_operation
    if op == SET:
        if change.value is None:
            raise _Invalid(f"Null value not supported for {name}")
        configs[name] = change.value
    elif op == DELETE:
        configs.pop(name, None)
    elif op in (APPEND, SUBTRACT):
        items = [v for v in configs.get(name, current.get(name, "")).split(",") if v]
        given = [v for v in (change.value or "").split(",") if v]
        configs[name] = _list_edited(op, items, given)
    else:
        raise _Invalid(f"unknown config operation {op} for {name}")


TopicEdit = Callable[[dict[str, str]], dict[str, str]]


def _replace_topic_configs(resource: AlterResource) -> TopicEdit:
    """AlterConfigs replaces the whole set of overrides with the given one."""
    configs = {c.name: c.value for c in resource.configs if c.value is not None}
    return lambda _stored: dict(configs)


def _incremental_topic_edit(context: RequestContext, resource: IncrementalResource) -> TopicEdit:
    """IncrementalAlterConfigs of a topic: each change applied to the stored overrides;
    APPEND and SUBTRACT start from the effective value where the topic has no override."""

    def edit(stored: dict[str, str]) -> dict[str, str]:
        defaults = context.broker.replica_manager.default_log_config
        current = defaults.with_overrides(stored, ignore_unknown=True).to_properties()
        for change in resource.configs:
            _incremental(stored, current, change)
        return stored

    return edit


async def _alter_topic(
    context: RequestContext, resource: _Resource, edit: TopicEdit, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """One TOPIC resource of AlterConfigs / IncrementalAlterConfigs: ``edit`` turns the
    topic's overrides into the new ones, which the broker's topic admin stores and applies
    (a single node's catalog and logs; a cluster's etcd record, which every broker holding a
    replica applies, this one before answering)."""
    if resource.resource_type != ResourceType.TOPIC:
        return ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource.resource_type}"
    name = resource.resource_name
    if is_internal_topic(name):
        return ErrorCode.INVALID_TOPIC_EXCEPTION, internal_topic_refusal(
            name, "alter the configs of"
        )
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
    if name not in context.broker.replica_manager.catalog:
        return unknown
    try:
        stored = await context.broker.topic_admin.alter_topic_configs(
            name, edit, validate_only=validate_only
        )
    except (InvalidConfigError, _Invalid) as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    except MetadataUnavailableError as exc:
        return ErrorCode.REQUEST_TIMED_OUT, str(exc)
    except Exception as exc:
        # A bug: this resource fails, the request and the broker go on.
        logger.exception("altering the configs of topic %r failed", name)
        return ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot change the topic configs: {exc}"
    if stored is None:
        return unknown
    if not validate_only:
        for note in inert_topic_notes(stored):
            logger.info("topic %s: %s", name, note)
    return ErrorCode.NONE, None


# ---------------------------------------------------------------------------- broker resources

BrokerEdit = Callable[[dict[str, str]], dict[str, str]]


async def _alter_broker(
    context: RequestContext,
    resource: AlterResource | IncrementalResource,
    edit: BrokerEdit,
    validate_only: bool,
) -> tuple[ErrorCode, str | None]:
    """One BROKER resource of AlterConfigs / IncrementalAlterConfigs: ``edit`` turns the
    stored overrides of the resource into the new ones (and may refuse)."""
    dynamic = context.broker.dynamic_config
    if dynamic is None:
        return ErrorCode.INVALID_REQUEST, "this broker takes no dynamic configuration"
    names = [c.name for c in resource.configs]
    try:
        await dynamic.alter(
            resource.resource_name, edit, touched=set(names), validate_only=validate_only
        )
    except InvalidBrokerConfigRequest as exc:
        return ErrorCode.INVALID_REQUEST, str(exc)
    except InvalidBrokerConfig as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    except OSError as exc:
        logger.error("cannot store the dynamic broker configs: %s", exc)
        return ErrorCode.KAFKA_STORAGE_ERROR, f"cannot store the change: {exc.strerror or exc}"
    except MetadataStoreError as exc:
        # etcd away (restarting, cut off): retriable, as for a topic's configs.
        return ErrorCode.REQUEST_TIMED_OUT, f"the cluster metadata is unreachable: {exc}"
    except Exception as exc:
        # A bug: this resource fails, the request and broker go on.
        logger.exception("altering broker configs %r failed", resource.resource_name)
        return ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot change the broker configs: {exc}"
    return ErrorCode.NONE, None


def _null_values(resource: AlterResource) -> None:
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise InvalidBrokerConfigRequest("Null value not supported for : " + ", ".join(nulls))


def _replace_all(resource: AlterResource) -> BrokerEdit:
    """AlterConfigs: the given set replaces the stored one."""

    def edit(_stored: dict[str, str]) -> dict[str, str]:
        _null_values(resource)
        return {c.name: c.value for c in resource.configs if c.value is not None}

    return edit


def _incremental_edit(context: RequestContext, resource: IncrementalResource) -> BrokerEdit:
    """IncrementalAlterConfigs: SET and DELETE one override each; APPEND and SUBTRACT work
    on a list key's value as this resource has it (its override, else what the layers
    below give: the cluster default, the static value, Kafka's default), and APPEND adds
    only the items not there yet."""

    def edit(stored: dict[str, str]) -> dict[str, str]:
        layers = context.broker.config_layers()
        below = [layers.static, kafka_defaults()]
        if resource.resource_name != DEFAULT_ENTITY:
            below.insert(0, layers.cluster_default)
        for change in resource.configs:
            name, op = change.name, change.config_operation
            if op == SET:
                if change.value is None:
                    raise InvalidBrokerConfigRequest(f"Null value not supported for : {name}")
                stored[name] = change.value
            elif op == DELETE:
                stored.pop(name, None)
            elif op in (APPEND, SUBTRACT):
                verb = "append" if op == APPEND else "subtract"
                if not is_list_key(name):
                    raise InvalidBrokerConfigRequest(
                        f"Config value {verb} is not allowed for config key: {name}"
                    )
                current = stored.get(name)
                if current is None:
                    current = next((layer[name] for layer in below if name in layer), "")
                items = [v.strip() for v in current.split(",") if v.strip()]
                given = [v.strip() for v in (change.value or "").split(",") if v.strip()]
                stored[name] = _list_edited(op, items, given)
            else:
                raise InvalidBrokerConfigRequest(f"Unknown operations type {op}")
        return stored

    return edit


# -- GROUP configs (KIP-848 consumer groups) ------------------------------------------------


def _group_store(
    context: RequestContext,
) -> tuple[GroupCoordinator | None, GroupConfigs | None]:
    coordinator: GroupCoordinator | None = context.broker.group_coordinator
    store = None if coordinator is None else coordinator.group_configs
    return coordinator, store


def _group_config_entries(
    context: RequestContext, group_id: str
) -> tuple[ErrorCode, str | None, list[ConfigEntry]]:
    """A group's configs: its overrides (GROUP_CONFIG) and the broker's values for the
    others (DEFAULT_CONFIG), as Kafka describes a GROUP resource."""
    coordinator, store = _group_store(context)
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, "the group id is empty", []
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, []
    overrides = {} if store is None else store.overrides(group_id)
    defaults = {
        SESSION_TIMEOUT: str(coordinator.config.consumer_session_timeout_ms),
        HEARTBEAT_INTERVAL: str(coordinator.config.consumer_heartbeat_interval_ms),
        SHARE_RECORD_LOCK_DURATION: str(coordinator.config.share_record_lock_duration_ms),
        **SHARE_GROUP_CONFIG_DEFAULTS,
    }
    return (
        ErrorCode.NONE,
        None,
        [
            ConfigEntry(
                name,
                overrides.get(name, defaults[name]),
                ConfigSource.GROUP_CONFIG if name in overrides else ConfigSource.DEFAULT_CONFIG,
            )
            for name in GROUP_CONFIG_KEYS
        ],
    )


async def _alter_group(
    context: RequestContext, resource: IncrementalResource, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """IncrementalAlterConfigs of a GROUP resource: SET and DELETE of the group's overrides,
    checked against the broker's bounds (INVALID_CONFIG), written to the store, applied from
    each member's next heartbeat."""
    coordinator, store = _group_store(context)
    group_id = resource.resource_name
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, "the group id is empty"
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None

    def change(stored: dict[str, str]) -> dict[str, str]:
        configs = dict(stored)
        for item in resource.configs:
            if item.config_operation not in (SET, DELETE):
                raise InvalidGroupConfig(
                    f"{item.name}: only SET and DELETE apply to a group config"
                )
            _incremental(configs, stored, item)
        return configs

    if store is None:
        return ErrorCode.INVALID_REQUEST, "this broker keeps no group configs"
    try:
        new = await store.update(group_id, change, coordinator.config, validate_only=validate_only)
    except (InvalidGroupConfig, _Invalid) as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    except OSError as exc:
        return ErrorCode.KAFKA_STORAGE_ERROR, f"group configs not stored: {exc}"
    except MetadataStoreError as exc:
        # etcd away (restarting, cut off): retriable.
        return ErrorCode.REQUEST_TIMED_OUT, f"group configs not stored: {exc}"
    if not validate_only:
        logger.info("group %s: configs now %s", group_id, new)
    return ErrorCode.NONE, None
