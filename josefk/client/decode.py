"""Turning fetched record data into ``ConsumerRecord`` tuples: the consumer's hot loop.

Owns ``decode_records``: split the partition's record data into v2 batches
(``josefk.records.split_batches``), decompress each compressed batch once
(``josefk.records.decompress``), and decode its records straight into ``ConsumerRecord``
tuples. ``josefk.records.iter_records`` reads the same format record by record as
``Record`` values; here the loop is flattened for the consumer (no generator, no
intermediate record object, bytes indexing instead of memoryview indexing, one- and two-byte
varints inline), and runs of records laid out as the one before them (what producers
send: values of one length, keys of one length or none, one timestamp per millisecond, no
headers) are checked a byte position at a time for the whole run and built in C, which
takes a 100-byte record from about 1.2 to about 0.4 µs of CPU. The property tests check
that both read every batch alike, also with any byte changed.

Control batches (transaction markers) are skipped but still advance the next fetch offset;
under read_committed the batches of aborted transactions are dropped too.
Records before ``fetch_offset`` (a compressed batch is returned whole) are dropped. Malformed
data raises ``josefk.records.CorruptRecordError``.

Imports josefk.records and josefk.client.types only; no I/O.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterable, Sequence
from typing import Any, Final

from josefk.client.types import ConsumerRecord
from josefk.records import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    Compression,
    ControlRecordType,
    CorruptRecordError,
    RecordBatch,
    TimestampType,
    decode_control_type,
    decompress,
    iter_records,
    split_batches,
)

_CREATE_TIME: Final = TimestampType.CREATE_TIME
_LOG_APPEND_TIME: Final = TimestampType.LOG_APPEND_TIME
_tuple_new = tuple.__new__
_repeat = itertools.repeat
_gc_isenabled = gc.isenabled
_gc_disable = gc.disable
_gc_enable = gc.enable

# For runs of records of one layout (``_run_length``): each byte value as a bytes object,
# and the varints of consecutive offset deltas as byte columns (delta k is 2k zig-zag:
# one byte below 64, two bytes below 8192).
_BYTES: Final = tuple(bytes((b,)) for b in range(256))
_ZERO_BYTE: Final = b"\x00"
_ONE_BYTE_DELTAS: Final = bytes(range(0, 128, 2))
_TWO_BYTE_DELTAS_LOW: Final = bytes(((k << 1) & 0x7F) | 0x80 for k in range(8192))
_TWO_BYTE_DELTAS_HIGH: Final = bytes((k << 1) >> 7 for k in range(8192))
# A batch stops looking for runs after this many that were not there (records that all
# differ: distinct keys, timestamps more than a millisecond apart).
_MAX_MISSED_RUNS: Final = 3


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (up to 10 bytes, i.e. a varlong) at ``pos``; returns (value, next)."""
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError(f"varint longer than 10 bytes before position {pos}")


def _headers(data: bytes, pos: int, count: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    out: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        key_length, pos = _varint(data, pos)
        if key_length < 0:
            raise CorruptRecordError(f"header key length {key_length}")
        key = data[pos : pos + key_length].decode("utf-8")
        pos += key_length
        value_length, pos = _varint(data, pos)
        if value_length < 0:
            if value_length < -1:
                raise CorruptRecordError(f"header value length {value_length}")
            value = None
        else:
            value = data[pos : pos + value_length]
            pos += value_length
        out.append((key, value))
    return tuple(out), pos


def _common_prefix(column: bytes, expected: bytes) -> int:
    """How many leading bytes two byte strings of one length share (bisection of C
    comparisons: a mismatch is rare and marks the end of a run)."""
    if column == expected:
        return len(column)
    low, high = 0, len(column)  # column[:low] matches; column[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        if column[low:middle] == expected[low:middle]:
            low = middle
        else:
            high = middle
    return low


def _run_length(
    data: bytes,
    pos: int,
    stride: int,
    limit: int,
    head: bytes,
    offset_length: int,
    key_prefix: bytes,
    key_length: int,
    value_prefix: bytes,
    first_delta: int,
) -> int:
    """How many of the next ``limit`` records, from ``pos`` on every ``stride`` bytes, have
    the template's layout: ``head`` (length, attributes, timestamp delta), the offset deltas
    ``first_delta``, ``first_delta + 1``, ... as varints of ``offset_length`` bytes,
    ``key_prefix`` and ``key_length`` key bytes, ``value_prefix`` and the value bytes, and a
    header count of 0.

    Each byte position of the layout but the key and value bytes is compared for all
    records at once: a strided slice of ``data`` against the bytes every record must have
    there."""
    n = limit
    column = pos + stride - 1  # the header count ends every record
    n = _common_prefix(data[column : column + n * stride : stride], _ZERO_BYTE * n)
    column = pos
    for byte in head:
        if not n:
            return 0
        n = _common_prefix(data[column : column + n * stride : stride], _BYTES[byte] * n)
        column += 1
    if not n:
        return 0
    last_delta = first_delta + n
    if offset_length == 1:
        n = _common_prefix(
            data[column : column + n * stride : stride],
            _ONE_BYTE_DELTAS[first_delta:last_delta],
        )
    else:
        n = _common_prefix(
            data[column : column + n * stride : stride],
            _TWO_BYTE_DELTAS_LOW[first_delta:last_delta],
        )
        column += 1
        if n:
            n = _common_prefix(
                data[column : column + n * stride : stride],
                _TWO_BYTE_DELTAS_HIGH[first_delta : first_delta + n],
            )
    column += 1
    for byte in key_prefix:
        if not n:
            return 0
        n = _common_prefix(data[column : column + n * stride : stride], _BYTES[byte] * n)
        column += 1
    column += key_length
    for byte in value_prefix:
        if not n:
            return 0
        n = _common_prefix(data[column : column + n * stride : stride], _BYTES[byte] * n)
        column += 1
    return n


def _decode_batch(
    out: list[ConsumerRecord],
    topic: str,
    partition: int,
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_type: TimestampType,
    log_append_time: int,
    leader_epoch: int,
    fetch_offset: int,
) -> None:
    # Two ways through the records.
    #
    # Field by field, one record: lengths and the offset delta are never negative, so
    # their zig-zag form is even and halving it decodes it; an odd byte (a negative value)
    # takes the checked slow path. Null key and value are zig-zag -1, the byte 1. Any
    # inconsistency ends up as a record whose fields do not end where its length says,
    # which is checked for every record.
    #
    # A run of records shaped as the one just read: consecutive records of a batch
    # usually differ only in their offset delta, key and value bytes (one timestamp delta
    # per millisecond, keys of one length or none, values of one length, no headers). Then
    # every record has the same size, and all its other bytes are the template's:
    # ``_run_length`` checks each such byte position of the following records at once
    # (strided slices), the run's keys and values are sliced in comprehensions and its
    # records built in C (map over zip). A record that checks out in every byte position
    # is byte for byte one that field by field decoding accepts with these fields. A batch
    # whose runs keep ending at once (keys of many lengths, timestamps further apart than
    # a millisecond, say) stops looking for them.
    append = out.append
    startswith = data.startswith
    end = len(data)
    pos = 0
    index = 0
    wasted = 0  # runs looked for and not found
    use_log_append_time = timestamp_type == _LOG_APPEND_TIME
    while index < count:
        record_start = pos
        byte = data[pos]
        if byte < 0x80 and not byte & 1:
            record_end = pos + 1 + (byte >> 1)
            pos += 2  # and the record attributes byte, unused by v2
        elif byte & 0x80 and (byte2 := data[pos + 1]) < 0x80 and not byte & 1:
            record_end = pos + 2 + (((byte & 0x7F) | (byte2 << 7)) >> 1)
            pos += 3
        else:
            length, pos = _varint(data, pos)
            if length <= 0:
                raise CorruptRecordError(f"record length {length} at position {pos}")
            record_end = pos + length
            pos += 1
        if record_end > end:
            raise CorruptRecordError(
                f"record of the batch at offset {base_offset} ends at {record_end}, past the "
                f"{end} record bytes"
            )
        byte = data[pos]
        if byte < 0x80:
            timestamp_delta = (byte >> 1) ^ -(byte & 1)
            pos += 1
        elif (byte2 := data[pos + 1]) < 0x80:
            raw = (byte & 0x7F) | (byte2 << 7)
            timestamp_delta = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            timestamp_delta, pos = _varint(data, pos)
        offset_start = pos
        byte = data[pos]
        if byte < 0x80 and not byte & 1:
            offset_delta = byte >> 1
            pos += 1
        elif byte & 0x80 and (byte2 := data[pos + 1]) < 0x80 and not byte & 1:
            offset_delta = ((byte & 0x7F) | (byte2 << 7)) >> 1
            pos += 2
        else:
            offset_delta, pos = _varint(data, pos)
            if offset_delta < 0:
                raise CorruptRecordError(f"offset delta {offset_delta} at position {pos}")
        offset_end = pos
        byte = data[pos]
        if byte == 1:
            key = None
            pos += 1
            key_start = pos
        elif byte < 0x80 and not byte & 1:
            key_start = pos + 1
            pos = key_start + (byte >> 1)
            key = data[key_start:pos]
        else:
            key_length, pos = _varint(data, pos)
            if key_length < -1:
                raise CorruptRecordError(f"key length {key_length} at position {pos}")
            key_start = pos
            if key_length < 0:
                key = None
            else:
                pos += key_length
                key = data[key_start:pos]
        key_end = pos
        byte = data[pos]
        value_start = -1
        if byte == 1:
            value = None
            pos += 1
        elif byte < 0x80 and not byte & 1:
            value_start = pos + 1
            pos = value_start + (byte >> 1)
            value = data[value_start:pos]
        elif byte & 0x80 and (byte2 := data[pos + 1]) < 0x80 and not byte & 1:
            value_start = pos + 2
            pos = value_start + (((byte & 0x7F) | (byte2 << 7)) >> 1)
            value = data[value_start:pos]
        else:
            value_length, pos = _varint(data, pos)
            if value_length < -1:
                raise CorruptRecordError(f"value length {value_length} at position {pos}")
            if value_length < 0:
                value = None
            else:
                value_start = pos
                pos += value_length
                value = data[value_start:pos]
        if data[pos] == 0:
            headers: tuple[tuple[str, bytes | None], ...] = ()
            pos += 1
        else:
            header_count, pos = _varint(data, pos)
            if header_count < 0:
                raise CorruptRecordError(f"record claims {header_count} headers")
            headers, pos = _headers(data, pos, header_count)
            value_start = -1  # no template for a run
        if pos != record_end:
            raise CorruptRecordError(
                f"record of the batch at offset {base_offset} ends at {record_end} but its "
                f"fields end at {pos}"
            )
        index += 1
        timestamp = log_append_time if use_log_append_time else base_timestamp + timestamp_delta
        offset = base_offset + offset_delta
        if offset >= fetch_offset:
            append(
                _tuple_new(
                    ConsumerRecord,
                    (
                        topic,
                        partition,
                        offset,
                        timestamp,
                        timestamp_type,
                        key,
                        value,
                        headers,
                        leader_epoch,
                    ),
                )
            )
        if value_start < 0 or wasted >= _MAX_MISSED_RUNS or index == count:
            continue
        # Look for a run of records shaped as this one.
        offset_length = offset_end - offset_start
        if offset_length == 1:
            limit = 64 - offset_delta - 1  # one-byte offset deltas end at 63
        elif offset_length == 2:
            limit = 8192 - offset_delta - 1
        else:
            continue
        head = data[record_start:offset_start]
        key_prefix = data[offset_end:key_start]  # the key's length (or null)
        value_prefix = data[key_end:value_start]  # the value's length
        key_length = key_end - key_start
        at = pos + (offset_end - record_start)
        if not (
            startswith(head, pos)
            and startswith(key_prefix, at)
            and startswith(value_prefix, at + len(key_prefix) + key_length)
        ):
            wasted += 1
            continue
        stride = pos - record_start
        limit = min(limit, count - index, (end - pos) // stride)
        n = (
            _run_length(
                data,
                pos,
                stride,
                limit,
                head,
                offset_length,
                key_prefix,
                key_length,
                value_prefix,
                offset_delta + 1,
            )
            if limit > 0
            else 0
        )
        if not n:
            wasted += 1
            continue
        first_offset = offset + 1
        first = pos
        if first_offset < fetch_offset:  # only in the batch the fetch offset falls in
            skipped = min(n, fetch_offset - first_offset)
            first += skipped * stride
            first_offset += skipped
        last = pos + n * stride
        first_value = first + (value_start - record_start)
        value_length = pos - 1 - value_start
        if key is None:
            keys: Iterable[bytes | None] = _repeat(None)
        else:
            first_key = first + (key_start - record_start)
            keys = [data[at : at + key_length] for at in range(first_key, last, stride)]
        out.extend(
            map(
                _tuple_new,
                _repeat(ConsumerRecord),
                zip(
                    _repeat(topic),
                    _repeat(partition),
                    range(first_offset, offset + 1 + n),
                    _repeat(timestamp),
                    _repeat(timestamp_type),
                    keys,
                    [data[at : at + value_length] for at in range(first_value, last, stride)],
                    _repeat(()),
                    _repeat(leader_epoch),
                    strict=False,  # the repeats are endless; the range and lists agree
                ),
            )
        )
        pos = last
        index += n
    if pos != end:
        raise CorruptRecordError(
            f"batch at offset {base_offset} has {end - pos} bytes after its {count} records"
        )


def decode_records(
    topic: str,
    partition: int,
    data: Any,
    fetch_offset: int,
    *,
    aborted_transactions: Sequence[tuple[int, int]] | None = None,
    check_crcs: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> tuple[list[ConsumerRecord], int]:
    """The records at or after ``fetch_offset`` in a fetched partition's record data, and the
    offset to fetch next: past the last whole batch (control batches included); a
    truncated batch at the end is left for the next fetch.

    ``aborted_transactions`` (read_committed only: the fetch response's (producer id, first
    offset) pairs) drops the batches of aborted transactions, as Kafka's consumer does: a
    producer's transactional batches are skipped from the first offset of its aborted
    transaction until its ABORT marker. ``check_crcs`` verifies each batch's size, magic and
    CRC32C before reading it.
    """
    # The cyclic garbage collector is paused while the records are built. They are tuples
    # of ints, strings and bytes: no cycles to find. But a fetch builds ten thousand of
    # them at once, every 700 of which would trigger a young collection that walks all the
    # ones already built (they are alive), promotes them, and soon forces a full
    # collection: measured, about 40% of the consumer's CPU per 100-byte record went to
    # the collector, about 20% with the pause (one young collection after the fetch). The
    # pause is process-wide for the few milliseconds of the call; it is lifted only when it
    # was this call that paused it.
    paused = _gc_isenabled()
    if paused:
        _gc_disable()
    try:
        return _decode_records(
            topic,
            partition,
            data,
            fetch_offset,
            aborted_transactions=aborted_transactions,
            check_crcs=check_crcs,
            max_decompressed_size=max_decompressed_size,
        )
    finally:
        if paused:
            _gc_enable()


def _decode_records(
    topic: str,
    partition: int,
    data: Any,
    fetch_offset: int,
    *,
    aborted_transactions: Sequence[tuple[int, int]] | None = None,
    check_crcs: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> tuple[list[ConsumerRecord], int]:
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    if not data:
        return out, next_offset
    pending_aborts = sorted((first, pid) for pid, first in aborted_transactions or ())
    aborting: set[int] = set()
    for batch in split_batches(data):
        header = batch.header()
        last_offset = header.base_offset + header.last_offset_delta
        batch_next = last_offset + 1
        attributes = header.attributes
        if pending_aborts:
            while pending_aborts and pending_aborts[0][0] <= last_offset:
                aborting.add(pending_aborts.pop(0)[1])
        if aborting and attributes & TRANSACTIONAL_BIT and header.producer_id in aborting:
            if attributes & CONTROL_BIT and _is_abort_marker(batch):
                aborting.discard(header.producer_id)
            next_offset = max(next_offset, batch_next)
            continue
        if batch_next <= fetch_offset:
            continue
        next_offset = batch_next
        if attributes & CONTROL_BIT or header.record_count <= 0:  # control batch, or empty
            continue
        if check_crcs:
            batch.ensure_valid()
        codec = attributes & COMPRESSION_MASK
        buffer = batch.buffer
        if codec:
            records = bytes(
                decompress(Compression(codec), buffer[HEADER_SIZE:], max_size=max_decompressed_size)
            )
        else:
            records = bytes(buffer[HEADER_SIZE:])
        timestamp_type = _LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_BIT else _CREATE_TIME
        try:
            _decode_batch(
                out,
                topic,
                partition,
                records,
                header.record_count,
                header.base_offset,
                header.base_timestamp,
                timestamp_type,
                header.max_timestamp,
                header.partition_leader_epoch,
                fetch_offset,
            )
        except (IndexError, UnicodeDecodeError) as exc:
            raise CorruptRecordError(
                f"batch at offset {header.base_offset} of {topic}-{partition} is malformed: {exc}"
            ) from None
    return out, next_offset


def _is_abort_marker(batch: RecordBatch) -> bool:
    for record in iter_records(batch):
        return decode_control_type(record.key) == ControlRecordType.ABORT
    return False


def next_fetch_offset(data: Any, fetch_offset: int) -> tuple[int, bool]:
    """The offset to fetch after this record data (past its last whole batch), and whether
    it holds any data batch ending past ``fetch_offset``. Reads batch headers only."""
    next_offset = fetch_offset
    has_records = False
    if not data:
        return next_offset, has_records
    for batch in split_batches(data):
        header = batch.header()
        batch_next = header.base_offset + header.last_offset_delta + 1
        if batch_next <= fetch_offset:
            continue
        next_offset = batch_next
        if not header.attributes & CONTROL_BIT and header.record_count > 0:
            has_records = True
    return next_offset, has_records
