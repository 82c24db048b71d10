"""API handlers, one module per Kafka API, and the registry they add themselves to.

Owns ``handles`` (the decorator a handler module uses) and ``registered_handlers``. The
versions a handler serves default to every version josefk's codec declares for its API; the
broker advertises in ApiVersions exactly what is registered here, so an API appears on the
wire only once a handler for it exists.

A handler takes the request context and the decoded request body and returns the response
body (or ``NO_RESPONSE`` for acks=0 produce), directly or as a coroutine. Handlers must not
import josefk.broker.server or josefk.broker.network.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

from josefk.protocol.api import api

if TYPE_CHECKING:
    from josefk.broker.context import RequestContext

HandlerResult: TypeAlias = Any
_Response = TypeVar("_Response")
#: What a handler returns: its response, or a coroutine that ends with it (when it waits).
Reply: TypeAlias = _Response | Awaitable[_Response]
HandlerFn: TypeAlias = Callable[["RequestContext", Any], HandlerResult | Awaitable[HandlerResult]]


class _NoResponse:
    """Returned by a handler when the client expects no answer (acks=0 produce)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE: Final = _NoResponse()
#: The type of ``NO_RESPONSE``, for a handler's return annotation.
NoResponse: TypeAlias = _NoResponse


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    fn: HandlerFn

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


_REGISTRY: dict[int, HandlerSpec] = {}


def handles(
    api_key: int, *, min_version: int | None = None, max_version: int | None = None
) -> Callable[[HandlerFn], HandlerFn]:
    """Register a handler for ``api_key``; the range defaults to the declared versions."""
    declared = api(api_key)

    def register(fn: HandlerFn) -> HandlerFn:
        low = declared.min_version if min_version is None else min_version
        high = declared.max_version if max_version is None else max_version
        if not (declared.min_version <= low <= high <= declared.max_version):
            raise ValueError(f"{declared.name}: handler versions {low}-{high} not declared")
        _REGISTRY[api_key] = HandlerSpec(api_key, declared.name, low, high, fn)
        return fn

    return register


def registered_handlers() -> dict[int, HandlerSpec]:
    """Every handler, importing each module of this package once."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return dict(sorted(_REGISTRY.items()))
