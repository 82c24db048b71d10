"""ElectLeaders through a real admin client (librdkafka's): after the preferred leader of a
partition stops cleanly (its leadership moves away) and comes back, a preferred election
(josefk cluster elect-leaders) hands leadership back to it; asked again (librdkafka's admin
client), the election is not needed. Before, josefk did not
speak ElectLeaders at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import SOURCE_DIR
from cluster_process import LocalCluster, wait_for
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD, SKIP_REASON

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]
TOPIC = "elected"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, settings=["auto.leader.rebalance.enable=false"]) as running:
        yield running


def elect(cluster: LocalCluster) -> dict[TopicPartition, object]:
    admin = cluster.admin()
    future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)])
    return dict(future.result(60))


def test_a_preferred_election_gives_leadership_back(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3)]).values():
        future.result(30)
    leader, replicas, _ = wait_for(
        "partition 0 led with a full ISR",
        lambda: (s := cluster.partition_states(TOPIC)[0])[0] > 0 and len(s[2]) == 3 and s,
    )
    preferred = replicas[0]
    # The same broker's answer: another broker's watched view may not have the topic yet.
    assert leader == preferred

    cluster.brokers[preferred].stop()  # controlled shutdown moves leadership away
    cluster.brokers[preferred].start()
    wait_for(
        f"broker {preferred} back in the ISR, not leading",
        lambda: (
            (s := cluster.partition_states(TOPIC)[0])[0] not in (preferred, -1)
            and preferred in s[2]
        ),
    )

    # The operator's way: josefk cluster elect-leaders.
    done = subprocess.run(
        [sys.executable, "-m", "josefk", "cluster", "elect-leaders", f"{TOPIC}:0", "--json",
         "-b", cluster.bootstrap],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(SOURCE_DIR)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"topic": TOPIC, "partition": 0, "result": "elected"}]
    # Stored in etcd when the controller answers; each broker's Metadata follows by watch,
    # so the broker the client asks may tell the old leader for a moment.
    wait_for(f"broker {preferred} leading again", lambda: cluster.leader_of(TOPIC, 0) == preferred)

    (again,) = elect(cluster).values()
    assert again is not None and again.code() == 84, again  # ELECTION_NOT_NEEDED
