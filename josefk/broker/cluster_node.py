"""A broker's membership in a josefk cluster: etcd, the controller role, and replication.

Owns ``ClusterNode``, which exists only when ``josefk.etcd.endpoints`` is set. Its life:

1. ``connect``: reach etcd and learn the cluster id (the first broker writes it); the broker
   refuses to start when its log dir belongs to another cluster.
2. ``join``: open the broker's lease, register (refused while another live process holds the
   broker id), start the watcher, and take the roles the metadata gives this broker: leader
   or follower of each partition assigned to it. From then on every change arrives by watch.
3. While running: one broker at a time holds the controller claim and runs the
   ``ClusterController`` (failover elections when a broker's registration vanishes,
   preferred-leader rebalancing, topic changes). Every broker, as leader, proposes ISR
   changes by compare-and-swap (a follower that caught up joins, one that stopped fetching
   for ``replica.lag.time.max.ms`` leaves) and, as follower, runs one ``ReplicaFetcher`` per
   leader broker.
4. ``leave``: stop fetching, give up the controller claim and revoke the lease, so the
   other brokers see this one gone at once rather than after the lease's TTL.

The controller creates ``__consumer_offsets`` once ``offsets.topic.replication.factor``
brokers live; it is replicated like any topic, and each of its partitions' leader coordinates
the groups that hash to it (``leadership_listeners`` tell the group coordinator).

Imports josefk.cluster, josefk.broker's replica manager, partition and fetcher, and
josefk.client's connection (to forward an auto-created topic to the controller); must not
import the handlers or the network layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Sequence

from josefk.broker.catalog import TopicInfo, change_catalog
from josefk.broker.metadata_cache import ClusterMetadata
from josefk.broker.partition import Partition, TopicPartition
from josefk.broker.replica_fetcher import FetcherSettings, ReplicaFetcher
from josefk.broker.replica_manager import ReplicaManager
from josefk.broker.security.inter_broker import inter_broker_security
from josefk.client.connection import BrokerConnection
from josefk.cluster.controller import ClusterController
from josefk.cluster.errors import (
    BrokerIdInUseError,
    ControllerFencedError,
    MetadataStoreError,
    TopicExistsError,
)
from josefk.cluster.metadata_store import BrokerSession, EtcdMetadataStore, parse_endpoints
from josefk.cluster.values import (
    BrokerRegistration,
    ControllerClaim,
    EndpointRecord,
    PartitionState,
    TopicRecord,
    ViewChange,
    topic_uuid,
)
from josefk.cluster.watcher import ClusterWatcher
from josefk.config.broker import BrokerConfig
from josefk.config.topic import InvalidConfigError
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import CreateTopicsRequest, CreateTopicsResponse
from josefk.storage.errors import StorageError

logger = logging.getLogger(__name__)

__all__ = ["ClusterNode", "LeadershipListener", "topic_uuid"]

# The committed-offsets topic, which the controller creates (see the module docstring).
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"

# Told when this broker starts (True) or stops (False) leading a partition: the group
# coordinator follows the leadership of __consumer_offsets partitions.
LeadershipListener = Callable[[TopicPartition, bool], None]


_CreateTopicsRequest = CreateTopicsRequest

# How long AlterConfigs waits for this broker's own watch to bring back the topic record it
# stored (normally at once); past it the answer is sent anyway: the change is stored.
_CATCH_UP_S = 10.0
# How long a group request naming a topic this broker's view does not know waits for the view
# to bring it (a topic just created through another broker); well under a client's request
# timeout, and only a topic etcd has is waited for.
TOPIC_CATCH_UP_S = 5.0


class ClusterNode:
    """This broker's part in the cluster. Runs on the event loop."""

    def __init__(self, config: BrokerConfig, *, broker_id: int) -> None:
        assert config.etcd_endpoints
        self.config = config
        self.broker_id = broker_id
        # How this broker's connections to the others are secured (InterBrokerSecurityError,
        # a ValueError, when the settings cannot work).
        self.inter_broker_security = inter_broker_security(config)
        # Set by the broker between ``connect`` and ``join`` (the logs load in between).
        self.replicas: ReplicaManager
        self.store = EtcdMetadataStore(
            parse_endpoints(config.etcd_endpoints), prefix=config.etcd_prefix
        )
        self.watcher = ClusterWatcher(self.store, self._on_changes)
        self.metadata = ClusterMetadata(lambda: self.watcher.view, local_broker_id=broker_id)
        self.controller: ClusterController | None = None
        self._session: BrokerSession | None = None
        self._registration: BrokerRegistration | None = None
        self.leadership_listeners: list[LeadershipListener] = []
        # Told (ISR size before, after) of each ISR change etcd accepted (a metric).
        self.on_isr_changed: Callable[[int, int], None] | None = None
        # While controller: each leader election it made (seconds, unclean).
        self.on_leader_elected: Callable[[float, bool], None] | None = None
        # Told the ACL document (P/acls) and the etcd revision it is current at whenever the
        # watcher sees it change.
        self.on_acls_changed: Callable[[bytes | None, int], None] | None = None
        # Told every stored dynamic broker config set (by stored name) when one changes.
        self.on_broker_configs: Callable[[dict[str, dict[str, str]]], None] | None = None
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._brokers_changed = asyncio.Event()
        self._reconcile_wanted = asyncio.Event()
        self._view_changed = asyncio.Event()
        self._shrink_task: asyncio.Task[None] | None = None
        self._auto_creating: dict[str, asyncio.Task[None]] = {}
        # Partitions assigned here and not hosted yet, in the order the view gave them (a
        # dict as an ordered set), and the task hosting them (``_reconcile_now``).
        self._to_host: dict[TopicPartition, None] = {}
        self._hosting: asyncio.Task[None] | None = None

    # -- start -----------------------------------------------------------------------------

    async def connect(self, candidate_cluster_id: str) -> str:
        """Reach etcd; the cluster's id (``candidate_cluster_id`` if this is the first
        broker ever). Raises EtcdUnavailableError."""
        await self.store.connect()
        return await self.store.ensure_cluster_id(candidate_cluster_id)

    async def join(
        self, endpoints: Sequence[tuple[str, str, int]], *, incarnation: str | None = None
    ) -> None:
        """Register with ``endpoints`` (listener, host, port) and take this broker's roles.
        ``incarnation`` names this run's host and locked log dir (see BrokerRegistration):
        a registration an earlier, dead run left with the same one is taken back. Raises
        BrokerIdInUseError."""
        ttl_s = max(1, round(self.config.etcd_session_timeout_ms / 1000))
        self._session = await self.store.open_session(ttl_s)
        registration = BrokerRegistration(
            self.broker_id,
            tuple(EndpointRecord(name, host, port) for name, host, port in endpoints),
            self.config.broker_rack,
            incarnation=incarnation,
        )
        await self.store.register_broker(registration, self._session)
        self._registration = registration
        await self.watcher.start()
        self.replicas.isr_proposer = self._propose_isr
        # A DeleteRecords waits only for followers on registered brokers.
        self.replicas.live_brokers = lambda: self.watcher.view.brokers
        self._broker_configs_changed()
        await self._reconcile()
        loop = asyncio.get_running_loop()
        self._shrink_task = loop.create_task(self._isr_shrink_loop())
        self._tasks = [
            loop.create_task(self._controller_loop()),
            self._shrink_task,
            loop.create_task(self._reconcile_loop()),
            loop.create_task(self._session_loop()),
        ]
        if self.config.auto_leader_rebalance_enable:
            self._tasks.append(loop.create_task(self._rebalance_loop()))
        logger.info("joined the cluster as broker %d", self.broker_id)

    # -- stop ------------------------------------------------------------------------------

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Before the listeners close: hand every leadership that another live in-sync
        replica can take to it (through the controller, as Kafka's controlled shutdown), so
        clients see no failed requests. This broker stops shrinking ISRs first: followers
        that stop fetching from a leader that is going away must not be dropped from them."""
        if self._shrink_task is not None:
            self._shrink_task.cancel()
        if self._session is None:
            return
        try:
            await self.store.request_controlled_shutdown(self.broker_id, self._session)
        except Exception as exc:  # noqa: BLE001  shutdown goes on whatever the metadata store answers
            logger.warning("controlled shutdown request failed: %s", exc)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        session = self._session
        while (remaining := deadline - loop.time()) > 0:
            if session.lost.is_set():
                # etcd is gone: nothing will move the leaderships, and waiting out the
                # deadline only delays the stop (clients find the new leaders once the lease
                # expires, as after a crash).
                logger.warning("controlled shutdown: lost etcd; stopping without it")
                return
            self._view_changed.clear()
            if self.is_controller and self.controller is not None:
                with contextlib.suppress(Exception):
                    await self.controller.controlled_shutdown(
                        self.broker_id, set(self.watcher.view.brokers)
                    )
            movable = self._movable_leaderships()
            if not movable:
                logger.info("controlled shutdown: no leadership left to hand over")
                return
            changed = asyncio.ensure_future(self._view_changed.wait())
            lost = asyncio.ensure_future(session.lost.wait())
            await asyncio.wait(
                {changed, lost}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            changed.cancel()
            lost.cancel()
        logger.warning("controlled shutdown: leaderships still here after %.0f s", timeout_s)

    def _movable_leaderships(self) -> list[tuple[str, int]]:
        view = self.watcher.view
        return [
            key
            for key, versioned in view.partitions.items()
            if versioned.state.leader == self.broker_id
            and any(b != self.broker_id and b in view.brokers for b in versioned.state.isr)
        ]

    async def leave(self) -> None:
        if self._hosting is not None:
            self._tasks.append(self._hosting)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for fetcher in self._fetchers.values():
            await fetcher.stop()
        self._fetchers.clear()
        await self.watcher.stop()
        if self._session is not None:
            # Revoking the lease removes the registration and any controller claim at once.
            await self._session.close()
            self._session = None
        await self.store.close()

    # -- losing and regaining the etcd session ------------------------------------------------

    async def _session_loop(self) -> None:
        while True:
            session = self._session
            if session is None:
                return
            await session.lost.wait()
            self._fence()
            await self._rejoin(session)

    def _fence(self) -> None:
        """The session is gone, or about to be: the controller may already be moving this
        broker's leaderships to others. Step down from every one of them now, and name no
        leader for them in metadata, so that no client reads or writes through a zombie
        leader. The view is left as etcd last said; it is applied again after the rejoin."""
        self.metadata.fenced = True
        stepped_down = 0
        for partition in list(self.replicas.partitions()):
            if not partition.is_leader:
                continue
            state = PartitionState(
                tuple(partition.replicas),
                -1,
                partition.leader_epoch,
                tuple(partition.isr),
                partition.partition_epoch,
            )
            self.replicas.apply_partition_state(partition.tp, state)
            self._tell_leadership(partition.tp, False)
            stepped_down += 1
        logger.warning(
            "lost the etcd session: stepped down from %d leaderships until registered again",
            stepped_down,
        )

    async def _rejoin(self, lost: BrokerSession) -> None:
        """Register again under a new lease, wait until the view holds everything etcd had
        then, and take the roles it gives: the broker is back, as after a restart."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1):
                # Our own registration, if the lease still lives, would refuse the new one
                # (until it expires: register_broker is retried below meanwhile).
                await lost.close()
        assert self._registration is not None
        ttl_s = max(1, round(self.config.etcd_session_timeout_ms / 1000))
        backoff = 0.2
        while True:
            session: BrokerSession | None = None
            try:
                session = await self.store.open_session(ttl_s)
                registered = await self.store.register_broker(self._registration, session)
                break
            except (BrokerIdInUseError, MetadataStoreError) as exc:
                if session is not None:
                    with contextlib.suppress(Exception):
                        await session.close()
                logger.info("registering again with etcd failed (%s); retrying", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        self._session = session
        await self.watcher.caught_up(registered.broker_epoch)
        self.metadata.fenced = False
        await self._reconcile()
        logger.info(
            "registered again with etcd (broker epoch %d); roles restored from revision %d",
            registered.broker_epoch,
            self.watcher.view.revision,
        )

    # -- metadata changes --------------------------------------------------------------------

    def _on_changes(self, changes: list[ViewChange]) -> None:
        self._view_changed.set()
        if self.on_acls_changed is not None and any(c.kind == "acls" for c in changes):
            # The watcher applies events one at a time in revision order: the view's
            # revision is the one its ACL document is current at.
            self.on_acls_changed(self.watcher.view.acls, self.watcher.view.revision)
        if any(c.kind == "broker" for c in changes):
            self.replicas.live_brokers_changed()
        if any(c.kind in ("broker", "controller", "shutdown") for c in changes):
            self._brokers_changed.set()
        elif self.controller is not None and any(
            c.kind == "partition" and self._reassigning(c.name) for c in changes
        ):
            # A moving partition changed (a new replica joined its ISR): maybe it can finish.
            self._brokers_changed.set()
        if any(c.kind in ("partition", "topic", "broker") for c in changes):
            self._reconcile_wanted.set()
        if any(c.kind == "broker_config" for c in changes):
            self._broker_configs_changed()

    def _broker_configs_changed(self) -> None:
        if self.on_broker_configs is not None:
            self.on_broker_configs(self.watcher.view.broker_configs)

    def _reassigning(self, name: object) -> bool:
        versioned = self.watcher.view.partitions.get(name)  # type: ignore[call-overload]
        return versioned is not None and versioned.state.reassigning

    async def _reconcile_loop(self) -> None:
        while True:
            await self._reconcile_wanted.wait()
            self._reconcile_wanted.clear()
            try:
                self._reconcile_now()
            except Exception:
                logger.exception("applying the cluster metadata failed")

    def _reconcile_now(self) -> None:
        """Make the hosted partitions and their roles match the view: at once for topics,
        roles and partitions that left; partitions new to this broker are queued for the
        hosting task, which writes their files off the event loop, one after another. The
        next change of the view is applied at once even while thousands are being made."""
        for tp in self._reconcile_hosted():
            self._to_host[tp] = None
        if self._to_host and (self._hosting is None or self._hosting.done()):
            self._hosting = asyncio.get_running_loop().create_task(self._host_queued())

    async def _reconcile(self) -> None:
        """``_reconcile_now``, returning once every partition queued is hosted (joining and
        rejoining: the broker takes its roles before it serves)."""
        self._reconcile_now()
        while self._hosting is not None and not self._hosting.done():
            await asyncio.wait([self._hosting])

    def _reconcile_hosted(self) -> list[TopicPartition]:
        """The part of a pass that never awaits: topics, roles of hosted partitions, and
        partitions that left this broker. Returns the partitions to host anew."""
        if self.fenced:
            return []  # the view may be stale; _rejoin applies it once caught up
        view = self.watcher.view
        catalog = self.replicas.catalog
        for record in view.topics.values():
            self._put_topic(record)
        for info in list(catalog.topics()):
            if info.name not in view.topics:
                self._drop_topic(info.name, info.partitions)
        wanted: set[TopicPartition] = set()
        new: list[TopicPartition] = []
        for (name, index), versioned in view.partitions.items():
            state = versioned.state
            if self.broker_id not in state.replicas or not view.names(name, index):
                continue
            tp = TopicPartition(name, index)
            wanted.add(tp)
            if self.replicas.get_partition(name, index) is None:
                new.append(tp)
            else:
                self._apply(tp, state)
        for partition in list(self.replicas.partitions()):
            tp = partition.tp
            if tp in wanted:
                continue
            if partition.is_leader:
                self._tell_leadership(tp, False)
            self._unfollow(tp)
            # The topic is gone, or a reassignment moved this replica away: as Kafka's
            # StopReplica with deletion, the local copy goes.
            self.replicas.remove_partition(tp, delete=True)
        return new

    async def _host_queued(self) -> None:
        """Host each partition queued by ``_reconcile_now``, its files written in the
        executor (a topic of thousands of partitions does not hold the loop), each in the
        role the view gives it when its turn comes."""
        while self._to_host and not self.fenced:
            tp = next(iter(self._to_host))
            del self._to_host[tp]
            view = self.watcher.view
            state = view.partition(tp.topic, tp.partition)
            if (
                state is None
                or self.broker_id not in state.replicas
                or self.replicas.get_partition(tp.topic, tp.partition) is not None
            ):
                continue  # gone or moved meanwhile, or hosted by then
            try:
                partition = await self.replicas.host_partition_off_loop(tp, state)
            except StorageError as exc:
                # This replica stays missing (Metadata reports it offline); the others go on.
                logger.error("cannot host %s: %s", tp, exc)
                continue
            except Exception:
                logger.exception("hosting %s failed", tp)
                continue
            if self.replicas.get_partition(tp.topic, tp.partition) is not partition:
                continue  # removed while its files were written
            self._took_role(tp, partition, state, before=None, was_leader=False)
            current = self.watcher.view.partition(tp.topic, tp.partition)
            if current is not None and current != state and self.broker_id in current.replicas:
                # The view moved during the await: take the role it gives now (a partition
                # that left this broker goes at the next reconciliation).
                self._apply(tp, current)

    def _put_topic(self, record: TopicRecord) -> None:
        """The catalog mirrors the topic's record; changed configs reach its hosted logs
        (a replica rolls and retains by the topic's configs wherever they were altered)."""
        catalog = self.replicas.catalog
        before = catalog.get(record.name)
        old_configs = None if before is None else dict(before.configs)
        catalog.put(
            TopicInfo(record.name, topic_uuid(record.topic_id), record.partitions, record.configs)
        )
        if old_configs is not None and old_configs != record.configs:
            try:
                self.replicas.topic_configs_changed(record.name)
            except InvalidConfigError as exc:
                # Validated by the broker that stored them; one whose defaults cannot take
                # them keeps its logs' previous configs rather than stop applying metadata.
                logger.error("topic %s: cannot apply its configs here: %s", record.name, exc)
            logger.info("topic %s: configs now %s", record.name, record.configs)

    def _apply(self, tp: TopicPartition, state: PartitionState) -> None:
        existing = self.replicas.get_partition(tp.topic, tp.partition)
        before = None if existing is None else (existing.leader_id, existing.leader_epoch)
        was_leader = existing is not None and existing.is_leader
        isr_before = len(existing.isr) if existing is not None and was_leader else None
        partition = self.replicas.apply_partition_state(tp, state)
        self._took_role(tp, partition, state, before, was_leader, isr_before)

    def _took_role(
        self,
        tp: TopicPartition,
        partition: Partition,
        state: PartitionState,
        before: tuple[int, int] | None,
        was_leader: bool,
        isr_before: int | None = None,
    ) -> None:
        """After ``partition`` took ``state``: tell the leadership listeners, count an ISR
        change the controller made, and follow the leader (or stop following)."""
        if (
            self.on_isr_changed is not None
            and isr_before is not None
            and partition.is_leader
            and len(partition.isr) != isr_before
        ):
            # The controller changed the ISR of a partition this broker leads (a replica's
            # broker died or came back); the leader's own changes are told in _alter_isr.
            self.on_isr_changed(isr_before, len(partition.isr))
        if partition.is_leader != was_leader:
            self._tell_leadership(tp, partition.is_leader)
        if partition.is_leader or state.leader < 0:
            self._unfollow(tp)
            return
        if before != (state.leader, state.leader_epoch) or not self._follows(tp, state.leader):
            self._unfollow(tp)
            self._fetcher_for(state.leader).follow(partition)

    def _tell_leadership(self, tp: TopicPartition, leads: bool) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(tp, leads)
            except Exception:
                logger.exception("a leadership listener failed on %s", tp)

    def _drop_topic(self, name: str, partitions: int) -> None:
        for index in range(partitions):
            self._unfollow(TopicPartition(name, index))
        # The catalog mirrors etcd: the entry goes, then the logs (as on a single node).
        catalog = self.replicas.catalog
        info = change_catalog(catalog, lambda: catalog.delete(name))
        if info is not None:
            self.replicas.remove_topic(name, info.partitions)

    def _follows(self, tp: TopicPartition, leader: int) -> bool:
        fetcher = self._fetchers.get(leader)
        return fetcher is not None and tp in fetcher.partitions

    def _unfollow(self, tp: TopicPartition) -> None:
        for fetcher in self._fetchers.values():
            fetcher.unfollow(tp)

    def _fetcher_for(self, leader: int) -> ReplicaFetcher:
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            config = self.config
            fetcher = ReplicaFetcher(
                leader,
                lambda: self._address_of(leader),
                FetcherSettings(
                    broker_id=self.broker_id,
                    max_wait_ms=config.replica_fetch_wait_max_ms,
                    min_bytes=config.replica_fetch_min_bytes,
                    max_bytes=config.replica_fetch_response_max_bytes,
                    partition_max_bytes=config.replica_fetch_max_bytes,
                    backoff_ms=config.replica_fetch_backoff_ms,
                    request_timeout_s=config.replica_socket_timeout_ms / 1000,
                    security=self.inter_broker_security,
                ),
                on_high_watermark=self.replicas.high_watermark_moved,
            )
            self._fetchers[leader] = fetcher
            fetcher.start()
        return fetcher

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """Where this broker reaches ``broker_id`` (its inter-broker listener)."""
        return self._address_of(broker_id)

    def _address_of(self, broker_id: int) -> tuple[str, int] | None:
        registration = self.watcher.view.brokers.get(broker_id)
        if registration is None or not registration.endpoints:
            return None
        wanted = self.config.inter_broker_listener()
        for endpoint in registration.endpoints:
            if wanted is None or endpoint.listener == wanted:
                return endpoint.host, endpoint.port
        return registration.endpoints[0].host, registration.endpoints[0].port

    # -- the ISR (leader side) -------------------------------------------------------------------

    def _propose_isr(self, partition: Partition, isr: list[int]) -> None:
        asyncio.get_running_loop().create_task(self._alter_isr(partition, isr))

    async def _alter_isr(self, partition: Partition, isr: list[int]) -> None:
        tp = partition.tp
        expected = self.watcher.view.partitions.get((tp.topic, tp.partition))
        accepted = None
        if (
            expected is not None
            and expected.state.leader == self.broker_id
            and expected.state.leader_epoch == partition.leader_epoch
        ):
            with contextlib.suppress(Exception):
                accepted = await self.store.alter_partition(tp.topic, tp.partition, expected, isr)
        if accepted is None:
            partition.isr_proposal_failed()
            self.replicas.partition_changed(tp)
            return
        before = list(expected.state.isr) if expected else []
        logger.info("%s: ISR %s -> %s", tp, before, isr)
        if self.on_isr_changed is not None:
            self.on_isr_changed(len(before), len(isr))
        if partition.is_leader and partition.leader_epoch == accepted.state.leader_epoch:
            partition.apply_isr(accepted.state)
        self.replicas.partition_changed(tp)

    async def _isr_shrink_loop(self) -> None:
        lag_ms = self.config.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(max(lag_ms / 2000, 0.05))
            for partition in list(self.replicas.partitions()):
                isr = partition.isr_shrink(lag_ms)
                if isr is not None:
                    await self._alter_isr(partition, isr)

    # -- the controller ----------------------------------------------------------------------

    async def _controller_loop(self) -> None:
        """Claim the controller role whenever nobody holds it; while holding it, act on
        every change of the live brokers."""
        while True:
            self._brokers_changed.clear()
            view = self.watcher.view
            if view.controller is None and self._session is not None:
                try:
                    claim = await self.store.try_become_controller(self.broker_id, self._session)
                except Exception as exc:  # noqa: BLE001  the election loop outlives any store failure and tries again
                    logger.warning("controller election failed: %s", exc)
                    claim = None
                if claim is not None:
                    logger.info("became controller (epoch %d)", claim.controller_epoch)
                    self.controller = ClusterController(
                        self.store,
                        claim,
                        unclean_leader_election=self.config.unclean_leader_election_enable,
                        on_leader_elected=self.on_leader_elected,
                    )
            controller = self.controller
            if controller is not None:
                current = self.watcher.view.controller
                if current is not None and current != controller.claim:
                    logger.info("no longer controller")
                    self.controller = None
                else:
                    await self._act_as_controller(controller)
            await self._brokers_changed.wait()

    async def _act_as_controller(self, controller: ClusterController) -> None:
        view = self.watcher.view
        try:
            await controller.on_brokers_changed(set(view.brokers))
            await controller.complete_reassignments(set(view.brokers))
            await self._ensure_internal_topics(controller)
            for broker_id in sorted(view.shutting_down & set(view.brokers)):
                if broker_id != self.broker_id:
                    await controller.controlled_shutdown(broker_id, set(view.brokers))
        except ControllerFencedError:
            logger.info("fenced as controller")
            self.controller = None
        except Exception:
            logger.exception("controller failed to apply a broker change")

    async def _ensure_internal_topics(self, controller: ClusterController) -> None:
        """Create ``__consumer_offsets``, ``__transaction_state`` and ``__share_group_state``
        (compacted, Kafka's configs) once enough brokers are alive for each one's replication
        factor, as Kafka does (until then FindCoordinator answers COORDINATOR_NOT_AVAILABLE). Created early
        rather than on the first FindCoordinator, so that no broker has to forward that
        request to the controller."""
        view = self.watcher.view
        config = self.config
        wanted = (
            (
                OFFSETS_TOPIC,
                config.offsets_topic_num_partitions,
                config.offsets_topic_replication_factor,
                {"segment.bytes": str(config.offsets_topic_segment_bytes)},
            ),
            (
                TRANSACTION_STATE_TOPIC,
                config.transaction_state_log_num_partitions,
                config.transaction_state_log_replication_factor,
                {
                    "segment.bytes": str(config.transaction_state_log_segment_bytes),
                    "min.insync.replicas": str(config.transaction_state_log_min_isr),
                },
            ),
            (
                SHARE_STATE_TOPIC,
                config.share_coordinator_state_topic_num_partitions,
                config.share_coordinator_state_topic_replication_factor,
                {
                    "segment.bytes": str(config.share_coordinator_state_topic_segment_bytes),
                    "min.insync.replicas": str(config.share_coordinator_state_topic_min_isr),
                },
            ),
        )
        for topic, partitions, replication_factor, configs in wanted:
            if topic in view.topics or len(view.brokers) < replication_factor:
                continue
            with contextlib.suppress(TopicExistsError):
                await controller.create_topic(
                    topic,
                    partitions=partitions,
                    replication_factor=replication_factor,
                    live_brokers=self.live_brokers(),
                    configs={
                        "cleanup.policy": "compact",
                        "compression.type": "producer",
                        **configs,
                    },
                )

    async def _rebalance_loop(self) -> None:
        interval = self.config.leader_imbalance_check_interval_seconds
        while True:
            await asyncio.sleep(interval)
            controller = self.controller
            if controller is None:
                continue
            live = set(self.watcher.view.brokers)
            if self._imbalanced(live):
                with contextlib.suppress(Exception):
                    await controller.elect_preferred_leaders(live)

    def _imbalanced(self, live: set[int]) -> bool:
        """Kafka's rule: some broker leads fewer than (100 - imbalance%) of the partitions
        it is preferred leader of."""
        preferred: dict[int, int] = {}
        not_leading: dict[int, int] = {}
        for versioned in self.watcher.view.partitions.values():
            state = versioned.state
            if not state.replicas or state.replicas[0] not in live:
                continue
            first = state.replicas[0]
            preferred[first] = preferred.get(first, 0) + 1
            if state.leader != first:
                not_leading[first] = not_leading.get(first, 0) + 1
        limit = self.config.leader_imbalance_per_broker_percentage / 100
        return any(not_leading.get(b, 0) / n > limit for b, n in preferred.items() if n)

    # -- topics auto-created by Metadata ---------------------------------------------------------

    def auto_create_topic(self, name: str) -> None:
        """Metadata asked for a topic that does not exist and may be auto-created: have the
        controller create it with this broker's ``num.partitions`` and
        ``default.replication.factor`` (as Kafka's brokers forward it), in the background;
        the client meanwhile hears LEADER_NOT_AVAILABLE and asks again."""
        if name in self._auto_creating or self.fenced:
            return
        task = asyncio.get_running_loop().create_task(self._auto_create(name))
        self._auto_creating[name] = task
        task.add_done_callback(lambda _: self._auto_creating.pop(name, None))

    async def _auto_create(self, name: str) -> None:
        config = self.config
        try:
            controller = self.controller
            if controller is not None and self.is_controller:
                with contextlib.suppress(TopicExistsError):
                    await controller.create_topic(
                        name,
                        partitions=config.num_partitions,
                        replication_factor=config.default_replication_factor,
                        live_brokers=self.live_brokers(),
                    )
                return
            await self._forward_create_topic(name)
        except Exception as exc:  # noqa: BLE001  auto-creation is best effort; the client retries
            logger.warning("auto-creating topic %r failed: %s", name, exc)

    async def _forward_create_topic(self, name: str) -> None:
        claim = self.watcher.view.controller
        address = None if claim is None else self._address_of(claim.broker_id)
        if claim is None or address is None:
            raise ControllerFencedError("no controller to create the topic")
        config = self.config
        request = _CreateTopicsRequest(
            topics=[
                _CreateTopicsRequest.CreatableTopic(
                    name=name,
                    num_partitions=config.num_partitions,
                    replication_factor=config.default_replication_factor,
                    assignments=[],
                    configs=[],
                )
            ],
            timeout_ms=config.replica_socket_timeout_ms,
            validate_only=False,
        )
        connection = await BrokerConnection.open(
            *address,
            node_id=claim.broker_id,
            client_id=f"josefk-broker-{self.broker_id}",
            timeout_s=config.replica_socket_timeout_ms / 1000,
            security=self.inter_broker_security,
        )
        try:
            response: CreateTopicsResponse = await connection.request(
                ApiKey.CREATE_TOPICS,
                request,
                timeout_s=config.replica_socket_timeout_ms / 1000,
            )
        finally:
            connection.close()
        for result in response.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise RuntimeError(
                    f"the controller answered {ErrorCode(result.error_code).name}: "
                    f"{result.error_message}"
                )

    # -- topic configs ----------------------------------------------------------------------------

    async def alter_topic_configs(
        self,
        name: str,
        change: Callable[[dict[str, str]], dict[str, str]],
        *,
        validate_only: bool = False,
    ) -> dict[str, str] | None:
        """AlterConfigs / IncrementalAlterConfigs of a topic: ``change`` turns the topic's
        stored overrides into the new ones (and raises to refuse them). Written to the topic's
        etcd record (compare-and-swap, any broker: clients send these requests to any one);
        returns once stored and taken by this broker's catalog and logs, so the client's next
        DescribeConfigs here sees them. The other brokers take them by watch. None when the
        topic does not exist."""
        if validate_only:
            record = self.watcher.view.topics.get(name)
            return None if record is None else change(dict(record.configs))
        stored = await self.store.update_topic_configs(name, change)
        if stored is None:
            return None
        record, revision = stored
        try:
            async with asyncio.timeout(_CATCH_UP_S):
                await self.watcher.caught_up(revision)
        except TimeoutError:
            logger.warning(
                "topic %s: configs stored; this broker's watch has not seen them yet", name
            )
            return dict(record.configs)
        current = self.watcher.view.topics.get(name)
        if current is not None and not self.fenced:
            self._put_topic(current)
        return dict(record.configs)

    # -- the metadata view catching up ---------------------------------------------------------

    async def await_topics(
        self, names: Collection[str], *, timeout_s: float = TOPIC_CATCH_UP_S
    ) -> None:
        """Wait (at most ``timeout_s``) until this broker's view holds each of ``names`` as
        etcd has it now. For a request naming a topic the view does not know: a topic
        created a moment ago through another broker is in etcd before this broker's watch
        brings it. A topic etcd does not have either returns at once; an etcd that does not
        answer ends the wait (the caller answers from the view it has)."""
        try:
            async with asyncio.timeout(timeout_s):
                for name in names:
                    revision = await self.store.topic_revision(name)
                    if revision is not None:
                        await self.watcher.caught_up(revision)
        except (TimeoutError, MetadataStoreError) as exc:
            logger.info("metadata view not caught up with etcd for %s: %r", sorted(names), exc)

    # -- admin through the controller ----------------------------------------------------------

    @property
    def joined(self) -> bool:
        return self._session is not None

    @property
    def is_controller(self) -> bool:
        return self.controller is not None and self.watcher.view.controller == self.controller.claim

    @property
    def fenced(self) -> bool:
        """From losing the etcd session until registered again and caught up with etcd."""
        return self.metadata.fenced

    def offline_partitions(self) -> int:
        """Partitions without a leader, as this broker's view of etcd has them."""
        return sum(1 for v in self.watcher.view.partitions.values() if v.state.leader < 0)

    def live_brokers(self) -> dict[int, str | None]:
        return {b: r.rack for b, r in self.watcher.view.brokers.items()}

    @property
    def claim(self) -> ControllerClaim | None:
        return self.controller.claim if self.controller is not None else None

    def topic(self, name: str) -> TopicRecord | None:
        return self.watcher.view.topics.get(name)
