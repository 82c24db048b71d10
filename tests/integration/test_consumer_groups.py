"""KIP-848 consumer groups (``group.protocol=consumer``) against a real ``josefk serve`` with
confluent-kafka: the broker assigns, members reconcile incrementally.

Members share partitions, a newcomer takes its share while the others keep what they keep, a
closed and a SIGKILLed member hand their partitions over, per-record commits never see a
record consumed twice, a regex subscription picks up a topic created afterwards, a commit at a
stale member epoch is refused, and the admin client sees the group as a consumer group.

The broker runs with a short heartbeat interval and session timeout so that everything takes
seconds; tests poll the clients until the expected state, never sleep.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence, Set
from typing import Any

import pytest
from broker_process import BrokerProcess, run_josefk
from client_helpers import ck_admin, ck_config, ck_create_topic, commit_record, unique_topic
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

PARTITIONS = 6
SESSION_MS = 3000
SETTINGS = (
    "group.consumer.heartbeat.interval.ms=300",
    "group.consumer.min.heartbeat.interval.ms=100",
    f"group.consumer.session.timeout.ms={SESSION_MS}",
    "group.consumer.min.session.timeout.ms=1000",
)
# The broker logs each ConsumerGroupHeartbeat at debug: a failed exactly-once check shows
# the group's heartbeats (owned and assigned partitions, epochs) beside the duplicates.
LOG_ARGS = ("--log-level", "debug")
TIMEOUT_S = 40.0

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("josefk-kip848")
    broker = BrokerProcess(
        base / "data", base / "broker.stderr.log", settings=SETTINGS, extra_args=LOG_ARGS
    )
    try:
        broker.start()
        yield broker
        if broker.is_alive():
            broker.stop()
    finally:
        broker.close()


def new_topic(bootstrap: str, prefix: str, count: int = 0, partitions: int = PARTITIONS) -> str:
    topic = unique_topic(prefix)
    ck_create_topic(bootstrap, topic, partitions=partitions)
    produce(bootstrap, topic, count, partitions)
    return topic


def commit_from_start(bootstrap: str, group: str, topic: str, partitions: int = PARTITIONS) -> None:
    """Commit offset 0 of every partition for ``group`` (still empty) through the admin client.

    Without a committed offset a member resets to the earliest offset with a ListOffsets
    request, and librdkafka (2.16) mishandles one that a rebalance outdated while it was in
    flight: the outdated answer re-arms its offset query timer, which fires 500 ms later on
    the partition now being read and seeks it back to the start, so the member reads the
    same records again (its debug log: "outdated offset response: (re)starting offset query
    timer", then "timed offset query for offset BEGINNING ... in state active"). Kafka answers
    a ListOffsets queued behind a long-poll fetch as late as josefk does, so the client does
    the same against either. The exactly-once checks are about the coordinator's hand-over,
    so their members start from committed offsets."""
    admin = ck_admin(bootstrap)
    start = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p, 0) for p in range(partitions)]
    )
    for future in admin.alter_consumer_group_offsets([start], request_timeout=20).values():
        future.result(timeout=20)


def produce(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS) -> None:
    if not count:
        return
    producer = Producer(ck_config(bootstrap, **{"linger.ms": 5}))
    for i in range(count):
        producer.produce(topic, value=f"{i}".encode(), partition=i % partitions)
    assert producer.flush(20) == 0


class Member:
    """A confluent-kafka consumer of the consumer protocol, with its revocations recorded."""

    def __init__(self, bootstrap: str, group: str, topics: Sequence[str], **conf: Any) -> None:
        self.consumer = Consumer(
            ck_config(
                bootstrap,
                **{
                    "group.id": group,
                    "group.protocol": "consumer",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    **conf,
                },
            )
        )
        self.revoked: list[set[int]] = []
        self.held_before_revoke: list[set[int]] = []
        self.records: list[tuple[str, int, int]] = []
        self.consumer.subscribe(list(topics), on_revoke=self._on_revoke)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.held_before_revoke.append(self.partitions())
        self.revoked.append({tp.partition for tp in partitions})

    def partitions(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def poll(self, *, commit: bool = False) -> None:
        message = self.consumer.poll(0.05)
        if message is None or message.error():
            return
        self.records.append((message.topic(), message.partition(), message.offset()))
        if commit:
            commit_record(self.consumer, message)

    def close(self) -> None:
        self.consumer.close()


def assert_consumed_once(
    broker: BrokerProcess,
    group: str,
    members: Sequence[Member],
    total: int,
    *,
    may_repeat: Set[tuple[str, int, int]] = frozenset(),
) -> None:
    """Every record consumed by exactly one member, ``total`` in all, except that records in
    ``may_repeat`` (whose commit failed) may come again; else the message says which members
    read which records twice (their position in each member's reading order), what each had
    revoked, and the broker's log of the group."""
    records = [r for m in members for r in m.records]
    counts = collections.Counter(records)
    twice = {r for r, n in counts.items() if n > 1} - may_repeat
    if twice:
        lines = [f"{len(twice)} records consumed more than once:"]
        for i, m in enumerate(members):
            seen = [(k, r[1], r[2]) for k, r in enumerate(m.records) if r in twice]
            lines.append(f"member {i}: (index, partition, offset) {seen}; revoked {m.revoked}")
        text = broker.log_path.read_text(errors="replace") if broker.log_path.exists() else ""
        lines += [line for line in text.splitlines() if group in line]
        raise AssertionError("\n".join(lines))
    assert len(counts) == total, f"{len(counts)} records consumed, {total} expected"


def pump(members: Sequence[Member], until: Callable[[], bool], *, commit: bool = False) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        for member in members:
            member.poll(commit=commit)
        if until():
            return
    raise AssertionError(
        f"not reached in {TIMEOUT_S}s: assignments {[sorted(m.partitions()) for m in members]}"
    )


def read_to(member: Member, topic: str, offset: int) -> bool:
    """Whether ``member`` has read each partition it holds up to ``offset``."""
    held = [TopicPartition(topic, p) for p in member.partitions()]
    return all(tp.offset == offset for tp in member.consumer.position(held))


def shares(members: Sequence[Member], total: int = PARTITIONS) -> bool:
    """Every member has partitions, no partition twice, all partitions taken."""
    held = [m.partitions() for m in members]
    flat = [p for h in held for p in h]
    return all(held) and len(flat) == len(set(flat)) == total


def test_a_fourth_member_takes_its_share_while_the_others_keep_theirs(
    broker: BrokerProcess,
) -> None:
    topic = new_topic(broker.bootstrap, "kip848-join", 60)
    group = f"g-{uuid.uuid4().hex[:8]}"
    first = [Member(broker.bootstrap, group, [topic]) for _ in range(3)]
    try:
        pump(first, lambda: shares(first) and all(len(m.partitions()) == 2 for m in first))
        before = [m.partitions() for m in first]
        for m in first:
            m.revoked.clear()
            m.held_before_revoke.clear()
        newcomer = Member(broker.bootstrap, group, [topic])
        everyone = [*first, newcomer]
        pump(everyone, lambda: shares(everyone))
        for m, had in zip(first, before, strict=True):
            assert m.partitions() <= had, "a member was given another's partition"
            assert m.partitions(), "a member lost everything"
            for held, revoked in zip(m.held_before_revoke, m.revoked, strict=True):
                assert revoked < held, "a revocation took all of a member's partitions"
        admin = ck_admin(broker.bootstrap)
        [description] = [
            f.result(timeout=20)
            for f in admin.describe_consumer_groups([group], request_timeout=20).values()
        ]
        assert description.type == ConsumerGroupType.CONSUMER
        assert description.state == ConsumerGroupState.STABLE
        assert len(description.members) == 4
        described = sorted(
            tp.partition for m in description.members for tp in m.assignment.topic_partitions
        )
        assert described == list(range(PARTITIONS))
        listed = admin.list_consumer_groups(
            types={ConsumerGroupType.CONSUMER}, request_timeout=20
        ).result(timeout=20)
        assert group in {g.group_id for g in listed.valid}
    finally:
        for m in first:
            m.close()
        newcomer.close()


def test_a_closed_member_hands_its_partitions_over(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, "kip848-close")
    group = f"g-{uuid.uuid4().hex[:8]}"
    a, b = Member(broker.bootstrap, group, [topic]), Member(broker.bootstrap, group, [topic])
    try:
        pump([a, b], lambda: shares([a, b]))
        b.close()
        pump([a], lambda: a.partitions() == set(range(PARTITIONS)))
    finally:
        a.close()


KILLED_MEMBER = """
import json, sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "group.protocol": "consumer", "broker.address.family": "v4"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    print(json.dumps(sorted(tp.partition for tp in c.assignment())), flush=True)
"""


def test_a_sigkilled_member_hands_its_partitions_over_after_its_session(
    broker: BrokerProcess,
) -> None:
    topic = new_topic(broker.bootstrap, "kip848-kill")
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = Member(broker.bootstrap, group, [topic])
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_MEMBER, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        deadline = time.monotonic() + TIMEOUT_S
        theirs: set[int] = set()
        while time.monotonic() < deadline:
            a.poll()
            theirs = set(json.loads(child.stdout.readline()))
            if theirs and not theirs & a.partitions() and len(theirs | a.partitions()) == 6:
                break
        assert theirs, "the child member never got partitions"
        child.kill()
        child.wait(10)
        pump([a], lambda: a.partitions() == set(range(PARTITIONS)))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        a.close()


def test_per_record_commits_never_see_a_record_consumed_twice(broker: BrokerProcess) -> None:
    total = 240
    topic = new_topic(broker.bootstrap, "kip848-once", total)
    group = f"g-{uuid.uuid4().hex[:8]}"
    commit_from_start(broker.bootstrap, group, topic)
    a, b = Member(broker.bootstrap, group, [topic]), Member(broker.bootstrap, group, [topic])
    members = [a, b]
    c: Member | None = None

    def consumed() -> int:
        return sum(len(m.records) for m in members)

    try:
        pump(members, lambda: consumed() >= 40, commit=True)
        c = Member(broker.bootstrap, group, [topic])
        members.append(c)
        pump(members, lambda: consumed() >= 120 and shares(members), commit=True)
        b.close()
        members.remove(b)
        produce(broker.bootstrap, topic, 60)
        pump(members, lambda: consumed() + len(b.records) >= total + 60, commit=True)
    finally:
        for m in members:
            m.close()
    assert_consumed_once(broker, group, [m for m in (a, b, c) if m is not None], total + 60)


def test_a_regex_subscription_picks_up_a_topic_created_afterwards(broker: BrokerProcess) -> None:
    prefix = unique_topic("kip848rx")
    first = f"{prefix}-a"
    ck_create_topic(broker.bootstrap, first, partitions=2)
    member = Member(broker.bootstrap, f"g-{uuid.uuid4().hex[:8]}", [f"^{prefix}-.*"])
    try:
        pump([member], lambda: member.partitions() == {0, 1})
        later = f"{prefix}-b"
        ck_create_topic(broker.bootstrap, later, partitions=3)
        produce(broker.bootstrap, later, 3, partitions=3)

        def has_later() -> bool:
            topics = {tp.topic for tp in member.consumer.assignment()}
            return later in topics and any(r[0] == later for r in member.records)

        pump([member], has_later)
        assert len(member.consumer.assignment()) == 5
    finally:
        member.close()


def test_a_name_and_a_regex_are_assigned_in_two_epochs(broker: BrokerProcess) -> None:
    """What librdkafka's own test 0045 (do_test_resubscribe_with_regex) checks of a KIP-848
    broker: subscribed to a regex and a topic name at once, the member is assigned the named
    topic first and the regex's topics in a later epoch, once the coordinator resolved it."""
    prefix = unique_topic("kip848rn")
    regex1, regex2, named = f"{prefix}-regex1", f"{prefix}-regex2", f"{prefix}-a"
    for topic, count in ((regex1, 4), (regex2, 4), (named, 2)):
        ck_create_topic(broker.bootstrap, topic, partitions=count)
    assigned: list[set[str]] = []
    consumer = Consumer(
        ck_config(
            broker.bootstrap,
            **{"group.id": f"g-{uuid.uuid4().hex[:8]}", "group.protocol": "consumer"},
        )
    )
    try:
        consumer.subscribe(
            [f"^{prefix}-regex.*", named],
            on_assign=lambda c, parts: assigned.append({tp.topic for tp in parts}),
        )
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and len(consumer.assignment()) < 10:
            consumer.poll(0.05)
        assert len(consumer.assignment()) == 10
        assert assigned[0] == {named}
        assert set().union(*assigned[1:]) == {regex1, regex2}
    finally:
        consumer.close()


def test_sliding_subscriptions_with_unsubscribes_between_are_assigned_whole(
    broker: BrokerProcess,
) -> None:
    """librdkafka's test 0045_subscribe_many_updates, each step awaited: one consumer moves
    its subscription over a sliding window of topics and unsubscribes every third step (it
    leaves with epoch -1 and rejoins with epoch 0 under the same member id); after each step
    it holds exactly its window's partitions, nothing after an unsubscribe. (0045 itself does
    not wait between steps; librdkafka 2.15/2.16 can then stall when the unsubscribe lands
    while the client still revokes a dropped topic, a client race, see issue 30's note.)"""
    prefix = unique_topic("kip848-slide")
    topics = [f"{prefix}-{i}" for i in range(8)]
    for topic in topics:
        ck_create_topic(broker.bootstrap, topic, partitions=2)
    consumer = Consumer(
        ck_config(
            broker.bootstrap,
            **{"group.id": f"g-{uuid.uuid4().hex[:8]}", "group.protocol": "consumer"},
        )
    )

    def settle(expected: set[tuple[str, int]]) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        held: set[tuple[str, int]] = set()
        while time.monotonic() < deadline:
            consumer.poll(0.05)
            held = {(tp.topic, tp.partition) for tp in consumer.assignment()}
            if held == expected:
                return
        raise AssertionError(f"held {sorted(held)}, expected {sorted(expected)}")

    try:
        for step in range(len(topics) - 2):
            window = topics[step : step + 3]
            consumer.subscribe(window)
            settle({(t, p) for t in window for p in range(2)})
            if step % 3 == 2:
                consumer.unsubscribe()
                settle(set())
    finally:
        consumer.close()


def test_a_commit_at_a_stale_member_epoch_is_refused(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, "kip848-stale")
    group = f"g-{uuid.uuid4().hex[:8]}"
    client = RawClient(broker.bootstrap)
    try:

        def heartbeat(member: str, epoch: int, owned: Any = None) -> Any:
            return client.call(
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                1,
                group_id=group,
                member_id=member,
                member_epoch=epoch,
                rebalance_timeout_ms=30000 if epoch == 0 else -1,
                subscribed_topic_names=[topic] if epoch == 0 else None,
                topic_partitions=[] if epoch == 0 else owned,
            )

        def commit(epoch: int) -> int:
            response = client.call(
                ApiKey.OFFSET_COMMIT,
                9,
                group_id=group,
                generation_id_or_member_epoch=epoch,
                member_id="m1",
                topics=[
                    request_topic(topic)  # one partition, offset 1
                ],
            )
            return int(response.topics[0].partitions[0].error_code)

        first = heartbeat("m1", 0)
        assert first.error_code == ErrorCode.NONE
        old_epoch = first.member_epoch
        assert commit(old_epoch) == ErrorCode.NONE
        assert heartbeat("m2", 0).error_code == ErrorCode.NONE
        # m1 hears what to keep, lets the rest go and says so: then it is at the new epoch.
        told = heartbeat("m1", old_epoch, owned=[])
        assert told.member_epoch == old_epoch
        keeps = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT).TopicPartitions
        kept = [
            keeps(topic_id=t.topic_id, partitions=t.partitions)
            for t in told.assignment.topic_partitions
        ]
        told = heartbeat("m1", old_epoch, owned=kept)
        assert told.member_epoch > old_epoch
        assert commit(old_epoch) == ErrorCode.STALE_MEMBER_EPOCH
        assert commit(told.member_epoch) == ErrorCode.NONE
    finally:
        client.close()


def test_describe_groups_answers_a_consumer_group_as_a_missing_group(broker: BrokerProcess) -> None:
    """Kafka's DescribeGroups describes classic groups only: a consumer group is Dead without
    an error before v6, GROUP_ID_NOT_FOUND "not a classic group" from v6 (a group nobody
    holds: "not found"), with no authorized operations; ConsumerGroupDescribe shows it."""
    topic = new_topic(broker.bootstrap, "kip848-describe")
    group = f"g-{uuid.uuid4().hex[:8]}"
    client = RawClient(broker.bootstrap)
    try:
        joined = client.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            group_id=group,
            member_id="m1",
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=[topic],
            topic_partitions=[],
        )
        assert joined.error_code == ErrorCode.NONE
        v5 = client.call(
            ApiKey.DESCRIBE_GROUPS, 5, groups=[group], include_authorized_operations=True
        )
        [old] = v5.groups
        assert (old.error_code, old.group_state, old.members) == (0, "Dead", [])
        v6 = client.call(
            ApiKey.DESCRIBE_GROUPS,
            6,
            groups=[group, "kip848-nobody"],
            include_authorized_operations=True,
        )
        held, nobody = v6.groups
        assert (held.error_code, held.group_state) == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead")
        assert held.error_message == f"Group {group} is not a classic group."
        assert held.authorized_operations == -(2**31) and held.members == []
        assert nobody.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert nobody.error_message == "Group kip848-nobody not found."
        described = client.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, group_ids=[group])
        assert described.groups[0].error_code == ErrorCode.NONE
        assert [m.member_id for m in described.groups[0].members] == ["m1"]
        client.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, group_id=group, member_id="m1", member_epoch=-1
        )
    finally:
        client.close()


def request_topic(topic: str) -> Any:
    commit = request_class(ApiKey.OFFSET_COMMIT)
    return commit.OffsetCommitRequestTopic(
        name=topic,
        partitions=[commit.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)],
    )


def test_a_broker_restart_keeps_the_group_its_assignments_and_offsets(
    broker_factory: Any,
) -> None:
    """SIGKILL of the broker under a consuming group: after the restart the members carry
    on at their epochs with the partitions they had (no revocation) and nothing committed is
    read again."""
    server: BrokerProcess = broker_factory(
        settings=[
            "group.consumer.heartbeat.interval.ms=300",
            "group.consumer.min.heartbeat.interval.ms=100",
            "group.consumer.session.timeout.ms=20000",
            "group.consumer.min.session.timeout.ms=1000",
        ]
    )
    topic = new_topic(server.bootstrap, "kip848-restart", 60)
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Member(server.bootstrap, group, [topic]) for _ in range(2)]
    try:
        pump(
            members,
            lambda: shares(members) and sum(len(m.records) for m in members) >= 60,
            commit=True,
        )
        before = [m.partitions() for m in members]
        for m in members:
            m.revoked.clear()
        server.kill()
        server.start()
        produce(server.bootstrap, topic, 60)
        pump(members, lambda: sum(len(m.records) for m in members) >= 120, commit=True)
        assert [m.partitions() for m in members] == before
        assert not any(m.revoked for m in members), "a member lost partitions over the restart"
    finally:
        for m in members:
            m.close()
    records = [r for m in members for r in m.records]
    assert len(records) == len(set(records)) == 120


def test_an_empty_classic_group_becomes_a_consumer_group_and_back(broker: BrokerProcess) -> None:
    """A classic member commits and leaves; a consumer-protocol member of the same group
    resumes from those offsets; once it leaves, a classic member resumes from its commits."""
    topic = new_topic(broker.bootstrap, "kip848-convert", 30)
    group = f"g-{uuid.uuid4().hex[:8]}"

    def consume(protocol: str, count: int) -> list[tuple[str, int, int]]:
        extra = {} if protocol == "consumer" else {"session.timeout.ms": 6000}
        member = Member(broker.bootstrap, group, [topic], **{"group.protocol": protocol, **extra})
        try:
            pump([member], lambda: len(member.records) >= count, commit=True)
        finally:
            member.close()
        return member.records[:count]

    first = consume("classic", 10)
    produce(broker.bootstrap, topic, 30)
    second = consume("consumer", 20)
    produce(broker.bootstrap, topic, 30)
    third = consume("classic", 10)
    seen = first + second + third
    assert len(seen) == len(set(seen)), "a committed record was read again"


def test_josefk_groups_list_and_describe_show_type_epochs_and_assignments(
    broker: BrokerProcess,
) -> None:
    topic = new_topic(broker.bootstrap, "kip848-cli", 12)
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Member(broker.bootstrap, group, [topic]) for _ in range(2)]
    try:
        # Until each partition's current owner has read it to its end (two records each):
        # a count of records read is reached early when a partition moved after its first
        # owner read it, and the new owner's commit would then leave lag.
        pump(members, lambda: shares(members) and all(read_to(m, topic, 2) for m in members))
        for m in members:
            m.consumer.commit(asynchronous=False)
        listed = {
            g["group"]: g
            for g in json.loads(run_josefk(broker.bootstrap, "groups", "list", "--json"))
        }
        assert listed[group]["type"] == "consumer" and listed[group]["state"] == "Stable"
        assert listed[group]["members"] == 2
        info = json.loads(run_josefk(broker.bootstrap, "groups", "describe", group, "--json"))
        assert info["type"] == "consumer" and info["protocol"] == "uniform"
        assert info["group_epoch"] == info["assignment_epoch"] >= 2
        described = sorted(a["partition"] for m in info["members"] for a in m["assignment"])
        assert described == list(range(PARTITIONS))
        for m in info["members"]:
            assert m["member_epoch"] == info["group_epoch"]
            assert m["assignment"] == m["target_assignment"]
        assert info["total_lag"] == 0
        text = run_josefk(broker.bootstrap, "groups", "describe", group)
        assert "consumer" in text and "TARGET" in text
    finally:
        for m in members:
            m.close()


def test_josefk_consume_with_the_consumer_group_protocol(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, "kip848-cli-consume", 12)
    group = f"g-{uuid.uuid4().hex[:8]}"
    out = run_josefk(
        broker.bootstrap,
        "consume",
        topic,
        "--group",
        group,
        "--group-protocol",
        "consumer",
        "--no-follow",
    )
    assert sorted(int(v) for v in out.split()) == list(range(12))
    info = json.loads(run_josefk(broker.bootstrap, "groups", "describe", group, "--json"))
    assert info["type"] == "consumer" and info["state"] == "Empty"
    assert info["total_lag"] == 0 and len(info["partitions"]) == PARTITIONS
    again = run_josefk(
        broker.bootstrap,
        "consume",
        topic,
        "--group",
        group,
        "--group-protocol",
        "consumer",
        "--no-follow",
    )
    assert again.split() == [], "committed records were read again"


def test_group_configs_are_set_described_applied_and_kept_across_a_restart(
    broker_factory: Any,
) -> None:
    server: BrokerProcess = broker_factory(settings=list(SETTINGS))
    group = f"g-{uuid.uuid4().hex[:8]}"
    topic = new_topic(server.bootstrap, "kip848-gcfg")
    alter_cls = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    client = RawClient(server.bootstrap)

    def alter(value: str) -> tuple[int, str | None]:
        response = client.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                alter_cls.AlterConfigsResource(
                    resource_type=32,
                    resource_name=group,
                    configs=[
                        alter_cls.AlterConfigsResource.AlterableConfig(
                            name="consumer.heartbeat.interval.ms",
                            config_operation=0,
                            value=value,
                        )
                    ],
                )
            ],
            validate_only=False,
        )
        (result,) = response.responses
        return int(result.error_code), result.error_message

    def described() -> dict[str, tuple[str, int]]:
        response = client.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[
                request_class(ApiKey.DESCRIBE_CONFIGS).DescribeConfigsResource(
                    resource_type=32, resource_name=group, configuration_keys=None
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        (result,) = response.results
        assert result.error_code == ErrorCode.NONE
        return {c.name: (c.value, c.config_source) for c in result.configs}

    try:
        assert described()["consumer.heartbeat.interval.ms"] == ("300", 5)
        code, message = alter("20")  # below group.consumer.min.heartbeat.interval.ms=100
        assert code == ErrorCode.INVALID_CONFIG and "consumer.heartbeat.interval.ms" in str(message)
        assert alter("700") == (ErrorCode.NONE, None)
        assert described()["consumer.heartbeat.interval.ms"] == ("700", 8)
        client.close()
        server.restart()
        client = RawClient(server.bootstrap)
        assert described()["consumer.heartbeat.interval.ms"] == ("700", 8)
        joined = client.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            group_id=group,
            member_id="m1",
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=[topic],
            topic_partitions=[],
        )
        assert joined.error_code == ErrorCode.NONE and joined.heartbeat_interval_ms == 700
    finally:
        client.close()


def test_members_coming_and_going_at_random_never_consume_a_record_twice(
    broker: BrokerProcess,
) -> None:
    """Churn: every second a member is closed or a new one joins (seeded), per-record commits;
    every record is consumed exactly once by the group."""
    import random

    total = 600
    topic = new_topic(broker.bootstrap, "kip848-churn", total, partitions=8)
    group = f"g-{uuid.uuid4().hex[:8]}"
    commit_from_start(broker.bootstrap, group, topic, partitions=8)
    rng = random.Random(848)
    members = [Member(broker.bootstrap, group, [topic]) for _ in range(3)]
    gone: list[Member] = []
    next_churn = time.monotonic() + 1.5
    deadline = time.monotonic() + 2 * TIMEOUT_S

    def consumed() -> set[tuple[str, int, int]]:
        return {r for m in (*members, *gone) for r in m.records}

    try:
        while time.monotonic() < deadline and len(consumed()) < total:
            for m in members:
                m.poll(commit=True)
            if time.monotonic() >= next_churn and len(consumed()) < total * 0.9:
                next_churn = time.monotonic() + 1.0
                if rng.random() < 0.5 and len(members) > 1:
                    leaving = members.pop(rng.randrange(len(members)))
                    leaving.close()
                    gone.append(leaving)
                else:
                    members.append(Member(broker.bootstrap, group, [topic]))
    finally:
        for m in members:
            m.close()
    assert_consumed_once(broker, group, [*members, *gone], total)
