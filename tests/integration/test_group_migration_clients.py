"""Online migration of a group between the classic and the consumer protocol (KIP-848)
against a real ``josefk serve``, with confluent-kafka consumers of both protocols in one group.

A rolling upgrade (classic members replaced one by one by consumer-protocol members) and a
rolling downgrade, with per-record commits: every record is consumed exactly once and no
member is left without partitions; the group ends as the type its members speak. With
``group.consumer.migration.policy=disabled`` a consumer-protocol heartbeat to a classic group
with members is GROUP_ID_NOT_FOUND and a new classic member of a consumer group is
INCONSISTENT_GROUP_PROTOCOL, as Kafka answers.

Tests poll the clients until the expected state, never sleep.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from broker_process import BrokerProcess
from client_helpers import ck_admin, commit_record
from confluent_kafka import ConsumerGroupType, KafkaError, KafkaException
from raw_client import RawClient
from test_consumer_groups import (
    LOG_ARGS,
    SETTINGS,
    TIMEOUT_S,
    Member,
    assert_consumed_once,
    commit_from_start,
    new_topic,
    produce,
    shares,
)

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(240)

CLASSIC: dict[str, Any] = {
    "group.protocol": "classic",
    "heartbeat.interval.ms": 300,
    "session.timeout.ms": 6000,
}


class MixedMember(Member):
    """A member polled by a thread of its own, as an application runs each consumer, with a
    per-record commit sent again, for a while, when it raced a rejoin.

    Its own thread: a member's commit waits behind its JoinGroup on the coordinator's
    connection (the broker answers a connection's requests in order, as Kafka does), and a
    JoinGroup of a classic group waits for every member, some of which rejoin only once
    their poll served a revocation. One thread polling every member in turn would hold them
    all while one commit waits.

    A classic member commits with the generation its last JoinGroup gave it; a cooperative
    member keeps consuming while it rejoins, so a commit sent just before the JoinGroup's
    answer arrives after it and is ILLEGAL_GENERATION (Kafka answers the same). The partition
    is still the member's (it gives partitions up only from poll), so the commit is sent
    again with the new generation, as an application would.

    An eager member whose generation lagged when the group was downgraded (it had not yet
    rejoined at the group's last epoch) can only rejoin once poll has served its revocation:
    retrying without polling would keep it from rejoining until its session ends. So after
    ``RETRY_S`` (under the session timeout) the commit is given up and the record noted in
    ``uncommitted``: Kafka delivers it again to whoever gets its partition, as it would to a
    Java consumer whose commitSync failed."""

    RETRY_S = 2.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.uncommitted: set[tuple[str, int, int]] = set()
        self.error: BaseException | None = None
        self._held: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._poll_and_commit()
        except BaseException as exc:  # noqa: BLE001  reported to the test's thread
            self.error = exc

    def _poll_and_commit(self) -> None:
        message = self.consumer.poll(0.05)
        self._held = {tp.partition for tp in self.consumer.assignment()}
        if message is None or message.error():
            return
        record = (message.topic(), message.partition(), message.offset())
        deadline = time.monotonic() + self.RETRY_S
        while True:
            try:
                commit_record(self.consumer, message)
                break
            except KafkaException as exc:
                if exc.args[0].code() not in RACED:
                    raise
                if time.monotonic() > deadline:
                    self.uncommitted.add(record)
                    break
        self.records.append(record)  # after its commit: the test reads it as done

    def partitions(self) -> set[int]:
        """What the member held at its last poll: librdkafka's ``assignment()`` called from
        another thread than the one polling can wait on that thread for good."""
        return self._held

    def poll(self, *, commit: bool = False) -> None:
        """Polled by its own thread: the test only checks it has not failed."""
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        super().close()


RACED = frozenset({KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS})


def _broker(tmp_path_factory: pytest.TempPathFactory, *settings: str) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("josefk-migration")
    broker = BrokerProcess(
        base / "data",
        base / "broker.stderr.log",
        settings=(*SETTINGS, "group.initial.rebalance.delay.ms=0", *settings),
        extra_args=LOG_ARGS,
    )
    try:
        broker.start()
        yield broker
        if broker.is_alive():
            broker.stop()
    finally:
        broker.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _broker(tmp_path_factory)


@pytest.fixture(scope="module")
def disabled_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _broker(tmp_path_factory, "group.consumer.migration.policy=disabled")


def pump_all(members: Sequence[Member], until: Any) -> None:
    """Poll the members (a MixedMember polls itself: its ``poll`` only reports its thread's
    failure) until ``until()``."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        for member in members:
            member.poll(commit=True)
        if until():
            return
        if all(isinstance(m, MixedMember) for m in members):
            time.sleep(0.02)  # a condition polled with a deadline; the members run meanwhile
    raise AssertionError(
        f"not reached in {TIMEOUT_S}s: assignments {[sorted(m.partitions()) for m in members]}"
    )


def group_type(bootstrap: str, group: str) -> Any:
    admin = ck_admin(bootstrap)
    [description] = [
        f.result(timeout=20)
        for f in admin.describe_consumer_groups([group], request_timeout=20).values()
    ]
    return description.type


def roll(
    broker: BrokerProcess, prefix: str, start: dict[str, Any], end: dict[str, Any]
) -> tuple[str, list[Member]]:
    """Three members of protocol ``start`` replaced one at a time by members of ``end``
    (four members for a while at the first step), consuming with per-record commits while
    more records come; every record once."""
    total = 120
    topic = new_topic(broker.bootstrap, prefix, total)
    group = f"g-{uuid.uuid4().hex[:8]}"
    commit_from_start(broker.bootstrap, group, topic)
    members = [MixedMember(broker.bootstrap, group, [topic], **start) for _ in range(3)]
    gone: list[MixedMember] = []  # closed ones

    def consumed() -> int:  # distinct records: one whose commit failed may come twice
        return len({r for m in (*members, *gone) for r in m.records})

    try:
        pump_all(members, lambda: shares(members) and consumed() >= 30)
        for step in range(3):
            # The first newcomer comes while every old member is there (the group converts
            # with three members); then old members go before new ones come.
            if step == 0:
                members.append(MixedMember(broker.bootstrap, group, [topic], **end))
                pump_all(members, lambda: shares(members))
            leaving = members.pop(0)
            leaving.close()
            gone.append(leaving)
            if step > 0:
                members.append(MixedMember(broker.bootstrap, group, [topic], **end))
            produce(broker.bootstrap, topic, 60)
            total += 60
            # Nobody stuck: each member holds partitions, each partition one member.
            pump_all(members, lambda: shares(members))
        pump_all(members, lambda: consumed() >= total)
        kind = group_type(broker.bootstrap, group)
    finally:
        for m in members:
            m.close()
    uncommitted = {r for m in (*members, *gone) for r in m.uncommitted}
    assert_consumed_once(broker, group, [*members, *gone], total, may_repeat=uncommitted)
    return kind, members


def test_a_rolling_upgrade_from_classic_to_consumer(broker: BrokerProcess) -> None:
    kind, _ = roll(broker, "migrate-up", CLASSIC, {})
    assert kind == ConsumerGroupType.CONSUMER


def test_a_rolling_upgrade_from_cooperative_classic_members(broker: BrokerProcess) -> None:
    """Cooperative classic members list what they own when they rejoin: they keep consuming
    what they keep while the consumer-protocol members come."""
    cooperative = {**CLASSIC, "partition.assignment.strategy": "cooperative-sticky"}
    kind, _ = roll(broker, "migrate-coop", cooperative, {})
    assert kind == ConsumerGroupType.CONSUMER


def test_a_rolling_downgrade_from_consumer_to_classic(broker: BrokerProcess) -> None:
    kind, _ = roll(broker, "migrate-down", {}, CLASSIC)
    assert kind == ConsumerGroupType.CLASSIC


def test_disabled_policy_keeps_each_group_to_its_protocol(
    disabled_broker: BrokerProcess,
) -> None:
    bootstrap = disabled_broker.bootstrap
    topic = new_topic(bootstrap, "migrate-off", 12)
    classic_group = f"g-{uuid.uuid4().hex[:8]}"
    consumer_group = f"g-{uuid.uuid4().hex[:8]}"
    classic = Member(bootstrap, classic_group, [topic], **CLASSIC)
    modern = Member(bootstrap, consumer_group, [topic])
    client = RawClient(bootstrap)
    try:
        pump_all([classic, modern], lambda: shares([classic]) and shares([modern]))
        refused = client.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            group_id=classic_group,
            member_id=uuid.uuid4().hex,
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=[topic],
            topic_partitions=[],
        )
        assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        joined = client.call(
            ApiKey.JOIN_GROUP,
            5,
            group_id=consumer_group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[
                request_class(ApiKey.JOIN_GROUP).JoinGroupRequestProtocol(
                    name="range", metadata=b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"
                )
            ],
        )
        assert joined.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert group_type(bootstrap, classic_group) == ConsumerGroupType.CLASSIC
        assert group_type(bootstrap, consumer_group) == ConsumerGroupType.CONSUMER
    finally:
        client.close()
        classic.close()
        modern.close()
