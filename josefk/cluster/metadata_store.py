"""What a josefk cluster keeps in etcd, and the only ways it may change.

Owns the key layout under one prefix ``P`` (``josefk.etcd.prefix``, default ``/josefk``) and
one operation per change a broker may make, each a single etcd transaction so that no two
brokers can interleave halfway through one::

    P/cluster_id                  the cluster id, written once by the first broker
    P/brokers/<id>                BrokerRegistration (JSON), bound to the broker's lease
    P/controller                  ControllerClaim (JSON), bound to the controller's lease
    P/controller_epoch            the last controller epoch handed out (decimal)
    P/topics/<name>               TopicRecord (JSON)
    P/partitions/<topic>/<p>      PartitionState (JSON)
    P/producer_ids/next_block     the first producer id not yet handed out (decimal)
    P/shutdown/<id>               a broker's request for a controlled shutdown, on its lease
    P/acls                        the authorizer's ACL bindings (JSON), the whole set
    P/configs/brokers/<name>      dynamic broker configs (JSON object of strings): <id> for
                                  one broker, <default> for every broker (KIP-226)
    P/configs/groups/<group>      a consumer group's configs (KIP-848 GROUP resource; the
                                  group id percent-encoded), same JSON form

Who writes what:

- ``register_broker``: a broker, its own key, only if no live registration holds the id. The
  key lives on the broker's lease, so a broker that dies (or is cut off from etcd for the
  lease's TTL) disappears from ``P/brokers`` by itself. A registration left by an earlier run
  of the same broker (same incarnation: host, log dir and its directory.id; the new run holds
  that log dir's lock, so the old one is dead) is taken back at once by revoking its lease:
  an etcd restart restores a dead broker's lease with a fresh TTL, and a restart within the
  TTL would otherwise be refused.
- ``try_become_controller``: any broker; succeeds only when ``P/controller`` is absent, and
  takes the next controller epoch in the same transaction.
- ``controller_write``: the controller's writes (topics, partition assignments and leaders).
  Each is guarded by ``P/controller`` still holding the writer's claim byte for byte, so a
  deposed controller (its lease expired, another elected) can no longer change anything:
  its epoch fences it, as Kafka's controller epoch does.
- ``alter_partition``: a partition's leader proposes a new ISR, accepted only if the partition
  key is unchanged since the state the leader holds (compare-and-swap on the key's etcd
  modification revision, which moves with every write and hence with the partition epoch),
  as Kafka's AlterPartition rejects a stale partition epoch.
- ``update_broker_configs``: any broker (the one a client's IncrementalAlterConfigs reached),
  by compare-and-swap on the key's modification revision, so two concurrent changes of one
  entity are applied one after the other, never one over the other.
- ``allocate_producer_ids``: any broker; blocks are taken by compare-and-swap on the counter,
  so two brokers never hand out the same producer id.
- ``put_acls``: any broker answering CreateAcls / DeleteAcls; the whole ACL document is
  replaced by compare-and-swap on the key's modification revision (``read_acls``), so two
  concurrent changes cannot lose one another.
- ``update_topic_configs``: any broker answering AlterConfigs / IncrementalAlterConfigs for a
  topic (clients send those to any broker); the topic record is replaced by compare-and-swap
  on its modification revision, keeping its id and partition count, so it cannot undo the
  controller's concurrent CreatePartitions (whose write is guarded the same way) nor
  recreate a deleted topic.

Readers take a ``snapshot`` (every key and the etcd revision it was read at) and then
``watch`` from the revision after it, so no change between the two is missed; nothing polls.

Time is etcd's: lease TTLs run on the etcd server. Nothing here sleeps except the lease
keep-alive, which must speak to etcd within each TTL.

The etcd client's exceptions stay here: every method that speaks to etcd raises
``MetadataStoreError`` (josefk.cluster.errors) for them (``etcd_errors_translated``).

Imports the standard library, the etcd client (``aetcd``) and josefk.cluster's values and
errors; the values themselves live in ``values`` so that their users need no etcd client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any, Final, ParamSpec, TypeVar

import aetcd
import aetcd.exceptions
from aetcd.transactions import Delete
from aetcd.utils import prefix_range_end

from josefk.cluster.errors import (
    BrokerIdInUseError,
    EtcdUnavailableError,
    HistoryCompactedError,
    MetadataStoreError,
)
from josefk.cluster.values import (
    DEFAULT_PREFIX,
    BrokerRegistration,
    ControllerClaim,
    EndpointRecord,
    MetadataEvent,
    MetadataSnapshot,
    PartitionState,
    TopicRecord,
    VersionedPartitionState,
    _encode,
)

logger = logging.getLogger(__name__)

# Broker lease TTL (seconds): how long a dead broker stays registered. Failover time is
# bounded below by it.
DEFAULT_SESSION_TTL_S: Final = 6

__all__ = [
    "DEFAULT_PREFIX",
    "BrokerIdInUseError",
    "BrokerRegistration",
    "BrokerSession",
    "ControllerClaim",
    "EndpointRecord",
    "EtcdMetadataStore",
    "EtcdUnavailableError",
    "MetadataEvent",
    "MetadataSnapshot",
    "MetadataStoreError",
    "PartitionState",
    "TopicRecord",
    "VersionedPartitionState",
    "etcd_errors_translated",
    "parse_endpoints",
]

# Operations per etcd transaction: etcd refuses more than --max-txn-ops (128 by default).
_MAX_TXN_OPS: Final = 100

_P = ParamSpec("_P")
_T = TypeVar("_T")


def etcd_errors_translated(
    call: Callable[_P, Awaitable[_T]],
) -> Callable[_P, Coroutine[Any, Any, _T]]:
    """``call`` with the etcd client's exceptions turned into josefk's: a compacted history
    is ``HistoryCompactedError``, any other failure of the client ``MetadataStoreError``
    (the client's own exception chained as the cause). Every coroutine of josefk.cluster that
    speaks to etcd and is called from outside the package wears it, so that no caller ever
    needs the etcd client's exception types."""

    @functools.wraps(call)
    async def translated(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await call(*args, **kwargs)
        except aetcd.exceptions.RevisionCompactedError as exc:
            raise HistoryCompactedError(str(exc) or "etcd compacted the history") from exc
        except aetcd.exceptions.ClientError as exc:
            raise MetadataStoreError(str(exc) or type(exc).__name__) from exc

    return translated


def parse_endpoints(text: str) -> list[tuple[str, int]]:
    """``"host:port,host:port"`` (``josefk.etcd.endpoints``) as (host, port) pairs."""
    result = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"etcd endpoint {item!r} is not host:port")
        result.append((host.strip("[]"), int(port)))
    if not result:
        raise ValueError("no etcd endpoint given")
    return result


# -- the store ----------------------------------------------------------------------------


# gRPC backs off reconnecting up to 120 s by default: a broker cut from etcd for a minute would
# then stay fenced long after the network healed. A second is plenty for a local etcd.
_CHANNEL_OPTIONS: Final = {
    "grpc.initial_reconnect_backoff_ms": 200,
    "grpc.min_reconnect_backoff_ms": 200,
    "grpc.max_reconnect_backoff_ms": 1000,
}


class BrokerSession:
    """A broker's etcd lease, kept alive while the broker runs.

    Keys bound to it (the registration, the controller claim) vanish when it ends: on
    ``close`` at once, on a crash or a cut-off after the TTL. ``lost`` is set when the lease
    is found expired (etcd unreachable for longer than the TTL); the broker must then act as
    a broker that was declared dead.
    """

    # The session is given up once no keep-alive has succeeded for this share of the TTL,
    # counted from when the last good one was sent: etcd expires the lease no earlier than a
    # TTL after it received that one, so the broker steps down before the controller can
    # hand its partitions to others (a zombie leader would serve stale reads meanwhile).
    GIVE_UP_SHARE = 0.75

    def __init__(self, client: aetcd.Client, lease: Any, ttl_s: int) -> None:
        self._client = client
        self.lease = lease
        self.lease_id: int = lease.id
        self.ttl_s = ttl_s
        self.lost = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._last_good_sent = loop.time()
        self._keep_alive = loop.create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        interval = max(self.ttl_s / 4, 0.2)
        give_up_after = self.ttl_s * self.GIVE_UP_SHARE
        while True:
            await asyncio.sleep(interval)
            sent = loop.time()
            try:
                async with asyncio.timeout(max(give_up_after - (sent - self._last_good_sent), 0)):
                    reply = await self.lease.refresh()
            except (aetcd.exceptions.ClientError, TimeoutError) as exc:
                if loop.time() - self._last_good_sent < give_up_after:
                    logger.warning("etcd lease keep-alive failed: %s", exc)
                    continue
                logger.error(
                    "etcd unreachable for %.1f s of the lease's %d s: giving up the session",
                    loop.time() - self._last_good_sent,
                    self.ttl_s,
                )
                self.lost.set()
                return
            if reply is None or reply.TTL <= 0:
                logger.error(
                    "etcd lease %x expired: this broker's registration is gone", self.lease_id
                )
                self.lost.set()
                return
            self._last_good_sent = sent

    async def close(self) -> None:
        """End the session now: the registration and any controller claim go with it."""
        self._keep_alive.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._keep_alive
        with contextlib.suppress(aetcd.exceptions.ClientError):
            await self.lease.revoke()


class EtcdMetadataStore:
    """The cluster's metadata in etcd. One per broker process; every method may be called
    concurrently with the others (each change is one etcd transaction)."""

    def __init__(
        self,
        endpoints: Sequence[tuple[str, int]],
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout_s: float = 5.0,
    ) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoint given")
        self._endpoints = list(endpoints)
        self._prefix = prefix.rstrip("/")
        self._timeout_s = timeout_s
        self._client: aetcd.Client | None = None

    # -- keys --------------------------------------------------------------------------

    def key(self, *parts: object) -> bytes:
        return "/".join((self._prefix, *(str(p) for p in parts))).encode()

    @property
    def prefix(self) -> str:
        return self._prefix

    # -- connection --------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect to the first endpoint that answers."""
        errors = []
        for host, port in self._endpoints:
            client = aetcd.Client(
                host=host, port=port, timeout=self._timeout_s, options=_CHANNEL_OPTIONS
            )
            try:
                await client.connect()
                await client.get(self.key("cluster_id"))
            except (aetcd.exceptions.ClientError, OSError) as exc:
                errors.append(f"{host}:{port}: {exc or type(exc).__name__}")
                with contextlib.suppress(Exception):
                    await client.close()
                continue
            self._client = client
            return
        raise EtcdUnavailableError("no etcd endpoint answered (" + "; ".join(errors) + ")")

    async def close(self) -> None:
        """Close the etcd client, waiting at most the store's timeout: aetcd's close takes
        its watcher's lock and puts on a bounded request queue, and after etcd restarted
        under load a wedged watcher can hold either for good (seen in CI as a test that hung
        in its cleanup)."""
        if self._client is not None:
            with contextlib.suppress(Exception):  # TimeoutError included: closing anyway
                await asyncio.wait_for(self._client.close(), self._timeout_s)
            self._client = None

    @property
    def timeout_s(self) -> float:
        """The bound of each etcd call (and of closing the client or the credentials watch)."""
        return self._timeout_s

    @property
    def client(self) -> aetcd.Client:
        if self._client is None:
            raise EtcdUnavailableError("not connected to etcd")
        return self._client

    # -- cluster id --------------------------------------------------------------------

    @etcd_errors_translated
    async def ensure_cluster_id(self, candidate: str) -> str:
        """The cluster's id: ``candidate`` if this is the first broker, else the one stored."""
        client = self.client
        key = self.key("cluster_id")
        tx = client.transactions
        await client.transaction(
            compare=[tx.version(key) == 0], success=[tx.put(key, candidate.encode())], failure=[]
        )
        found = await client.get(key)
        assert found is not None
        return str(found.value.decode())

    # -- brokers -----------------------------------------------------------------------

    @etcd_errors_translated
    async def open_session(self, ttl_s: int = DEFAULT_SESSION_TTL_S) -> BrokerSession:
        lease = await self.client.lease(ttl_s)
        return BrokerSession(self.client, lease, ttl_s)

    @etcd_errors_translated
    async def register_broker(
        self, registration: BrokerRegistration, session: BrokerSession
    ) -> BrokerRegistration:
        """Register under the session's lease; ``BrokerIdInUseError`` if a live broker holds
        the id. A registration left by a dead earlier run of this same broker (equal
        ``incarnation``) is taken back: its lease is revoked (with whatever else that run
        held on it, a controller claim included) and the registration made again. Returns
        the registration with its broker epoch."""
        client = self.client
        key = self.key("brokers", registration.broker_id)
        tx = client.transactions
        for attempt in range(2):
            ok, responses = await client.transaction(
                compare=[tx.version(key) == 0],
                success=[tx.put(key, registration.encode(), lease=session.lease)],
                failure=[tx.get(key)],
            )
            if ok:
                revision = int(responses[0].response_put.header.revision)
                return replace(registration, broker_epoch=revision)
            held = _first_kv(responses)
            if held is None:
                continue  # deleted meanwhile: try again
            value, meta = held
            other = BrokerRegistration.decode(value, broker_epoch=-1)
            where = " at " + ", ".join(f"{e.host}:{e.port}" for e in other.endpoints)
            if (
                attempt == 0
                and registration.incarnation is not None
                and other.incarnation == registration.incarnation
            ):
                logger.warning(
                    "broker id %d is still registered by an earlier run of this broker%s "
                    "(same log dir; its etcd lease outlived it): taking it back",
                    registration.broker_id,
                    where,
                )
                lease_id = int(getattr(meta, "lease", 0) or 0)
                if lease_id:
                    with contextlib.suppress(aetcd.exceptions.ClientError):
                        await client.revoke_lease(lease_id)
                else:
                    await client.transaction(
                        compare=[tx.mod(key) == meta.mod_revision],
                        success=[tx.delete(key)],
                        failure=[],
                    )
                continue
            raise BrokerIdInUseError(
                f"broker id {registration.broker_id} is already registered by a live broker"
                f"{where}; if that broker has stopped, its registration expires within "
                f"{session.ttl_s}s of its last contact with etcd"
            )
        raise BrokerIdInUseError(
            f"broker id {registration.broker_id} is registered by another broker that keeps "
            "taking it"
        )

    # -- controller --------------------------------------------------------------------

    @etcd_errors_translated
    async def try_become_controller(
        self, broker_id: int, session: BrokerSession
    ) -> ControllerClaim | None:
        """Claim the controller role if nobody holds it; the claim takes the next epoch.
        None when another broker is controller (watch ``P/controller`` to try again)."""
        client = self.client
        tx = client.transactions
        controller_key = self.key("controller")
        epoch_key = self.key("controller_epoch")
        while True:
            current = await client.get(epoch_key)
            last_epoch = int(current.value) if current is not None else 0
            epoch_guard = (
                tx.mod(epoch_key) == current.mod_revision
                if current is not None
                else tx.version(epoch_key) == 0
            )
            claim = ControllerClaim(broker_id, last_epoch + 1)
            ok, _ = await client.transaction(
                compare=[tx.version(controller_key) == 0, epoch_guard],
                success=[
                    tx.put(controller_key, claim.encode(), lease=session.lease),
                    tx.put(epoch_key, str(claim.controller_epoch).encode()),
                ],
                failure=[],
            )
            if ok:
                return claim
            if await client.get(controller_key) is not None:
                return None
            # The epoch moved under us (another broker won and already resigned): try again.

    @etcd_errors_translated
    async def resign_controller(self, claim: ControllerClaim) -> None:
        client = self.client
        tx = client.transactions
        key = self.key("controller")
        await client.transaction(
            compare=[tx.value(key) == claim.encode()], success=[tx.delete(key)], failure=[]
        )

    @etcd_errors_translated
    async def controller_write(
        self,
        claim: ControllerClaim,
        puts: Sequence[tuple[bytes, bytes]] = (),
        deletes: Sequence[bytes] = (),
        *,
        guards: Sequence[Any] = (),
        delete_prefixes: Sequence[bytes] = (),
    ) -> bool:
        """Apply the controller's writes, only while ``claim`` is still the controller and
        every one of ``guards`` holds. False when fenced (or a guard fails).

        Atomic when they fit one transaction (etcd refuses more than ``--max-txn-ops``
        operations, 128 by default). More (a topic of thousands of partitions) are written
        in order in several transactions, each fenced and guarded alike, deletions first:
        the caller orders its puts so that the last one is the commit point (a topic's
        record), which readers require before they believe the others (``ClusterView``
        ignores partitions their topic record does not name). A failure part way leaves
        unnamed partition keys, which the next creation of that topic clears."""
        client = self.client
        tx = client.transactions
        compare = [tx.value(self.key("controller")) == claim.encode(), *guards]
        ops: list[Any] = [tx.delete(k) for k in deletes]
        ops += [tx.put(k, v) for k, v in puts]
        batches = [ops[start : start + _MAX_TXN_OPS] for start in range(0, len(ops), _MAX_TXN_OPS)]
        if delete_prefixes:
            # A transaction may not both delete a range and put a key inside it: on its own.
            batches.insert(0, [Delete(p, range_end=prefix_range_end(p)) for p in delete_prefixes])
        for batch in batches or [[]]:
            ok, _ = await client.transaction(compare=compare, success=batch, failure=[])
            if not ok:
                return False
        return True

    @etcd_errors_translated
    async def create_topic(
        self, claim: ControllerClaim, topic: TopicRecord, states: Sequence[PartitionState]
    ) -> bool:
        """The controller creates a topic and its partitions: the partition keys (after
        clearing any a creation that died part way left), then the topic record, which makes
        them visible (``controller_write``); one transaction when they fit. False if fenced
        or the topic exists."""
        tx = self.client.transactions
        topic_key = self.key("topics", topic.name)
        puts = [(self.key("partitions", topic.name, i), s.encode()) for i, s in enumerate(states)]
        puts.append((topic_key, topic.encode()))
        return await self.controller_write(
            claim,
            puts,
            guards=[tx.version(topic_key) == 0],
            delete_prefixes=[self.key("partitions", topic.name, "")],
        )

    @etcd_errors_translated
    async def topic_revision(self, name: str) -> int | None:
        """The etcd revision of the topic's record as etcd has it now (a CreatePartitions
        moves it too), None when the topic does not exist."""
        found = await self.client.get(self.key("topics", name))
        return None if found is None else int(found.mod_revision)

    @etcd_errors_translated
    async def delete_topic(self, claim: ControllerClaim, name: str, partitions: int) -> bool:
        """The topic record and every partition key of the topic, in one transaction
        (a range deletion is one operation however many partitions there are)."""
        return await self.controller_write(
            claim,
            deletes=[self.key("topics", name)],
            delete_prefixes=[self.key("partitions", name, "")],
        )

    @etcd_errors_translated
    async def request_controlled_shutdown(self, broker_id: int, session: BrokerSession) -> None:
        """Ask the controller to move this broker's leaderships away (Kafka's controlled
        shutdown). The key lives on the broker's lease and goes with it."""
        await self.client.put(self.key("shutdown", broker_id), b"1", lease=session.lease)

    # -- partitions --------------------------------------------------------------------

    @etcd_errors_translated
    async def partition_state(self, topic: str, partition: int) -> VersionedPartitionState | None:
        found = await self.client.get(self.key("partitions", topic, partition))
        if found is None:
            return None
        return VersionedPartitionState(PartitionState.decode(found.value), found.mod_revision)

    @etcd_errors_translated
    async def alter_partition(
        self, topic: str, partition: int, expected: VersionedPartitionState, isr: Sequence[int]
    ) -> VersionedPartitionState | None:
        """The leader's ISR change (Kafka's AlterPartition): accepted only if the partition
        has not changed since ``expected``; None when stale (re-read and decide again)."""
        client = self.client
        tx = client.transactions
        key = self.key("partitions", topic, partition)
        old = expected.state
        new = replace(old, isr=tuple(isr), partition_epoch=old.partition_epoch + 1)
        ok, responses = await client.transaction(
            compare=[tx.mod(key) == expected.mod_revision],
            success=[tx.put(key, new.encode())],
            failure=[],
        )
        if not ok:
            return None
        return VersionedPartitionState(new, int(responses[0].response_put.header.revision))

    @etcd_errors_translated
    async def controller_set_partition(
        self,
        claim: ControllerClaim,
        topic: str,
        partition: int,
        expected: VersionedPartitionState,
        new: PartitionState,
    ) -> bool:
        """A controller's change of one partition (leader election, reassignment), fenced by
        its claim and by the partition not having changed since ``expected``."""
        tx = self.client.transactions
        key = self.key("partitions", topic, partition)
        return await self.controller_write(
            claim, [(key, new.encode())], guards=[tx.mod(key) == expected.mod_revision]
        )

    # -- producer ids ------------------------------------------------------------------

    @etcd_errors_translated
    async def allocate_producer_ids(self, block_size: int) -> range:
        """A block of producer ids no other broker will ever be given."""
        client = self.client
        tx = client.transactions
        key = self.key("producer_ids", "next_block")
        while True:
            current = await client.get(key)
            first = int(current.value) if current is not None else 0
            guard = (
                tx.mod(key) == current.mod_revision if current is not None else tx.version(key) == 0
            )
            ok, _ = await client.transaction(
                compare=[guard],
                success=[tx.put(key, str(first + block_size).encode())],
                failure=[],
            )
            if ok:
                return range(first, first + block_size)

    # -- ACLs --------------------------------------------------------------------------

    @etcd_errors_translated
    async def read_acls(self) -> tuple[bytes | None, int]:
        """The ACL document and its modification revision (0 when absent)."""
        found = await self.client.get(self.key("acls"))
        if found is None:
            return None, 0
        return bytes(found.value), int(found.mod_revision)

    @etcd_errors_translated
    async def put_acls(self, data: bytes, expected_mod_revision: int) -> int | None:
        """Replace the ACL document if it is still the one read at ``expected_mod_revision``;
        the etcd revision of the write, None when another write came first."""
        tx = self.client.transactions
        key = self.key("acls")
        guard = (
            tx.mod(key) == expected_mod_revision if expected_mod_revision else tx.version(key) == 0
        )
        ok, responses = await self.client.transaction(
            compare=[guard], success=[tx.put(key, data)], failure=[]
        )
        if not ok:
            return None
        return int(responses[0].response_put.header.revision)

    # -- topic configs -------------------------------------------------------------------

    @etcd_errors_translated
    async def update_topic_configs(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> tuple[TopicRecord, int] | None:
        """Replace the configs of ``P/topics/<name>`` with ``change(its configs)``, retried on
        a concurrent write; the new record and the etcd revision of the write, None when the
        topic does not exist. ``change`` may raise to refuse."""
        client = self.client
        tx = client.transactions
        key = self.key("topics", name)
        while True:
            current = await client.get(key)
            if current is None:
                return None
            record = TopicRecord.decode(current.value)
            updated = replace(record, configs=dict(change(dict(record.configs))))
            ok, responses = await client.transaction(
                compare=[tx.mod(key) == current.mod_revision],
                success=[tx.put(key, updated.encode())],
                failure=[],
            )
            if ok:
                return updated, int(responses[0].response_put.header.revision)

    # -- dynamic broker configs ----------------------------------------------------------

    @etcd_errors_translated
    async def broker_configs(self) -> dict[str, dict[str, str]]:
        """Every stored dynamic broker config set, by stored name (``<id>``/``<default>``)."""
        result = await self.client.get_prefix(self.key("configs", "brokers", ""))
        return {
            self.split_key(kv.key)[2]: decode_broker_configs(kv.value)
            for kv in result
            if len(self.split_key(kv.key)) == 3
        }

    @etcd_errors_translated
    async def update_broker_configs(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """Replace ``P/configs/brokers/<name>`` with ``change(its configs)`` (an empty result
        deletes the key); retried on a concurrent write. ``change`` may raise to refuse."""
        return await self._update_configs(self.key("configs", "brokers", name), change)

    @etcd_errors_translated
    async def update_group_configs(
        self, group_id: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """``P/configs/groups/<group id, percent-encoded>`` as ``update_broker_configs``."""
        return await self._update_configs(
            self.key("configs", "groups", group_key(group_id)), change
        )

    async def _update_configs(
        self, key: bytes, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        client = self.client
        tx = client.transactions
        while True:
            current = await client.get(key)
            stored = decode_broker_configs(current.value) if current is not None else {}
            new = change(dict(stored))
            guard = (
                tx.mod(key) == current.mod_revision if current is not None else tx.version(key) == 0
            )
            write = tx.put(key, _encode(dict(sorted(new.items())))) if new else tx.delete(key)
            ok, _ = await client.transaction(compare=[guard], success=[write], failure=[])
            if ok:
                return dict(new)

    # -- reading -----------------------------------------------------------------------

    @etcd_errors_translated
    async def snapshot(self) -> MetadataSnapshot:
        """Every key under the prefix, read at one revision."""
        result = await self.client.get_prefix(self.key(""))
        revision = int(result.header.revision)
        cluster_id: str | None = None
        brokers: dict[int, BrokerRegistration] = {}
        controller: ControllerClaim | None = None
        topics: dict[str, TopicRecord] = {}
        partitions: dict[tuple[str, int], VersionedPartitionState] = {}
        shutting_down: set[int] = set()
        acls: bytes | None = None
        broker_configs: dict[str, dict[str, str]] = {}
        group_configs: dict[str, dict[str, str]] = {}
        for kv in result:
            parts = self.split_key(kv.key)
            if parts == ["cluster_id"]:
                cluster_id = kv.value.decode()
            elif parts == ["controller"]:
                controller = ControllerClaim.decode(kv.value)
            elif len(parts) == 2 and parts[0] == "brokers":
                reg = BrokerRegistration.decode(kv.value, broker_epoch=kv.create_revision)
                brokers[reg.broker_id] = reg
            elif len(parts) == 2 and parts[0] == "topics":
                topic = TopicRecord.decode(kv.value)
                topics[topic.name] = topic
            elif len(parts) == 3 and parts[0] == "partitions":
                partitions[(parts[1], int(parts[2]))] = VersionedPartitionState(
                    PartitionState.decode(kv.value), kv.mod_revision
                )
            elif len(parts) == 2 and parts[0] == "shutdown":
                shutting_down.add(int(parts[1]))
            elif parts == ["acls"]:
                acls = bytes(kv.value)
            elif len(parts) == 3 and parts[:2] == ["configs", "brokers"]:
                broker_configs[parts[2]] = decode_broker_configs(kv.value)
            elif len(parts) == 3 and parts[:2] == ["configs", "groups"]:
                group_configs[group_of_key(parts[2])] = decode_broker_configs(kv.value)
        return MetadataSnapshot(
            revision,
            cluster_id,
            brokers,
            controller,
            topics,
            partitions,
            frozenset(shutting_down),
            acls,
            broker_configs,
            group_configs,
        )

    def split_key(self, key: bytes) -> list[str]:
        """``P/partitions/t/0`` -> ``["partitions", "t", "0"]``. Topic names cannot hold
        ``/`` (Kafka allows letters, digits, ``.``, ``_`` and ``-``), so splitting is safe."""
        text = key.decode()
        return text[len(self._prefix) + 1 :].split("/")

    async def watch(
        self, start_revision: int, *, on_started: Callable[[], None] | None = None
    ) -> AsyncIterator[MetadataEvent]:
        """Every change under the prefix from ``start_revision`` on, in revision order. A
        broken watch raises MetadataStoreError (HistoryCompactedError when the revisions
        asked for are compacted away)."""
        try:
            watch = await self.client.watch_prefix(self.key(""), start_revision=start_revision)
        except aetcd.exceptions.ClientError as exc:
            raise MetadataStoreError(str(exc) or type(exc).__name__) from exc
        if on_started is not None:
            on_started()
        try:
            async for event in watch:
                kv = event.kv
                deleted = event.kind == "DELETE"
                yield MetadataEvent(
                    key=kv.key.decode(),
                    value=None if deleted else kv.value,
                    mod_revision=int(kv.mod_revision),
                    create_revision=int(kv.create_revision),
                )
        except aetcd.exceptions.RevisionCompactedError as exc:
            raise HistoryCompactedError(str(exc) or "etcd compacted the history") from exc
        except aetcd.exceptions.ClientError as exc:
            raise MetadataStoreError(str(exc) or type(exc).__name__) from exc
        finally:
            with contextlib.suppress(Exception):
                await watch.cancel()


def group_key(group_id: str) -> str:
    """A group id as one etcd key segment: group ids may hold ``/`` (and anything else)."""
    return urllib.parse.quote(group_id, safe="")


def group_of_key(segment: str) -> str:
    return urllib.parse.unquote(segment)


def decode_broker_configs(raw: bytes) -> dict[str, str]:
    data = json.loads(raw)
    return {str(k): str(v) for k, v in dict(data).items()}


def _first_kv(responses: list[Any]) -> tuple[bytes, Any] | None:
    """The first (value, key metadata) of a transaction's range responses."""
    for response in responses:
        if isinstance(response, list) and response:
            value, meta = response[0]
            return bytes(value), meta
    return None
