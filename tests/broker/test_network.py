"""The socket layer over real loopback sockets, with a dispatcher that echoes frames."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import tempfile
import tracemalloc
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from josefk.broker.network import (
    Connection,
    ConnectionInfo,
    DispatchResult,
    ListenerSpec,
    SocketServer,
)


class ManualClock:
    def __init__(self) -> None:
        self.now = 0

    def monotonic_ms(self) -> int:
        return self.now


@dataclass
class Region:
    file: object
    position: int
    size: int

    @property
    def fd(self) -> int:
        return self.file.fileno()  # type: ignore[attr-defined, no-any-return]


class EchoDispatcher:
    """Echoes each frame; a frame starting with b'wait' is answered only when released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()
        self.failed = asyncio.Event()
        self.region: Region | None = None

    def dispatch(self, frame: memoryview, connection: ConnectionInfo) -> DispatchResult:
        data = bytes(frame)
        if data.startswith(b"wait"):
            self.waiting.set()
            return self._later(data)
        if data == b"noreply":
            return None
        if data == b"file" and self.region is not None:
            return [b"F:", self.region]
        if data == b"fail":
            return self._fail()
        return [data]

    async def _fail(self) -> list[bytes]:
        self.failed.set()
        raise RuntimeError("handler bug")

    async def _later(self, data: bytes) -> list[bytes]:
        await self.release.wait()
        return [data]


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def frame(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


@pytest.fixture
async def server() -> AsyncIterator[tuple[SocketServer, EchoDispatcher, int]]:
    dispatcher = EchoDispatcher()
    srv = SocketServer(dispatcher, clock=ManualClock(), max_request_bytes=1 << 20, max_idle_ms=1000)
    bound = await srv.listen(ListenerSpec("PLAINTEXT", "127.0.0.1", 0))
    yield srv, dispatcher, bound.port
    await srv.shutdown(1.0)


async def test_responses_come_back_in_request_order(server) -> None:  # type: ignore[no-untyped-def]
    _srv, dispatcher, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(b"wait-1") + frame(b"second") + frame(b"noreply") + frame(b"third"))
    await writer.drain()
    dispatcher.release.set()
    assert [await read_frame(reader) for _ in range(3)] == [b"wait-1", b"second", b"third"]
    writer.close()


async def test_a_ready_answer_never_overtakes_one_still_pending(server) -> None:  # type: ignore[no-untyped-def]
    """The second request arrives alone, answered at once, while the first still waits:
    the reader must not send that answer itself."""
    _srv, dispatcher, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(b"wait-1"))
    await dispatcher.waiting.wait()
    writer.write(frame(b"second"))
    await writer.drain()
    writer.write(frame(b"third"))
    dispatcher.release.set()
    assert [await read_frame(reader) for _ in range(3)] == [b"wait-1", b"second", b"third"]
    writer.close()


async def test_answers_larger_than_the_socket_takes_arrive_whole_and_in_order(server) -> None:  # type: ignore[no-untyped-def]
    """Requests sent one by one to a client that reads nothing until the end: once the
    socket's buffers are full, an answer is sent in part and the writer finishes it."""
    _srv, _dispatcher, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payloads = [bytes([i]) * 900_000 + i.to_bytes(4, "big") for i in range(24)]  # ~22 MB
    for payload in payloads:
        writer.write(frame(payload))
        await writer.drain()
    assert [await read_frame(reader) for _ in payloads] == payloads
    writer.close()


async def test_pipelined_answers_keep_their_order_around_file_regions(server) -> None:  # type: ignore[no-untyped-def]
    _srv, dispatcher, port = server
    with tempfile.TemporaryFile() as f:
        f.write(b"0123456789")
        f.flush()
        dispatcher.region = Region(f, 3, 4)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        requests = [f"r{i}".encode() for i in range(600)]
        requests[100] = requests[400] = b"file"
        requests[250] = b"wait-250"
        writer.write(b"".join(frame(r) for r in requests))
        await writer.drain()
        dispatcher.release.set()
        answers = [await read_frame(reader) for _ in requests]
        expected = [b"F:3456" if r == b"file" else r for r in requests]
        assert answers == expected
        writer.close()


async def test_answers_before_a_failed_request_are_delivered_then_it_closes(server) -> None:  # type: ignore[no-untyped-def]
    _srv, dispatcher, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(b"wait-0") + frame(b"one") + frame(b"two") + frame(b"fail") + frame(b"x"))
    await writer.drain()
    # The failure is already there when the answers before it are written.
    await dispatcher.failed.wait()
    dispatcher.release.set()
    assert await read_frame(reader) == b"wait-0"
    assert await read_frame(reader) == b"one"
    assert await read_frame(reader) == b"two"
    assert await reader.read() == b""
    writer.close()


async def test_frames_split_across_reads_and_larger_than_a_chunk(server) -> None:  # type: ignore[no-untyped-def]
    _srv, _dispatcher, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    big = bytes(range(256)) * 2000  # 512 KB, twice a chunk
    stream = frame(b"a" * 100) + frame(big) + frame(b"b" * 300_000) + frame(b"c")
    for i in range(0, len(stream), 7919):
        writer.write(stream[i : i + 7919])
        await writer.drain()
    assert await read_frame(reader) == b"a" * 100
    assert await read_frame(reader) == big
    assert await read_frame(reader) == b"b" * 300_000
    assert await read_frame(reader) == b"c"
    writer.close()


async def test_oversized_request_closes_only_that_connection(server) -> None:  # type: ignore[no-untyped-def]
    _srv, _dispatcher, port = server
    bad_reader, bad_writer = await asyncio.open_connection("127.0.0.1", port)
    good_reader, good_writer = await asyncio.open_connection("127.0.0.1", port)
    bad_writer.write(struct.pack(">i", (1 << 20) + 1))
    await bad_writer.drain()
    assert await bad_reader.read() == b""  # closed by the broker
    good_writer.write(frame(b"still here"))
    assert await read_frame(good_reader) == b"still here"
    good_writer.close()


async def test_file_regions_are_sent_with_sendfile(server) -> None:  # type: ignore[no-untyped-def]
    _srv, dispatcher, port = server
    with tempfile.TemporaryFile() as f:
        payload = bytes(range(256)) * 8000
        f.write(b"xx" + payload + b"yy")
        f.flush()
        dispatcher.region = Region(f, 2, len(payload))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(b"file"))
        assert await read_frame(reader) == b"F:" + payload
        writer.close()


async def test_a_response_with_file_regions_is_written_corked_and_pushed_at_its_end(
    server,  # type: ignore[no-untyped-def]
) -> None:
    """Headers, two regions and the bytes after the last region (a flexible version's tagged
    fields) arrive whole and in order, and the connection leaves TCP_CORK off afterwards: a
    cork left on would hold the next small answer back."""
    srv, dispatcher, port = server
    with tempfile.TemporaryFile() as f:
        payload = bytes(range(256)) * 300
        f.write(payload)
        f.flush()
        head, tail = Region(f, 0, 1000), Region(f, 1000, len(payload) - 1000)
        dispatcher.dispatch = lambda frame, _info: (  # type: ignore[method-assign]
            [b"H", head, b"M", tail, b"T"] if bytes(frame) == b"file" else [bytes(frame)]
        )
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(b"file") + frame(b"after"))
        assert await read_frame(reader) == b"H" + payload[:1000] + b"M" + payload[1000:] + b"T"
        assert await read_frame(reader) == b"after"
        (connection,) = srv.connections
        assert connection.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK) == 0
        writer.close()


async def test_idle_connections_are_closed() -> None:
    clock = ManualClock()
    srv = SocketServer(EchoDispatcher(), clock=clock, max_request_bytes=1024, max_idle_ms=1000)
    bound = await srv.listen(ListenerSpec("PLAINTEXT", "127.0.0.1", 0))
    reader, writer = await asyncio.open_connection("127.0.0.1", bound.port)
    writer.write(frame(b"hello"))
    assert await read_frame(reader) == b"hello"
    assert srv.close_idle_connections() == 0
    clock.now += 1001
    assert srv.close_idle_connections() == 1
    assert await reader.read() == b""
    await srv.shutdown(1.0)


class KeepingDispatcher:
    """Keeps every frame's view, as a handler holding a request would, and echoes it."""

    def __init__(self) -> None:
        self.kept: list[memoryview] = []

    def dispatch(self, frame: memoryview, connection: ConnectionInfo) -> DispatchResult:
        self.kept.append(frame)
        return [bytes(frame)]


async def test_frames_handed_out_are_never_written_over() -> None:
    """One request at a time: the chunk goes on filling after the frames it handed out, and
    rolls over to fresh chunks, without touching a byte of any frame still held."""
    dispatcher = KeepingDispatcher()
    srv = SocketServer(dispatcher, clock=ManualClock(), max_request_bytes=1 << 20, max_idle_ms=1000)
    bound = await srv.listen(ListenerSpec("PLAINTEXT", "127.0.0.1", 0))
    reader, writer = await asyncio.open_connection("127.0.0.1", bound.port)
    # Sizes that leave every kind of room at a chunk's end, ~1.5 MB in all (six chunks).
    sent = [bytes([i % 251]) * (1 + (i * 7919) % 20_000) for i in range(150)]
    for payload in sent:
        writer.write(frame(payload))
        assert await read_frame(reader) == payload
    assert [bytes(view) for view in dispatcher.kept] == sent
    writer.close()
    await srv.shutdown(1.0)


async def test_pipelined_frames_keep_their_bytes_across_chunk_sizes() -> None:
    """All at once: the connection moves from its small first chunk to streaming ones,
    carrying unfinished frames over, and hands every frame out intact and in order."""
    dispatcher = KeepingDispatcher()
    srv = SocketServer(dispatcher, clock=ManualClock(), max_request_bytes=1 << 20, max_idle_ms=1000)
    bound = await srv.listen(ListenerSpec("PLAINTEXT", "127.0.0.1", 0))
    reader, writer = await asyncio.open_connection("127.0.0.1", bound.port)
    sent = [bytes([i % 251]) * (1 + (i * 7919) % 20_000) for i in range(150)]
    sent += [b"x" * 300_000, b"y" * 3, b"z" * 5000]
    writer.write(b"".join(frame(payload) for payload in sent))
    for payload in sent:
        assert await read_frame(reader) == payload
    assert [bytes(view) for view in dispatcher.kept] == sent
    writer.close()
    await srv.shutdown(1.0)


async def test_idle_connections_hold_small_receive_buffers() -> None:
    """An accepted connection that sent nothing, or one small request, holds a few KiB of
    receive buffer, not a streaming chunk (256 KiB each made 2,000 idle connections 589 MB)."""
    srv = SocketServer(
        EchoDispatcher(), clock=ManualClock(), max_request_bytes=1 << 20, max_idle_ms=1000
    )
    bound = await srv.listen(ListenerSpec("PLAINTEXT", "127.0.0.1", 0))
    count = 100
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        clients = [await asyncio.open_connection("127.0.0.1", bound.port) for _ in range(count)]
        # One small request each: its answer proves the reader is up and holds its chunk.
        for reader, writer in clients[: count // 2]:
            writer.write(frame(b"hello"))
            assert await read_frame(reader) == b"hello"
        await _until(lambda: len(srv.connections) == count)
        # A round trip after the last accept: every reader task has taken its first step.
        clients[0][1].write(frame(b"again"))
        assert await read_frame(clients[0][0]) == b"again"
        per_connection = (tracemalloc.get_traced_memory()[0] - before) / count
    finally:
        tracemalloc.stop()
    # Both ends of each connection are in this process: sockets, tasks, streams, chunk.
    assert per_connection < 32 * 1024
    for _reader, writer in clients:
        writer.close()
    await srv.shutdown(1.0)


class RecordingSocket:
    """Stands in for a connection's socket: takes every send whole and records it."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> int:
        self.sent.append(bytes(data))
        return len(data)


async def test_the_reader_sends_only_while_the_writer_is_idle() -> None:
    """A writer in the middle of an answer (a file region after its header, say) must not
    have another answer sent between its pieces: the reader queues instead. Only the flag
    can be set by hand here; with real sockets the window is a matter of task order."""
    sock = RecordingSocket()
    info = ConnectionInfo(connection_id=1, listener_name="PLAINTEXT", peer="test", local_port=0)
    connection = Connection(
        sock,  # type: ignore[arg-type]
        info,
        EchoDispatcher(),
        max_request_bytes=1024,
        max_in_flight=10,
        clock=ManualClock(),
        on_close=lambda _: None,
    )
    connection._writer_idle = False  # the writer is busy
    await connection._submit(memoryview(b"hello"))
    connection._send_ready()
    assert sock.sent == []
    assert len(connection._pending) == 1
    connection._writer_idle = True  # the writer waits for work again
    connection._send_ready()
    assert sock.sent == [frame(b"hello")]
    assert not connection._pending


class HeldDispatcher:
    """Answers each frame only when the test releases that frame by its bytes."""

    def __init__(self) -> None:
        self.dispatched: list[bytes] = []
        self.held: dict[bytes, asyncio.Event] = {}

    def dispatch(self, frame: memoryview, connection: ConnectionInfo) -> DispatchResult:
        data = bytes(frame)
        self.dispatched.append(data)
        if not data.startswith(b"hold"):
            return [data]
        release = self.held.setdefault(data, asyncio.Event())
        return self._later(data, release)

    async def _later(self, data: bytes, release: asyncio.Event) -> list[bytes]:
        await release.wait()
        return [data]


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not condition():  # noqa: ASYNC110  a condition polled with a deadline
            await asyncio.sleep(0)


@pytest.mark.parametrize(
    ("max_requests", "max_bytes"),
    [(2, -1), (100, len(b"hold-a1") + len(b"hold-a2"))],
    ids=["queued.max.requests", "queued.max.request.bytes"],
)
async def test_the_broker_reads_no_request_past_the_queue_limits(
    max_requests: int, max_bytes: int
) -> None:
    """Kafka's queued.max.requests / queued.max.request.bytes: across all connections, once
    that many requests (or bytes) are read and unanswered, no connection reads another until
    one is answered; the others then go on."""
    dispatcher = HeldDispatcher()
    srv = SocketServer(
        dispatcher,
        clock=ManualClock(),
        max_request_bytes=1 << 20,
        max_idle_ms=1000,
        queued_max_requests=max_requests,
        queued_max_request_bytes=max_bytes,
    )
    port = (await srv.listen(ListenerSpec("PLAINTEXT", "127.0.0.1", 0))).port
    try:
        reader_a, writer_a = await asyncio.open_connection("127.0.0.1", port)
        writer_a.write(frame(b"hold-a1") + frame(b"hold-a2"))
        await _until(lambda: len(dispatcher.dispatched) == 2)
        reader_b, writer_b = await asyncio.open_connection("127.0.0.1", port)
        writer_b.write(frame(b"b1"))
        await _until(lambda: srv.gate.waiting == 1)
        assert dispatcher.dispatched == [b"hold-a1", b"hold-a2"]

        dispatcher.held[b"hold-a1"].set()
        assert await read_frame(reader_a) == b"hold-a1"
        assert await read_frame(reader_b) == b"b1"
        assert dispatcher.dispatched == [b"hold-a1", b"hold-a2", b"b1"]

        # A connection closed with requests unanswered gives their room back.
        writer_a.close()
        await _until(lambda: srv.gate.requests == 0)
        writer_b.write(frame(b"hold-b2") + frame(b"hold-b3") + frame(b"b4"))
        await _until(lambda: srv.gate.waiting == 1)
        assert dispatcher.dispatched[3:] == [b"hold-b2", b"hold-b3"]
        writer_b.close()
    finally:
        await srv.shutdown(1.0)


async def test_socket_buffer_sizes_are_set_on_accepted_connections() -> None:
    """socket.send.buffer.bytes / socket.receive.buffer.bytes reach SO_SNDBUF / SO_RCVBUF
    (Linux reports twice the size asked for, its bookkeeping share); -1 leaves the OS's."""
    srv = SocketServer(
        EchoDispatcher(),
        clock=ManualClock(),
        max_request_bytes=1024,
        max_idle_ms=1000,
        send_buffer_bytes=20_000,
        receive_buffer_bytes=30_000,
    )
    port = (await srv.listen(ListenerSpec("PLAINTEXT", "127.0.0.1", 0))).port
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await _until(lambda: len(srv.connections) == 1)
        (connection,) = srv.connections
        assert connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 40_000
        assert connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 60_000
        writer.close()
    finally:
        await srv.shutdown(1.0)


async def test_a_bound_listener_serves_no_one_until_it_accepts() -> None:
    """Between ``bind`` and ``start_accepting`` a client's connect succeeds (the kernel's
    backlog holds it) but its request is not read; once accepting starts it is answered."""
    dispatcher = HeldDispatcher()
    srv = SocketServer(dispatcher, clock=ManualClock(), max_request_bytes=1024, max_idle_ms=1000)
    other = SocketServer(
        EchoDispatcher(), clock=ManualClock(), max_request_bytes=1024, max_idle_ms=1000
    )
    try:
        port = srv.bind(ListenerSpec("PLAINTEXT", "127.0.0.1", 0)).port
        assert port != 0
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(b"early"))
        await writer.drain()
        # A round trip through another server's accepted connection: the event loop has
        # since handled every socket that was ready, and nothing took this one.
        other_port = (await other.listen(ListenerSpec("PLAINTEXT", "127.0.0.1", 0))).port
        other_reader, other_writer = await asyncio.open_connection("127.0.0.1", other_port)
        other_writer.write(frame(b"ping"))
        assert await read_frame(other_reader) == b"ping"
        other_writer.close()
        assert srv.connections == set()
        assert dispatcher.dispatched == []

        srv.start_accepting()
        assert await read_frame(reader) == b"early"
        assert dispatcher.dispatched == [b"early"]
        writer.close()
    finally:
        await other.shutdown(1.0)
        await srv.shutdown(1.0)


async def test_a_listener_that_never_accepted_shuts_down() -> None:
    """Start-up failed after binding: shutdown closes the listener, the client waiting in
    its backlog is hung up on without an answer, and the port refuses connections."""
    dispatcher = HeldDispatcher()
    srv = SocketServer(dispatcher, clock=ManualClock(), max_request_bytes=1024, max_idle_ms=1000)
    port = srv.bind(ListenerSpec("PLAINTEXT", "127.0.0.1", 0)).port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(b"early"))
    await writer.drain()
    await srv.shutdown(1.0)
    try:
        answered = await reader.read()
    except ConnectionResetError:  # the kernel resets a connection nobody accepted
        answered = b""
    assert answered == b""
    assert dispatcher.dispatched == []
    writer.close()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_a_port_in_use_leaves_no_socket_behind() -> None:
    """``bind`` raises OSError and keeps nothing open: no file descriptor, no listener for
    accepting or shutdown to find."""
    srv = SocketServer(
        EchoDispatcher(), clock=ManualClock(), max_request_bytes=1024, max_idle_ms=1000
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        open_before = len(os.listdir("/proc/self/fd"))
        with pytest.raises(OSError):
            srv.bind(ListenerSpec("PLAINTEXT", "127.0.0.1", taken.getsockname()[1]))
        assert len(os.listdir("/proc/self/fd")) == open_before
    srv.start_accepting()
    await srv.shutdown(1.0)
