"""ACLs in a cluster live in etcd (``P/acls``): one created through one broker takes effect on
the others, which learn it by watch, and so does its deletion.

The brokers run the authorizer with ``allow.everyone.if.no.acl.found=true`` so that the
PLAINTEXT principal (User:ANONYMOUS, also the brokers' own between themselves) may do what no
ACL speaks of; a DENY of WRITE on one topic, created through broker 1, must then refuse a
produce served by the other broker, the topic's only replica.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_requests import acl_creation, acl_filter
from cluster_process import LocalCluster, wait_for
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD, SKIP_REASON
from raw_client import RawClient, produce_one

from josefk.protocol.api import ApiKey, request_class

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]

TOPIC_AUTHORIZATION_FAILED = 29


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path,
        brokers=2,
        settings=[
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found=true",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
        ],
    ) as running:
        yield running


# Every ACL of the topic ``guarded``.
GUARDED = acl_filter(resource_type_filter=2, resource_name_filter="guarded", pattern_type_filter=3)


def _described(client: RawClient) -> list[tuple[str, str, int, int]]:
    answer = client.call(ApiKey.DESCRIBE_ACLS, 3, **GUARDED)
    assert answer.error_code == 0
    return [
        (r.resource_name, a.principal, a.operation, a.permission_type)
        for r in answer.resources
        for a in r.acls
    ]


def test_an_acl_made_on_one_broker_takes_effect_on_another(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    futures = admin.create_topics([NewTopic("guarded", num_partitions=1, replication_factor=1)])
    futures["guarded"].result(timeout=60)
    leader = wait_for(
        "a leader for guarded",
        lambda: cluster.leader_of("guarded", 0) > 0 and cluster.leader_of("guarded", 0),
    )
    other = 1 if leader == 2 else 2
    # ``one`` is where the ACLs are made, ``two`` serves the topic.
    one = RawClient(cluster.brokers[other].bootstrap)
    two = RawClient(cluster.brokers[leader].bootstrap)
    try:
        wait_for("the leader takes writes", lambda: produce_one(two, "guarded") == 0)

        deny_write = acl_creation(2, "guarded", 3, "User:ANONYMOUS", operation=4, permission=2)
        created = one.call(ApiKey.CREATE_ACLS, 3, creations=[deny_write])
        assert [r.error_code for r in created.results] == [0]
        wait_for(
            "the leader refuses the write",
            lambda: produce_one(two, "guarded") == TOPIC_AUTHORIZATION_FAILED,
        )
        assert _described(two) == [("guarded", "User:ANONYMOUS", 4, 2)]

        deleted = two.call(
            ApiKey.DELETE_ACLS,
            3,
            filters=[request_class(ApiKey.DELETE_ACLS).DeleteAclsFilter(**GUARDED)],
        )
        assert len(deleted.filter_results[0].matching_acls) == 1
        wait_for("the first broker sees the deletion", lambda: _described(one) == [])
        assert produce_one(two, "guarded") == 0
    finally:
        one.close()
        two.close()
