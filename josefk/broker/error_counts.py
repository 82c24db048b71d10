"""The error codes a response carries, for ``kafka_network_requestmetrics_errors_total``.

Owns ``response_error_counts``: Kafka's ``AbstractResponse.errorCounts``, derived from the
message declarations instead of written per API. For each (API, version) a plan of where
``error_code`` fields sit (top level, in arrays of structures, in structures) is made once;
counting a response walks only those paths: per partition, never per record. Code 0 (NONE)
is not counted (josefk exports no NONE series).

Imports josefk.protocol only.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final

from josefk.protocol.api import response_class
from josefk.protocol.errors import ErrorCode
from josefk.protocol.schema import Field

__all__ = ["response_error_counts"]

_LEAF: Final = 0
_ARRAY: Final = 1
_STRUCT: Final = 2

# (field name, kind, the plan inside it for arrays and structures)
_Plan = tuple[tuple[str, int, Any], ...]


def _plan(fields: tuple[Field, ...], version: int) -> _Plan:
    steps: list[tuple[str, int, Any]] = []
    for field in fields:
        if not field.versions.contains(version):
            continue
        if field.name == "error_code" and not field.fields:
            steps.append((field.name, _LEAF, None))
        elif field.fields:
            inner = _plan(field.fields, version)
            if inner:
                steps.append((field.name, _ARRAY if field.is_array else _STRUCT, inner))
    return tuple(steps)


@cache
def _plan_for(api_key: int, version: int) -> _Plan:
    return _plan(response_class(api_key).COMPILED.spec.fields, version)


@cache
def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def _walk(value: Any, plan: _Plan, counts: dict[str, int]) -> None:
    for name, kind, inner in plan:
        found = getattr(value, name, None)
        if kind == _LEAF:
            if found:
                key = _name(found)
                counts[key] = counts.get(key, 0) + 1
        elif kind == _ARRAY:
            for item in found or ():
                _walk(item, inner, counts)
        elif found is not None:
            _walk(found, inner, counts)


def response_error_counts(api_key: int, version: int, response: Any) -> dict[str, int]:
    """Error name -> how many times ``response`` carries it (NONE left out)."""
    counts: dict[str, int] = {}
    _walk(response, _plan_for(api_key, version), counts)
    return counts
