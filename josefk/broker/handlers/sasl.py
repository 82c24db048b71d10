"""SaslHandshake (17) and SaslAuthenticate (36): SASL authentication on SASL listeners.

The handshake chooses the mechanism; after v1 the tokens travel in SaslAuthenticate requests
(KIP-152), each carrying one token of the exchange; after v0 they come as raw size-prefixed
frames (``SaslSession.raw_step``, which the dispatcher calls for such a frame), as old clients send them.
librdkafka needs v0 in ApiVersions to use SASL at all, though it then uses v1. A failure is answered with
SASL_AUTHENTICATION_FAILED and a message that does not say which part was wrong, and the
connection closes after that answer, as Kafka does. Once authenticated, the principal
(``User:NAME``) stays on the connection; with ``connections.max.reauth.ms`` the answer tells
the client its session lifetime and a later SaslHandshake re-authenticates it (KIP-368).
"""

from __future__ import annotations

import asyncio
import logging

from josefk.broker.context import RequestContext
from josefk.broker.handlers import Reply, handles
from josefk.broker.security.scram import FAILED
from josefk.broker.security.session import (
    PLAIN,
    AuthenticationFailed,
    IllegalSaslState,
    SaslSession,
)
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

logger = logging.getLogger(__name__)

HandshakeResponse = SaslHandshakeResponse
AuthenticateResponse = SaslAuthenticateResponse


def _count(context: RequestContext, *, succeeded: bool) -> None:
    metrics = context.broker.metrics
    if metrics is not None:
        metrics.sockets.authentication(context.connection.listener_name, succeeded=succeeded)


def _session(context: RequestContext) -> SaslSession:
    connection = context.connection
    if connection.sasl is None:
        config = context.broker.config
        store = context.broker.credentials
        assert store is not None, "a SASL listener without a credential store"
        connection.sasl = SaslSession(tuple(config.sasl_enabled_mechanisms), store)
    session: SaslSession = connection.sasl
    return session


@handles(ApiKey.SASL_HANDSHAKE)
def handle_sasl_handshake(
    context: RequestContext, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    connection = context.connection
    enabled = list(context.broker.config.sasl_enabled_mechanisms)
    if not connection.security_protocol.startswith("SASL_"):
        # Kafka answers this on a PLAINTEXT listener too: there is nothing to authenticate.
        return HandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    session = _session(context)
    if session.principal is not None and not session.reauthenticating:
        session.begin_reauthentication()
    try:
        accepted = session.handshake(request.mechanism)
    except IllegalSaslState as exc:
        logger.info("SASL from %s: %s; closing", connection.peer, exc)
        connection.close_after_response = True
        return HandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled)
    if not accepted:
        logger.info(
            "SASL from %s: mechanism %r is not enabled; closing", connection.peer, request.mechanism
        )
        _count(context, succeeded=False)
        connection.close_after_response = True
        return HandshakeResponse(
            error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
        )
    # v0 (KIP-43): the tokens follow as raw frames, not SaslAuthenticate requests.
    session.raw_tokens = context.api_version == 0
    return HandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)


@handles(ApiKey.SASL_AUTHENTICATE)
def handle_sasl_authenticate(
    context: RequestContext, request: SaslAuthenticateRequest
) -> Reply[SaslAuthenticateResponse]:
    connection = context.connection
    session = connection.sasl
    if (
        not connection.security_protocol.startswith("SASL_")
        or not isinstance(session, SaslSession)
        or not session.expecting_token
    ):
        connection.close_after_response = connection.security_protocol.startswith("SASL_")
        return AuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate is not expected now: send SaslHandshake first",
            auth_bytes=b"",
        )
    token = bytes(request.auth_bytes)
    if session.mechanism == PLAIN:
        return _plain(context, session, token)
    try:
        answer = session.scram_step(token)
    except AuthenticationFailed as exc:
        return _failed(context, exc)
    if session.principal is not None and not session.reauthenticating:
        return _succeeded(context, session, answer)
    return AuthenticateResponse(error_code=ErrorCode.NONE, error_message=None, auth_bytes=answer)


async def _plain(
    context: RequestContext, session: SaslSession, token: bytes
) -> SaslAuthenticateResponse:
    try:
        user, password = session.plain_credentials(token)
        # PBKDF2 takes milliseconds: off the event loop, so other connections go on.
        await asyncio.get_running_loop().run_in_executor(None, session.check_plain, user, password)
    except AuthenticationFailed as exc:
        return _failed(context, exc)
    return _succeeded(context, session, b"")


def _succeeded(
    context: RequestContext, session: SaslSession, answer: bytes
) -> SaslAuthenticateResponse:
    connection = context.connection
    connection.principal = session.principal
    lifetime = context.broker.config.connections_max_reauth_ms
    session.expires_at_ms = context.broker.clock.monotonic_ms() + lifetime if lifetime > 0 else None
    _count(context, succeeded=True)
    logger.debug("SASL from %s: authenticated %s", connection.peer, session.principal)
    return AuthenticateResponse(
        error_code=ErrorCode.NONE,
        error_message=None,
        auth_bytes=answer,
        session_lifetime_ms=lifetime,
    )


def _failed(context: RequestContext, exc: AuthenticationFailed) -> SaslAuthenticateResponse:
    connection = context.connection
    # The detail in parentheses (malformed message, ...) is for the broker's log; the client
    # is told only that its credentials were not accepted.
    logger.info("SASL from %s failed: %s; closing", connection.peer, exc)
    _count(context, succeeded=False)
    connection.close_after_response = True
    return AuthenticateResponse(
        error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=FAILED, auth_bytes=b""
    )
