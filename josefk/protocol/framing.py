"""Size-prefixed frames: splitting a byte stream into frames, and prefixing frames to send.

Owns ``FrameDecoder``, a feed-style (sans-io) decoder: the connection feeds it whatever the
socket delivered and gets back complete frames as memoryviews. Frames that arrive whole in
one ``bytes`` chunk are returned as slices of that chunk (no copy); a frame spread over
several chunks is assembled once into a buffer of exactly its size. A size above
``max_frame_size`` (Kafka's ``socket.request.max.bytes``) raises ``FrameTooLarge`` before
anything is allocated. Imports only josefk.protocol.errors and types; no sockets.
"""

from __future__ import annotations

import struct
from typing import Final

from josefk.protocol.errors import FrameTooLarge, InvalidFrameSize

_SIZE: Final = struct.Struct(">i")
DEFAULT_MAX_FRAME_SIZE: Final = 104_857_600  # socket.request.max.bytes default


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

    def _start(self, size: int) -> None:
        if size < 0:
            raise InvalidFrameSize(f"negative frame size {size}")
        if size > self.max_frame_size:
            raise FrameTooLarge(size, self.max_frame_size)

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
            self._start(size)
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


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """A frame: size prefix and payload, as one bytes object."""
    return _SIZE.pack(len(payload)) + bytes(payload)
