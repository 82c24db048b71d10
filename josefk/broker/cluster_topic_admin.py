"""Topic administration in a cluster: the controller decides, etcd stores, brokers follow.

Owns ``ClusterTopicAdmin``, the cluster's ``TopicAdmin``. Admin clients send CreateTopics,
DeleteTopics and CreatePartitions to the controller named in Metadata; a broker that is not
the controller answers NOT_CONTROLLER so the client refreshes its metadata and retries there,
as Kafka's brokers did before request forwarding. The controller checks existence against
etcd first, then placement (Kafka's rack-aware round robin, or the request's assignments),
and writes the topic and its partition states in one fenced transaction; every broker then
takes its roles by watch, this one before it answers. Topic configs are written by any broker
to the topic's etcd record (``ClusterNode.alter_topic_configs``). Auto-created topics are the
controller's too (``ClusterNode.auto_create_topic`` forwards them).

The cluster's errors (josefk.cluster.errors) become josefk.broker.errors' here, so the
handlers map one set of types whichever implementation answered.

Imports the cluster node and josefk.cluster's errors; loaded by a cluster broker only.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection, Iterator

from josefk.broker.catalog import TopicInfo
from josefk.broker.cluster_node import ClusterNode
from josefk.broker.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    MetadataUnavailableError,
    NotControllerError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from josefk.broker.replica_manager import ReplicaManager
from josefk.broker.topic_admin import (
    ConfigChange,
    CreatedTopic,
    NewTopic,
    check_configs,
    log_inert,
    refuse_colliding,
    refuse_internal,
)
from josefk.cluster import errors as cluster_errors
from josefk.cluster.controller import ClusterController
from josefk.cluster.placement import InvalidReplicationFactorError as PlacementFactorError
from josefk.cluster.values import topic_uuid

logger = logging.getLogger(__name__)

__all__ = ["ClusterTopicAdmin"]

# The cluster's exception -> the topic admin's.
_TRANSLATED: tuple[tuple[type[BaseException], type[Exception]], ...] = (
    (cluster_errors.TopicExistsError, TopicExistsError),
    (cluster_errors.UnknownTopicError, UnknownTopicOrPartitionError),
    (cluster_errors.ControllerFencedError, NotControllerError),
    (cluster_errors.InvalidPartitionsError, InvalidPartitionsError),
    (cluster_errors.InvalidReplicaAssignmentError, InvalidReplicaAssignmentError),
    (PlacementFactorError, InvalidReplicationFactorError),
    (cluster_errors.MetadataStoreError, MetadataUnavailableError),
)


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for kind, ours in _TRANSLATED:
            if isinstance(exc, kind):
                if ours is MetadataUnavailableError:
                    raise ours(f"the cluster metadata is unreachable: {exc}") from exc
                raise ours(str(exc)) from exc
        raise


class ClusterTopicAdmin:
    """A cluster broker's topic administration; see the module docstring."""

    def __init__(self, node: ClusterNode, replicas: ReplicaManager) -> None:
        self._node = node
        self._replicas = replicas

    def _controller(self) -> ClusterController:
        node = self._node
        controller = node.controller
        if controller is None or not node.is_controller:
            raise NotControllerError(f"broker {node.broker_id} is not the controller")
        return controller

    async def _caught_up(self, name: str) -> None:
        """This broker's view holds the topic as etcd now has it, so the client's next
        request here (Metadata, DescribeConfigs) sees the change."""
        await self._node.await_topics([name])

    async def create_topic(self, topic: NewTopic, *, validate_only: bool) -> CreatedTopic:
        name = topic.name
        catalog = self._replicas.catalog
        refuse_internal(name, "create")
        refuse_colliding(catalog, name)
        controller = self._controller()
        check_configs(self._replicas.default_log_config, topic.configs)
        with _translated():
            record = await controller.create_topic(
                name,
                partitions=topic.partitions,
                replication_factor=topic.replication_factor,
                live_brokers=self._node.live_brokers(),
                configs=topic.configs,
                assignments=topic.assignments,
                validate_only=validate_only,
            )
        factor = len(topic.assignments[0]) if topic.assignments else topic.replication_factor
        if validate_only:
            return CreatedTopic(None, record.partitions, factor)
        log_inert(name, topic.configs)
        await self._caught_up(name)
        return CreatedTopic(topic_uuid(record.topic_id), record.partitions, factor)

    async def delete_topic(self, name: str) -> None:
        controller = self._controller()
        with _translated():
            await controller.delete_topic(name)

    async def create_partitions(
        self, name: str, total: int, *, assignments: list[list[int]] | None, validate_only: bool
    ) -> None:
        controller = self._controller()
        with _translated():
            await controller.create_partitions(
                name,
                total,
                live_brokers=self._node.live_brokers(),
                assignments=assignments,
                validate_only=validate_only,
            )
        if not validate_only:
            await self._caught_up(name)

    async def alter_topic_configs(
        self, name: str, change: ConfigChange, *, validate_only: bool
    ) -> dict[str, str] | None:
        defaults = self._replicas.default_log_config

        def checked(stored: dict[str, str]) -> dict[str, str]:
            configs = change(stored)
            check_configs(defaults, configs)
            return configs

        with _translated():
            return await self._node.alter_topic_configs(name, checked, validate_only=validate_only)

    def auto_create_topic(self, topic: NewTopic) -> TopicInfo | None:
        # The controller creates it (this broker forwards when it is not the controller), in
        # the background; the client asks again meanwhile, as Kafka's brokers answer.
        self._node.auto_create_topic(topic.name)
        return None

    async def await_topics(self, names: Collection[str]) -> None:
        await self._node.await_topics(names)
