"""The validator's record scan (records.scan) and the bounded decompression stream it reads.

The C walk and the Python walk must agree on every input, valid or not; the poison records
Kafka's validator refuses are refused; a compressed batch is read as a stream within its
budget.
"""

from __future__ import annotations

import zlib

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from records_strategies import batch_specs, build

from josefk.records import RecordBatch, batch_max_timestamp
from josefk.records.batch import HEADER_SIZE
from josefk.records.compression import DecompressionBudget, decompress, decompress_stream
from josefk.records.errors import CorruptRecordError, DecompressedSizeError, InvalidRecordError
from josefk.records.scan import (
    C_SCAN_AVAILABLE,
    RecordsCheck,
    _scan_records_python,
    scan_batch_records,
    scan_records,
)
from josefk.records.varint import write_varint, write_varlong

NO_CHECK = RecordsCheck()


def record(
    *,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    delta: int = 0,
    offset_delta: int = 0,
    key_length: int | None = None,
    value_length: int | None = None,
    headers: list[tuple[bytes, bytes | None]] | None = None,
    header_count: int | None = None,
    extra: bytes = b"",
) -> bytes:
    """One record, with any length field overridable to craft a poison one."""
    body = bytearray(b"\x00")
    write_varlong(body, delta)
    write_varint(body, offset_delta)
    write_varint(body, (len(key) if key is not None else -1) if key_length is None else key_length)
    body += key or b""
    write_varint(
        body, (len(value) if value is not None else -1) if value_length is None else value_length
    )
    body += value or b""
    headers = headers or []
    write_varint(body, len(headers) if header_count is None else header_count)
    for name, header_value in headers:
        write_varint(body, len(name))
        body += name
        write_varint(body, -1 if header_value is None else len(header_value))
        body += header_value or b""
    body += extra
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out + body)


def walks(data: bytes, count: int, check: RecordsCheck = NO_CHECK, **kw: object) -> list[object]:
    """Both walks' results (the C one only where it is built)."""
    final = bool(kw.get("final", True))
    results: list[object] = [_scan_records_python(data, 0, count, 0, 1000, check, final=final)]
    if C_SCAN_AVAILABLE:
        results.append(scan_records(data, 0, count, 0, 1000, check, final=final))
    return results


def agree(data: bytes, count: int, check: RecordsCheck = NO_CHECK, *, final: bool = True) -> None:
    results = walks(data, count, check, final=final)
    shapes = [
        (r.position, r.scanned, r.max_delta, r.keyless, r.bad_timestamps, r.error is None)  # type: ignore[attr-defined]
        for r in results
    ]
    assert all(shape == shapes[0] for shape in shapes), shapes


@pytest.mark.parametrize(
    "poison",
    [
        record(key_length=50),  # the key runs past the record
        record(key_length=-2),  # negative, and not -1
        record(value_length=40),
        record(value_length=-7),
        record(header_count=-1),
        record(headers=[(b"h", b"x")], header_count=3),
        record(key=b"k", extra=b"\x00\x00"),  # bytes the fields do not use
    ],
)
def test_poison_records_are_refused_by_both_walks(poison: bytes) -> None:
    data = record() + poison + record()
    for result in walks(data, 3):
        assert result.error is not None and result.error.startswith("record 1:")  # type: ignore[attr-defined]
        assert result.scanned == 1  # type: ignore[attr-defined]
    agree(data, 3)


def test_count_and_trailing_bytes() -> None:
    data = record() + record()
    for result in walks(data, 3):
        assert "fewer records" in result.error  # type: ignore[attr-defined]
    for result in walks(data + b"\x00", 2):
        assert "after its last record" in result.error  # type: ignore[attr-defined]
    for result in walks(data, 1):
        assert "after its last record" in result.error  # type: ignore[attr-defined]
    for result in walks(data, 2):
        assert result.error is None and result.scanned == 2  # type: ignore[attr-defined]


def test_a_stream_stops_at_an_unfinished_record() -> None:
    data = record() + record(value=b"x" * 300)
    for result in walks(data[:-10], 2, final=False):
        assert result.error is None  # type: ignore[attr-defined]
        assert (result.scanned, result.position) == (1, len(record()))  # type: ignore[attr-defined]


def test_keys_and_timestamps_are_listed_by_index() -> None:
    data = record(delta=5) + record(key=None, delta=-2000) + record(key=None, delta=10)
    check = RecordsCheck(ts_low=0, ts_high=1_005, check_timestamps=True, keys_required=True)
    for result in walks(data, 3, check):
        assert result.error is None  # type: ignore[attr-defined]
        assert result.keyless == [1, 2]  # type: ignore[attr-defined]
        assert result.bad_timestamps == [1, 2]  # type: ignore[attr-defined]
        assert result.max_delta == 10  # type: ignore[attr-defined]
    # A record written with timestamp -1 (base + delta) is never out of range.
    for result in walks(record(delta=-1001), 1, check):
        assert result.bad_timestamps is None  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(batch_specs)
def test_built_batches_scan_clean_and_find_the_max_timestamp(spec: object) -> None:
    batch = RecordBatch(memoryview(build(spec)))  # type: ignore[arg-type]
    header = batch.header()
    scan = scan_batch_records(
        header,
        batch.records_buffer(),
        batch.compression,
        NO_CHECK,
        budget=DecompressionBudget.unbounded(),
    )
    if not header.attributes & 0x08:
        expected = batch_max_timestamp(batch)
        found = -1 if scan.max_delta is None else max(header.base_timestamp + scan.max_delta, -1)
        assert found == expected
    data = bytes(decompress(batch.compression, batch.records_buffer()))
    agree(data, header.record_count)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=6),
    st.integers(min_value=0, max_value=8),
    st.booleans(),
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=0, max_value=255),
)
def test_the_c_and_python_walks_agree_on_damaged_records(
    values: list[bytes], count: int, final: bool, at: int, byte: int
) -> None:
    data = bytearray(
        b"".join(record(value=v, key=None if i % 2 else b"k") for i, v in enumerate(values))
    )
    if data:
        data[at % len(data)] = byte
    check = RecordsCheck(ts_low=900, ts_high=1100, check_timestamps=True, keys_required=True)
    agree(bytes(data), count, check, final=final)


# -- the stream ------------------------------------------------------------------------------


def chunks_of(codec: object, data: bytes, budget: DecompressionBudget) -> bytes:
    return b"".join(bytes(c) for c in decompress_stream(codec, data, budget=budget))  # type: ignore[arg-type]


@pytest.mark.parametrize("codec_name", ["GZIP", "ZSTD", "LZ4", "SNAPPY"])
def test_stream_round_trips_and_concatenated_members(codec_name: str) -> None:
    from josefk.records import Compression, compress

    codec = Compression[codec_name]
    raw = b"".join(b"%06d" % i * 20 for i in range(5000))
    packed = compress(codec, raw)
    assert chunks_of(codec, packed, DecompressionBudget.unbounded()) == raw
    if codec in (Compression.GZIP, Compression.ZSTD):
        assert chunks_of(codec, packed + packed, DecompressionBudget.unbounded()) == raw + raw


@pytest.mark.parametrize(
    "packed",
    [
        bytes(cramjam.zstd.compress(b"\0" * (8 << 20))),
        zlib.compress(b"\0" * (8 << 20), wbits=31),
    ],
    ids=["zstd", "gzip"],
)
def test_a_bomb_stops_at_the_bound_without_inflating(packed: bytes) -> None:
    from josefk.records import Compression

    codec = Compression.ZSTD if packed[:4] == b"\x28\xb5\x2f\xfd" else Compression.GZIP
    budget = DecompressionBudget(1 << 40, per_batch=1 << 20)
    biggest = 0
    with pytest.raises(DecompressedSizeError, match="per-batch"):
        for chunk in decompress_stream(codec, packed, budget=budget):
            biggest = max(biggest, len(chunk))
    # Windows, never the whole 8 MiB: gzip's are 256 KiB, a zstd step of 256 input bytes
    # inflates to a few MiB at most.
    assert biggest < 8 << 20
    # The request's budget runs out before the batch's bound.
    shared = DecompressionBudget(3 << 20, per_batch=8 << 20)
    with pytest.raises(DecompressedSizeError, match="request"):
        chunks_of(codec, packed, shared)
    assert shared.remaining < 0 and shared.remaining > -(8 << 20)


@pytest.mark.parametrize("codec_name", ["GZIP", "ZSTD"])
def test_cut_short_or_followed_by_garbage_is_corrupt(codec_name: str) -> None:
    from josefk.records import Compression, compress

    codec = Compression[codec_name]
    packed = compress(codec, b"abc" * 10_000)
    for bad in (packed[:-6], packed + b"junk!", b"\x01\x02garbage" * 5):
        with pytest.raises(CorruptRecordError):
            chunks_of(codec, bad, DecompressionBudget.unbounded())


def test_a_compressed_batch_whose_count_lies_is_invalid() -> None:
    from josefk.records import BatchBuilder, Compression

    builder = BatchBuilder(compression=Compression.GZIP)
    builder.append(b"k", b"v", (), 1000)
    batch = RecordBatch(memoryview(builder.build()))
    header = batch.header()
    header.record_count = (1 << 31) - 1
    with pytest.raises(InvalidRecordError, match="fewer records"):
        scan_batch_records(
            header,
            batch.buffer[HEADER_SIZE:],
            Compression.GZIP,
            NO_CHECK,
            budget=DecompressionBudget.unbounded(),
        )
