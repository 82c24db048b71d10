"""Topic administration: one interface, a single node's implementation, and its checks.

Owns ``TopicAdmin``, what the handlers of CreateTopics, DeleteTopics, CreatePartitions,
AlterConfigs (topics) and Metadata (auto-creation) call, whichever kind of broker answers:
the broker picks the implementation once at start-up and the handlers never ask which one
they have (as Kafka's ``MetadataSupport`` hides ZooKeeper or KRaft). ``LocalTopicAdmin`` is
the single node's: the topic catalog and the logs of this broker, written off the event loop.
The cluster's (the controller decides, etcd stores; ``josefk.broker.cluster_topic_admin``)
is imported only by a cluster broker, so a single node never loads the etcd client.

The handlers check what does not depend on where topics live (the principal's ACLs, the
name's syntax, duplicate names in one request, null config values); an implementation
checks the rest in Kafka's order, starting with existence (``refuse_existing`` ...), and
raises josefk.broker.errors' types (``TopicExistsError``, ``NotControllerError``,
``InvalidReplicationFactorError`` ...) or storage and config errors, which ``error_code_for``
turns into the answer's error code.

Imports the broker's catalog, errors and replica manager, and josefk.config.topic; must not
import josefk.protocol, the handlers or josefk.cluster.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from josefk.broker.catalog import (
    InvalidTopicError,
    TopicCatalog,
    TopicInfo,
    collision_message,
    internal_topic_refusal,
    is_internal_topic,
)
from josefk.broker.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from josefk.broker.replica_manager import ReplicaManager
from josefk.config.topic import LogConfig, inert_topic_notes

logger = logging.getLogger(__name__)

__all__ = [
    "ConfigChange",
    "CreatedTopic",
    "LocalTopicAdmin",
    "NewTopic",
    "TopicAdmin",
]

# Turns a topic's stored overrides into the new ones; raises (InvalidConfigError...) to refuse.
ConfigChange = Callable[[dict[str, str]], dict[str, str]]


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create, the request's defaults (-1) already resolved from the broker's
    ``num.partitions`` and ``default.replication.factor``. With ``assignments`` (one replica
    list per partition) the partition count and replication factor are theirs."""

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)
    assignments: list[list[int]] | None = None


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """What CreateTopics answers for a topic made (or, validate-only, that would be)."""

    topic_id: uuid.UUID | None
    partitions: int
    replication_factor: int


class TopicAdmin(Protocol):
    """Topic lifecycle as the handlers see it. Every method may be called concurrently with
    the others; each raises the errors the module docstring names."""

    async def create_topic(self, topic: NewTopic, *, validate_only: bool) -> CreatedTopic:
        """Create ``topic`` (validate-only: check everything, create nothing)."""
        ...

    async def delete_topic(self, name: str) -> None:
        """Delete an existing topic with all its partitions."""
        ...

    async def create_partitions(
        self, name: str, total: int, *, assignments: list[list[int]] | None, validate_only: bool
    ) -> None:
        """Grow a topic to ``total`` partitions."""
        ...

    async def alter_topic_configs(
        self, name: str, change: ConfigChange, *, validate_only: bool
    ) -> dict[str, str] | None:
        """Replace a topic's overrides with ``change(stored ones)``; the new overrides, None
        when the topic does not exist. Returns once this broker applies them."""
        ...

    def auto_create_topic(self, topic: NewTopic) -> TopicInfo | None:
        """Metadata asked for a topic that may be auto-created (checked by the handler):
        the topic, or None while its creation is under way elsewhere (the client hears
        LEADER_NOT_AVAILABLE and asks again)."""
        ...

    async def await_topics(self, names: Collection[str]) -> None:
        """Return once this broker's metadata holds each of ``names`` that exists (a topic
        created a moment ago through another broker), or a short wait has passed."""
        ...


# -- checks both implementations make ----------------------------------------------------------


def refuse_existing(catalog: TopicCatalog, name: str) -> None:
    if name in catalog:
        raise TopicExistsError(f"Topic '{name}' already exists.")


def refuse_colliding(catalog: TopicCatalog, name: str) -> None:
    """Kafka refuses a name that differs from an existing one only in '.' against '_'
    (their metric names would collide)."""
    if name not in catalog and (colliding := catalog.colliding_topic(name)) is not None:
        raise InvalidTopicError(collision_message(name, colliding))


def refuse_internal(name: str, action: str) -> None:
    """The broker makes its internal topics itself, with the configs they need (a compacted
    log); clients may not create, delete, grow or reconfigure them."""
    if is_internal_topic(name):
        raise InvalidTopicError(internal_topic_refusal(name, action))


def check_configs(defaults: LogConfig, configs: dict[str, str]) -> None:
    """InvalidConfigError for an unknown key or a bad value."""
    defaults.with_overrides(configs)


def log_inert(name: str, configs: dict[str, str]) -> None:
    for note in inert_topic_notes(configs):
        logger.info("topic %s: %s", name, note)


# -- the single node --------------------------------------------------------------------------


class LocalTopicAdmin:
    """The single node's topics: this broker's catalog and logs. One broker is every
    replica: a replication factor other than 1 is refused (as Kafka refuses one above the
    live brokers), and assignments must name this broker. Creation is all or nothing, each
    partition's files written in the executor (``ReplicaManager.create_topic_off_loop``)."""

    def __init__(self, replicas: ReplicaManager, *, broker_id: int) -> None:
        self._replicas = replicas
        self._broker_id = broker_id

    @property
    def _catalog(self) -> TopicCatalog:
        return self._replicas.catalog

    async def create_topic(self, topic: NewTopic, *, validate_only: bool) -> CreatedTopic:
        name = topic.name
        refuse_existing(self._catalog, name)
        refuse_colliding(self._catalog, name)
        refuse_internal(name, "create")
        if topic.assignments is not None:
            self._check_assignments(topic.assignments)
            partitions = len(topic.assignments)
        else:
            partitions = topic.partitions
            if partitions <= 0:
                raise InvalidPartitionsError("Number of partitions must be larger than 0.")
            self._check_replication_factor(topic.replication_factor)
        check_configs(self._replicas.default_log_config, topic.configs)
        if validate_only:
            return CreatedTopic(None, partitions, 1)
        info = await self._replicas.create_topic_off_loop(name, partitions, topic.configs)
        log_inert(name, topic.configs)
        return CreatedTopic(info.topic_id, partitions, 1)

    def _check_replication_factor(self, factor: int) -> None:
        if factor <= 0:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if factor > 1:
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {factor} time(s): "
                "the number of brokers is only 1."
            )

    def _check_assignments(self, assignments: Sequence[Sequence[int]]) -> None:
        for index, replicas in enumerate(assignments):
            if list(replicas) != [self._broker_id]:
                raise InvalidReplicaAssignmentError(
                    f"partition {index} is assigned to brokers {list(replicas)}; "
                    f"the only broker is {self._broker_id}"
                )

    async def delete_topic(self, name: str) -> None:
        if self._catalog.get(name) is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name}")
        self._replicas.delete_topic(name)

    async def create_partitions(
        self, name: str, total: int, *, assignments: list[list[int]] | None, validate_only: bool
    ) -> None:
        info = self._catalog.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        if total <= info.partitions:
            raise InvalidPartitionsError(
                f"Topic currently has {info.partitions} partitions, which is higher than or "
                f"equal to the requested {total}."
            )
        if assignments is not None and any(list(a) != [self._broker_id] for a in assignments):
            raise InvalidReplicaAssignmentError(
                f"new partitions can only be assigned to broker {self._broker_id}"
            )
        if not validate_only:
            await self._replicas.create_partitions_off_loop(name, total)

    async def alter_topic_configs(
        self, name: str, change: ConfigChange, *, validate_only: bool
    ) -> dict[str, str] | None:
        info = self._catalog.get(name)
        if info is None:
            return None
        configs = change(dict(info.configs))
        check_configs(self._replicas.default_log_config, configs)
        if not validate_only:
            self._replicas.alter_topic_configs(name, configs)
        return configs

    def auto_create_topic(self, topic: NewTopic) -> TopicInfo | None:
        # On the loop, unlike CreateTopics: Metadata answers synchronously with the topic,
        # and auto-creation makes num.partitions partitions (one by default), not thousands.
        return self._replicas.create_topic(topic.name, topic.partitions, topic.configs)

    async def await_topics(self, names: Collection[str]) -> None:
        return None  # the catalog is the metadata: nothing to catch up with
