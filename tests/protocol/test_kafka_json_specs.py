"""Every declaration in josefk/protocol/messages against Kafka's own JSON message definitions.

kafka-python 3 (a test dependency) ships Kafka's message definitions as JSON files
(``kafka/protocol/schemas/resources/<Name>Request.json``). They are read here as data, never
copied into josefk. For every declared message and every version josefk declares:

* the version is one Kafka defines, and flexible exactly when Kafka's is;
* the fields on the wire, in order, agree in name, type (struct, array of structs or
  primitive), nullability and tag, down through every nested struct;
* every field's default and ignorable flag agree (a default only matters when a field is
  absent from a version, or tagged and left out);
* struct names agree (the generated classes are named after them).

The byte-level cross-checks against the clients' codecs are in test_cross_check.py and
test_messages_{groups,txn}.py; this one is static and reads every version.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

import pytest

from josefk.protocol.messages import all_specs
from josefk.protocol.schema import MISSING, Field, MessageSpec, Versions

# APIs newer than the definitions kafka-python ships (KIP-848's, KIP-932's): their layout is
# checked against the clients in the integration tests (confluent-kafka speaks them) instead.
# test_unshipped_apis_are_exactly_those_missing fails once kafka-python ships one of them.
NOT_SHIPPED = frozenset(
    {
        "ConsumerGroupHeartbeat",
        "ConsumerGroupDescribe",
        "ShareGroupHeartbeat",
        "ShareGroupDescribe",
        "ShareFetch",
        "ShareAcknowledge",
        "DescribeShareGroupOffsets",
        "ReadShareGroupState",
        "WriteShareGroupState",
        "DeleteShareGroupState",
        "AlterShareGroupOffsets",
        "DeleteShareGroupOffsets",
    }
)
ALL_SPECS = [spec for pair in all_specs() for spec in pair]
SPECS = [
    s
    for s in ALL_SPECS
    if s.class_name.removesuffix("Request").removesuffix("Response") not in NOT_SHIPPED
]
# Line comments (the licence header and notes) are not JSON.
_COMMENTS = re.compile(r"(?m)^\s*//.*$")


@cache
def kafka_json(class_name: str) -> dict[str, Any] | None:
    """Kafka's definition of ``class_name`` (``ProduceRequest``), common structs resolved."""
    package = resources.files("kafka.protocol.schemas.resources")
    source = package / f"{class_name}.json"
    if not source.is_file():
        return None
    data: dict[str, Any] = json.loads(_COMMENTS.sub("", source.read_text()))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}

    def resolve(fields: list[dict[str, Any]]) -> None:
        for f in fields:
            struct = _struct_name(f["type"])
            if struct is not None and "fields" not in f and struct in common:
                f["fields"] = common[struct]
            resolve(f.get("fields", []))

    resolve(data.get("fields", []))
    return data


def _struct_name(kind: str) -> str | None:
    element = kind[2:] if kind.startswith("[]") else kind
    return element if element[:1].isupper() else None


def _versions(text: str | None) -> Versions:
    return Versions.parse(text) if text else Versions.parse("none")


def _key(name: str) -> str:
    """Names compared without case and underscores: ``Enable2Pc`` is ``enable_2pc``."""
    return name.replace("_", "").lower()


def _theirs_default(f: dict[str, Any]) -> Any:
    raw = f.get("default")
    if raw is None:
        return MISSING
    if isinstance(raw, str):
        if raw == "null":
            return None
        if raw in ("true", "false"):
            return raw == "true"
        if f["type"] in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
            return int(raw, 0)
        if f["type"] == "float64":
            return float(raw)
    return raw


def _same_default(ours: Any, theirs: Any) -> bool:
    """Equal, or one side undeclared and the other the type's zero value."""
    if ours is MISSING or theirs is MISSING:
        other = theirs if ours is MISSING else ours
        return other is MISSING or (other is not None and other in (0, "", False))
    return bool(ours == theirs and type(ours) is type(theirs))


def _our_rows(fields: tuple[Field, ...], v: int) -> list[tuple[Any, ...]]:
    rows = []
    for f in fields:
        tagged = f.tag is not None and f.tagged_versions.contains(v)
        if f.versions.contains(v) or tagged:
            kind = ("[]S" if f.is_array else "S") if f.is_struct else f.type
            rows.append(
                (
                    _key(f.name),
                    kind,
                    f.nullable_versions.contains(v),
                    f.tag if tagged else None,
                    _our_rows(f.fields, v) if f.is_struct else None,
                )
            )
    return rows


def _their_rows(fields: list[dict[str, Any]], v: int) -> list[tuple[Any, ...]]:
    rows = []
    for f in fields:
        tag = f.get("tag")
        tagged = tag is not None and _versions(f.get("taggedVersions")).contains(v)
        if _versions(f.get("versions")).contains(v) or tagged:
            struct = _struct_name(f["type"])
            if struct is not None:
                kind = "[]S" if f["type"].startswith("[]") else "S"
            else:
                kind = f["type"]
            rows.append(
                (
                    _key(f["name"]),
                    kind,
                    _versions(f.get("nullableVersions")).contains(v),
                    tag if tagged else None,
                    _their_rows(f.get("fields", []), v) if struct is not None else None,
                )
            )
    return rows


def _row_differences(
    ours: list[tuple[Any, ...]], theirs: list[tuple[Any, ...]], where: str
) -> list[str]:
    """Readable differences between two row lists (first field that differs per struct)."""
    if ours == theirs:
        return []
    our_names = [r[0] for r in ours]
    their_names = [r[0] for r in theirs]
    if our_names != their_names:
        return [f"{where}: fields {our_names} != Kafka's {their_names}"]
    out = []
    for a, b in zip(ours, theirs, strict=True):
        at = f"{where}.{a[0]}"
        if a[1:4] != b[1:4]:
            out.append(f"{at}: (type, nullable, tag) {a[1:4]} != Kafka's {b[1:4]}")
        elif a[4] is not None and b[4] is not None:
            out.extend(_row_differences(a[4], b[4], at))
    return out


def differences(spec: MessageSpec) -> list[str]:
    """Every disagreement between ``spec`` and Kafka's JSON definition, one per line."""
    theirs = kafka_json(spec.class_name)
    if theirs is None:
        return [f"Kafka defines no {spec.class_name}"]
    out: list[str] = []
    if theirs["apiKey"] != spec.api_key:
        out.append(f"api key {spec.api_key} != Kafka's {theirs['apiKey']}")
    valid = _versions(theirs["validVersions"])
    flexible = _versions(theirs.get("flexibleVersions"))
    top = spec.valid_versions.high
    assert top is not None
    for v in range(spec.valid_versions.low, top + 1):
        if not valid.contains(v):
            out.append(f"v{v}: Kafka's valid versions are {valid}")
            continue
        if flexible.contains(v) != spec.flexible_versions.contains(v):
            out.append(f"v{v}: flexible here {spec.flexible_versions}, Kafka's {flexible}")
        out.extend(
            _row_differences(_our_rows(spec.fields, v), _their_rows(theirs["fields"], v), f"v{v}")
        )

    def attributes(fields: tuple[Field, ...], kafka: list[dict[str, Any]], path: str) -> None:
        by_key = {_key(k["name"]): k for k in kafka}
        for f in fields:
            k = by_key.get(_key(f.name))
            if k is None:
                continue  # a field josefk names differently shows in the layout above
            at = f"{path}{f.name}"
            if not f.is_struct and not _same_default(f.default, _theirs_default(k)):
                out.append(f"{at}: default {f.default!r} != Kafka's {_theirs_default(k)!r}")
            if f.ignorable != bool(k.get("ignorable", False)):
                out.append(f"{at}: ignorable {f.ignorable} != Kafka's {k.get('ignorable')}")
            if f.is_struct:
                if f.struct_name != _struct_name(k["type"]):
                    out.append(f"{at}: struct {f.struct_name} != Kafka's {k['type']}")
                attributes(f.fields, k.get("fields", []), f"{at}.")

    attributes(spec.fields, theirs["fields"], "")
    return out


@pytest.mark.parametrize("spec", SPECS, ids=[s.class_name for s in SPECS])
def test_declaration_matches_kafkas_json(spec: MessageSpec) -> None:
    assert differences(spec) == []


def test_every_declared_api_is_checked() -> None:
    assert len(SPECS) + 2 * len(NOT_SHIPPED) == 2 * len(all_specs())
    assert all(kafka_json(spec.class_name) is not None for spec in SPECS)


def test_unshipped_apis_are_exactly_those_missing() -> None:
    missing = {
        spec.class_name.removesuffix("Request").removesuffix("Response")
        for spec in ALL_SPECS
        if kafka_json(spec.class_name) is None
    }
    assert missing == NOT_SHIPPED


def test_the_check_finds_a_misdeclared_field() -> None:
    """A declaration with one field's versions, nullability or default wrong is caught."""
    import dataclasses

    spec = next(s for s in SPECS if s.class_name == "ProduceRequest")
    first = spec.fields[0]  # transactional_id: string, 3+, nullable 3+
    wrong_versions = dataclasses.replace(first, versions=Versions.parse("4+"))
    wrong_null = dataclasses.replace(first, nullable_versions=Versions.parse("none"))
    wrong_default = dataclasses.replace(spec.fields[1], default=7)
    for fields in (
        (wrong_versions, *spec.fields[1:]),
        (wrong_null, *spec.fields[1:]),
        (first, wrong_default, *spec.fields[2:]),
    ):
        assert differences(dataclasses.replace(spec, fields=fields)) != []
