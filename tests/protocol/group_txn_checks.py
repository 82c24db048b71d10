"""Shared checks for the group, SASL and transaction message declarations.

Used by test_messages_groups.py and test_messages_txn.py. Two kinds of checks live here:

* ``check_declaration``: static sanity of a declaration, needing no compiler.
* ``cross_check``: josefk's codec against kafka-python's and aiokafka's protocol classes, for
  every version they also implement: the same values give the same bytes, and each side
  decodes the other's bytes to the same values.

Imports josefk.protocol (schema, messages, compiler) and, for the cross-check, kafka-python
and aiokafka as independent references. Never imported by the package.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import uuid
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

from josefk.protocol.schema import MISSING, Field, MessageSpec, Versions

SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
NULLABLE_KINDS = {"string", "bytes", "records"}


# -- version arithmetic -------------------------------------------------------------------------


def _high(v: Versions, cap: int) -> int:
    return cap if v.high is None else min(v.high, cap)


def versions_in(v: Versions, within: Versions, top: int) -> set[int]:
    """The concrete versions of ``v`` that are also in ``within``, up to ``top``."""
    return (
        {x for x in range(v.low, _high(v, top) + 1) if within.contains(x)}
        if v.low <= top
        else set()
    )


def is_empty(v: Versions) -> bool:
    return v.high is not None and v.low > v.high


# -- static checks ------------------------------------------------------------------------------


def walk(fields: tuple[Field, ...], path: str = "") -> Iterator[tuple[str, Field]]:
    for f in fields:
        yield path + f.name, f
        if f.is_struct:
            yield from walk(f.fields, f"{path}{f.name}.")


def check_declaration(spec: MessageSpec) -> list[str]:
    """Every problem found in one declaration, as readable sentences (empty when sound)."""
    problems: list[str] = []
    valid = spec.valid_versions
    assert valid.high is not None, f"{spec.class_name}: valid versions must be bounded"
    top = valid.high
    all_valid = set(range(valid.low, top + 1))
    flexible = versions_in(spec.flexible_versions, valid, top)
    struct_shapes: dict[str, tuple[str, ...]] = {}

    def check(fields: tuple[Field, ...], parent: set[int], where: str) -> None:
        names = [f.name for f in fields]
        for name in {n for n in names if names.count(n) > 1}:
            problems.append(f"{where}: field name {name!r} declared twice")
        tags = [f.tag for f in fields if f.tag is not None]
        for tag in {t for t in tags if tags.count(t) > 1}:
            problems.append(f"{where}: tag {tag} used twice")
        for f in fields:
            at = f"{where}.{f.name}"
            if not SNAKE.match(f.name):
                problems.append(f"{at}: name is not snake_case")
            present = versions_in(f.versions, valid, top)
            tagged = versions_in(f.tagged_versions, valid, top) if f.tag is not None else set()
            if not present | tagged:
                problems.append(f"{at}: exists in no valid version ({f.versions})")
            bounded = f.versions.high is not None and not is_empty(f.versions)
            if bounded and not valid.low <= (f.versions.high or 0) <= top:
                problems.append(f"{at}: versions {f.versions} end outside {valid}")
            # "0+" inside a struct that appears in "4+" reads "whenever its parent is there".
            if not (present | tagged) & parent:
                problems.append(f"{at}: exists in none of its parent's versions")
            if f.tag is not None:
                if f.tag < 0:
                    problems.append(f"{at}: negative tag")
                if not tagged <= flexible:
                    problems.append(f"{at}: tagged in non-flexible versions")
            elif not is_empty(f.tagged_versions):
                problems.append(f"{at}: tagged versions without a tag")
            nullable = versions_in(f.nullable_versions, valid, top)
            if not nullable <= present | tagged:
                problems.append(f"{at}: nullable versions {f.nullable_versions} outside its own")
            if nullable and not (f.is_array or f.is_struct or f.type in NULLABLE_KINDS):
                problems.append(f"{at}: a {f.type} cannot be null")
            if f.default is None and not nullable:
                problems.append(f"{at}: default null but never nullable")
            if f.default is not MISSING and f.default is not None and not f.is_struct:
                kind = f.element_type
                if f.is_array:
                    problems.append(f"{at}: array defaults are not used here")
                elif kind in INT_RANGES:
                    lo, hi = INT_RANGES[kind]
                    if type(f.default) is not int or not lo <= f.default <= hi:
                        problems.append(f"{at}: default {f.default!r} is not a {kind}")
                elif kind == "bool" and type(f.default) is not bool:
                    problems.append(f"{at}: default {f.default!r} is not a bool")
                elif kind == "string" and type(f.default) is not str:
                    problems.append(f"{at}: default {f.default!r} is not a string")
            if f.is_struct:
                name = f.struct_name
                assert name is not None
                shape = tuple(g.name for g in f.fields)
                # The compiler names a struct's class after it: one name, one shape.
                if struct_shapes.setdefault(name, shape) != shape:
                    problems.append(f"{at}: struct {name} declared with two different shapes")
                if not f.fields:
                    problems.append(f"{at}: struct {name} has no fields")
                check(f.fields, (present | tagged) & parent, at)

    check(spec.fields, all_valid, spec.class_name)
    return problems


def check_pair(request: MessageSpec, response: MessageSpec) -> list[str]:
    problems = []
    if request.kind != "request" or response.kind != "response":
        problems.append(f"{request.name}: REQUEST/RESPONSE kinds swapped")
    for attr in ("api_key", "name", "valid_versions", "flexible_versions"):
        if getattr(request, attr) != getattr(response, attr):
            problems.append(f"{request.name}: request and response differ in {attr}")
    return problems


# -- values -------------------------------------------------------------------------------------


def _text() -> st.SearchStrategy[str]:
    return st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


def value_strategy(compiled: Any, fields: tuple[Field, ...], cls: Any, version: int) -> Any:
    """Objects of ``cls`` with every field present in ``version`` drawn, the rest at defaults."""
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields:
        tagged = f.tag is not None and f.tagged_versions.contains(version)
        if not (f.versions.contains(version) or tagged):
            continue
        if f.is_struct:
            sub_cls, sub_fields = compiled.struct_info_for(f)
            one = st.deferred(
                lambda c=sub_cls, sf=sub_fields: value_strategy(compiled, sf, c, version)
            )
            s: st.SearchStrategy[Any] = st.lists(one, max_size=3) if f.is_array else one
        else:
            s = _primitive(f.element_type)
            if f.is_array:
                s = st.lists(s, max_size=4)
        if f.nullable_versions.contains(version):
            s = st.none() | s
        parts[f.name] = s
    return st.builds(cls, **parts)


def _primitive(kind: str) -> st.SearchStrategy[Any]:
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        return st.integers(lo, hi)
    if kind == "bool":
        return st.booleans()
    if kind == "string":
        return _text()
    if kind == "bytes":
        return st.binary(max_size=16)
    if kind == "uuid":
        return st.uuids(allow_nil=True)
    if kind == "float64":
        return st.floats(allow_nan=False)
    raise AssertionError(f"no strategy for {kind}")


def to_plain(obj: Any, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    """The fields of ``obj`` present in ``version``, as nested dicts and lists."""
    out: dict[str, Any] = {}
    for f in fields:
        tagged = f.tag is not None and f.tagged_versions.contains(version)
        if not (f.versions.contains(version) or tagged):
            continue
        value = getattr(obj, f.name)
        if value is not None and f.is_struct:
            if f.is_array:
                value = [to_plain(v, f.fields, version) for v in value]
            else:
                value = to_plain(value, f.fields, version)
        elif isinstance(value, memoryview | bytearray):
            value = bytes(value)
        out[f.name] = value
    return out


# -- kafka-python -------------------------------------------------------------------------------

# Where kafka-python's snake_case of a Kafka name differs from ours.
KP_NAMES = {"enable_2pc": "enable2_pc"}
INT32_MIN = -(2**31)


def kafka_python_classes() -> dict[str, Any]:
    import kafka.protocol as kp
    from kafka.protocol.api_message import ApiMessage

    found: dict[str, Any] = {}
    for info in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        if ".old" in info.name or "schemas" in info.name or "generate" in info.name:
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, ApiMessage)
                and getattr(value, "_json", None) is not None
            ):
                found.setdefault(name, value)
    return found


def kp_versions(cls: Any) -> range:
    low, high = cls._valid_versions
    return range(low, high + 1)


def _kp_field(kp_struct: Any, name: str) -> Any:
    return kp_struct.fields[KP_NAMES.get(name, name)]


def to_kafka_python(
    kp_cls: Any, plain: dict[str, Any], fields: tuple[Field, ...], version: int
) -> Any:
    """Build kafka-python's object for ``plain`` (from ``to_plain``)."""
    kwargs: dict[str, Any] = {}
    by_name = {f.name: f for f in fields}
    for name, value in plain.items():
        f = by_name[name]
        kp_field = _kp_field(kp_cls._struct if hasattr(kp_cls, "_struct") else kp_cls, name)
        if value is not None and f.is_struct:
            sub = kp_field.data_class
            if f.is_array:
                value = [to_kafka_python(sub, v, f.fields, version) for v in value]
            else:
                value = to_kafka_python(sub, value, f.fields, version)
        elif kp_field.type_str == "bitfield":
            value = None if value == INT32_MIN else {b for b in range(32) if value >> b & 1}
        kwargs[KP_NAMES.get(name, name)] = value
    return kp_cls(version=version, **kwargs)


def from_kafka_python(kp_obj: Any, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        tagged = f.tag is not None and f.tagged_versions.contains(version)
        if not (f.versions.contains(version) or tagged):
            continue
        kp_field = _kp_field(kp_obj._struct, f.name)
        value = getattr(kp_obj, KP_NAMES.get(f.name, f.name))
        if value is not None and f.is_struct:
            if f.is_array:
                value = [from_kafka_python(v, f.fields, version) for v in value]
            else:
                value = from_kafka_python(value, f.fields, version)
        elif kp_field.type_str == "bitfield":
            value = INT32_MIN if value is None else _signed32(sum(1 << b for b in value))
        elif isinstance(value, memoryview | bytearray):
            value = bytes(value)
        elif f.element_type == "uuid" and not f.is_array and not isinstance(value, uuid.UUID):
            # kafka-python reads the all-zero uuid as None.
            value = uuid.UUID(int=0) if value is None else uuid.UUID(str(value))
        out[f.name] = value
    return out


def _signed32(value: int) -> int:
    return value - 2**32 if value >= 2**31 else value


# -- aiokafka -----------------------------------------------------------------------------------


def positional_classes(package: str, modules: tuple[str, ...]) -> dict[str, Any]:
    """Lower-cased ``<name><kind>_v<n>`` -> hand-written struct class (aiokafka's, or
    kafka-python's pre-3.0 classes kept under ``kafka.protocol.old``)."""
    found: dict[str, Any] = {}
    for module_name in modules:
        module = importlib.import_module(f"{package}.{module_name}")
        for name, value in vars(module).items():
            if isinstance(value, type) and re.search(r"_v\d+$", name) and hasattr(value, "SCHEMA"):
                found.setdefault(name.lower(), value)
    return found


def aiokafka_classes() -> dict[str, Any]:
    return positional_classes(
        "aiokafka.protocol", ("group", "commit", "coordination", "transaction", "admin")
    )


def kafka_python_old_classes() -> dict[str, Any]:
    return positional_classes(
        "kafka.protocol.old",
        (
            "group",
            "commit",
            "find_coordinator",
            "sasl_handshake",
            "sasl_authenticate",
            "init_producer_id",
            "add_partitions_to_txn",
            "add_offsets_to_txn",
            "end_txn",
            "txn_offset_commit",
            "admin",
        ),
    )


def to_positional(
    plain: dict[str, Any], fields: tuple[Field, ...], version: int
) -> tuple[Any, ...]:
    """Values in wire order as nested tuples: the shape aiokafka's structs take and return."""
    out: list[Any] = []
    for f in fields:
        if f.tag is not None and f.tagged_versions.contains(version):
            continue
        if not f.versions.contains(version):
            continue
        value = plain[f.name]
        if value is not None and f.is_struct:
            if f.is_array:
                value = [to_positional(v, f.fields, version) for v in value]
            else:
                value = to_positional(value, f.fields, version)
        out.append(value)
    return tuple(out)


def normalise_positional(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(normalise_positional(v) for v in value)
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


# -- the cross-checks ---------------------------------------------------------------------------


def cross_check_kafka_python(compiled: Any, kp_cls: Any, obj: Any, version: int) -> None:
    """Same bytes both ways, and each side decodes the other's bytes to the same values."""
    fields = compiled.spec.fields
    plain = to_plain(obj, fields, version)
    ours = compiled.encode(obj, version)
    theirs = bytes(to_kafka_python(kp_cls, plain, fields, version).encode(version=version))
    decoded_by_them = from_kafka_python(kp_cls.decode(ours, version=version), fields, version)
    assert decoded_by_them == plain, f"kafka-python decodes our v{version} bytes differently"
    assert to_plain(compiled.decode(theirs, version), fields, version) == plain
    assert ours == theirs, f"v{version}: our bytes differ from kafka-python's"


def cross_check_positional(compiled: Any, their_cls: Any, obj: Any, version: int) -> None:
    """As ``cross_check_kafka_python``, for classes built from positional nested tuples."""
    fields = compiled.spec.fields
    plain = to_plain(obj, fields, version)
    positional = to_positional(plain, fields, version)
    ours = compiled.encode(obj, version)
    schema = their_cls.SCHEMA
    theirs = bytes(their_cls(*_adapt(positional, schema, to_theirs=True)).encode())
    decoded = their_cls.decode(ours)
    values = tuple(decoded.get_item(name) for name in schema.names)
    values = _adapt(values, schema, to_theirs=False)
    assert normalise_positional(values) == normalise_positional(positional)
    assert to_plain(compiled.decode(theirs, version), fields, version) == plain
    assert ours == theirs, f"v{version}: our bytes differ from {their_cls.__module__}'s"


def reference_cases(specs: list[MessageSpec]) -> list[Any]:
    """One pytest param per (reference library, message, version) that both sides implement."""
    import pytest

    libraries = [
        ("kp", kafka_python_classes(), "json"),
        ("kp-old", kafka_python_old_classes(), "positional"),
        ("aio", aiokafka_classes(), "positional"),
    ]
    cases = []
    for spec in specs:
        top = spec.valid_versions.high
        assert top is not None
        for version in range(spec.valid_versions.low, top + 1):
            tag = f"{spec.class_name}-v{version}"
            for prefix, classes, style in libraries:
                if style == "json":
                    cls = classes.get(spec.class_name)
                    if cls is None or version not in kp_versions(cls):
                        continue
                else:
                    cls = classes.get(f"{spec.class_name}_v{version}".lower())
                    if cls is None:
                        continue
                cases.append(pytest.param(style, spec, version, cls, id=f"{prefix}-{tag}"))
    return cases


def run_reference_case(style: str, spec: MessageSpec, version: int, cls: Any, data: Any) -> None:
    import pytest

    compiler = pytest.importorskip("josefk.protocol.compiler")
    compiled = compiler.compile_message(spec)
    obj = data.draw(value_strategy(compiled, spec.fields, compiled.cls, version))
    if style == "json":
        cross_check_kafka_python(compiled, cls, obj, version)
    else:
        cross_check_positional(compiled, cls, obj, version)


def _adapt(value: Any, kind: Any, *, to_theirs: bool) -> Any:
    """kafka-python's old classes read authorized operations as a set of bits (None for
    INT32_MIN); the wire holds the int32 josefk keeps."""
    if getattr(kind, "__name__", "") == "BitField":
        if to_theirs:
            return None if value == INT32_MIN else {b for b in range(32) if value >> b & 1}
        return INT32_MIN if value is None else _signed32(sum(1 << b for b in value))
    if value is None:
        return None
    if hasattr(kind, "names") and hasattr(kind, "fields"):
        return tuple(
            _adapt(v, k, to_theirs=to_theirs) for v, k in zip(value, kind.fields, strict=True)
        )
    if hasattr(kind, "array_of"):
        return [_adapt(v, kind.array_of, to_theirs=to_theirs) for v in value]
    return value


# -- declaration against kafka-python's schema ---------------------------------------------------


def _kp_in(rng: tuple[int, int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def _kp_default(kp_field: Any) -> Any:
    raw = kp_field._json.get("default")
    if raw is None:
        return MISSING
    if raw == "null":
        return None
    if raw in ("true", "false"):
        return raw == "true"
    if isinstance(raw, str) and (
        kp_field.type_str.startswith("int") or kp_field.type_str == "bitfield"
    ):
        return int(raw, 0)
    return raw


def _same_default(ours: Any, theirs: Any) -> bool:
    zero = (0, "", False)
    if ours is MISSING or theirs is MISSING:
        other = theirs if ours is MISSING else ours
        return other is MISSING or (other in zero and other is not None)
    return bool(ours == theirs and type(ours) is type(theirs))


def layout_differences(spec: MessageSpec, kp_cls: Any) -> list[str]:
    """Where our declaration and kafka-python's schema (generated from Kafka's own message
    definitions) disagree: per version, the fields on the wire in order with their type,
    nullability and tag; and every field's default and ignorable flag."""
    out: list[str] = []

    def ours(fields: tuple[Field, ...], v: int) -> list[Any]:
        rows = []
        for f in fields:
            tagged = f.tag is not None and f.tagged_versions.contains(v)
            if f.versions.contains(v) or tagged:
                kind = ("[]S" if f.is_array else "S") if f.is_struct else f.type
                sub = ours(f.fields, v) if f.is_struct else None
                rows.append(
                    (f.name, kind, f.nullable_versions.contains(v), f.tag if tagged else None, sub)
                )
        return rows

    def theirs(fields: Any, v: int) -> list[Any]:
        rows = []
        for k in fields or ():
            tagged = k._tag is not None and _kp_in(k._tagged_versions, v)
            if _kp_in(k._versions, v) or tagged:
                if k._fields:
                    kind = "[]S" if k.is_array() else "S"
                else:
                    kind = "int32" if k.type_str == "bitfield" else k.type_str
                name = {b: a for a, b in KP_NAMES.items()}.get(k.name, k.name)
                sub = theirs(k._fields, v) if k._fields else None
                rows.append(
                    (name, kind, _kp_in(k._nullable_versions, v), k._tag if tagged else None, sub)
                )
        return rows

    top = spec.valid_versions.high
    assert top is not None
    for v in range(spec.valid_versions.low, top + 1):
        if v not in kp_versions(kp_cls):
            out.append(f"v{v}: kafka-python does not know this version")
            continue
        if kp_cls.flexible_version_q(v) != spec.flexible_versions.contains(v):
            out.append(f"v{v}: flexibility differs")
        a, b = ours(spec.fields, v), theirs(kp_cls._struct._fields, v)
        if a != b:
            out.append(f"v{v}: ours {a} != kafka-python {b}")

    def defaults(fields: tuple[Field, ...], kp_fields: Any, path: str) -> None:
        by_name = {k.name: k for k in kp_fields or ()}
        for f in fields:
            k = by_name.get(KP_NAMES.get(f.name, f.name))
            if k is None:
                continue
            if not f.is_struct and not _same_default(f.default, _kp_default(k)):
                out.append(f"{path}{f.name}: default {f.default!r} != {_kp_default(k)!r}")
            if f.ignorable != bool(k._ignorable):
                out.append(f"{path}{f.name}: ignorable {f.ignorable} != {bool(k._ignorable)}")
            if f.is_struct:
                defaults(f.fields, k._fields, f"{path}{f.name}.")

    defaults(spec.fields, kp_cls._struct._fields, "")
    return out


def module(name: str) -> Any:
    """The declaration module ``josefk.protocol.messages.<name>``."""
    return importlib.import_module(f"josefk.protocol.messages.{name}")


def names_at(spec: MessageSpec, version: int, path: str = "") -> list[str]:
    """Field names present in ``version`` at ``path`` (dotted struct field names)."""
    fields = spec.fields
    for step in filter(None, path.split(".")):
        fields = next(f for f in fields if f.name == step).fields
    return [f.name for f in fields if f.versions.contains(version)]


def assert_versions_and_discovery(name: str, expected: tuple[int, str, str]) -> None:
    """The module is documented, declares ``(api_key, valid, flexible)`` and is discovered."""
    from josefk.protocol.messages import all_specs

    mod = module(name)
    api_key, valid, flexible = expected
    assert mod.__doc__ and mod.__doc__.strip()
    for spec in (mod.REQUEST, mod.RESPONSE):
        assert spec.api_key == api_key
        assert str(spec.valid_versions) == valid
        assert str(spec.flexible_versions) == flexible
    assert (mod.REQUEST, mod.RESPONSE) in all_specs()
