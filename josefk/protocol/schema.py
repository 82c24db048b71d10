"""josefk's declarative form for Kafka protocol messages.

Owns the vocabulary used by ``josefk.protocol.messages``: a message is declared once, for all
of its versions, as a tree of fields that each say in which versions they exist, when they may
be null, their default and, for tagged fields, their tag. ``josefk.protocol.compiler`` turns a
declaration into dataclasses and straight-line encoders and decoders; nothing here encodes.
Imports nothing from josefk.

A declaration reads like this (facts from Kafka's protocol guide, form our own)::

    REQUEST = request(
        api_key=18, name="ApiVersions", valid="0-4", flexible="3+",
        fields=[
            field("client_software_name", "string", "3+"),
            field("client_software_version", "string", "3+"),
        ],
    )

Types are the names Kafka's guide uses: ``bool int8 int16 uint16 int32 uint32 int64 float64
string bytes records uuid``, an array of them as ``"[]int32"``, and arrays of structs or
single structs through ``array(...)`` and ``struct(...)``. Whether a string, bytes or array is
"compact" (varint length) is not declared per field: it follows from the message's flexible
versions, as on the wire.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

PRIMITIVE_TYPES: Final = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "float64",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)

_VERSIONS = re.compile(r"^(?:(none)|(\d+)\+|(\d+)-(\d+)|(\d+))$")


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive range of versions; ``high`` None means "and every later version"."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str) -> Versions:
        """``"3+"``, ``"0-7"``, ``"5"`` or ``"none"``."""
        match = _VERSIONS.match(text.strip())
        if match is None:
            raise ValueError(f"not a version range: {text!r}")
        none, open_low, low, high, exact = match.groups()
        if none:
            return NO_VERSIONS
        if open_low is not None:
            return cls(int(open_low), None)
        if exact is not None:
            return cls(int(exact), int(exact))
        if int(low) > int(high):
            raise ValueError(f"empty version range: {text!r}")
        return cls(int(low), int(high))

    def contains(self, version: int) -> bool:
        return self.low <= version and (self.high is None or version <= self.high)

    def __contains__(self, version: int) -> bool:
        return self.contains(version)

    def __str__(self) -> str:
        if self is NO_VERSIONS or self.low > (self.high if self.high is not None else self.low):
            return "none"
        if self.high is None:
            return f"{self.low}+"
        return f"{self.low}-{self.high}" if self.low != self.high else str(self.low)


NO_VERSIONS: Final = Versions(1 << 30, -1)
ALL_VERSIONS: Final = Versions(0, None)


class _Missing:
    """Marker for "no default declared": the type's zero value is used (0, "", [], ...)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message or struct.

    ``type`` is a primitive name, ``"[]<primitive>"``, or ``"[]<StructName>"`` /
    ``"<StructName>"`` with ``fields`` holding the struct's own fields. A field with a ``tag``
    is a tagged field in ``tagged_versions`` (which must be flexible versions); it then
    lives in the tagged-field section instead of the fixed layout.
    """

    name: str
    type: str
    versions: Versions
    nullable_versions: Versions = NO_VERSIONS
    default: Any = MISSING
    tag: int | None = None
    tagged_versions: Versions = NO_VERSIONS
    fields: tuple[Field, ...] = ()
    ignorable: bool = False

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """The type of one element for arrays, the type itself otherwise."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVE_TYPES

    @property
    def struct_name(self) -> str | None:
        return self.element_type if self.is_struct else None


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """A request or response of one API, for all its versions."""

    api_key: int
    name: str
    kind: Literal["request", "response"]
    valid_versions: Versions
    flexible_versions: Versions
    fields: tuple[Field, ...]

    @property
    def class_name(self) -> str:
        return f"{self.name}{self.kind.capitalize()}"


def _versions(value: str | Versions | None) -> Versions:
    if value is None:
        return NO_VERSIONS
    return value if isinstance(value, Versions) else Versions.parse(value)


def field(
    name: str,
    type: str,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    default: Any = MISSING,
    tag: int | None = None,
    tagged: str | None = None,
    ignorable: bool = False,
) -> Field:
    """A primitive field or an array of primitives."""
    element = type[2:] if type.startswith("[]") else type
    if element not in PRIMITIVE_TYPES:
        raise ValueError(f"{name}: {type!r} is not a primitive type; use array() or struct()")
    return Field(
        name=name,
        type=type,
        versions=_versions(versions),
        nullable_versions=_versions(nullable),
        default=default,
        tag=tag,
        tagged_versions=_versions(tagged) if tag is not None else NO_VERSIONS,
        ignorable=ignorable,
    )


def array(
    name: str,
    struct_name: str,
    versions: str,
    fields: list[Field],
    *,
    nullable: str | None = None,
    tag: int | None = None,
    tagged: str | None = None,
    ignorable: bool = False,
) -> Field:
    """An array of structs, each struct declared inline by its fields."""
    return Field(
        name=name,
        type=f"[]{struct_name}",
        versions=_versions(versions),
        nullable_versions=_versions(nullable),
        tag=tag,
        tagged_versions=_versions(tagged) if tag is not None else NO_VERSIONS,
        fields=tuple(fields),
        ignorable=ignorable,
    )


def struct(
    name: str,
    struct_name: str,
    versions: str,
    fields: list[Field],
    *,
    nullable: str | None = None,
    tag: int | None = None,
    tagged: str | None = None,
    ignorable: bool = False,
) -> Field:
    """A single nested struct (not an array)."""
    return Field(
        name=name,
        type=struct_name,
        versions=_versions(versions),
        nullable_versions=_versions(nullable),
        tag=tag,
        tagged_versions=_versions(tagged) if tag is not None else NO_VERSIONS,
        fields=tuple(fields),
        ignorable=ignorable,
    )


def request(
    *, api_key: int, name: str, valid: str, flexible: str, fields: list[Field]
) -> MessageSpec:
    return MessageSpec(
        api_key, name, "request", _versions(valid), _versions(flexible), tuple(fields)
    )


def response(
    *, api_key: int, name: str, valid: str, flexible: str, fields: list[Field]
) -> MessageSpec:
    return MessageSpec(
        api_key, name, "response", _versions(valid), _versions(flexible), tuple(fields)
    )
