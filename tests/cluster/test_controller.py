"""The controller's operations against a real etcd: topic lifecycle, failover elections,
preferred leaders, controlled shutdown, and fencing of a deposed controller."""

from __future__ import annotations

import random

import pytest
from etcd_server import EtcdServer

from josefk.cluster.controller import (
    ClusterController,
    ControllerFencedError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicExistsError,
)
from josefk.cluster.errors import MetadataStoreError
from josefk.cluster.metadata_store import EtcdMetadataStore, parse_endpoints

pytestmark = pytest.mark.timeout(60)
LIVE = {1: None, 2: None, 3: None}


async def controller_on(etcd: EtcdServer, broker_id: int = 1) -> ClusterController:
    store = EtcdMetadataStore(parse_endpoints(etcd.endpoint))
    await store.connect()
    session = await store.open_session()
    claim = await store.try_become_controller(broker_id, session)
    assert claim is not None
    controller = ClusterController(store, claim, rng=random.Random(7))
    controller.session = session  # type: ignore[attr-defined]
    return controller


async def states(
    controller: ClusterController, topic: str
) -> list[tuple[int, int, tuple[int, ...]]]:
    snapshot = await controller.store.snapshot()
    return [
        (v.state.leader, v.state.leader_epoch, v.state.isr)
        for (t, _), v in sorted(snapshot.partitions.items())
        if t == topic
    ]


async def test_topic_lifecycle(etcd: EtcdServer) -> None:
    controller = await controller_on(etcd)
    try:
        topic = await controller.create_topic(
            "t", partitions=3, replication_factor=3, live_brokers=LIVE
        )
        assert topic.partitions == 3 and len(topic.topic_id) == 22
        snapshot = await controller.store.snapshot()
        leaders = sorted(snapshot.partitions[("t", p)].state.leader for p in range(3))
        assert leaders == [1, 2, 3]  # one leadership per broker
        with pytest.raises(TopicExistsError):
            await controller.create_topic(
                "t", partitions=1, replication_factor=1, live_brokers=LIVE
            )
        with pytest.raises(InvalidReplicationFactorError):
            await controller.create_topic(
                "u", partitions=1, replication_factor=4, live_brokers=LIVE
            )
        with pytest.raises(InvalidReplicaAssignmentError):
            await controller.create_topic(
                "u", partitions=0, replication_factor=0, live_brokers=LIVE, assignments=[[1, 9]]
            )
        explicit = await controller.create_topic(
            "v", partitions=0, replication_factor=0, live_brokers=LIVE, assignments=[[3, 1], [2, 3]]
        )
        assert explicit.partitions == 2
        assert await states(controller, "v") == [(3, 0, (3, 1)), (2, 0, (2, 3))]

        grown = await controller.create_partitions("t", 5, live_brokers=LIVE)
        assert grown.partitions == 5
        snapshot = await controller.store.snapshot()
        assert all(len(snapshot.partitions[("t", p)].state.replicas) == 3 for p in range(5))
        with pytest.raises(InvalidPartitionsError):
            await controller.create_partitions("t", 4, live_brokers=LIVE)

        await controller.delete_topic("t")
        snapshot = await controller.store.snapshot()
        assert "t" not in snapshot.topics
        assert not [k for k in snapshot.partitions if k[0] == "t"]
    finally:
        await controller.store.close()


async def test_an_existing_topic_is_named_so_before_placement_is_judged(etcd: EtcdServer) -> None:
    """Kafka checks existence first: with a broker down, creating an existing topic of
    replication factor 3 is TOPIC_ALREADY_EXISTS, not INVALID_REPLICATION_FACTOR (issue 28)."""
    controller = await controller_on(etcd)
    try:
        await controller.create_topic("t", partitions=1, replication_factor=3, live_brokers=LIVE)
        two_live = {1: None, 2: None}
        for validate_only in (True, False):
            with pytest.raises(TopicExistsError):
                await controller.create_topic(
                    "t",
                    partitions=1,
                    replication_factor=3,
                    live_brokers=two_live,
                    validate_only=validate_only,
                )
        # A new topic with that factor is still refused for the brokers it lacks, and a
        # validate-only request is judged in full but writes nothing.
        with pytest.raises(InvalidReplicationFactorError):
            await controller.create_topic(
                "u", partitions=1, replication_factor=3, live_brokers=two_live, validate_only=True
            )
        checked = await controller.create_topic(
            "u", partitions=2, replication_factor=2, live_brokers=two_live, validate_only=True
        )
        assert checked.partitions == 2
        assert "u" not in (await controller.store.snapshot()).topics
    finally:
        await controller.store.close()


async def test_etcd_errors_leave_the_cluster_package_as_josefks_own(etcd: EtcdServer) -> None:
    """The broker never sees the etcd client's exception types: a store whose etcd is gone
    raises MetadataStoreError (josefk.cluster.errors) from every operation."""
    controller = await controller_on(etcd)
    try:
        etcd.close()
        with pytest.raises(MetadataStoreError) as raised:
            await controller.create_topic(
                "t", partitions=1, replication_factor=1, live_brokers=LIVE
            )
        assert not type(raised.value).__module__.startswith("aetcd")
        with pytest.raises(MetadataStoreError):
            await controller.store.snapshot()
    finally:
        await controller.store.close()


async def test_topic_configs_change_by_compare_and_swap_and_survive_growth(
    etcd: EtcdServer,
) -> None:
    """Any broker stores a topic's configs (``update_topic_configs``); the controller's
    CreatePartitions keeps them even when they changed after its snapshot was read."""
    controller = await controller_on(etcd)
    store = controller.store
    try:
        await controller.create_topic("t", partitions=1, replication_factor=1, live_brokers=LIVE)
        assert await store.update_topic_configs("absent", lambda c: c) is None
        stale = await store.snapshot()
        stored = await store.update_topic_configs("t", lambda c: {**c, "retention.ms": "1000"})
        assert stored is not None
        record, revision = stored
        assert record.configs == {"retention.ms": "1000"} and revision > stale.revision

        async def stale_snapshot() -> object:
            return stale

        controller.store.snapshot = stale_snapshot  # type: ignore[method-assign]
        grown = await controller.create_partitions("t", 2, live_brokers=LIVE)
        del controller.store.snapshot  # type: ignore[method-assign]
        assert grown.configs == {"retention.ms": "1000"}
        assert (await store.snapshot()).topics["t"].configs == {"retention.ms": "1000"}
    finally:
        await store.close()


async def test_failover_and_return(etcd: EtcdServer) -> None:
    controller = await controller_on(etcd)
    try:
        await controller.create_topic(
            "t", partitions=0, replication_factor=0, live_brokers=LIVE,
            assignments=[[1, 2, 3], [2, 3, 1]],
        )  # fmt: skip
        assert await controller.on_brokers_changed({1, 2, 3}) == 0
        # Broker 1 dies: partition 0 fails over to 2; partition 1 loses a follower.
        assert await controller.on_brokers_changed({2, 3}) == 2
        assert await states(controller, "t") == [(2, 1, (2, 3)), (2, 0, (2, 3))]
        # 2 dies too: 3 leads both.
        await controller.on_brokers_changed({3})
        assert await states(controller, "t") == [(3, 2, (3,)), (3, 1, (3,))]
        # 3 dies: no in-sync replica is left, the partitions go offline keeping their ISR.
        await controller.on_brokers_changed(set())
        assert await states(controller, "t") == [(-1, 3, (3,)), (-1, 2, (3,))]
        # 1 returns but was out of sync: still offline (no unclean election by default).
        assert await controller.on_brokers_changed({1}) == 0
        # 3 returns: it leads again with nothing lost.
        await controller.on_brokers_changed({1, 3})
        assert await states(controller, "t") == [(3, 4, (3,)), (3, 3, (3,))]
        # Rejoining the ISR is the leader's call (it sees the follower catch up), not ours.
    finally:
        await controller.store.close()


async def test_preferred_leaders_and_controlled_shutdown(etcd: EtcdServer) -> None:
    controller = await controller_on(etcd)
    try:
        await controller.create_topic(
            "t", partitions=0, replication_factor=0, live_brokers=LIVE,
            assignments=[[1, 2, 3], [2, 3, 1], [1, 3, 2]],
        )  # fmt: skip
        # Broker 1 stops cleanly: its leaderships move first, to in-sync followers.
        assert await controller.controlled_shutdown(1, {1, 2, 3}) == 0
        assert [s[0] for s in await states(controller, "t")] == [2, 2, 3]
        await controller.on_brokers_changed({2, 3})
        # It returns and catches up (the leaders put it back into the ISR).
        for p in (0, 2):
            seen = await controller.store.partition_state("t", p)
            assert seen is not None
            back = await controller.store.alter_partition("t", p, seen, [*seen.state.isr, 1])
            assert back is not None
        result = await controller.elect_preferred_leaders({1, 2, 3})
        assert result == {("t", 0): True, ("t", 1): True, ("t", 2): True}
        assert [s[0] for s in await states(controller, "t")] == [1, 2, 1]
    finally:
        await controller.store.close()


async def test_a_deposed_controller_is_fenced(etcd: EtcdServer) -> None:
    old = await controller_on(etcd, broker_id=1)
    try:
        await old.create_topic("t", partitions=1, replication_factor=1, live_brokers={1: None})
        await old.session.close()  # type: ignore[attr-defined]
        new = await controller_on(etcd, broker_id=2)
        assert new.claim.controller_epoch == old.claim.controller_epoch + 1
        with pytest.raises(ControllerFencedError, match="superseded"):
            await old.on_brokers_changed(set())
        with pytest.raises(ControllerFencedError):
            await old.delete_topic("t")
        assert await states(new, "t") == [(1, 0, (1,))]
        await new.store.close()
    finally:
        await old.store.close()
