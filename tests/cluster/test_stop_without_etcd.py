"""A broker whose controlled shutdown loses etcd half way stops promptly and cleanly.

Its shutdown request reached etcd, but the controller (frozen with SIGSTOP) never acts on
it, and then etcd goes away: nothing can move the broker's leaderships any more. Once its
session lapses the broker stops without them (the lease expires by itself, as after a
crash). Before, it waited out the whole ``josefk.shutdown.timeout.ms`` for a metadata change
that could not come (seen when ``josefk dev-cluster`` stopped etcd together with the
brokers, and the broker was killed without its clean-shutdown marker)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aetcd
import pytest
from cluster_process import LocalCluster, wait_for
from etcd_server import ETCD, SKIP_REASON
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(ETCD is None, reason=SKIP_REASON)]


def shutdown_requested(endpoint: str, broker_id: int) -> bool:
    async def ask() -> bool:
        host, port = endpoint.rsplit(":", 1)
        async with aetcd.Client(host=host, port=int(port)) as client:
            return await client.get(f"/josefk/shutdown/{broker_id}".encode()) is not None

    return asyncio.run(ask())


def test_a_controlled_shutdown_that_loses_etcd_stops_promptly(tmp_path: Path) -> None:
    with LocalCluster(
        tmp_path, brokers=2, settings=["josefk.shutdown.timeout.ms=60000"]
    ) as cluster:
        controller = cluster.admin().list_topics(timeout=10).controller_id
        stopping = next(b for b in cluster.brokers if b != controller)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            admin.create_topics([NewTopic("held", replica_assignments={0: [stopping, controller]})])
        finally:
            admin.close()
        wait_for(
            f"held-0 led by {stopping} with both in sync",
            lambda: cluster.partition_states("held")[0] == (stopping, [stopping, controller],
                                                            [stopping, controller]),
        )  # fmt: skip
        cluster.brokers[controller].send_signal(signal.SIGSTOP)
        try:
            broker = cluster.brokers[stopping]
            broker.send_signal(signal.SIGTERM)
            wait_for(
                "the shutdown request in etcd",
                lambda: shutdown_requested(cluster.etcd.endpoint, stopping),
            )
            cluster.etcd.kill()
            # Well inside the 60 s deadline: only a broker that notices etcd is gone passes.
            assert broker.stop(timeout=20) == 0
            assert (broker.data_dir / ".kafka_cleanshutdown").exists()
        finally:
            cluster.brokers[controller].send_signal(signal.SIGCONT)
