"""The broker's network layer: listeners, connections, frames in and responses out.

Owns sockets and nothing else: it reads size-prefixed frames, hands each to a dispatcher,
and writes the responses back in request order, sending record data from segment files with
``os.sendfile``. It knows no API and no storage; it must not import josefk.storage,
josefk.protocol message classes or the handlers (josefk.protocol.framing's buffers and
josefk.broker.parking's context variable only).

Why raw non-blocking sockets and not asyncio transports: a transport owns its socket's write
side, so data that must go out with ``os.sendfile`` (uvloop implements neither
``loop.sendfile`` nor ``loop.sock_sendfile``) cannot be interleaved with transport writes.
With ``sock_recv_into`` we also read straight into buffers whose slices become the request
frames, so a produced batch reaches the log without being copied in Python.

Listening. Binding a listener and accepting on it are two steps (``SocketServer.bind``, then
``start_accepting``): between them the port is known and clients can connect, but they wait
in the kernel's listen backlog, unread, until the broker is ready to serve them (a cluster
broker registers its bound ports in etcd before it may answer anything).

Reading. A connection reads into a chunk and hands out memoryviews of the complete frames
in it. Bytes handed out are never written again (the views keep the chunk alive): the chunk
goes on filling after them, and when it is full, or too little room is left after its last
frame, the unfinished tail is copied to a fresh chunk, which costs at most one partial frame.
Chunks are sized to what arrives: a connection starts with ``SMALL_CHUNK_SIZE`` (4 KiB, what
an idle client holds), and a new chunk is ``CHUNK_SIZE`` (256 KiB) only when the receive
before it filled all the room it had, i.e. the client streams (pipelined produce); a quiet
client goes back to small ones. Chunks are not zeroed (``frame_buffer``): nothing is read
before the socket wrote it. A frame larger than its chunk gets a buffer of exactly its size,
and the rest of it is received straight into that (a produce request is never copied in
Python, whatever the chunk).

Ordering and flow control. Frames are dispatched as they arrive (pipelining) but responses are
written strictly in request order: the writer takes pending responses first in, first out. When
``max_in_flight`` requests of one connection are waiting for their responses the reader stops
reading that socket until the writer catches up, which pushes back on the client through TCP.
Across connections a ``RequestGate`` does the same for the whole broker (Kafka's
``queued.max.requests`` and ``queued.max.request.bytes``): at its limit no connection reads
another request until one is answered.

Writing. The writer task sends what may have to wait: answers still being computed, file
regions, whatever the socket does not take at once. Answers that are ready in memory while the
writer is idle are not handed to it: the reader reads on while the socket has bytes, and when
it would wait it sends the ready answers itself, together, with one non-blocking ``send``;
the writer gets only what the socket left over. A client sending one request at a time so gets
each answer without a wake-up of the writer task (~20% more such requests per second, ~10%
less broker CPU each), and answers to pipelined requests still leave together.

TLS. Connections of an SSL or SASL_SSL listener are ``TlsConnection``s
(josefk.broker.tls_connection), made by the listener's ``connection_factory``. They replace
only the primitives that move bytes (``_receive``, ``_send_now``, ``_sock_sendall``,
``_sendfile``); framing, ordering and flow control above are the same code for both, and a
PLAINTEXT connection runs exactly the path it ran before TLS existed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import logging
import os
import socket
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import CoroutineType
from typing import Any, Protocol, TypeAlias, TypeGuard, cast, runtime_checkable

from josefk.broker.connection_errors import CloseConnection as CloseConnection
from josefk.broker.parking import ON_PARK
from josefk.protocol.framing import frame_buffer

logger = logging.getLogger(__name__)

# A busy connection's receive chunk, and the first (and any quiet) connection's.
CHUNK_SIZE = 256 * 1024
SMALL_CHUNK_SIZE = 4 * 1024
_SIZE = struct.Struct(">i")
# At most this many pieces (size prefixes and answer parts) go out in one coalesced send.
_MAX_COALESCED_PIECES = 256


def _chunk_for(busy: bool, tail: int) -> bytearray:
    """A receive chunk: CHUNK_SIZE when the last receive filled all the room it was given
    (the client streams: pipelined produce), else SMALL_CHUNK_SIZE; either way room for the
    ``tail`` of an unfinished frame carried over and as much again. Chunks are left as
    allocated (``frame_buffer``): no byte is read before the socket wrote it."""
    size = CHUNK_SIZE if busy else SMALL_CHUNK_SIZE
    return frame_buffer(max(size, 2 * tail))


@runtime_checkable
class FileRegion(Protocol):
    """A range of a file to send with sendfile: the storage layer's FileSlice fits this."""

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def size(self) -> int: ...


Chunk: TypeAlias = bytes | bytearray | memoryview | FileRegion
Response: TypeAlias = Sequence[Chunk]
"""The parts of one response body (header included, size prefix not): sent back to back."""

DispatchResult: TypeAlias = Response | Awaitable[Response | None] | None
"""What a dispatcher returns: a response, None for no response (acks=0), or an awaitable."""


@dataclass(slots=True)
class ConnectionInfo:
    """What handlers may know about the connection a request came on."""

    connection_id: int
    listener_name: str
    peer: str
    local_port: int
    security_protocol: str = "PLAINTEXT"
    # Who the client is: "User:ANONYMOUS" on a PLAINTEXT listener, None on a SASL one until
    # it authenticated (then "User:alice"); kept for authorization.
    principal: str | None = "User:ANONYMOUS"
    # The SASL exchange's per-connection state, owned by the SASL handlers.
    sasl: Any = None
    # Set by a handler whose answer must be the connection's last (failed authentication):
    # the answer is written, then the connection closes.
    close_after_response: bool = False


class Dispatcher(Protocol):
    def dispatch(self, frame: memoryview, connection: ConnectionInfo) -> DispatchResult: ...


class Clock(Protocol):
    def monotonic_ms(self) -> int: ...


_AWAITABLE_TYPES: dict[type, bool] = {CoroutineType: True}


def is_awaitable(result: object) -> TypeGuard[Awaitable[Any]]:
    """Whether a handler's result is still to be awaited: ``isinstance(x, Awaitable)``
    answered once per type, as the ABC check costs more than the rest of a small request's
    bookkeeping."""
    kind = type(result)
    known = _AWAITABLE_TYPES.get(kind)
    if known is None:
        known = _AWAITABLE_TYPES[kind] = isinstance(result, Awaitable)
    return known


# Linux's TCP_CORK (3); other platforms' sockets refuse it and _cork says so.
_TCP_CORK = getattr(socket, "TCP_CORK", 3)


def _size_prefix(response: Response) -> bytes:
    return _SIZE.pack(sum(chunk_size(part) for part in response))


def _in_memory(response: Response) -> bool:
    return all(isinstance(part, bytes | bytearray | memoryview) for part in response)


def chunk_size(chunk: Chunk) -> int:
    if isinstance(chunk, bytes | bytearray):
        return len(chunk)
    if isinstance(chunk, memoryview):
        return chunk.nbytes
    return chunk.size


class RequestGate:
    """The broker-wide bound on requests read and not yet answered.

    Kafka's network threads stop reading when its request queue holds ``queued.max.requests``
    requests (or ``queued.max.request.bytes`` bytes). josefk has no queue between sockets and
    handlers, so the gate counts what such a queue would hold plus the requests being handled:
    every request from the moment it is read until its answer leaves, except that a request
    that parks (a long-poll fetch, a produce waiting for acks, a JoinGroup waiting for its
    group) leaves the gate then (``josefk.broker.parking.request_parked``): Kafka's queue
    holds only requests waiting for a handler, and idle consumers long-polling must not stop
    every other client. A request larger than the
    byte limit is admitted when nothing else is in, as Kafka's memory pool admits one such
    request rather than none.
    """

    def __init__(self, max_requests: int, max_bytes: int = -1) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes if max_bytes > 0 else 2**63 - 1
        self.requests = 0
        self.bytes = 0
        # Connections whose reader waits for room: what a full Kafka request queue blocks.
        self.waiting = 0
        self._room = asyncio.Event()

    def admits(self, size: int) -> bool:
        if self.requests == 0:
            return True
        return self.requests < self.max_requests and self.bytes + size <= self.max_bytes

    def try_enter(self, size: int) -> bool:
        if not self.admits(size):
            return False
        self.requests += 1
        self.bytes += size
        return True

    async def enter(self, size: int) -> None:
        self.waiting += 1
        try:
            while not self.try_enter(size):
                self._room.clear()
                await self._room.wait()
        finally:
            self.waiting -= 1

    def leave(self, size: int) -> None:
        self.requests -= 1
        self.bytes -= size
        if self.waiting:
            self._room.set()


class _Admission:
    """One request's place in the ``RequestGate``, given back once: when its answer leaves
    the connection's queue, or earlier when it parks (josefk.broker.parking)."""

    __slots__ = ("_gate", "size")

    def __init__(self, gate: RequestGate, size: int) -> None:
        self._gate: RequestGate | None = gate
        self.size = size

    def leave(self) -> None:
        gate = self._gate
        if gate is not None:
            self._gate = None
            gate.leave(self.size)


class Connection:
    """One client connection: a reader task and a writer task over one socket.

    Both tasks run on the event loop thread; ``_pending`` is touched only there.
    """

    def __init__(
        self,
        sock: socket.socket,
        info: ConnectionInfo,
        dispatcher: Dispatcher,
        *,
        max_request_bytes: int,
        max_in_flight: int,
        clock: Clock,
        on_close: Callable[[Connection], None],
        gate: RequestGate | None = None,
        max_unauthenticated_bytes: int = 2**31 - 1,
    ) -> None:
        self.sock = sock
        self.info = info
        self._dispatcher = dispatcher
        self._max_request_bytes = max_request_bytes
        # sasl.server.max.receive.size: the limit while info.principal is None (a SASL
        # listener's connection before it authenticated), checked from the size prefix.
        self._max_unauthenticated_bytes = max_unauthenticated_bytes
        self._max_in_flight = max_in_flight
        self._clock = clock
        self._on_close = on_close
        # Told of a request over socket.request.max.bytes (a metric), before the close.
        self.on_oversized: Callable[[str], None] | None = None
        self._loop = asyncio.get_running_loop()
        self._pending: deque[DispatchResult | _Unsent | _End] = deque()
        # Sizes of the requests whose answers are in _pending, oldest first, for the gate.
        self._gate = gate if gate is not None else RequestGate(2**31 - 1)
        self._gated: deque[_Admission] = deque()
        self._has_pending = asyncio.Event()
        self._has_room = asyncio.Event()
        self._has_room.set()
        self._reading = True
        self._closed = False
        # Whether TCP_CORK may be set on this socket (see _send); False once refused.
        self._corkable = True
        # True while the writer waits for work with nothing unsent: then, and only then, the
        # reader may send ready answers itself (_send_ready) without overtaking another.
        self._writer_idle = False
        self.last_active_ms = clock.monotonic_ms()
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reader = self._loop.create_task(self._read_loop())
        self._writer = self._loop.create_task(self._write_loop())

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # -- reading -------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            await self._read_frames()
        except (ConnectionError, OSError) as exc:
            logger.debug("connection %s: read failed: %s", self.info.peer, exc)
        except FrameTooLarge as exc:
            logger.warning("closing connection from %s: %s", self.info.peer, exc)
            if self.on_oversized is not None:
                self.on_oversized(self.info.listener_name)
            self.close()
            return
        except asyncio.CancelledError:
            # stop_reading() during shutdown, or close(); either way no more requests.
            if self._closed:
                raise
        finally:
            self._reading = False
        # The peer closed its side or reading stopped: let the writer drain, then close.
        self._push(_END)

    async def _read_frames(self) -> None:
        # A connection starts with a small chunk (an idle or one-request-at-a-time client
        # never needs more); each later chunk is sized by the receive before it (_chunk_for).
        buf = frame_buffer(SMALL_CHUNK_SIZE)
        view = memoryview(buf)
        start = filled = 0
        busy = False
        while self._reading:
            if filled == len(buf):
                buf, view, start, filled = self._fresh_chunk(view, start, filled, busy=True)
            room = len(buf) - filled
            received = await self._receive(view[filled:])
            if received == 0:
                # The client is gone: nobody reads the answers still pending, and a parked
                # long-poll fetch must not hold the connection open for its max wait.
                self.close()
                return
            # The socket had at least as much as there was room for: the client streams.
            busy = received == room
            filled += received
            self.last_active_ms = self._clock.monotonic_ms()
            while filled - start >= 4:
                size = _SIZE.unpack_from(buf, start)[0]
                if size < 0 or size > self._max_request_bytes:
                    raise FrameTooLarge(size, self._max_request_bytes)
                if size > self._max_unauthenticated_bytes and self.info.principal is None:
                    raise FrameTooLarge(
                        size, self._max_unauthenticated_bytes, "sasl.server.max.receive.size"
                    )
                end = start + 4 + size
                if end <= filled:
                    await self._submit(view[start + 4 : end])
                    if not self._reading:
                        return
                    start = end
                    continue
                if 4 + size > len(buf):
                    # Larger than a chunk: receive the rest of it straight into its own buffer.
                    frame = await self._read_large_frame(view[start + 4 : filled], size)
                    if frame is None:
                        return
                    await self._submit(frame)
                    if not self._reading:
                        return
                    start = filled
                break
            if start == filled:
                # Everything handed out: go on after it, never over it, while room is left.
                if start and len(buf) - filled < len(buf) // 4:
                    buf = _chunk_for(busy, 0)
                    view = memoryview(buf)
                    start = filled = 0
            elif start and filled == len(buf):
                buf, view, start, filled = self._fresh_chunk(view, start, filled, busy=busy)

    @staticmethod
    def _fresh_chunk(
        view: memoryview, start: int, filled: int, *, busy: bool
    ) -> tuple[bytearray, memoryview, int, int]:
        tail = filled - start
        buf = _chunk_for(busy, tail)
        buf[:tail] = view[start:filled]
        return buf, memoryview(buf), 0, tail

    async def _read_large_frame(self, head: memoryview, size: int) -> memoryview | None:
        frame = frame_buffer(size)
        frame[: len(head)] = head
        view = memoryview(frame)
        got = len(head)
        while got < size:
            received = await self._receive(view[got:])
            if received == 0:
                return None
            got += received
        self.last_active_ms = self._clock.monotonic_ms()
        return view

    async def _receive(self, into: memoryview) -> int:
        """Receive what the socket has; before waiting for more, send the answers ready."""
        try:
            return self.sock.recv_into(into)
        except BlockingIOError:
            pass
        self._send_ready()
        return await self._loop.sock_recv_into(self.sock, into)

    async def _submit(self, frame: memoryview) -> None:
        size = len(frame)
        if not self._gate.try_enter(size):
            # The broker is at queued.max.requests: read nothing more until one is answered.
            self._send_ready()
            await self._gate.enter(size)
        admission = _Admission(self._gate, size)
        # Tasks the handler starts copy this context: a purgatory parking one of them gives
        # the request's place in the gate back (josefk.broker.parking.request_parked).
        token = ON_PARK.set(admission.leave)
        try:
            result = self._dispatcher.dispatch(frame, self.info)
            if is_awaitable(result) and not isinstance(result, asyncio.Future):
                # Run it now so that it makes progress while earlier responses are written.
                result = asyncio.ensure_future(result)
        except CloseConnection as exc:
            admission.leave()
            logger.info("closing connection from %s: %s", self.info.peer, exc)
            self._reading = False
            return
        except Exception:
            admission.leave()
            # The dispatcher answers handler failures itself; anything else is a bug in it.
            # This connection can no longer answer in order: close it rather than hang.
            logger.exception("request from %s could not be dispatched; closing", self.info.peer)
            self._reading = False
            return
        finally:
            ON_PARK.reset(token)
        self._gated.append(admission)
        self._push(result)
        if self.info.close_after_response:
            self._reading = False
            return
        if len(self._pending) >= self._max_in_flight:
            self._send_ready()
            if len(self._pending) >= self._max_in_flight:
                self._has_room.clear()
                await self._has_room.wait()

    def _push(self, item: DispatchResult | _Unsent | _End) -> None:
        self._pending.append(item)
        if not (self._writer_idle and _is_ready(item)):
            self._has_pending.set()
        # else: the reader sends it before it next waits (_send_ready); no writer wake-up.

    def _answered(self) -> None:
        """A request's answer left _pending: its place in the broker-wide gate is free."""
        self._gated.popleft().leave()

    def _send_ready(self) -> None:
        """Send the ready answers at the head of the queue from the reader, in one ``send``,
        while the writer is idle; what the socket does not take, and everything after the first
        answer that is not ready, is left to the writer, which is woken for it."""
        pending = self._pending
        if self._writer_idle and pending and not self._closed:
            pieces: list[bytes | bytearray | memoryview] = []
            while pending and len(pieces) < _MAX_COALESCED_PIECES:
                item = pending[0]
                if not _is_ready(item):
                    break
                pending.popleft()
                self._answered()
                if item is not None:
                    response = cast(Response, item)
                    pieces.append(_size_prefix(response))
                    pieces.extend(response)  # type: ignore[arg-type]  # _is_ready checked
            if pieces:
                rest = self._send_now(b"".join(pieces))
                self.last_active_ms = self._clock.monotonic_ms()
                if rest is not None:
                    pending.appendleft(_Unsent(rest))
        if pending:
            self._has_pending.set()

    def _send_now(self, data: bytes) -> memoryview | None:
        """One non-blocking send: None when the socket took it all, else what is left for
        the writer (whose ``_sock_sendall`` sends it)."""
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        return None if sent == len(data) else memoryview(data)[sent:]

    # -- writing -------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        # In-memory answers already due but not yet written: answers that are ready one after
        # another (pipelined produce acks, say) leave in one send instead of one each.
        out: list[bytes | bytearray | memoryview] = []
        try:
            while True:
                if not self._pending:
                    if out:
                        await self._sock_sendall(out)
                        out = []
                        continue
                    self._has_pending.clear()
                    self._writer_idle = True
                    try:
                        await self._has_pending.wait()
                    finally:
                        self._writer_idle = False
                    continue
                item = self._pending[0]
                if isinstance(item, _End):
                    break
                if isinstance(item, _Unsent):
                    # The rest of answers the reader began to send: no size prefix again.
                    self._pending.popleft()
                    if len(self._pending) < self._max_in_flight:
                        self._has_room.set()
                    out.append(item.data)
                    continue
                if is_awaitable(item):
                    if out and not (isinstance(item, asyncio.Future) and item.done()):
                        # Don't hold finished answers back while waiting for this one.
                        await self._sock_sendall(out)
                        out = []
                    try:
                        response = await item
                    except CloseConnection as exc:
                        logger.info("closing connection from %s: %s", self.info.peer, exc)
                        break
                    except Exception:
                        # A handler bug must not take other connections down; this one cannot
                        # answer in order any more, so it closes, as Kafka does.
                        logger.exception("request from %s failed; closing", self.info.peer)
                        break
                else:
                    response = item
                self._pending.popleft()
                self._answered()
                if len(self._pending) < self._max_in_flight:
                    self._has_room.set()
                if response is None:
                    continue
                self.last_active_ms = self._clock.monotonic_ms()
                if _in_memory(response) and len(out) < _MAX_COALESCED_PIECES:
                    out.append(_size_prefix(response))
                    out.extend(response)  # type: ignore[arg-type]  # _in_memory checked
                else:
                    await self._send(response, out)
                    out = []
                if self.info.close_after_response:
                    # A handler answered last (an awaited failed authentication).
                    break
            if out:
                # Answers read before the end (or before a failed request) are still owed.
                await self._sock_sendall(out)
        except (ConnectionError, OSError) as exc:
            logger.debug("connection %s: write failed: %s", self.info.peer, exc)
        finally:
            self.close()

    async def _send(
        self, response: Response, before: list[bytes | bytearray | memoryview] | None = None
    ) -> None:
        """Write ``response`` (after the answers ``before`` it, already encoded). A response
        with file regions is written corked: its size, headers, regions and the few bytes
        after the last region (a flexible version's tagged fields) leave in full segments and
        one final push, instead of a small segment before and after every region, each of
        which would wake the reader (a follower's fetcher, a consumer) for a few bytes."""
        pieces: list[bytes | bytearray | memoryview] = before if before else []
        pieces.append(_size_prefix(response))
        corked = False
        try:
            for part in response:
                if isinstance(part, bytes | bytearray | memoryview):
                    pieces.append(part)
                    continue
                if not corked and self._corkable:
                    corked = self._cork(True)
                await self._sock_sendall(pieces)
                pieces = []
                await self._sendfile(part)
            if pieces:
                await self._sock_sendall(pieces)
        finally:
            if corked:
                self._cork(False)

    def _cork(self, on: bool) -> bool:
        """TCP_CORK on or off (off pushes what it held back); False, and not tried again,
        where the socket refuses it (another platform)."""
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, on)
        except OSError:
            self._corkable = False
            return False
        return True

    async def _sock_sendall(self, pieces: list[bytes | bytearray | memoryview]) -> None:
        if not pieces:
            return
        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        await self._loop.sock_sendall(self.sock, data)

    async def _sendfile(self, region: FileRegion) -> None:
        out = self.sock.fileno()
        source, position, remaining = region.fd, region.position, region.size
        while remaining > 0:
            try:
                sent = os.sendfile(out, source, position, remaining)
            except BlockingIOError:
                await self._writable()
                continue
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            if sent == 0:
                # The file is shorter than the slice: truncated underneath us. Closing is the
                # only honest answer, the response size is already on the wire.
                raise ConnectionAbortedError(f"file region ended {remaining} bytes early")
            position += sent
            remaining -= sent

    async def _writable(self) -> None:
        fd = self.sock.fileno()
        waiter = self._loop.create_future()
        self._loop.add_writer(fd, _resolve, waiter)
        try:
            await waiter
        finally:
            self._loop.remove_writer(fd)

    # -- closing -------------------------------------------------------------------------

    def stop_reading(self) -> None:
        """Take no new requests; those already read are still answered."""
        self._reading = False
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()

    async def drained(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._writer)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._reading = False
        for task in (self._reader, self._writer):
            if task is not None and not task.done() and task is not asyncio.current_task():
                task.cancel()
        for item in self._pending:
            if isinstance(item, asyncio.Future):
                item.cancel()
        self._pending.clear()
        while self._gated:
            self._answered()
        with contextlib.suppress(OSError):
            self.sock.close()
        self._on_close(self)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int, setting: str = "socket.request.max.bytes") -> None:
        super().__init__(f"request of {size} bytes is larger than {setting} ({limit})")
        self.size = size
        self.limit = limit


class _End:
    __slots__ = ()


_END = _End()


class _Unsent:
    """The part of answers the reader sent itself that the socket did not take."""

    __slots__ = ("data",)

    def __init__(self, data: memoryview) -> None:
        self.data = data


def _is_ready(item: DispatchResult | _Unsent | _End) -> bool:
    """Whether the reader may send ``item`` itself: an answer in memory, or no answer."""
    if item is None:
        return True
    if isinstance(item, _Unsent | _End) or is_awaitable(item):
        return False
    return _in_memory(cast(Response, item))


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"
    # Builds the listener's connections where they are not plain ``Connection``s (TLS: the
    # broker passes one that wraps the socket, see josefk.broker.tls_connection); called with
    # Connection's arguments.
    connection_factory: Callable[..., Connection] | None = None


@dataclass(slots=True)
class _Listener:
    """A bound listening socket and, once accepting started, its accept loop."""

    spec: ListenerSpec
    sock: socket.socket
    accepting: asyncio.Task[None] | None = None


def bind_listener_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking TCP socket bound to ``host:port`` (``""`` or 0.0.0.0: every address)
    and listening with ``backlog``, not yet accepting. Raises OSError (port in use, address
    not local...). A broker calls it before it touches its log dirs, so that a port in use
    fails the start before anything is written."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("" if host in ("", "0.0.0.0") else host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class SocketServer:
    """Listeners and the connections they accept; knows nothing of Kafka's APIs.

    A listener's life: ``bind`` (the port is known, clients queue in the backlog), then
    ``start_accepting`` (``listen`` does both for one listener), then ``shutdown``, which
    closes it whether or not it ever accepted."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        clock: Clock,
        max_request_bytes: int,
        max_idle_ms: int,
        max_unauthenticated_bytes: int = 524_288,
        max_in_flight: int = 64,
        queued_max_requests: int = 2**31 - 1,
        queued_max_request_bytes: int = -1,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        on_connection_event: Callable[[str, bool], None] | None = None,
        listen_backlog: int = 1024,
        max_connections: int = 2**31 - 1,
        max_connections_per_ip: int = 2**31 - 1,
        on_oversized: Callable[[str], None] | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._on_oversized = on_oversized
        self._listen_backlog = listen_backlog
        # Kafka's max.connections: at the limit the broker stops accepting (clients wait in
        # the listen backlog) until a connection closes. max.connections.per.ip: a connection
        # over its address's quota is closed at once.
        self._max_connections = max_connections
        self._max_connections_per_ip = max_connections_per_ip
        self._per_ip: dict[str, int] = {}
        self._slot_free = asyncio.Event()
        self._clock = clock
        self._max_request_bytes = max_request_bytes
        self._max_unauthenticated_bytes = max_unauthenticated_bytes
        self._max_idle_ms = max_idle_ms
        self._max_in_flight = max_in_flight
        self.gate = RequestGate(queued_max_requests, queued_max_request_bytes)
        # socket.send.buffer.bytes / socket.receive.buffer.bytes; -1 keeps the OS default.
        self._buffer_options = [
            (option, size)
            for option, size in (
                (socket.SO_SNDBUF, send_buffer_bytes),
                (socket.SO_RCVBUF, receive_buffer_bytes),
            )
            if size > 0
        ]
        self._on_connection_event = on_connection_event
        self._listeners: list[_Listener] = []
        self.connections: set[Connection] = set()
        self._next_connection_id = 0

    def bind(self, spec: ListenerSpec) -> ListenerSpec:
        """Bind and listen without accepting; returns the spec with the bound port (port 0
        resolved). Clients that connect now complete the TCP handshake and wait in the
        kernel's backlog (``socket.listen.backlog.size``) with their requests unread until
        ``start_accepting``: a broker binds first because its cluster registration needs the
        bound ports, and accepts only once everything a handler relies on is in place.
        Raises OSError (port in use, address not local...)."""
        return self.adopt(spec, bind_listener_socket(spec.host, spec.port, self._listen_backlog))

    def adopt(self, spec: ListenerSpec, sock: socket.socket) -> ListenerSpec:
        """Take a socket ``bind_listener_socket`` made (bound and listening, not accepting)
        as the listener of ``spec``; returns the spec with the socket's port."""
        bound = dataclasses.replace(spec, port=sock.getsockname()[1])
        self._listeners.append(_Listener(bound, sock))
        return bound

    def start_accepting(self) -> None:
        """Accept connections on every bound listener (those already accepting go on)."""
        for listener in self._listeners:
            self._accept(listener)

    async def listen(self, spec: ListenerSpec) -> ListenerSpec:
        """``bind`` and start accepting on this one listener at once."""
        bound = self.bind(spec)
        self._accept(self._listeners[-1])
        return bound

    def _accept(self, listener: _Listener) -> None:
        if listener.accepting is None:
            listener.accepting = asyncio.get_running_loop().create_task(
                self._accept_loop(listener.spec, listener.sock)
            )

    async def _accept_loop(self, spec: ListenerSpec, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while len(self.connections) >= self._max_connections:
                self._slot_free.clear()
                await self._slot_free.wait()
            try:
                sock, address = await loop.sock_accept(listener)
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    logger.error("cannot accept on %s: %s", spec.name, exc)
                    await asyncio.sleep(0.1)  # back off from fd exhaustion; nothing to wait on
                    continue
                raise
            ip = str(address[0])
            if self._per_ip.get(ip, 0) >= self._max_connections_per_ip:
                logger.warning(
                    "closing a connection from %s: max.connections.per.ip=%d reached",
                    ip,
                    self._max_connections_per_ip,
                )
                sock.close()
                continue
            self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for option, size in self._buffer_options:
                sock.setsockopt(socket.SOL_SOCKET, option, size)
            self._next_connection_id += 1
            info = ConnectionInfo(
                connection_id=self._next_connection_id,
                listener_name=spec.name,
                peer=f"{address[0]}:{address[1]}",
                local_port=spec.port,
                security_protocol=spec.security_protocol,
                principal=None if spec.security_protocol.startswith("SASL_") else "User:ANONYMOUS",
            )
            connection = (spec.connection_factory or Connection)(
                sock,
                info,
                self._dispatcher,
                max_request_bytes=self._max_request_bytes,
                max_in_flight=self._max_in_flight,
                clock=self._clock,
                on_close=self._forget,
                gate=self.gate,
                max_unauthenticated_bytes=self._max_unauthenticated_bytes,
            )
            connection.on_oversized = self._on_oversized
            self.connections.add(connection)
            connection.start()
            if self._on_connection_event is not None:
                self._on_connection_event(spec.name, True)

    def _forget(self, connection: Connection) -> None:
        if connection in self.connections:
            ip = connection.info.peer.rsplit(":", 1)[0]
            left = self._per_ip.get(ip, 1) - 1
            if left > 0:
                self._per_ip[ip] = left
            else:
                self._per_ip.pop(ip, None)
        self.connections.discard(connection)
        self._slot_free.set()
        if self._on_connection_event is not None:
            self._on_connection_event(connection.info.listener_name, False)

    def set_connection_limits(self, max_connections: int, max_connections_per_ip: int) -> None:
        """New ``max.connections`` / ``max.connections.per.ip`` (dynamic broker configs):
        open connections stay; an accept loop waiting for a slot re-checks at once."""
        self._max_connections = max_connections
        self._max_connections_per_ip = max_connections_per_ip
        self._slot_free.set()

    def close_idle_connections(self) -> int:
        """Close connections idle longer than connections.max.idle.ms; returns how many."""
        now = self._clock.monotonic_ms()
        idle = [
            c
            for c in self.connections
            if c.in_flight == 0 and now - c.last_active_ms > self._max_idle_ms
        ]
        for connection in idle:
            connection.close()
        return len(idle)

    async def stop_listening(self) -> None:
        """Close every listener, accepting or only bound: connections still waiting in a
        backlog are reset by the kernel."""
        for listener in self._listeners:
            task = listener.accepting
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            listener.sock.close()
        self._listeners.clear()

    async def shutdown(self, deadline_s: float) -> None:
        """Stop accepting, let in-flight requests finish until the deadline, close the rest."""
        await self.stop_listening()
        connections = list(self.connections)
        for connection in connections:
            connection.stop_reading()
        if connections:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(deadline_s):
                    await asyncio.gather(*(c.drained() for c in connections))
        if self.connections:
            # Clients that stopped reading, or answers the deadline did not wait for.
            logger.warning(
                "shutdown deadline (%d ms) passed: closing %d connection(s) still owed answers",
                round(deadline_s * 1000),
                len(self.connections),
            )
        for connection in list(self.connections):
            connection.close()
