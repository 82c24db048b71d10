"""ApiVersions (18): the ranges of every API this broker has a handler for (KIP-511)."""

from __future__ import annotations

from typing import Any

from josefk.broker.context import RequestContext
from josefk.broker.dispatch import api_versions_body
from josefk.broker.handlers import handles
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode


@handles(ApiKey.API_VERSIONS)
def handle_api_versions(context: RequestContext, request: Any) -> Any:
    return api_versions_body(context.broker.handlers, ErrorCode.NONE)
