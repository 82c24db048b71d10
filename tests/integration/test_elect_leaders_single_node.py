"""ElectLeaders on the single node: it leads every partition it has, so a preferred election
is never needed, and an unknown partition says so (librdkafka's admin client)."""

from __future__ import annotations

from broker_process import BrokerProcess
from client_helpers import ck_create_topic, unique_topic
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient


def test_the_single_node_needs_no_election(broker: BrokerProcess) -> None:
    topic = unique_topic("elect")
    ck_create_topic(broker.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(topic, 0), TopicPartition(topic, 7)]
    )
    results = {tp.partition: error for tp, error in future.result(30).items()}
    assert results[0] is not None and results[0].code() == 84  # ELECTION_NOT_NEEDED
    assert results[7] is not None and results[7].code() == 3  # UNKNOWN_TOPIC_OR_PARTITION
