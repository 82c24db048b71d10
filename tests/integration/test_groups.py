"""Consumer groups against a real ``josefk serve``: confluent-kafka (librdkafka, eager and
cooperative-sticky), kafka-python, aiokafka and KafkaJS group consumers, member departure and
death, admin group APIs, and committed offsets across a clean and a SIGKILL restart.

The broker runs with a short initial rebalance delay and a low minimum session timeout so that
rebalances take seconds; tests poll the clients until the expected state, never sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerFactory, BrokerProcess
from client_helpers import ck_admin, ck_config, ck_create_topic, unique_topic
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from kafkajs_support import needs_kafkajs

PARTITIONS = 6
SESSION_MS = 6000
SETTINGS = (
    "group.initial.rebalance.delay.ms=200",
    "group.min.session.timeout.ms=1000",
)
GROUP_TIMEOUT_S = 30.0
JS_DIR = Path(__file__).resolve().parent.parent / "js"
NODE = shutil.which("node")

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("josefk-groups")
    broker = BrokerProcess(base / "data", base / "broker.stderr.log", settings=SETTINGS)
    try:
        broker.start()
        yield broker
        if broker.is_alive():
            broker.stop()
    finally:
        broker.close()


# -- helpers -------------------------------------------------------------------------------


def new_topic(bootstrap: str, prefix: str, count: int = 60) -> str:
    """A six-partition topic with ``count`` messages spread round-robin, values "p:i"."""
    topic = unique_topic(prefix)
    ck_create_topic(bootstrap, topic, partitions=PARTITIONS)
    producer = Producer(ck_config(bootstrap, **{"enable.idempotence": False, "linger.ms": 5}))
    for i in range(count):
        producer.produce(topic, value=f"{i % PARTITIONS}:{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(20) == 0
    return topic


def covers(assignments: Sequence[set[int]], members: int) -> bool:
    """Every one of ``members`` has partitions, none shared, all partitions taken."""
    if len(assignments) != members or any(not a for a in assignments):
        return False
    union: set[int] = set().union(*assignments)
    return union == set(range(PARTITIONS)) and sum(map(len, assignments)) == PARTITIONS


def ck_group_consumer(bootstrap: str, group: str, topic: str, **conf: Any) -> Consumer:
    consumer = Consumer(
        ck_config(
            bootstrap,
            **{
                "group.id": group,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                **conf,
            },
        )
    )
    consumer.subscribe([topic])
    return consumer


def ck_assignment(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def poll_until(
    consumers: Sequence[Consumer],
    done: Callable[[], bool],
    *,
    timeout: float = GROUP_TIMEOUT_S,
    what: str = "group state",
    on_message: Callable[[Any], None] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for consumer in consumers:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None and on_message is not None:
                on_message(msg)
        if done():
            return
    raise AssertionError(
        f"{what} not reached in {timeout:.0f}s: {[ck_assignment(c) for c in consumers]}"
    )


# -- confluent-kafka -----------------------------------------------------------------------


def test_librdkafka_members_split_the_topic_and_a_leaver_hands_over(
    group_broker: BrokerProcess,
) -> None:
    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, "grp-ck")
    group = unique_topic("g-ck")
    consumers = [ck_group_consumer(bootstrap, group, topic) for _ in range(3)]
    try:
        poll_until(consumers, lambda: covers([ck_assignment(c) for c in consumers], 3))
        leaving = consumers.pop()
        leaving.close()
        poll_until(consumers, lambda: covers([ck_assignment(c) for c in consumers], 2))
        admin = ck_admin(bootstrap)  # kept alive while its futures pend
        described = admin.describe_consumer_groups([group])[group].result(20)
        assert described.state == ConsumerGroupState.STABLE
        assert len(described.members) == 2
        assigned = sorted(
            tp.partition for m in described.members for tp in m.assignment.topic_partitions
        )
        assert assigned == list(range(PARTITIONS))
    finally:
        for consumer in consumers:
            consumer.close()


_DYING_CONSUMER = """
import sys, time
from confluent_kafka import Consumer
bootstrap, group, topic, session = sys.argv[1:5]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": int(session),
              "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest",
              "broker.address.family": "v4"})
c.subscribe([topic])
announced = False
while True:
    c.poll(0.1)
    if c.assignment() and not announced:
        print("assigned", flush=True)
        announced = True
"""


def test_librdkafka_member_that_dies_is_expired_and_its_partitions_handed_over(
    group_broker: BrokerProcess,
) -> None:
    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, "grp-die")
    group = unique_topic("g-die")
    consumers = [ck_group_consumer(bootstrap, group, topic) for _ in range(2)]
    dying = subprocess.Popen(
        [sys.executable, "-c", _DYING_CONSUMER, bootstrap, group, topic, str(SESSION_MS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        admin = ck_admin(bootstrap)

        def three_stable() -> bool:
            if not all(ck_assignment(c) for c in consumers):
                return False
            described = admin.describe_consumer_groups([group])[group].result(20)
            return described.state == ConsumerGroupState.STABLE and len(described.members) == 3

        poll_until(consumers, three_stable, what="three members")
        assert sum(len(ck_assignment(c)) for c in consumers) < PARTITIONS
        # SIGKILL: no LeaveGroup, the socket just closes. The session timeout expires it.
        dying.kill()
        dying.wait(10)
        poll_until(
            consumers,
            lambda: covers([ck_assignment(c) for c in consumers], 2),
            what="hand-over after the session timeout",
        )
    finally:
        if dying.poll() is None:
            dying.kill()
            dying.wait(10)
        for consumer in consumers:
            consumer.close()


def test_librdkafka_cooperative_sticky_moves_only_what_it_must(
    group_broker: BrokerProcess,
) -> None:
    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, "grp-coop")
    group = unique_topic("g-coop")
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    consumers = [ck_group_consumer(bootstrap, group, topic, **conf) for _ in range(2)]
    try:
        poll_until(consumers, lambda: covers([ck_assignment(c) for c in consumers], 2))
        before = [ck_assignment(c) for c in consumers]
        consumers.append(ck_group_consumer(bootstrap, group, topic, **conf))
        poll_until(consumers, lambda: covers([ck_assignment(c) for c in consumers], 3))
        after = [ck_assignment(c) for c in consumers]
        # Sticky: the first two only gave partitions up, and the newcomer got exactly those.
        assert after[0] <= before[0] and after[1] <= before[1]
        assert after[2] == (before[0] - after[0]) | (before[1] - after[1])
        admin = ck_admin(bootstrap)
        described = admin.describe_consumer_groups([group])[group].result(20)
        assert described.partition_assignor == "cooperative-sticky"
    finally:
        for consumer in consumers:
            consumer.close()


# -- kafka-python and aiokafka ---------------------------------------------------------------


def test_kafka_python_group_members_split_and_hand_over(group_broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer

    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, "grp-kp")
    group = unique_topic("g-kp")

    changes: queue.Queue[None] = queue.Queue()

    class Member:
        """kafka-python joins inside poll(): each member polls in its own thread, as an
        application would, and announces each change of its assignment on ``changes``."""

        def __init__(self) -> None:
            self.assignment: set[int] = set()
            self.stop = threading.Event()
            self.error: BaseException | None = None
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()

        def _run(self) -> None:
            try:
                consumer = KafkaConsumer(
                    topic,
                    bootstrap_servers=bootstrap,
                    group_id=group,
                    session_timeout_ms=SESSION_MS,
                    heartbeat_interval_ms=500,
                    auto_offset_reset="earliest",
                    enable_auto_commit=False,
                )
                try:
                    while not self.stop.is_set():
                        consumer.poll(timeout_ms=100)
                        assignment = {tp.partition for tp in consumer.assignment()}
                        if assignment != self.assignment:
                            self.assignment = assignment
                            changes.put(None)
                finally:
                    consumer.close()  # sends LeaveGroup
            except BaseException as exc:  # noqa: BLE001  reported by the test thread
                self.error = exc
                changes.put(None)

        def close(self) -> None:
            self.stop.set()
            self.thread.join(30)

    def wait_for(members: list[Member], count: int) -> None:
        deadline = time.monotonic() + GROUP_TIMEOUT_S
        while True:
            for member in members:
                assert member.error is None, member.error
            if covers([m.assignment for m in members], count):
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            with contextlib.suppress(queue.Empty):
                changes.get(timeout=remaining)
        raise AssertionError(f"kafka-python assignments {[m.assignment for m in members]}")

    members = [Member() for _ in range(3)]
    try:
        wait_for(members, 3)
        members.pop().close()
        wait_for(members, 2)
    finally:
        for member in members:
            member.close()


async def test_aiokafka_group_members_split_and_hand_over(group_broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer

    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, "grp-aio")
    group = unique_topic("g-aio")

    def member() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )

    async def wait_for(consumers: list[AIOKafkaConsumer], count: int) -> None:
        deadline = time.monotonic() + GROUP_TIMEOUT_S
        while time.monotonic() < deadline:
            await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
            if covers([{tp.partition for tp in c.assignment()} for c in consumers], count):
                return
        raise AssertionError([c.assignment() for c in consumers])

    consumers = [member() for _ in range(3)]
    try:
        for consumer in consumers:
            await consumer.start()
        await wait_for(consumers, 3)
        await consumers.pop().stop()
        await wait_for(consumers, 2)
    finally:
        for consumer in consumers:
            await consumer.stop()


# -- KafkaJS -------------------------------------------------------------------------------


class JsMember:
    """One KafkaJS consumer in its own node process (tests/js/groups.mjs)."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, events: queue.Queue[JsMember]
    ) -> None:
        assert NODE is not None
        spec = {"brokers": [bootstrap], "topic": topic, "groupId": group}
        self.proc = subprocess.Popen(
            [NODE, str(JS_DIR / "groups.mjs"), json.dumps(spec)],
            cwd=JS_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.assignment: set[int] = set()
        self._events = events
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                if event["event"] == "join":
                    self.assignment = set(event["assignment"])
                    self._events.put(self)

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        self.proc.wait(20)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


def wait_js(members: list[JsMember], joins: queue.Queue[JsMember], count: int) -> None:
    """Wait on the members' join events until their assignments cover the topic."""
    deadline = time.monotonic() + GROUP_TIMEOUT_S
    while not covers([m.assignment for m in members], count):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        with contextlib.suppress(queue.Empty):
            joins.get(timeout=remaining)
    else:
        return
    raise AssertionError(f"KafkaJS assignments {[m.assignment for m in members]}")


@needs_kafkajs
def test_kafkajs_group_members_split_leave_and_die(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, "grp-js")
    group = unique_topic("g-js")
    joins: queue.Queue[JsMember] = queue.Queue()
    members = [JsMember(bootstrap, topic, group, joins) for _ in range(3)]
    try:
        wait_js(members, joins, 3)
        members.pop().stop()
        wait_js(members, joins, 2)
        members.pop().kill()
        wait_js(members, joins, 1)
    finally:
        for member in members:
            member.kill()


# -- admin ---------------------------------------------------------------------------------


def test_admin_lists_describes_and_deletes_groups(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, "grp-admin")
    group = unique_topic("g-admin")
    admin = ck_admin(bootstrap)
    consumer = ck_group_consumer(bootstrap, group, topic)
    try:
        poll_until([consumer], lambda: covers([ck_assignment(consumer)], 1))
        consumer.commit(offsets=[TopicPartition(topic, 0, 3, metadata="hello")], asynchronous=False)
        listed = admin.list_consumer_groups().result(20)
        states = {g.group_id: g.state for g in listed.valid}
        assert states[group] == ConsumerGroupState.STABLE
        [fetched] = consumer.committed([TopicPartition(topic, 0)], timeout=20)
        assert (fetched.offset, fetched.metadata) == (3, "hello")
        with pytest.raises(KafkaException) as refused:
            admin.delete_consumer_groups([group])[group].result(20)
        assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        consumer.close()
    empty = admin.describe_consumer_groups([group])[group].result(20)
    assert empty.state == ConsumerGroupState.EMPTY
    admin.delete_consumer_groups([group])[group].result(20)
    listed = admin.list_consumer_groups().result(20)
    assert group not in {g.group_id for g in listed.valid}


# -- durability ----------------------------------------------------------------------------


def consume_some(
    bootstrap: str, group: str, topic: str, want: int, *, timeout: float = GROUP_TIMEOUT_S
) -> list[tuple[int, int]]:
    """Join, read ``want`` messages, commit exactly what was read, leave."""
    consumer = ck_group_consumer(bootstrap, group, topic, **{"max.poll.interval.ms": 60000})
    got: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            got.append((msg.partition(), msg.offset()))
            consumer.commit(message=msg, asynchronous=False)
        assert len(got) == want, f"read {len(got)} of {want}"
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("how", ["clean", "sigkill"])
def test_committed_offsets_survive_a_restart(broker_factory: BrokerFactory, how: str) -> None:
    broker = broker_factory(settings=SETTINGS)
    topic = new_topic(broker.bootstrap, "grp-restart")
    group = unique_topic("g-restart")
    first = consume_some(broker.bootstrap, group, topic, 25)
    admin = ck_admin(broker.bootstrap)
    committed_before = {
        tp.partition: tp.offset
        for tp in admin.list_consumer_group_offsets([_group_request(group)])[group]
        .result(20)
        .topic_partitions
    }
    if how == "clean":
        broker.stop()
    else:
        broker.kill()
    broker.start()
    admin = ck_admin(broker.bootstrap)
    after = admin.list_consumer_group_offsets([_group_request(group)])[group].result(20)
    assert {tp.partition: tp.offset for tp in after.topic_partitions} == committed_before
    second = consume_some(broker.bootstrap, group, topic, 60 - len(first))
    # Together exactly every message once: no gap, nothing committed read again.
    assert not set(first) & set(second)
    assert sorted(first + second) == sorted((i % PARTITIONS, i // PARTITIONS) for i in range(60))
    # Production goes on: the group picks up exactly the new messages.
    producer = Producer(ck_config(broker.bootstrap, **{"enable.idempotence": False}))
    for partition in range(PARTITIONS):
        producer.produce(topic, value=b"after", partition=partition)
    assert producer.flush(20) == 0
    third = consume_some(broker.bootstrap, group, topic, PARTITIONS)
    assert sorted(third) == [(partition, 60 // PARTITIONS) for partition in range(PARTITIONS)]


def _group_request(group: str) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group)
