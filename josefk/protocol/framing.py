"""Size-prefixed frames: splitting a byte stream into frames, and prefixing frames to send.

Owns ``FrameDecoder``, a feed-style (sans-io) decoder: the connection feeds it whatever the
socket delivered and gets back complete frames as memoryviews. Frames that arrive whole in
one ``bytes`` chunk are returned as slices of that chunk (no copy); a frame spread over
several chunks is assembled once into a buffer of exactly its size. A size above
``max_frame_size`` (Kafka's ``socket.request.max.bytes``) raises ``FrameTooLarge`` before
anything is allocated.

Also owns ``FrameReceiver``, the same splitting for a reader that lets the socket write
straight into its buffers (``asyncio.BufferedProtocol``): bytes land where the frame will be
read from, so even a frame spread over many reads is never copied. Imports only
josefk.protocol.errors and types; no sockets.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable
from typing import Final, cast

from josefk.protocol.errors import FrameTooLarge, InvalidFrameSize


def _load_frame_buffer() -> Callable[[int], bytearray]:
    try:
        module = importlib.import_module("josefk.protocol._cdecode")
    except ImportError:  # the optional C extension was not built
        return bytearray
    # An extension built from an older source has no frame_buffer: zeroed buffers, then.
    return cast(Callable[[int], bytearray], getattr(module, "frame_buffer", bytearray))


_frame_buffer = _load_frame_buffer()

_SIZE: Final = struct.Struct(">i")
DEFAULT_MAX_FRAME_SIZE: Final = 104_857_600  # socket.request.max.bytes default


def _check_size(size: int, max_frame_size: int) -> None:
    """A frame's size prefix, refused before anything is allocated for it."""
    if size < 0:
        raise InvalidFrameSize(f"negative frame size {size}")
    if size > max_frame_size:
        raise FrameTooLarge(size, max_frame_size)


class FrameDecoder:
    """Splits a stream into frames. Not thread-safe; one per connection.

    A ``bytes`` chunk passed to ``feed`` is kept alive by the frames sliced from it; a
    bytearray or memoryview chunk (which the caller may reuse) is copied first.
    """

    __slots__ = ("_filled", "_frame", "_header", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._header = bytearray()
        self._frame: bytearray | None = None
        self._filled = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes received that belong to a frame not yet complete."""
        return len(self._header) + self._filled + (4 if self._frame is not None else 0)

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Consume ``data``; return every frame it completes (payload without size prefix)."""
        if not isinstance(data, bytes):
            data = bytes(data)
        view = memoryview(data)
        end = len(view)
        pos = 0
        frames: list[memoryview] = []
        while pos < end:
            frame = self._frame
            if frame is not None:
                take = min(len(frame) - self._filled, end - pos)
                frame[self._filled : self._filled + take] = view[pos : pos + take]
                self._filled += take
                pos += take
                if self._filled == len(frame):
                    frames.append(memoryview(frame))
                    self._frame = None
                    self._filled = 0
                continue
            if self._header or end - pos < 4:
                take = min(4 - len(self._header), end - pos)
                self._header += view[pos : pos + take]
                pos += take
                if len(self._header) < 4:
                    break
                size = _SIZE.unpack(self._header)[0]
                self._header.clear()
            else:
                size = _SIZE.unpack_from(view, pos)[0]
                pos += 4
            _check_size(size, self.max_frame_size)
            if end - pos >= size:
                frames.append(view[pos : pos + size])
                pos += size
            else:
                self._frame = bytearray(size)
                self._filled = 0
        return frames


def frame_prefix(size: int) -> bytes:
    """The 4-byte size prefix of a frame of ``size`` bytes."""
    return _SIZE.pack(size)


def frame_buffer(size: int) -> bytearray:
    """A buffer for a frame of ``size`` bytes that will be received whole before it is read:
    with the C extension its bytes are left as allocated instead of zeroed first (one pass
    over memory less per frame); without it, ``bytearray(size)``."""
    return _frame_buffer(size)


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """A frame: size prefix and payload, as one bytes object."""
    return _SIZE.pack(len(payload)) + bytes(payload)


class FrameReceiver:
    """Receives a stream straight into frame buffers: the buffered-protocol twin of
    ``FrameDecoder``. Not thread-safe; one per connection.

    The socket writes into ``buffer()``; ``received(n)`` then returns the frames completed.
    Small frames are slices of a chunk that goes on filling after them (never over them: a
    frame handed out keeps its chunk alive and unchanged); when the chunk is full, or too
    little room is left after its last frame, the unfinished tail moves to a fresh chunk. A
    frame larger than a chunk gets a buffer of exactly its size and the rest of it is received
    straight into that, so a large fetch response reaches its reader without being copied.
    """

    __slots__ = (
        "_chunk",
        "_chunk_size",
        "_filled",
        "_frame",
        "_frame_filled",
        "_start",
        "_view",
        "max_frame_size",
    )

    def __init__(
        self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, chunk_size: int = 64 * 1024
    ) -> None:
        self.max_frame_size = max_frame_size
        self._chunk_size = chunk_size
        self._chunk = bytearray(chunk_size)
        self._view = memoryview(self._chunk)
        self._start = 0  # where the first unfinished frame (or its size prefix) begins
        self._filled = 0
        self._frame: memoryview | None = None  # a large frame being received
        self._frame_filled = 0

    def buffer(self) -> memoryview:
        """Where the next bytes received go (never empty)."""
        if self._frame is not None:
            return self._frame[self._frame_filled :]
        if self._filled == len(self._chunk):
            self._fresh_chunk()
        return self._view[self._filled :]

    def received(self, count: int) -> list[memoryview]:
        """``count`` bytes were written into ``buffer()``: the frames they complete."""
        frame = self._frame
        if frame is not None:
            self._frame_filled += count
            if self._frame_filled < len(frame):
                return []
            self._frame = None
            return [frame]
        self._filled = filled = self._filled + count
        chunk, view, start = self._chunk, self._view, self._start
        frames: list[memoryview] = []
        while filled - start >= 4:
            size = _SIZE.unpack_from(chunk, start)[0]
            _check_size(size, self.max_frame_size)
            end = start + 4 + size
            if end <= filled:
                frames.append(view[start + 4 : end])
                start = end
                continue
            if 4 + size > len(chunk):
                head = filled - start - 4
                large = memoryview(frame_buffer(size))
                large[:head] = view[start + 4 : filled]
                self._frame, self._frame_filled = large, head
                start = filled
            break
        self._start = start
        if start == filled and len(chunk) - filled < self._chunk_size // 4:
            self._new_chunk()
        return frames

    def _new_chunk(self) -> None:
        self._chunk = bytearray(self._chunk_size)
        self._view = memoryview(self._chunk)
        self._start = self._filled = 0

    def _fresh_chunk(self) -> None:
        view, start, filled = self._view, self._start, self._filled
        self._new_chunk()
        self._view[: filled - start] = view[start:filled]
        self._filled = filled - start
