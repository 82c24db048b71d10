"""The admin API declarations: CreateTopics, DeleteTopics, DeleteRecords, OffsetForLeaderEpoch,
the ACL APIs, the config APIs, DescribeLogDirs, CreatePartitions, DescribeCluster and
DescribeTopicPartitions.

Part one checks the declarations themselves and needs no compiler: field names and tags unique
per struct, every field's versions inside its parent's, tagged fields only in flexible
versions, nullability only where the type allows it and inside the field's versions, defaults
that fit their type, and the version ranges a Kafka 4.x broker advertises. Part two compares
with independent implementations: every (API, version, request/response) against kafka-python
3.x's generated classes, by field name and byte for byte, plus the declarations' invisible
parts (defaults, ignorable); and every version that kafka-python's old hand-written classes or
aiokafka's implement, byte for byte. Where they disagree with Kafka's protocol (DescribeAcls
v2), a test pins down who is wrong."""

from __future__ import annotations

import importlib.util
import io
import re
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    elect_leaders,
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
    43: (elect_leaders, 0, 2),
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
    43: 2,
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


# -- part two: josefk's codec against kafka-python and aiokafka -----------------------------
#
# For every (API, version, request/response) that another implementation also encodes,
# hypothesis draws a value from josefk's declaration and checks both ways:
#   josefk's bytes decode, with the other implementation, to the same values, and
#   the other implementation's encoding of those values is byte for byte josefk's.
# kafka-python 3.x builds its classes from Kafka's own message definitions (compared by field
# name); its older hand-written classes (kafka.protocol.old) and aiokafka's are positional
# Structs (compared by position, so a field missing or out of order shows up too).

HAVE_COMPILER = importlib.util.find_spec("josefk.protocol.compiler") is not None
needs_compiler = pytest.mark.skipif(not HAVE_COMPILER, reason="josefk.protocol.compiler absent")

INT_BOUNDS = INT_RANGES


def _active(fields: tuple[Field, ...], version: int) -> list[Field]:
    return [f for f in fields if f.versions.contains(version)]


def _is_tagged(f: Field, version: int) -> bool:
    return f.tag is not None and f.tagged_versions.contains(version)


def _primitive(kind: str) -> st.SearchStrategy[Any]:
    if kind == "bool":
        return st.booleans()
    if kind in INT_BOUNDS:
        low, high = INT_BOUNDS[kind]
        return st.integers(low, high)
    if kind == "string":
        return st.text(max_size=6)
    if kind == "bytes":
        return st.binary(max_size=6)
    if kind == "uuid":
        return st.one_of(st.just(uuid.UUID(int=0)), st.uuids())
    raise AssertionError(f"no strategy for {kind}")


def _value(compiled: Any, f: Field, version: int) -> st.SearchStrategy[Any]:
    if f.is_struct:
        cls, fields = compiled.struct_info_for(f)
        base: st.SearchStrategy[Any] = _struct(compiled, cls, fields, version)
    else:
        base = _primitive(f.element_type)
    if f.is_array:
        base = st.lists(base, max_size=3)
    if f.nullable_versions.contains(version):
        base = st.one_of(st.none(), base)
    return base


def _struct(
    compiled: Any, cls: Any, fields: tuple[Field, ...], version: int
) -> st.SearchStrategy[Any]:
    # Fields outside ``version`` keep their defaults: they do not travel, so they cannot
    # survive a round trip.
    return st.builds(
        cls, **{f.name: _value(compiled, f, version) for f in _active(fields, version)}
    )


def _message(spec: MessageSpec, version: int) -> st.SearchStrategy[Any]:
    from josefk.protocol.compiler import compile_message

    compiled = compile_message(spec)
    return _struct(compiled, compiled.cls, spec.fields, version)


def _cases() -> Iterator[tuple[MessageSpec, int]]:
    for spec in SPECS:
        low, high = spec.valid_versions.low, spec.valid_versions.high
        assert high is not None
        for version in range(low, high + 1):
            yield spec, version


CASES = list(_cases())
SPEC_BY_NAME = {spec.class_name: spec for spec in SPECS}


def _case_id(case: tuple[MessageSpec, int]) -> str:
    return f"{case[0].class_name}-v{case[1]}"


def _encode(spec: MessageSpec, value: Any, version: int) -> bytes:
    from josefk.protocol.compiler import compile_message

    return compile_message(spec).encode(value, version)


def _decode(spec: MessageSpec, data: bytes, version: int) -> Any:
    from josefk.protocol.compiler import compile_message

    return compile_message(spec).decode(data, version)


# kafka-python 3.x: classes generated from Kafka's definitions, fields by name ---------------

_ZERO_UUID = uuid.UUID(int=0)


def _kafka_python_class(spec: MessageSpec) -> Any:
    import kafka.protocol.admin as admin
    import kafka.protocol.consumer as consumer

    for module in (admin, consumer):
        cls = getattr(module, spec.class_name, None)
        if cls is not None:
            return cls
    return None


def _bitfield(operations: int) -> set[int] | None:
    """kafka-python's view of an authorized-operations int32: the set bits, None if unset."""
    if operations == -(2**31):
        return None
    return {bit for bit in range(32) if operations & (1 << bit)}


# kafka-python renames a few fields and changes their Python type (local patches on top of
# Kafka's definitions, no wire difference): (message, field) -> (its name, josefk -> its value).
KAFKA_PYTHON_RENAMES: dict[tuple[str, str], tuple[str, Any]] = {
    ("DescribeClusterResponse", "cluster_authorized_operations"): (
        "authorized_operations",
        _bitfield,
    ),
}


def _renamed(owner: str, f: Field, v: Any) -> tuple[str, Any]:
    rename = KAFKA_PYTHON_RENAMES.get((owner, f.name))
    if rename is None:
        return f.name, v
    name, convert = rename
    return name, convert(v)


def _as_names(
    value: Any, fields: tuple[Field, ...], version: int, owner: str = ""
) -> dict[str, Any]:
    """A josefk value as kafka-python's ``to_dict(json=False)`` shows it."""
    out: dict[str, Any] = {}
    for f in _active(fields, version):
        v = getattr(value, f.name)
        if v is not None and f.is_struct:
            if f.is_array:
                v = [_as_names(item, f.fields, version) for item in v]
            else:
                v = _as_names(v, f.fields, version)
        elif f.type == "uuid" and v == _ZERO_UUID:
            v = None  # kafka-python's spelling of the all-zero uuid
        name, v = _renamed(owner, f, v)
        out[name] = v
    return out


def _kafka_python_value(
    value: Any, fields: tuple[Field, ...], kp_cls: Any, version: int, owner: str = ""
) -> Any:
    kwargs: dict[str, Any] = {}
    for f in _active(fields, version):
        v = getattr(value, f.name)
        if v is not None and f.is_struct:
            child = kp_cls.fields[f.name].data_class
            if f.is_array:
                v = [_kafka_python_value(item, f.fields, child, version) for item in v]
            else:
                v = _kafka_python_value(v, f.fields, child, version)
        name, v = _renamed(owner, f, v)
        kwargs[name] = v
    return kp_cls(version=version, **kwargs) if owner else kp_cls(**kwargs)


KAFKA_PYTHON_CASES = [
    pytest.param(spec.class_name, version, id=_case_id((spec, version)))
    for spec, version in CASES
    if _kafka_python_class(spec) is not None
]


@needs_compiler
@pytest.mark.parametrize(("message", "version"), KAFKA_PYTHON_CASES)
@settings(max_examples=10)
@given(data=st.data())
def test_admin_cross_check_kafka_python(message: str, version: int, data: st.DataObject) -> None:
    spec = SPEC_BY_NAME[message]
    kp_cls = _kafka_python_class(spec)
    value = data.draw(_message(spec, version))
    ours = _encode(spec, value, version)

    theirs_decoded = kp_cls.decode(ours, version=version)
    assert theirs_decoded.to_dict(json=False) == _as_names(value, spec.fields, version, message)

    theirs = _kafka_python_value(value, spec.fields, kp_cls, version, message).encode(
        version=version
    )
    assert theirs == ours
    assert _decode(spec, theirs, version) == value


# The declarations against kafka-python's parsed definitions: what bytes cannot show ----------
#
# Defaults of fields absent from a version and "ignorable" never reach the wire, so the codec
# cross-check cannot see them; kafka-python exposes its parsed view of Kafka's definitions,
# which is compared here version by version (presence, nullability, tag, default, ignorable).

_KP_ZERO: dict[str, Any] = {"bool": False, "string": "", "bytes": b"", "uuid": None}


def _our_default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.is_array:
        return []
    return _KP_ZERO.get(f.type, 0)


def _their_default(k: Any) -> Any:
    default = k.default
    return None if isinstance(default, uuid.UUID) and default.int == 0 else default


def _declaration_differences(
    owner: str, ours: tuple[Field, ...], theirs: Any, version: int, path: str
) -> list[str]:
    problems: list[str] = []
    present = {k.name: k for k in theirs if k.for_version_q(version)}
    seen = set()
    for f in _active(ours, version):
        renamed = KAFKA_PYTHON_RENAMES.get((owner, f.name)) if not path else None
        name = renamed[0] if renamed else f.name
        seen.add(name)
        where = f"v{version} {path}{f.name}"
        k = present.get(name)
        if k is None:
            problems.append(f"{where}: not in kafka-python")
            continue
        if f.nullable_versions.contains(version) != bool(k.nullable_for_version_q(version)):
            problems.append(f"{where}: nullability differs")
        ours_tag = f.tag if _is_tagged(f, version) else None
        if ours_tag != (k._tag if k.tagged_field_q(version) else None):
            problems.append(f"{where}: tag {ours_tag} != {k._tag}")
        if f.ignorable != bool(k._ignorable):
            problems.append(f"{where}: ignorable {f.ignorable} != {bool(k._ignorable)}")
        if f.is_struct:
            problems += _declaration_differences(
                owner, f.fields, k._fields, version, f"{path}{f.name}."
            )
        elif not renamed:
            ours_default, their_default = _our_default(f), _their_default(k)
            if ours_default != their_default or type(ours_default) is not type(their_default):
                problems.append(f"{where}: default {ours_default!r} != {their_default!r}")
    problems += [f"v{version} {path}{name}: only in kafka-python" for name in present.keys() - seen]
    return problems


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_admin_declarations_match_kafka_python(spec: MessageSpec) -> None:
    kp_cls = _kafka_python_class(spec)
    assert kp_cls is not None
    assert kp_cls._valid_versions == (spec.valid_versions.low, spec.valid_versions.high)
    assert kp_cls._flexible_versions[0] == spec.flexible_versions.low
    low, high = spec.valid_versions.low, spec.valid_versions.high
    assert high is not None
    problems = [
        problem
        for version in range(low, high + 1)
        for problem in _declaration_differences(
            spec.class_name, spec.fields, kp_cls._struct._fields, version, ""
        )
    ]
    assert not problems, "\n".join(problems)


# Positional Structs: kafka-python's hand-written classes and aiokafka's ----------------------


def _positional_classes(spec: MessageSpec, version: int) -> list[tuple[str, Any]]:
    """(library, class) for each hand-written Struct class of this message and version."""
    import aiokafka.protocol.admin as aiokafka_admin
    import kafka.protocol.old.admin as old_admin
    import kafka.protocol.old.offset_for_leader_epoch as old_olfe

    found = []
    name = f"{spec.class_name}_v{version}"
    for library, modules in (
        ("kafka-python (old)", (old_admin, old_olfe)),
        ("aiokafka", (aiokafka_admin,)),
    ):
        for module in modules:
            cls = getattr(module, name, None)
            if cls is not None:
                found.append((library, cls))
    return found


# Hand-written Structs group fields their own way (CreatePartitions v0-1 nests count and
# assignments in a struct; arrays of one-field structs become arrays of arrays), all with the
# same bytes. So both sides are compared as the flat sequence of what goes on the wire: leaf
# values, array lengths (None for null) and tagged-field sections, in order.


def _is_tagged_fields_type(kind: Any) -> bool:
    return getattr(kind, "__name__", type(kind).__name__) == "TaggedFields"


def _is_schema(kind: Any) -> bool:
    return hasattr(kind, "names") and hasattr(kind, "fields")


def _is_array(kind: Any) -> bool:
    return hasattr(kind, "array_of")


def _wire_of_value(value: Any, fields: tuple[Field, ...], spec: MessageSpec, version: int) -> list:
    out: list[tuple[str, Any]] = []
    for f in _active(fields, version):
        assert not _is_tagged(f, version), "positional Structs carry no tagged fields"
        v = getattr(value, f.name)
        if f.is_array:
            out.append(("len", None if v is None else len(v)))
            for item in v or ():
                if f.is_struct:
                    out.extend(_wire_of_value(item, f.fields, spec, version))
                else:
                    out.append(("leaf", item))
        elif f.is_struct:
            assert not f.nullable_versions.contains(version), "no nullable structs here"
            out.extend(_wire_of_value(v, f.fields, spec, version))
        else:
            out.append(("leaf", v))
    if spec.flexible_versions.contains(version):
        out.append(("tags", {}))
    return out


def _wire_of_theirs(decoded: Any, kind: Any) -> list:
    if _is_tagged_fields_type(kind):
        return [("tags", decoded)]
    if _is_schema(kind):
        items = list(decoded)
        if len(items) == len(kind.fields) - 1 and _is_tagged_fields_type(kind.fields[-1]):
            items.append({})  # kafka-python's old Structs drop an empty tag section
        out: list[tuple[str, Any]] = []
        for item, sub in zip(items, kind.fields, strict=True):
            out.extend(_wire_of_theirs(item, sub))
        return out
    if _is_array(kind):
        if decoded is None:
            return [("len", None)]
        out = [("len", len(decoded))]
        for item in decoded:
            out.extend(_wire_of_theirs(item, kind.array_of))
        return out
    return [("leaf", decoded)]


def _theirs_from_wire(wire: Iterator[tuple[str, Any]], kind: Any) -> Any:
    if _is_tagged_fields_type(kind):
        what, value = next(wire)
        assert what == "tags", f"josefk has {what} where the Struct has a tag section"
        return value
    if _is_schema(kind):
        return tuple(_theirs_from_wire(wire, sub) for sub in kind.fields)
    if _is_array(kind):
        what, length = next(wire)
        assert what == "len", f"josefk has {what} where the Struct has an array"
        if length is None:
            return None
        return [_theirs_from_wire(wire, kind.array_of) for _ in range(length)]
    what, value = next(wire)
    assert what == "leaf", f"josefk has {what} where the Struct has a {kind}"
    return value


# aiokafka and kafka-python's old classes both declare DescribeAcls v2 (the first flexible
# version) with v1's schema: plain strings and arrays, no tagged-field sections. Kafka makes
# v2 flexible (compact strings and arrays, tagged fields), as josefk and kafka-python 3.x's
# generated classes do; those two old classes are wrong, checked in
# ``test_known_disagreement_describe_acls_v2`` instead of here.
KNOWN_WRONG = {
    ("aiokafka", "DescribeAclsRequest", 2),
    ("aiokafka", "DescribeAclsResponse", 2),
    ("kafka-python (old)", "DescribeAclsRequest", 2),
    ("kafka-python (old)", "DescribeAclsResponse", 2),
}

POSITIONAL_CASES = [
    pytest.param(library, spec.class_name, version, id=f"{library}-{spec.class_name}-v{version}")
    for spec, version in CASES
    for library, _ in _positional_classes(spec, version)
    if (library, spec.class_name, version) not in KNOWN_WRONG
]


def _positional_class(library: str, message: str, version: int) -> Any:
    for found_library, cls in _positional_classes(SPEC_BY_NAME[message], version):
        if found_library == library:
            return cls
    raise LookupError((library, message, version))


@needs_compiler
@pytest.mark.parametrize(("library", "message", "version"), POSITIONAL_CASES)
@settings(max_examples=10)
@given(data=st.data())
def test_admin_cross_check_positional_structs(
    library: str, message: str, version: int, data: st.DataObject
) -> None:
    spec = SPEC_BY_NAME[message]
    cls = _positional_class(library, message, version)
    value = data.draw(_message(spec, version))
    ours = _encode(spec, value, version)
    wire = _wire_of_value(value, spec.fields, spec, version)

    assert _wire_of_theirs(cls.SCHEMA.decode(io.BytesIO(ours)), cls.SCHEMA) == wire
    tokens = iter(wire)
    theirs = cls.SCHEMA.encode(_theirs_from_wire(tokens, cls.SCHEMA))
    assert next(tokens, None) is None, "the Struct has fewer fields than josefk"
    assert theirs == ours
    assert _decode(spec, theirs, version) == value


@needs_compiler
@pytest.mark.parametrize("message", ["DescribeAclsRequest", "DescribeAclsResponse"])
def test_known_disagreement_describe_acls_v2(message: str) -> None:
    """aiokafka's and kafka-python's old v2 classes write v1's non-flexible layout."""
    spec = SPEC_BY_NAME[message]
    value = _decode(spec, _encode(spec, _message_example(spec), 2), 2)
    ours = _encode(spec, value, 2)
    kp_cls = _kafka_python_class(spec)
    assert _kafka_python_value(value, spec.fields, kp_cls, 2, message).encode(version=2) == ours
    for library, cls in _positional_classes(spec, 2):
        v1_layout = _wire_of_value(value, spec.fields, spec, 1)  # same fields, no tag sections
        theirs = cls.SCHEMA.encode(_theirs_from_wire(iter(v1_layout), cls.SCHEMA))
        assert theirs == _encode(spec, value, 1), library  # what they send is v1's bytes
        assert theirs != ours, library


def _message_example(spec: MessageSpec) -> Any:
    from josefk.protocol.compiler import compile_message

    cls = compile_message(spec).cls
    if spec.kind == "request":
        return cls(
            resource_type_filter=2,
            resource_name_filter="orders",
            pattern_type_filter=3,
            principal_filter="User:alice",
            host_filter=None,
            operation=4,
            permission_type=3,
        )
    acl = cls.AclDescription(principal="User:alice", host="*", operation=4, permission_type=3)
    resource = cls.DescribeAclsResource(
        resource_type=2, resource_name="orders", pattern_type=3, acls=[acl]
    )
    return cls(throttle_time_ms=0, error_code=0, error_message=None, resources=[resource])
