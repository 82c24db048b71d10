"""The validator's one pass over a batch's records: framing, keys and timestamps.

Owns ``scan_records`` (a walk over records that checks each one's framing the way Kafka's
reader does: lengths within the record, no negative length but -1, a header count >= 0,
header keys present, every record using exactly the bytes its length claims, exactly
``count`` records and nothing after them) and ``scan_batch_records``, which feeds it a
compressed batch as a bounded stream (``records.compression.decompress_stream``) so that a
batch is decompressed once, a window at a time, and never held whole.

``scan_records`` runs in C (``josefk.records._crecords``, built by setup.py when a compiler
is there) and creates no Python object per record; without the extension, or with
``JOSEFK_PURE_PYTHON=1``, the Python walk below gives the same results. Imports nothing from
josefk but ``records.batch``, ``records.compression``, ``records.varint`` and
``records.errors``.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from crc32c import crc32c

from josefk.records.batch import HEADER_SIZE, BatchHeader, Compression
from josefk.records.compression import DecompressionBudget, decompress_stream
from josefk.records.errors import InvalidRecordError
from josefk.records.varint import INT64_MAX, INT64_MIN, Buffer

# As in the C helper: records listed by index per call, at most.
MAX_LISTED: Final = 100_000


def _load_crecords() -> Any:
    if os.environ.get("JOSEFK_PURE_PYTHON") == "1":
        return None
    try:
        return importlib.import_module("josefk.records._crecords")
    except ImportError:
        return None


_crecords: Any = _load_crecords()
C_SCAN_AVAILABLE: Final = _crecords is not None


class ScanStep(NamedTuple):
    """What one call of ``scan_records`` found (see ``scan_records``)."""

    position: int
    scanned: int
    max_delta: int | None
    keyless: list[int] | None
    bad_timestamps: list[int] | None
    error: str | None


@dataclass(slots=True)
class RecordsCheck:
    """The rules a scan applies beyond framing.

    ``ts_low``/``ts_high`` bound each record's timestamp (base_timestamp + delta, unless it
    is -1) when ``check_timestamps``; ``keys_required`` lists records without a key.
    """

    ts_low: int = INT64_MIN
    ts_high: int = INT64_MAX
    check_timestamps: bool = False
    keys_required: bool = False


@dataclass(slots=True)
class BatchScan:
    """What a whole batch's scan found: the largest timestamp delta (None for no record) and
    the indexes of the records that break a rule (empty when none do)."""

    max_delta: int | None
    keyless: list[int]
    bad_timestamps: list[int]


def scan_records(
    data: Buffer,
    position: int,
    count: int,
    first_index: int,
    base_timestamp: int,
    check: RecordsCheck,
    *,
    final: bool,
) -> ScanStep:
    """Walk at most ``count`` records of ``data`` from ``position``.

    A record running past the end of ``data`` stops the walk there unless ``final`` (then
    it is an error, as are bytes after the ``count``-th record). Framing errors come back in
    ``error`` (a message naming the record), with the fields describing the records before.
    Indexes in the lists are ``first_index`` + the record's place in this walk.
    """
    if _crecords is not None:
        return ScanStep(
            *_crecords.scan_records(
                data,
                position,
                count,
                first_index,
                base_timestamp,
                max(check.ts_low, INT64_MIN),
                min(check.ts_high, INT64_MAX),
                check.check_timestamps,
                check.keys_required,
                final,
            )
        )
    return _scan_records_python(
        data, position, count, first_index, base_timestamp, check, final=final
    )


def scan_uncompressed_batch(
    header: BatchHeader, batch: Buffer, check: RecordsCheck
) -> tuple[int | None, list[int] | None, list[int] | None]:
    """``scan_batch_records`` for an uncompressed batch given whole (header included):
    (max_delta, keyless, bad_timestamps), the lists None or empty when no record breaks a
    rule. The same walk, checks and errors, without the objects: the produce path calls it
    for every partition's batch."""
    if _crecords is not None:
        _, _, max_delta, keyless, bad_timestamps, error = _crecords.scan_records(
            batch,
            HEADER_SIZE,
            header.record_count,
            0,
            header.base_timestamp,
            max(check.ts_low, INT64_MIN),
            min(check.ts_high, INT64_MAX),
            check.check_timestamps,
            check.keys_required,
            True,
        )
        if error is not None:
            raise InvalidRecordError(
                f"invalid record in a batch of {header.record_count} records: {error}"
            )
        return max_delta, keyless, bad_timestamps
    step = _scan_records_python(
        batch, HEADER_SIZE, header.record_count, 0, header.base_timestamp, check, final=True
    )
    _raise_on_error(step, header)
    return step.max_delta, step.keyless, step.bad_timestamps


def scan_batch_records(
    header: BatchHeader,
    records: Buffer,
    codec: Compression,
    check: RecordsCheck,
    *,
    budget: DecompressionBudget,
) -> BatchScan:
    """Scan every record of one batch whose record bytes (after the header) are ``records``.

    An uncompressed batch is one call; a compressed one is decompressed as a stream within
    ``budget`` (RecordsTooLargeError past it, CorruptRecordError for bytes the codec cannot
    read), each window scanned as it arrives and only the unfinished record carried over, so
    memory stays near one window plus the largest record. Raises InvalidRecordError naming
    the first record whose framing is wrong, or when the records do not number exactly
    ``header.record_count``.
    """
    count = header.record_count
    base_timestamp = header.base_timestamp
    keyless: list[int] = []
    bad_timestamps: list[int] = []
    max_delta: int | None = None
    if codec == Compression.NONE:
        step = scan_records(records, 0, count, 0, base_timestamp, check, final=True)
        _raise_on_error(step, header)
        return BatchScan(step.max_delta, step.keyless or [], step.bad_timestamps or [])
    pending = bytearray()
    scanned = 0
    for chunk in decompress_stream(codec, records, budget=budget):
        if scanned == count:
            if len(chunk):
                raise InvalidRecordError(
                    f"the batch has bytes after its {count} records (record count {count})"
                )
            continue
        pending += chunk
        del chunk
        step = scan_records(
            pending, 0, count - scanned, scanned, base_timestamp, check, final=False
        )
        _raise_on_error(step, header)
        del pending[: step.position]
        scanned += step.scanned
        max_delta = _larger(max_delta, step.max_delta)
        _extend(keyless, step.keyless)
        _extend(bad_timestamps, step.bad_timestamps)
    step = scan_records(pending, 0, count - scanned, scanned, base_timestamp, check, final=True)
    _raise_on_error(step, header)
    max_delta = _larger(max_delta, step.max_delta)
    _extend(keyless, step.keyless)
    _extend(bad_timestamps, step.bad_timestamps)
    return BatchScan(max_delta, keyless, bad_timestamps)


def _extend(listed: list[int], more: list[int] | None) -> None:
    if more:
        listed += more[: MAX_LISTED - len(listed)]


def _larger(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _raise_on_error(step: ScanStep, header: BatchHeader) -> None:
    if step.error is not None:
        raise InvalidRecordError(
            f"invalid record in a batch of {header.record_count} records: {step.error}"
        )


# -- the pure-Python walk (the C helper's twin) --------------------------------------------


class _Framing(Exception):
    """One record's framing is wrong (the message says how)."""


class _Short(Exception):
    """The bytes ran out before the end of a varint."""


def _varint(data: Buffer, position: int, limit: int, max_bytes: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    for _ in range(max_bytes):
        if position >= limit:
            raise _Short
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
    raise _Framing("is not a valid varint")


def _body(data: Buffer, at: int, stop: int) -> tuple[int, bool]:
    """Check one record's body; returns its timestamp delta and whether it has a key."""
    if at >= stop:
        raise _Framing("a record ends before its attributes")
    try:
        delta, at = _varint(data, at + 1, stop, 10)
        _offset_delta, at = _varint(data, at, stop, 5)
        key_length, at = _varint(data, at, stop, 5)
        if key_length < -1:
            raise _Framing("a record has a negative key length")
        if key_length > stop - at:
            raise _Framing("a record's key runs past the end of the record")
        at += max(key_length, 0)
        value_length, at = _varint(data, at, stop, 5)
        if value_length < -1:
            raise _Framing("a record has a negative value length")
        if value_length > stop - at:
            raise _Framing("a record's value runs past the end of the record")
        at += max(value_length, 0)
        headers, at = _varint(data, at, stop, 5)
        if headers < 0:
            raise _Framing("a record has a negative header count")
        for _ in range(headers):
            length, at = _varint(data, at, stop, 5)
            if length < 0:
                raise _Framing("a record has a header with a negative key length")
            if length > stop - at:
                raise _Framing("a header key runs past the end of the record")
            at += length
            length, at = _varint(data, at, stop, 5)
            if length < -1:
                raise _Framing("a record has a header with a negative value length")
            if length > stop - at:
                raise _Framing("a header value runs past the end of the record")
            at += max(length, 0)
    except _Short:
        raise _Framing("a record's fields run past the end of the record") from None
    if at != stop:
        raise _Framing("a record's fields do not use exactly the bytes its length claims")
    return delta, key_length >= 0


def _scan_records_python(
    data: Buffer,
    position: int,
    count: int,
    first_index: int,
    base_timestamp: int,
    check: RecordsCheck,
    *,
    final: bool,
) -> ScanStep:
    end = len(data)
    if not 0 <= position <= end:
        raise ValueError("position outside the buffer")
    scanned = 0
    max_delta: int | None = None
    keyless: list[int] | None = None
    bad: list[int] | None = None
    error: str | None = None
    while scanned < count:
        start = position
        try:
            length, at = _varint(data, position, end, 5)
        except _Short:
            if final:
                error = "the batch holds fewer records than its record count"
                if start != end:
                    error = "a record runs past the end of the batch"
            break
        except _Framing:
            error = "a record length is not a valid varint"
            break
        if length > 0 and length > end - at:
            if final:
                error = "a record runs past the end of the batch"
            break
        if length <= 0:
            error = "a record claims a length of zero or less"
            break
        try:
            delta, has_key = _body(data, at, at + length)
        except _Framing as framing:
            error = str(framing)
            break
        index = first_index + scanned
        if max_delta is None or delta > max_delta:
            max_delta = delta
        if check.keys_required and not has_key:
            keyless = keyless if keyless is not None else []
            if len(keyless) < MAX_LISTED:
                keyless.append(index)
        if check.check_timestamps:
            timestamp = base_timestamp + delta
            if timestamp != -1 and not (
                INT64_MIN <= timestamp <= INT64_MAX and check.ts_low <= timestamp <= check.ts_high
            ):
                bad = bad if bad is not None else []
                if len(bad) < MAX_LISTED:
                    bad.append(index)
        position = at + length
        scanned += 1
    if error is None and final and scanned == count and position != end:
        error = "the batch has bytes after its last record"
    if error is not None:
        error = f"record {first_index + scanned}: {error}"
    return ScanStep(position, scanned, max_delta, keyless, bad, error)


# (position, batch length, last offset delta, max timestamp) of each accepted batch.
PlainSpan = tuple[int, int, int, int]


def accept_plain_batches(
    data: Buffer,
    *,
    max_bytes: int,
    ts_low: int,
    ts_high: int,
    check_timestamps: bool,
    keys_required: bool,
) -> tuple[int, bool, list[PlainSpan]] | None:
    """A producer's buffer whose every batch the validator would take as it is, in one C
    call: (record count, whether a batch has a producer id, each batch's span); None, with
    nothing decided, for anything else and without the C extension.

    Takes only whole uncompressed v2 batches with base offset 0, a CRC that matches, records
    numbered 0..count-1, no control batch, a producer id on a transactional batch, at most
    ``max_bytes`` bytes, records whose framing ``scan_records`` accepts, keys on every record
    when ``keys_required``, timestamps within [``ts_low``, ``ts_high``] when
    ``check_timestamps`` and the batch is CreateTime, and (CreateTime) a header max timestamp
    equal to the one the records give. Whatever it declines goes through the validator's
    own checks, which refuse or correct it with the error Kafka gives: the C path never
    refuses anything itself.
    """
    if _crecords is None:
        return None
    result: tuple[int, bool, list[PlainSpan]] | None = _crecords.accept_plain_batches(
        data,
        crc32c,
        max_bytes,
        max(ts_low, INT64_MIN),
        min(ts_high, INT64_MAX),
        check_timestamps,
        keys_required,
    )
    return result
