"""Topic administration: one interface, a single node's implementation, and its checks.

Owns ``TopicAdmin``, what the handlers of CreateTopics, DeleteTopics, CreatePartitions,
AlterConfigs (topics) and Metadata (auto-creation) call, whichever kind of broker answers:
the broker picks the implementation once at start-up and the handlers never ask which one
they have (as Kafka's ``MetadataSupport`` hides ZooKeeper or KRaft). ``LocalTopicAdmin`` is
the single node's: the topic catalog and the logs of this broker, the flows that change both
all or nothing (the replica manager only hosts and removes the partitions), client requests'
partitions written off the event loop. The cluster's (the controller decides, etcd stores;
``josefk.broker.cluster_topic_admin``) is imported only by a cluster broker, so a single
node never loads the etcd client.

The handlers check what does not depend on where topics live (the principal's ACLs, the
name's syntax, duplicate names in one request, null config values); an implementation
checks the rest in Kafka's order, starting with existence (``refuse_existing`` ...), and
raises josefk.broker.errors' types (``TopicExistsError``, ``NotControllerError``,
``InvalidReplicationFactorError`` ...) or storage and config errors, which ``error_code_for``
turns into the answer's error code.

Imports the broker's catalog, errors and replica manager, josefk.config.topic and
josefk.storage's errors; must not import josefk.protocol, the handlers or josefk.cluster.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from josefk.broker.catalog import (
    InvalidTopicError,
    TopicCatalog,
    TopicInfo,
    change_catalog,
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
from josefk.storage.errors import StorageError

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
    """The single node's topics: this broker's catalog and logs, changed together and all or
    nothing (the replica manager hosts and removes the partitions; this decides and writes
    the catalog). One broker is every replica: a replication factor other than 1 is refused
    (as Kafka refuses one above the live brokers), and assignments must name this broker.

    The order makes a crash at any point end complete or gone at the next start: the catalog
    entry is written first, with the partition count (the intent), then one log per
    partition; start-up opens every partition the catalog names and creates the missing ones.
    A failure part way removes the logs made so far and only then the entry, so a crash
    during that removal leaves the entry, which start-up completes. Partition directories
    without an entry (which start-up adopts as a topic of as many partitions as it finds)
    never come out of a creation.

    Creations raise LogCreationError (one path cannot be used: nothing is left behind, the
    log dir stays online) or KafkaStorageError (the catalog could not be written, or a disk
    failed: its log dir is offline; the logs in it cannot be removed, so the topic stays and
    the next start completes it)."""

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
        info = await self._create_topic_off_loop(name, partitions, topic.configs)
        log_inert(name, topic.configs)
        return CreatedTopic(info.topic_id, partitions, 1)

    def create_topic_now(self, name: str, partitions: int, configs: Mapping[str, str]) -> TopicInfo:
        """Create a topic and its logs on the loop, all or nothing, in the order the class
        docstring gives: the broker's internal topics at start-up, auto-creation (one
        partition by default, answered synchronously in Metadata). Configs are validated
        first (InvalidConfigError); TopicExistsError for an existing name."""
        if name in self._catalog:
            raise TopicExistsError(f"topic {name!r} already exists")
        check_configs(self._replicas.default_log_config, dict(configs))
        catalog = self._catalog
        info = change_catalog(catalog, lambda: catalog.create(name, partitions, dict(configs)))
        try:
            self._replicas.host_partitions(info, range(partitions))
        except StorageError as exc:
            if self._replicas.remove_new_partitions(info, range(partitions)):
                change_catalog(catalog, lambda: catalog.delete(name))
            logger.error("could not create topic %s: %s", name, exc)
            raise
        logger.info("created topic %s with %d partitions", name, partitions)
        return info

    def ensure_coordinator_topic(self, name: str, partitions: int, segment_bytes: int) -> None:
        """Create a coordinator's internal topic (``__consumer_offsets``,
        ``__transaction_state``, ``__share_group_state``) at start-up as Kafka does, compacted,
        unless it exists: an existing topic keeps its own partition count."""
        if self._catalog.get(name) is None:
            self.create_topic_now(
                name,
                partitions,
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(segment_bytes),
                    "compression.type": "producer",
                },
            )

    async def _create_topic_off_loop(
        self, name: str, partitions: int, configs: Mapping[str, str]
    ) -> TopicInfo:
        """``create_topic_now`` for a client's request: the same order, errors and
        all-or-nothing, but each partition's files are written and fsynced in the executor,
        so creating thousands of partitions does not hold the loop (other clients are served
        meanwhile). The catalog entry comes first, so a concurrent creation of the same name
        is refused; a deletion of the topic meanwhile stops the creation (the logs made are
        deleted)."""
        if name in self._catalog:
            raise TopicExistsError(f"topic {name!r} already exists")
        check_configs(self._replicas.default_log_config, dict(configs))
        catalog = self._catalog
        info = change_catalog(catalog, lambda: catalog.create(name, partitions, dict(configs)))
        try:
            await self._replicas.host_partitions_off_loop(
                info, range(partitions), wanted=lambda: self._still_exists(info)
            )
        except StorageError as exc:
            if self._still_exists(info) and self._replicas.remove_new_partitions(
                info, range(partitions)
            ):
                change_catalog(catalog, lambda: catalog.delete(name))
            logger.error("could not create topic %s: %s", name, exc)
            raise
        logger.info("created topic %s with %d partitions", name, partitions)
        return info

    def _still_exists(self, info: TopicInfo) -> bool:
        """Whether the catalog still names this topic (not deleted, nor deleted and made
        again) after an await."""
        current = self._catalog.get(info.name)
        return current is not None and current.topic_id == info.topic_id

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
        """The catalog entry goes first, then the logs (``ReplicaManager.remove_topic``): a
        crash between leaves directories that start-up adopts as a topic again, never an
        entry naming logs that are gone. A creation of the topic under way stops at its
        next window of partitions."""
        catalog = self._catalog
        if catalog.get(name) is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name}")
        info = change_catalog(catalog, lambda: catalog.delete(name))
        assert info is not None  # checked above, and nothing awaited since
        self._replicas.remove_topic(name, info.partitions)

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
            await self._grow(info, total)

    async def _grow(self, info: TopicInfo, total: int) -> None:
        """Grow a topic to ``total`` partitions, all or nothing, in the order (and with the
        errors) of a creation: the count in the catalog first, then the logs, each
        partition's files written in the executor."""
        catalog = self._catalog
        name = info.name
        old = info.partitions
        change_catalog(catalog, lambda: catalog.set_partitions(name, total))
        try:
            await self._replicas.host_partitions_off_loop(
                info, range(old, total), wanted=lambda: self._still_exists(info)
            )
        except StorageError as exc:
            if self._still_exists(info) and self._replicas.remove_new_partitions(
                info, range(old, total)
            ):
                change_catalog(catalog, lambda: catalog.set_partitions(name, old))
            logger.error("could not add partitions to %s: %s", name, exc)
            raise

    async def alter_topic_configs(
        self, name: str, change: ConfigChange, *, validate_only: bool
    ) -> dict[str, str] | None:
        info = self._catalog.get(name)
        if info is None:
            return None
        configs = change(dict(info.configs))
        check_configs(self._replicas.default_log_config, configs)
        if not validate_only:
            catalog = self._catalog
            change_catalog(catalog, lambda: catalog.set_configs(name, dict(configs)))
            self._replicas.topic_configs_changed(name)
        return configs

    def auto_create_topic(self, topic: NewTopic) -> TopicInfo | None:
        # On the loop, unlike CreateTopics: Metadata answers synchronously with the topic,
        # and auto-creation makes num.partitions partitions (one by default), not thousands.
        return self.create_topic_now(topic.name, topic.partitions, topic.configs)

    async def await_topics(self, names: Collection[str]) -> None:
        return None  # the catalog is the metadata: nothing to catch up with
