"""OffsetForLeaderEpoch against a real ``josefk serve``: the leader-epoch cache answers it,
and the cache survives a restart in ``leader-epoch-checkpoint``. Driven with josefk's own
protocol connection (no other Python client exposes this API), records from confluent-kafka.
"""

from __future__ import annotations

from typing import Any

import pytest
from broker_process import BrokerProcess
from client_helpers import ck_produce, make_messages, unique_topic

from josefk.client.connection import BrokerConnection
from josefk.protocol.api import ApiKey, request_class

pytestmark = pytest.mark.timeout(120)
Request = request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)


async def ask(broker: BrokerProcess, topic: str, epoch: int, current: int = -1) -> Any:
    conn = await BrokerConnection.open(
        broker.host, broker.port, node_id=-1, client_id="epoch-test", timeout_s=10
    )
    try:
        body = Request(
            replica_id=-1,
            topics=[
                Request.OffsetForLeaderTopic(
                    topic=topic,
                    partitions=[
                        Request.OffsetForLeaderTopic.OffsetForLeaderPartition(
                            partition=0, current_leader_epoch=current, leader_epoch=epoch
                        )
                    ],
                )
            ],
        )
        response = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body)
    finally:
        conn.close()
    [result] = response.topics[0].partitions
    return result


async def test_end_offsets_of_epochs(broker_factory: Any) -> None:
    broker = broker_factory()
    topic = unique_topic("epochs")
    ck_produce(broker.bootstrap, topic, make_messages(7))
    current = await ask(broker, topic, 0)
    assert (current.error_code, current.leader_epoch, current.end_offset) == (0, 0, 7)
    newer = await ask(broker, topic, 5)
    assert (newer.leader_epoch, newer.end_offset) == (-1, -1)
    fenced = await ask(broker, topic, 0, current=3)
    assert fenced.error_code == 75  # UNKNOWN_LEADER_EPOCH: the caller is ahead of us
    unknown = await ask(broker, "no-such-topic", 0)
    assert unknown.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION

    broker.stop()
    assert (broker.data_dir / f"{topic}-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    broker.start()
    again = await ask(broker, topic, 0)
    assert (again.leader_epoch, again.end_offset) == (0, 7)
