"""FrameDecoder and FrameReceiver split any chunking of a stream into the same frames."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.protocol.errors import FrameTooLarge, InvalidFrameSize
from josefk.protocol.framing import FrameDecoder, FrameReceiver, encode_frame, frame_prefix


@given(
    st.lists(st.binary(max_size=300), max_size=8),
    st.lists(st.integers(1, 64), min_size=1, max_size=20),
)
def test_any_chunking_gives_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    decoder = FrameDecoder(max_frame_size=1000)
    frames: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        size = cuts[i % len(cuts)]
        frames.extend(bytes(f) for f in decoder.feed(stream[pos : pos + size]))
        pos += size
        i += 1
    assert frames == payloads
    assert decoder.buffered_bytes == 0


def test_whole_frames_are_zero_copy_slices() -> None:
    chunk = encode_frame(b"abc") + encode_frame(b"defg")
    frames = FrameDecoder().feed(chunk)
    assert [bytes(f) for f in frames] == [b"abc", b"defg"]
    assert all(f.obj is chunk for f in frames)


def test_partial_frame_is_buffered() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(frame_prefix(10) + b"12345") == []
    assert decoder.buffered_bytes == 9
    assert [bytes(f) for f in decoder.feed(b"67890" + frame_prefix(1))] == [b"1234567890"]
    assert decoder.buffered_bytes == 4


def test_too_large_and_negative_frames() -> None:
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_frame_size=100).feed(frame_prefix(101))
    with pytest.raises(InvalidFrameSize):
        FrameDecoder().feed(b"\xff\xff\xff\xff")
    # The size alone is enough to refuse, before any payload arrives.
    decoder = FrameDecoder(max_frame_size=10)
    assert decoder.feed(b"\x00\x00") == []
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"\x10\x00")


def test_empty_frame() -> None:
    assert [bytes(f) for f in FrameDecoder().feed(frame_prefix(0))] == [b""]


def receive(receiver: FrameReceiver, data: bytes, max_read: int = 1 << 30) -> list[memoryview]:
    """Write ``data`` into the receiver as a socket would: at most what ``buffer()`` offers
    (and ``max_read``) per read."""
    frames: list[memoryview] = []
    pos = 0
    while pos < len(data):
        into = receiver.buffer()
        assert len(into) > 0
        count = min(len(into), len(data) - pos, max_read)
        into[:count] = data[pos : pos + count]
        pos += count
        frames.extend(receiver.received(count))
    return frames


@given(
    st.lists(st.binary(max_size=300), max_size=12),
    st.lists(st.integers(1, 97), min_size=1, max_size=20),
    st.integers(8, 64),
)
def test_the_receiver_gives_the_same_frames_for_any_reads(
    payloads: list[bytes], cuts: list[int], chunk_size: int
) -> None:
    """Frames larger than the chunk, frames straddling chunks, and reads of any size; every
    frame handed out keeps its bytes while later ones are received (no buffer is reused)."""
    stream = b"".join(encode_frame(p) for p in payloads)
    receiver = FrameReceiver(max_frame_size=1000, chunk_size=chunk_size)
    frames: list[memoryview] = []
    pos = 0
    i = 0
    while pos < len(stream):
        size = cuts[i % len(cuts)]
        frames.extend(receive(receiver, stream[pos : pos + size]))
        pos += size
        i += 1
    assert [bytes(f) for f in frames] == payloads


def test_a_large_frame_is_received_in_place() -> None:
    receiver = FrameReceiver(chunk_size=64)
    payload = bytes(range(200))
    assert receive(receiver, frame_prefix(200) + payload[:10]) == []
    into = receiver.buffer()
    assert len(into) == 190  # the rest of the frame, nothing past it
    (frame,) = receive(receiver, payload[10:])
    assert bytes(frame) == payload and len(frame.obj) == 200  # type: ignore[arg-type]


def test_the_receiver_refuses_bad_sizes_before_the_payload() -> None:
    with pytest.raises(FrameTooLarge):
        receive(FrameReceiver(max_frame_size=100), frame_prefix(101))
    with pytest.raises(InvalidFrameSize):
        receive(FrameReceiver(), b"\xff\xff\xff\xff")
