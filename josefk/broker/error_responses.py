"""The answer to a request whose handler failed: every part of the request gets the error.

Owns ``error_response``, josefk's form of Kafka's ``AbstractRequest.getErrorResponse``: when a
handler raises, the client still gets an answer of the right shape instead of a connection
that never answers. Built from the message declarations, not by hand per API: the response's
top-level ``error_code``/``error_message`` (where the version has them) carry the error, and
each array of the response mirrors the request's matching array (same name, or the only array
of structures in the request, as ``Produce.topic_data`` -> ``responses``), element by element,
copying the identifying fields (``name``, ``topic``, ``partition_index`` from ``partition``,
``resource_name``, ...) and putting the error in every ``error_code``.

Imports josefk.protocol only.
"""

from __future__ import annotations

from typing import Any, Final

from josefk.protocol.api import request_class, response_class
from josefk.protocol.errors import ErrorCode
from josefk.protocol.schema import Field

__all__ = ["error_response"]

# Request fields that identify what a response element answers for, under their response
# names: response name -> request names it may come from.
_IDENTIFYING: Final[dict[str, tuple[str, ...]]] = {
    "name": ("name", "topic"),
    "topic": ("topic", "name"),
    "topic_id": ("topic_id",),
    "index": ("index", "partition", "partition_index"),
    "partition": ("partition", "partition_index", "index"),
    "partition_index": ("partition_index", "partition", "index"),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "group_id": ("group_id",),
    "key": ("key",),
    "transactional_id": ("transactional_id",),
}


def error_response(
    api_key: int, version: int, request: Any, error: ErrorCode, message: str | None = None
) -> Any:
    """A response to ``request`` in which everything failed with ``error``."""
    response = response_class(api_key)
    request_spec = request_class(api_key).COMPILED.spec
    compiled = response.COMPILED
    return _build(
        compiled,
        response,
        compiled.spec.fields,
        request_spec.fields,
        request,
        version,
        int(error),
        message,
    )


def _build(
    compiled: Any,
    cls: Any,
    fields: tuple[Field, ...],
    request_fields: tuple[Field, ...],
    source: Any,
    version: int,
    error: int,
    message: str | None,
) -> Any:
    values: dict[str, Any] = {}
    for field in fields:
        if not field.versions.contains(version):
            continue
        name = field.name
        if name == "error_code":
            values[name] = error
        elif name == "error_message":
            values[name] = message
        elif field.is_array and field.fields:
            element_cls, element_fields = compiled.struct_info_for(field)
            mirrored = _matching_array(field, fields, request_fields, source)
            items: list[Any] = []
            if mirrored is not None:
                request_field, request_items = mirrored
                for item in request_items or ():
                    if request_field.fields:
                        items.append(
                            _build(
                                compiled,
                                element_cls,
                                element_fields,
                                request_field.fields,
                                item,
                                version,
                                error,
                                message,
                            )
                        )
                    else:  # an array of names (DeleteTopics v1-5's topic_names)
                        named = _Named(item)
                        items.append(
                            _build(
                                compiled,
                                element_cls,
                                element_fields,
                                (),
                                named,
                                version,
                                error,
                                message,
                            )
                        )
            values[name] = items
        elif name in _IDENTIFYING and not field.fields:
            for candidate in _IDENTIFYING[name]:
                if source is not None and hasattr(source, candidate):
                    values[name] = getattr(source, candidate)
                    break
    return cls(**values)


class _Named:
    """A bare name from a request's array of strings, seen as an element with a name."""

    __slots__ = ("name",)

    def __init__(self, name: Any) -> None:
        self.name = name


def _matching_array(
    field: Field, siblings: tuple[Field, ...], request_fields: tuple[Field, ...], source: Any
) -> tuple[Field, Any] | None:
    if source is None:
        return None
    # A request array that a response array of its own name answers is not mirrored twice
    # (Metadata's response has brokers and topics; only topics answers the request's).
    claimed = {f.name for f in siblings if f is not field}
    arrays = [
        f
        for f in request_fields
        if f.is_array
        and hasattr(source, f.name)
        and (f.name == field.name or f.name not in claimed)
    ]
    for candidate in arrays:
        if candidate.name == field.name and getattr(source, candidate.name) is not None:
            return candidate, getattr(source, candidate.name)
    with_structs = [f for f in arrays if f.fields and getattr(source, f.name)]
    if len(with_structs) == 1:
        return with_structs[0], getattr(source, with_structs[0].name)
    names = [f for f in arrays if not f.fields and getattr(source, f.name)]
    if len(names) == 1 and field.fields and any(f.name == "name" for f in field.fields):
        return names[0], getattr(source, names[0].name)
    return None
