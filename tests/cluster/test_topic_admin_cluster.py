"""Topic administration in a real cluster (issue 28's last items).

- A broker hosting thousands of new partitions writes their files off the event loop, as the
  single node does: another client is answered while they are made (before, the watch's
  reconciliation made every log and fsynced every ``partition.metadata`` on the loop). A
  topic of more partitions than one etcd transaction holds (etcd's --max-txn-ops, 128 by
  default) is created at all (before, CreateTopics failed for it).
- CreateTopics of a topic that exists is TOPIC_ALREADY_EXISTS even while a broker is down
  (before, the controller judged placement first: INVALID_REPLICATION_FACTOR for a
  replication factor the live brokers could not hold).
- DeleteTopics removes the topic from every broker's catalog and log dirs, and the name can
  be created again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD, SKIP_REASON
from raw_client import RawClient

from josefk.broker.catalog import CATALOG_FILE
from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]

CreateTopics = request_class(ApiKey.CREATE_TOPICS)
MANY = 1000


def _create(client: RawClient, name: str, partitions: int, *, validate_only: bool) -> Any:
    return client.call(
        ApiKey.CREATE_TOPICS,
        7,
        topics=[
            CreateTopics.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[],
            )
        ],
        timeout_ms=60_000,
        validate_only=validate_only,
    ).topics[0]


def _metadata_files(data_dir: Path, topic: str) -> int:
    return sum(1 for p in data_dir.glob(f"{topic}-*/partition.metadata"))


def test_other_clients_are_served_while_a_broker_hosts_1000_new_partitions(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path, brokers=1) as cluster:
        broker = cluster.brokers[1]
        data_dir = Path(broker.data_dir)
        admin, other = RawClient(broker.bootstrap), RawClient(broker.bootstrap)
        try:
            # The one broker answers topic requests once it holds the controller claim.
            wait_for(
                "the broker to be controller",
                lambda: (
                    _create(admin, "probe", 1, validate_only=True).error_code
                    != ErrorCode.NOT_CONTROLLER
                    or None
                ),
            )
            created = _create(admin, "many", MANY, validate_only=False)
            assert (created.error_code, created.num_partitions) == (ErrorCode.NONE, MANY)
            # The broker is making them once the first one's directory exists.
            wait_for("the first partition", lambda: next(data_dir.glob("many-*"), None))
            assert other.call(ApiKey.API_VERSIONS, 3, client_software_name="t").error_code == 0
            # Answered while they are still being made.
            assert _metadata_files(data_dir, "many") < MANY
            wait_for(
                "every partition's files",
                lambda: _metadata_files(data_dir, "many") == MANY or None,
                timeout=240,
            )
        finally:
            admin.close()
            other.close()


def _create_error(cluster: LocalCluster, topic: NewTopic) -> int:
    admin = cluster.admin()  # kept until the answer: a destroyed client fails its futures
    future = admin.create_topics([topic], operation_timeout=30)[topic.topic]
    try:
        future.result(timeout=60)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return int(error.code())
    return ErrorCode.NONE


def test_an_existing_topic_is_already_there_while_a_broker_is_down(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, brokers=3) as cluster:
        assert _create_error(cluster, NewTopic("kept", 2, 3)) == ErrorCode.NONE
        controller = cluster.admin().list_topics(timeout=10).controller_id
        down = next(b for b in sorted(cluster.brokers) if b != controller)
        cluster.brokers[down].kill()

        def two_live() -> bool | None:
            return len(cluster.admin().list_topics(timeout=10).brokers) == 2 or None

        wait_for("the killed broker to leave the metadata", two_live)
        assert _create_error(cluster, NewTopic("kept", 2, 3)) == ErrorCode.TOPIC_ALREADY_EXISTS
        # A new topic of that factor is refused for the broker it lacks.
        refused = _create_error(cluster, NewTopic("new", 1, 3))
        assert refused == ErrorCode.INVALID_REPLICATION_FACTOR


def _live_dirs(data_dir: Path, topic: str) -> list[str]:
    """The topic's partition directories not (yet) renamed for deletion."""
    return sorted(
        p.name for p in data_dir.glob(f"{topic}-*") if p.is_dir() and not p.name.endswith("-delete")
    )


def _in_catalog(data_dir: Path, topic: str) -> bool:
    document = json.loads((data_dir / CATALOG_FILE).read_text())
    return any(entry["name"] == topic for entry in document["topics"])


def test_a_deleted_topic_leaves_every_replica_and_can_be_made_again(tmp_path: Path) -> None:
    """DeleteTopics through the controller: every broker, by watch, drops the topic from its
    catalog and deletes its replicas' logs (ClusterNode._drop_topic, the catalog entry and
    then ReplicaManager.remove_topic); the name can then be created afresh."""
    with LocalCluster(tmp_path, brokers=2) as cluster:
        dirs = [Path(broker.data_dir) for broker in cluster.brokers.values()]
        assert _create_error(cluster, NewTopic("gone", 2, 2)) == ErrorCode.NONE
        for data_dir in dirs:
            wait_for(
                f"both replicas in {data_dir.name}",
                lambda d=data_dir: _live_dirs(d, "gone") == ["gone-0", "gone-1"] or None,
            )
        admin = cluster.admin()
        admin.delete_topics(["gone"], operation_timeout=30)["gone"].result(timeout=60)
        for data_dir in dirs:
            wait_for(
                f"the replicas gone from {data_dir.name}",
                lambda d=data_dir: (
                    (_live_dirs(d, "gone") == [] and not _in_catalog(d, "gone")) or None
                ),
            )
        assert _create_error(cluster, NewTopic("gone", 1, 2)) == ErrorCode.NONE
        for data_dir in dirs:
            wait_for(
                f"the new topic's replica in {data_dir.name}",
                lambda d=data_dir: _live_dirs(d, "gone") == ["gone-0"] or None,
            )


def test_a_deleted_topic_on_fewer_brokers_than_the_cluster_leaves_each_replica(
    tmp_path: Path,
) -> None:
    """Replication factor 2 on three brokers: each partition lives on two of them, and the
    deletion removes exactly what each broker held (placement bugs hide where every broker
    holds everything)."""
    with LocalCluster(tmp_path, brokers=3) as cluster:
        dirs = [Path(broker.data_dir) for broker in cluster.brokers.values()]
        assert _create_error(cluster, NewTopic("few", 3, 2)) == ErrorCode.NONE

        def placed() -> list[list[str]] | None:
            held = [_live_dirs(d, "few") for d in dirs]
            counts = {name: sum(name in h for h in held) for name in ("few-0", "few-1", "few-2")}
            return held if all(count == 2 for count in counts.values()) else None

        wait_for("two replicas of every partition", placed)
        admin = cluster.admin()
        admin.delete_topics(["few"], operation_timeout=30)["few"].result(timeout=60)
        for data_dir in dirs:
            wait_for(
                f"the replicas gone from {data_dir.name}",
                lambda d=data_dir: (
                    (_live_dirs(d, "few") == [] and not _in_catalog(d, "few")) or None
                ),
            )
