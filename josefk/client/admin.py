"""The asyncio admin client: topics, partitions, configs, groups, offsets, the cluster.

Owns ``AIOAdmin`` and the plain result values it returns (``TopicDescription``,
``ConfigEntry``, ``GroupDescription``...). Per-item outcomes of batch operations come back
as ``{name: KafkaError | None}`` so a caller (the ``josefk`` command) can report each one;
the singular helpers (``create_topic``, ``delete_topic``...) raise the typed error instead.
Requests go to the controller (topic changes), the least loaded broker (reads), the group's
coordinator (group operations), the transactional id's coordinator (DescribeTransactions),
every broker (ListGroups, ListTransactions) or each partition's leader (ListOffsets,
DescribeProducers).

Imports josefk.protocol and josefk.client modules; never josefk.storage or josefk.broker.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from josefk.client.cluster import (
    COORDINATOR_TRANSACTION,
    ClientConfig,
    KafkaClient,
    find_coordinator,
)
from josefk.client.consumer import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, list_offsets
from josefk.client.consumer_protocol import decode_assignment, decode_subscription
from josefk.client.errors import KafkaError, error_for
from josefk.client.types import OffsetAndTimestamp, TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.acls import AclOperation, AclPermissionType, PatternType
from josefk.protocol.acls import ResourceType as AclResourceType
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)


class ResourceType(enum.IntEnum):
    """Config resource types of DescribeConfigs / IncrementalAlterConfigs."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    # A group's configs (KIP-848 consumer groups, KIP-932 share groups).
    GROUP = 32


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class AlterConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs operations."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: list[PartitionDescription]


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One layer's value of a config (DescribeConfigs with synonyms), highest first."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    # The key's documentation (asked with ``include_documentation``; None otherwise).
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class BrokerDescription:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerDescription]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    # "classic" or "consumer" (KIP-848); ListGroups v5 reports it.
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    subscription: list[str]
    assignment: list[TopicPartition]
    # KIP-848 consumer groups only: the member's epoch and its target assignment.
    member_epoch: int | None = None
    target_assignment: list[TopicPartition] | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    error: KafkaError | None = None
    # "consumer" for a KIP-848 group, "share" for a KIP-932 share group, with its group epoch
    # and its target's epoch.
    group_type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """What the transaction coordinator knows of one transactional id (KIP-664)."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    # -1 when no transaction is open.
    transaction_start_time_ms: int
    partitions: list[TopicPartition]
    coordinator_id: int = -1
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class ProducerState:
    """An active producer of one partition as its leader tracks it (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    # The first offset of its open transaction, -1 when none is open.
    current_transaction_start_offset: int


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A move in progress: the whole replica set now, and which replicas join and leave."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@dataclass(frozen=True, slots=True)
class LogDirPartition:
    topic: str
    partition: int
    size: int
    offset_lag: int


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory of one broker (DescribeLogDirs)."""

    path: str
    error: KafkaError | None
    partitions: list[LogDirPartition]
    total_bytes: int
    usable_bytes: int


_SCRAM_MECHANISMS: dict[int, str] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL as the ACL APIs carry it (codes from josefk.protocol.acls)."""

    resource_type: AclResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Which ACLs DescribeAcls / DeleteAcls mean: None matches any name, principal or host;
    ANY matches any type, operation or permission; pattern ANY any pattern of that name,
    MATCH every ACL that applies to a resource of that name."""

    resource_type: AclResourceType = AclResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY


def _filter_fields(acl_filter: AclBindingFilter) -> dict[str, Any]:
    """The filter under the field names DescribeAcls' request and DeleteAcls' filters share."""
    return {
        "resource_type_filter": int(acl_filter.resource_type),
        "resource_name_filter": acl_filter.resource_name,
        "pattern_type_filter": int(acl_filter.pattern_type),
        "principal_filter": acl_filter.principal,
        "host_filter": acl_filter.host,
        "operation": int(acl_filter.operation),
        "permission_type": int(acl_filter.permission),
    }


def _binding_of(
    raw: DescribeAclsResponse.DescribeAclsResource.AclDescription
    | DeleteAclsResponse.DeleteAclsFilterResult.DeleteAclsMatchingAcl,
    resource_type: int,
    name: str,
    pattern_type: int,
) -> AclBinding:
    return AclBinding(
        AclResourceType(resource_type),
        name,
        PatternType(pattern_type),
        raw.principal,
        raw.host,
        AclOperation(raw.operation),
        AclPermissionType(raw.permission_type),
    )


def _err(code: int, message: str | None = None, **context: Any) -> KafkaError | None:
    return error_for(code, message or None, **context) if code else None


class AIOAdmin:
    """An asyncio admin client.

    Usage::

        async with AIOAdmin(bootstrap_servers="127.0.0.1:9092") as admin:
            await admin.create_topic("events", num_partitions=3)
            print(await admin.describe_topics(["events"]))
    """

    def __init__(self, config: ClientConfig | None = None, **settings: Any) -> None:
        if config is None:
            settings.setdefault("allow_auto_create_topics", False)
            config = ClientConfig(**settings)
        elif settings:
            raise TypeError("pass either a ClientConfig or keyword settings, not both")
        self.config = config
        self._client = KafkaClient(config)

    async def start(self) -> None:
        await self._client.start()

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> AIOAdmin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def client(self) -> KafkaClient:
        return self._client

    async def _controller(self) -> int:
        metadata = await self._client.ensure_metadata()
        if metadata.controller_id >= 0 and metadata.controller_id in metadata.brokers:
            return metadata.controller_id
        return self._client.least_loaded_node()

    async def _to_controller(self, api_key: int, body: Any, timeout_ms: int = 30_000) -> Any:
        """A request only the controller answers. NOT_CONTROLLER (the controller moved, or
        the Metadata this client had named a controller another broker's view already
        replaced) is retried on fresh metadata with backoff, as Kafka's admin client does,
        for up to ``timeout_ms``; then the last answer is returned as it is."""
        client = self._client
        deadline = client.config.clock() + max(timeout_ms, 0) / 1000
        attempt = 0
        while True:
            response = await client.request(await self._controller(), api_key, body)
            if not _not_controller(response) or client.config.clock() >= deadline:
                return response
            client.invalidate()
            await asyncio.sleep(client._retry_backoff_s(min(attempt, 4)))
            attempt += 1

    # ------------------------------------------------------------------ cluster

    async def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster, else Metadata)."""
        node_id = self._client.least_loaded_node()
        conn = await self._client.connection(node_id)
        if conn.supports(ApiKey.DESCRIBE_CLUSTER):
            req = DescribeClusterRequest
            response: DescribeClusterResponse = await self._client.request(
                node_id, ApiKey.DESCRIBE_CLUSTER, req(include_cluster_authorized_operations=False)
            )
            if response.error_code:
                raise error_for(response.error_code, response.error_message)
            return ClusterDescription(
                response.cluster_id,
                response.controller_id,
                [BrokerDescription(b.broker_id, b.host, b.port, b.rack) for b in response.brokers],
            )
        metadata = await self._client.refresh_metadata()
        return ClusterDescription(
            metadata.cluster_id,
            metadata.controller_id,
            [
                BrokerDescription(b.node_id, b.host, b.port, b.rack)
                for b in metadata.brokers.values()
            ],
        )

    # ------------------------------------------------------------------ SCRAM users

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> dict[str, list[tuple[str, int]] | KafkaError]:
        """Per user its (mechanism, iterations), or the error for that user (KIP-554)."""
        req = DescribeUserScramCredentialsRequest
        body = req(users=None if users is None else [req.UserName(name=u) for u in users])
        response: DescribeUserScramCredentialsResponse = await self._client.request(
            self._client.least_loaded_node(), ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body
        )
        if response.error_code:
            raise error_for(response.error_code, response.error_message)
        out: dict[str, list[tuple[str, int]] | KafkaError] = {}
        for result in response.results:
            error = _err(result.error_code, result.error_message)
            out[result.user] = (
                error
                if error is not None
                else [
                    (_SCRAM_MECHANISMS.get(i.mechanism, str(i.mechanism)), i.iterations)
                    for i in result.credential_infos
                ]
            )
        return out

    async def alter_user_scram_credentials(
        self,
        *,
        upsertions: Sequence[tuple[str, str, int, bytes, bytes]] = (),
        deletions: Sequence[tuple[str, str]] = (),
    ) -> dict[str, KafkaError | None]:
        """Upsertions are (user, mechanism, iterations, salt, salted_password): the password
        is salted and hashed here, the broker never sees it. Deletions are (user, mechanism)."""
        codes = {name: code for code, name in _SCRAM_MECHANISMS.items()}
        req = AlterUserScramCredentialsRequest
        body = req(
            deletions=[
                req.ScramCredentialDeletion(name=user, mechanism=codes.get(mechanism, 0))
                for user, mechanism in deletions
            ],
            upsertions=[
                req.ScramCredentialUpsertion(
                    name=user,
                    mechanism=codes.get(mechanism, 0),
                    iterations=iterations,
                    salt=salt,
                    salted_password=salted,
                )
                for user, mechanism, iterations, salt, salted in upsertions
            ],
        )
        response: AlterUserScramCredentialsResponse = await self._client.request(
            self._client.least_loaded_node(), ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body
        )
        return {r.user: _err(r.error_code, r.error_message) for r in response.results}

    # ------------------------------------------------------------------ ACLs

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Create ACLs (CreateAcls, at the least loaded broker): per binding, in order, None
        or the error (SECURITY_DISABLED without an authorizer, INVALID_REQUEST, ...)."""
        req = CreateAclsRequest
        body = req(
            creations=[
                req.AclCreation(
                    resource_type=int(b.resource_type),
                    resource_name=b.resource_name,
                    resource_pattern_type=int(b.pattern_type),
                    principal=b.principal,
                    host=b.host,
                    operation=int(b.operation),
                    permission_type=int(b.permission),
                )
                for b in bindings
            ]
        )
        response: CreateAclsResponse = await self._client.request(
            self._client.least_loaded_node(), ApiKey.CREATE_ACLS, body
        )
        return [_err(r.error_code, r.error_message) for r in response.results]

    async def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs matching ``acl_filter`` (DescribeAcls); raises the request's error."""
        req = DescribeAclsRequest
        body = req(**_filter_fields(acl_filter))
        response: DescribeAclsResponse = await self._client.request(
            self._client.least_loaded_node(), ApiKey.DESCRIBE_ACLS, body
        )
        if response.error_code:
            raise error_for(response.error_code, response.error_message)
        return [
            _binding_of(acl, r.resource_type, r.resource_name, r.pattern_type)
            for r in response.resources
            for acl in r.acls
        ]

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[list[AclBinding] | KafkaError]:
        """Delete the ACLs matching each filter (DeleteAcls): per filter, the ACLs it
        deleted or its error."""
        req = DeleteAclsRequest
        body = req(filters=[req.DeleteAclsFilter(**_filter_fields(f)) for f in filters])
        response: DeleteAclsResponse = await self._client.request(
            self._client.least_loaded_node(), ApiKey.DELETE_ACLS, body
        )
        out: list[list[AclBinding] | KafkaError] = []
        for result in response.filter_results:
            error = _err(result.error_code, result.error_message)
            out.append(
                error
                if error is not None
                else [
                    _binding_of(m, m.resource_type, m.resource_name, m.pattern_type)
                    for m in result.matching_acls
                ]
            )
        return out

    # ------------------------------------------------------------------ topics

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        response = await self._client.fetch_metadata(None)
        return sorted(
            t.name
            for t in response.topics
            if t.name is not None and not t.error_code and (include_internal or not t.is_internal)
        )

    async def describe_topics(self, topics: Sequence[str] | None = None) -> list[TopicDescription]:
        """Partitions, leaders and replicas; raises the error of a topic that has one
        (e.g. UnknownTopicOrPartitionError)."""
        response = await self._client.fetch_metadata(list(topics) if topics is not None else None)
        out: list[TopicDescription] = []
        for t in response.topics:
            if t.error_code:
                raise error_for(t.error_code, topic=t.name)
            if t.name is None:
                # Null only for a topic asked for by id, which this client never does.
                continue
            topic_id = t.topic_id if isinstance(t.topic_id, uuid.UUID) and t.topic_id.int else None
            partitions = [
                PartitionDescription(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.replica_nodes),
                    tuple(p.isr_nodes),
                )
                for p in sorted(t.partitions, key=lambda p: p.partition_index)
            ]
            out.append(TopicDescription(t.name, topic_id, t.is_internal, partitions))
        return sorted(out, key=lambda d: d.name)

    async def create_topics(
        self,
        topics: Iterable[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout_ms: int = 30_000,
    ) -> dict[str, KafkaError | None]:
        """Create topics; ``{name: None}`` for each success, the typed error otherwise.
        -1 partitions or replication factor means the broker's default."""
        req = CreateTopicsRequest
        items = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        body = req(
            topics=[
                req.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=[],
                    configs=[
                        req.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                        for k, v in t.configs.items()
                    ],
                )
                for t in items
            ],
            timeout_ms=timeout_ms,
            validate_only=validate_only,
        )
        response: CreateTopicsResponse = await self._to_controller(
            ApiKey.CREATE_TOPICS, body, timeout_ms
        )
        result = {
            r.name: _err(r.error_code, r.error_message, topic=r.name) for r in response.topics
        }
        if not validate_only:
            self._client.invalidate()
        return result

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create one topic; raises TopicAlreadyExistsError etc."""
        result = await self.create_topics(
            [NewTopic(name, num_partitions, replication_factor, configs or {})]
        )
        error = result.get(name)
        if error is not None:
            raise error

    async def delete_topics(
        self, topics: Iterable[str], *, timeout_ms: int = 30_000
    ) -> dict[str, KafkaError | None]:
        req = DeleteTopicsRequest
        names = list(topics)

        def build(version: int) -> DeleteTopicsRequest:
            if version >= 6:
                return req(
                    topics=[req.DeleteTopicState(name=n) for n in names], timeout_ms=timeout_ms
                )
            return req(topic_names=names, timeout_ms=timeout_ms)

        response: DeleteTopicsResponse = await self._to_controller(
            ApiKey.DELETE_TOPICS, build, timeout_ms
        )
        self._client.invalidate()
        # v6+ names a result null only for a topic asked for by id, which this client never does.
        return {
            r.name: _err(r.error_code, r.error_message, topic=r.name)
            for r in response.responses
            if r.name is not None
        }

    async def delete_topic(self, name: str) -> None:
        error = (await self.delete_topics([name])).get(name)
        if error is not None:
            raise error

    async def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout_ms: int = 30_000,
    ) -> dict[str, KafkaError | None]:
        """Grow each topic to the given total number of partitions."""
        req = CreatePartitionsRequest
        body = req(
            topics=[
                req.CreatePartitionsTopic(name=n, count=c, assignments=None)
                for n, c in new_totals.items()
            ],
            timeout_ms=timeout_ms,
            validate_only=validate_only,
        )
        response: CreatePartitionsResponse = await self._to_controller(
            ApiKey.CREATE_PARTITIONS, body, timeout_ms
        )
        self._client.invalidate()
        return {r.name: _err(r.error_code, r.error_message, topic=r.name) for r in response.results}

    async def elect_leaders(
        self,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        unclean: bool = False,
        timeout_ms: int = 30_000,
    ) -> dict[TopicPartition, KafkaError | None]:
        """ElectLeaders through the controller: each partition's preferred replica (or, with
        ``unclean``, any live replica of a leaderless partition) becomes leader; all partitions
        when ``partitions`` is None. ELECTION_NOT_NEEDED comes back as that error."""
        req = ElectLeadersRequest
        grouped: dict[str, list[int]] = {}
        for tp in partitions or ():
            grouped.setdefault(tp.topic, []).append(tp.partition)
        body = req(
            election_type=1 if unclean else 0,
            topic_partitions=None
            if partitions is None
            else [req.TopicPartitions(topic=t, partitions=ps) for t, ps in grouped.items()],
            timeout_ms=timeout_ms,
        )
        response: ElectLeadersResponse = await self._to_controller(
            ApiKey.ELECT_LEADERS, body, timeout_ms
        )
        if response.error_code:
            raise error_for(response.error_code)
        self._client.invalidate()
        return {
            TopicPartition(r.topic, p.partition_id): _err(
                p.error_code, p.error_message, topic=r.topic, partition=p.partition_id
            )
            for r in response.replica_election_results
            for p in r.partition_result
        }

    async def alter_partition_reassignments(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
        timeout_ms: int = 30_000,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Move each partition to its target replicas (the first is the preferred leader), or
        cancel its move in progress (None). The controller answers once each move started;
        ``list_partition_reassignments`` shows it until the new replicas caught up and the
        old ones left."""
        req = AlterPartitionReassignmentsRequest
        grouped: dict[
            str, list[AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition]
        ] = {}
        for tp, replicas in targets.items():
            grouped.setdefault(tp.topic, []).append(
                req.ReassignableTopic.ReassignablePartition(
                    partition_index=tp.partition,
                    replicas=None if replicas is None else list(replicas),
                )
            )
        body = req(
            timeout_ms=timeout_ms,
            allow_replication_factor_change=allow_replication_factor_change,
            topics=[req.ReassignableTopic(name=t, partitions=ps) for t, ps in grouped.items()],
        )
        response: AlterPartitionReassignmentsResponse = await self._to_controller(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS, body
        )
        if response.error_code:
            raise error_for(response.error_code, response.error_message)
        self._client.invalidate()
        return {
            TopicPartition(t.name, p.partition_index): _err(
                p.error_code, p.error_message, topic=t.name, partition=p.partition_index
            )
            for t in response.responses
            for p in t.partitions
        }

    async def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None, *, timeout_ms: int = 30_000
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The moves in progress (of ``partitions``, or all)."""
        req = ListPartitionReassignmentsRequest
        grouped: dict[str, list[int]] = {}
        for tp in partitions or ():
            grouped.setdefault(tp.topic, []).append(tp.partition)
        body = req(
            timeout_ms=timeout_ms,
            topics=None
            if partitions is None
            else [
                req.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                for t, ps in grouped.items()
            ],
        )
        response: ListPartitionReassignmentsResponse = await self._to_controller(
            ApiKey.LIST_PARTITION_REASSIGNMENTS, body
        )
        if response.error_code:
            raise error_for(response.error_code, response.error_message)
        return {
            TopicPartition(t.name, p.partition_index): PartitionReassignment(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
            )
            for t in response.topics
            for p in t.partitions
        }

    async def describe_log_dirs(self, broker_id: int) -> list[LogDirDescription]:
        """One broker's log directories and the partition replicas each holds."""
        req = DescribeLogDirsRequest
        response: DescribeLogDirsResponse = await self._client.request(
            broker_id, ApiKey.DESCRIBE_LOG_DIRS, req(topics=None)
        )
        if getattr(response, "error_code", 0):
            raise error_for(response.error_code)
        return [
            LogDirDescription(
                path=result.log_dir,
                error=_err(result.error_code),
                partitions=[
                    LogDirPartition(t.name, p.partition_index, p.partition_size, p.offset_lag)
                    for t in result.topics
                    for p in t.partitions
                ],
                total_bytes=result.total_bytes,
                usable_bytes=result.usable_bytes,
            )
            for result in response.results
        ]

    async def delete_records(
        self, before: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """Move each partition's log start offset up to the given offset; returns the new
        low watermarks. Raises the first partition error."""
        await self._client.refresh_metadata({tp.topic for tp in before})
        req = DeleteRecordsRequest
        by_node: dict[
            int, dict[str, list[DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition]]
        ] = {}
        for tp, offset in before.items():
            leader = self._client.metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                raise error_for(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic=tp.topic, partition=tp.partition
                )
            by_node.setdefault(leader, {}).setdefault(tp.topic, []).append(
                req.DeleteRecordsTopic.DeleteRecordsPartition(
                    partition_index=tp.partition, offset=offset
                )
            )
        out: dict[TopicPartition, int] = {}
        for node_id, topics in by_node.items():
            body = req(
                topics=[req.DeleteRecordsTopic(name=n, partitions=p) for n, p in topics.items()],
                timeout_ms=30_000,
            )
            response: DeleteRecordsResponse = await self._client.request(
                node_id, ApiKey.DELETE_RECORDS, body
            )
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for(p.error_code, topic=t.name, partition=p.partition_index)
                    out[TopicPartition(t.name, p.partition_index)] = p.low_watermark
        return out

    # ------------------------------------------------------------------ configs

    async def describe_configs(
        self,
        resources: Iterable[tuple[ResourceType | int, str]],
        *,
        keys: Sequence[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> dict[tuple[ResourceType, str], dict[str, ConfigEntry]]:
        """Configs of each (resource type, name); broker resources go to that broker, the
        cluster-wide broker default (``(BROKER, "")``) to any. ``include_synonyms`` adds
        every layer's value of each entry (dynamic, static, default),
        ``include_documentation`` each key's documentation."""
        req = DescribeConfigsRequest
        wanted = [(ResourceType(t), n) for t, n in resources]
        by_node: dict[int, list[tuple[ResourceType, str]]] = {}
        for rtype, name in wanted:
            node = (
                int(name)
                if rtype in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and name.isdigit()
                else self._client.least_loaded_node()
            )
            by_node.setdefault(node, []).append((rtype, name))
        out: dict[tuple[ResourceType, str], dict[str, ConfigEntry]] = {}
        for node_id, items in by_node.items():
            body = req(
                resources=[
                    req.DescribeConfigsResource(
                        resource_type=int(t),
                        resource_name=n,
                        configuration_keys=list(keys) if keys is not None else None,
                    )
                    for t, n in items
                ],
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
            response: DescribeConfigsResponse = await self._client.request(
                node_id, ApiKey.DESCRIBE_CONFIGS, body
            )
            for r in response.results:
                if r.error_code:
                    raise error_for(r.error_code, r.error_message, resource=r.resource_name)
                out[(ResourceType(r.resource_type), r.resource_name)] = {
                    c.name: ConfigEntry(
                        c.name,
                        c.value,
                        _config_source(c.config_source),
                        c.read_only,
                        c.is_sensitive,
                        tuple(
                            ConfigSynonym(s.name, s.value, _config_source(s.source))
                            for s in c.synonyms
                        ),
                        c.documentation,
                    )
                    for c in r.configs
                }
        return out

    async def describe_topic_configs(self, topic: str) -> dict[str, ConfigEntry]:
        return (await self.describe_configs([(ResourceType.TOPIC, topic)]))[
            (ResourceType.TOPIC, topic)
        ]

    async def alter_configs(
        self,
        resource: tuple[ResourceType | int, str],
        changes: Mapping[str, str | tuple[AlterConfigOp, str | None] | None],
        *,
        validate_only: bool = False,
    ) -> None:
        """Incrementally change configs: a value sets, None deletes (back to the default),
        ``(AlterConfigOp.APPEND, "v")`` appends to a list config."""
        req = IncrementalAlterConfigsRequest
        rtype, name = ResourceType(resource[0]), resource[1]
        configs = []
        for key, change in changes.items():
            if isinstance(change, tuple):
                op, value = change
            elif change is None:
                op, value = AlterConfigOp.DELETE, None
            else:
                op, value = AlterConfigOp.SET, change
            configs.append(
                req.AlterConfigsResource.AlterableConfig(
                    name=key, config_operation=int(op), value=value
                )
            )
        body = req(
            resources=[
                req.AlterConfigsResource(
                    resource_type=int(rtype), resource_name=name, configs=configs
                )
            ],
            validate_only=validate_only,
        )
        node = (
            int(name)
            if rtype in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and name.isdigit()
            else self._client.least_loaded_node()
        )
        response: IncrementalAlterConfigsResponse = await self._client.request(
            node, ApiKey.INCREMENTAL_ALTER_CONFIGS, body
        )
        for r in response.responses:
            if r.error_code:
                raise error_for(r.error_code, r.error_message, resource=r.resource_name)

    # ------------------------------------------------------------------ offsets

    async def list_offsets(
        self,
        timestamps: Mapping[TopicPartition, int],
        *,
        isolation_level: str = "read_uncommitted",
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Offsets by time; use ``EARLIEST`` (-2) and ``LATEST`` (-1) for the ends. Under
        ``read_committed`` LATEST is the last stable offset instead of the high watermark."""
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation_level must be read_uncommitted or read_committed")
        return await list_offsets(
            self._client, timestamps, isolation_level=int(isolation_level == "read_committed")
        )

    EARLIEST = EARLIEST_TIMESTAMP
    LATEST = LATEST_TIMESTAMP

    # ------------------------------------------------------------------ transactions

    async def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
    ) -> list[TransactionListing]:
        """Transactional ids known to every broker's transaction coordinator, optionally only
        those in ``states`` (e.g. "Ongoing", "PrepareCommit") or of ``producer_ids``."""
        metadata = await self._client.refresh_metadata()
        req = ListTransactionsRequest
        body = req(state_filters=list(states), producer_id_filters=list(producer_ids))
        listings: dict[str, TransactionListing] = {}

        async def one(node_id: int) -> None:
            response: ListTransactionsResponse = await self._client.request(
                node_id, ApiKey.LIST_TRANSACTIONS, body
            )
            if response.error_code:
                raise error_for(response.error_code, node=node_id)
            for t in response.transaction_states:
                listings[t.transactional_id] = TransactionListing(
                    t.transactional_id, t.producer_id, t.transaction_state
                )

        await asyncio.gather(*(one(n) for n in metadata.brokers))
        return sorted(listings.values(), key=lambda t: t.transactional_id)

    async def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[TransactionDescription]:
        """Each id's state from its coordinator; an unknown id comes back with ``error``
        TRANSACTIONAL_ID_NOT_FOUND instead of raising."""
        req = DescribeTransactionsRequest
        out: list[TransactionDescription] = []
        for transactional_id in transactional_ids:
            try:
                node_id = await find_coordinator(
                    self._client, transactional_id, key_type=COORDINATOR_TRANSACTION
                )
            except KafkaError as exc:
                out.append(
                    TransactionDescription(transactional_id, "", -1, -1, -1, -1, [], error=exc)
                )
                continue
            response: DescribeTransactionsResponse = await self._client.request(
                node_id, ApiKey.DESCRIBE_TRANSACTIONS, req(transactional_ids=[transactional_id])
            )
            for t in response.transaction_states:
                out.append(
                    TransactionDescription(
                        t.transactional_id,
                        t.transaction_state,
                        t.producer_id,
                        t.producer_epoch,
                        t.transaction_timeout_ms,
                        t.transaction_start_time_ms,
                        sorted(
                            TopicPartition(topic.topic, p)
                            for topic in t.topics
                            for p in topic.partitions
                        ),
                        node_id,
                        _err(t.error_code, transactional_id=t.transactional_id),
                    )
                )
        return out

    async def describe_producers(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
        """The active producers of each partition, asked of the partition's leader."""
        wanted = [TopicPartition(*tp) for tp in partitions]
        metadata = await self._client.refresh_metadata({tp.topic for tp in wanted})
        req = DescribeProducersRequest
        out: dict[TopicPartition, list[ProducerState] | KafkaError] = {}
        by_leader: dict[int, dict[str, list[int]]] = {}
        for tp in wanted:
            leader = metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                out[tp] = error_for(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic=tp.topic, partition=tp.partition
                )
                continue
            by_leader.setdefault(leader, {}).setdefault(tp.topic, []).append(tp.partition)

        async def one(node_id: int, topics: dict[str, list[int]]) -> None:
            body = req(
                topics=[
                    req.TopicRequest(name=name, partition_indexes=parts)
                    for name, parts in topics.items()
                ]
            )
            response: DescribeProducersResponse = await self._client.request(
                node_id, ApiKey.DESCRIBE_PRODUCERS, body
            )
            for topic in response.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    if part.error_code:
                        out[tp] = error_for(
                            part.error_code,
                            part.error_message,
                            topic=tp.topic,
                            partition=tp.partition,
                        )
                        continue
                    out[tp] = [
                        ProducerState(
                            p.producer_id,
                            p.producer_epoch,
                            p.last_sequence,
                            p.last_timestamp,
                            p.coordinator_epoch,
                            p.current_txn_start_offset,
                        )
                        for p in part.active_producers
                    ]

        await asyncio.gather(*(one(n, topics) for n, topics in by_leader.items()))
        return out

    async def abort_transaction(
        self,
        tp: TopicPartition,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        """Write an abort marker for ``producer_id``'s open transaction on ``tp`` (KIP-664's
        abortTransaction: a WriteTxnMarkers to the partition's leader, as a coordinator
        would send), for a hanging transaction its coordinator no longer knows. Needs
        CLUSTER_ACTION where an authorizer runs. Raises the partition's error."""
        metadata = await self._client.refresh_metadata({tp.topic})
        leader = metadata.leader_for(tp.topic, tp.partition)
        if leader is None:
            raise error_for(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic=tp.topic, partition=tp.partition
            )
        req = WriteTxnMarkersRequest
        marker = req.WritableTxnMarker(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transaction_result=False,
            topics=[
                req.WritableTxnMarker.WritableTxnMarkerTopic(
                    name=tp.topic, partition_indexes=[tp.partition]
                )
            ],
            coordinator_epoch=coordinator_epoch,
        )
        response: WriteTxnMarkersResponse = await self._client.request(
            leader, ApiKey.WRITE_TXN_MARKERS, req(markers=[marker])
        )
        for result in response.markers:
            for topic in result.topics:
                for part in topic.partitions:
                    if part.error_code:
                        raise error_for(part.error_code, topic=topic.name, partition=tp.partition)

    # ------------------------------------------------------------------ groups

    async def list_groups(self) -> list[GroupListing]:
        """Groups known to every broker (each broker lists the groups it coordinates)."""
        metadata = await self._client.refresh_metadata()
        req = ListGroupsRequest
        listings: dict[str, GroupListing] = {}

        async def one(node_id: int) -> None:
            response: ListGroupsResponse = await self._client.request(
                node_id, ApiKey.LIST_GROUPS, req()
            )
            if response.error_code:
                raise error_for(response.error_code)
            for g in response.groups:
                listings[g.group_id] = GroupListing(
                    g.group_id,
                    g.protocol_type,
                    g.group_state,
                    (getattr(g, "group_type", "") or "classic").lower(),
                )

        await asyncio.gather(*(one(n) for n in metadata.brokers))
        return sorted(listings.values(), key=lambda g: g.group_id)

    async def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        """Each group as DescribeGroups shows it, or, for a KIP-848 consumer group (which
        DescribeGroups answers as unknown), as ConsumerGroupDescribe does."""
        out: list[GroupDescription] = []
        for group_id in group_ids:
            (classic,) = await self._describe_classic_group(group_id)
            if classic.state == "Dead" and not classic.members:
                consumer = await self._describe_consumer_group(group_id)
                if consumer is not None:
                    out.append(consumer)
                    continue
                share = await self._describe_share_group(group_id)
                if share is not None:
                    out.append(share)
                    continue
            out.append(classic)
        return out

    async def list_share_group_offsets(
        self, group_id: str
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Each partition's (share-partition start offset, lag) of share group ``group_id``
        (DescribeShareGroupOffsets; lag -1 where the broker did not say)."""
        node_id = await find_coordinator(self._client, group_id)
        req = DescribeShareGroupOffsetsRequest
        response: DescribeShareGroupOffsetsResponse = await self._client.request(
            node_id,
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            req(groups=[req.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]),
        )
        (g,) = response.groups
        if g.error_code:
            raise error_for(g.error_code, g.error_message, group=group_id)
        return {
            TopicPartition(t.topic_name, p.partition_index): (p.start_offset, p.lag)
            for t in g.topics
            for p in t.partitions
            if not p.error_code
        }

    async def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Set the share-partition start offsets of an empty share group
        (AlterShareGroupOffsets; NON_EMPTY_GROUP while it has members)."""
        node_id = await find_coordinator(self._client, group_id)
        req = AlterShareGroupOffsetsRequest
        by_topic: dict[
            str, list[AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition]
        ] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                req.AlterShareGroupOffsetsRequestPartition(
                    partition_index=tp.partition, start_offset=offset
                )
            )
        response: AlterShareGroupOffsetsResponse = await self._client.request(
            node_id,
            ApiKey.ALTER_SHARE_GROUP_OFFSETS,
            req(
                group_id=group_id,
                topics=[
                    req.AlterShareGroupOffsetsRequestTopic(topic_name=name, partitions=parts)
                    for name, parts in by_topic.items()
                ],
            ),
        )
        if response.error_code:
            raise error_for(response.error_code, response.error_message, group=group_id)
        for t in response.responses:
            for p in t.partitions:
                if p.error_code:
                    raise error_for(p.error_code, p.error_message, topic=t.topic_name)

    async def delete_share_group_offsets(self, group_id: str, topics: Sequence[str]) -> None:
        """Forget an empty share group's state for whole topics (DeleteShareGroupOffsets)."""
        node_id = await find_coordinator(self._client, group_id)
        req = DeleteShareGroupOffsetsRequest
        response: DeleteShareGroupOffsetsResponse = await self._client.request(
            node_id,
            ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            req(
                group_id=group_id,
                topics=[req.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics],
            ),
        )
        if response.error_code:
            raise error_for(response.error_code, response.error_message, group=group_id)
        for t in response.responses:
            if t.error_code:
                raise error_for(t.error_code, t.error_message, topic=t.topic_name)

    async def _describe_share_group(self, group_id: str) -> GroupDescription | None:
        """ShareGroupDescribe (KIP-932); None when the group is no share group or the broker
        does not have the API. A partition may be assigned to several members."""
        node_id = await find_coordinator(self._client, group_id)
        try:
            response: ShareGroupDescribeResponse = await self._client.request(
                node_id,
                ApiKey.SHARE_GROUP_DESCRIBE,
                ShareGroupDescribeRequest(group_ids=[group_id]),
            )
        except KafkaError:
            return None
        (g,) = response.groups
        if g.error_code:
            return None
        return GroupDescription(
            g.group_id,
            g.group_state,
            "share",
            g.assignor_name,
            [
                MemberDescription(
                    m.member_id,
                    None,
                    m.client_id,
                    m.client_host,
                    list(m.subscribed_topic_names),
                    sorted(
                        TopicPartition(t.topic_name, p)
                        for t in m.assignment.topic_partitions
                        for p in t.partitions
                    ),
                    member_epoch=m.member_epoch,
                )
                for m in g.members
            ],
            group_type="share",
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
        )

    async def _describe_consumer_group(self, group_id: str) -> GroupDescription | None:
        """ConsumerGroupDescribe (KIP-848); None when the group is no consumer group or the
        broker does not have the API."""
        node_id = await find_coordinator(self._client, group_id)
        req = ConsumerGroupDescribeRequest
        try:
            response: ConsumerGroupDescribeResponse = await self._client.request(
                node_id, ApiKey.CONSUMER_GROUP_DESCRIBE, req(group_ids=[group_id])
            )
        except KafkaError:
            return None
        (g,) = response.groups
        if g.error_code:
            return None

        def partitions(
            assignment: ConsumerGroupDescribeResponse.DescribedGroup.Member.Assignment,
        ) -> list[TopicPartition]:
            return sorted(
                TopicPartition(t.topic_name, p)
                for t in assignment.topic_partitions
                for p in t.partitions
            )

        return GroupDescription(
            g.group_id,
            g.group_state,
            "consumer",
            g.assignor_name,
            [
                MemberDescription(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    list(m.subscribed_topic_names),
                    partitions(m.assignment),
                    member_epoch=m.member_epoch,
                    target_assignment=partitions(m.target_assignment),
                )
                for m in g.members
            ],
            group_type="consumer",
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
        )

    async def _describe_classic_group(self, group_id: str) -> list[GroupDescription]:
        req = DescribeGroupsRequest
        out: list[GroupDescription] = []
        node_id = await find_coordinator(self._client, group_id)
        response: DescribeGroupsResponse = await self._client.request(
            node_id, ApiKey.DESCRIBE_GROUPS, req(groups=[group_id])
        )
        for g in response.groups:
            members = []
            for m in g.members:
                subscription: list[str] = []
                assignment: list[TopicPartition] = []
                if g.protocol_type == "consumer":
                    try:
                        subscription = (
                            decode_subscription(m.member_metadata).topics
                            if m.member_metadata
                            else []
                        )
                        assignment = (
                            decode_assignment(m.member_assignment).partitions
                            if m.member_assignment
                            else []
                        )
                    except ValueError:
                        pass
                members.append(
                    MemberDescription(
                        m.member_id,
                        m.group_instance_id,
                        m.client_id,
                        m.client_host,
                        subscription,
                        assignment,
                    )
                )
            out.append(
                GroupDescription(
                    g.group_id,
                    g.group_state,
                    g.protocol_type,
                    g.protocol_data,
                    members,
                    _err(g.error_code, getattr(g, "error_message", None), group=g.group_id),
                )
            )
        return out

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, KafkaError | None]:
        req = DeleteGroupsRequest
        out: dict[str, KafkaError | None] = {}
        for group_id in group_ids:
            node_id = await find_coordinator(self._client, group_id)
            response: DeleteGroupsResponse = await self._client.request(
                node_id, ApiKey.DELETE_GROUPS, req(groups_names=[group_id])
            )
            for r in response.results:
                out[r.group_id] = _err(r.error_code, group=r.group_id)
        return out

    async def list_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (all of them when ``partitions`` is None)."""
        from josefk.client.offsets import fetch_committed_offsets

        node_id = await find_coordinator(self._client, group_id)
        found = await fetch_committed_offsets(self._client, node_id, group_id, partitions)
        return {tp: offset for tp, offset in found.items() if offset is not None and offset >= 0}

    async def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Commit ``offsets`` on behalf of a group with no active members (reset offsets).

        The broker refuses (UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS...) while the group has
        members; stop its consumers first.
        """
        from josefk.client.offsets import commit_offsets

        node_id = await find_coordinator(self._client, group_id)
        await commit_offsets(
            self._client, node_id, group_id, dict(offsets), generation_id=-1, member_id=""
        )

    async def reset_group_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition],
        *,
        to: str | int = "earliest",
    ) -> dict[TopicPartition, int]:
        """Reset the group's offsets of ``partitions`` to "earliest", "latest", or the first
        offset at or after a timestamp (int, ms); returns what was committed."""
        if to == "earliest":
            ts = EARLIEST_TIMESTAMP
        elif to == "latest":
            ts = LATEST_TIMESTAMP
        elif isinstance(to, int):
            ts = to
        else:
            raise ValueError(f"to must be 'earliest', 'latest' or a timestamp, not {to!r}")
        found = await list_offsets(self._client, {tp: ts for tp in partitions})
        missing = [tp for tp, hit in found.items() if hit is None]
        ends = (
            await list_offsets(self._client, {tp: LATEST_TIMESTAMP for tp in missing})
            if missing
            else {}
        )
        offsets: dict[TopicPartition, int] = {}
        for tp in partitions:
            hit = found.get(tp) or ends.get(tp)
            if hit is not None:
                offsets[tp] = hit.offset
        await self.alter_group_offsets(group_id, offsets)
        return offsets


def _config_source(code: int) -> ConfigSource:
    return ConfigSource(code) if code in ConfigSource._value2member_map_ else ConfigSource.UNKNOWN


def _not_controller(response: Any) -> bool:
    """Whether a controller-bound request was answered NOT_CONTROLLER: in its top-level
    error code, or (CreateTopics, DeleteTopics, CreatePartitions, which have none) in every
    one of its results."""
    code = getattr(response, "error_code", None)
    if code is not None:
        return bool(code == ErrorCode.NOT_CONTROLLER)
    for name in ("topics", "responses", "results"):
        entries = getattr(response, name, None)
        if entries:
            return all(e.error_code == ErrorCode.NOT_CONTROLLER for e in entries)
    return False
