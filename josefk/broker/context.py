"""What a handler can reach: the broker-wide state and the request at hand.

Owns ``BrokerContext`` (built once at start-up) and ``RequestContext`` (one per request).
Must not import the handlers, the server or the network layer beyond its value types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from josefk.broker.configs import BrokerConfigLayers
from josefk.broker.network import ConnectionInfo
from josefk.protocol.headers import RequestHeader

if TYPE_CHECKING:
    from josefk.broker.dynamic_config import DynamicBrokerConfig
    from josefk.broker.handlers import HandlerSpec
    from josefk.broker.metadata_cache import MetadataCache
    from josefk.broker.producer_ids import ProducerIdManager
    from josefk.broker.replica_manager import ReplicaManager
    from josefk.broker.security.store import CredentialStore
    from josefk.config.broker import BrokerConfig
    from josefk.storage.clock import Clock


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
    endpoints: list[BrokerEndpoint] = field(default_factory=list)
    log_dirs: list[str] = field(default_factory=list)
    metrics: Any = None
    group_coordinator: Any = None
    # The TransactionCoordinator (josefk.broker.txn); None until start-up made it.
    txn_coordinator: Any = None
    producer_ids: ProducerIdManager | None = None
    # Brokers, controller and partition leaders as clients are told (single node or etcd).
    metadata: MetadataCache | None = None
    # The cluster's runtime (etcd, controller, replication); None on the single node.
    cluster: Any = None
    # SCRAM credentials (josefk.broker.security.store), loaded from the first log dir.
    credentials: CredentialStore | None = None
    # Dynamic broker configs (KIP-226): the layers in force and how to change them.
    dynamic_config: DynamicBrokerConfig | None = None

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
