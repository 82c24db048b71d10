"""Compression codecs of record batches: gzip, snappy (xerial framing), lz4 (frame) and zstd.

Owns the byte formats the Java client writes inside a compressed batch and a bounded
decompressor for each. Imports nothing from josefk but ``records.batch`` (for the Compression
enum) and ``records.errors``; the codecs themselves come from the ``cramjam`` package.

Formats, as the Java client writes and reads them:

- gzip: a standard gzip stream (RFC 1952); concatenated members are read as one stream.
- snappy: xerial's framing, not snappy's own framing format::

      8 bytes  magic b"\\x82SNAPPY\\x00"
      4 bytes  version (int32 BE, 1)
      4 bytes  compatible version (int32 BE, 1)
      repeated: 4 bytes block length (int32 BE), then one raw snappy block

  Some non-Java producers send a single raw snappy block without the framing; the reader
  accepts both.
- lz4: the LZ4 frame format (magic 0x184D2204) with a correct header checksum, as Kafka has
  used since 0.10; written with independent 64 KiB blocks, which is what the Java reader
  requires.
- zstd: standard zstd frames.

Decompression is bounded: a batch of a few hundred bytes can claim gigabytes of output, so
every decompressor writes into a buffer no larger than ``max_size`` and raises
DecompressedSizeError (a CorruptRecordError) when the output would not fit, before
allocating more. The broker's validator reads a batch as a stream instead
(``decompress_stream``): gzip and zstd a window at a time, so that a batch is never held
whole, within a ``DecompressionBudget`` shared by every batch of one produce request.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Generator, Iterator
from typing import Final

import cramjam
import zstandard

from josefk.records.batch import Compression
from josefk.records.errors import (
    CorruptRecordError,
    DecompressedSizeError,
    UnsupportedCompressionError,
)

Buffer = bytes | bytearray | memoryview

DEFAULT_MAX_DECOMPRESSED_SIZE: Final = 64 * 1024 * 1024
# What one produce request's batches may inflate to, all together: a few batches at the
# per-batch bound. Hostile requests of tiny batches that each inflate to the bound stop
# costing decompression work here; a request carrying more compressed bytes gets more room
# (REQUEST_INFLATION times its compressed bytes), as its sender paid for them.
DEFAULT_MAX_REQUEST_DECOMPRESSED_SIZE: Final = 4 * DEFAULT_MAX_DECOMPRESSED_SIZE
REQUEST_INFLATION: Final = 64
# The window a stream is read in: gzip returns at most this much per step; zstd is fed this
# much compressed input per step (its output per step is bounded by the format: at most
# about 32 KiB per input byte).
STREAM_WINDOW: Final = 256 * 1024
_ZSTD_INPUT_STEP: Final = 256
_GZIP_MAGIC: Final = b"\x1f\x8b"

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
XERIAL_HEADER: Final = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE: Final = 32 * 1024  # what xerial's SnappyOutputStream uses by default

LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
LZ4_BLOCK_SIZE: Final = 64 * 1024
# FLG 0x60: version 01, independent blocks, no block checksums, no content size, no content
# checksum. BD 0x40: 64 KiB maximum block size. The last byte is the header checksum,
# (xxh32(FLG BD, seed 0) >> 8) & 0xFF, constant because FLG and BD are.
LZ4_FRAME_HEADER: Final = LZ4_MAGIC + b"\x60\x40\x82"
_LZ4_END_MARK: Final = b"\x00\x00\x00\x00"
_LZ4_UNCOMPRESSED_BIT: Final = 0x80000000

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"

_INT32 = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")
_UINT64_LE = struct.Struct("<Q")

# Java's GZIPOutputStream uses zlib's default level; zstd's default level is 3.
_DEFAULT_LEVEL: Final = {Compression.GZIP: 6, Compression.ZSTD: 3}

# The message cramjam gives when the output buffer is full: the only decompression error
# that means "give me more room" rather than "these bytes are broken".
_BUFFER_FULL: Final = "failed to write whole buffer"
_GROWTH: Final = 4
_MIN_GUESS: Final = 64 * 1024


# -- compression ---------------------------------------------------------------------------


def compress(codec: Compression, data: Buffer, *, level: int | None = None) -> bytes:
    """Compress ``data`` in the format a Kafka reader expects for ``codec``.

    ``level`` (KIP-390's compression.gzip.level / compression.zstd.level) applies to gzip
    and zstd; snappy has no levels and lz4 is written at its default, fast level.
    """
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        level = _DEFAULT_LEVEL[codec] if level is None else level
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == Compression.SNAPPY:
        return snappy_xerial_compress(data)
    if codec == Compression.LZ4:
        return lz4_frame_compress(data)
    if codec == Compression.ZSTD:
        level = _DEFAULT_LEVEL[codec] if level is None else level
        return bytes(cramjam.zstd.compress(data, level=level))
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def snappy_xerial_compress(data: Buffer, *, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    """Xerial-framed snappy, one raw snappy block per ``block_size`` bytes of input."""
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(view), block_size):
        block = cramjam.snappy.compress_raw(view[start : start + block_size])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def lz4_frame_compress(data: Buffer) -> bytes:
    """An LZ4 frame of independent 64 KiB blocks, readable by Kafka's Java LZ4 reader."""
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    out = bytearray(LZ4_FRAME_HEADER)
    for start in range(0, len(view), LZ4_BLOCK_SIZE):
        chunk = view[start : start + LZ4_BLOCK_SIZE]
        block = cramjam.lz4.compress_block(chunk, store_size=False)
        if len(block) < len(chunk):
            out += _UINT32_LE.pack(len(block))
            out += block
        else:
            # Incompressible input is stored as is; the frame format marks it with the high bit.
            out += _UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BIT)
            out += chunk
    out += _LZ4_END_MARK
    return bytes(out)


# -- decompression -------------------------------------------------------------------------


def decompress(
    codec: Compression, data: Buffer, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> memoryview:
    """Decompress the records of a batch; raises CorruptRecordError on bad or oversized input.

    The result is a memoryview over a fresh buffer (never over ``data``), at most
    ``max_size`` bytes long.
    """
    try:
        if codec == Compression.NONE:
            return memoryview(data)
        if codec == Compression.GZIP:
            return _bounded(cramjam.gzip.decompress_into, data, max_size, _gzip_size_hint(data))
        if codec == Compression.SNAPPY:
            return snappy_decompress(data, max_size=max_size)
        if codec == Compression.LZ4:
            return _bounded(cramjam.lz4.decompress_into, data, max_size, _lz4_size_hint(data))
        if codec == Compression.ZSTD:
            return _bounded(cramjam.zstd.decompress_into, data, max_size, _zstd_size_hint(data))
    except CorruptRecordError:
        raise
    except Exception as error:  # noqa: BLE001  re-raised as CorruptRecordError (see below)
        # cramjam raises its own DecompressionError, and ValueError/OverflowError on some
        # malformed headers; all of them mean the same thing to a reader of the log.
        raise CorruptRecordError(f"{Compression(codec).name} data is corrupt: {error}") from None
    raise CorruptRecordError(f"unknown compression codec {codec}")


class DecompressionBudget:
    """How many decompressed bytes the batches of one produce request may still cost.

    ``per_batch`` bounds each batch; ``remaining`` is shared, charged as bytes come out.
    Not thread-safe: one request's batches are validated one after another on the loop.
    """

    __slots__ = ("per_batch", "remaining", "total")

    def __init__(self, total: int, *, per_batch: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> None:
        self.total = total
        self.remaining = total
        self.per_batch = per_batch

    @classmethod
    def for_request(cls, compressed_bytes: int) -> DecompressionBudget:
        """The budget of a request carrying ``compressed_bytes`` of record data."""
        return cls(max(DEFAULT_MAX_REQUEST_DECOMPRESSED_SIZE, REQUEST_INFLATION * compressed_bytes))

    @classmethod
    def unbounded(cls) -> DecompressionBudget:
        """Only the per-batch bound: for appends that are not a client's request."""
        return cls(1 << 62)


def decompress_stream(
    codec: Compression, data: Buffer, *, budget: DecompressionBudget
) -> Iterator[Buffer]:
    """The decompressed bytes of a batch's records, in windows, charged to ``budget``.

    gzip (concatenated members too) and zstd (concatenated frames too) are decompressed
    incrementally, so memory stays near one window; snappy and lz4, whose output is bounded
    by a few hundred times their input, come out in one piece. Raises DecompressedSizeError
    as soon as the output passes the batch's bound or the request's remaining budget (before
    more is produced), CorruptRecordError for data the codec cannot read, cut short, or
    followed by bytes that are neither another member/frame. Each window must be consumed
    before the next is asked for: the caller keeps no reference to it.
    """
    limit = min(budget.per_batch, budget.remaining)
    produced = 0
    if codec in (Compression.GZIP, Compression.ZSTD):
        pieces: Generator[Buffer, None, None] = _small_or_windows(codec, data, limit)
    elif codec in (Compression.SNAPPY, Compression.LZ4):
        pieces = _whole(codec, data, max(limit, 0))
    else:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    try:
        for piece in pieces:
            size = len(piece)
            produced += size
            budget.remaining -= size
            if produced > limit:
                bound = (
                    f"the per-batch bound of {budget.per_batch} bytes"
                    if limit == budget.per_batch
                    else f"what is left of the request's {budget.total} bytes"
                )
                raise DecompressedSizeError(
                    f"{Compression(codec).name} records decompress to more than {bound}"
                )
            if size:
                yield piece
            del piece
    except (CorruptRecordError, DecompressedSizeError):
        raise
    except Exception as error:  # noqa: BLE001  zlib.error, ZstdError, ...: re-raised as corrupt
        raise CorruptRecordError(f"{Compression(codec).name} data is corrupt: {error}") from None
    finally:
        pieces.close()


def _whole(codec: Compression, data: Buffer, limit: int) -> Generator[Buffer, None, None]:
    yield decompress(codec, data, max_size=limit)


def _small_or_windows(
    codec: Compression, data: Buffer, limit: int
) -> Generator[Buffer, None, None]:
    # Most batches inflate to less than a window: one bounded call decompresses those at
    # the codec's full speed (the windows cost a Python step each); a batch that does not fit
    # has cost at most one window of work when the stream takes over.
    try:
        whole = decompress(codec, data, max_size=min(STREAM_WINDOW, max(limit, 0) + 1))
    except DecompressedSizeError:
        yield from (_gzip_windows(data) if codec == Compression.GZIP else _zstd_windows(data))
        return
    yield whole


def _gzip_windows(data: Buffer) -> Generator[Buffer, None, None]:
    rest = bytes(data)
    while True:
        stream = zlib.decompressobj(wbits=31)
        pending = rest
        while not stream.eof:
            if not pending:
                raise CorruptRecordError("gzip data is cut short")
            out = stream.decompress(pending, STREAM_WINDOW)
            pending = stream.unconsumed_tail
            yield out
            del out
        rest = stream.unused_data
        if not rest:
            return
        if rest[:2] != _GZIP_MAGIC:
            raise CorruptRecordError(
                f"gzip data is followed by {len(rest)} bytes that are not gzip"
            )


def _zstd_windows(data: Buffer) -> Generator[Buffer, None, None]:
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    position, end = 0, len(view)
    carried = b""
    while True:
        stream = zstandard.ZstdDecompressor().decompressobj()
        if carried:
            out = stream.decompress(carried)
            carried = b""
            yield out
            del out
        while not stream.eof:
            if position >= end:
                raise CorruptRecordError("zstd data is cut short")
            step = view[position : position + _ZSTD_INPUT_STEP]
            position += len(step)
            out = stream.decompress(step)
            yield out
            del out
        carried = stream.unused_data
        if not carried and position >= end:
            return


def snappy_decompress(data: Buffer, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> memoryview:
    """Xerial-framed snappy or, without the magic, one raw snappy block."""
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return _snappy_raw_into_new(view, max_size)
    if len(view) < len(XERIAL_HEADER):
        raise CorruptRecordError(f"xerial snappy header cut short at {len(view)} bytes")
    # First pass: walk the block lengths and add up the sizes each raw block declares, so
    # the output is allocated once, exactly, and only if it fits max_size.
    blocks: list[tuple[memoryview, int]] = []
    total = 0
    position, end = len(XERIAL_HEADER), len(view)
    while position < end:
        if end - position < 4:
            raise CorruptRecordError(f"xerial snappy block length cut short at {position}")
        (length,) = _INT32.unpack_from(view, position)
        position += 4
        if length < 0 or position + length > end:
            raise CorruptRecordError(
                f"xerial snappy block at {position - 4} claims {length} bytes, "
                f"{end - position} remain"
            )
        block = view[position : position + length]
        position += length
        size = _snappy_raw_length(block)
        total += size
        if total > max_size:
            raise DecompressedSizeError(f"snappy data decompresses to more than {max_size} bytes")
        blocks.append((block, size))
    out = bytearray(total)
    target = memoryview(out)
    offset = 0
    for block, size in blocks:
        written = cramjam.snappy.decompress_raw_into(block, target[offset : offset + size])
        if written != size:
            raise CorruptRecordError(f"snappy block gave {written} bytes, declared {size}")
        offset += size
    return target


def _snappy_raw_length(block: memoryview) -> int:
    # A raw snappy block starts with its uncompressed length as an unsigned varint.
    try:
        return int(cramjam.snappy.decompress_raw_len(block))
    except Exception as error:  # noqa: BLE001  re-raised as CorruptRecordError
        raise CorruptRecordError(f"snappy block header is corrupt: {error}") from None


def _snappy_raw_into_new(view: memoryview, max_size: int) -> memoryview:
    size = _snappy_raw_length(view)
    if size > max_size:
        raise DecompressedSizeError(f"snappy data claims {size} bytes, more than {max_size}")
    out = bytearray(size)
    written = cramjam.snappy.decompress_raw_into(view, out)
    if written != size:
        raise CorruptRecordError(f"snappy block gave {written} bytes, declared {size}")
    return memoryview(out)


def _bounded(
    decompress_into: Callable[[Buffer, bytearray], int],
    data: Buffer,
    max_size: int,
    hint: int | None,
) -> memoryview:
    """Run a cramjam ``decompress_into`` with a growing output buffer capped at max_size.

    cramjam stops as soon as the output buffer is full, so a hostile input costs at most
    about max_size bytes of memory and 4/3 of max_size bytes of decompression work. Sizes a
    header declares are only hints: a liar gets the wrong size and falls back to growing.
    """
    if hint is not None and 0 <= hint <= max_size:
        size = hint
    else:
        size = min(max_size, max(_MIN_GUESS, len(data) * _GROWTH))
    while True:
        # One spare byte tells "exactly the hint" apart from "the hint was too small".
        capacity = min(size + 1, max_size)
        out = bytearray(capacity)
        try:
            written = decompress_into(data, out)
        except Exception as error:
            if _BUFFER_FULL not in str(error):
                raise
            if capacity >= max_size:
                raise DecompressedSizeError(
                    f"compressed data decompresses to more than {max_size} bytes"
                ) from None
            size = max(size * _GROWTH, _MIN_GUESS)
            continue
        return memoryview(out)[:written]


def _gzip_size_hint(data: Buffer) -> int | None:
    # ISIZE, the last 4 bytes, is the uncompressed size mod 2**32 of the last member.
    if len(data) < 18:
        return None
    return int(_UINT32_LE.unpack_from(data, len(data) - 4)[0])


def _lz4_size_hint(data: Buffer) -> int | None:
    """An upper bound of an LZ4 frame's output, or None when the frame looks unusual.

    The content size when the header has one (FLG bit 3); otherwise the block walk: each
    block regenerates at most the block maximum size of BD (its own size when stored
    uncompressed). Java's writer uses 64 KiB blocks, so the bound is within one block of the
    truth and the output buffer is allocated once.
    """
    end = len(data)
    if end < 7 or bytes(data[:4]) != LZ4_MAGIC:
        return None
    flags, descriptor = data[4], data[5]
    if flags & 0x08:
        return int(_UINT64_LE.unpack_from(data, 6)[0]) if end >= 15 else None
    block_max = _LZ4_BLOCK_MAX.get((descriptor >> 4) & 0x07)
    if block_max is None:
        return None
    position = 7 + (4 if flags & 0x01 else 0)  # optional dictionary id, then the checksum
    block_checksum = 4 if flags & 0x10 else 0
    bound = 0
    while position + 4 <= end:
        (word,) = _UINT32_LE.unpack_from(data, position)
        position += 4
        if word == 0:
            return bound if position + (4 if flags & 0x04 else 0) == end else None
        size = word & ~_LZ4_UNCOMPRESSED_BIT
        bound += size if word & _LZ4_UNCOMPRESSED_BIT else block_max
        position += size + block_checksum
    return None


_LZ4_BLOCK_MAX: Final = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_ZSTD_BLOCK_MAX: Final = 128 << 10


def _zstd_size_hint(data: Buffer) -> int | None:
    """An upper bound of the output of a run of zstd frames, or None when one looks unusual.

    A frame's Frame_Content_Size when its header has one (zstd's one-shot compressors write
    it); otherwise the block walk: raw and RLE blocks say what they regenerate, compressed
    ones regenerate at most min(window size, 128 KiB). Streaming writers such as the Java
    client's leave the content size out, and the walk still gets within a block of the truth.
    """
    end = len(data)
    position = 0
    bound = 0
    while position < end:
        if end - position < 8:
            return None
        magic = bytes(data[position : position + 4])
        if magic[1:] == b"\x2a\x4d\x18" and magic[0] & 0xF0 == 0x50:  # a skippable frame
            position += 8 + int(_UINT32_LE.unpack_from(data, position + 4)[0])
            continue
        if magic != ZSTD_MAGIC:
            return None
        descriptor = data[position + 4]
        single_segment = bool(descriptor & 0x20)
        position += 5
        window = 0
        if not single_segment:
            window_descriptor = data[position]
            window_base = 1 << (10 + (window_descriptor >> 3))
            window = window_base + (window_base >> 3) * (window_descriptor & 0x07)
            position += 1
        position += (0, 1, 2, 4)[descriptor & 0x03]
        size_bytes = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
        if size_bytes:
            if end < position + size_bytes:
                return None
            value = int.from_bytes(data[position : position + size_bytes], "little")
            content_size = value + 256 if size_bytes == 2 else value
            if single_segment:
                window = content_size
        position += size_bytes
        block_max = min(window, _ZSTD_BLOCK_MAX) if window else _ZSTD_BLOCK_MAX
        frame_bound = 0
        while True:
            if end - position < 3:
                return None
            header = int.from_bytes(data[position : position + 3], "little")
            position += 3
            block_type, block_size = (header >> 1) & 0x03, header >> 3
            if block_type == 0:  # raw
                frame_bound += block_size
                position += block_size
            elif block_type == 1:  # RLE: one byte repeated block_size times
                frame_bound += block_size
                position += 1
            elif block_type == 2:
                frame_bound += block_max
                position += block_size
            else:
                return None
            if header & 0x01:
                break
        if descriptor & 0x04:
            position += 4  # content checksum
        bound += content_size if size_bytes else frame_bound
    return bound if position == end else None
