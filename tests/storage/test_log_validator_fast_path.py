"""The validator's C fast path (``records.scan.accept_plain_batches``) against its Python
checks, on produce buffers both well-formed and damaged.

Whatever the C acceptor takes, the Python validator (``validate_batches`` with the acceptor
switched off) must take too, unchanged (nothing rebuilt, no max timestamp corrected) and
with the same counts, headers and, once offsets are assigned, the same bytes and offsets.
A buffer of plain batches the Python validator takes as they are must be taken by the
acceptor as well, or the fast path would never run. What the acceptor declines is decided
by the Python checks alone, so refusals keep their Kafka errors (the rest of the suite holds
those).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from log_helpers import NOW, small_config

from josefk.records import BatchBuilder, Compression, RecordBatch
from josefk.records import scan as scan_module
from josefk.records.batch import TimestampType
from josefk.records.errors import RecordsError
from josefk.storage import log_validator
from josefk.storage.errors import StorageError
from josefk.storage.log_validator import AcceptedRecords, ValidatedRecords, validate_batches
from josefk.storage.offsets import TopicPartition

pytestmark = pytest.mark.skipif(
    scan_module._crecords is None, reason="C extension not built: no fast path to compare"
)

TP = TopicPartition("t", 0)
_keys = st.none() | st.binary(max_size=6)
_records = st.lists(
    st.tuples(_keys, st.none() | st.binary(max_size=40), st.integers(-50, 50)),
    min_size=1,
    max_size=5,
)
_batch = st.fixed_dictionaries(
    {
        "records": _records,
        "producer_id": st.sampled_from([-1, 7]),
        "transactional": st.booleans(),
        "log_append_time": st.booleans(),
        "compression": st.sampled_from([Compression.NONE, Compression.NONE, Compression.GZIP]),
    }
)
# Damage: (byte position within the buffer, xor mask), applied after building.
_damage = st.lists(st.tuples(st.integers(0, 400), st.integers(1, 255)), max_size=2)


def _build(spec: dict[str, Any]) -> bytes:
    producer_id = spec["producer_id"]
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=spec["transactional"] and producer_id >= 0,
        timestamp_type=(
            TimestampType.LOG_APPEND_TIME if spec["log_append_time"] else TimestampType.CREATE_TIME
        ),
        compression=spec["compression"],
    )
    for key, value, delta in spec["records"]:
        builder.append(key, value, (), NOW + delta * 1000)
    return bytes(builder.build())


def _fields(header: Any) -> tuple[int, ...]:
    return tuple(getattr(header, name) for name in type(header).__slots__)


def _python(view: memoryview, config: Any) -> ValidatedRecords | AcceptedRecords | Exception:
    saved = log_validator.accept_plain_batches
    log_validator.accept_plain_batches = lambda *_a, **_k: None  # type: ignore[assignment]
    try:
        return validate_batches(view, config, topic_partition=TP, directory=Path("."), now=NOW)
    except (RecordsError, StorageError) as exc:
        return exc
    finally:
        log_validator.accept_plain_batches = saved  # type: ignore[assignment]


@settings(max_examples=400, deadline=None)
@given(
    batches=st.lists(_batch, min_size=1, max_size=3),
    damage=_damage,
    compacted=st.booleans(),
    window_s=st.sampled_from([10, 30, 1_000_000]),
)
def test_what_the_c_path_takes_the_python_checks_take_unchanged(
    batches: list[dict[str, Any]], damage: list[tuple[int, int]], compacted: bool, window_s: int
) -> None:
    data = bytearray(b"".join(_build(spec) for spec in batches))
    for position, mask in damage:
        if position < len(data):
            data[position] ^= mask
    config = small_config(
        cleanup_policy=("compact",) if compacted else ("delete",),
        message_timestamp_before_max_ms=window_s * 1000,
        message_timestamp_after_max_ms=window_s * 1000,
        max_message_bytes=1_000_000,
    )
    fast_view, slow_view = memoryview(bytearray(data)), memoryview(bytearray(data))
    try:
        fast = validate_batches(fast_view, config, topic_partition=TP, directory=Path("."), now=NOW)
    except (RecordsError, StorageError):
        return  # declined, then refused by the Python checks
    if not isinstance(fast, AcceptedRecords):
        return  # declined: the Python checks decided (the result is theirs)
    event("taken by the C path")
    slow = _python(slow_view, config)
    assert isinstance(slow, ValidatedRecords), f"C took what Python refuses: {slow!r}"
    assert not slow.rebuilt and not slow.max_timestamp_fixes
    assert (fast.record_count, fast.has_producer_id, fast.batch_count) == (
        slow.record_count,
        slow.has_producer_id,
        slow.batch_count,
    )
    assert [_fields(h) for h in fast.headers] == [_fields(h) for h in slow.headers]
    fast_assigned = fast.apply(500, 3, NOW, log_append_time=False)
    slow_assigned = slow.apply(500, 3, NOW, log_append_time=False)
    assert fast_assigned == slow_assigned
    assert bytes(fast_view) == bytes(slow_view)


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(_batch, min_size=1, max_size=3), compacted=st.booleans())
def test_plain_batches_the_python_checks_take_as_they_are_take_the_c_path(
    batches: list[dict[str, Any]], compacted: bool
) -> None:
    data = b"".join(_build(spec) for spec in batches)
    config = small_config(
        cleanup_policy=("compact",) if compacted else ("delete",), max_message_bytes=1_000_000
    )
    slow = _python(memoryview(bytearray(data)), config)
    plain = all(spec["compression"] is Compression.NONE for spec in batches)
    if not (plain and isinstance(slow, ValidatedRecords)) or slow.max_timestamp_fixes:
        return
    fast = validate_batches(
        memoryview(bytearray(data)), config, topic_partition=TP, directory=Path("."), now=NOW
    )
    assert isinstance(fast, AcceptedRecords)


def test_a_batch_whose_max_timestamp_needs_correcting_goes_to_the_python_checks() -> None:
    builder = BatchBuilder()
    builder.append(b"k", b"v", (), NOW)
    data = bytearray(builder.build())
    data[35:43] = (0).to_bytes(8, "big")  # a max timestamp of 0, as some clients write
    data[17:21] = RecordBatch(memoryview(data)).compute_crc().to_bytes(4, "big")
    validated = validate_batches(
        memoryview(data), small_config(), topic_partition=TP, directory=Path("."), now=NOW
    )
    assert isinstance(validated, ValidatedRecords)
    assert validated.max_timestamp_fixes == {0: NOW}
