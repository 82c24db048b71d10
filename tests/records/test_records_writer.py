"""A batch's ``RecordWriter``: the C writer (``_crecords.RecordWriter``) against its Python
twin (``builder.PyRecordWriter``).

Both sit under every ``BatchBuilder`` and under the producer's per-record path, which
calls the writer directly. For any records, appended as a producer appends them (the
writer first, the builder's general path for a record the writer declines), the two must
end with the same bytes, counts, timestamps and offsets; each keeps the append times on
``time.perf_counter``'s clock; each refuses a record written out of order, and keeps the
times once the bytes are released.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.records import HEADER_SIZE, BatchBuilder
from josefk.records import builder as builder_module
from josefk.records.builder import PyRecordWriter

C_WRITER = getattr(builder_module._crecords, "RecordWriter", None)
needs_c = pytest.mark.skipif(C_WRITER is None, reason="C extension not built")
WRITERS = [PyRecordWriter] + ([C_WRITER] if C_WRITER is not None else [])

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_BASE = 1_763_800_000_000

_payloads = st.one_of(
    st.none(),
    st.binary(max_size=200),
    st.binary(max_size=10).map(bytearray),
    st.integers(min_value=8180, max_value=8200).map(lambda n: b"v" * n),
)
_headers = st.one_of(
    st.just(()),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=2),
)
_deltas = st.one_of(
    st.integers(min_value=-70, max_value=70),
    st.integers(min_value=-(1 << 40), max_value=1 << 40),
)
_records = st.lists(st.tuples(_payloads, _payloads, _headers, _deltas), min_size=1, max_size=10)


def _produce(writer: Any, records: list[tuple[Any, Any, Any, int]]) -> BatchBuilder:
    saved = builder_module.RecordWriter
    builder_module.RecordWriter = writer
    try:
        builder = BatchBuilder(producer_id=3, producer_epoch=1, base_sequence=0, keep_times=True)
    finally:
        builder_module.RecordWriter = saved
    for key, value, headers, delta in records:
        if builder.records.append(key, value, headers, _BASE + delta) is None:
            builder.append(key, value, headers, _BASE + delta)
    return builder


@needs_c
@settings(max_examples=300)
@given(records=_records)
def test_the_c_writer_and_its_python_twin_agree(records: list[tuple[Any, Any, Any, int]]) -> None:
    built = []
    for writer in (C_WRITER, PyRecordWriter):
        builder = _produce(writer, records)
        written = builder.records
        assert type(written) is writer
        n = len(records)
        assert written.record_count == n
        assert written.last_offset_delta == n - 1
        assert [written.timestamp(i) for i in range(n)] == [_BASE + r[3] for r in records]
        assert written.base_timestamp == _BASE + records[0][3]
        assert written.max_timestamp == max(_BASE + r[3] for r in records)
        built.append(bytes(builder.build()))
    assert built[0] == built[1]


@pytest.mark.parametrize("writer", WRITERS)
def test_append_times_are_read_on_the_perf_counter_clock(writer: Any) -> None:
    records = writer(HEADER_SIZE, keep_times=True)
    before = time.perf_counter()
    assert records.append(None, b"a", (), 5) == 0
    assert records.append(b"k", b"b", (), 9) == 1
    after = time.perf_counter()
    assert before <= records.appended_at(0) <= records.appended_at(1) <= after
    assert records.latencies(after + 1.0) == [after + 1.0 - records.appended_at(i) for i in (0, 1)]
    assert (records.timestamp(0), records.timestamp(1)) == (5, 9)
    with pytest.raises(IndexError):
        records.timestamp(2)
    with pytest.raises(IndexError):
        records.appended_at(-1)


@pytest.mark.parametrize("writer", WRITERS)
def test_a_record_noted_out_of_order_is_refused(writer: Any) -> None:
    records = writer(HEADER_SIZE)
    records.note(4, 100)
    for offset_delta in (4, 3):
        with pytest.raises(ValueError, match="does not follow"):
            records.note(offset_delta, 100)
    assert (records.record_count, records.last_offset_delta) == (1, 4)
    with pytest.raises(ValueError, match="keep_times"):
        records.timestamp(0)


@pytest.mark.parametrize("writer", WRITERS)
def test_released_records_keep_their_times_not_their_bytes(writer: Any) -> None:
    records = writer(HEADER_SIZE, keep_times=True)
    records.append(None, b"x" * 100, (), 7)
    assert len(records.buffer) > HEADER_SIZE
    records.release()
    with pytest.raises(ValueError, match="released"):
        records.buffer  # noqa: B018
    with pytest.raises(ValueError, match="released"):
        records.append(None, b"y", (), 8)
    assert (records.record_count, records.timestamp(0)) == (1, 7)


@pytest.mark.parametrize("writer", WRITERS)
def test_a_first_timestamp_outside_int64_is_declined(writer: Any) -> None:
    records = writer(HEADER_SIZE)
    for timestamp in (INT64_MAX + 1, INT64_MIN - 1):
        assert records.append(None, b"x", (), timestamp) is None
    assert records.append(None, b"x", (), INT64_MIN) == 0
    assert records.append(None, b"x", (), INT64_MAX) is None  # the delta is past int64
    assert (records.record_count, len(records.buffer) > HEADER_SIZE) == (1, True)
