"""Hypothesis strategies that build random messages from any declaration.

Values honour each field's versions (fields absent in a version keep their default),
nullability per version, and the value range of each primitive type, so encode -> decode must
give back an equal object. Shared by the round-trip, hostile-input and fuzz tests.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from josefk.protocol.compiler import CompiledMessage, compile_message
from josefk.protocol.schema import Field, MessageSpec

_INTS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}

MAX_ITEMS = 3


def primitive(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INTS:
        low, high = _INTS[kind]
        return st.integers(low, high)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return st.text(max_size=12)
    if kind in ("bytes", "records"):
        return st.binary(max_size=24)
    if kind == "uuid":
        return st.uuids()
    raise ValueError(kind)


def _present(f: Field, version: int, flexible: bool) -> bool:
    if f.tag is not None and flexible and f.tagged_versions.contains(version):
        return True
    return f.versions.contains(version)


def struct_strategy(
    message: CompiledMessage,
    cls: Any,
    fields: tuple[Field, ...],
    version: int,
    flexible: bool,
    depth: int = 0,
) -> st.SearchStrategy[Any]:
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields:
        if not _present(f, version, flexible):
            continue
        if f.is_struct:
            sub_cls, sub_fields = message.struct_info_for(f)
            one = struct_strategy(message, sub_cls, sub_fields, version, flexible, depth + 1)
        else:
            one = primitive(f.element_type)
        if f.is_array:
            one = st.lists(one, max_size=MAX_ITEMS if depth < 2 else 2)
        if f.nullable_versions.contains(version):
            one = st.none() | one
        kwargs[f.name] = one
    return st.builds(cls, **kwargs)


def message_strategy(spec: MessageSpec, version: int) -> st.SearchStrategy[Any]:
    message = compile_message(spec)
    flexible = spec.flexible_versions.contains(version)
    return struct_strategy(message, message.cls, spec.fields, version, flexible)


def versions_of(spec: MessageSpec) -> range:
    high = spec.valid_versions.high
    assert high is not None
    return range(spec.valid_versions.low, high + 1)
