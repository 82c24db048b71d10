"""DeleteRecords on a three-broker cluster is answered by the partition's leader once every
replica on a live broker has moved its log start offset (Kafka's delayed delete-records):
when the answer comes, each replica's ``kafka_log_log_logstartoffset`` already says so. A
follower whose broker died does not hold the answer up (its registration goes with its lease),
and takes the new log start offset from the leader when it comes back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD, SKIP_REASON
from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class

pytestmark = [pytest.mark.timeout(300), pytest.mark.skipif(ETCD is None, reason=SKIP_REASON)]

TOPIC = "trimmed"
RECORDS = 20
NONE = 0
_Delete = request_class(ApiKey.DELETE_RECORDS)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path,
        metrics=True,
        settings=[
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
        ],
    ) as running:
        yield running


def log_start_offset(cluster: LocalCluster, broker_id: int) -> int:
    """``TOPIC``-0's log start offset in broker ``broker_id``'s own replica."""
    samples = cluster.scrape(broker_id)
    return int(samples[f'kafka_log_log_logstartoffset{{partition="0",topic="{TOPIC}"}}'])


def delete_records(leader: RawClient, offset: int) -> Any:
    answer = leader.call(
        ApiKey.DELETE_RECORDS,
        2,
        topics=[
            _Delete.DeleteRecordsTopic(
                name=TOPIC,
                partitions=[
                    _Delete.DeleteRecordsTopic.DeleteRecordsPartition(
                        partition_index=0, offset=offset
                    )
                ],
            )
        ],
        timeout_ms=15_000,
    )
    return answer.topics[0].partitions[0]


def test_delete_records_answers_once_every_live_replica_moved_its_log_start(
    cluster: LocalCluster,
) -> None:
    admin = cluster.admin()  # held: a collected AdminClient fails its futures
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=60)
    wait_for(
        f"{TOPIC}-0 with three replicas in sync",
        lambda: len(cluster.partition_states(TOPIC)[0][2]) == 3,
    )
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0, "log_level": 3}
    )
    for i in range(RECORDS):
        producer.produce(TOPIC, b"record-%d" % i)
    assert producer.flush(60) == 0

    leader_id = cluster.leader_of(TOPIC, 0)
    followers = [b for b in cluster.brokers if b != leader_id]
    leader = RawClient(cluster.brokers[leader_id].bootstrap)
    try:
        deleted = delete_records(leader, 7)
        assert (deleted.error_code, deleted.low_watermark) == (NONE, 7)
        # No waiting here: the answer came only once every replica had moved.
        assert {b: log_start_offset(cluster, b) for b in cluster.brokers} == {
            b: 7 for b in cluster.brokers
        }

        # A follower's broker dies: the answer waits for its registration to go, not for it.
        gone, stays = followers
        cluster.brokers[gone].kill()
        deleted = delete_records(leader, 12)
        assert (deleted.error_code, deleted.low_watermark) == (NONE, 12)
        assert log_start_offset(cluster, leader_id) == log_start_offset(cluster, stays) == 12

        # Back again, it learns the new log start offset from the leader.
        cluster.brokers[gone].start()
        wait_for(
            f"broker {gone}'s replica starting at 12", lambda: log_start_offset(cluster, gone) == 12
        )
    finally:
        leader.close()
