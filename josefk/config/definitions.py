"""Config keys declared once, as Kafka's ConfigDef declares them: name, type, default,
validation, documentation, update mode (dynamic or not) and sensitivity.

Owns ``ConfigKey`` (one key as josefk knows it), ``Dynamic`` (Kafka's update modes),
``Support`` (what josefk does with the key: honours it, accepts it as inert, or refuses it),
``config_field`` (the pydantic ``Field`` of a key of a config model, carrying the extra
declarations) and ``keys_of`` (a model's ``ConfigKey``s, read back from its fields). The
broker's and the topic's declarations live with their models (josefk.config.broker,
josefk.config.topic); everything that lists, documents, describes or classifies a key (the
dynamic-config list, DescribeConfigs' documentation and sensitivity, ``josefk serve
--help-config``, docs/configuration.md) reads them from there.

Imports pydantic only; must not import the rest of josefk.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from annotated_types import Ge, Le
from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

__all__ = [
    "ConfigKey",
    "Dynamic",
    "Support",
    "config_field",
    "format_value",
    "keys_of",
]

LONG_MAX: Final = (1 << 63) - 1
INT_MAX: Final = (1 << 31) - 1
DOUBLE_MAX: Final = 1.7976931348623157e308


class Dynamic(enum.StrEnum):
    """Kafka's update modes: whether AlterConfigs may change a key without a restart."""

    READ_ONLY = "read-only"
    # One broker's resource only (BROKER "<id>").
    PER_BROKER = "per-broker"
    # One broker's resource or the cluster-wide default (BROKER "").
    CLUSTER_WIDE = "cluster-wide"
    # Per broker, and only with a listener prefix (listener.name.<l>.ssl.keystore.location).
    PER_LISTENER = "per-broker, listener prefix"


class Support(enum.StrEnum):
    """What josefk does with a key of Kafka's."""

    HONOURED = "honoured"
    # Accepted, stored and described with its source; it changes nothing here (its feature is
    # off or absent, or josefk meets its purpose another way), and a log line says so.
    INERT = "inert"
    # Refused with the reason: a user would rely on an effect josefk cannot give.
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One config key as josefk knows it.

    ``type`` is Kafka's ConfigDef type name (``int``, ``long``, ``double``, ``boolean``,
    ``string``, ``list``, ``class``, ``password``); ``default`` the default in Kafka's string
    form (None: no default, null); ``valid`` the accepted values in words; ``reason`` why an
    inert key changes nothing or why a refused one is refused.
    """

    name: str
    type: str
    default: str | None
    doc: str
    valid: str = ""
    dynamic: Dynamic = Dynamic.READ_ONLY
    sensitive: bool = False
    support: Support = Support.HONOURED
    reason: str = ""

    @property
    def is_dynamic(self) -> bool:
        return self.dynamic is not Dynamic.READ_ONLY


# Kafka's DescribeConfigs config_type values (KIP-569), by ConfigDef type name.
WIRE_TYPES: Final[Mapping[str, int]] = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}


def config_field(
    name: str,
    default: Any,
    doc: str,
    *,
    dynamic: Dynamic = Dynamic.READ_ONLY,
    sensitive: bool = False,
    inert: str = "",
    type: str | None = None,
    **constraints: Any,
) -> Any:
    """The pydantic field of config key ``name``: its default and constraints (validation),
    its documentation, and josefk's declarations beside them. ``inert``: why the key, accepted
    for compatibility, changes nothing here. ``type``: Kafka's type name where the Python
    annotation does not tell it (``long`` against ``int``, ``password``)."""
    extra: dict[str, Any] = {"dynamic": dynamic.value, "sensitive": sensitive, "inert": inert}
    if type is not None:
        extra["kafka_type"] = type
    return Field(
        default=default, alias=name, description=doc, json_schema_extra=extra, **constraints
    )


def keys_of(model: type[BaseModel]) -> dict[str, ConfigKey]:
    """Every key a config model declares (its aliased fields), by name."""
    keys: dict[str, ConfigKey] = {}
    for info in model.model_fields.values():
        if info.alias is None:
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        inert = str(extra.get("inert", ""))
        keys[info.alias] = ConfigKey(
            name=info.alias,
            type=str(extra.get("kafka_type") or _kafka_type(info)),
            default=format_value(info.get_default(call_default_factory=True)),
            doc=info.description or "",
            valid=_valid(info),
            dynamic=Dynamic(str(extra.get("dynamic", Dynamic.READ_ONLY.value))),
            sensitive=bool(extra.get("sensitive", False)),
            support=Support.INERT if inert else Support.HONOURED,
            reason=inert,
        )
    return keys


def format_value(value: object) -> str | None:
    """A value in Kafka's string form (None stays None: null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    if isinstance(value, float) and value == DOUBLE_MAX:
        return "1.7976931348623157E308"
    return str(value)


def _base_annotation(annotation: Any) -> Any:
    """``Annotated[int | None, ...]`` -> ``int``."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _base_annotation(args[0])
    return annotation


def _kafka_type(info: FieldInfo) -> str:
    annotation = _base_annotation(info.annotation)
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return "boolean"
    if annotation is float:
        return "double"
    if annotation is int:
        upper = _bound(info, Le)
        return "long" if upper is not None and upper > INT_MAX else "int"
    if origin is tuple or origin is dict:
        return "list"
    return "string"


def _bound(info: FieldInfo, kind: type[Ge] | type[Le]) -> Any:
    for item in info.metadata:
        if isinstance(item, kind):
            return item.ge if isinstance(item, Ge) else item.le
    return None


def _valid(info: FieldInfo) -> str:
    annotation = _base_annotation(info.annotation)
    if typing.get_origin(annotation) is Literal:
        return ", ".join(str(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is tuple:
        inner = typing.get_args(annotation)
        if inner and typing.get_origin(inner[0]) is Literal:
            return "any of " + ", ".join(str(a) for a in typing.get_args(inner[0]))
    low, high = _bound(info, Ge), _bound(info, Le)
    if high in (INT_MAX, LONG_MAX):
        high = None  # the type's own bound: nothing to say
    if low is None and high is None:
        return ""
    shown_low = "..." if low is None else format_value(low)
    shown_high = "..." if high is None else format_value(high)
    return f"[{shown_low}, {shown_high}]"
