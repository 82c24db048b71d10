"""The cluster's metadata as values: what etcd holds, decoded, and a broker's view of it.

Owns the records stored under the cluster's prefix (``BrokerRegistration``,
``ControllerClaim``, ``TopicRecord``, ``PartitionState``), their JSON encoding, the
``MetadataSnapshot`` read at one revision, the ``MetadataEvent`` a watch reports, and
``ClusterView`` (the live copy the watcher keeps) with the ``ViewChange`` it reports. The
key layout and the rules for changing them are ``metadata_store``'s.

Pure: imports the standard library only, never the etcd client. The broker's partitions and
metadata cache use these types on a single node too (a partition's state is a
``PartitionState`` there as well), and a single-node broker must not load the etcd client.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Final

__all__ = [
    "DEFAULT_PREFIX",
    "BrokerRegistration",
    "ClusterView",
    "ControllerClaim",
    "EndpointRecord",
    "MetadataEvent",
    "MetadataSnapshot",
    "PartitionState",
    "TopicRecord",
    "VersionedPartitionState",
    "ViewChange",
    "topic_uuid",
]

# Where a cluster's keys live in etcd unless ``josefk.etcd.prefix`` says otherwise.
DEFAULT_PREFIX: Final = "/josefk"


@dataclass(frozen=True, slots=True)
class EndpointRecord:
    listener: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker. ``broker_epoch`` is the etcd revision that created the registration:
    it grows with every new registration of any broker, as Kafka's broker epoch does."""

    broker_id: int
    endpoints: tuple[EndpointRecord, ...]
    rack: str | None = None
    broker_epoch: int = -1
    # Which run of which broker wrote the registration: "host:log-dir:directory.id". Two
    # live processes cannot share one (the log dir's lock), so a registration that carries
    # this broker's own incarnation was left by a dead earlier run. None: not known.
    incarnation: str | None = None

    def encode(self) -> bytes:
        return _encode(
            {
                "broker_id": self.broker_id,
                "endpoints": [asdict(e) for e in self.endpoints],
                "rack": self.rack,
                "incarnation": self.incarnation,
            }
        )

    @classmethod
    def decode(cls, raw: bytes, *, broker_epoch: int) -> BrokerRegistration:
        data = json.loads(raw)
        return cls(
            broker_id=int(data["broker_id"]),
            endpoints=tuple(EndpointRecord(**e) for e in data["endpoints"]),
            rack=data.get("rack"),
            broker_epoch=broker_epoch,
            incarnation=data.get("incarnation"),
        )


@dataclass(frozen=True, slots=True)
class ControllerClaim:
    broker_id: int
    controller_epoch: int

    def encode(self) -> bytes:
        return _encode({"broker_id": self.broker_id, "controller_epoch": self.controller_epoch})

    @classmethod
    def decode(cls, raw: bytes) -> ControllerClaim:
        data = json.loads(raw)
        return cls(int(data["broker_id"]), int(data["controller_epoch"]))


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return _encode(asdict(self))

    @classmethod
    def decode(cls, raw: bytes) -> TopicRecord:
        data = json.loads(raw)
        return cls(data["name"], data["topic_id"], int(data["partitions"]), dict(data["configs"]))


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Kafka's partition registration: who holds the replicas, who leads, who is in sync.

    ``leader`` is -1 while no replica can lead. ``leader_epoch`` grows with every leader
    change; ``partition_epoch`` with every change of any field.

    While a reassignment moves the partition (KIP-455), ``replicas`` is the target replicas
    followed by the original ones leaving, ``adding_replicas`` the target replicas that were
    not there before and ``removing_replicas`` the original ones not in the target; both are
    empty otherwise.
    """

    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def encode(self) -> bytes:
        data: dict[str, Any] = {
            "replicas": list(self.replicas),
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "partition_epoch": self.partition_epoch,
        }
        if self.reassigning:
            data["adding_replicas"] = list(self.adding_replicas)
            data["removing_replicas"] = list(self.removing_replicas)
        return _encode(data)

    @classmethod
    def decode(cls, raw: bytes) -> PartitionState:
        data = json.loads(raw)
        return cls(
            replicas=tuple(data["replicas"]),
            leader=int(data["leader"]),
            leader_epoch=int(data["leader_epoch"]),
            isr=tuple(data["isr"]),
            partition_epoch=int(data["partition_epoch"]),
            adding_replicas=tuple(data.get("adding_replicas", ())),
            removing_replicas=tuple(data.get("removing_replicas", ())),
        )


@dataclass(frozen=True, slots=True)
class VersionedPartitionState:
    """A partition state with the etcd revision of its last write, for ``alter_partition``."""

    state: PartitionState
    mod_revision: int


@dataclass(frozen=True, slots=True)
class MetadataSnapshot:
    """Everything under the prefix as of one etcd revision."""

    revision: int
    cluster_id: str | None
    brokers: dict[int, BrokerRegistration]
    controller: ControllerClaim | None
    topics: dict[str, TopicRecord]
    partitions: dict[tuple[str, int], VersionedPartitionState]
    shutting_down: frozenset[int] = frozenset()
    # The ACL document (P/acls), None when no ACL was ever written.
    acls: bytes | None = None
    # Dynamic broker configs by stored name: "<id>" or "<default>".
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # Group configs (KIP-848's GROUP config resources) by group id.
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MetadataEvent:
    """One change under the prefix. ``value`` is None for a deletion (or lease expiry)."""

    key: str
    value: bytes | None
    mod_revision: int
    create_revision: int


def _encode(data: dict[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def topic_uuid(topic_id: str) -> uuid.UUID:
    """Kafka's printed topic id (base64-url, no padding) as a UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


@dataclass(slots=True)
class ClusterView:
    """The metadata as of ``revision``. Mutated only by the watcher, on the event loop."""

    revision: int = 0
    cluster_id: str | None = None
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    controller: ControllerClaim | None = None
    topics: dict[str, TopicRecord] = field(default_factory=dict)
    partitions: dict[tuple[str, int], VersionedPartitionState] = field(default_factory=dict)
    # Brokers that asked for a controlled shutdown.
    shutting_down: set[int] = field(default_factory=set)
    # The ACL document (P/acls) as stored; the broker's authorizer decodes it.
    acls: bytes | None = None
    # Dynamic broker configs by stored name ("<id>", "<default>").
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # Group configs (KIP-848 GROUP resources) by group id; read where they are needed.
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # Events applied to this view (any key, any kind): a reader that built something from
    # the view keeps it while this and the view object are the same. Several events share one
    # etcd revision (a transaction), so ``revision`` alone would not do.
    changes: int = 0

    @classmethod
    def of(cls, snapshot: MetadataSnapshot) -> ClusterView:
        return cls(
            snapshot.revision,
            snapshot.cluster_id,
            dict(snapshot.brokers),
            snapshot.controller,
            dict(snapshot.topics),
            dict(snapshot.partitions),
            set(snapshot.shutting_down),
            snapshot.acls,
            {name: dict(configs) for name, configs in snapshot.broker_configs.items()},
            {name: dict(configs) for name, configs in snapshot.group_configs.items()},
        )

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        """The partition's state, if it exists: its topic's record names it. (A topic's
        partition keys are written before the record that makes them visible when they take
        more than one etcd transaction; see ``EtcdMetadataStore.controller_write``.)"""
        found = self.partitions.get((topic, partition))
        if found is None or not self.names(topic, partition):
            return None
        return found.state

    def names(self, topic: str, partition: int) -> bool:
        """Whether the topic's record exists and counts ``partition`` among its own."""
        record = self.topics.get(topic)
        return record is not None and 0 <= partition < record.partitions


@dataclass(frozen=True, slots=True)
class ViewChange:
    """What changed: ``kind`` is broker, controller, topic, partition, shutdown, acls or
    broker_config; ``name`` the broker id, topic name, (topic, partition) or stored config
    name; ``removed`` when the entry went away."""

    kind: str
    name: object
    removed: bool = False
