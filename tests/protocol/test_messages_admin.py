"""The admin API declarations: CreateTopics, DeleteTopics, DeleteRecords, OffsetForLeaderEpoch,
the ACL APIs, the config APIs, DescribeLogDirs, CreatePartitions, DescribeCluster and
DescribeTopicPartitions.

Part one checks the declarations themselves and needs no compiler: field names and tags unique
per struct, every field's versions inside its parent's, tagged fields only in flexible
versions, nullability only where the type allows it and inside the field's versions, defaults
that fit their type, and the version ranges a Kafka 4.x broker advertises. Part two
(``test_admin_cross_check_*``, further down) compares josefk's codec with kafka-python's and
aiokafka's protocol classes once ``josefk.protocol.compiler`` exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import ModuleType

import pytest

from josefk.protocol.messages import (
    alter_configs,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_topic_partitions,
    incremental_alter_configs,
    offset_for_leader_epoch,
)
from josefk.protocol.schema import MISSING, NO_VERSIONS, Field, MessageSpec, Versions

# api key -> (module, oldest version a Kafka 4.x broker accepts, newest version Kafka 4.x
# defines). Oldest per KIP-896 (checked against a 4.0 broker's ApiVersions); newest as of 4.3.
ADMIN_APIS: dict[int, tuple[ModuleType, int, int]] = {
    19: (create_topics, 2, 7),
    20: (delete_topics, 1, 6),
    21: (delete_records, 0, 2),
    23: (offset_for_leader_epoch, 2, 4),
    29: (describe_acls, 1, 3),
    30: (create_acls, 1, 3),
    31: (delete_acls, 1, 3),
    32: (describe_configs, 1, 4),
    33: (alter_configs, 0, 2),
    35: (describe_log_dirs, 1, 5),
    37: (create_partitions, 0, 3),
    44: (incremental_alter_configs, 0, 1),
    60: (describe_cluster, 0, 2),
    75: (describe_topic_partitions, 0, 0),
}

FLEXIBLE_FROM = {
    19: 5,
    20: 4,
    21: 2,
    23: 4,
    29: 2,
    30: 2,
    31: 2,
    32: 4,
    33: 2,
    35: 2,
    37: 2,
    44: 1,
    60: 0,
    75: 0,
}

SPECS: list[MessageSpec] = [
    spec for module, _, _ in ADMIN_APIS.values() for spec in (module.REQUEST, module.RESPONSE)
]

NULLABLE_TYPES = frozenset({"string", "bytes", "records"})
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")


def _spec_id(spec: MessageSpec) -> str:
    return spec.class_name


def _effective(versions: Versions, parent: Versions) -> Versions:
    """``versions`` clipped to ``parent``: an open-ended range ends where the parent ends."""
    high = versions.high if versions.high is not None else parent.high
    return Versions(max(versions.low, parent.low), high)


def _is_empty(versions: Versions) -> bool:
    return versions.high is not None and versions.low > versions.high


def _within(inner: Versions, outer: Versions) -> bool:
    """Whether every version of ``inner`` is one of ``outer``.

    An open-ended ``inner`` ("5+") means "from 5 for as long as the parent exists", so only
    its start and an explicit end ("1-5") are compared with ``outer``.
    """
    if _is_empty(inner):
        return True
    if inner.low < outer.low:
        return False
    if outer.high is not None and inner.low > outer.high:
        return False
    return inner.high is None or outer.high is None or inner.high <= outer.high


def _walk(
    fields: tuple[Field, ...], parent: Versions, path: str
) -> Iterator[tuple[str, Field, Versions, tuple[Field, ...]]]:
    """(path, field, parent's versions, siblings) for every field of the tree, depth first."""
    for f in fields:
        yield f"{path}.{f.name}", f, parent, fields
        if f.fields:
            yield from _walk(f.fields, _effective(f.versions, parent), f"{path}.{f.name}")


def _all_fields(spec: MessageSpec) -> list[tuple[str, Field, Versions, tuple[Field, ...]]]:
    return list(_walk(spec.fields, spec.valid_versions, spec.class_name))


def _structs(fields: tuple[Field, ...]) -> Iterator[tuple[Field, ...]]:
    yield fields
    for f in fields:
        if f.fields:
            yield from _structs(f.fields)


# -- part one: the declarations ------------------------------------------------------------


@pytest.mark.parametrize("api_key", sorted(ADMIN_APIS))
def test_versions_are_those_of_kafka_4(api_key: int) -> None:
    module, oldest, newest = ADMIN_APIS[api_key]
    for spec in (module.REQUEST, module.RESPONSE):
        assert spec.api_key == api_key
        assert spec.valid_versions == Versions(oldest, newest)
        assert spec.flexible_versions == Versions(FLEXIBLE_FROM[api_key], None)
    assert module.REQUEST.kind == "request"
    assert module.RESPONSE.kind == "response"
    assert module.REQUEST.name == module.RESPONSE.name


def test_modules_are_discovered() -> None:
    from josefk.protocol.messages import all_specs

    discovered = {request.api_key: (request, response) for request, response in all_specs()}
    for api_key, (module, _, _) in ADMIN_APIS.items():
        assert discovered[api_key] == (module.REQUEST, module.RESPONSE)


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_field_names_unique_and_snake_case(spec: MessageSpec) -> None:
    for fields in _structs(spec.fields):
        names = [f.name for f in fields]
        assert len(names) == len(set(names)), names
        for name in names:
            assert SNAKE_CASE.match(name), name


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_tags_unique_per_struct(spec: MessageSpec) -> None:
    for fields in _structs(spec.fields):
        tags = [f.tag for f in fields if f.tag is not None]
        assert len(tags) == len(set(tags)), tags
        assert all(tag >= 0 for tag in tags)


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_field_versions_within_parent(spec: MessageSpec) -> None:
    for path, f, parent, _ in _all_fields(spec):
        assert not _is_empty(f.versions), path
        assert _within(f.versions, parent), f"{path}: {f.versions} outside {parent}"


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_tagged_fields_only_in_flexible_versions(spec: MessageSpec) -> None:
    for path, f, _, _ in _all_fields(spec):
        if f.tag is None:
            assert f.tagged_versions == NO_VERSIONS, path
            continue
        assert f.tagged_versions != NO_VERSIONS, path
        assert _within(f.tagged_versions, spec.flexible_versions), path
        assert _within(f.tagged_versions, f.versions), path


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_nullable_versions_within_field_versions(spec: MessageSpec) -> None:
    for path, f, _, _ in _all_fields(spec):
        if f.nullable_versions == NO_VERSIONS:
            continue
        assert _within(f.nullable_versions, f.versions), path
        # Kafka allows null for strings, bytes, records, arrays and structs, not for numbers.
        assert f.is_array or f.is_struct or f.type in NULLABLE_TYPES, path


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_defaults_fit_their_type(spec: MessageSpec) -> None:
    for path, f, _, _ in _all_fields(spec):
        if f.default is MISSING:
            continue
        if f.default is None:
            assert f.nullable_versions != NO_VERSIONS, f"{path}: null default, never nullable"
        elif f.type == "bool":
            assert isinstance(f.default, bool), path
        elif f.type in INT_RANGES:
            low, high = INT_RANGES[f.type]
            assert isinstance(f.default, int) and not isinstance(f.default, bool), path
            assert low <= f.default <= high, path
        elif f.type == "string":
            assert isinstance(f.default, str), path
        else:
            pytest.fail(f"{path}: unexpected default {f.default!r} for {f.type}")


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_struct_names_mean_one_shape(spec: MessageSpec) -> None:
    """A struct name used twice in one message (Cursor) must declare the same fields."""
    shapes: dict[str, tuple[Field, ...]] = {}
    for path, f, _, _ in _all_fields(spec):
        if f.struct_name is None:
            continue
        assert f.fields, f"{path}: struct {f.struct_name} without fields"
        assert shapes.setdefault(f.struct_name, f.fields) == f.fields, path


def _field(spec: MessageSpec, dotted: str) -> Field:
    fields = spec.fields
    found: Field | None = None
    for name in dotted.split("."):
        found = next(f for f in fields if f.name == name)
        fields = found.fields
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("spec", "dotted", "versions", "nullable", "default", "tag"),
    [
        (create_topics.REQUEST, "timeout_ms", "2+", None, 60000, None),
        (create_topics.RESPONSE, "topics.topic_id", "7+", None, MISSING, None),
        (create_topics.RESPONSE, "topics.topic_config_error_code", "5+", None, MISSING, 0),
        (create_topics.RESPONSE, "topics.num_partitions", "5+", None, -1, None),
        (create_topics.RESPONSE, "topics.configs", "5+", "5+", MISSING, None),
        (create_topics.RESPONSE, "topics.configs.config_source", "5+", None, -1, None),
        (delete_topics.REQUEST, "topic_names", "1-5", None, MISSING, None),
        (delete_topics.REQUEST, "topics", "6+", None, MISSING, None),
        (delete_topics.REQUEST, "topics.name", "6+", "6+", None, None),
        (delete_topics.RESPONSE, "responses.name", "1+", "6+", MISSING, None),
        (delete_topics.RESPONSE, "responses.error_message", "5+", "5+", None, None),
        (offset_for_leader_epoch.REQUEST, "replica_id", "3+", None, -2, None),
        (
            offset_for_leader_epoch.RESPONSE,
            "topics.partitions.end_offset",
            "2+",
            None,
            -1,
            None,
        ),
        (describe_acls.REQUEST, "pattern_type_filter", "1+", None, 3, None),
        (describe_configs.REQUEST, "include_documentation", "3+", None, False, None),
        (describe_configs.RESPONSE, "results.configs.config_source", "1+", None, -1, None),
        (describe_configs.RESPONSE, "results.configs.documentation", "3+", "3+", MISSING, None),
        (describe_log_dirs.REQUEST, "topics", "1+", "1+", MISSING, None),
        (describe_log_dirs.RESPONSE, "error_code", "3+", None, MISSING, None),
        (describe_log_dirs.RESPONSE, "results.total_bytes", "4+", None, -1, None),
        (describe_log_dirs.RESPONSE, "results.is_cordoned", "5+", None, False, None),
        (create_partitions.REQUEST, "topics.assignments", "0+", "0+", MISSING, None),
        (describe_cluster.REQUEST, "endpoint_type", "1+", None, 1, None),
        (describe_cluster.REQUEST, "include_fenced_brokers", "2+", None, False, None),
        (describe_cluster.RESPONSE, "brokers.is_fenced", "2+", None, False, None),
        (describe_cluster.RESPONSE, "cluster_authorized_operations", "0+", None, -(2**31), None),
        (describe_topic_partitions.REQUEST, "response_partition_limit", "0+", None, 2000, None),
        (describe_topic_partitions.REQUEST, "cursor", "0+", "0+", None, None),
        (describe_topic_partitions.RESPONSE, "next_cursor", "0+", "0+", None, None),
        (
            describe_topic_partitions.RESPONSE,
            "topics.partitions.eligible_leader_replicas",
            "0+",
            "0+",
            None,
            None,
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and "." in value else None,
)
def test_version_boundaries_of_notable_fields(
    spec: MessageSpec,
    dotted: str,
    versions: str,
    nullable: str | None,
    default: object,
    tag: int | None,
) -> None:
    f = _field(spec, dotted)
    assert f.versions == Versions.parse(versions)
    assert f.nullable_versions == (Versions.parse(nullable) if nullable else NO_VERSIONS)
    if default is MISSING or default is None:
        assert f.default is default
    else:
        assert type(f.default) is type(default) and f.default == default
    assert f.tag == tag


def test_the_checks_catch_misdeclared_versions() -> None:
    """The helpers above reject the mistakes they exist for."""
    message = Versions.parse("2-7")
    assert not _within(Versions.parse("0+"), message)  # starts before the oldest version
    assert not _within(Versions.parse("2-8"), message)  # ends after the newest
    assert not _within(Versions.parse("8+"), message)  # starts after the newest
    assert _within(Versions.parse("5+"), message)
    assert _within(Versions.parse("3-5"), message)
    assert not _within(Versions.parse("3+"), Versions.parse("5+"))  # tagged before flexible
