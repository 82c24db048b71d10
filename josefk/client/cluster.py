"""The cluster as the client sees it: bootstrap, metadata, one connection per broker.

Owns ``ClientConfig`` (the settings every client shares), ``ClusterMetadata`` (brokers, topics
and partition leaders from the last Metadata response) and ``KafkaClient``, which producer,
consumer and admin are built on:

* bootstrap: the first Metadata request goes to a bootstrap address; later ones to any
  connected broker (the least loaded), falling back to the bootstrap list;
* one ``BrokerConnection`` per broker node, opened on demand and reopened after a failure with
  exponential backoff (``reconnect_backoff_ms`` doubling up to ``reconnect_backoff_max_ms``,
  with +-20% jitter from an injected random source so tests can pin it);
* ``request(node_id, api_key, body)`` sends through the node's connection at the negotiated
  version; ``request_leader(topic, partition, ...)`` routes to the partition's leader;
* every connection is secured alike (``ClientSecurity`` from the config's
  ``security_protocol``, ``sasl_*`` and ``ssl_*`` settings: TLS, SASL);
* metadata is refreshed on demand (``refresh_metadata``), when it is older than
  ``metadata_max_age_ms``, and by callers that see NOT_LEADER_OR_FOLLOWER,
  UNKNOWN_TOPIC_OR_PARTITION or a lost connection (``invalidate``).

Time comes from an injected monotonic clock (seconds) so tests need not sleep.

Imports josefk.protocol and josefk.client modules only; never josefk.storage or josefk.broker.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from josefk.client.connection import BodyOrBuilder, BrokerConnection
from josefk.client.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    UnknownBrokerError,
    UnknownTopicOrPartitionError,
    error_for,
)
from josefk.client.security import ClientSecurity
from josefk.protocol import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)

log = logging.getLogger("josefk.client")

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

# Errors after which the client's view of leaders may be stale.
METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH if hasattr(ErrorCode, "FENCED_LEADER_EPOCH") else -100,
        ErrorCode.UNKNOWN_LEADER_EPOCH if hasattr(ErrorCode, "UNKNOWN_LEADER_EPOCH") else -101,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
    }
)


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` or a list of ``host:port`` strings -> [(host, port)]."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        if not host:
            host, port = port, "9092"
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError(f"no bootstrap servers in {servers!r}")
    return out


@dataclass(kw_only=True)
class ClientConfig:
    """Settings shared by producer, consumer and admin (Kafka's names, snake_case)."""

    bootstrap_servers: str | Sequence[str] = DEFAULT_BOOTSTRAP
    client_id: str = "josefk-python"
    request_timeout_ms: int = 30_000
    connect_timeout_ms: int = 10_000
    metadata_max_age_ms: int = 300_000
    retry_backoff_ms: int = 100
    # KIP-580: retries back off exponentially from retry_backoff_ms up to this.
    retry_backoff_max_ms: int = 1_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1_000
    # Metadata requests may create missing topics (the broker decides, per
    # auto.create.topics.enable); on for producers and consumers as in Kafka's clients.
    allow_auto_create_topics: bool = True
    # Security (josefk.client.security has the property names and their meaning).
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    sasl_jaas_config: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_endpoint_identification_algorithm: str = "https"
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)


@dataclass(frozen=True, slots=True)
class StartedRequest:
    """A request written by ``KafkaClient.start_request``, its answer still to come."""

    conn: BrokerConnection
    future: asyncio.Future[Any]
    api_key: int
    timeout_s: float


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: dict[int, PartitionInfo]
    error_code: int = 0
    # Sorted partition ids, computed once: the producer's partitioner reads them per record.
    partition_ids: tuple[int, ...] = ()


@dataclass(slots=True)
class ClusterMetadata:
    """What the last Metadata response said; replaced as a whole on each refresh."""

    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    topic_names_by_id: dict[uuid.UUID, str] = field(default_factory=dict)

    def partitions_for(self, topic: str) -> list[int]:
        info = self.topics.get(topic)
        return sorted(info.partitions) if info is not None and not info.error_code else []

    def leader_for(self, topic: str, partition: int) -> int | None:
        info = self.topics.get(topic)
        if info is None:
            return None
        part = info.partitions.get(partition)
        if part is None or part.leader < 0:
            return None
        return part.leader


class KafkaClient:
    """Connections and metadata for one producer, consumer or admin.

    All methods run on the event loop that called ``start``. ``request`` and
    ``refresh_metadata`` may be called concurrently; concurrent refreshes share one request.
    """

    def __init__(self, config: ClientConfig | None = None, **overrides: Any) -> None:
        if config is None:
            config = ClientConfig(**overrides)
        elif overrides:
            raise TypeError("pass either a ClientConfig or keyword settings, not both")
        self.config = config
        self.metadata = ClusterMetadata()
        self._bootstrap = parse_bootstrap(config.bootstrap_servers)
        # Checked and built once (files read, TLS context made): every connection shares it.
        self.security = ClientSecurity.from_config(config)
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._failures: dict[int, int] = {}
        self._next_attempt: dict[int, float] = {}
        self._topics_of_interest: set[str] = set()
        self._all_topics = False
        self._metadata_time = -1e18
        self._refresh_task: asyncio.Task[ClusterMetadata] | None = None
        self._closed = False
        self._started = False

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        """Bootstrap: fetch the cluster's metadata (brokers, and topics of interest)."""
        if self._started:
            return
        self._started = True
        await self.refresh_metadata()

    async def close(self) -> None:
        self._closed = True
        for task in self._connecting.values():
            task.cancel()
        if self._refresh_task is not None:
            self._refresh_task.cancel()
        for conn in list(self._connections.values()):
            conn.close()
        self._connections.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ connections

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            return self._bootstrap[(-node_id - 1) % len(self._bootstrap)]
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            known = ", ".join(str(b) for b in sorted(self.metadata.brokers)) or "none"
            raise UnknownBrokerError(
                f"broker {node_id} is not in the metadata (its brokers: {known})", node_id=node_id
            )
        return broker.host, broker.port

    def _backoff_s(self, failures: int) -> float:
        cfg = self.config
        base = float(
            min(
                cfg.reconnect_backoff_max_ms,
                cfg.reconnect_backoff_ms * (2 ** max(0, failures - 1)),
            )
        )
        return base * (0.8 + 0.4 * cfg.rng.random()) / 1000.0

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id`` (negative ids are bootstrap addresses).

        Opens it if needed, waiting out the reconnect backoff of a node that failed lately.
        Raises KafkaConnectionError when the attempt fails.
        """
        if self._closed:
            raise IllegalStateError("client is closed")
        conn = self._connections.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        task = self._connecting.get(node_id)
        if task is None:
            task = asyncio.ensure_future(self._connect(node_id))
            self._connecting[node_id] = task
            task.add_done_callback(self._forget_connecting(node_id))
        return await asyncio.shield(task)

    def _forget_connecting(self, node_id: int) -> Callable[[asyncio.Task[BrokerConnection]], None]:
        def forget(_task: asyncio.Task[BrokerConnection]) -> None:
            self._connecting.pop(node_id, None)

        return forget

    async def _connect(self, node_id: int) -> BrokerConnection:
        wait = self._next_attempt.get(node_id, 0.0) - self.config.clock()
        if wait > 0:
            await asyncio.sleep(wait)
        host, port = self._address(node_id)
        try:
            conn = await BrokerConnection.open(
                host,
                port,
                node_id=node_id,
                client_id=self.config.client_id,
                timeout_s=self.config.connect_timeout_ms / 1000.0,
                security=self.security,
            )
        except KafkaError:
            failures = self._failures.get(node_id, 0) + 1
            self._failures[node_id] = failures
            self._next_attempt[node_id] = self.config.clock() + self._backoff_s(failures)
            raise
        self._failures.pop(node_id, None)
        self._next_attempt.pop(node_id, None)
        self._connections[node_id] = conn
        return conn

    def connected_nodes(self) -> list[int]:
        return [n for n, c in self._connections.items() if not c.closed]

    def least_loaded_node(self, exclude: Collection[int] = ()) -> int:
        """A node to send cluster-wide requests to: connected and least busy, else any
        known broker, else a bootstrap address (negative id); not one of ``exclude`` while
        another is left."""
        best: tuple[int, int] | None = None
        for node_id, conn in self._connections.items():
            if conn.closed or (node_id < 0 and self.metadata.brokers) or node_id in exclude:
                continue
            if best is None or conn.in_flight < best[1]:
                best = (node_id, conn.in_flight)
        if best is not None:
            return best[0]
        known = [n for n in self.metadata.brokers if n not in exclude]
        candidates = [n for n in known if self._next_attempt.get(n, 0.0) <= self.config.clock()]
        if candidates:
            return self.config.rng.choice(candidates)
        if known:
            return min(known, key=lambda n: self._next_attempt.get(n, 0.0))
        addresses = [-1 - i for i in range(len(self._bootstrap))]
        untried = [n for n in addresses if n not in exclude] or addresses
        return self.config.rng.choice(untried)

    async def request(
        self,
        node_id: int,
        api_key: int,
        body: BodyOrBuilder,
        *,
        timeout_s: float | None = None,
        expect_response: bool = True,
    ) -> Any:
        """Send one request to ``node_id`` at the negotiated version; return the response body.

        ``body`` may be a callable taking the version. Connection failures raise
        KafkaConnectionError (and mark metadata stale); no retry happens here.
        """
        conn = await self.connection(node_id)
        if timeout_s is None:
            timeout_s = self.config.request_timeout_ms / 1000.0
        try:
            return await conn.request(
                api_key, body, timeout_s=timeout_s, expect_response=expect_response
            )
        except (KafkaConnectionError, KafkaTimeoutError):
            self.invalidate()
            raise

    def start_request(
        self,
        node_id: int,
        api_key: int,
        body: BodyOrBuilder,
        *,
        timeout_s: float | None = None,
        expect_response: bool = True,
    ) -> StartedRequest | None:
        """Write a request to ``node_id`` now, on its open connection, if it can be written
        without waiting (``BrokerConnection.start_request``); else None, nothing written,
        and ``request`` is the way. Await the answer with ``wait_response``. For the
        producer's sender: its next request goes out in the same turn of the event loop as
        the answer that frees the partition."""
        conn = self._connections.get(node_id)
        if conn is None or conn.closed or self._closed:
            return None
        future = conn.start_request(api_key, body, expect_response=expect_response)
        if future is None:
            return None
        if timeout_s is None:
            timeout_s = self.config.request_timeout_ms / 1000.0
        return StartedRequest(conn, future, api_key, timeout_s)

    async def wait_response(self, started: StartedRequest) -> Any:
        """The answer to ``start_request``'s request, failing as ``request`` fails."""
        try:
            return await started.conn.wait_response(
                started.future, started.api_key, started.timeout_s
            )
        except (KafkaConnectionError, KafkaTimeoutError):
            self.invalidate()
            raise

    async def request_any(self, api_key: int, body: BodyOrBuilder, *, attempts: int = 3) -> Any:
        """Send to the least loaded node, trying other nodes on connection failures: every
        bootstrap address is tried before giving up, so one hung or foreign address in the
        list does not hide the brokers behind the others."""
        last: KafkaError | None = None
        tried: set[int] = set()
        attempts = max(attempts, len(self._bootstrap) + 1)
        for attempt in range(attempts):
            node_id = self.least_loaded_node(exclude=tried)
            if node_id in tried and last is not None and not last.retriable:
                break  # every address answered that it is no Kafka broker
            tried.add(node_id)
            try:
                return await self.request(node_id, api_key, body)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
                if exc.retriable:
                    await asyncio.sleep(self._retry_backoff_s(attempt))
        assert last is not None
        raise last

    def _retry_backoff_s(self, attempt: int) -> float:
        return min(1.0, self.config.retry_backoff_ms * (2.0**attempt) / 1000.0)

    async def version_for(self, node_id: int, api_key: int) -> int:
        return (await self.connection(node_id)).version_for(api_key)

    # ------------------------------------------------------------------ metadata

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track topics for metadata refreshes; True if any was new."""
        before = len(self._topics_of_interest)
        self._topics_of_interest.update(topics)
        return len(self._topics_of_interest) != before

    def want_all_topics(self, value: bool = True) -> None:
        self._all_topics = value

    def invalidate(self) -> None:
        """Mark metadata stale so the next ``ensure_metadata`` refreshes it."""
        self._metadata_time = -1e18

    @property
    def metadata_stale(self) -> bool:
        age_ms = (self.config.clock() - self._metadata_time) * 1000.0
        return age_ms >= self.config.metadata_max_age_ms

    async def ensure_metadata(self) -> ClusterMetadata:
        if self.metadata_stale:
            return await self.refresh_metadata()
        return self.metadata

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Fetch fresh metadata for the tracked topics (plus ``topics``, now tracked too)."""
        if topics is not None:
            self.add_topics(topics)
        task = self._refresh_task
        if task is None or task.done():
            task = asyncio.ensure_future(self._refresh())
            self._refresh_task = task
        return await asyncio.shield(task)

    async def fetch_metadata(
        self, topics: Sequence[str] | None, *, allow_auto_topic_creation: bool = False
    ) -> MetadataResponse:
        """One Metadata request (``topics`` None: all topics); returns the raw response."""
        req_cls = MetadataRequest

        def build(version: int) -> MetadataRequest:
            wanted: list[MetadataRequest.MetadataRequestTopic] | None
            if topics is None:
                wanted = None if version >= 1 else []
            else:
                wanted = [req_cls.MetadataRequestTopic(name=name) for name in topics]
            return req_cls(topics=wanted, allow_auto_topic_creation=allow_auto_topic_creation)

        response: MetadataResponse = await self.request_any(
            ApiKey.METADATA, build, attempts=max(3, len(self._bootstrap) + 1)
        )
        return response

    async def _refresh(self) -> ClusterMetadata:
        topics: list[str] | None = None if self._all_topics else sorted(self._topics_of_interest)
        response = await self.fetch_metadata(
            topics, allow_auto_topic_creation=self.config.allow_auto_create_topics
        )
        self._apply_metadata(response, full=topics is None)
        self._metadata_time = self.config.clock()
        return self.metadata

    def _apply_metadata(self, response: MetadataResponse, *, full: bool) -> None:
        brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        topics: dict[str, TopicInfo] = {} if full else dict(self.metadata.topics)
        for t in response.topics:
            if t.name is None:
                continue
            partitions = {
                p.partition_index: PartitionInfo(
                    topic=t.name,
                    partition=p.partition_index,
                    leader=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                    error_code=p.error_code,
                )
                for p in t.partitions
            }
            topic_id = t.topic_id if isinstance(t.topic_id, uuid.UUID) and t.topic_id.int else None
            topics[t.name] = TopicInfo(
                t.name, topic_id, t.is_internal, partitions, t.error_code, tuple(sorted(partitions))
            )
        self.metadata = ClusterMetadata(
            cluster_id=response.cluster_id,
            controller_id=response.controller_id,
            brokers=brokers,
            topics=topics,
            topic_names_by_id={i.topic_id: n for n, i in topics.items() if i.topic_id is not None},
        )
        # Connections to brokers that left the cluster, or moved, are closed.
        for node_id, conn in list(self._connections.items()):
            broker = brokers.get(node_id)
            if node_id >= 0 and (
                broker is None or (broker.host, broker.port) != (conn.host, conn.port)
            ):
                conn.close()
                del self._connections[node_id]

    async def wait_for_topic(self, topic: str, *, timeout_s: float | None = None) -> TopicInfo:
        """Metadata of ``topic`` with a leader for every partition, refreshing until then.

        Raises the topic's error (e.g. UnknownTopicOrPartitionError) after ``timeout_s``.
        """
        self.add_topics([topic])
        if timeout_s is None:
            timeout_s = self.config.request_timeout_ms / 1000.0
        deadline = self.config.clock() + timeout_s
        attempt = 0
        while True:
            info = self.metadata.topics.get(topic)
            if (
                info is not None
                and not info.error_code
                and info.partitions
                and all(p.leader >= 0 for p in info.partitions.values())
            ):
                return info
            if attempt > 0 and self.config.clock() >= deadline:
                if info is not None and info.error_code:
                    raise error_for(info.error_code, topic=topic)
                if info is None:
                    raise UnknownTopicOrPartitionError(topic=topic)
                raise LeaderNotAvailableError(topic=topic)
            if attempt > 0:
                await asyncio.sleep(self._retry_backoff_s(min(attempt, 4)))
            await self.refresh_metadata([topic])
            attempt += 1


COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1


async def find_coordinator(
    client: KafkaClient, key: str, *, key_type: int = COORDINATOR_GROUP, attempts: int = 6
) -> int:
    """The node id of the coordinator of group (or transactional id) ``key``.

    Retries COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS with backoff. A
    coordinator missing from the metadata's broker list is added to it so that
    ``client.connection`` can reach it.
    """
    req = FindCoordinatorRequest

    def build(version: int) -> FindCoordinatorRequest:
        if version >= 4:
            return req(key_type=key_type, coordinator_keys=[key])
        return req(key=key, key_type=key_type)

    last: KafkaError | None = None
    for attempt in range(attempts):
        if attempt:
            await asyncio.sleep(client._retry_backoff_s(attempt - 1))
        try:
            response: FindCoordinatorResponse = await client.request_any(
                ApiKey.FIND_COORDINATOR, build
            )
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            last = exc
            continue
        if getattr(response, "coordinators", None):
            entry = response.coordinators[0]
            code, node_id, host, port = entry.error_code, entry.node_id, entry.host, entry.port
            message = entry.error_message
        else:
            code, node_id, host, port = (
                response.error_code,
                response.node_id,
                response.host,
                response.port,
            )
            message = getattr(response, "error_message", None)
        if code:
            last = error_for(code, message or None, key=key)
            if not last.retriable:
                raise last
            continue
        if node_id not in client.metadata.brokers:
            client.metadata.brokers[node_id] = BrokerInfo(node_id, host, port)
        return int(node_id)
    assert last is not None
    raise last
