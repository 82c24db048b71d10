"""Partition reassignment on the single node (kafka-python's admin client): there is one
broker, so the only valid target is that broker, nothing is ever in progress, and anything
else is refused per partition; DescribeLogDirs lists the partition in the broker's log dir."""

from __future__ import annotations

from broker_process import BrokerProcess
from client_helpers import ck_create_topic, unique_topic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)


def test_the_single_node_moves_nothing(broker: BrokerProcess) -> None:
    topic = unique_topic("reassign")
    ck_create_topic(broker.bootstrap, topic)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        node_id = admin.describe_cluster()["controller_id"]
        here, elsewhere, absent, missing = (
            TopicPartition(topic, 0),
            TopicPartition(topic, 0),
            TopicPartition(topic, 9),
            TopicPartition("no-such-topic", 0),
        )
        assert admin.alter_partition_reassignments({here: [node_id]}) == {here: None}
        assert admin.alter_partition_reassignments({elsewhere: [node_id, node_id + 1]}) == {
            elsewhere: InvalidReplicationAssignmentError
        }
        assert admin.alter_partition_reassignments({absent: [node_id], missing: [node_id]}) == {
            absent: UnknownTopicOrPartitionError,
            missing: UnknownTopicOrPartitionError,
        }
        assert admin.alter_partition_reassignments({here: None}) == {
            here: NoReassignmentInProgressError
        }
        assert admin.list_partition_reassignments() == {}
        assert f"{topic}" in str(admin.describe_log_dirs())
    finally:
        admin.close()
