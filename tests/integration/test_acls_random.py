"""Randomized ACL sets against one real broker, each answer checked against a reference model.

Each round (seeded; JOSEFKTEST_ACL_SEED picks another seed) the super user replaces the ACLs
with a random set through DeleteAcls/CreateAcls; a random principal (alice, bob or carol,
authenticated with SASL PLAIN on a raw connection) then issues a request of every API the
authorizer guards. The model below, written from Kafka's documentation of its standard
authorizer and of "Operations and Resources on Protocols" and importing nothing of josefk's
authorizer, predicts for each request either the authorization error or "allowed"; an allowed
request may fail for other reasons (an unknown member, a producer id) but never with an
*_AUTHORIZATION_FAILED code. After each round the super user checks that refused requests
changed nothing (log end offsets, committed offsets, topics, configs) and allowed ones did.
The counts of allowed and denied answers per API are printed.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acl_requests import acl_creation, acl_filter
from raw_client import RawClient, produce_one
from sasl_broker import SaslBroker
from test_acls import raw_as, start_acl_broker

from josefk.protocol.api import ApiKey, request_class

pytestmark = pytest.mark.timeout(180)

ROUNDS = 150
USERS = ("alice", "bob", "carol")
HOST = "127.0.0.1"

# Kafka's wire codes, written out here so the model shares nothing with josefk's code.
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
DENY, ALLOW = 2, 3
AUTH_ERRORS = {29, 30, 31, 53}  # TOPIC_, GROUP_, CLUSTER_, TRANSACTIONAL_ID_AUTHORIZATION_FAILED
OPS_OF = {
    TOPIC: [READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS],
    GROUP: [READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS],  # Kafka 4: group configs
    CLUSTER: [
        CREATE,
        CLUSTER_ACTION,
        DESCRIBE_CONFIGS,
        ALTER_CONFIGS,
        IDEMPOTENT_WRITE,
        ALTER,
        DESCRIBE,
    ],
    TXN: [DESCRIBE, WRITE],
}
NAMES = {
    TOPIC: ["t0", "t1", "*"],
    GROUP: ["g0", "g1", "*"],
    CLUSTER: ["kafka-cluster"],
    TXN: ["x0", "*"],
}
PREFIXES = {TOPIC: ["t", "t0", "new", "auto"], GROUP: ["g"], TXN: ["x"]}


@dataclass(frozen=True)
class Acl:
    rtype: int
    name: str
    pattern: int
    principal: str
    host: str
    op: int
    permission: int


class Model:
    """Kafka's documented rules: super users pass; DENY (op or ALL) wins; ALLOW by op, ALL or
    an implying op (READ/WRITE/DELETE/ALTER -> DESCRIBE, ALTER_CONFIGS -> DESCRIBE_CONFIGS);
    no ACL on the resource means denied (allow.everyone.if.no.acl.found=false)."""

    IMPLIES = {DESCRIBE: {READ, WRITE, DELETE, ALTER}, DESCRIBE_CONFIGS: {ALTER_CONFIGS}}

    def __init__(self, acls: list[Acl]) -> None:
        self.acls = acls

    def allowed(self, principal: str, op: int, rtype: int, name: str) -> bool:
        on_resource = [
            a
            for a in self.acls
            if a.rtype == rtype
            and (
                (a.pattern == LITERAL and a.name in (name, "*"))
                or (a.pattern == PREFIXED and name.startswith(a.name))
            )
        ]
        applying = [
            a for a in on_resource if a.principal in (principal, "User:*") and a.host in (HOST, "*")
        ]
        if any(a.permission == DENY and a.op in (op, ALL) for a in applying):
            return False
        return any(
            a.permission == ALLOW and (a.op in (op, ALL) or a.op in self.IMPLIES.get(op, ()))
            for a in applying
        )

    def cluster(self, principal: str, op: int) -> bool:
        return self.allowed(principal, op, CLUSTER, "kafka-cluster")

    def bits(self, principal: str, rtype: int, name: str) -> int:
        return sum(1 << op for op in OPS_OF[rtype] if self.allowed(principal, op, rtype, name))

    def any_topic_write(self, principal: str) -> bool:
        names = {"never-named"} | {a.name for a in self.acls if a.rtype == TOPIC}
        names |= {a.name + "-more" for a in self.acls if a.rtype == TOPIC and a.pattern == PREFIXED}
        return any(self.allowed(principal, WRITE, TOPIC, n) for n in names)


def random_acls(rng: random.Random, user: str) -> list[Acl]:
    """Up to 16 ACLs, most for the round's user or everyone, so both answers come often."""
    acls = []
    others = [f"User:{u}" for u in USERS if u != user]
    for _ in range(rng.randint(0, 16)):
        rtype = rng.choice([TOPIC, TOPIC, GROUP, CLUSTER, TXN])
        if rtype != CLUSTER and rng.random() < 0.3:
            pattern, name = PREFIXED, rng.choice(PREFIXES[rtype])
        else:
            pattern, name = LITERAL, rng.choice(NAMES[rtype])
        acls.append(
            Acl(
                rtype,
                name,
                pattern,
                rng.choice([f"User:{user}"] * 3 + ["User:*"] * 2 + others),
                rng.choice(["*", "*", HOST, "10.0.0.9"]),
                rng.choice([ALL, *OPS_OF[rtype]]),
                DENY if rng.random() < 0.25 else ALLOW,
            )
        )
    return acls


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    started = start_acl_broker(tmp_path_factory.mktemp("josefk-acl-random"))
    yield started
    started.stop()


class Outcomes:
    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()

    def check(self, api: str, expect_error: int | None, got: int, detail: str = "") -> None:
        """``expect_error`` None: allowed (no authorization error); else that exact code."""
        if expect_error is None:
            assert got not in AUTH_ERRORS, f"{api}: allowed by the model, refused {got} {detail}"
            self.counts[(api, "allowed")] += 1
        else:
            assert got == expect_error, f"{api}: model says {expect_error}, got {got} {detail}"
            self.counts[(api, "denied")] += 1


def test_random_acls_match_the_reference_model(broker: SaslBroker, tmp_path: Path) -> None:
    seed = int(os.environ.get("JOSEFKTEST_ACL_SEED", "19"))
    rng = random.Random(seed)
    admin = RawClient(broker.plaintext)  # User:ANONYMOUS: a super user here
    for topic in ("t0", "t1"):
        create_topic(admin, topic)
    outcomes = Outcomes()
    expected_t0_end = 0
    expected_commit = -1
    try:
        for round_no in range(ROUNDS):
            user = rng.choice(USERS)
            acls = random_acls(rng, user)
            replace_acls(admin, acls)
            model = Model(acls)
            principal = f"User:{user}"
            client = raw_as(broker, user)
            try:
                doomed = f"doomed{round_no}"
                create_topic(admin, doomed)
                probes = Probes(client, model, principal, outcomes, round_no)
                wrote, committed = probes.run(doomed)
            finally:
                client.close()
            expected_t0_end += wrote
            if committed:
                expected_commit = round_no
            assert_state(
                admin, model, principal, round_no, doomed, expected_t0_end, expected_commit
            )
    finally:
        admin.close()
    lines = [f"seed {seed}, {ROUNDS} rounds"]
    for api in sorted({api for api, _ in outcomes.counts}):
        lines.append(
            f"  {api:28} allowed {outcomes.counts[(api, 'allowed')]:3}"
            f"  denied {outcomes.counts[(api, 'denied')]:3}"
        )
    print("\n".join(lines))
    assert sum(outcomes.counts.values()) >= ROUNDS * 20


def replace_acls(admin: RawClient, acls: list[Acl]) -> None:
    deleted = admin.call(
        ApiKey.DELETE_ACLS,
        3,
        filters=[request_class(ApiKey.DELETE_ACLS).DeleteAclsFilter(**acl_filter())],
    )
    assert deleted.filter_results[0].error_code == 0
    if not acls:
        return
    created = admin.call(
        ApiKey.CREATE_ACLS,
        3,
        creations=[
            acl_creation(a.rtype, a.name, a.pattern, a.principal, a.op, a.permission, a.host)
            for a in acls
        ],
    )
    assert [r.error_code for r in created.results] == [0] * len(acls)


def create_topics_answer(client: RawClient, name: str) -> Any:
    """CreateTopics of ``name``: one partition, one replica."""
    return client.call(
        ApiKey.CREATE_TOPICS,
        7,
        topics=[
            request_class(ApiKey.CREATE_TOPICS).CreatableTopic(
                name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[]
            )
        ],
        timeout_ms=10000,
        validate_only=False,
    )


def create_topic(admin: RawClient, name: str) -> None:
    assert create_topics_answer(admin, name).topics[0].error_code == 0


def list_offsets_answer(client: RawClient, topic: str) -> Any:
    """ListOffsets of partition 0's log end offset."""
    req = request_class(ApiKey.LIST_OFFSETS)
    return client.call(
        ApiKey.LIST_OFFSETS,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=[
            req.ListOffsetsTopic(
                name=topic,
                partitions=[
                    req.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-1
                    )
                ],
            )
        ],
    )


def offset_fetch_answer(client: RawClient, group: str, topic: str) -> Any:
    """OffsetFetch of ``group``'s committed offset of partition 0 of ``topic``."""
    req = request_class(ApiKey.OFFSET_FETCH)
    return client.call(
        ApiKey.OFFSET_FETCH,
        8,
        groups=[
            req.OffsetFetchRequestGroup(
                group_id=group,
                topics=[
                    req.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                        name=topic, partition_indexes=[0]
                    )
                ],
            )
        ],
        require_stable=False,
    )


def topic_names(client: RawClient) -> set[str]:
    metadata = client.call(
        ApiKey.METADATA,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return {t.name for t in metadata.topics}


def assert_state(
    admin: RawClient,
    model: Model,
    principal: str,
    round_no: int,
    doomed: str,
    t0_end: int,
    commit: int,
) -> None:
    """What the super user sees after the round: only allowed requests changed anything
    (topics created by CreateTopics and by Metadata's auto-creation, a deleted topic, the log
    end offset of t0, g0's committed offset, t1's retention.ms)."""
    offsets = list_offsets_answer(admin, "t0")
    assert offsets.topics[0].partitions[0].offset == t0_end
    fetched = offset_fetch_answer(admin, "g0", "t0")
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == commit
    names = topic_names(admin)
    for created, described in ((f"new{round_no}", True), (f"auto{round_no}", False)):
        may_create = model.cluster(principal, CREATE) or model.allowed(
            principal, CREATE, TOPIC, created
        )
        if not described:  # auto-creation by Metadata also needs DESCRIBE on the topic
            may_create = may_create and model.allowed(principal, DESCRIBE, TOPIC, created)
        assert (created in names) == may_create, created
    assert (doomed in names) != model.allowed(principal, DELETE, TOPIC, doomed)
    configs = admin.call(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        resources=[
            request_class(ApiKey.DESCRIBE_CONFIGS).DescribeConfigsResource(
                resource_type=2, resource_name="t1", configuration_keys=["retention.ms"]
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    value = configs.results[0].configs[0].value
    if model.allowed(principal, ALTER_CONFIGS, TOPIC, "t1"):
        assert value == str(1_000_000 + round_no)
    else:
        assert value != str(1_000_000 + round_no)


def first_denial(*checks: tuple[bool, int]) -> int | None:
    """The error of the first check, in Kafka's order, that the model denies; None if all
    pass."""
    return next((code for allowed, code in checks if not allowed), None)


class Probes:
    """One request of each guarded API, as ``principal``, checked against the model."""

    def __init__(
        self, client: RawClient, model: Model, principal: str, outcomes: Outcomes, round_no: int
    ) -> None:
        self.client = client
        self.model = model
        self.principal = principal
        self.out = outcomes
        self.round = round_no

    def allow(self, op: int, rtype: int, name: str) -> bool:
        return self.model.allowed(self.principal, op, rtype, name)

    def cluster(self, op: int) -> bool:
        return self.model.cluster(self.principal, op)

    def call(self, api: ApiKey, version: int, **fields: Any) -> Any:
        return self.client.call(api, version, **fields)

    def run(self, doomed: str) -> tuple[int, bool]:
        steps: list[Callable[[], Any]] = [
            self.metadata,
            self.fetch,
            self.list_offsets,
            self.find_coordinator,
            self.offset_fetch,
            self.describe_groups,
            self.list_groups,
            self.join_heartbeat_delete_group,
            self.create_topics,
            lambda: self.delete_topics(doomed),
            self.describe_and_alter_configs,
            self.init_producer_id,
            self.transactions,
            self.cluster_apis,
            self.acl_apis,
            self.delete_records_and_partitions,
            self.describe_producers,
        ]
        wrote = self.produce()
        committed = self.offset_commit()
        for step in steps:
            step()
        return wrote, committed

    def produce(self) -> int:
        ok = self.allow(WRITE, TOPIC, "t0")
        got = produce_one(self.client, "t0")
        self.out.check("Produce", None if ok else 29, got)
        if ok:
            assert got == 0
        return 1 if ok else 0

    def offset_commit(self) -> bool:
        req = request_class(ApiKey.OFFSET_COMMIT)
        answer = self.call(
            ApiKey.OFFSET_COMMIT,
            8,
            group_id="g0",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                req.OffsetCommitRequestTopic(
                    name="t0",
                    partitions=[
                        req.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=self.round,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                    ],
                )
            ],
        )
        expect = first_denial(
            (self.allow(READ, GROUP, "g0"), 30), (self.allow(READ, TOPIC, "t0"), 29)
        )
        got = answer.topics[0].partitions[0].error_code
        self.out.check("OffsetCommit", expect, got)
        return expect is None and got == 0

    def metadata(self) -> None:
        req = request_class(ApiKey.METADATA)
        answer = self.call(
            ApiKey.METADATA,
            10,
            topics=[
                req.MetadataRequestTopic(name="t0"),
                req.MetadataRequestTopic(name="t1"),
            ],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True,
            include_topic_authorized_operations=True,
        )
        for topic in answer.topics:
            ok = self.allow(DESCRIBE, TOPIC, topic.name)
            self.out.check("Metadata", None if ok else 29, topic.error_code, topic.name)
            if ok:
                assert topic.topic_authorized_operations == self.model.bits(
                    self.principal, TOPIC, topic.name
                )
        expected_cluster = (
            self.model.bits(self.principal, CLUSTER, "kafka-cluster")
            if self.cluster(DESCRIBE)
            else 0
        )
        assert answer.cluster_authorized_operations == expected_cluster
        listed = topic_names(self.client)
        for name in ("t0", "t1", "__consumer_offsets"):
            assert (name in listed) == self.allow(DESCRIBE, TOPIC, name), name
        # Auto-creation needs CREATE (on the cluster or the topic) besides DESCRIBE.
        name = f"auto{self.round}"
        auto = self.call(
            ApiKey.METADATA,
            10,
            topics=[req.MetadataRequestTopic(name=name)],
            allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        ok = self.allow(DESCRIBE, TOPIC, name) and (
            self.cluster(CREATE) or self.allow(CREATE, TOPIC, name)
        )
        self.out.check("Metadata(auto-create)", None if ok else 29, auto.topics[0].error_code)

    def fetch_t0(self, replica_id: int) -> Any:
        req = request_class(ApiKey.FETCH)
        return self.call(
            ApiKey.FETCH,
            12,
            replica_id=replica_id,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                req.FetchTopic(
                    topic="t0",
                    partitions=[
                        req.FetchTopic.FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )

    def fetch(self) -> None:
        ok = self.allow(READ, TOPIC, "t0")
        data = self.fetch_t0(replica_id=-1).responses[0].partitions[0]
        self.out.check("Fetch", None if ok else 29, data.error_code)
        if not ok:
            assert not data.records
        # A follower's fetch needs CLUSTER_ACTION.
        follower = self.fetch_t0(replica_id=7)
        ok = self.cluster(CLUSTER_ACTION)
        self.out.check(
            "Fetch(follower)", None if ok else 29, follower.responses[0].partitions[0].error_code
        )

    def list_offsets(self) -> None:
        answer = list_offsets_answer(self.client, "t1")
        ok = self.allow(DESCRIBE, TOPIC, "t1")
        self.out.check("ListOffsets", None if ok else 29, answer.topics[0].partitions[0].error_code)

    def find_coordinator(self) -> None:
        for key_type, key, rtype, code in ((0, "g0", GROUP, 30), (1, "x0", TXN, 53)):
            answer = self.call(
                ApiKey.FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=[key]
            )
            ok = self.allow(DESCRIBE, rtype, key)
            self.out.check(
                f"FindCoordinator({key_type})",
                None if ok else code,
                answer.coordinators[0].error_code,
            )

    def offset_fetch(self) -> None:
        group = offset_fetch_answer(self.client, "g0", "t0").groups[0]
        if not self.allow(DESCRIBE, GROUP, "g0"):
            self.out.check("OffsetFetch", 30, group.error_code)
            return
        assert group.error_code == 0
        ok = self.allow(DESCRIBE, TOPIC, "t0")
        self.out.check("OffsetFetch", None if ok else 29, group.topics[0].partitions[0].error_code)

    def describe_groups(self) -> None:
        answer = self.call(
            ApiKey.DESCRIBE_GROUPS, 5, groups=["g0"], include_authorized_operations=True
        )
        group = answer.groups[0]
        ok = self.allow(DESCRIBE, GROUP, "g0")
        self.out.check("DescribeGroups", None if ok else 30, group.error_code)
        if ok:
            assert group.authorized_operations == self.model.bits(self.principal, GROUP, "g0")

    def list_groups(self) -> None:
        answer = self.call(ApiKey.LIST_GROUPS, 4, states_filter=[])
        listed = {g.group_id for g in answer.groups}
        visible = self.cluster(DESCRIBE) or self.allow(DESCRIBE, GROUP, "g0")
        # g0 exists once a commit was allowed in some round; only its absence when hidden is sure.
        if not visible:
            assert "g0" not in listed
        self.out.check("ListGroups", None, answer.error_code)

    def join_heartbeat_delete_group(self) -> None:
        join = self.call(
            ApiKey.JOIN_GROUP,
            5,
            group_id="g1",
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[
                request_class(ApiKey.JOIN_GROUP).JoinGroupRequestProtocol(
                    name="range", metadata=b""
                )
            ],
        )
        ok = self.allow(READ, GROUP, "g1")
        self.out.check("JoinGroup", None if ok else 30, join.error_code)
        beat = self.call(
            ApiKey.HEARTBEAT,
            4,
            group_id="g1",
            generation_id=1,
            member_id="nobody",
            group_instance_id=None,
        )
        self.out.check("Heartbeat", None if ok else 30, beat.error_code)
        sync = self.call(
            ApiKey.SYNC_GROUP,
            5,
            group_id="g1",
            generation_id=1,
            member_id="nobody",
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[],
        )
        self.out.check("SyncGroup", None if ok else 30, sync.error_code)
        deleted = self.call(ApiKey.DELETE_GROUPS, 2, groups_names=["g1"])
        ok = self.allow(DELETE, GROUP, "g1")
        self.out.check("DeleteGroups", None if ok else 30, deleted.results[0].error_code)

    def create_topics(self) -> None:
        name = f"new{self.round}"
        answer = create_topics_answer(self.client, name)
        ok = self.cluster(CREATE) or self.allow(CREATE, TOPIC, name)
        created = answer.topics[0]
        self.out.check("CreateTopics", None if ok else 29, created.error_code)
        if ok:
            # The new topic's configs only for a principal that may DESCRIBE_CONFIGS it.
            shown = self.allow(DESCRIBE_CONFIGS, TOPIC, name)
            assert (created.configs is not None) == shown
            assert created.topic_config_error_code == (0 if shown else 29)

    def delete_topics(self, doomed: str) -> None:
        answer = self.call(ApiKey.DELETE_TOPICS, 5, topic_names=[doomed], timeout_ms=10000)
        ok = self.allow(DELETE, TOPIC, doomed)
        self.out.check("DeleteTopics", None if ok else 29, answer.responses[0].error_code)

    def describe_and_alter_configs(self) -> None:
        cls = request_class(ApiKey.DESCRIBE_CONFIGS)
        answer = self.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[
                cls.DescribeConfigsResource(
                    resource_type=2, resource_name="t1", configuration_keys=None
                ),
                cls.DescribeConfigsResource(
                    resource_type=4, resource_name="1", configuration_keys=None
                ),
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        ok = self.allow(DESCRIBE_CONFIGS, TOPIC, "t1")
        self.out.check("DescribeConfigs(topic)", None if ok else 29, answer.results[0].error_code)
        ok = self.cluster(DESCRIBE_CONFIGS)
        self.out.check("DescribeConfigs(broker)", None if ok else 31, answer.results[1].error_code)
        alter = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
        answer = self.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                alter.AlterConfigsResource(
                    resource_type=2,
                    resource_name="t1",
                    configs=[
                        alter.AlterConfigsResource.AlterableConfig(
                            name="retention.ms",
                            config_operation=0,
                            value=str(1_000_000 + self.round),
                        )
                    ],
                )
            ],
            validate_only=False,
        )
        ok = self.allow(ALTER_CONFIGS, TOPIC, "t1")
        self.out.check(
            "IncrementalAlterConfigs", None if ok else 29, answer.responses[0].error_code
        )

    def init_producer_id(self) -> None:
        answer = self.call(
            ApiKey.INIT_PRODUCER_ID,
            4,
            transactional_id="x0",
            transaction_timeout_ms=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        ok = self.allow(WRITE, TXN, "x0")
        self.out.check("InitProducerId(txn)", None if ok else 53, answer.error_code)
        answer = self.call(
            ApiKey.INIT_PRODUCER_ID,
            4,
            transactional_id=None,
            transaction_timeout_ms=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        ok = self.cluster(IDEMPOTENT_WRITE) or self.model.any_topic_write(self.principal)
        self.out.check("InitProducerId(idempotent)", None if ok else 31, answer.error_code)

    def transactions(self) -> None:
        add = request_class(ApiKey.ADD_PARTITIONS_TO_TXN)
        answer = self.call(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            v3_and_below_transactional_id="x0",
            v3_and_below_producer_id=999999,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=[add.AddPartitionsToTxnTopic(name="t1", partitions=[0])],
        )
        got = answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        expect = first_denial(
            (self.allow(WRITE, TXN, "x0"), 53), (self.allow(WRITE, TOPIC, "t1"), 29)
        )
        self.out.check("AddPartitionsToTxn", expect, got)
        answer = self.call(
            ApiKey.ADD_OFFSETS_TO_TXN,
            3,
            transactional_id="x0",
            producer_id=999999,
            producer_epoch=0,
            group_id="g0",
        )
        expect = first_denial(
            (self.allow(WRITE, TXN, "x0"), 53), (self.allow(READ, GROUP, "g0"), 30)
        )
        self.out.check("AddOffsetsToTxn", expect, answer.error_code)
        answer = self.call(
            ApiKey.END_TXN,
            3,
            transactional_id="x0",
            producer_id=999999,
            producer_epoch=0,
            committed=False,
        )
        self.out.check("EndTxn", None if self.allow(WRITE, TXN, "x0") else 53, answer.error_code)
        commit = request_class(ApiKey.TXN_OFFSET_COMMIT)
        answer = self.call(
            ApiKey.TXN_OFFSET_COMMIT,
            3,
            transactional_id="x0",
            group_id="g0",
            producer_id=999999,
            producer_epoch=0,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                commit.TxnOffsetCommitRequestTopic(
                    name="t0",
                    partitions=[
                        commit.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=5,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                    ],
                )
            ],
        )
        expect = first_denial(
            (self.allow(WRITE, TXN, "x0"), 53),
            (self.allow(READ, GROUP, "g0"), 30),
            (self.allow(READ, TOPIC, "t0"), 29),
        )
        self.out.check("TxnOffsetCommit", expect, answer.topics[0].partitions[0].error_code)
        described = self.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=["x0"])
        ok = self.allow(DESCRIBE, TXN, "x0")
        self.out.check(
            "DescribeTransactions", None if ok else 53, described.transaction_states[0].error_code
        )
        listed = self.call(ApiKey.LIST_TRANSACTIONS, 0, state_filters=[], producer_id_filters=[])
        if not ok:
            assert "x0" not in {s.transactional_id for s in listed.transaction_states}
        markers = request_class(ApiKey.WRITE_TXN_MARKERS)
        answer = self.call(
            ApiKey.WRITE_TXN_MARKERS,
            1,
            markers=[
                markers.WritableTxnMarker(
                    producer_id=999999,
                    producer_epoch=0,
                    transaction_result=False,
                    topics=[
                        markers.WritableTxnMarker.WritableTxnMarkerTopic(
                            name="no-such-topic", partition_indexes=[0]
                        )
                    ],
                    coordinator_epoch=0,
                )
            ],
        )
        got = answer.markers[0].topics[0].partitions[0].error_code
        self.out.check("WriteTxnMarkers", None if self.cluster(CLUSTER_ACTION) else 31, got)

    def cluster_apis(self) -> None:
        answer = self.call(
            ApiKey.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True, endpoint_type=1
        )
        expected = (
            self.model.bits(self.principal, CLUSTER, "kafka-cluster")
            if self.cluster(DESCRIBE)
            else 0
        )
        assert answer.cluster_authorized_operations == expected
        self.out.check("DescribeCluster", None, answer.error_code)
        answer = self.call(ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None)
        self.out.check("DescribeLogDirs", None if self.cluster(DESCRIBE) else 31, answer.error_code)
        answer = self.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=None)
        self.out.check(
            "DescribeUserScramCredentials",
            None if self.cluster(DESCRIBE) else 31,
            answer.error_code,
        )
        answer = self.call(
            ApiKey.ELECT_LEADERS, 2, election_type=0, topic_partitions=[], timeout_ms=1000
        )
        self.out.check("ElectLeaders", None if self.cluster(ALTER) else 31, answer.error_code)
        answer = self.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, timeout_ms=1000, topics=None)
        self.out.check(
            "ListPartitionReassignments", None if self.cluster(DESCRIBE) else 31, answer.error_code
        )

    def acl_apis(self) -> None:
        answer = self.call(ApiKey.DESCRIBE_ACLS, 3, **acl_filter())
        self.out.check("DescribeAcls", None if self.cluster(DESCRIBE) else 31, answer.error_code)
        harmless = acl_creation(TOPIC, "zz-unused", LITERAL, "User:nobody", READ, ALLOW)
        answer = self.call(ApiKey.CREATE_ACLS, 3, creations=[harmless])
        self.out.check(
            "CreateAcls", None if self.cluster(ALTER) else 31, answer.results[0].error_code
        )
        unused = acl_filter(
            resource_type_filter=TOPIC,
            resource_name_filter="zz-unused",
            pattern_type_filter=LITERAL,
        )
        answer = self.call(
            ApiKey.DELETE_ACLS,
            3,
            filters=[request_class(ApiKey.DELETE_ACLS).DeleteAclsFilter(**unused)],
        )
        self.out.check(
            "DeleteAcls", None if self.cluster(ALTER) else 31, answer.filter_results[0].error_code
        )

    def delete_records_and_partitions(self) -> None:
        req = request_class(ApiKey.DELETE_RECORDS)
        answer = self.call(
            ApiKey.DELETE_RECORDS,
            2,
            timeout_ms=1000,
            topics=[
                req.DeleteRecordsTopic(
                    name="t1",
                    partitions=[
                        req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=0)
                    ],
                )
            ],
        )
        self.out.check(
            "DeleteRecords",
            None if self.allow(DELETE, TOPIC, "t1") else 29,
            answer.topics[0].partitions[0].error_code,
        )
        req = request_class(ApiKey.CREATE_PARTITIONS)
        answer = self.call(
            ApiKey.CREATE_PARTITIONS,
            3,
            timeout_ms=1000,
            validate_only=False,
            topics=[req.CreatePartitionsTopic(name="t1", count=1, assignments=None)],
        )
        self.out.check(
            "CreatePartitions",
            None if self.allow(ALTER, TOPIC, "t1") else 29,
            answer.results[0].error_code,
        )
        req = request_class(ApiKey.OFFSET_DELETE)
        answer = self.call(
            ApiKey.OFFSET_DELETE,
            0,
            group_id="g1",
            topics=[
                req.OffsetDeleteRequestTopic(
                    name="t1",
                    partitions=[
                        req.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)
                    ],
                )
            ],
        )
        if not self.allow(DELETE, GROUP, "g1"):
            self.out.check("OffsetDelete", 30, answer.error_code)
        elif answer.error_code == 0:
            expect = None if self.allow(READ, TOPIC, "t1") else 29
            self.out.check("OffsetDelete", expect, answer.topics[0].partitions[0].error_code)
        else:
            self.out.check("OffsetDelete", None, answer.error_code)

    def describe_producers(self) -> None:
        req = request_class(ApiKey.DESCRIBE_PRODUCERS)
        answer = self.call(
            ApiKey.DESCRIBE_PRODUCERS,
            0,
            topics=[req.TopicRequest(name="t0", partition_indexes=[0])],
        )
        self.out.check(
            "DescribeProducers",
            None if self.allow(READ, TOPIC, "t0") else 29,
            answer.topics[0].partitions[0].error_code,
        )
