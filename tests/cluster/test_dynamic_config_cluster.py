"""Dynamic broker configs in a cluster (KIP-226): kept in etcd and watched, so a cluster-wide
default set through one broker applies on every broker (their existing logs included), a
per-broker value only on its broker, and both survive a broker's restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cluster_process import LocalCluster, produce_until_rolled, wait_for
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from etcd_server import ETCD, SKIP_REASON

from josefk.client import AIOAdmin, ResourceType

pytestmark = [pytest.mark.timeout(240), pytest.mark.skipif(ETCD is None, reason=SKIP_REASON)]

TOPIC = "dyn-cluster"


def broker_entry(cluster: LocalCluster, broker_id: int, key: str) -> ConfigEntry:
    """``key`` as broker ``broker_id`` itself describes it (librdkafka sends a BROKER
    resource to the broker it names)."""
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    admin = cluster.admin()  # held: a collected AdminClient fails its futures
    futures = admin.describe_configs([resource], request_timeout=20)
    entry: ConfigEntry = futures[resource].result(timeout=20)[key]
    return entry


def has(cluster: LocalCluster, broker_id: int, key: str, value: str, source: ConfigSource) -> bool:
    entry = broker_entry(cluster, broker_id, key)
    return entry.value == value and ConfigSource(entry.source) == source


def test_a_cluster_default_set_through_one_broker_applies_on_every_broker(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path, brokers=2) as cluster:
        admin = cluster.admin()
        admin.create_topics([NewTopic(TOPIC, 1, 2)])[TOPIC].result(timeout=30)
        wait_for(
            f"{TOPIC}-0 with both replicas in sync",
            lambda: len(cluster.partition_states(TOPIC)[0][2]) == 2,
        )

        async def set_default() -> None:
            # Through one broker: the other learns of it from etcd only.
            async with AIOAdmin(bootstrap_servers=cluster.brokers[1].bootstrap) as josefk:
                await josefk.alter_configs((ResourceType.BROKER, ""), {"log.segment.bytes": "1024"})

        asyncio.run(set_default())
        for broker_id in (1, 2):
            wait_for(
                f"broker {broker_id} takes the cluster default",
                lambda b=broker_id: has(
                    cluster,
                    b,
                    "log.segment.bytes",
                    "1024",
                    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                ),
            )

        # The existing partition rolls at the new size on the leader and on the follower.
        produce_until_rolled(cluster, TOPIC, (1, 2))

        per_broker = ConfigResource(
            ConfigResource.Type.BROKER,
            "2",
            incremental_configs=[
                ConfigEntry(
                    "log.retention.bytes", "123456", incremental_operation=AlterConfigOpType.SET
                )
            ],
        )
        admin.incremental_alter_configs([per_broker])[per_broker].result(timeout=20)
        assert has(cluster, 2, "log.retention.bytes", "123456", ConfigSource.DYNAMIC_BROKER_CONFIG)
        assert has(cluster, 1, "log.retention.bytes", "-1", ConfigSource.DEFAULT_CONFIG)

        cluster.brokers[2].restart()
        wait_for(
            "broker 2 back with its stored configs",
            lambda: (
                has(cluster, 2, "log.retention.bytes", "123456", ConfigSource.DYNAMIC_BROKER_CONFIG)
                and has(
                    cluster,
                    2,
                    "log.segment.bytes",
                    "1024",
                    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                )
            ),
        )
