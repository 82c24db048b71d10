"""The transaction and producer-state API declarations (InitProducerId .. ListTransactions).

Static sanity of every declaration (no compiler needed), the version ranges Kafka 4.x accepts,
the wire shape of the versions that changed it, and, once the compiler is there, byte-for-byte
agreement with kafka-python's and aiokafka's protocol classes on every version they implement.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from josefk.protocol.schema import MessageSpec
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
# (WriteTxnMarkers v0 is gone since 4.0).
VERSIONS = {
    "init_producer_id": (22, "0-6", "2+"),
    "add_partitions_to_txn": (24, "0-5", "3+"),
    "add_offsets_to_txn": (25, "0-4", "3+"),
    "end_txn": (26, "0-5", "3+"),
    "write_txn_markers": (27, "1-2", "1+"),
    "txn_offset_commit": (28, "0-5", "3+"),
    "describe_producers": (61, "0", "0+"),
    "describe_transactions": (65, "0", "0+"),
    "list_transactions": (66, "0-2", "0+"),
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


# (module, REQUEST/RESPONSE, version, struct path, the fields on the wire there, in order)
SHAPES = [
    ("init_producer_id", "REQUEST", 2, "", ["transactional_id", "transaction_timeout_ms"]),
    ("init_producer_id", "REQUEST", 3, "", ["transactional_id", "transaction_timeout_ms", "producer_id", "producer_epoch"]),
    ("init_producer_id", "REQUEST", 6, "", ["transactional_id", "transaction_timeout_ms", "producer_id", "producer_epoch", "enable_2pc", "keep_prepared_txn"]),
    ("init_producer_id", "RESPONSE", 5, "", ["throttle_time_ms", "error_code", "producer_id", "producer_epoch"]),
    ("init_producer_id", "RESPONSE", 6, "", ["throttle_time_ms", "error_code", "producer_id", "producer_epoch", "ongoing_txn_producer_id", "ongoing_txn_producer_epoch"]),
    ("add_partitions_to_txn", "REQUEST", 3, "", ["v3_and_below_transactional_id", "v3_and_below_producer_id", "v3_and_below_producer_epoch", "v3_and_below_topics"]),
    ("add_partitions_to_txn", "REQUEST", 4, "", ["transactions"]),
    ("add_partitions_to_txn", "REQUEST", 4, "transactions", ["transactional_id", "producer_id", "producer_epoch", "verify_only", "topics"]),
    ("add_partitions_to_txn", "RESPONSE", 3, "", ["throttle_time_ms", "results_by_topic_v3_and_below"]),
    ("add_partitions_to_txn", "RESPONSE", 5, "", ["throttle_time_ms", "error_code", "results_by_transaction"]),
    ("add_partitions_to_txn", "RESPONSE", 5, "results_by_transaction.topic_results.results_by_partition", ["partition_index", "partition_error_code"]),
    ("end_txn", "RESPONSE", 4, "", ["throttle_time_ms", "error_code"]),
    ("end_txn", "RESPONSE", 5, "", ["throttle_time_ms", "error_code", "producer_id", "producer_epoch"]),
    ("write_txn_markers", "REQUEST", 1, "markers", ["producer_id", "producer_epoch", "transaction_result", "topics", "coordinator_epoch"]),
    ("write_txn_markers", "REQUEST", 2, "markers", ["producer_id", "producer_epoch", "transaction_result", "topics", "coordinator_epoch", "transaction_version"]),
    ("txn_offset_commit", "REQUEST", 2, "", ["transactional_id", "group_id", "producer_id", "producer_epoch", "topics"]),
    ("txn_offset_commit", "REQUEST", 3, "", ["transactional_id", "group_id", "producer_id", "producer_epoch", "generation_id", "member_id", "group_instance_id", "topics"]),
    ("txn_offset_commit", "REQUEST", 1, "topics.partitions", ["partition_index", "committed_offset", "committed_metadata"]),
    ("txn_offset_commit", "REQUEST", 2, "topics.partitions", ["partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata"]),
    ("describe_producers", "RESPONSE", 0, "topics.partitions.active_producers", ["producer_id", "producer_epoch", "last_sequence", "last_timestamp", "coordinator_epoch", "current_txn_start_offset"]),
    ("describe_transactions", "RESPONSE", 0, "transaction_states", ["error_code", "transactional_id", "transaction_state", "transaction_timeout_ms", "transaction_start_time_ms", "producer_id", "producer_epoch", "topics"]),
    ("list_transactions", "REQUEST", 0, "", ["state_filters", "producer_id_filters"]),
    ("list_transactions", "REQUEST", 1, "", ["state_filters", "producer_id_filters", "duration_filter"]),
    ("list_transactions", "REQUEST", 2, "", ["state_filters", "producer_id_filters", "duration_filter", "transactional_id_pattern"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "kind", "version", "path", "expected"), SHAPES)
def test_wire_shape(name: str, kind: str, version: int, path: str, expected: list[str]) -> None:
    assert names_at(getattr(module(name), kind), version, path) == expected


def test_types_and_defaults() -> None:
    init = {f.name: f for f in module("init_producer_id").REQUEST.fields}
    assert init["transactional_id"].nullable_versions.contains(0)
    assert init["producer_id"].default == -1 and init["producer_epoch"].default == -1
    state = module("describe_producers").RESPONSE.fields[1].fields[1].fields[3].fields
    # DescribeProducers carries the epoch as int32, unlike every other API.
    assert {f.name: f.type for f in state}["producer_epoch"] == "int32"
    pattern = module("list_transactions").REQUEST.fields[-1]
    assert pattern.name == "transactional_id_pattern" and pattern.default is None
    end = {f.name: f for f in module("end_txn").RESPONSE.fields}
    assert end["producer_id"].default == -1 and end["producer_epoch"].default == -1


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
