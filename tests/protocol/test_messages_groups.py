"""The group and SASL API declarations (OffsetCommit .. OffsetDelete).

Static sanity of every declaration (no compiler needed), the version ranges Kafka 4.x accepts,
the wire shape of the versions that changed it, and, once the compiler is there, byte-for-byte
agreement with kafka-python's and aiokafka's protocol classes on every version they implement.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from josefk.protocol.schema import MessageSpec, array, field, request
from tests.protocol.group_txn_checks import (
    assert_versions_and_discovery,
    check_declaration,
    check_pair,
    kafka_python_classes,
    layout_differences,
    module,
    names_at,
    reference_cases,
    run_reference_case,
)

# module -> (api key, valid versions, flexible versions), as a Kafka 4.x broker accepts them
# (KIP-896 removed OffsetCommit v0-1 and OffsetFetch v0).
VERSIONS = {
    "offset_commit": (8, "2-10", "8+"),
    "offset_fetch": (9, "1-10", "6+"),
    "find_coordinator": (10, "0-6", "3+"),
    "join_group": (11, "0-9", "6+"),
    "heartbeat": (12, "0-4", "4+"),
    "leave_group": (13, "0-5", "4+"),
    "sync_group": (14, "0-5", "4+"),
    "describe_groups": (15, "0-6", "5+"),
    "list_groups": (16, "0-5", "3+"),
    "sasl_handshake": (17, "0-1", "none"),
    "sasl_authenticate": (36, "0-2", "2+"),
    "delete_groups": (42, "0-2", "2+"),
    "offset_delete": (47, "0", "none"),
}


@pytest.mark.parametrize("name", sorted(VERSIONS))
def test_versions_and_discovery(name: str) -> None:
    assert_versions_and_discovery(name, VERSIONS[name])


@pytest.mark.parametrize("name", sorted(VERSIONS))
def test_declaration_is_sound(name: str) -> None:
    mod = module(name)
    problems = check_pair(mod.REQUEST, mod.RESPONSE)
    problems += check_declaration(mod.REQUEST) + check_declaration(mod.RESPONSE)
    assert problems == []


def test_sanity_checks_catch_bad_declarations() -> None:
    """The checks above would notice the mistakes they are meant to catch."""
    bad = request(
        api_key=999,
        name="Bad",
        valid="0-3",
        flexible="2+",
        fields=[
            field("group_id", "string", "0+"),
            field("group_id", "string", "1+"),
            field("GroupState", "string", "0+"),
            field("epoch", "int32", "0+", nullable="0+"),
            field("late", "int32", "5+"),
            field("gone", "int32", "0-7"),
            field("short_name", "string", "2+", nullable="0+"),
            field("first", "int32", "2+", tag=0, tagged="1+"),
            field("second", "int32", "2+", tag=0, tagged="2+"),
            field("member", "string", "0+", default=None),
            field("count", "int8", "0+", default=300),
            array("topics", "Topic", "2+", [field("name", "string", "0-1")]),
        ],
    )
    text = "\n".join(check_declaration(bad))
    for expected in (
        "'group_id' declared twice",
        "GroupState: name is not snake_case",
        "epoch: a int32 cannot be null",
        "late: exists in no valid version",
        "gone: versions 0-7 end outside 0-3",
        "short_name: nullable versions",
        "tag 0 used twice",
        "first: tagged in non-flexible versions",
        "member: default null but never nullable",
        "count: default 300 is not a int8",
        "topics.name: exists in none of its parent's versions",
    ):
        assert expected in text


# (module, REQUEST/RESPONSE, version, struct path, the fields on the wire there, in order)
SHAPES = [
    ("offset_commit", "REQUEST", 2, "", ["group_id", "generation_id_or_member_epoch", "member_id", "retention_time_ms", "topics"]),
    ("offset_commit", "REQUEST", 5, "", ["group_id", "generation_id_or_member_epoch", "member_id", "topics"]),
    ("offset_commit", "REQUEST", 7, "", ["group_id", "generation_id_or_member_epoch", "member_id", "group_instance_id", "topics"]),
    ("offset_commit", "REQUEST", 5, "topics.partitions", ["partition_index", "committed_offset", "committed_metadata"]),
    ("offset_commit", "REQUEST", 6, "topics.partitions", ["partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata"]),
    ("offset_commit", "REQUEST", 9, "topics", ["name", "partitions"]),
    ("offset_commit", "REQUEST", 10, "topics", ["topic_id", "partitions"]),
    ("offset_commit", "RESPONSE", 2, "", ["topics"]),
    ("offset_commit", "RESPONSE", 10, "topics", ["topic_id", "partitions"]),
    ("offset_fetch", "REQUEST", 7, "", ["group_id", "topics", "require_stable"]),
    ("offset_fetch", "REQUEST", 8, "", ["groups", "require_stable"]),
    ("offset_fetch", "REQUEST", 8, "groups", ["group_id", "topics"]),
    ("offset_fetch", "REQUEST", 9, "groups", ["group_id", "member_id", "member_epoch", "topics"]),
    ("offset_fetch", "REQUEST", 10, "groups.topics", ["topic_id", "partition_indexes"]),
    ("offset_fetch", "RESPONSE", 1, "", ["topics"]),
    ("offset_fetch", "RESPONSE", 7, "", ["throttle_time_ms", "topics", "error_code"]),
    ("offset_fetch", "RESPONSE", 8, "", ["throttle_time_ms", "groups"]),
    ("offset_fetch", "RESPONSE", 8, "groups", ["group_id", "topics", "error_code"]),
    ("find_coordinator", "REQUEST", 0, "", ["key"]),
    ("find_coordinator", "REQUEST", 3, "", ["key", "key_type"]),
    ("find_coordinator", "REQUEST", 4, "", ["key_type", "coordinator_keys"]),
    ("find_coordinator", "RESPONSE", 0, "", ["error_code", "node_id", "host", "port"]),
    ("find_coordinator", "RESPONSE", 1, "", ["throttle_time_ms", "error_code", "error_message", "node_id", "host", "port"]),
    ("find_coordinator", "RESPONSE", 4, "", ["throttle_time_ms", "coordinators"]),
    ("join_group", "REQUEST", 0, "", ["group_id", "session_timeout_ms", "member_id", "protocol_type", "protocols"]),
    ("join_group", "REQUEST", 8, "", ["group_id", "session_timeout_ms", "rebalance_timeout_ms", "member_id", "group_instance_id", "protocol_type", "protocols", "reason"]),
    ("join_group", "RESPONSE", 9, "", ["throttle_time_ms", "error_code", "generation_id", "protocol_type", "protocol_name", "leader", "skip_assignment", "member_id", "members"]),
    ("leave_group", "REQUEST", 2, "", ["group_id", "member_id"]),
    ("leave_group", "REQUEST", 3, "", ["group_id", "members"]),
    ("leave_group", "REQUEST", 5, "members", ["member_id", "group_instance_id", "reason"]),
    ("leave_group", "RESPONSE", 3, "", ["throttle_time_ms", "error_code", "members"]),
    ("sync_group", "REQUEST", 5, "", ["group_id", "generation_id", "member_id", "group_instance_id", "protocol_type", "protocol_name", "assignments"]),
    ("describe_groups", "RESPONSE", 6, "groups", ["error_code", "error_message", "group_id", "group_state", "protocol_type", "protocol_data", "members", "authorized_operations"]),
    ("list_groups", "REQUEST", 3, "", []),
    ("list_groups", "REQUEST", 4, "", ["states_filter"]),
    ("list_groups", "REQUEST", 5, "", ["states_filter", "types_filter"]),
    ("list_groups", "RESPONSE", 5, "groups", ["group_id", "protocol_type", "group_state", "group_type"]),
    ("sasl_authenticate", "RESPONSE", 1, "", ["error_code", "error_message", "auth_bytes", "session_lifetime_ms"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "kind", "version", "path", "expected"), SHAPES)
def test_wire_shape(name: str, kind: str, version: int, path: str, expected: list[str]) -> None:
    assert names_at(getattr(module(name), kind), version, path) == expected


def test_nullability_and_defaults() -> None:
    commit = module("offset_commit").REQUEST
    partition = commit.fields[-1].fields[-1].fields
    epoch = next(f for f in partition if f.name == "committed_leader_epoch")
    assert epoch.default == -1
    fetch = module("offset_fetch").REQUEST
    topics = next(f for f in fetch.fields if f.name == "topics")
    # A null topic list asks for every topic, from v2 on.
    assert not topics.nullable_versions.contains(1)
    assert topics.nullable_versions.contains(2)
    join = module("join_group").RESPONSE
    protocol_name = next(f for f in join.fields if f.name == "protocol_name")
    assert not protocol_name.nullable_versions.contains(6)
    assert protocol_name.nullable_versions.contains(7)
    described = module("describe_groups").RESPONSE.fields[1].fields
    operations = next(f for f in described if f.name == "authorized_operations")
    assert operations.default == -(2**31)


# -- against kafka-python and aiokafka ----------------------------------------------------------


CASES = reference_cases(
    [spec for name in sorted(VERSIONS) for spec in (module(name).REQUEST, module(name).RESPONSE)]
)


@pytest.mark.parametrize("name", sorted(VERSIONS))
def test_declaration_matches_kafkas_message_definitions(name: str) -> None:
    """kafka-python 3 generates its classes from Kafka's own message definitions: every
    version's fields, types, nullability, tags, defaults and ignorable flags must agree."""
    classes = kafka_python_classes()
    for spec in (module(name).REQUEST, module(name).RESPONSE):
        assert layout_differences(spec, classes[spec.class_name]) == []


@pytest.mark.parametrize(("style", "spec", "version", "their_cls"), CASES)
@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_same_bytes_as_reference_clients(
    style: str, spec: MessageSpec, version: int, their_cls: Any, data: st.DataObject
) -> None:
    """kafka-python (both its JSON-driven and its older hand-written classes) and aiokafka."""
    run_reference_case(style, spec, version, their_cls, data)
