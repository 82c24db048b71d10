"""Topic configs in a cluster live in the topic's etcd record (``P/topics/<name>``): a change
made through one broker (AlterConfigs, IncrementalAlterConfigs, ``josefk configs alter``) is
answered once stored, described by every broker, applied to every replica's log (a follower
rolls at the new ``segment.bytes``), and survives a broker's restart (which makes the other
brokers apply etcd's metadata again: before the fix, that undid a change only written to one
broker's catalog)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import run_josefk
from cluster_process import LocalCluster, produce_until_rolled, wait_for
from confluent_kafka.admin import NewTopic
from etcd_server import ETCD, SKIP_REASON
from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class

pytestmark = [pytest.mark.timeout(300), pytest.mark.skipif(ETCD is None, reason=SKIP_REASON)]

TOPIC = "configured"
TOPIC_RESOURCE = 2
SET, DELETE = 0, 1
NONE, NOT_LEADER_OR_FOLLOWER, INVALID_CONFIG, UNKNOWN_TOPIC = 0, 6, 40, 3

_Describe = request_class(ApiKey.DESCRIBE_CONFIGS)
_Incremental = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
_Alter = request_class(ApiKey.ALTER_CONFIGS)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path,
        brokers=2,
        settings=[
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
        ],
    ) as running:
        yield running


def described(broker: RawClient, topic: str = TOPIC) -> dict[str, tuple[str | None, int]]:
    """The topic's configs as this one broker describes them: name -> (value, source)."""
    answer = broker.call(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        resources=[
            _Describe.DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=None
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    result = answer.results[0]
    assert result.error_code == NONE, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


def incremental(
    broker: RawClient,
    changes: dict[str, str | None],
    *,
    topic: str = TOPIC,
    validate_only: bool = False,
) -> tuple[int, str | None]:
    answer = broker.call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[
            _Incremental.AlterConfigsResource(
                resource_type=TOPIC_RESOURCE,
                resource_name=topic,
                configs=[
                    _Incremental.AlterConfigsResource.AlterableConfig(
                        name=name,
                        config_operation=SET if value is not None else DELETE,
                        value=value,
                    )
                    for name, value in changes.items()
                ],
            )
        ],
        validate_only=validate_only,
    )
    result = answer.responses[0]
    return int(result.error_code), result.error_message


def value_of(broker: RawClient, name: str) -> str | None:
    return described(broker).get(name, (None, 0))[0]


def josefk_cli(cluster: LocalCluster, *args: str) -> Any:
    return run_josefk(cluster.bootstrap, *args)


def test_a_topic_config_changed_through_one_broker_holds_on_every_broker(
    cluster: LocalCluster,
) -> None:
    admin = cluster.admin()  # held: a collected AdminClient fails its futures
    admin.create_topics([NewTopic(TOPIC, 1, 2)])[TOPIC].result(timeout=60)
    wait_for(
        f"{TOPIC}-0 with both replicas in sync",
        lambda: len(cluster.partition_states(TOPIC)[0][2]) == 2,
    )
    one = RawClient(cluster.brokers[1].bootstrap)
    two = RawClient(cluster.brokers[2].bootstrap)
    try:
        # Refused and validate-only changes store nothing anywhere.
        assert incremental(one, {"segment.bytes": "nonsense"})[0] == INVALID_CONFIG
        assert incremental(one, {"segment.bytes": "1024"}, topic="absent")[0] == UNKNOWN_TOPIC
        assert incremental(one, {"segment.bytes": "1024"}, validate_only=True) == (NONE, None)
        assert value_of(one, "segment.bytes") != "1024"

        assert incremental(one, {"segment.bytes": "1024", "retention.ms": "86400000"}) == (
            NONE,
            None,
        )
        # Answered once stored and applied here; broker 2 learns it from etcd.
        assert value_of(one, "segment.bytes") == "1024"
        dynamic_topic_config = 1  # DescribeConfigs' config_source TOPIC_CONFIG
        wait_for(
            "broker 2 describes the new configs",
            lambda: (
                described(two).get("segment.bytes") == ("1024", dynamic_topic_config)
                and described(two).get("retention.ms") == ("86400000", dynamic_topic_config)
            ),
        )

        leader = cluster.leader_of(TOPIC, 0)
        follower = 2 if leader == 1 else 1
        produce_until_rolled(cluster, TOPIC, (leader, follower))

        # Only the leader deletes records; the follower says so rather than move its own.
        follower_client = one if follower == 1 else two
        deletion = follower_client.call(
            ApiKey.DELETE_RECORDS,
            2,
            topics=[
                request_class(ApiKey.DELETE_RECORDS).DeleteRecordsTopic(
                    name=TOPIC,
                    partitions=[
                        request_class(
                            ApiKey.DELETE_RECORDS
                        ).DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=1)
                    ],
                )
            ],
            timeout_ms=10000,
        )
        assert deletion.topics[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER

        # AlterConfigs replaces the whole set, through broker 2 this time.
        altered = two.call(
            ApiKey.ALTER_CONFIGS,
            2,
            resources=[
                _Alter.AlterConfigsResource(
                    resource_type=TOPIC_RESOURCE,
                    resource_name=TOPIC,
                    configs=[
                        _Alter.AlterConfigsResource.AlterableConfig(
                            name="segment.bytes", value="2048"
                        ),
                        _Alter.AlterConfigsResource.AlterableConfig(
                            name="retention.ms", value="3600000"
                        ),
                    ],
                )
            ],
            validate_only=False,
        )
        assert altered.responses[0].error_code == NONE
        wait_for("broker 1 takes AlterConfigs", lambda: value_of(one, "segment.bytes") == "2048")

        # A restart of one broker makes the other apply etcd's metadata again: the change
        # stays, and the restarted one comes back with it.
        two.close()
        cluster.brokers[2].restart()
        two = RawClient(cluster.brokers[2].bootstrap)
        wait_for(
            f"{TOPIC}-0 in sync again on both",
            lambda: len(cluster.partition_states(TOPIC)[0][2]) == 2,
        )
        for client in (one, two):
            assert value_of(client, "segment.bytes") == "2048"
            assert value_of(client, "retention.ms") == "3600000"

        # josefk's CLI (IncrementalAlterConfigs to whichever broker it picks).
        josefk_cli(
            cluster, "configs", "alter", "--topic", TOPIC, "--add-config", "retention.ms=7200000"
        )
        josefk_cli(
            cluster, "configs", "alter", "--topic", TOPIC, "--delete-config", "segment.bytes"
        )
        for client in (one, two):
            wait_for(
                "both brokers describe the CLI's change",
                lambda c=client: (
                    value_of(c, "retention.ms") == "7200000"
                    and described(c)["segment.bytes"][1] != dynamic_topic_config
                ),
            )
        shown = json.loads(josefk_cli(cluster, "configs", "describe", "--topic", TOPIC, "--json"))
        assert shown["configs"]["retention.ms"]["value"] == "7200000"
    finally:
        one.close()
        two.close()
