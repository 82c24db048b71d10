"""KIP-932 share groups against a real ``josefk serve`` with confluent-kafka's ShareConsumer.

Three members on one partition share every record, each record going to one member; in
explicit mode RELEASE redelivers with the delivery count one higher, REJECT never
redelivers, and a record released at each of its five deliveries is archived; implicit mode
accepts what a poll returned on the next poll; a SIGKILLed member's records go to another
member once its acquisition lock ends; acknowledged records are not delivered again after a
broker SIGKILL and restart while acquired ones are, and the group's members carry on with
their epochs and assignments (its records in __consumer_offsets); transaction markers (and, under
read_committed, aborted records) are never delivered and do not hold the start offset back;
ListGroups, ShareGroupDescribe, DescribeShareGroupOffsets and share sessions over the wire;
AlterShareGroupOffsets (``josefk groups reset-offsets``, refused while the group has members),
DeleteShareGroupOffsets and DeleteGroups; josefk's own AIOShareConsumer,
``josefk consume --share-group`` and ``josefk groups``.

The broker runs with a short heartbeat interval, session timeout and record lock so that
everything takes seconds; tests poll the clients until the expected state, never sleep.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from broker_process import BrokerProcess, free_port, run_josefk
from client_helpers import ck_admin, ck_config, ck_create_topic, ck_topic_id, unique_topic
from confluent_kafka import Message, Producer, ShareConsumer
from confluent_kafka.admin import ConfigResource, ResourceType
from prometheus_client.parser import text_string_to_metric_families
from raw_client import RawClient

from josefk.client.share_consumer import AcknowledgeType, AIOShareConsumer
from josefk.client.sync import Admin as SyncAdmin
from josefk.client.sync import ShareConsumer as SyncShareConsumer
from josefk.client.types import TopicPartition as SyncTopicPartition
from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

LOCK_MS = 3000
SETTINGS = (
    "group.share.heartbeat.interval.ms=300",
    "group.share.session.timeout.ms=3000",
    f"group.share.record.lock.duration.ms={LOCK_MS}",
)
TIMEOUT_S = 40.0
ACCEPT, RELEASE, REJECT = 1, 2, 3

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("josefk-kip932")
    broker = BrokerProcess(
        base / "data", base / "broker.stderr.log", settings=SETTINGS, metrics_port=free_port()
    )
    try:
        broker.start()
        yield broker
        if broker.is_alive():
            broker.stop()
    finally:
        broker.close()


def set_earliest(bootstrap: str, group: str, **more: str) -> None:
    """share.auto.offset.reset=earliest for ``group``, and ``more`` group configs (dots as
    underscores), with IncrementalAlterConfigs on the GROUP resource."""
    configs = {"share.auto.offset.reset": "earliest"}
    configs.update({k.replace("_", "."): v for k, v in more.items()})
    request = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    client = RawClient(bootstrap)
    try:
        response = client.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                request.AlterConfigsResource(
                    resource_type=32,
                    resource_name=group,
                    configs=[
                        request.AlterableConfig(name=name, config_operation=0, value=value)
                        for name, value in configs.items()
                    ],
                )
            ],
            validate_only=False,
        )
    finally:
        client.close()
    assert response.responses[0].error_code == ErrorCode.NONE


def new_topic(bootstrap: str, count: int) -> str:
    topic = unique_topic("share")
    ck_create_topic(bootstrap, topic, partitions=1)
    producer = Producer(ck_config(bootstrap, **{"linger.ms": 5}))
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(20) == 0
    return topic


def share_consumer(bootstrap: str, group: str, topic: str, **conf: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def poll_until(
    consumers: list[ShareConsumer],
    done: Callable[[], bool],
    on_message: Callable[[int, Message], None],
    *,
    timeout_s: float = TIMEOUT_S,
) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out waiting for share deliveries"
        for index, consumer in enumerate(consumers):
            for message in consumer.poll(0.2):
                if message.error() is None:
                    on_message(index, message)


def topic_id_of(bootstrap: str, topic: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(ck_topic_id(bootstrap, topic) + "=="))


def raw_share_fetch(
    client: RawClient,
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID | None,
    *,
    version: int = 1,
    max_wait_ms: int = 0,
    max_records: int = 10,
    acks: Sequence[Any] = (),
    partitions: Sequence[int] = (0,),
    max_bytes: int = 1 << 20,
    **more: Any,
) -> Any:
    """One ShareFetch over a raw connection: ``partitions`` of ``topic_id`` (no topic when
    None), the first with ``acks`` (acknowledgement batches), ``more`` as further request
    fields."""
    fetch = request_class(ApiKey.SHARE_FETCH)
    topics = []
    if topic_id is not None:
        wanted = [
            fetch.FetchPartition(
                partition_index=p, acknowledgement_batches=list(acks) if i == 0 else []
            )
            for i, p in enumerate(partitions)
        ]
        topics = [fetch.FetchTopic(topic_id=topic_id, partitions=wanted)]
    return client.call(
        ApiKey.SHARE_FETCH,
        version,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        max_records=max_records,
        batch_size=max_records,
        topics=topics,
        forgotten_topics_data=[],
        **more,
    )


def test_three_members_share_every_record_once(broker: BrokerProcess) -> None:
    group = unique_topic("g3")
    set_earliest(broker.bootstrap, group)
    topic = new_topic(broker.bootstrap, 300)
    members = [
        share_consumer(broker.bootstrap, group, topic, **{"max.poll.records": 10}) for _ in range(3)
    ]
    seen: dict[int, int] = {}
    by_member = [0, 0, 0]

    def take(index: int, message: Message) -> None:
        offset = message.offset()
        assert offset is not None
        seen[offset] = seen.get(offset, 0) + 1
        by_member[index] += 1

    try:
        poll_until(members, lambda: len(seen) >= 300, take)
        # Implicit mode: the next polls accept what the last returned; nothing comes again.
        for _ in range(3):
            for consumer in members:
                assert list(consumer.poll(0.3)) == []
    finally:
        for consumer in members:
            consumer.close()
    assert sorted(seen) == list(range(300))
    assert set(seen.values()) == {1}, "a record was delivered twice"
    assert sum(1 for n in by_member if n) >= 2, f"one member took everything: {by_member}"


def test_release_redelivers_reject_does_not(broker: BrokerProcess) -> None:
    group = unique_topic("gx")
    set_earliest(broker.bootstrap, group)
    topic = new_topic(broker.bootstrap, 4)
    consumer = share_consumer(
        broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"}
    )
    deliveries: dict[int, list[int]] = {}

    def take(_: int, message: Message) -> None:
        offset = message.offset()
        assert offset is not None
        deliveries.setdefault(offset, []).append(message.delivery_count())
        # 0 accepted, 1 released each time, 2 rejected, 3 released once then accepted.
        if offset == 1 or (offset == 3 and len(deliveries[3]) == 1):
            consumer.acknowledge(message, RELEASE)
        elif offset == 2:
            consumer.acknowledge(message, REJECT)
        else:
            consumer.acknowledge(message, ACCEPT)
        consumer.commit_sync()

    try:
        poll_until([consumer], lambda: len(deliveries.get(1, [])) >= 5, take)
        # Offset 1 was released at each of its five deliveries: archived, never again.
        for _ in range(5):
            for message in consumer.poll(0.3):
                take(0, message)
    finally:
        consumer.close()
    assert deliveries[0] == [1]
    assert deliveries[1] == [1, 2, 3, 4, 5]
    assert deliveries[2] == [1]
    assert deliveries[3] == [1, 2]


KILLED_MEMBER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    got = 0
    while got == 0:
        got = len(c.poll(0.5))
    print(got, flush=True)
    time.sleep(600)
    """
)


def test_killed_members_records_go_to_another_after_the_lock(broker: BrokerProcess) -> None:
    group = unique_topic("gk")
    set_earliest(broker.bootstrap, group)
    topic = new_topic(broker.bootstrap, 20)
    holder = subprocess.Popen(
        [sys.executable, "-c", KILLED_MEMBER, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert int(holder.stdout.readline()) > 0
    finally:
        holder.kill()
        holder.wait()
    other = share_consumer(broker.bootstrap, group, topic)
    counts: dict[int, int] = {}

    def take(_: int, message: Message) -> None:
        offset = message.offset()
        assert offset is not None
        counts[offset] = message.delivery_count()

    try:
        poll_until([other], lambda: len(counts) >= 20, take)
    finally:
        other.close()
    assert sorted(counts) == list(range(20))
    assert 2 in counts.values(), "the killed member's records came without redelivery"


def test_admin_lists_and_describes_share_group(broker: BrokerProcess) -> None:
    group = unique_topic("gd")
    topic = new_topic(broker.bootstrap, 0)
    consumer = share_consumer(broker.bootstrap, group, topic)
    client = RawClient(broker.bootstrap)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            consumer.poll(0.2)
            described = client.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=[group])
            found = described.groups[0]
            if found.error_code == ErrorCode.NONE and found.members[0].assignment.topic_partitions:
                break
            assert time.monotonic() < deadline
        assert found.group_state == "Stable"
        assert found.members[0].assignment.topic_partitions[0].topic_name == topic
        assert found.members[0].assignment.topic_partitions[0].partitions == [0]
        listed = client.call(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["share"])
        listed_types = {g.group_id: g.group_type for g in listed.groups}
        assert listed_types[group] == "share"
        assert set(listed_types.values()) == {"share"}
        # josefk's own CLI sees the same.
        cli_listed = json.loads(run_josefk(broker.bootstrap, "groups", "list", "--json"))
        assert {g["group"]: g["type"] for g in cli_listed}[group] == "share"
        shown = json.loads(run_josefk(broker.bootstrap, "groups", "describe", group, "--json"))
        assert shown["type"] == "share" and shown["state"] == "Stable"
        assert shown["members"][0]["assignment"] == [{"topic": topic, "partition": 0}]
        assert shown["members"][0]["member_epoch"] == found.members[0].member_epoch
    finally:
        consumer.close()
        client.close()
    admin = ck_admin(broker.bootstrap)
    result = admin.delete_consumer_groups([group])
    result[group].result(timeout=20)


def test_acknowledged_records_survive_a_restart(tmp_path: Any) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.stderr.log", settings=SETTINGS)
    try:
        broker.start()
        group = unique_topic("gr")
        set_earliest(broker.bootstrap, group)
        topic = new_topic(broker.bootstrap, 10)
        first = share_consumer(
            broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"}
        )
        held: list[int] = []

        def accept_half(_: int, message: Message) -> None:
            offset = message.offset()
            assert offset is not None
            held.append(offset)
            if offset < 5:
                first.acknowledge(message, ACCEPT)

        poll_until([first], lambda: len(held) >= 10, accept_half)
        first.commit_sync()
        # SIGKILL while 5..9 are still acquired by the first member.
        broker.kill()
        first.close()
        broker.restart()
        second = share_consumer(broker.bootstrap, group, topic)
        again: dict[int, int] = {}

        def take(_: int, message: Message) -> None:
            offset = message.offset()
            assert offset is not None
            again[offset] = message.delivery_count()

        try:
            poll_until([second], lambda: len(again) >= 5, take)
            for _ in range(3):
                for message in second.poll(0.3):
                    take(0, message)
        finally:
            second.close()
        assert sorted(again) == [5, 6, 7, 8, 9]
    finally:
        broker.close()


def _heartbeat(client: RawClient, group: str, member: str, epoch: int, **more: Any) -> Any:
    return client.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rack_id=None,
        **{"subscribed_topic_names": None, **more},
    )


def test_share_group_membership_survives_a_restart(tmp_path: Any) -> None:
    """The group's records in __consumer_offsets: after a SIGKILL and restart the members
    carry on with their epochs (no UNKNOWN_MEMBER_ID, no FENCED_MEMBER_EPOCH), get their
    assignment again, and ShareGroupDescribe shows the group epoch and both members."""
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.stderr.log", settings=SETTINGS)
    try:
        broker.start()
        group = unique_topic("gm")
        topic = unique_topic("share")
        ck_create_topic(broker.bootstrap, topic, partitions=2)
        client = RawClient(broker.bootstrap)
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        try:
            assert _heartbeat(client, group, a, 0, subscribed_topic_names=[topic]).member_epoch == 1
            joined = _heartbeat(client, group, b, 0, subscribed_topic_names=[topic])
            assert (joined.error_code, joined.member_epoch) == (ErrorCode.NONE, 2)
            before = _heartbeat(client, group, a, 1)
            assert before.member_epoch == 2
            assigned = {p for t in before.assignment.topic_partitions for p in t.partitions}
        finally:
            client.close()
        broker.kill()
        broker.restart()
        client = RawClient(broker.bootstrap)
        try:
            after = _heartbeat(client, group, a, 2)
            assert (after.error_code, after.member_epoch) == (ErrorCode.NONE, 2)
            assert {p for t in after.assignment.topic_partitions for p in t.partitions} == assigned
            assert _heartbeat(client, group, b, 2).error_code == ErrorCode.NONE
            described = client.call(
                ApiKey.SHARE_GROUP_DESCRIBE,
                1,
                group_ids=[group],
                include_authorized_operations=False,
            ).groups[0]
            assert (described.error_code, described.group_epoch) == (ErrorCode.NONE, 2)
            assert sorted(m.member_id for m in described.members) == sorted([a, b])
        finally:
            client.close()
    finally:
        broker.close()


async def test_josefk_share_consumer(broker: BrokerProcess) -> None:
    group = unique_topic("gj")
    set_earliest(broker.bootstrap, group)
    topic = new_topic(broker.bootstrap, 10)
    consumer = AIOShareConsumer(
        bootstrap_servers=broker.bootstrap, group_id=group, acknowledgement_mode="explicit"
    )
    await consumer.start()
    seen: dict[int, list[int]] = {}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < 10 or len(seen.get(0, [])) < 2:
            assert time.monotonic() < deadline
            for r in await consumer.poll(500):
                seen.setdefault(r.offset, []).append(r.delivery_count)
                released = r.offset == 0 and r.delivery_count == 1
                consumer.acknowledge(
                    r, AcknowledgeType.RELEASE if released else AcknowledgeType.ACCEPT
                )
            await consumer.commit()
        for _ in range(3):
            assert await consumer.poll(300) == []
    finally:
        await consumer.close()
    assert seen[0] == [1, 2]
    assert all(seen[o] == [1] for o in range(1, 10))


def test_cli_consume_with_a_share_group(broker: BrokerProcess) -> None:
    group = unique_topic("gc")
    run_josefk(
        broker.bootstrap,
        "configs",
        "alter",
        "--group",
        group,
        "--add-config",
        "share.auto.offset.reset=earliest",
    )
    described = json.loads(
        run_josefk(broker.bootstrap, "configs", "describe", "--group", group, "--json")
    )
    assert described["configs"]["share.auto.offset.reset"]["value"] == "earliest"
    assert described["configs"]["share.auto.offset.reset"]["source"] == "GROUP_CONFIG"
    topic = new_topic(broker.bootstrap, 3)

    def consume(*args: str) -> list[int]:
        out = run_josefk(
            broker.bootstrap, "consume", topic, "--share-group", group, "--json", *args
        )
        return [json.loads(line)["offset"] for line in out.splitlines()]

    assert consume("--ack", "release", "-n", "3") == [0, 1, 2]
    assert consume("--ack", "reject", "-n", "1") == [0]
    assert consume("--ack", "accept", "-n", "2") == [1, 2]
    assert consume("--no-follow", "--idle-timeout", "1") == []


def test_describe_share_group_offsets(broker: BrokerProcess) -> None:
    group = unique_topic("go")
    set_earliest(broker.bootstrap, group)
    topic = new_topic(broker.bootstrap, 10)
    consumer = share_consumer(
        broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"}
    )
    got: list[int] = []

    def accept_first_four(_: int, message: Message) -> None:
        offset = message.offset()
        assert offset is not None
        got.append(offset)
        consumer.acknowledge(message, ACCEPT if offset < 4 else RELEASE)

    client = RawClient(broker.bootstrap)
    try:
        poll_until([consumer], lambda: len(got) >= 10, accept_first_four)
        consumer.commit_sync()
        request = request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
        response = client.call(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            1,
            groups=[request.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)],
        )
        (described,) = response.groups
        assert described.error_code == ErrorCode.NONE
        ((name, partitions),) = [(t.topic_name, t.partitions) for t in described.topics]
        assert name == topic
        assert [(p.partition_index, p.start_offset, p.lag) for p in partitions] == [(0, 4, 6)]
        unknown = client.call(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            1,
            groups=[request.DescribeShareGroupOffsetsRequestGroup(group_id="nope", topics=None)],
        )
        assert unknown.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
        shown = json.loads(run_josefk(broker.bootstrap, "groups", "describe", group, "--json"))
        assert [(p["committed_offset"], p["lag"]) for p in shown["partitions"]] == [(4, 6)]
    finally:
        consumer.close()
        client.close()


def test_share_session_epochs(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, 0)
    group = unique_topic("gs")
    fetch = request_class(ApiKey.SHARE_FETCH)
    topic_id = topic_id_of(broker.bootstrap, topic)
    client = RawClient(broker.bootstrap)

    def share_fetch(epoch: int, acks: Sequence[Any] = ()) -> Any:
        return raw_share_fetch(client, group, "m1", epoch, topic_id, acks=acks)

    try:
        assert share_fetch(3).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        ack = fetch.AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=[1])
        assert share_fetch(0, [ack]).error_code == ErrorCode.INVALID_REQUEST
        assert share_fetch(0).error_code == ErrorCode.NONE
        assert share_fetch(1).error_code == ErrorCode.NONE
        assert share_fetch(1).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert share_fetch(2).error_code == ErrorCode.NONE
        # An acknowledgement of a record never acquired.
        answer = share_fetch(3, [ack])
        assert answer.error_code == ErrorCode.NONE
        (part,) = answer.responses[0].partitions
        assert part.acknowledge_error_code == ErrorCode.INVALID_RECORD_STATE
        assert share_fetch(-1).error_code == ErrorCode.NONE
        assert share_fetch(5).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    finally:
        client.close()


def test_a_new_sessions_first_fetch_answers_what_is_ready(broker: BrokerProcess) -> None:
    """As Kafka, whose share partitions initialize asynchronously: the first fetch of two
    new share partitions answers the first with records, the next fetch the other; a fetch
    with max_bytes 0 acquires nothing."""
    topic = unique_topic("share")
    ck_create_topic(broker.bootstrap, topic, partitions=2)
    producer = Producer(ck_config(broker.bootstrap))
    for partition in (0, 1):
        for i in range(3):
            producer.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert producer.flush(20) == 0
    group = unique_topic("gf")
    set_earliest(broker.bootstrap, group)
    topic_id = topic_id_of(broker.bootstrap, topic)
    client = RawClient(broker.bootstrap)

    def acquired(answer: Any) -> dict[int, list[tuple[int, int]]]:
        assert answer.error_code == ErrorCode.NONE
        return {
            p.partition_index: [(a.first_offset, a.last_offset) for a in p.acquired_records]
            for t in answer.responses
            for p in t.partitions
            if p.acquired_records
        }

    try:
        both = (0, 1)
        nothing = raw_share_fetch(client, group, "m1", 0, topic_id, partitions=both, max_bytes=0)
        assert acquired(nothing) == {}
        first = raw_share_fetch(client, group, "m1", 1, topic_id, partitions=both)
        assert acquired(first) == {0: [(0, 2)]}
        second = raw_share_fetch(client, group, "m1", 2, topic_id, partitions=both)
        assert acquired(second) == {1: [(0, 2)]}
    finally:
        client.close()


def test_a_sessions_deleted_topic_is_answered_under_its_old_id(broker: BrokerProcess) -> None:
    """A share session whose topic is deleted: the next fetch of the session (naming no
    topic) is answered, the partition under the id the member knew with an error, and the
    broker goes on serving (it once failed to encode that answer and dropped the request)."""
    topic = new_topic(broker.bootstrap, 2)
    group = unique_topic("gd")
    topic_id = topic_id_of(broker.bootstrap, topic)
    client = RawClient(broker.bootstrap)

    def share_fetch(epoch: int, topic: uuid.UUID | None) -> Any:
        return raw_share_fetch(client, group, "m1", epoch, topic)

    try:
        opened = share_fetch(0, topic_id)
        assert opened.error_code == ErrorCode.NONE
        admin = ck_admin(broker.bootstrap)
        admin.delete_topics([topic])[topic].result(30)
        epoch, deadline = 1, time.monotonic() + 30
        while True:
            answer = share_fetch(epoch, None)
            epoch += 1
            assert answer.error_code == ErrorCode.NONE
            parts = [
                (r.topic_id, p.partition_index, p.error_code)
                for r in answer.responses
                for p in r.partitions
            ]
            if parts or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert parts == [(topic_id, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        assert share_fetch(epoch, None).error_code == ErrorCode.NONE
    finally:
        client.close()


def describe_offsets(bootstrap: str, group: str) -> list[tuple[int, int]]:
    request = request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
    client = RawClient(bootstrap)
    try:
        response = client.call(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            1,
            groups=[request.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)],
        )
    finally:
        client.close()
    return [(p.start_offset, p.lag) for t in response.groups[0].topics for p in t.partitions]


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_transaction_markers_and_aborted_records(broker: BrokerProcess, isolation: str) -> None:
    topic = unique_topic("share-txn")
    ck_create_topic(broker.bootstrap, topic, partitions=1)
    producer = Producer(ck_config(broker.bootstrap, **{"transactional.id": unique_topic("tx")}))
    producer.init_transactions(20)
    for values, commit in ((["a", "b", "c"], True), (["x", "y"], False), (["d", "e"], True)):
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v.encode(), partition=0)
        # Written before the abort (librdkafka purges what an abort finds unsent).
        assert producer.flush(20) == 0
        if commit:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)
    group = unique_topic("gt")
    set_earliest(broker.bootstrap, group, share_isolation_level=isolation)
    consumer = share_consumer(broker.bootstrap, group, topic)
    values: list[bytes] = []
    wanted = 5 if isolation == "read_committed" else 7
    try:
        poll_until([consumer], lambda: len(values) >= wanted, lambda _, m: values.append(m.value()))
        for _ in range(3):
            for message in consumer.poll(0.3):
                values.append(message.value())
    finally:
        consumer.close()
    expected = [b"a", b"b", b"c", b"d", b"e"]
    if isolation == "read_uncommitted":
        expected = [b"a", b"b", b"c", b"x", b"y", b"d", b"e"]
    assert values == expected
    # Every offset is settled, markers included: 7 records and 3 markers.
    assert describe_offsets(broker.bootstrap, group) == [(10, 0)]


def _share_offsets(client: RawClient, group: str) -> tuple[int, list[tuple[int, int]]]:
    """The group's error code and (partition, start offset) of its share state."""
    request = request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
    response = client.call(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        1,
        groups=[request.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)],
    )
    (described,) = response.groups
    return described.error_code, [
        (p.partition_index, p.start_offset) for t in described.topics for p in t.partitions
    ]


def test_reset_delete_offsets_and_delete_a_share_group(broker: BrokerProcess) -> None:
    """AlterShareGroupOffsets through ``josefk groups reset-offsets`` (refused while a member
    is in the group, as Kafka's rule), then every record delivered again from the new start;
    DeleteShareGroupOffsets forgets the state; DeleteGroups deletes the empty group."""
    group = unique_topic("gz")
    set_earliest(broker.bootstrap, group)
    topic = new_topic(broker.bootstrap, 6)
    first = share_consumer(broker.bootstrap, group, topic)
    got: list[int] = []
    client = RawClient(broker.bootstrap)
    try:
        poll_until([first], lambda: len(got) >= 6, lambda _, m: got.append(m.offset() or 0))
        first.commit_sync()
        assert _share_offsets(client, group) == (ErrorCode.NONE, [(0, 6)])
        # A member in the group: refused (the CLI fails before any change).
        run_josefk(
            broker.bootstrap,
            "groups",
            "reset-offsets",
            group,
            "--topic",
            topic,
            "--to",
            "earliest",
            "--execute",
            expect=1,
        )
        admin_refused = client.call(
            ApiKey.ALTER_SHARE_GROUP_OFFSETS,
            0,
            group_id=group,
            topics=[
                request_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS).AlterShareGroupOffsetsRequestTopic(
                    topic_name=topic,
                    partitions=[
                        request_class(
                            ApiKey.ALTER_SHARE_GROUP_OFFSETS
                        ).AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)
                    ],
                )
            ],
        )
        assert admin_refused.error_code == ErrorCode.NON_EMPTY_GROUP
    finally:
        first.close()
    # Empty now (the member left on close): the start offset goes back to 0.
    plan = json.loads(
        run_josefk(
            broker.bootstrap,
            "groups",
            "reset-offsets",
            group,
            "--topic",
            topic,
            "--to",
            "earliest",
            "--execute",
            "--json",
        )
    )
    assert [(p["old_offset"], p["new_offset"]) for p in plan["partitions"]] == [(6, 0)]
    assert _share_offsets(client, group) == (ErrorCode.NONE, [(0, 0)])
    second = share_consumer(broker.bootstrap, group, topic)
    again: dict[int, int] = {}
    try:
        poll_until(
            [second],
            lambda: len(again) >= 6,
            lambda _, m: again.setdefault(m.offset() or 0, m.delivery_count()),
        )
        second.commit_sync()
    finally:
        second.close()
    assert again == dict.fromkeys(range(6), 1)

    delete = request_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
    deleted = client.call(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        0,
        group_id=group,
        topics=[delete.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)],
    )
    assert (deleted.error_code, [t.error_code for t in deleted.responses]) == (0, [0])
    # As Kafka: the topic leaves the group's share-state topics, so a describe of all of
    # them no longer lists it (asked by name, it has no start offset).
    assert _share_offsets(client, group) == (ErrorCode.NONE, [])
    gone = client.call(ApiKey.DELETE_GROUPS, 2, groups_names=[group])
    assert [r.error_code for r in gone.results] == [ErrorCode.NONE]
    assert _share_offsets(client, group)[0] == ErrorCode.GROUP_ID_NOT_FOUND
    client.close()


def _scrape(broker: BrokerProcess) -> dict[str, float]:
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=20) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def test_share_group_metrics(broker: BrokerProcess) -> None:
    """Kafka's share-group series count what a real ShareConsumer did."""
    before = _scrape(broker)
    group = unique_topic("gm")
    set_earliest(broker.bootstrap, group)
    topic = new_topic(broker.bootstrap, 4)
    consumer = share_consumer(
        broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"}
    )
    got: dict[int, int] = {}

    def accept_but_release_zero_once(_: int, message: Message) -> None:
        offset = message.offset() or 0
        got[offset] = got.get(offset, 0) + 1
        once = offset == 0 and got[offset] == 1
        consumer.acknowledge(message, RELEASE if once else ACCEPT)

    try:
        poll_until([consumer], lambda: len(got) == 4 and got[0] == 2, accept_but_release_zero_once)
        consumer.commit_sync()
        during = _scrape(broker)
    finally:
        consumer.close()

    def grew(name: str) -> float:
        return during.get(name, 0.0) - before.get(name, 0.0)

    acks = "kafka_server_sharegroupmetrics_recordacknowledgements_total"
    assert grew(acks + '{ackType="Accept"}') == 4
    assert grew(acks + '{ackType="Release"}') == 1
    assert grew(f'kafka_server_brokertopicmetrics_totalsharefetchrequests_total{{topic="{topic}"}}')
    assert grew(
        f'kafka_server_brokertopicmetrics_totalshareacknowledgementrequests_total{{topic="{topic}"}}'
    )
    assert grew("kafka_server_share_coordinator_metrics_write_total") >= 2
    assert during['kafka_server_group_coordinator_metrics_share_group_count{state="Stable"}'] >= 1
    assert during["kafka_server_sharesessioncache_sharesessionscount"] >= 1
    in_flight = f'group="{group}",partition="0",topic="{topic}"'
    assert during[f"kafka_server_sharepartitionmetrics_inflightmessagecount{{{in_flight}}}"] >= 0


def test_sync_share_consumer_and_admin(broker: BrokerProcess) -> None:
    """josefk.client.sync's ShareConsumer: explicit acknowledgements from a plain thread,
    and the blocking Admin's share offsets."""
    group = unique_topic("gs")
    set_earliest(broker.bootstrap, group)
    topic = new_topic(broker.bootstrap, 5)
    seen: dict[int, list[int]] = {}
    with SyncShareConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
    ) as consumer:
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < 5 or len(seen[4]) < 2:
            assert time.monotonic() < deadline
            for r in consumer.poll(500):
                seen.setdefault(r.offset, []).append(r.delivery_count)
                again = r.offset == 4 and r.delivery_count == 1
                consumer.acknowledge(
                    r, AcknowledgeType.RELEASE if again else AcknowledgeType.ACCEPT
                )
            consumer.commit()
    assert seen == {0: [1], 1: [1], 2: [1], 3: [1], 4: [1, 2]}
    with SyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
        tp = SyncTopicPartition(topic, 0)
        assert admin.list_share_group_offsets(group)[tp][0] == 5
        admin.alter_share_group_offsets(group, {tp: 2})
        assert admin.list_share_group_offsets(group)[tp][0] == 2


def test_share_fetch_v2_renews_acquisition_locks(broker: BrokerProcess) -> None:
    """KIP-1222 over the wire (ShareFetch/ShareAcknowledge v2): a member renewing its
    records keeps them past the lock duration while another member fetches in vain; a
    renewing ShareFetch acquires nothing; both answer the lock duration; type 4 without
    is_renew_ack is INVALID_REQUEST."""
    topic = new_topic(broker.bootstrap, 3)
    group = unique_topic("gr")
    set_earliest(broker.bootstrap, group)
    fetch = request_class(ApiKey.SHARE_FETCH)
    acknowledge = request_class(ApiKey.SHARE_ACKNOWLEDGE)
    topic_id = topic_id_of(broker.bootstrap, topic)
    clients = {m: RawClient(broker.bootstrap) for m in ("m1", "m2")}
    epochs = {"m1": 0, "m2": 0}

    def share_fetch(member: str, wait_ms: int, max_records: int, acks: Any = (), **v2: Any) -> Any:
        answer = raw_share_fetch(
            clients[member],
            group,
            member,
            epochs[member],
            topic_id,
            version=2,
            max_wait_ms=wait_ms,
            max_records=max_records,
            acks=acks,
            **v2,
        )
        assert answer.error_code == ErrorCode.NONE
        assert answer.acquisition_lock_timeout_ms == LOCK_MS
        epochs[member] += 1
        return answer

    def acquired(answer: Any) -> list[tuple[int, int]]:
        return [
            (a.first_offset, a.last_offset)
            for t in answer.responses
            for p in t.partitions
            for a in p.acquired_records
        ]

    def ack_error(answer: Any) -> int:
        (part,) = answer.responses[0].partitions
        return int(part.acknowledge_error_code)

    def acknowledge_v2(member: str, types: list[int], renew: bool) -> Any:
        answer = clients[member].call(
            ApiKey.SHARE_ACKNOWLEDGE,
            2,
            group_id=group,
            member_id=member,
            share_session_epoch=epochs[member],
            is_renew_ack=renew,
            topics=[
                acknowledge.AcknowledgeTopic(
                    topic_id=topic_id,
                    partitions=[
                        acknowledge.AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=[
                                acknowledge.AcknowledgementBatch(
                                    first_offset=0, last_offset=1, acknowledge_types=types
                                )
                            ],
                        )
                    ],
                )
            ],
        )
        epochs[member] += 1
        assert answer.error_code == ErrorCode.NONE
        assert answer.acquisition_lock_timeout_ms == LOCK_MS
        return answer

    renew = fetch.AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=[4])
    try:
        first = share_fetch("m1", 10_000, 2)
        assert acquired(first) == [(0, 1)]
        acquired_at = time.monotonic()
        # A renewing ShareFetch answers its acknowledgements and acquires nothing, though
        # offset 2 is available.
        renewing = share_fetch("m1", 10_000, 2, [renew], is_renew_ack=True)
        assert acquired(renewing) == [] and ack_error(renewing) == ErrorCode.NONE
        # Type 4 without is_renew_ack is an unknown type.
        (part,) = acknowledge_v2("m1", [4], renew=False).responses[0].partitions
        assert part.error_code == ErrorCode.INVALID_REQUEST
        # Keep renewing for two lock durations; m2 gets offset 2 (again each time its own
        # unrenewed lock ends), never 0..1.
        taken: list[tuple[int, int]] = []
        while time.monotonic() < acquired_at + 2 * LOCK_MS / 1000:
            (part,) = acknowledge_v2("m1", [4], renew=True).responses[0].partitions
            assert part.error_code == ErrorCode.NONE
            taken += acquired(share_fetch("m2", 300, 10))
        assert taken and set(taken) == {(2, 2)}
        # Still m1's: its accept succeeds, and the records are done with.
        (part,) = acknowledge_v2("m1", [1], renew=False).responses[0].partitions
        assert part.error_code == ErrorCode.NONE
    finally:
        for client in clients.values():
            client.close()


def test_group_record_lock_duration(broker: BrokerProcess) -> None:
    """Kafka 4.2's group config share.record.lock.duration.ms: within 15-60 s, described,
    and the group's lock (the acquisition lock timeout ShareFetch answers)."""
    topic = new_topic(broker.bootstrap, 1)
    group = unique_topic("gl")
    set_earliest(broker.bootstrap, group, share_record_lock_duration_ms="20000")
    with pytest.raises(AssertionError):
        set_earliest(broker.bootstrap, group, share_record_lock_duration_ms="1000")
    topic_id = topic_id_of(broker.bootstrap, topic)
    client = RawClient(broker.bootstrap)
    try:
        answer = raw_share_fetch(client, group, "m1", 0, topic_id, version=2, max_wait_ms=10_000)
        assert answer.error_code == ErrorCode.NONE
        assert answer.acquisition_lock_timeout_ms == 20_000
        (part,) = answer.responses[0].partitions
        assert [(a.first_offset, a.last_offset) for a in part.acquired_records] == [(0, 0)]
        # Unknown acquire modes (KIP-1206 has 0 and 1) are refused.
        refused = raw_share_fetch(client, group, "m1", 1, None, version=2, share_acquire_mode=7)
        assert refused.error_code == ErrorCode.INVALID_REQUEST
    finally:
        client.close()
    admin = ck_admin(broker.bootstrap)
    resource = ConfigResource(ResourceType.GROUP, group)
    described = admin.describe_configs([resource])[resource].result(20)
    assert described["share.record.lock.duration.ms"].value == "20000"
