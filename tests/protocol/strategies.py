"""Hypothesis strategies that build random messages from any declaration.

Values honour each field's versions (fields absent in a version keep their default),
nullability per version, and the value range of each primitive type, so encode -> decode must
give back an equal object. Shared by the round-trip, hostile-input and fuzz tests.
"""

from __future__ import annotations

import random
import uuid
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


# -- plain random values (no hypothesis), for fuzz corpora and benchmarks ----------------------


def random_primitive(kind: str, rng: random.Random) -> Any:
    if kind in _INTS:
        low, high = _INTS[kind]
        return rng.choice((low, high, 0, -1 if low < 0 else 1, rng.randint(low, high)))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.uniform(-1e9, 1e9)
    if kind == "string":
        return "".join(rng.choice("abcxyz-_.é€") for _ in range(rng.randint(0, 8)))
    if kind in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 16))
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise ValueError(kind)


def random_struct(
    message: CompiledMessage,
    cls: Any,
    fields: tuple[Field, ...],
    version: int,
    flexible: bool,
    rng: random.Random,
    depth: int = 0,
) -> Any:
    kwargs: dict[str, Any] = {}
    for f in fields:
        if not _present(f, version, flexible):
            continue
        if f.nullable_versions.contains(version) and rng.random() < 0.15:
            kwargs[f.name] = None
            continue

        def one(f: Field = f) -> Any:
            if f.is_struct:
                sub_cls, sub_fields = message.struct_info_for(f)
                return random_struct(
                    message, sub_cls, sub_fields, version, flexible, rng, depth + 1
                )
            return random_primitive(f.element_type, rng)

        if f.is_array:
            kwargs[f.name] = [one() for _ in range(rng.randint(0, 3 if depth < 2 else 2))]
        else:
            kwargs[f.name] = one()
    return cls(**kwargs)


def random_message(spec: MessageSpec, version: int, rng: random.Random) -> Any:
    message = compile_message(spec)
    flexible = spec.flexible_versions.contains(version)
    return random_struct(message, message.cls, spec.fields, version, flexible, rng)
