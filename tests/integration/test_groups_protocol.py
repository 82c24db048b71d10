"""Group and offset APIs version by version, with raw requests built by josefk's codec against
a real ``josefk serve``: the shapes no client library exercises everywhere (FindCoordinator's
batched form, JoinGroup v0 without the member id round trip, static members, LeaveGroup
batches, OffsetCommit retention, OffsetFetch v1/v7/v8, ListGroups filters, DescribeGroups of an
unknown group, OffsetDelete), and the group metrics a scraper sees.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from broker_process import BrokerProcess, free_port
from client_helpers import (
    assert_delivered,
    ck_admin,
    ck_create_topic,
    ck_produce,
    make_messages,
    unique_topic,
)
from prometheus_client.parser import text_string_to_metric_families
from raw_client import RawClient

from josefk.broker.group.assignment import encode_subscription
from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

SETTINGS = (
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=1000",
    "offsets.topic.num.partitions=7",
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("josefk-groups-protocol")
    process = BrokerProcess(
        base / "data", base / "broker.stderr.log", settings=SETTINGS, metrics_port=free_port()
    )
    try:
        process.start()
        yield process
        if process.is_alive():
            process.stop()
    finally:
        process.close()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    raw = RawClient(broker.bootstrap)
    yield raw
    raw.close()


def join_v0(client: RawClient, group: str, topic: str) -> Any:
    JoinRequest = request_class(ApiKey.JOIN_GROUP)
    return client.call(
        ApiKey.JOIN_GROUP,
        0,
        group_id=group,
        session_timeout_ms=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=[
            JoinRequest.JoinGroupRequestProtocol(
                name="range", metadata=encode_subscription([topic])
            )
        ],
    )


def stable_member(client: RawClient, group: str, topic: str) -> tuple[str, int]:
    """A one-member group through JoinGroup v0 and SyncGroup v0; (member id, generation)."""
    joined = join_v0(client, group, topic)
    assert joined.error_code == 0
    assert joined.leader == joined.member_id
    SyncRequest = request_class(ApiKey.SYNC_GROUP)
    synced = client.call(
        ApiKey.SYNC_GROUP,
        0,
        group_id=group,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        assignments=[
            SyncRequest.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"A")
        ],
    )
    assert (synced.error_code, synced.assignment) == (0, b"A")
    return joined.member_id, joined.generation_id


def test_find_coordinator_every_form(client: RawClient, broker: BrokerProcess) -> None:
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    v0 = client.call(ApiKey.FIND_COORDINATOR, 0, key="g")
    assert (v0.error_code, v0.port) == (0, port)
    # The single node is the transaction coordinator of every transactional id.
    txn = client.call(ApiKey.FIND_COORDINATOR, 2, key="t", key_type=1)
    assert (txn.error_code, txn.port) == (ErrorCode.NONE, port)
    # A share partition's key (KIP-932): group:topicId:partition; anything else is refused.
    share = client.call(
        ApiKey.FIND_COORDINATOR, 6, key_type=2, coordinator_keys=["g:EjRWeBI0VngSNFZ4EjRWeA:0", "s"]
    )
    assert [(c.error_code, c.port) for c in share.coordinators] == [
        (ErrorCode.NONE, port),
        (ErrorCode.INVALID_REQUEST, -1),
    ]
    batched = client.call(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["a", "b"])
    assert [(c.key, c.error_code, c.port) for c in batched.coordinators] == [
        ("a", 0, port),
        ("b", 0, port),
    ]


def test_join_v0_sync_heartbeat_leave(client: RawClient) -> None:
    group, topic = unique_topic("raw-g"), unique_topic("raw-t")
    member, generation = stable_member(client, group, topic)
    beat = client.call(
        ApiKey.HEARTBEAT, 0, group_id=group, generation_id=generation, member_id=member
    )
    assert beat.error_code == 0
    stale = client.call(
        ApiKey.HEARTBEAT, 0, group_id=group, generation_id=generation - 1, member_id=member
    )
    assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
    left = client.call(ApiKey.LEAVE_GROUP, 0, group_id=group, member_id=member)
    assert left.error_code == 0
    again = client.call(ApiKey.LEAVE_GROUP, 1, group_id=group, member_id=member)
    assert again.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_join_v4_requires_a_member_id_and_v5_static_members_skip_it(client: RawClient) -> None:
    group, topic = unique_topic("raw-g"), unique_topic("raw-t")
    JoinRequest = request_class(ApiKey.JOIN_GROUP)
    protocols = [
        JoinRequest.JoinGroupRequestProtocol(name="range", metadata=encode_subscription([topic]))
    ]
    first = client.call(
        ApiKey.JOIN_GROUP,
        4,
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=protocols,
    )
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("raw-client-")
    static_group = unique_topic("raw-static")
    static = client.call(
        ApiKey.JOIN_GROUP,
        7,
        group_id=static_group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        group_instance_id="instance-1",
        protocol_type="consumer",
        protocols=protocols,
    )
    assert static.error_code == 0
    assert static.member_id.startswith("instance-1-")
    assert (static.protocol_type, static.protocol_name) == ("consumer", "range")
    # LeaveGroup v3: a batch, by instance id, one unknown.
    LeaveRequest = request_class(ApiKey.LEAVE_GROUP)
    left = client.call(
        ApiKey.LEAVE_GROUP,
        3,
        group_id=static_group,
        members=[
            LeaveRequest.MemberIdentity(member_id="", group_instance_id="instance-1"),
            LeaveRequest.MemberIdentity(member_id="nobody", group_instance_id=None),
        ],
    )
    assert left.error_code == 0
    assert [m.error_code for m in left.members] == [0, ErrorCode.UNKNOWN_MEMBER_ID]


def commit(client: RawClient, version: int, group: str, topic: str, **fields: Any) -> Any:
    Commit = request_class(ApiKey.OFFSET_COMMIT)
    partitions = fields.pop("partitions")
    return client.call(
        ApiKey.OFFSET_COMMIT,
        version,
        group_id=group,
        topics=[
            Commit.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    Commit.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata=m
                    )
                    for p, o, m in partitions
                ],
            )
        ],
        **fields,
    )


def test_offset_commit_and_fetch_across_versions(client: RawClient, broker: BrokerProcess) -> None:
    topic = unique_topic("raw-off")
    ck_create_topic(broker.bootstrap, topic, partitions=3)
    group = unique_topic("raw-simple")
    committed = commit(
        client,
        2,
        group,
        topic,
        member_id="",
        generation_id_or_member_epoch=-1,
        retention_time_ms=-1,
        partitions=[(0, 5, "five"), (1, 6, None), (9, 1, None)],
    )
    assert [p.error_code for p in committed.topics[0].partitions] == [
        0,
        0,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    Fetch = request_class(ApiKey.OFFSET_FETCH)
    v1 = client.call(
        ApiKey.OFFSET_FETCH,
        1,
        group_id=group,
        topics=[Fetch.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1, 2])],
    )
    assert [(p.committed_offset, p.metadata) for p in v1.topics[0].partitions] == [
        (5, "five"),
        (6, ""),
        (-1, ""),
    ]
    v7_all = client.call(ApiKey.OFFSET_FETCH, 7, group_id=group, topics=None, require_stable=True)
    assert v7_all.error_code == 0
    assert sorted((p.partition_index, p.committed_offset) for p in v7_all.topics[0].partitions) == [
        (0, 5),
        (1, 6),
    ]
    v8 = client.call(
        ApiKey.OFFSET_FETCH,
        8,
        groups=[
            Fetch.OffsetFetchRequestGroup(group_id=group, topics=None),
            Fetch.OffsetFetchRequestGroup(
                group_id="never-seen",
                topics=[Fetch.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])],
            ),
        ],
    )
    assert [g.group_id for g in v8.groups] == [group, "never-seen"]
    assert len(v8.groups[0].topics[0].partitions) == 2
    unknown = v8.groups[1].topics[0].partitions[0]
    assert (unknown.committed_offset, unknown.error_code, v8.groups[1].error_code) == (-1, 0, 0)
    # A member-less commit with a generation to a group nobody created.
    stray = commit(
        client,
        8,
        unique_topic("raw-none"),
        topic,
        member_id="m",
        generation_id_or_member_epoch=3,
        partitions=[(0, 1, None)],
    )
    assert stray.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION


def test_member_commits_list_describe_delete(client: RawClient, broker: BrokerProcess) -> None:
    topic = unique_topic("raw-mem")
    ck_create_topic(broker.bootstrap, topic, partitions=2)
    group = unique_topic("raw-member")
    member, generation = stable_member(client, group, topic)
    ok = commit(
        client,
        6,
        group,
        topic,
        member_id=member,
        generation_id_or_member_epoch=generation,
        partitions=[(0, 1, None), (1, 2, None)],
    )
    assert [p.error_code for p in ok.topics[0].partitions] == [0, 0]
    wrong = commit(
        client,
        6,
        group,
        topic,
        member_id="intruder",
        generation_id_or_member_epoch=generation,
        partitions=[(0, 1, None)],
    )
    assert wrong.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID

    described = client.call(ApiKey.DESCRIBE_GROUPS, 5, groups=[group, "raw-missing"])
    found, missing = described.groups
    assert (found.group_state, found.protocol_type, found.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    [m] = found.members
    assert (m.member_id, m.client_id, m.member_assignment) == (member, "raw-client", b"A")
    assert m.client_host == "/127.0.0.1"
    assert missing.group_state == "Dead" and missing.error_code == 0
    v6 = client.call(ApiKey.DESCRIBE_GROUPS, 6, groups=["raw-missing"])
    assert v6.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND

    stable = client.call(ApiKey.LIST_GROUPS, 4, states_filter=["stable"])
    assert group in {g.group_id for g in stable.groups}
    empty = client.call(ApiKey.LIST_GROUPS, 4, states_filter=["Empty"])
    assert group not in {g.group_id for g in empty.groups}
    typed = client.call(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["consumer"])
    assert typed.groups == []
    classic = client.call(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["classic"])
    assert group in {g.group_id for g in classic.groups}

    Delete = request_class(ApiKey.OFFSET_DELETE)
    subscribed = client.call(
        ApiKey.OFFSET_DELETE,
        0,
        group_id=group,
        topics=[
            Delete.OffsetDeleteRequestTopic(
                name=topic, partitions=[Delete.OffsetDeleteRequestPartition(partition_index=0)]
            )
        ],
    )
    assert subscribed.topics[0].partitions[0].error_code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    refused = client.call(ApiKey.DELETE_GROUPS, 2, groups_names=[group])
    assert refused.results[0].error_code == ErrorCode.NON_EMPTY_GROUP

    client.call(ApiKey.LEAVE_GROUP, 1, group_id=group, member_id=member)
    deleted = client.call(
        ApiKey.OFFSET_DELETE,
        0,
        group_id=group,
        topics=[
            Delete.OffsetDeleteRequestTopic(
                name=topic, partitions=[Delete.OffsetDeleteRequestPartition(partition_index=0)]
            )
        ],
    )
    assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
    gone = client.call(ApiKey.DELETE_GROUPS, 2, groups_names=[group, "raw-missing"])
    assert [r.error_code for r in gone.results] == [0, ErrorCode.GROUP_ID_NOT_FOUND]


def test_group_metrics(client: RawClient, broker: BrokerProcess) -> None:
    topic = unique_topic("raw-metrics")
    ck_create_topic(broker.bootstrap, topic, partitions=1)
    assert_delivered(ck_produce(broker.bootstrap, topic, make_messages(5)))
    group = unique_topic("raw-metrics-g")
    member, generation = stable_member(client, group, topic)
    commit(
        client,
        8,
        group,
        topic,
        member_id=member,
        generation_id_or_member_epoch=generation,
        partitions=[(0, 2, None)],
    )
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=20) as response:
        text = response.read().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("kafka_coordinator_group_group_members", (("group", group),))] == 1
    assert samples[("kafka_coordinator_group_group_generation", (("group", group),))] == generation
    assert (
        samples[("kafka_coordinator_group_group_state", (("group", group), ("state", "Stable")))]
        == 1
    )
    labels = (("group", group), ("partition", "0"), ("topic", topic))
    assert samples[("kafka_coordinator_group_group_committedoffset", labels)] == 2
    assert samples[("kafka_coordinator_group_group_lag", labels)] == 3
    rebalances = ("kafka_coordinator_group_group_rebalances_total", (("group", group),))
    assert samples[rebalances] == 1


def test_deleting_a_topic_drops_its_committed_offsets(
    client: RawClient, broker: BrokerProcess
) -> None:
    topic = unique_topic("raw-deleted")
    ck_create_topic(broker.bootstrap, topic, partitions=1)
    group = unique_topic("raw-deleted-g")
    commit(
        client,
        8,
        group,
        topic,
        member_id="",
        generation_id_or_member_epoch=-1,
        partitions=[(0, 4, None)],
    )
    admin = ck_admin(broker.bootstrap)
    admin.delete_topics([topic])[topic].result(20)
    everything = client.call(ApiKey.OFFSET_FETCH, 7, group_id=group, topics=None)
    assert everything.topics == []
