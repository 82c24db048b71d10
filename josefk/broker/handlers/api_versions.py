"""ApiVersions (18): the ranges of every API this broker has a handler for (KIP-511).

Owns ``api_versions_body``, which the dispatcher also answers an unsupported ApiVersions
version with (a v0-shaped UNSUPPORTED_VERSION response listing the same ranges).
"""

from __future__ import annotations

from josefk.broker.context import RequestContext
from josefk.broker.handlers import HandlerSpec, handles
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import ApiVersionsRequest, ApiVersionsResponse


def api_versions_body(handlers: dict[int, HandlerSpec], error: ErrorCode) -> ApiVersionsResponse:
    """The ApiVersions response listing exactly the registered handlers' ranges."""
    return ApiVersionsResponse(
        error_code=int(error),
        api_keys=[
            ApiVersionsResponse.ApiVersion(
                api_key=key, min_version=spec.min_version, max_version=spec.max_version
            )
            for key, spec in sorted(handlers.items())
        ],
    )


@handles(ApiKey.API_VERSIONS)
def handle_api_versions(
    context: RequestContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    return api_versions_body(context.broker.handlers, ErrorCode.NONE)
