"""The four codecs: round trips, the Java client's framings, bounded output, bad input."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from josefk.records import Compression, CorruptRecordError
from josefk.records.compression import (
    LZ4_FRAME_HEADER,
    XERIAL_HEADER,
    compress,
    decompress,
    lz4_frame_compress,
    snappy_xerial_compress,
)

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]

# Input that compresses well and input that does not, and sizes around the block sizes.
data_strategy = st.one_of(
    st.binary(max_size=5000),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=8), st.integers(0, 40000)),
)


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 for inputs shorter than 16 bytes: enough for an LZ4 frame header."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    assert len(data) < 16
    h = (seed + p5 + len(data)) & mask
    i = 0
    while i + 4 <= len(data):
        (word,) = struct.unpack_from("<I", data, i)
        h = (rotl((h + word * p3) & mask, 17) * p4) & mask
        i += 4
    for byte in data[i:]:
        h = (rotl((h + byte * p5) & mask, 11) * p1) & mask
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    h ^= h >> 16
    return h


@pytest.mark.parametrize("codec", CODECS)
@given(data=data_strategy)
def test_round_trip(codec: Compression, data: bytes) -> None:
    compressed = compress(codec, data)
    assert bytes(decompress(codec, compressed)) == data
    assert bytes(decompress(codec, memoryview(compressed))) == data


def test_none_is_identity() -> None:
    assert bytes(decompress(Compression.NONE, compress(Compression.NONE, b"abc"))) == b"abc"


def test_xerial_framing_layout() -> None:
    data = bytes(range(256)) * 300  # 76,800 bytes: three 32 KiB blocks
    framed = snappy_xerial_compress(data)
    assert framed.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert framed[:16] == XERIAL_HEADER
    position, blocks = 16, []
    while position < len(framed):
        (length,) = struct.unpack_from(">i", framed, position)
        blocks.append(
            bytes(cramjam.snappy.decompress_raw(framed[position + 4 : position + 4 + length]))
        )
        position += 4 + length
    assert [len(b) for b in blocks] == [32768, 32768, 11264]
    assert b"".join(blocks) == data


@given(data_strategy)
def test_raw_snappy_is_accepted(data: bytes) -> None:
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert bytes(decompress(Compression.SNAPPY, raw)) == data


def test_lz4_frame_header_checksum_is_correct() -> None:
    assert LZ4_FRAME_HEADER[:4] == b"\x04\x22\x4d\x18"
    flg_bd = LZ4_FRAME_HEADER[4:6]
    assert LZ4_FRAME_HEADER[6] == (_xxh32(flg_bd) >> 8) & 0xFF
    # Independent blocks, as Kafka's Java reader requires.
    assert LZ4_FRAME_HEADER[4] & 0x20


def test_lz4_incompressible_blocks_are_stored() -> None:
    data = bytes(cramjam.zstd.compress(bytes(range(256)) * 2000, level=19)) * 10
    frame = lz4_frame_compress(data)
    assert bytes(decompress(Compression.LZ4, frame)) == data


@pytest.mark.parametrize("codec", CODECS)
@given(data=data_strategy)
def test_kafka_python_reads_ours_and_we_read_theirs(codec: Compression, data: bytes) -> None:
    encode, decode, available = {
        Compression.GZIP: (kafka_codec.gzip_encode, kafka_codec.gzip_decode, kafka_codec.has_gzip),
        Compression.SNAPPY: (
            kafka_codec.snappy_encode,
            kafka_codec.snappy_decode,
            kafka_codec.has_snappy,
        ),
        Compression.LZ4: (kafka_codec.lz4_encode, kafka_codec.lz4_decode, kafka_codec.has_lz4),
        Compression.ZSTD: (kafka_codec.zstd_encode, kafka_codec.zstd_decode, kafka_codec.has_zstd),
    }[codec]
    if not available():
        pytest.skip(f"kafka-python has no {codec.name} codec installed")
    if codec == Compression.SNAPPY and len(data) == 0:
        # kafka-python only recognises the xerial framing when at least one block follows.
        return
    assert bytes(decode(compress(codec, data))) == data
    assert bytes(decompress(codec, encode(data))) == data


def test_concatenated_gzip_members() -> None:
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert bytes(decompress(Compression.GZIP, data)) == b"first second"


@pytest.mark.parametrize("codec", CODECS)
def test_output_is_capped(codec: Compression) -> None:
    # A few KB that expand to 8 MiB: a small cap must stop it with a CorruptRecordError.
    bomb = compress(codec, bytes(8 << 20))
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(codec, bomb, max_size=1 << 20)
    assert len(decompress(codec, bomb, max_size=8 << 20)) == 8 << 20


def test_lying_size_hints_fall_back_to_growing() -> None:
    data = b"x" * 300_000
    lying_gzip = bytearray(compress(Compression.GZIP, data))
    lying_gzip[-4:] = struct.pack("<I", 10)  # ISIZE says 10 bytes; gzip checks it at the end
    with pytest.raises(CorruptRecordError):
        decompress(Compression.GZIP, bytes(lying_gzip))
    lying_snappy = b"\x0a" + bytes(cramjam.snappy.compress_raw(data))[3:]
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, lying_snappy)


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(min_size=1, max_size=2000), cut=st.integers(min_value=0))
def test_truncated_input_raises_only_corrupt_record_error(
    codec: Compression, data: bytes, cut: int
) -> None:
    compressed = compress(codec, data)
    cut %= len(compressed)
    try:
        out = decompress(codec, compressed[:cut], max_size=1 << 20)
    except CorruptRecordError:
        return
    # Some prefixes are valid on their own (a xerial header with fewer blocks).
    assert len(out) <= len(data)


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=300), garbage=st.binary(max_size=300), flips=st.data())
def test_garbage_raises_only_corrupt_record_error(
    codec: Compression, data: bytes, garbage: bytes, flips: st.DataObject
) -> None:
    mutated = bytearray(compress(codec, data))
    for _ in range(flips.draw(st.integers(0, 4))):
        index = flips.draw(st.integers(0, len(mutated) - 1))
        mutated[index] ^= flips.draw(st.integers(1, 255))
    for candidate in (bytes(mutated), garbage, bytes(mutated) + garbage):
        try:
            out = decompress(codec, candidate, max_size=1 << 20)
        except CorruptRecordError:
            continue
        assert len(out) <= 1 << 20


def _zstd_frames_without_content_size(data: bytes) -> list[bytes]:
    zstandard = pytest.importorskip("zstandard")
    frames = [zstandard.ZstdCompressor(write_content_size=False).compress(data)]
    # A streaming writer flushing now and then, as a Java producer's stream does.
    chunked = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    parts = []
    for start in range(0, len(data), 50_000):
        parts.append(chunked.compress(data[start : start + 50_000]))
        parts.append(chunked.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
    parts.append(chunked.flush())
    frames.append(b"".join(parts))
    return frames


@given(data_strategy)
def test_size_hints_bound_the_output_tightly(data: bytes) -> None:
    """Walking lz4/zstd block headers gives an upper bound within a few blocks of the size."""
    from josefk.records.compression import _lz4_size_hint, _zstd_size_hint

    lz4_hint = _lz4_size_hint(lz4_frame_compress(data))
    assert lz4_hint is not None
    assert len(data) <= lz4_hint <= len(data) + 64 * 1024
    zstd_hint = _zstd_size_hint(compress(Compression.ZSTD, data))
    assert zstd_hint == len(data)  # one-shot frames carry their content size
    for frame in _zstd_frames_without_content_size(data):
        hint = _zstd_size_hint(frame)
        assert hint is not None
        assert len(data) <= hint <= len(data) + 128 * 1024 * (1 + len(data) // 50_000)
        assert bytes(decompress(Compression.ZSTD, frame)) == data
        assert _zstd_size_hint(frame + frame) == (None if hint is None else 2 * hint)


def test_lz4_frames_of_other_writers() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    data = bytes(range(256)) * 4000
    for options in (
        {},
        {"block_linked": False, "block_checksum": True},
        {"store_size": False, "block_size": lz4_frame.BLOCKSIZE_MAX4MB},
        {"store_size": False, "content_checksum": True},
    ):
        frame = lz4_frame.compress(data, **options)
        assert bytes(decompress(Compression.LZ4, frame)) == data
        from josefk.records.compression import _lz4_size_hint

        hint = _lz4_size_hint(frame)
        assert hint is not None and hint >= len(data)


def test_decompression_allocates_within_the_cap() -> None:
    import tracemalloc

    bombs = {codec: compress(codec, bytes(32 << 20)) for codec in CODECS}
    for codec, bomb in bombs.items():
        tracemalloc.start()
        try:
            with pytest.raises(CorruptRecordError):
                decompress(codec, bomb, max_size=1 << 20)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 3 << 20, f"{codec.name} allocated {peak} bytes under a 1 MiB cap"
