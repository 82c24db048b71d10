"""The producer's one-record encoder: C (``_crecords.append_record``) against Python
(``builder._encode_record_python``), byte for byte.

Every record the C encoder takes must come out as the Python encoder writes it, behind
whatever the buffer already held, across the varint size boundaries of every field (lengths
around 64 and 8192 bytes, deltas of either sign up to int64, offset deltas up to int32). A
record it declines leaves the buffer untouched, and BatchBuilder then raises or encodes as
the Python path does. The builder without the C encoder (its SMALL_UVARINTS join) writes the
same batches as with it.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.records import HEADER_SIZE, BatchBuilder, RecordBatch, iter_records
from josefk.records import builder as builder_module
from josefk.records.builder import C_APPEND_AVAILABLE, _encode_record_python

needs_c = pytest.mark.skipif(not C_APPEND_AVAILABLE, reason="C extension not built")

INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

_sizes = st.one_of(
    st.integers(min_value=0, max_value=130),
    st.integers(min_value=8180, max_value=8200),
)
_bytes = _sizes.map(lambda n: bytes(range(256)) * (n // 256) + b"v" * (n % 256))
_payloads = st.one_of(st.none(), _bytes, _bytes.map(bytearray))
_header_values = st.one_of(st.none(), st.binary(max_size=70), st.binary(max_size=5).map(bytearray))
_headers = st.one_of(
    st.just(()),
    st.lists(st.tuples(st.text(max_size=70), _header_values), max_size=3),
    st.lists(st.tuples(st.text(max_size=5), _header_values), max_size=3).map(tuple),
)
_offset_deltas = st.one_of(
    st.integers(min_value=0, max_value=9000), st.integers(min_value=0, max_value=INT32_MAX)
)
_timestamp_deltas = st.one_of(
    st.integers(min_value=-8200, max_value=8200),
    st.integers(min_value=INT64_MIN, max_value=INT64_MAX),
    st.sampled_from([INT64_MIN, INT64_MAX, -1, 0, 63, 64, -64, -65]),
)


@needs_c
@settings(max_examples=400)
@given(
    prefix=st.binary(max_size=70),
    offset_delta=_offset_deltas,
    timestamp_delta=_timestamp_deltas,
    key=_payloads,
    value=_payloads,
    headers=_headers,
)
def test_c_and_python_encoders_write_the_same_bytes(
    prefix: bytes,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | bytearray | None,
    value: bytes | bytearray | None,
    headers: list[tuple[str, bytes | bytearray | None]] | tuple[()],
) -> None:
    append_record = builder_module._append_record
    assert append_record is not None
    ours = bytearray(prefix)
    assert append_record(ours, offset_delta, timestamp_delta, key, value, headers) is True
    theirs = bytearray(prefix)
    _encode_record_python(theirs, offset_delta, timestamp_delta, key, value, headers)
    assert ours == theirs


@needs_c
@pytest.mark.parametrize(
    ("offset_delta", "timestamp_delta", "key", "value", "headers"),
    [
        (INT32_MAX + 1, 0, None, b"v", ()),  # offset delta past int32
        (-1, 0, None, b"v", ()),
        (0, INT64_MAX + 1, None, b"v", ()),  # timestamp delta past int64
        (0, INT64_MIN - 1, None, b"v", ()),
        (0, 0.0, None, b"v", ()),  # a float timestamp
        (0, 0, memoryview(b"k"), b"v", ()),  # not bytes or bytearray
        (0, 0, None, "text", ()),
        (0, 0, None, b"v", [("h", memoryview(b"x"))]),
        (0, 0, None, b"v", [["h", b"x"]]),  # a header that is no tuple
        (0, 0, None, b"v", [(b"h", b"x")]),  # a header key that is no str
        (0, 0, None, b"v", [("\ud800", b"x")]),  # a key that is not valid UTF-8 text
        (0, 0, None, b"v", iter([("h", b"x")])),  # headers that are no list or tuple
        (0, 0, None, b"v", {"h": b"x"}),
    ],
)
def test_the_c_encoder_declines_what_python_must_judge(
    offset_delta: object, timestamp_delta: object, key: object, value: object, headers: object
) -> None:
    append_record = builder_module._append_record
    assert append_record is not None
    out = bytearray(b"before")
    assert append_record(out, offset_delta, timestamp_delta, key, value, headers) is False
    assert out == b"before"


@needs_c
def test_the_c_encoder_declines_the_buffer_itself_as_a_field() -> None:
    append_record = builder_module._append_record
    assert append_record is not None
    out = bytearray(b"abc")
    assert append_record(out, 0, 0, out, None, ()) is False
    assert append_record(out, 0, 0, None, None, [("h", out)]) is False
    assert out == b"abc"


@needs_c
def test_the_c_encoder_grows_a_buffer_that_is_read_elsewhere() -> None:
    append_record = builder_module._append_record
    assert append_record is not None
    out = bytearray()
    for i in range(2000):
        assert append_record(out, i, 0, None, b"x" * 100, ())
    with memoryview(out), pytest.raises(BufferError):
        # A view held on the buffer forbids resizing it, as for bytearray's own +=.
        append_record(out, 2000, 0, None, b"x" * (1 << 20), ())


def _records_of(builder: BatchBuilder) -> list[tuple[object, ...]]:
    batch = RecordBatch(memoryview(builder.build()))
    batch.ensure_valid_from_producer()
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)]


@settings(max_examples=100)
@given(
    records=st.lists(
        st.tuples(
            _payloads, _payloads, _headers, _timestamp_deltas.filter(lambda d: abs(d) < 1 << 40)
        ),
        min_size=1,
        max_size=8,
    )
)
def test_builders_with_and_without_the_c_encoder_build_the_same_batch(
    records: list[tuple[bytes | None, bytes | None, object, int]],
) -> None:
    batches = []
    for writer in (builder_module.RecordWriter, builder_module.PyRecordWriter):
        saved = builder_module.RecordWriter
        builder_module.RecordWriter = writer  # type: ignore[misc]
        try:
            builder = BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0)
            assert type(builder.records) is writer
            for key, value, headers, delta in records:
                builder.append(key, value, headers, 1_763_800_000_000 + delta)  # type: ignore[arg-type]
            batches.append(bytes(builder.build()))
        finally:
            builder_module.RecordWriter = saved  # type: ignore[misc]
    assert batches[0] == batches[1]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"timestamp": 1 << 63}, ValueError),
        ({"timestamp": 1.5}, TypeError),
        ({"headers": [("\ud800", b"x")]}, UnicodeEncodeError),
    ],
)
def test_a_refused_first_record_leaves_the_builder_empty(
    kwargs: dict[str, object], error: type[Exception]
) -> None:
    builder = BatchBuilder()
    with pytest.raises(error):
        builder.append(None, b"x", **kwargs)  # type: ignore[arg-type]
    assert builder.record_count == 0
    assert builder.uncompressed_size == HEADER_SIZE
    builder.append(None, b"y", (), 5)
    assert _records_of(builder) == [(0, 5, None, b"y", ())]


def test_a_timestamp_delta_past_int64_is_refused_and_changes_nothing() -> None:
    builder = BatchBuilder()
    builder.append(None, b"a", (), INT64_MIN)
    with pytest.raises(ValueError, match="timestamp delta"):
        builder.append(None, b"b", (), INT64_MAX)
    builder.append(None, b"c", (), INT64_MIN + 1)
    assert _records_of(builder) == [
        (0, INT64_MIN, None, b"a", ()),
        (1, INT64_MIN + 1, None, b"c", ()),
    ]
