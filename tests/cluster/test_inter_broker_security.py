"""A three-broker cluster whose brokers talk to each other over SASL_PLAINTEXT, and over
SASL_SSL, with SCRAM, and whose SCRAM users live in etcd.

The inter-broker user is created in etcd before any broker starts (``josefk users add admin
--etcd``, as Kafka has it created in ZooKeeper or the controller first); each broker logs in as
it from ``listener.name.<listener>.scram-sha-256.sasl.jaas.config`` (over SASL_SSL trusting
the CA of ``ssl.truststore.location`` and checking the other broker's host name). Replication
then works (an RF=3 topic reaches a full ISR, an acks=all produce succeeds) and the brokers'
SASL listeners count the followers' logins; a user added through broker 1 logs in on broker 2.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from broker_process import SOURCE_DIR
from cluster_process import LocalCluster, wait_for
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD, SKIP_REASON, EtcdServer
from tls_pki import Pki, make_pki

from josefk.client import AIOAdmin
from josefk.client.errors import KafkaError

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="admin" password="admin-secret";'
)


def _settings(protocol: str, pki: Pki | None) -> list[str]:
    settings = [
        f"listeners=PLAINTEXT://127.0.0.1:0,{protocol}://127.0.0.1:0",
        f"security.inter.broker.protocol={protocol}",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
        f"listener.name.{protocol.lower()}.scram-sha-256.sasl.jaas.config={JAAS}",
        "offsets.topic.replication.factor=3",
        "group.initial.rebalance.delay.ms=0",
    ]
    if pki is not None:
        settings += [
            f"ssl.keystore.location={pki.server_keystore}",
            f"ssl.truststore.location={pki.ca}",
        ]
    return settings


def _josefk(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(SOURCE_DIR), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "josefk", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )


def _create_admin_user(etcd: EtcdServer) -> None:
    _josefk("users", "add", "admin", "--password", "admin-secret", "--etcd", etcd.endpoint)
    listed = _josefk("users", "list", "--json", "--etcd", etcd.endpoint)
    assert '"admin"' in listed.stdout


async def _logs_in(bootstrap: str, tls: dict[str, str], user: str, password: str) -> bool:
    try:
        async with asyncio.timeout(20):
            async with AIOAdmin(
                bootstrap_servers=bootstrap,
                sasl_mechanism="SCRAM-SHA-512",
                sasl_username=user,
                sasl_password=password,
                **tls,
            ) as admin:
                await admin.list_topics()
    except (KafkaError, TimeoutError):
        return False
    return True


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_replication_over_sasl_scram_and_users_shared_through_etcd(
    tmp_path: Path, protocol: str
) -> None:
    pki = make_pki(tmp_path / "pki") if protocol == "SASL_SSL" else None
    # The client side of the test: security.protocol, and the CA over TLS.
    tls = {"security_protocol": protocol}
    if pki is not None:
        tls["ssl_ca_location"] = str(pki.ca)
    with LocalCluster(
        tmp_path,
        settings=_settings(protocol, pki),
        metrics=True,
        before_brokers=_create_admin_user,
    ) as cluster:
        admin = cluster.admin()
        topic = NewTopic(
            "secured", num_partitions=3, replication_factor=3, config={"min.insync.replicas": "3"}
        )
        admin.create_topics([topic])["secured"].result(timeout=60)
        wait_for(
            "every partition led with a full ISR (followers fetched over SASL)",
            lambda: all(
                leader > 0 and len(isr) == 3
                for leader, _, isr in cluster.partition_states("secured").values()
            ),
        )
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 3})
        delivered: list[object] = []
        for i in range(30):
            producer.produce(
                "secured", f"v{i}".encode(), on_delivery=lambda err, _m: delivered.append(err)
            )
        assert producer.flush(60) == 0
        assert delivered == [None] * 30
        logins = sum(
            value
            for broker_id in cluster.brokers
            for name, value in cluster.scrape(broker_id).items()
            if name.startswith("kafka_server_socketservermetrics_successful_authentication_total")
            and f'listener="{protocol}"' in name
        )
        assert logins >= 2  # every follower's fetcher logged in to its leader

        # A user added through broker 1 (over its SASL listener, as admin) logs in on broker 2.
        one, two = cluster.brokers[1], cluster.brokers[2]
        assert not asyncio.run(_logs_in(two.endpoint(protocol), tls, "carol", "carol-pw"))
        client_settings = [f"security.protocol={protocol}", "sasl.mechanism=SCRAM-SHA-256"]
        client_settings.append(f"sasl.jaas.config={JAAS}")
        if pki is not None:
            client_settings.append(f"ssl.ca.location={pki.ca}")
        _josefk(
            "users",
            "add",
            "carol",
            "--password",
            "carol-pw",
            "--bootstrap",
            one.endpoint(protocol),
            *(arg for setting in client_settings for arg in ("-X", setting)),
        )
        wait_for(
            "carol logging in on broker 2",
            lambda: asyncio.run(_logs_in(two.endpoint(protocol), tls, "carol", "carol-pw")),
        )
