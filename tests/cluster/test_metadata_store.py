"""The etcd metadata store against a real etcd: each rule the cluster relies on.

One etcd per test. Broker deaths are simulated the two ways they happen: a lease revoked at
once (a clean exit) and a lease whose keep-alive stops (a crash), whose expiry is awaited on a
watch event, not with a sleep.
"""

from __future__ import annotations

import asyncio

import pytest
from etcd_server import EtcdServer

from josefk.cluster.metadata_store import (
    BrokerIdInUseError,
    BrokerRegistration,
    EndpointRecord,
    EtcdMetadataStore,
    EtcdUnavailableError,
    PartitionState,
    TopicRecord,
    parse_endpoints,
)

pytestmark = pytest.mark.timeout(60)


async def connected(etcd: EtcdServer, prefix: str = "/josefk") -> EtcdMetadataStore:
    store = EtcdMetadataStore(parse_endpoints(etcd.endpoint), prefix=prefix)
    await store.connect()
    return store


def registration(broker_id: int, port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndpointRecord("PLAINTEXT", "127.0.0.1", port),))


def test_parse_endpoints() -> None:
    assert parse_endpoints("a:1, b:2,") == [("a", 1), ("b", 2)]
    assert parse_endpoints("[::1]:2379") == [("::1", 2379)]
    for bad in ("", "host", "host:0", "host:x", ":1"):
        with pytest.raises(ValueError):
            parse_endpoints(bad)


async def test_no_etcd_is_a_clear_error(etcd: EtcdServer) -> None:
    etcd.stop()
    store = EtcdMetadataStore(parse_endpoints(etcd.endpoint), timeout_s=1.0)
    with pytest.raises(EtcdUnavailableError, match=etcd.endpoint):
        await store.connect()


async def test_the_first_broker_writes_the_cluster_id(etcd: EtcdServer) -> None:
    first, second = await connected(etcd), await connected(etcd)
    try:
        assert await first.ensure_cluster_id("cluster-a") == "cluster-a"
        assert await second.ensure_cluster_id("cluster-b") == "cluster-a"
        other_prefix = await connected(etcd, prefix="/other")
        assert await other_prefix.ensure_cluster_id("cluster-c") == "cluster-c"
        await other_prefix.close()
    finally:
        await first.close()
        await second.close()


async def test_a_live_broker_id_is_refused_and_freed_when_its_lease_ends(etcd: EtcdServer) -> None:
    store = await connected(etcd)
    try:
        one = await store.open_session()
        registered = await store.register_broker(registration(1, 9092), one)
        assert registered.broker_epoch > 0
        two = await store.open_session()
        with pytest.raises(BrokerIdInUseError, match=r"broker id 1 .*127\.0\.0\.1:9092"):
            await store.register_broker(registration(1, 9093), two)
        assert set((await store.snapshot()).brokers) == {1}

        await one.close()  # a clean exit revokes the lease: the id is free at once
        again = await store.register_broker(registration(1, 9093), two)
        assert again.broker_epoch > registered.broker_epoch
        snapshot = await store.snapshot()
        assert snapshot.brokers[1].endpoints[0].port == 9093
        await two.close()
    finally:
        await store.close()


async def test_a_crashed_brokers_registration_expires_with_its_lease(etcd: EtcdServer) -> None:
    store = await connected(etcd)
    try:
        session = await store.open_session(ttl_s=2)
        await store.register_broker(registration(7), session)
        start = (await store.snapshot()).revision + 1
        session._keep_alive.cancel()  # the process died: nobody refreshes the lease

        async def expiry() -> str:
            async for event in store.watch(start):
                if event.value is None:
                    return event.key
            raise AssertionError("watch ended")

        assert await asyncio.wait_for(expiry(), timeout=30) == "/josefk/brokers/7"
        assert (await store.snapshot()).brokers == {}
    finally:
        await store.close()


async def test_a_broker_takes_back_the_id_its_own_dead_run_still_holds(
    etcd: EtcdServer,
) -> None:
    """A run that died (SIGKILL, or stopped with etcd so that etcd restored its lease with a
    fresh TTL on restart) leaves a live-looking registration. The next run of the same
    broker (same incarnation: host, log dir, directory.id) takes the id back at once, with
    the dead run's lease (and its controller claim); another broker is still refused.
    Before: "already registered by a live broker" until the lease expired."""
    store = await connected(etcd)
    try:
        dead = await store.open_session(ttl_s=600)
        dead._keep_alive.cancel()
        mine = BrokerRegistration(
            3, (EndpointRecord("PLAINTEXT", "127.0.0.1", 9094),), incarnation="h:/data/b3:id-1"
        )
        await store.register_broker(mine, dead)
        assert await store.try_become_controller(3, dead) is not None

        stranger = await store.open_session()
        other_run = BrokerRegistration(3, mine.endpoints, incarnation="h:/elsewhere/b3:id-2")
        with pytest.raises(BrokerIdInUseError, match="expires within"):
            await store.register_broker(other_run, stranger)
        await stranger.close()

        restarted = await store.open_session()
        again = await store.register_broker(mine, restarted)
        snapshot = await store.snapshot()
        assert snapshot.brokers[3].broker_epoch == again.broker_epoch
        assert snapshot.brokers[3].incarnation == mine.incarnation
        assert snapshot.controller is None  # the dead run's claim went with its lease
        await restarted.close()
        assert (await store.snapshot()).brokers == {}
    finally:
        await store.close()


async def test_one_controller_at_a_time_and_a_deposed_one_is_fenced(etcd: EtcdServer) -> None:
    a, b = await connected(etcd), await connected(etcd)
    try:
        session_a, session_b = await a.open_session(), await b.open_session()
        claims = await asyncio.gather(
            a.try_become_controller(1, session_a), b.try_become_controller(2, session_b)
        )
        winners = [c for c in claims if c is not None]
        assert len(winners) == 1 and winners[0].controller_epoch == 1
        first = winners[0]
        first_store, first_session = (a, session_a) if first.broker_id == 1 else (b, session_b)
        other_store, other_session = (b, session_b) if first.broker_id == 1 else (a, session_a)
        other_id = 3 - first.broker_id

        topic = TopicRecord("t", "id-t", 1)
        assert await first_store.create_topic(first, topic, [PartitionState((1, 2), 1, 0, (1, 2))])
        assert not await first_store.create_topic(first, topic, [])  # exists already

        await first_session.close()  # the controller's lease ends
        second = await other_store.try_become_controller(other_id, other_session)
        assert second is not None and second.controller_epoch == 2
        # The deposed controller's writes no longer apply...
        assert not await first_store.delete_topic(first, "t", 1)
        assert "t" in (await other_store.snapshot()).topics
        # ...the new one's do.
        assert await other_store.delete_topic(second, "t", 1)
        snapshot = await other_store.snapshot()
        assert snapshot.topics == {} and snapshot.partitions == {}
        assert snapshot.controller == second
        await other_session.close()
    finally:
        await a.close()
        await b.close()


async def test_a_stale_isr_change_is_rejected(etcd: EtcdServer) -> None:
    store = await connected(etcd)
    try:
        session = await store.open_session()
        claim = await store.try_become_controller(1, session)
        assert claim is not None
        state = PartitionState((1, 2, 3), 1, 0, (1, 2, 3))
        assert await store.create_topic(claim, TopicRecord("t", "id", 1), [state])
        seen = await store.partition_state("t", 0)
        assert seen is not None and seen.state == state

        shrunk = await store.alter_partition("t", 0, seen, [1, 2])
        assert shrunk is not None
        assert shrunk.state.isr == (1, 2) and shrunk.state.partition_epoch == 1
        # A leader still holding the old state proposes again: stale, rejected.
        assert await store.alter_partition("t", 0, seen, [1]) is None
        # The controller moved leadership meanwhile: the leader's next proposal is stale too.
        elected = PartitionState((1, 2, 3), 2, 1, (2,), shrunk.state.partition_epoch + 1)
        assert await store.controller_set_partition(claim, "t", 0, shrunk, elected)
        assert await store.alter_partition("t", 0, shrunk, [1, 2, 3]) is None
        now = await store.partition_state("t", 0)
        assert now is not None and now.state == elected
        await session.close()
    finally:
        await store.close()


async def test_producer_id_blocks_never_overlap(etcd: EtcdServer) -> None:
    stores = [await connected(etcd) for _ in range(3)]
    try:
        blocks = await asyncio.gather(
            *(store.allocate_producer_ids(1000) for store in stores for _ in range(10))
        )
        ids = [pid for block in blocks for pid in block]
        assert len(ids) == len(set(ids)) == 30_000
        assert sorted(ids) == list(range(30_000))
    finally:
        for store in stores:
            await store.close()


async def test_watch_from_a_snapshot_misses_nothing(etcd: EtcdServer) -> None:
    store, writer = await connected(etcd), await connected(etcd)
    try:
        session = await writer.open_session()
        await writer.register_broker(registration(1), session)
        snapshot = await store.snapshot()
        assert set(snapshot.brokers) == {1}
        # Changes made after the snapshot and before the watch starts are still delivered.
        claim = await writer.try_become_controller(1, session)
        assert claim is not None
        await writer.create_topic(
            claim, TopicRecord("t", "id", 1), [PartitionState((1,), 1, 0, (1,))]
        )
        await session.close()

        keys: list[tuple[str, bool]] = []
        async for event in store.watch(snapshot.revision + 1):
            keys.append((event.key, event.value is not None))
            if len(keys) == 6:
                break
        assert keys[:4] == [
            ("/josefk/controller", True),
            ("/josefk/controller_epoch", True),
            # The topic record last: it makes its partitions visible.
            ("/josefk/partitions/t/0", True),
            ("/josefk/topics/t", True),
        ]
        # The lease's keys go together, in one revision, when it is revoked.
        assert sorted(keys[4:]) == [("/josefk/brokers/1", False), ("/josefk/controller", False)]
    finally:
        await store.close()
        await writer.close()


class _WedgedClient:
    """An etcd client whose close never returns (aetcd's, with its watcher wedged)."""

    closes = 0

    async def close(self) -> None:
        type(self).closes += 1
        await asyncio.Event().wait()


def test_closing_a_wedged_client_is_bounded_by_the_store_s_timeout() -> None:
    """A fault path: the broker's shutdown must not wait for good on the etcd client."""

    async def run() -> None:
        store = EtcdMetadataStore(parse_endpoints("127.0.0.1:1"), timeout_s=0.05)
        store._client = _WedgedClient()  # type: ignore[assignment]
        async with asyncio.timeout(5):
            await store.close()
        assert _WedgedClient.closes == 1
        with pytest.raises(EtcdUnavailableError):
            store.client  # noqa: B018  closed: no client any more

    asyncio.run(run())
