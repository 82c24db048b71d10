"""The broker daemon: start-up, the serving loop and graceful shutdown.

Owns ``Broker``, which builds every part from a ``BrokerConfig`` in order (log dirs and
meta.properties, the LogManager and its recovery, the topic catalog, the replica manager, the
handler registry, metrics, the listeners bound, the cluster joined) and only then accepts
connections, so that no request is served by a broker still starting (in a cluster, one
without the cluster's metadata yet); it takes them down in reverse: stop accepting, let
in-flight requests finish until a deadline, then flush, write the checkpoints and leave the
clean-shutdown marker. A start that fails part way leaves what it built to ``stop``, which
also closes listeners that were bound but never accepted. Also owns ``run_broker``, the
process entry point with signal handling.

Imports every broker part; nothing imports it but the CLI.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import functools
import gc
import logging
import os
import resource
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from josefk.broker.catalog import TopicCatalog
from josefk.broker.context import BrokerContext, BrokerEndpoint
from josefk.broker.coordinator_placement import (
    ClusterCoordinatorPlacement,
    LocalCoordinatorPlacement,
)
from josefk.broker.dispatch import RequestDispatcher
from josefk.broker.dynamic_config import (
    DEFAULT_ENTITY,
    ConnectionLimits,
    DynamicBrokerConfig,
    EtcdOverridesStore,
    FileOverridesStore,
    LogCleanerSettings,
    OverridesStore,
    entities_from_view,
)
from josefk.broker.fetch_session import FetchSessionCache
from josefk.broker.group.coordinator import GroupConfig, GroupCoordinator
from josefk.broker.group.group_configs import (
    EtcdGroupConfigStore,
    GroupConfigs,
    GroupConfigStore,
)
from josefk.broker.group.store import OFFSETS_TOPIC, TopicOffsetsStore
from josefk.broker.handlers import registered_handlers
from josefk.broker.metadata_cache import LocalMetadata
from josefk.broker.network import ListenerSpec, SocketServer, bind_listener_socket
from josefk.broker.partition import TopicPartition
from josefk.broker.producer_ids import PRODUCER_ID_BLOCK_SIZE, ProducerIdManager
from josefk.broker.purgatory import OffsetPurgatory, Purgatory
from josefk.broker.reconfigurable import ReconfigurableRegistry
from josefk.broker.replica_manager import ReplicaManager, topic_log_config
from josefk.broker.security.acl_store import EtcdAclStore, FileAclStore
from josefk.broker.security.authorizer import Authorizer
from josefk.broker.security.inter_broker import InterBrokerSecurityError
from josefk.broker.security.store import FILE_NAME as CREDENTIALS_FILE_NAME
from josefk.broker.security.store import CredentialStore, EtcdCredentialStore
from josefk.broker.security.tls import TlsConfigError, TlsListener
from josefk.broker.share.coordinator import SHARE_STATE_TOPIC, ShareCoordinator, TopicStateLog
from josefk.broker.share.manager import SharePartitionManager
from josefk.broker.share.persister import ClusterPersister
from josefk.broker.share.state_store import migrate_json_state
from josefk.broker.tls_connection import TlsConnection
from josefk.broker.topic_admin import LocalTopicAdmin, TopicAdmin
from josefk.broker.txn.coordinator import TransactionCoordinator, TxnConfig
from josefk.broker.txn.markers import ClusterMarkerWriter, LocalMarkerWriter, MarkerWriter
from josefk.broker.txn.store import TRANSACTION_STATE_TOPIC, TopicTxnStore
from josefk.cluster.errors import BrokerIdInUseError, MetadataStoreError
from josefk.config.broker import BrokerConfig
from josefk.config.properties import (
    MetaProperties,
    MetaPropertiesError,
    ensure_meta_properties,
    generate_uuid,
)
from josefk.config.topic import LogConfig
from josefk.fileio import MAPS_HOLD_DESCRIPTORS
from josefk.metrics.broker_metrics import BrokerMetrics
from josefk.metrics.collectors import (
    CleanerStats,
    FetchSessionStats,
    NetworkStats,
    PartitionLogStats,
    PurgatoryStats,
)
from josefk.metrics.exporter import MetricsExporter
from josefk.metrics.share import SharePartitionStats, ShareStats
from josefk.storage.dir_lock import LogDirLock, LogDirLockedError
from josefk.storage.index import set_index_map_limit
from josefk.storage.log_cleaner import CleanerConfig
from josefk.storage.manager import LogManager, LogManagerConfig
from josefk.storage.offsets import TxnMarker
from josefk.util.clock import Clock, SystemClock
from josefk.util.scheduler import Scheduler

if TYPE_CHECKING:
    from josefk.broker.cluster_node import ClusterNode

logger = logging.getLogger(__name__)

# At most this share of the open file limit goes to index maps when each map holds a
# descriptor (Python's mmap, without the C extension); the rest is for the .log files (one per
# segment), sockets and the like.
_INDEX_MAP_SHARE = 4
# Maps that hold no descriptor are bounded by the kernel's count of mappings per process
# instead: at most this share of vm.max_map_count, leaving the rest to the heap, thread stacks
# and libraries (a broker uses a few hundred).
_INDEX_MAP_COUNT_SHARE = 2
_DEFAULT_MAX_MAP_COUNT = 65530
_MAX_SOFT_NOFILE = 1 << 20


def _max_map_count() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return _DEFAULT_MAX_MAP_COUNT


def _bound_file_descriptors() -> None:
    """Raise the soft open file limit to the hard one (as a JVM does for Kafka), and bound
    the index maps: by ``vm.max_map_count`` where they hold no descriptor (the C extension's
    maps; 10,000 partitions map 20,000 indexes, within the default 65,530 as for Kafka), else
    by a share of the open file limit, so that a broker with 10,000 partitions (10,000 open
    .log files, two indexes each) runs under the default limits. Logged at info."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _MAX_SOFT_NOFILE if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            logger.info("raised the open file limit (RLIMIT_NOFILE) from %d to %d", soft, wanted)
            soft = wanted
        except (ValueError, OSError) as exc:
            logger.warning("could not raise the open file limit from %d: %s", soft, exc)
    limit = _MAX_SOFT_NOFILE if soft == resource.RLIM_INFINITY else soft
    if MAPS_HOLD_DESCRIPTORS:
        maps = max(64, limit // _INDEX_MAP_SHARE)
        logger.info("open file limit %d: at most %d index maps held at once", limit, maps)
    else:
        map_count = _max_map_count()
        maps = max(64, map_count // _INDEX_MAP_COUNT_SHARE)
        logger.info(
            "open file limit %d, vm.max_map_count %d: at most %d index maps held at once",
            limit,
            map_count,
            maps,
        )
    set_index_map_limit(maps)


SHUTDOWN_DEADLINE_S = 10.0
# Young-generation threshold once start-up is done (CPython's default is 700).
_GC_YOUNG_THRESHOLD = 10_000
IDLE_CHECK_INTERVAL_S = 10.0


class StartupError(Exception):
    """An operational reason the broker cannot start (a log dir that is a file or locked by
    another broker, a port in use...): ``josefk serve`` prints it as one line, exit code 1."""


class ListenError(StartupError):
    """A listener could not bind (port in use, address not local...)."""


class Broker:
    """One broker process's worth of state. ``start`` then ``stop``, both on one loop."""

    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.broker_id = config.node_id
        self.endpoints: list[BrokerEndpoint] = []
        # Blocking file work; mostly fsyncs, which the filesystem commits together when they
        # come side by side (creating or closing thousands of partitions), so more threads
        # than cores pay.
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(8, config.num_recovery_threads_per_data_dir), thread_name_prefix="io"
        )
        self._scheduler = Scheduler(self.clock)
        self._background: list[asyncio.Task[None]] = []
        self._exporter: MetricsExporter | None = None
        self._server: SocketServer | None = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        # Topic administration as the handlers use it; on a single node also the local one,
        # whose synchronous creation makes the internal topics at start-up.
        self.topic_admin: TopicAdmin | None = None
        self.local_topics: LocalTopicAdmin | None = None
        self.metrics: BrokerMetrics | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self._cluster_markers: ClusterMarkerWriter | None = None
        self.share_coordinator: ShareCoordinator | None = None
        self.share_partitions: SharePartitionManager | None = None
        self._share_persister_client: Any = None
        self._dir_locks: list[LogDirLock] = []
        # Listening sockets bound at the start of ``start`` and not yet handed to the server.
        self._prebound: dict[str, socket.socket] = {}
        # The metrics port, held from the start of ``start`` until the exporter binds it.
        self._metrics_hold: socket.socket | None = None
        self.cluster: ClusterNode | None = None
        self._credentials: EtcdCredentialStore | None = None
        # Parts that take dynamic broker configs (KIP-226) without a restart.
        self.reconfigurables = ReconfigurableRegistry()
        self.dynamic_config: DynamicBrokerConfig | None = None
        # The topic defaults of the config object they were built from (``_log_defaults``).
        self._log_defaults_of: tuple[BrokerConfig, LogConfig] | None = None

    async def start(self) -> list[BrokerEndpoint]:
        config = self.config
        _raise_open_file_limit()
        loop = asyncio.get_running_loop()
        log_dirs = [Path(d) for d in config.log_dirs]
        # The ports first: a second broker started on a port in use fails here, before it
        # creates a log dir or writes anything into one. Accepted on only at the end.
        prebound: dict[str, socket.socket] = {}
        self._prebound = prebound
        for listener in config.client_listeners():
            try:
                prebound[listener.name] = bind_listener_socket(
                    listener.bind_host or "0.0.0.0",
                    listener.port,
                    config.socket_listen_backlog_size,
                )
            except OSError as exc:
                raise ListenError(
                    f"cannot listen on {listener}: {exc.strerror or exc}"
                    " (choose another address with --listen HOST:PORT or listeners=...)"
                ) from None
        if config.metrics_enable and config.metrics_port:
            # Held, not served, until the exporter starts at the end: a port in use fails
            # the start here too, before a log dir is touched.
            try:
                self._metrics_hold = bind_listener_socket(
                    config.metrics_host or "0.0.0.0", config.metrics_port, 1
                )
            except OSError as exc:
                raise StartupError(_metrics_port_error(config, exc)) from None
        for log_dir in log_dirs:
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
                # Before anything reads or writes the dir: a second broker on it stops here.
                self._dir_locks.append(LogDirLock.acquire(log_dir))
            except LogDirLockedError as exc:
                raise StartupError(str(exc)) from None
            except OSError as exc:
                reason = (
                    "it is a file, not a directory"
                    if log_dir.exists() and not log_dir.is_dir()
                    else exc.strerror or str(exc)
                )
                raise StartupError(
                    f"cannot use log dir {log_dir}: {reason}"
                    " (set another one with --data-dir or log.dirs)"
                ) from None
        cluster_from_etcd: str | None = None
        if config.cluster_mode:
            # Imported here: the cluster node brings the etcd client, which a single node
            # never loads.
            from josefk.broker.cluster_node import ClusterNode

            try:
                self.cluster = ClusterNode(config, broker_id=self.broker_id)
            except InterBrokerSecurityError as exc:
                raise StartupError(f"invalid broker configuration: {exc}") from None
            try:
                cluster_from_etcd = await self.cluster.connect(
                    _stored_cluster_id(log_dirs) or generate_uuid()
                )
            except MetadataStoreError as exc:
                raise StartupError(
                    f"cannot reach etcd at {config.etcd_endpoints}: {exc} "
                    "(check josefk.etcd.endpoints)"
                ) from None
        try:
            cluster_id = await loop.run_in_executor(
                self._executor,
                lambda: ensure_meta_properties(
                    log_dirs, node_id=self.broker_id, cluster_id=cluster_from_etcd
                ),
            )
        except MetaPropertiesError as exc:
            raise StartupError(str(exc)) from None
        # From here on the configuration in force includes the stored dynamic overrides.
        self.dynamic_config = dynamic = await self._load_dynamic_config(log_dirs[0])
        self.config = config = dynamic.current

        default_log_config = config.default_log_config()
        catalog = TopicCatalog.load(log_dirs[0])
        _bound_file_descriptors()
        self.log_manager = LogManager(
            LogManagerConfig(
                log_dirs=tuple(log_dirs),
                retention_check_interval_ms=config.log_retention_check_interval_ms,
                flush_check_interval_ms=config.log_flush_scheduler_interval_ms,
                recovery_point_checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
                log_start_offset_checkpoint_interval_ms=(
                    config.log_flush_start_offset_checkpoint_interval_ms
                ),
                high_watermark_checkpoint_interval_ms=(
                    config.replica_high_watermark_checkpoint_interval_ms
                ),
                recovery_threads_per_data_dir=config.num_recovery_threads_per_data_dir,
                producer_id_expiration_ms=config.producer_id_expiration_ms,
                producer_id_expiration_check_interval_ms=(
                    config.producer_id_expiration_check_interval_ms
                ),
                cleaner=CleanerConfig(
                    enable=config.log_cleaner_enable,
                    threads=config.log_cleaner_threads,
                    dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
                    io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
                    io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
                    backoff_ms=config.log_cleaner_backoff_ms,
                ),
            ),
            default_log_config,
            clock=self.clock,
            scheduler=self._scheduler,
            executor=self._executor,
            topic_config=lambda topic: topic_log_config(catalog, self._log_defaults(), topic),
            on_log_dir_failure=self._log_dir_failed,
        )
        await self.log_manager.startup()
        self._background.append(loop.create_task(self._scheduler.run_forever()))
        self.reconfigurables.add(LogCleanerSettings(self.log_manager.cleaner))

        replicas = ReplicaManager(
            self.log_manager,
            catalog,
            broker_id=self.broker_id,
            default_log_config=default_log_config,
            clock=self.clock,
        )
        if self.cluster is None:
            self._adopt_unknown_logs(catalog)
            await replicas.load_off_loop()
        else:
            # The cluster's topics (__consumer_offsets among them) come from etcd once joined.
            replicas.load(only=())
        self.replica_manager = replicas
        topic_admin = self.topic_admin = self._topic_admin(replicas)
        dynamic.log_defaults_listeners.append(replicas.update_default_log_config)

        if config.metrics_enable:
            self.metrics = BrokerMetrics(node_id=self.broker_id, version=_version())
            self.metrics.watch_partition_logs(self._partition_stats)
            # Kafka's three delayed operations that josefk parks (Fetch, Produce with
            # acks=all, DeleteRecords), as kafka.server:type=DelayedOperationPurgatory.
            for operation, purgatory in (
                ("Fetch", replicas.fetch_purgatory),
                ("Produce", replicas.produce_purgatory),
                ("DeleteRecords", replicas.delete_records_purgatory),
            ):
                self.metrics.watch_purgatory(
                    operation, functools.partial(_purgatory_stats, purgatory)
                )
            for log_dir in log_dirs:
                self.metrics.log_dirs.log_dir_online(str(log_dir))
            self.metrics.watch_cleaner(self._cleaner_stats)
            # A deleted topic's series go with it (deleted by a client here, or in a cluster
            # by the controller and then by this broker's watch).
            replicas.topic_deleted_listeners.append(self.metrics.topics.remove_topic)
        self.group_coordinator = self._start_group_coordinator(replicas)
        producer_ids = await loop.run_in_executor(
            self._executor, ProducerIdManager.load, log_dirs[0]
        )
        self.txn_coordinator = self._start_txn_coordinator(replicas, producer_ids)

        fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        if self.metrics is not None:
            self.metrics.watch_fetch_sessions(
                lambda: FetchSessionStats(
                    sessions=len(fetch_sessions),
                    partitions_cached=fetch_sessions.partitions_cached(),
                    evictions=fetch_sessions.evictions,
                )
            )
        group_config = self.group_coordinator.config
        self.share_coordinator = self._start_share_coordinator(replicas)
        share_partitions = SharePartitionManager(
            self.clock,
            record_lock_duration_ms=group_config.share_record_lock_duration_ms,
            delivery_count_limit=group_config.share_delivery_count_limit,
            max_record_locks=group_config.share_partition_max_record_locks,
            persister=self._share_persister(self.share_coordinator),
        )
        if self.cluster is None:
            # The share state of josefk before __share_group_state: read once, then moved.
            await migrate_json_state(
                log_dirs[0] / "share-state", self.share_coordinator, replicas.catalog
            )
        else:
            self.cluster.leadership_listeners.append(share_partitions.leadership_changed)
        self.share_partitions = share_partitions
        if self.metrics is not None:
            share_partitions.probe = self.metrics.share
            self.share_coordinator.probe = self.metrics.share
            self.metrics.watch_share(functools.partial(self._share_stats, share_partitions))
        self.group_coordinator.share.on_member_gone.append(share_partitions.member_gone)
        share_partitions.group_lock_duration_ms = (
            self.group_coordinator.share.record_lock_duration_ms
        )

        def share_group_deleted(group_id: str, topics: frozenset[str]) -> None:
            partitions = [
                (TopicPartition(name, index), info.topic_id)
                for name in topics
                if (info := replicas.catalog.get(name)) is not None
                for index in range(info.partitions)
            ]
            share_partitions.drop_group(group_id, partitions)

        self.group_coordinator.share.on_group_deleted.append(share_group_deleted)
        replicas.topic_deleted_listeners.append(share_partitions.drop_topic)
        context = BrokerContext(
            config=config,
            broker_id=self.broker_id,
            cluster_id=cluster_id,
            replica_manager=replicas,
            clock=self.clock,
            handlers=registered_handlers(),
            topic_admin=topic_admin,
            log_dirs=[str(d.absolute()) for d in log_dirs],
            metrics=self.metrics,
            group_coordinator=self.group_coordinator,
            txn_coordinator=self.txn_coordinator,
            producer_ids=producer_ids,
            credentials=await self._open_credentials(log_dirs[0]),
            dynamic_config=dynamic,
            fetch_sessions=fetch_sessions,
            share_partitions=share_partitions,
            share_coordinator=self.share_coordinator,
        )
        if config.authorizer_class_name:
            context.authorizer = Authorizer(
                super_users=config.super_user_principals,
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
            )
            if self.cluster is None:
                try:
                    bindings = await loop.run_in_executor(
                        self._executor, FileAclStore.read, log_dirs[0]
                    )
                except (OSError, ValueError, TypeError) as exc:
                    raise StartupError(f"cannot read the ACLs in {log_dirs[0]}: {exc}") from None
                context.authorizer.replace(bindings)
                context.acl_store = FileAclStore(log_dirs[0] / "acls.json", context.authorizer)
            else:
                # As acls.json on a single node: in force before any listener opens.
                cluster_acls = EtcdAclStore(self.cluster.store, context.authorizer)
                try:
                    await cluster_acls.load()
                except MetadataStoreError as exc:
                    raise StartupError(f"cannot read the ACLs from etcd: {exc}") from None
                self.cluster.on_acls_changed = cluster_acls.apply_document
                context.acl_store = cluster_acls
        self._server = SocketServer(
            RequestDispatcher(context),
            clock=self.clock,
            max_request_bytes=config.socket_request_max_bytes,
            max_unauthenticated_bytes=config.sasl_server_max_receive_size,
            max_idle_ms=config.connections_max_idle_ms,
            queued_max_requests=config.queued_max_requests,
            queued_max_request_bytes=config.queued_max_request_bytes,
            send_buffer_bytes=config.socket_send_buffer_bytes,
            receive_buffer_bytes=config.socket_receive_buffer_bytes,
            on_connection_event=self._connection_event,
            listen_backlog=config.socket_listen_backlog_size,
            max_connections=config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
            on_oversized=self._oversized_request,
        )
        self.reconfigurables.add(ConnectionLimits(self._server))
        if self.metrics is not None:
            gate = self._server.gate
            self.metrics.watch_network(lambda: NetworkStats(gate.waiting, gate.requests))
            # On the loop thread: thread_time then reads the loop's CPU time, as it does
            # when the exporter (also on the loop) serves a scrape.
            self.metrics.watch_event_loop(time.thread_time, time.monotonic)
        # Bound now (a cluster registers the bound ports), accepted on only at the end of
        # start-up: a client connecting meanwhile waits in the backlog instead of reaching
        # handlers that would find no metadata yet and take single-node paths.
        bound: dict[str, int] = {}
        for listener in config.client_listeners():
            protocol = config.security_protocol_of(listener.name)
            spec = self._server.adopt(
                ListenerSpec(
                    listener.name,
                    listener.bind_host or "0.0.0.0",
                    listener.port,
                    protocol,
                    self._tls_connections(listener.name, protocol),
                ),
                prebound.pop(listener.name),
            )
            bound[listener.name] = spec.port
        for advertised in config.effective_advertised_listeners(bound=bound):
            port = advertised.port or bound.get(advertised.name, 0)
            self.endpoints.append(BrokerEndpoint(advertised.name, advertised.host, port))
        context.endpoints = self.endpoints
        if self.cluster is None:
            context.metadata = LocalMetadata(
                self.broker_id,
                replicas,
                lambda name: _host_port(context.endpoint_for(name)),
                rack=config.broker_rack,
            )
            context.coordinator_placement = LocalCoordinatorPlacement(
                self.broker_id, lambda name: _host_port(context.endpoint_for(name))
            )
            if self.metrics is not None:
                # A single node is its own controller (Metadata names it): the usual
                # "active controllers != 1" alert must stay quiet on a healthy one. Its
                # offline partitions are the ones in an offline log dir (leader -1).
                self.metrics.replication.watch_controller(
                    lambda: True,
                    lambda: sum(1 for p in replicas.partitions() if p.log.is_offline),
                )
        else:
            self.cluster.replicas = replicas
            if self.metrics is not None:
                cluster = self.cluster
                cluster.on_isr_changed = self.metrics.replication.isr_changed
                replication = self.metrics.replication
                cluster.on_leader_elected = lambda seconds, unclean: replication.leader_elected(
                    seconds=seconds, unclean=unclean
                )
                self.metrics.replication.watch_controller(
                    lambda: cluster.is_controller, cluster.offline_partitions
                )
            self.cluster.on_broker_configs = lambda stored: dynamic.apply_stored(
                entities_from_view(stored)
            )
            try:
                await self.cluster.join(
                    [(e.listener_name, e.host, e.port) for e in self.endpoints],
                    incarnation=_incarnation(log_dirs[0]),
                )
            except BrokerIdInUseError as exc:
                raise StartupError(
                    f"{exc} (two running brokers cannot share a broker.id: stop the other one, "
                    "or give this one its own broker.id and data dir)"
                ) from None
            context.metadata = self.cluster.metadata
            context.coordinator_placement = ClusterCoordinatorPlacement(self.cluster.metadata)
            context.cluster = self.cluster
            if isinstance(context.acl_store, EtcdAclStore):
                # The watch goes on from the snapshot join read; ignored if not newer.
                view = self.cluster.watcher.view
                context.acl_store.apply_document(view.acls, view.revision)
            store = self.cluster.store
            producer_ids.use_cluster_blocks(
                await store.allocate_producer_ids(PRODUCER_ID_BLOCK_SIZE),
                lambda: store.allocate_producer_ids(PRODUCER_ID_BLOCK_SIZE),
            )
        self._background.append(loop.create_task(self._close_idle_connections()))

        if self.metrics is not None:
            exporter = MetricsExporter(
                self.metrics.registry, host=config.metrics_host, port=config.metrics_port
            )
            self._release_metrics_hold()
            try:
                await exporter.start()
            except OSError as exc:
                raise StartupError(_metrics_port_error(config, exc)) from None
            self._exporter = exporter
        # Everything a request may need is in place: the endpoints, the metadata and, in a
        # cluster, the membership, the ACLs as of the join and a producer id block.
        self._server.start_accepting()
        return self.endpoints

    def _topic_admin(self, replicas: ReplicaManager) -> TopicAdmin:
        """The topic administration this broker's handlers use, chosen once: the single
        node's catalog and logs, or the cluster's controller."""
        if self.cluster is None:
            self.local_topics = LocalTopicAdmin(replicas, broker_id=self.broker_id)
            return self.local_topics
        # A cluster broker only: it imports the cluster node (and so the etcd client).
        from josefk.broker.cluster_topic_admin import ClusterTopicAdmin

        return ClusterTopicAdmin(self.cluster, replicas)

    def _local_topics(self) -> LocalTopicAdmin:
        """The single node's topic admin (made by ``_topic_admin``), for its internal topics."""
        if self.local_topics is None:
            raise RuntimeError("a cluster broker's topics are the controller's")
        return self.local_topics

    def _release_metrics_hold(self) -> None:
        hold, self._metrics_hold = self._metrics_hold, None
        if hold is not None:
            hold.close()

    async def _load_dynamic_config(self, first_log_dir: Path) -> DynamicBrokerConfig:
        """KIP-226: this broker's stored dynamic overrides (the first log dir's file, or
        etcd in a cluster) over the static configuration."""
        store: OverridesStore
        own = str(self.broker_id)
        if self.cluster is not None:
            etcd = EtcdOverridesStore(self.cluster.store)
            stored = await etcd.load()
            store = etcd
        else:
            try:
                file = await asyncio.get_running_loop().run_in_executor(
                    self._executor, FileOverridesStore.load, first_log_dir
                )
            except (OSError, ValueError) as exc:
                raise StartupError(str(exc)) from None
            stored = {DEFAULT_ENTITY: file.overrides(DEFAULT_ENTITY), own: file.overrides(own)}
            store = file
        return DynamicBrokerConfig(
            self.config,
            broker_id=self.broker_id,
            registry=self.reconfigurables,
            store=store,
            stored=stored,
        )

    def _log_defaults(self) -> LogConfig:
        if self.replica_manager is not None:
            return self.replica_manager.default_log_config
        assert self.dynamic_config is not None
        current = self.dynamic_config.current
        cached = self._log_defaults_of
        if cached is None or cached[0] is not current:
            # Asked once per partition while the logs load (before the replica manager
            # exists); building it renders the whole broker config as properties, about
            # 2 ms, which made up half of a 10,000-partition start-up. The config is
            # frozen: a dynamic change brings a new object, hence the identity check.
            cached = self._log_defaults_of = (current, current.default_log_config())
        return cached[1]

    async def _open_credentials(self, log_dir: Path) -> CredentialStore:
        """SCRAM users: in etcd on a cluster (a user added on any broker logs in on every
        one), else in the first log dir's file."""
        if self.cluster is None:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, CredentialStore.load, log_dir)
        from josefk.cluster.credentials import CredentialRecords

        store = EtcdCredentialStore(CredentialRecords(self.cluster.store))
        await store.start()
        self._credentials = store
        if (log_dir / CREDENTIALS_FILE_NAME).exists():
            # A single node's users do not move to etcd by themselves: say so once.
            logger.warning(
                "%s is not read on a cluster: SCRAM users live in etcd (%d there); add the "
                "file's users again with josefk users add (--etcd ENDPOINTS before the brokers "
                "start)",
                log_dir / CREDENTIALS_FILE_NAME,
                len(store.users()),
            )
        return store

    @property
    def metrics_port(self) -> int | None:
        return self._exporter.port if self._exporter is not None else None

    def _adopt_unknown_logs(self, catalog: TopicCatalog) -> None:
        """Partitions on disk that the catalog does not know (a log dir written by Kafka,
        or a crash between creating a log and saving the catalog) become topics again."""
        assert self.log_manager is not None
        found: dict[str, int] = {}
        for log in self.log_manager.all_logs():
            topic, partition = log.topic_partition
            found[topic] = max(found.get(topic, 0), partition + 1)
        for topic, partitions in sorted(found.items()):
            info = catalog.get(topic)
            if info is None:
                logger.warning("adopting topic %s found on disk (%d partitions)", topic, partitions)
                catalog.adopt(topic, partitions)
            elif info.partitions < partitions:
                catalog.set_partitions(topic, partitions)

    def _group_configs(self) -> GroupConfigs:
        """Per-group configs (KIP-848): the single node's file, or etcd in a cluster (read
        from the watched view, written by compare-and-swap)."""
        if self.cluster is None:
            return GroupConfigStore.load(self.config.log_dirs[0])
        cluster = self.cluster
        return EtcdGroupConfigStore(
            lambda: cluster.watcher.view.group_configs, cluster.store.update_group_configs
        )

    def _start_group_coordinator(self, replicas: ReplicaManager) -> GroupCoordinator:
        """Create ``__consumer_offsets`` if missing, rebuild the groups from it (before any
        listener opens) and schedule offset retention."""
        config = self.config
        if self.cluster is None:
            store = TopicOffsetsStore.ensure_topic(
                replicas,
                self._local_topics(),
                partitions=config.offsets_topic_num_partitions,
                segment_bytes=config.offsets_topic_segment_bytes,
            )
        else:
            # The controller creates the topic; each broker coordinates the groups of the
            # partitions it leads, loading them as it becomes leader.
            store = TopicOffsetsStore(
                replicas, default_partitions=config.offsets_topic_num_partitions
            )
        coordinator = GroupCoordinator(
            GroupConfig.from_broker_config(config),
            store,
            scheduler=self._scheduler,
            clock=self.clock,
            probe=self.metrics.groups if self.metrics is not None else None,
            topics=replicas.catalog,
            group_configs=self._group_configs(),
        )
        self._load_or_follow(coordinator, OFFSETS_TOPIC)
        coordinator.start()
        replicas.topic_deleted_listeners.append(coordinator.remove_offsets_of_topic)

        def complete_txn_offsets(tp: TopicPartition, marker: TxnMarker) -> None:
            # A transaction's marker on an offsets partition completes its pending
            # TxnOffsetCommit offsets (KIP-98).
            if tp.topic == OFFSETS_TOPIC:
                coordinator.complete_txn(
                    tp.partition, marker.producer_id, committed=marker.committed
                )

        replicas.txn_marker_listeners.append(complete_txn_offsets)
        if self.metrics is not None:

            def high_watermark(topic: str, partition: int) -> int | None:
                found = replicas.get_partition(topic, partition)
                return None if found is None else found.log.high_watermark

            self.metrics.watch_groups(lambda: coordinator.group_stats(high_watermark))
        return coordinator

    def _start_txn_coordinator(
        self, replicas: ReplicaManager, producer_ids: ProducerIdManager
    ) -> TransactionCoordinator:
        """Create ``__transaction_state`` if missing and rebuild the transactional ids from
        it (single node, before any listener opens), or follow its leadership (cluster);
        schedule the timeout and expiration checks."""
        config = self.config
        txn_config = TxnConfig.from_broker_config(config)
        local = LocalMarkerWriter(replicas)
        markers: MarkerWriter = local
        if self.cluster is None:
            store = TopicTxnStore.ensure_topic(
                replicas,
                self._local_topics(),
                partitions=config.transaction_state_log_num_partitions,
                segment_bytes=config.transaction_state_log_segment_bytes,
            )
        else:
            store = TopicTxnStore(replicas, partitions=config.transaction_state_log_num_partitions)
            cluster = self.cluster
            self._cluster_markers = ClusterMarkerWriter(
                local,
                lambda: cluster.metadata,
                cluster.broker_address,
                broker_id=self.broker_id,
                timeout_s=config.replica_socket_timeout_ms / 1000,
                security=cluster.inter_broker_security,
            )
            markers = self._cluster_markers
        coordinator = TransactionCoordinator(
            txn_config,
            store,
            markers,
            producer_ids.generate_producer_id,
            scheduler=self._scheduler,
            clock=self.clock,
        )
        self._load_or_follow(coordinator, TRANSACTION_STATE_TOPIC)
        coordinator.start()
        return coordinator

    def _start_share_coordinator(self, replicas: ReplicaManager) -> ShareCoordinator:
        """Create ``__share_group_state`` if missing and replay it (single node), or follow
        its leadership (cluster)."""
        config = self.config
        partitions = config.share_coordinator_state_topic_num_partitions
        if self.cluster is None:
            log = TopicStateLog.ensure_topic(
                replicas,
                self._local_topics(),
                partitions=partitions,
                segment_bytes=config.share_coordinator_state_topic_segment_bytes,
            )
        else:
            log = TopicStateLog(replicas, partitions=partitions)
        coordinator = ShareCoordinator(
            log,
            self.clock,
            updates_per_snapshot=config.share_coordinator_snapshot_update_records_per_snapshot,
        )
        self._load_or_follow(coordinator, SHARE_STATE_TOPIC)
        return coordinator

    def _share_persister(self, coordinator: ShareCoordinator) -> Any:
        """Who share partitions write their state to: the coordinator itself on one node;
        in a cluster the leader of the key's ``__share_group_state`` partition."""
        if self.cluster is None:
            return coordinator
        cluster = self.cluster
        self._share_persister_client = ClusterPersister(
            coordinator,
            lambda: cluster.metadata,
            cluster.broker_address,
            broker_id=self.broker_id,
            timeout_s=self.config.replica_socket_timeout_ms / 1000,
            security=cluster.inter_broker_security,
        )
        return self._share_persister_client

    def _load_or_follow(
        self,
        coordinator: GroupCoordinator | TransactionCoordinator | ShareCoordinator,
        topic: str,
    ) -> None:
        """A coordinator of an internal topic's partitions: on one node it loads them all
        now (before any listener opens); in a cluster it loads a partition when this broker
        becomes its leader and drops it when it stops leading."""
        if self.cluster is None:
            coordinator.load()
            return
        coordinator.coordinate_by_leadership()

        def follow_leadership(tp: TopicPartition, leads: bool) -> None:
            if tp.topic == topic:
                if leads:
                    coordinator.load_partition(tp.partition)
                else:
                    coordinator.unload_partition(tp.partition)

        self.cluster.leadership_listeners.append(follow_leadership)

    def _share_stats(self, share_partitions: SharePartitionManager) -> ShareStats:
        groups: dict[str, int] = {}
        coordinator = self.group_coordinator
        if coordinator is not None:
            for group in coordinator.share_groups.values():
                groups[group.state] = groups.get(group.state, 0) + 1
        sessions, session_partitions, partitions = share_partitions.stats()
        return ShareStats(
            groups_by_state=groups,
            sessions=sessions,
            session_partitions=session_partitions,
            partitions=tuple(
                SharePartitionStats(group, tp.topic, tp.partition, messages, batches)
                for group, tp, messages, batches in partitions
            ),
        )

    def _cleaner_stats(self) -> CleanerStats:
        assert self.log_manager is not None
        # As of the cleaner's last pass (each pass measures every compacted log): a scrape
        # does not walk the logs again.
        status = self.log_manager.cleaner.status
        return CleanerStats(
            max_dirty_percent=status.max_dirty_percent,
            recopy_percent=status.recopy_percent,
            max_clean_time_secs=status.max_clean_time_secs,
            max_buffer_utilization_percent=status.max_buffer_utilization_percent,
            time_since_last_run_ms=(
                None
                if status.last_run_ms is None
                else self.clock.milliseconds() - status.last_run_ms
            ),
            uncleanable_partitions=status.uncleanable_partitions,
            runs=status.runs,
            bytes_read=status.bytes_read,
            bytes_written=status.bytes_written,
        )

    def _partition_stats(self) -> list[PartitionLogStats]:
        replicas = self.replica_manager
        if replicas is None:
            return []
        stats = []
        for partition in replicas.partitions():
            log = partition.log
            if log.is_offline:
                continue
            leads = partition.is_leader
            lags: tuple[tuple[int, int], ...] = ()
            if leads:
                lags = tuple(
                    (b, max(log.log_end_offset - max(p.log_end_offset, 0), 0))
                    for b in partition.replicas
                    if b != partition.local_broker_id and (p := partition.progress(b)) is not None
                )
            stats.append(
                PartitionLogStats(
                    topic=partition.tp.topic,
                    partition=partition.tp.partition,
                    size_bytes=log.size(),
                    num_segments=log.num_segments,
                    log_start_offset=log.log_start_offset,
                    log_end_offset=log.log_end_offset,
                    high_watermark=log.high_watermark,
                    is_leader=leads,
                    replicas=len(partition.replicas),
                    in_sync=len(partition.isr),
                    min_insync=log.config.min_insync_replicas,
                    follower_lags=lags,
                    leader=partition.leader_id,
                    fetcher_lag=None if leads else partition.fetcher_lag,
                )
            )
        return stats

    def _tls_connections(
        self, listener_name: str, protocol: str
    ) -> functools.partial[TlsConnection] | None:
        """The connection factory of an SSL or SASL_SSL listener, whose TLS context holder
        joins the reconfigurables (new keystores without a restart); None for the others."""
        if protocol not in ("SSL", "SASL_SSL"):
            return None
        try:
            holder = TlsListener(
                listener_name,
                protocol,
                static_settings=self.config.ssl_settings(listener_name),
                handshake_timeout_ms=self.config.ssl_handshake_timeout_ms,
                on_handshake=self._tls_handshake,
            )
        except TlsConfigError as exc:
            raise StartupError(str(exc)) from None
        self.reconfigurables.add(holder)
        return functools.partial(TlsConnection, tls=holder)

    def _tls_handshake(self, listener_name: str, succeeded: bool, reason: str) -> None:
        if self.metrics is None:
            return
        if not succeeded:
            self.metrics.sockets.tls_handshake_failed(listener_name, reason)
        elif self.config.security_protocol_of(listener_name) == "SSL":
            # SASL_SSL clients are counted when SASL authenticates them.
            self.metrics.sockets.authentication(listener_name, succeeded=True)

    def _connection_event(self, listener_name: str, opened: bool) -> None:
        if self.metrics is not None:
            if opened:
                self.metrics.sockets.connection_opened(listener_name)
            else:
                self.metrics.sockets.connection_closed(listener_name)

    def _oversized_request(self, listener_name: str) -> None:
        if self.metrics is not None:
            self.metrics.sockets.oversized_request(listener_name)

    def _log_dir_failed(self, log_dir: Path, error: BaseException) -> None:
        logger.error("log dir %s is offline: %s", log_dir, error)
        if self.metrics is not None:
            self.metrics.log_dirs.log_dir_offline(str(log_dir))

    async def _close_idle_connections(self) -> None:
        # Often enough that an idle connection goes within 1.5x connections.max.idle.ms.
        interval = min(IDLE_CHECK_INTERVAL_S, self.config.connections_max_idle_ms / 2000)
        while True:
            await asyncio.sleep(max(interval, 0.05))
            if self._server is not None:
                self._server.close_idle_connections()

    async def stop(self, deadline_s: float = SHUTDOWN_DEADLINE_S) -> None:
        """Stop accepting, finish in-flight requests, then close the logs cleanly."""
        if self.group_coordinator is not None:
            # Parked JoinGroup/SyncGroup requests are answered now, not at their timeouts.
            self.group_coordinator.stop()
        if self.replica_manager is not None:
            # Parked fetches answer with what they have instead of waiting out max_wait_ms.
            self.replica_manager.fetch_purgatory.close()
        if self.cluster is not None and self.cluster.joined:
            await self.cluster.controlled_shutdown(deadline_s)
        if self._server is not None:
            await self._server.shutdown(deadline_s)
        if self.txn_coordinator is not None:
            # Markers still being written are finished from the log at the next start.
            self.txn_coordinator.stop()
        if self._cluster_markers is not None:
            self._cluster_markers.close()
        if self.share_partitions is not None:
            await self.share_partitions.close()
        if self._share_persister_client is not None:
            self._share_persister_client.close()
        if self._credentials is not None:
            await self._credentials.close()
        if self.cluster is not None:
            # Leaving revokes the lease: the controller moves leadership away at once.
            with contextlib.suppress(Exception):
                await self.cluster.leave()
        # The scheduler's loop stops by its own flag too: on the stdlib event loop (in-process
        # tests) Python 3.11's wait_for can swallow a cancellation that meets a wake-up.
        self._scheduler.shutdown()
        for task in self._background:
            task.cancel()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._background.clear()
        if self.log_manager is not None:
            await self.log_manager.shutdown()
        self._scheduler.shutdown()
        if self._exporter is not None:
            await self._exporter.stop()
        self._executor.shutdown(wait=True)
        for sock in self._prebound.values():
            sock.close()
        self._prebound.clear()
        self._release_metrics_hold()
        for lock in self._dir_locks:
            lock.release()
        self._dir_locks.clear()


def _stored_cluster_id(log_dirs: list[Path]) -> str | None:
    """The cluster id a log dir already belongs to, if any (it seeds a new cluster)."""
    for log_dir in log_dirs:
        try:
            meta = MetaProperties.read(log_dir)
        except (OSError, MetaPropertiesError):
            continue
        if meta is not None and meta.cluster_id:
            return meta.cluster_id
    return None


def _host_port(endpoint: BrokerEndpoint) -> tuple[str, int]:
    return endpoint.host, endpoint.port


def _raise_open_file_limit() -> None:
    """Each open segment holds a few file descriptors; take the hard limit, as Kafka's
    packaging advises."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):  # pragma: no cover - platform specific
        pass


def _purgatory_stats(purgatory: Purgatory | OffsetPurgatory) -> PurgatoryStats:
    # Every parked operation watches its keys until it completes: watched == delayed.
    return PurgatoryStats(watched=purgatory.size, delayed=purgatory.size)


def _version() -> str:
    from josefk import __version__

    return __version__


def _settle_garbage_collector() -> None:
    """Keep the cyclic garbage collector's pauses short once the broker has started.

    Everything built during start-up (compiled codecs, handlers, logs, the catalog) lives as
    long as the process; left in the collector's generations, each full collection walks it
    all again (~26 ms each, measured after start-up; ~0.5 ms once frozen). Freezing moves it
    out of reach, and a larger first-generation threshold makes the young collections rarer:
    request objects die by reference counting, so most young collections find nothing.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(_GC_YOUNG_THRESHOLD, 20, 20)


# glibc's mallopt parameters (malloc.h) and the values the broker sets.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's largest
_TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024


def _keep_freed_buffers() -> None:
    """Let glibc's malloc reuse the memory of freed request and response frames.

    Each produce request and replica fetch response (hundreds of KB to MBs) is received into
    a buffer of its own. glibc maps such buffers fresh from the kernel, or takes them from the
    heap and gives the heap's top back whenever more than twice the last freed size is free,
    so the next frame's buffer faults in page by page again: a replicated cluster under load
    took ~150,000 page faults per GB produced, mostly in system time. With fixed thresholds
    the freed frames stay in the heap for the next ones (the faults drop to nothing once
    warm), at the cost of keeping up to ``_TRIM_THRESHOLD_BYTES`` of free heap. Other C
    libraries are left as they are.
    """
    if not sys.platform.startswith("linux"):  # pragma: no cover - platform specific
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # pragma: no cover - no C library to load, or no mallopt
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES)


class SignalAction(enum.Enum):
    SHUT_DOWN = "shut down cleanly"
    EXIT_NOW = "exit at once"
    IGNORE = "ignore"


def signal_action(signum: int, *, shutting_down: bool) -> SignalAction:
    """What a SIGTERM or SIGINT asks of ``josefk serve``; see ``serve``."""
    if not shutting_down:
        return SignalAction.SHUT_DOWN
    if signum == signal.SIGINT:
        return SignalAction.EXIT_NOW
    return SignalAction.IGNORE


async def serve(
    config: BrokerConfig,
    *,
    ready: asyncio.Event | None = None,
    owns_process: bool = False,
) -> None:
    """Run a broker until SIGTERM or SIGINT, then shut down cleanly.

    A SIGINT during the shutdown (Ctrl-C pressed again) exits at once, without the
    clean-shutdown marker. A SIGTERM during it is ignored, as Kafka's JVM ignores it: it is
    often the same request delivered twice (GNU ``timeout`` signals the command and then its
    process group), and a supervisor that will not wait sends SIGKILL.

    ``owns_process``: the broker is the whole process (``josefk serve``), so it may tune
    process-wide settings such as the garbage collector; embedded brokers (tests) leave them.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        action = signal_action(signum, shutting_down=stop.is_set())
        if action is SignalAction.SHUT_DOWN:
            logger.info("received %s, shutting down", name)
            stop.set()
        elif action is SignalAction.EXIT_NOW:
            logger.warning("%s during shutdown: exiting without a clean shutdown", name)
            os._exit(1)
        else:
            logger.info("received %s again: already shutting down", name)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)

    broker = Broker(config)
    try:
        endpoints = await broker.start()
    except BaseException:
        await broker.stop(0)
        raise
    if owns_process:
        _settle_garbage_collector()
        _keep_freed_buffers()
    for endpoint in endpoints:
        # The one line on stdout: tests and scripts wait for it, so it comes only once
        # ``start`` returned, when the listeners accept (a bound port alone is not ready).
        print(
            f"josefk: listening on {endpoint.listener_name}://{endpoint.host}:{endpoint.port}",
            flush=True,
        )
    if broker.metrics_port is not None:
        logger.info("metrics on http://%s:%d/metrics", config.metrics_host, broker.metrics_port)
    if ready is not None:
        ready.set()
    await stop.wait()
    await broker.stop(config.shutdown_timeout_ms / 1000)
    logger.info("shut down cleanly")


def _incarnation(first_log_dir: Path) -> str | None:
    """This run's identity in its cluster registration: host, first log dir and that dir's
    directory.id. While the broker runs it holds the dir's lock, so no other live process
    has the same one (see BrokerRegistration.incarnation). Blocking but tiny (one read of
    meta.properties, written moments before)."""
    meta = MetaProperties.read(first_log_dir)
    if meta is None or meta.directory_id is None:
        return None
    return f"{socket.gethostname()}:{first_log_dir.resolve()}:{meta.directory_id}"


def run_broker(config: BrokerConfig) -> None:
    """The process entry point: uvloop when available, exit code 0 after a clean stop."""
    try:
        if config.uvloop_enable and sys.platform != "win32":
            import uvloop

            logger.info("event loop: uvloop")
            uvloop.run(serve(config, owns_process=True))
        else:
            logger.info("event loop: asyncio (josefk.uvloop.enable=false)")
            asyncio.run(serve(config, owns_process=True))
    except KeyboardInterrupt:  # pragma: no cover - signal handlers normally catch it
        sys.exit(1)
    except StartupError as exc:
        logger.error("%s", exc)
        sys.exit(1)


def _metrics_port_error(config: BrokerConfig, exc: OSError) -> str:
    return (
        f"cannot serve metrics on {config.metrics_host}:{config.metrics_port}: "
        f"{os.strerror(exc.errno) if exc.errno else exc} (choose another port with "
        "--metrics-port or josefk.metrics.port, 0 for any free one)"
    )
