"""One TCP connection to one broker: framing, correlation ids, pipelining, version choice.

Owns ``BrokerConnection``, an asyncio Protocol that writes request frames as they are asked
for (many in flight at once) and matches each response frame to its request. It is a
``BufferedProtocol``: the event loop receives straight into the frame buffers of a
``FrameReceiver``, so the record data of a large fetch response (a follower replicating,
a consumer catching up) is never copied on its way to the decoder. Kafka answers
the requests of one connection in the order they were sent, so in-flight requests wait in a
FIFO and every response must carry the correlation id at its head; one that does not means
the stream is out of step and the connection is closed (with every waiter failed by
``KafkaConnectionError``). A request that gets no answer within its timeout closes the
connection too: later responses could no longer be trusted to line up.

On connect the connection asks the broker for its ApiVersions and keeps, per API, the highest
version both sides support (``version_for``). Requests with acks=0 Produce expect no response.

Security (``ClientSecurity``): over SSL/SASL_SSL the TCP connection is wrapped in TLS by
asyncio (``create_connection(ssl=...)``) before ApiVersions. Over SASL_* the connection then
authenticates: SaslHandshake v1 and SaslAuthenticate requests carrying the mechanism's tokens
(``josefk.client.sasl``); a refusal raises the broker's error (SaslAuthenticationFailedError
with its message) from ``open``, never a retry. When the broker gives the session a lifetime
(KIP-368), the connection re-authenticates on the first request after 85-95% of it (Kafka's
window), once the requests in flight have been answered; requests made meanwhile wait.

Imports josefk.protocol and josefk.client (errors, security, sasl) only; must not import
josefk.storage or josefk.broker.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any, Final, cast

from josefk.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotAKafkaBrokerError,
    SslAuthenticationError,
    UnsupportedVersionError,
    error_for,
)
from josefk.client.sasl import ScramClient, plain_token
from josefk.client.security import PLAINTEXT, ClientSecurity
from josefk.protocol import ApiKey, FrameReceiver, ProtocolDecodeError, RequestHeader
from josefk.protocol import headers as protocol_headers
from josefk.protocol.api import (
    api_versions_ranges,
    decode_response,
    encode_request,
    request_message,
)
from josefk.protocol.compiler import split_parts
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

log = logging.getLogger("josefk.client")

CLIENT_SOFTWARE_NAME: Final = "josefk-python"
CLIENT_SOFTWARE_VERSION: Final = "0.1.0"
_INT32_MAX: Final = 0x7FFFFFFF
_FRAME_SIZE: Final = struct.Struct(">i")

# Versions this client knows how to fill and read. An API absent here is used up to the
# highest version the codec declares. Capped where a newer version changes semantics the
# client does not handle yet (e.g. topic ids in OffsetCommit/OffsetFetch v10).
CLIENT_MAX_VERSIONS: Final[dict[int, int]] = {
    # v4+ batch transactions for broker-to-coordinator checks (KIP-890); clients use v3.
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    # v5 bumps the epoch at every EndTxn (KIP-890 part 2, transaction version 2), which
    # this client does not implement; it adds partitions explicitly instead.
    ApiKey.END_TXN: 4,
    ApiKey.TXN_OFFSET_COMMIT: 4,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9,
    ApiKey.DELETE_TOPICS: 5,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.JOIN_GROUP: 7,
    ApiKey.METADATA: 12,
}

BodyOrBuilder = Any | Callable[[int], Any]


class _Pending:
    __slots__ = ("api_key", "correlation_id", "future", "version")

    def __init__(
        self, correlation_id: int, api_key: int, version: int, future: asyncio.Future[Any]
    ) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.future = future


def encode_request_parts(header: RequestHeader, body: Any) -> list[Any]:
    """A request frame as buffers to write in order: size prefix, header and fields
    encoded, each ``records`` value of ``body`` the caller's own object (not copied)."""
    message = request_message(header.request_api_key)
    out = bytearray(4)
    protocol_headers.encode_request_header(
        out,
        header,
        protocol_headers.request_header_version(header.request_api_key, header.request_api_version),
    )
    external = message.encode_parts_into(out, body, header.request_api_version)
    size = len(out) - 4
    for _position, records in external:
        size += len(records)
    _FRAME_SIZE.pack_into(out, 0, size)
    return split_parts(out, external)


class BrokerConnection(asyncio.BufferedProtocol):
    """A connection to ``host:port``; create with ``await BrokerConnection.open(...)``.

    Methods are called from the event loop only. ``request`` may be called concurrently: each
    call writes its frame synchronously, so frames never interleave and the FIFO order of
    pending requests is the write order.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int,
        client_id: str,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.security = security
        # KIP-368: monotonic time of the next re-authentication (None: never), and the one
        # under way; both None on PLAINTEXT, so requests pay one attribute test for them.
        self._reauthenticate_at: float | None = None
        self._reauthentication: asyncio.Task[None] | None = None
        self._authentication_timeout_s = 30.0
        self.versions: dict[int, int] = {}
        self._transport: asyncio.Transport | None = None
        self._receiver = FrameReceiver()
        self._pending: collections.deque[_Pending] = collections.deque()
        self._next_correlation_id = 0
        self._closed = False
        self._close_error: BaseException | None = None
        self._closed_event = asyncio.Event()
        self._write_ready = asyncio.Event()
        self._write_ready.set()

    # ------------------------------------------------------------------ life cycle

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        node_id: int,
        client_id: str,
        timeout_s: float,
        security: ClientSecurity = PLAINTEXT,
    ) -> BrokerConnection:
        """Connect, negotiate API versions and authenticate; raises KafkaConnectionError when
        the broker cannot be reached, SslAuthenticationError when TLS fails and the broker's
        error (SaslAuthenticationFailedError...) when SASL fails."""
        loop = asyncio.get_running_loop()
        conn = cls(host, port, node_id=node_id, client_id=client_id, security=security)
        connected = False
        try:
            async with asyncio.timeout(timeout_s):
                context = security.ssl_context
                if context is None:
                    transport, _ = await loop.create_connection(lambda: conn, host, port)
                else:
                    transport, _ = await loop.create_connection(
                        lambda: conn,
                        host,
                        port,
                        ssl=context,
                        server_hostname=host,
                        ssl_handshake_timeout=timeout_s,
                    )
                # uvloop may report connection_made only after create_connection returns.
                conn._transport = transport
                connected = True
                await conn._negotiate_versions(timeout_s)
                if security.uses_sasl:
                    conn._authentication_timeout_s = timeout_s
                    await conn._authenticate(timeout_s)
        except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError) as exc:
            conn.close()
            if security.ssl_context is None or connected:
                raise _describe_failure(host, port, node_id, exc, connected, timeout_s) from exc
            # A plaintext listener reads the ClientHello as a bad request and hangs up.
            raise SslAuthenticationError(
                f"TLS with {host}:{port} failed: the other side closed the connection during "
                "the handshake (is it a TLS listener? check security.protocol)",
                node_id=node_id,
            ) from None
        except ssl.SSLError as exc:
            conn.close()
            raise SslAuthenticationError(
                f"TLS with {host}:{port} failed: {exc.reason or exc}"
                + (
                    " (is it a TLS listener? check security.protocol)"
                    if exc.reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE")
                    else ""
                ),
                node_id=node_id,
            ) from None
        except (OSError, TimeoutError, KafkaConnectionError, KafkaTimeoutError) as exc:
            conn.close()
            raise _describe_failure(host, port, node_id, exc, connected, timeout_s) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    async def _negotiate_versions(self, timeout_s: float) -> None:
        ranges = api_versions_ranges()
        version = min(3, ranges[ApiKey.API_VERSIONS][1])
        body = ApiVersionsRequest(
            client_software_name=CLIENT_SOFTWARE_NAME,
            client_software_version=CLIENT_SOFTWARE_VERSION,
        )
        try:
            response = await self.request(
                ApiKey.API_VERSIONS, body, version=version, timeout_s=timeout_s
            )
        except ProtocolDecodeError:
            # A broker without v3 answers in v0's shape (KIP-511); ask again in v0.
            response = await self.request(ApiKey.API_VERSIONS, body, version=0, timeout_s=timeout_s)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION and version != 0:
            response = await self.request(ApiKey.API_VERSIONS, body, version=0, timeout_s=timeout_s)
        if response.error_code:
            raise error_for(response.error_code, node_id=self.node_id)
        chosen: dict[int, int] = {}
        for entry in response.api_keys:
            ours = ranges.get(entry.api_key)
            if ours is None:
                continue
            low = max(ours[0], entry.min_version)
            high = min(ours[1], entry.max_version, CLIENT_MAX_VERSIONS.get(entry.api_key, 1 << 15))
            if low <= high:
                chosen[entry.api_key] = high
        self.versions = chosen

    async def _authenticate(self, timeout_s: float) -> None:
        """SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate requests."""
        security = self.security
        mechanism = security.sasl_mechanism
        username, password = security.sasl_username, security.sasl_password
        assert mechanism is not None and username is not None and password is not None
        if ApiKey.SASL_HANDSHAKE not in self.versions or self.versions[ApiKey.SASL_HANDSHAKE] < 1:
            raise UnsupportedVersionError(
                f"{self} does not offer SaslHandshake v1: it cannot authenticate this client",
                api_key=ApiKey.SASL_HANDSHAKE,
            )
        handshake = await self._send_and_wait(
            ApiKey.SASL_HANDSHAKE,
            SaslHandshakeRequest(mechanism=mechanism),
            version=1,
            timeout_s=timeout_s,
        )
        if handshake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            offered = ", ".join(handshake.mechanisms) or "none"
            raise error_for(
                handshake.error_code,
                f"{self} does not offer SASL mechanism {mechanism} (it offers {offered})",
            )
        if handshake.error_code == ErrorCode.ILLEGAL_SASL_STATE:
            raise error_for(
                handshake.error_code,
                f"{self} does not expect SASL authentication: is it a PLAINTEXT or SSL "
                "listener? (check security.protocol)",
            )
        if handshake.error_code:
            raise error_for(handshake.error_code, node_id=self.node_id)
        if mechanism == "PLAIN":
            final = await self._sasl_token(plain_token(username, password), timeout_s)
        else:
            scram = ScramClient(mechanism, username, password)
            server_first = await self._sasl_token(scram.first(), timeout_s)
            final = await self._sasl_token(scram.final(bytes(server_first.auth_bytes)), timeout_s)
            scram.verify(bytes(final.auth_bytes))
        lifetime_ms = getattr(final, "session_lifetime_ms", 0) or 0
        if lifetime_ms > 0:
            # Kafka's client re-authenticates at a random point of 85-95% of the lifetime, so
            # connections opened together do not all re-authenticate at once.
            share = random.uniform(0.85, 0.95)
            self._reauthenticate_at = time.monotonic() + lifetime_ms * share / 1000.0
        else:
            self._reauthenticate_at = None
        log.debug("%s: authenticated as %s with %s", self, username, mechanism)

    async def _sasl_token(self, token: bytes, timeout_s: float) -> Any:
        response = await self._send_and_wait(
            ApiKey.SASL_AUTHENTICATE,
            SaslAuthenticateRequest(auth_bytes=token),
            version=self.version_for(ApiKey.SASL_AUTHENTICATE),
            timeout_s=timeout_s,
        )
        if response.error_code:
            raise error_for(
                response.error_code,
                response.error_message or None,
                node_id=self.node_id,
                user=self.security.sasl_username,
                mechanism=self.security.sasl_mechanism,
            )
        return response

    async def _reauthenticate(self) -> None:
        """KIP-368: once the requests in flight are answered, authenticate again; requests
        made meanwhile wait here. A failure closes the connection (the client reconnects)."""
        task = self._reauthentication
        if task is None:
            task = asyncio.ensure_future(self._run_reauthentication())
            self._reauthentication = task
        await asyncio.shield(task)

    async def _run_reauthentication(self) -> None:
        try:
            in_flight = [p.future for p in self._pending]
            if in_flight:
                await asyncio.wait(in_flight)
            await self._authenticate(self._authentication_timeout_s)
        except KafkaError as exc:
            self._fail(exc)
            raise
        finally:
            self._reauthentication = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket

            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receiver.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._receiver.received(nbytes)
        except ProtocolDecodeError as exc:
            self._fail(KafkaConnectionError(f"bad frame from {self}: {exc}"))
            return
        pending = self._pending
        for frame in frames:
            if not pending:
                self._fail(KafkaConnectionError(f"unsolicited response from {self}"))
                return
            waiter = pending.popleft()
            try:
                correlation_id, body = decode_response(frame, waiter.api_key, waiter.version)
            except ProtocolDecodeError as exc:
                if not waiter.future.done():
                    waiter.future.set_exception(exc)
                continue
            if correlation_id != waiter.correlation_id:
                err = KafkaConnectionError(
                    f"correlation id {correlation_id} does not match {waiter.correlation_id}"
                )
                if not waiter.future.done():
                    waiter.future.set_exception(err)
                self._fail(err)
                return
            if not waiter.future.done():
                waiter.future.set_result(body)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(KafkaConnectionError(f"connection to {self} lost: {exc or 'closed by peer'}"))

    def pause_writing(self) -> None:
        self._write_ready.clear()

    def resume_writing(self) -> None:
        self._write_ready.set()

    def _fail(self, error: BaseException) -> None:
        if not self._closed:
            self._closed = True
            self._close_error = error
            if self._transport is not None:
                self._transport.abort()
        while self._pending:
            waiter = self._pending.popleft()
            if not waiter.future.done():
                waiter.future.set_exception(error)
                # A waiter that already gave up never retrieves it; keep asyncio quiet.
                waiter.future.exception()
        self._write_ready.set()
        self._closed_event.set()

    def close(self) -> None:
        """Close at once; every in-flight request fails with KafkaConnectionError."""
        self._fail(KafkaConnectionError(f"connection to {self} closed"))

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    def __repr__(self) -> str:
        return f"node {self.node_id} ({self.host}:{self.port})"

    # ------------------------------------------------------------------ requests

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` both sides support."""
        version = self.versions.get(api_key)
        if version is None:
            raise UnsupportedVersionError(
                f"{ApiKey(api_key).name} is not supported by {self}", api_key=api_key
            )
        return version

    def supports(self, api_key: int) -> bool:
        return api_key in self.versions

    def send_nowait(
        self,
        api_key: int,
        body: BodyOrBuilder,
        *,
        version: int | None = None,
        expect_response: bool = True,
    ) -> asyncio.Future[Any]:
        """Write the request now; return the future of its decoded response body.

        ``body`` may be a callable taking the chosen version, for requests whose shape
        depends on it. With ``expect_response`` False (acks=0 Produce) the future is done
        as soon as the frame is written, with None.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if self._closed:
            future.set_exception(
                self._close_error or KafkaConnectionError(f"connection to {self} closed")
            )
            return future
        if version is None:
            version = self.version_for(api_key)
        if callable(body):
            body = body(version)
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & _INT32_MAX
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=self.client_id,
        )
        parts: list[Any] | None = None
        frame = b""
        if api_key == ApiKey.PRODUCE:
            # The record batches (a megabyte a request for a busy producer) go to the
            # transport as they are, beside the encoded fields: never copied into a frame
            # (uvloop writes the list with one writev).
            parts = encode_request_parts(header, body)
        else:
            frame = encode_request(header, body)
        assert self._transport is not None
        if expect_response:
            self._pending.append(_Pending(correlation_id, api_key, version, future))
        if parts is None:
            self._transport.write(frame)
        else:
            self._transport.writelines(parts)
        if not expect_response:
            future.set_result(None)
        return future

    async def request(
        self,
        api_key: int,
        body: BodyOrBuilder,
        *,
        version: int | None = None,
        timeout_s: float = 30.0,
        expect_response: bool = True,
    ) -> Any:
        """Send a request and wait for its response body; see ``send_nowait``.

        A timeout closes the connection (the stream can no longer be trusted to line up)
        and raises KafkaTimeoutError.
        """
        if self._reauthenticate_at is not None and (
            self._reauthentication is not None or time.monotonic() >= self._reauthenticate_at
        ):
            await self._reauthenticate()
        return await self._send_and_wait(
            api_key, body, version=version, timeout_s=timeout_s, expect_response=expect_response
        )

    def start_request(
        self, api_key: int, body: BodyOrBuilder, *, expect_response: bool = True
    ) -> asyncio.Future[Any] | None:
        """Write the request now if ``request`` would write it without waiting (the
        transport takes writes, no re-authentication due); else None and nothing written.
        Wait for its answer with ``wait_response``. For callers whose next write should
        not wait for the event loop's next turn (the producer's sender, on an answer)."""
        if not self._write_ready.is_set() or self._reauthenticate_at is not None:
            return None
        return self.send_nowait(api_key, body, expect_response=expect_response)

    async def _send_and_wait(
        self,
        api_key: int,
        body: BodyOrBuilder,
        *,
        version: int | None = None,
        timeout_s: float = 30.0,
        expect_response: bool = True,
    ) -> Any:
        if not self._write_ready.is_set():
            await self._write_ready.wait()
        future = self.send_nowait(api_key, body, version=version, expect_response=expect_response)
        return await self.wait_response(future, api_key, timeout_s)

    async def wait_response(
        self, future: asyncio.Future[Any], api_key: int, timeout_s: float
    ) -> Any:
        """The answer of a request written by ``send_nowait`` or ``start_request``; one
        that does not come within ``timeout_s`` closes the connection (KafkaTimeoutError)."""
        if future.done():
            return future.result()
        # A timer rather than asyncio.timeout + shield: this is every request's path (a
        # follower's fetches among them), and a caller cancelled while it waits cancels only
        # its own future, which the response then finds done and skips, in step.
        timer = asyncio.get_running_loop().call_later(
            timeout_s, self._time_out, future, api_key, timeout_s
        )
        try:
            return await future
        finally:
            timer.cancel()

    def _time_out(self, future: asyncio.Future[Any], api_key: int, timeout_s: float) -> None:
        if not future.done():
            self._fail(
                KafkaTimeoutError(
                    f"{ApiKey(api_key).name} to {self} timed out after {timeout_s:.1f}s"
                )
            )


def _describe_failure(
    host: str, port: int, node_id: int, exc: BaseException, connected: bool, timeout_s: float
) -> KafkaConnectionError:
    """What went wrong opening a connection, in words a person can act on."""
    address = f"{host}:{port}"
    if not connected:
        if isinstance(exc, TimeoutError):
            return KafkaConnectionError(
                f"cannot connect to {address}: no answer within {timeout_s:g} s", node_id=node_id
            )
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return KafkaConnectionError(f"cannot connect to {address}: {reason}", node_id=node_id)
    if isinstance(exc, TimeoutError | KafkaTimeoutError):
        return NotAKafkaBrokerError(
            f"{address} accepted the connection but did not answer a Kafka ApiVersions request "
            f"within {timeout_s:g} s: is it a Kafka broker?",
            node_id=node_id,
        )
    if isinstance(exc, KafkaConnectionError) and "bad frame" in str(exc):
        return NotAKafkaBrokerError(
            f"{address} answered but is not a Kafka broker ({exc})", node_id=node_id
        )
    return KafkaConnectionError(
        f"{address} closed the connection during the Kafka handshake: {exc or type(exc).__name__}",
        node_id=node_id,
    )
