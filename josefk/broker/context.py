"""What a handler can reach: the broker-wide state and the request at hand.

Owns ``BrokerContext`` (built once at start-up) and ``RequestContext`` (one per request).
Must not import the handlers, the server or the network layer beyond its value types.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from josefk.broker.configs import BrokerConfigLayers
from josefk.broker.coordinator_placement import UNPLACED, CoordinatorPlacement
from josefk.broker.error_responses import error_response
from josefk.broker.fetch_session import FetchSessionCache
from josefk.broker.metadata_cache import TopicMemo
from josefk.broker.network import ConnectionInfo
from josefk.broker.security.authorizer import SUPPORTED_OPERATIONS, operations_bitfield
from josefk.protocol.acls import CLUSTER_NAME, AclOperation, ResourceType
from josefk.protocol.errors import ErrorCode
from josefk.protocol.headers import RequestHeader

if TYPE_CHECKING:
    from josefk.broker.cluster_node import ClusterNode
    from josefk.broker.dynamic_config import DynamicBrokerConfig
    from josefk.broker.group.coordinator import GroupCoordinator
    from josefk.broker.handlers import HandlerSpec
    from josefk.broker.metadata_cache import MetadataCache
    from josefk.broker.producer_ids import ProducerIdManager
    from josefk.broker.replica_manager import ReplicaManager
    from josefk.broker.security.acl_store import AclStore
    from josefk.broker.security.authorizer import Authorizer
    from josefk.broker.security.store import CredentialStore
    from josefk.broker.share.coordinator import ShareCoordinator
    from josefk.broker.share.manager import SharePartitionManager
    from josefk.broker.topic_admin import TopicAdmin
    from josefk.broker.txn.coordinator import TransactionCoordinator
    from josefk.config.broker import BrokerConfig
    from josefk.util.clock import Clock

_Response = TypeVar("_Response")


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """An advertised listener: what Metadata and DescribeCluster tell clients."""

    listener_name: str
    host: str
    port: int


@dataclass(slots=True)
class BrokerContext:
    config: BrokerConfig
    broker_id: int
    cluster_id: str
    replica_manager: ReplicaManager
    clock: Clock
    handlers: dict[int, HandlerSpec]
    # Topic administration, chosen at start-up: this broker's catalog and logs on a single
    # node, the controller and etcd in a cluster. Handlers never ask which.
    topic_admin: TopicAdmin
    endpoints: list[BrokerEndpoint] = field(default_factory=list)
    log_dirs: list[str] = field(default_factory=list)
    metrics: Any = None
    group_coordinator: GroupCoordinator | None = None
    # The TransactionCoordinator (josefk.broker.txn); None until start-up made it.
    txn_coordinator: TransactionCoordinator | None = None
    producer_ids: ProducerIdManager | None = None
    # Brokers, controller and partition leaders as clients are told (single node or etcd).
    metadata: MetadataCache | None = None
    # Which broker coordinates a group, transactional id or share partition (chosen with the
    # metadata at start-up: this broker on a single node, the leader of the key's partition
    # in a cluster). Handlers never ask which.
    coordinator_placement: CoordinatorPlacement = UNPLACED
    # The cluster's runtime (etcd, controller, replication); None on the single node. Only
    # the cluster's own APIs (ElectLeaders, partition reassignments) reach for it; no
    # handler asks whether it is None to decide anything else.
    cluster: ClusterNode | None = None
    # SCRAM credentials (josefk.broker.security.store), loaded from the first log dir.
    credentials: CredentialStore | None = None
    # The ACL authorizer and where its ACLs are kept; both None when authorizer.class.name
    # is empty (every request allowed, as without an authorizer in Kafka).
    authorizer: Authorizer | None = None
    acl_store: AclStore | None = None
    # Dynamic broker configs (KIP-226): the layers in force and how to change them.
    dynamic_config: DynamicBrokerConfig | None = None
    # Incremental fetch sessions (KIP-227), sized by max.incremental.fetch.session.cache.slots.
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)
    # Share partitions and share sessions (KIP-932, josefk.broker.share.manager).
    share_partitions: SharePartitionManager | None = None
    # The share coordinator (__share_group_state, josefk.broker.share.coordinator).
    share_coordinator: ShareCoordinator | None = None
    # The Metadata handler's topic entries, kept while the metadata's generation stands
    # (josefk.broker.metadata_cache.TopicMemo): the protocol objects, typed loosely here as
    # this module names no response class.
    metadata_topics: TopicMemo[Any] = field(default_factory=TopicMemo)

    def config_layers(self) -> BrokerConfigLayers:
        """The broker's settings by source (static, dynamic), for DescribeConfigs."""
        if self.dynamic_config is not None:
            return self.dynamic_config.layers()
        return BrokerConfigLayers.of_static(self.config)

    def endpoint_for(self, listener_name: str) -> BrokerEndpoint:
        """The advertised endpoint of the listener a request came in on."""
        for endpoint in self.endpoints:
            if endpoint.listener_name == listener_name:
                return endpoint
        return self.endpoints[0]


@dataclass(slots=True)
class RequestContext:
    broker: BrokerContext
    header: RequestHeader
    api_version: int
    connection: ConnectionInfo

    # -- authorization: one place per handler asks these ----------------------------------

    @property
    def client_host(self) -> str:
        """The peer's address without its port (what an ACL's host is compared with)."""
        return self.connection.peer.rpartition(":")[0]

    def authorize(
        self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
    ) -> bool:
        """Whether the request's principal may do ``operation`` on the resource; always
        True without an authorizer."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(
            self.connection.principal or "", self.client_host, operation, resource_type, name
        )

    def authorize_cluster(self, operation: AclOperation) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized_names(
        self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
    ) -> set[str]:
        """The names of ``names`` the principal may do ``operation`` on."""
        if self.broker.authorizer is None:
            return set(names)
        return {name for name in names if self.authorize(operation, resource_type, name)}

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether some resource of the type allows ``operation`` (Kafka's
        authorizeByResourceType)."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorizer.any_allowed_on_type(
            self.connection.principal or "", self.client_host, operation, resource_type
        )

    def refuse(self, request: Any, error: ErrorCode) -> Any:
        """The whole request answered with ``error`` in every part (as Kafka answers a
        request refused as a whole, e.g. CLUSTER_AUTHORIZATION_FAILED)."""
        return error_response(self.header.request_api_key, self.api_version, request, error)

    def refuse_as(self, answer: type[_Response], request: Any, error: ErrorCode) -> _Response:
        """``refuse`` for a handler typed with the generated classes: ``answer`` is the
        response class the refusal is (checked)."""
        response = self.refuse(request, error)
        if not isinstance(response, answer):
            raise TypeError(f"{type(response).__name__} is not {answer.__name__}")
        return response

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field for the resource: every supported operation without an
        authorizer, as Kafka answers."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return operations_bitfield(SUPPORTED_OPERATIONS.get(resource_type, ()))
        return authorizer.authorized_operations(
            self.connection.principal or "", self.client_host, resource_type, name
        )
