"""Kafka's keys for features josefk does not run, in a cluster: a topic's
``message.format.version`` (librdkafka 0092) is kept in the topic's etcd record and described
by every broker; a broker's ``sasl.kerberos.min.time.before.relogin`` (librdkafka 0081) is kept
in etcd as that broker's per-broker config, refused at the cluster-wide default (a per-broker
key, as in Kafka), and still there after the broker restarts. Before, both were refused
(INVALID_CONFIG)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka.admin import ConfigResource, NewTopic
from etcd_server import ETCD, SKIP_REASON

from josefk.client import AIOAdmin, ConfigSource, ResourceType
from josefk.client.errors import KafkaError as JosefkError

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
    pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning"),
]

TOPIC = "old-format"
RELOGIN = "sasl.kerberos.min.time.before.relogin"
FORMAT = "message.format.version"


def described(
    cluster: LocalCluster, broker_id: int, rtype: ResourceType, name: str
) -> dict[str, tuple[str | None, ConfigSource]]:
    """The resource's configs as broker ``broker_id`` itself answers them."""

    async def go() -> dict[str, tuple[str | None, ConfigSource]]:
        async with AIOAdmin(bootstrap_servers=cluster.brokers[broker_id].bootstrap) as admin:
            found = await admin.describe_configs([(rtype, name)])
        return {k: (e.value, e.source) for k, e in found[(rtype, name)].items()}

    return asyncio.run(go())


def test_inert_keys_are_kept_in_etcd_and_described_by_every_broker(tmp_path: Path) -> None:
    with LocalCluster(
        tmp_path,
        brokers=2,
        settings=[
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
        ],
    ) as cluster:
        admin = cluster.admin()
        admin.create_topics([NewTopic(TOPIC, 1, 2, config={FORMAT: "2.8"})])[TOPIC].result(30)
        for broker_id in (1, 2):
            wait_for(
                f"broker {broker_id} describes {FORMAT}",
                lambda b=broker_id: (
                    described(cluster, b, ResourceType.TOPIC, TOPIC).get(FORMAT)
                    == ("2.8", ConfigSource.DYNAMIC_TOPIC_CONFIG)
                ),
            )

        # librdkafka 0081's request: AlterConfigs on one broker's resource.
        resource = ConfigResource(ConfigResource.Type.BROKER, "2", {RELOGIN: "58000"})
        admin.alter_configs([resource])[resource].result(timeout=20)
        per_broker = (RELOGIN, ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG))
        assert per_broker in described(cluster, 2, ResourceType.BROKER, "2").items()

        async def at_cluster_default() -> None:
            async with AIOAdmin(bootstrap_servers=cluster.brokers[1].bootstrap) as josefk:
                await josefk.alter_configs((ResourceType.BROKER, ""), {RELOGIN: "1"})

        with pytest.raises(JosefkError, match="broker id must be specified"):
            asyncio.run(at_cluster_default())

        cluster.brokers[2].restart()
        wait_for(
            "broker 2 back with its stored per-broker config",
            lambda: per_broker in described(cluster, 2, ResourceType.BROKER, "2").items(),
        )
