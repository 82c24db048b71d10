"""The blocking facade (josefk.client.sync) against a real broker, from plain threads."""

from __future__ import annotations

from broker_process import BrokerProcess
from client_helpers import assert_same_messages, make_messages, unique_topic
from client_suite import to_message

from josefk.client import TopicPartition
from josefk.client.sync import Admin, Consumer, Producer


def test_sync_producer_consumer_and_admin(broker: BrokerProcess) -> None:
    topic = unique_topic("sync")
    group = unique_topic("sync-group")
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic(topic, num_partitions=2)
        assert topic in admin.list_topics()
        assert len(admin.describe_topics([topic])[0].partitions) == 2
    sent = make_messages(50)
    with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4") as producer:
        futures = [
            producer.send(
                topic,
                m.value,
                m.key,
                partition=0,
                timestamp_ms=m.timestamp,
                headers=list(m.headers),
            )
            for m in sent
        ]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(50))
        meta = producer.send_and_wait(topic, b"last", partition=1)
        assert (meta.topic, meta.partition, meta.offset) == (topic, 1, 0)
        assert producer.partitions_for(topic) == [0, 1]
    with Consumer(
        bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest"
    ) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        got = []
        for record in consumer:
            got.append(record)
            if len(got) == 50:
                break
        assert_same_messages([to_message(r) for r in got], sent)
        consumer.commit()
        assert consumer.committed(tp) == 50
        consumer.seek(tp, 10)
        assert consumer.position(tp) == 10
        assert consumer.end_offsets([tp]) == {tp: 50}
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        # Auto-commit on close stored the position after the seek.
        assert admin.list_group_offsets(group) == {TopicPartition(topic, 0): 10}
        admin.delete_topic(topic)
