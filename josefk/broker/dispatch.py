"""Request dispatch: frame -> header and body -> handler -> encoded response parts.

Owns the rules for requests that cannot be served: an ApiVersions request of a version we do
not support is answered v0-shaped with UNSUPPORTED_VERSION and our ranges (KIP-511); any
other unknown API, unsupported version or undecodable body closes that connection with the
reason logged, as Kafka does, while the broker goes on serving everyone else. A handler that
raises (synchronously or in its coroutine) is answered with the request's error response,
every partition or resource carrying the error (``error_responses``), logged once with its
traceback and counted; the connection goes on serving. On a SASL listener a connection that
has not authenticated is served ApiVersions, SaslHandshake and SaslAuthenticate only, and
any other API key closes it from the header's first bytes, before the body is decoded (the
network layer has already bounded its frames by ``sasl.server.max.receive.size``).

Imports josefk.protocol, the handler registry and the network layer's types; must not import
josefk.storage.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable
from typing import Any

from josefk.broker.connection_errors import CloseConnection
from josefk.broker.context import BrokerContext, RequestContext
from josefk.broker.error_counts import response_error_counts
from josefk.broker.error_responses import error_response
from josefk.broker.errors import error_code_for
from josefk.broker.handlers import NO_RESPONSE, HandlerSpec
from josefk.broker.handlers.api_versions import api_versions_body
from josefk.broker.network import (
    ConnectionInfo,
    DispatchResult,
    Response,
    is_awaitable,
)
from josefk.broker.security.session import PLAIN, AuthenticationFailed
from josefk.protocol.api import (
    ApiKey,
    RequestDecodeError,
    decode_request,
    encode_response_parts,
)
from josefk.protocol.errors import ErrorCode, ProtocolDecodeError
from josefk.protocol.headers import RequestHeader

logger = logging.getLogger(__name__)

_SASL_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_API_KEY = struct.Struct(">h")


class RequestDispatcher:
    """Turns frames into responses. Runs on the event loop thread."""

    def __init__(self, broker: BrokerContext) -> None:
        self._broker = broker
        self._handlers: dict[int, HandlerSpec] = broker.handlers
        self._metrics = broker.metrics

    def dispatch(self, frame: memoryview, connection: ConnectionInfo) -> DispatchResult:
        started = time.perf_counter()
        if connection.sasl is not None and connection.sasl.raw_tokens:
            return self._raw_sasl_token(frame, connection)
        if connection.principal is None:
            self._check_unauthenticated_api(frame, connection)
        try:
            header, body = decode_request(frame)
        except RequestDecodeError as exc:
            return self._undecodable(exc, connection)
        except ProtocolDecodeError as exc:
            raise CloseConnection(f"unreadable request header: {exc}") from None
        api_key, version = header.request_api_key, header.request_api_version
        spec = self._handlers.get(api_key)
        if spec is None or not spec.supports(version):
            if api_key == ApiKey.API_VERSIONS:
                return self._unsupported_api_versions(header.correlation_id)
            raise CloseConnection(
                f"no handler for api key {api_key} version {version} (client {header.client_id!r})"
            )
        if connection.principal is None or connection.sasl is not None:
            self._check_authenticated(connection, api_key, spec.name)
        context = RequestContext(self._broker, header, version, connection)
        try:
            result = spec.fn(context, body)
        except CloseConnection:
            raise
        except Exception as exc:  # noqa: BLE001  a handler's failure becomes its error response
            return self._failed(context, spec, body, exc, started, frame.nbytes)
        if is_awaitable(result):
            return self._finish(context, spec, body, result, started, frame.nbytes)
        return self._respond(context, spec, result, started, frame.nbytes)

    def _raw_sasl_token(self, frame: memoryview, connection: ConnectionInfo) -> DispatchResult:
        """A token of a SASL exchange begun with a v0 SaslHandshake: the frame is the token
        itself and the answer is the server's token, unframed by any Kafka header. PLAIN's
        password check (PBKDF2) runs in the executor, as on the SaslAuthenticate path: a
        flood of failing logins must not stall the loop."""
        session = connection.sasl
        if session.mechanism == PLAIN:
            return self._raw_plain(bytes(frame), connection)
        try:
            answer = session.raw_step(bytes(frame))
        except AuthenticationFailed as exc:
            raise self._raw_failed(connection, exc) from None
        self._raw_authenticated(connection)
        return [answer]

    async def _raw_plain(self, token: bytes, connection: ConnectionInfo) -> Response:
        session = connection.sasl
        try:
            user, password = session.plain_credentials(token)
            await asyncio.get_running_loop().run_in_executor(
                None, session.check_plain, user, password
            )
        except AuthenticationFailed as exc:
            raise self._raw_failed(connection, exc) from None
        self._raw_authenticated(connection)
        return [b""]

    def _raw_failed(self, connection: ConnectionInfo, exc: AuthenticationFailed) -> CloseConnection:
        if self._metrics is not None:
            self._metrics.sockets.authentication(connection.listener_name, succeeded=False)
        return CloseConnection(f"SASL (v0 handshake) failed: {exc}")

    def _raw_authenticated(self, connection: ConnectionInfo) -> None:
        session = connection.sasl
        if session.principal is not None and not session.reauthenticating:
            session.raw_tokens = False
            connection.principal = session.principal
            if self._metrics is not None:
                self._metrics.sockets.authentication(connection.listener_name, succeeded=True)

    @staticmethod
    def _check_unauthenticated_api(frame: memoryview, connection: ConnectionInfo) -> None:
        """Before authentication the API key is read from the header's first two bytes and
        anything but the SASL APIs closes the connection before the body is decoded (Kafka's
        SaslServerAuthenticator): an unauthenticated client gets no decoder to feed."""
        if frame.nbytes < 2:
            raise CloseConnection("request header too short before SASL authentication")
        api_key = _API_KEY.unpack_from(frame)[0]
        if api_key not in _SASL_APIS:
            raise CloseConnection(
                f"api key {api_key} before SASL authentication on listener "
                f"{connection.listener_name}"
            )

    def _check_authenticated(self, connection: ConnectionInfo, api_key: int, name: str) -> None:
        """Kafka's rule for SASL listeners: until the client authenticated only ApiVersions,
        SaslHandshake and SaslAuthenticate are served, anything else closes the connection;
        a session past its lifetime (KIP-368) may only re-authenticate."""
        if api_key in _SASL_APIS:
            return
        if connection.principal is None:
            raise CloseConnection(
                f"{name} before SASL authentication on listener {connection.listener_name}"
            )
        expires = getattr(connection.sasl, "expires_at_ms", None)
        if expires is not None and self._broker.clock.monotonic_ms() >= expires:
            raise CloseConnection(
                f"the SASL session of {connection.principal} expired without re-authentication"
            )

    def _finish(
        self,
        context: RequestContext,
        spec: HandlerSpec,
        request: Any,
        pending: Awaitable[Any],
        started: float,
        size: int,
    ) -> asyncio.Future[Response | None]:
        """The handler's coroutine runs as a task of its own from now on, and the answer is a
        future completed from it. Cancelling the answer (the connection closed, the broker
        stops) cancels the handler; a wrapper coroutine that was cancelled before its first
        step would instead have dropped the handler's coroutine unawaited (and leaked it)."""
        handler = asyncio.ensure_future(pending)
        answer: asyncio.Future[Response | None] = asyncio.get_running_loop().create_future()

        def handler_done(done: asyncio.Future[Any]) -> None:
            if answer.done():
                return
            if done.cancelled():
                answer.cancel()
                return
            exc = done.exception()
            try:
                if exc is None:
                    response = self._respond(context, spec, done.result(), started, size)
                elif isinstance(exc, Exception) and not isinstance(exc, CloseConnection):
                    response = self._failed(context, spec, request, exc, started, size)
                else:
                    answer.set_exception(exc)
                    return
            except CloseConnection as close:
                answer.set_exception(close)
                return
            answer.set_result(response)

        def answer_done(done: asyncio.Future[Response | None]) -> None:
            if done.cancelled():
                handler.cancel()

        handler.add_done_callback(handler_done)
        answer.add_done_callback(answer_done)
        return answer

    def _failed(
        self,
        context: RequestContext,
        spec: HandlerSpec,
        request: Any,
        exc: Exception,
        started: float,
        size: int,
    ) -> Response | None:
        """A handler raised: answer every part of the request with the error (Kafka's
        getErrorResponse), log it once with its traceback, count it, keep the connection."""
        error = error_code_for(exc, log=False)
        logger.error(
            "%s v%d from %s failed, answered %s",
            spec.name,
            context.api_version,
            context.connection.peer,
            error.name,
            exc_info=exc,
        )
        # Counted with the error response's codes (every part of it carries the error).
        if spec.api_key == ApiKey.PRODUCE and getattr(request, "acks", None) == 0:
            raise CloseConnection(f"acks=0 produce failed: {error.name}") from None
        try:
            body = error_response(spec.api_key, context.api_version, request, error, str(exc))
        except Exception:
            logger.exception("cannot build the error response of %s; closing", spec.name)
            raise CloseConnection(f"{spec.name} failed and cannot be answered") from None
        return self._respond(context, spec, body, started, size)

    def _respond(
        self,
        context: RequestContext,
        spec: HandlerSpec,
        body: Any,
        started: float,
        size: int,
    ) -> Response | None:
        if self._metrics is not None:
            self._metrics.requests.request_completed(
                spec.name,
                context.api_version,
                seconds=time.perf_counter() - started,
                request_bytes=size,
            )
            if body is not NO_RESPONSE:
                # Kafka's ErrorsPerSec: every error code the response carries.
                self._metrics.requests.errors(
                    spec.name, response_error_counts(spec.api_key, context.api_version, body)
                )
        if body is NO_RESPONSE:
            return None
        return encode_parts(context.header, body, context.api_version)

    def _undecodable(self, exc: RequestDecodeError, connection: ConnectionInfo) -> DispatchResult:
        info = exc.info
        if info.api_key == ApiKey.API_VERSIONS:
            # KIP-511: a client newer than us learns our ranges instead of being cut off.
            return self._unsupported_api_versions(info.correlation_id)
        raise CloseConnection(
            f"cannot decode api key {info.api_key} version {info.api_version} from "
            f"{connection.peer}: {exc}"
        )

    def _unsupported_api_versions(self, correlation_id: int) -> Response:
        return encode_parts(
            RequestHeader(
                request_api_key=ApiKey.API_VERSIONS,
                request_api_version=0,
                correlation_id=correlation_id,
                client_id=None,
            ),
            api_versions_body(self._handlers, ErrorCode.UNSUPPORTED_VERSION),
            0,
        )


def encode_parts(header: RequestHeader, body: Any, version: int) -> Response:
    """Encode a response body; record fields stay as they are (file slices for sendfile)."""
    _, parts = encode_response_parts(
        header.correlation_id, body, version, api_key=header.request_api_key
    )
    # The network layer writes the size prefix itself.
    first = parts[0]
    parts[0] = first[4:]
    return parts  # type: ignore[no-any-return]
