"""An application's tests against a real josefk broker, with josefk's pytest fixtures.

Nothing to configure: installing josefk registers the fixtures (``josefk_broker``,
``josefk_session_broker``, ``josefk_topic``, ``josefk_cluster``). Run with
``pytest examples/test_with_josefk.py``. The "application" here is a small function that
publishes orders; the tests check what a real consumer reads back.
"""

from __future__ import annotations

import json

from confluent_kafka import Consumer, Producer

from josefk.testing import JosefkBroker, JosefkCluster


def publish_orders(bootstrap: str, topic: str, orders: list[dict[str, object]]) -> None:
    """The code under test: one JSON record per order, keyed by customer."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for order in orders:
        producer.produce(topic, json.dumps(order).encode(), key=str(order["customer"]))
    assert producer.flush(30) == 0


def read(bootstrap: str, topic: str, count: int) -> list[dict[str, object]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "test", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    records = []
    for _ in range(300):
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            records.append(json.loads(message.value()))
            if len(records) == count:
                break
    consumer.close()
    return records


def test_orders_are_published(josefk_session_broker: JosefkBroker, josefk_topic: str) -> None:
    publish_orders(josefk_session_broker.bootstrap, josefk_topic, [{"customer": "ada", "qty": 2}])
    assert read(josefk_session_broker.bootstrap, josefk_topic, 1) == [{"customer": "ada", "qty": 2}]


def test_a_fresh_broker_per_test(josefk_broker: JosefkBroker) -> None:
    topic = josefk_broker.create_topic("orders", partitions=3)
    orders = [{"customer": c, "qty": 1} for c in ("ada", "bob", "cy")]
    publish_orders(josefk_broker.bootstrap, topic, orders)
    assert sorted(r["customer"] for r in read(josefk_broker.bootstrap, topic, 3)) == [
        "ada",
        "bob",
        "cy",
    ]


def test_replicated_against_three_brokers(josefk_cluster: JosefkCluster) -> None:
    """Skipped, with the reason, where no etcd program is installed."""
    topic = josefk_cluster.create_topic("payments", partitions=1, replication_factor=3)
    publish_orders(josefk_cluster.bootstrap, topic, [{"customer": "ada", "qty": 5}])
    assert read(josefk_cluster.bootstrap, topic, 1) == [{"customer": "ada", "qty": 5}]
