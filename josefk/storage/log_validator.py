"""The checks a leader applies to a producer's batches before appending them (Kafka's LogValidator).

Owns ``validate_batches`` and the ``ValidatedRecords`` or ``AcceptedRecords`` it returns, and
``InvalidTimestampError``.
``Log.append_as_leader`` hands it the produce buffer and the topic's config; nothing is
written anywhere while validating: the result says which batches are rebuilt in the topic's
codec and which headers get their max timestamp corrected, and ``ValidatedRecords.apply``
makes those changes and assigns the offsets once the log has also checked the producer state.
Imports josefk.records, josefk.config.topic and josefk.storage's errors and offsets; never the
log itself, josefk.protocol or josefk.broker.

Per batch, in this order (Kafka's order where Kafka has the check):

1. size, magic, CRC, record count against last_offset_delta (``ensure_valid_from_producer``);
2. base offset 0 (offsets are the broker's), no control batch (markers are the
   coordinator's), a producer id on a transactional batch;
3. keys on a compacted topic: a record without a key could never be compacted away;
4. ``max.message.bytes``, for the batch as sent and, when rebuilt, as stored;
5. the codec: a topic ``compression.type`` other than ``producer`` that differs from the
   batch's rebuilds it (``records.recompress_batch``);
6. the max timestamp of a CreateTime batch, computed from its records (clients that write 0
   over records without timestamps would otherwise be aged as 1970);
7. the timestamp bounds (``message.timestamp.before.max.ms`` / ``after.max.ms``) under
   CreateTime.

Work is per batch: an uncompressed batch costs one walk over its records' lengths and
timestamp deltas; the batch bytes stay in the caller's buffer unless a rebuild needs a new one.
A buffer of uncompressed batches that pass all of the above with nothing to correct (the
common case) is taken whole by one C call, ``records.scan.accept_plain_batches``, and comes
back as ``AcceptedRecords`` (same interface); the C call never refuses anything: a buffer it
declines goes through the checks above, so every refusal keeps its error. A property test
holds the two paths to the same results.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

from josefk.config.topic import LogConfig
from josefk.records.batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    Compression,
    RecordBatch,
    peek_batch_size,
)
from josefk.records.builder import recompress_batch
from josefk.records.compression import DecompressionBudget
from josefk.records.errors import CorruptRecordError, InvalidRecordError
from josefk.records.scan import (
    PlainSpan,
    RecordsCheck,
    accept_plain_batches,
    scan_batch_records,
    scan_uncompressed_batch,
)
from josefk.records.varint import INT64_MAX
from josefk.storage.errors import RecordTooLargeError, StorageError
from josefk.storage.offsets import TopicPartition


class InvalidTimestampError(StorageError):
    """A CreateTime record's timestamp is outside message.timestamp.before/after.max.ms of
    now. ``record_errors`` names the records (KIP-467: index in the partition's data and a
    message), so that a client fails only those."""

    def __init__(
        self, message: str, *, path: Path, record_errors: Sequence[RecordError] = ()
    ) -> None:
        super().__init__(message, path=path)
        self.record_errors = tuple(record_errors)


class InvalidRecordsError(InvalidRecordError):
    """Some records of a batch break a rule a record can break alone (a record without a key
    on a compacted topic); ``record_errors`` names them (KIP-467)."""

    def __init__(self, message: str, *, record_errors: Sequence[RecordError]) -> None:
        super().__init__(message)
        self.record_errors = tuple(record_errors)


class RecordError(NamedTuple):
    """One refused record: its index among the records of the partition's data (Kafka's
    batch_index) and why (batch_index_error_message)."""

    batch_index: int
    message: str


# The codec of each value of the attributes' codec bits that ensure_valid lets through.
_CODECS: Final = tuple(Compression)

# compression.type -> the codec batches are stored with; "producer" keeps each batch's own.
TOPIC_CODECS: Final[dict[str, Compression]] = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


@dataclass(slots=True)
class AssignedOffsets:
    """What ``ValidatedRecords.apply`` assigned: the append's offsets and timestamps."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    last_offset_of_first_batch: int
    # Each batch's base offset, for the producer state (filled only when a batch has a
    # producer id).
    base_offsets: list[int]


@dataclass(slots=True)
class ValidatedRecords:
    """A produce buffer whose batches all passed validation, not yet changed.

    ``headers`` are the batches' headers as they will be stored (a rebuilt batch's new
    header, a corrected max timestamp); ``batches`` are views into the caller's buffer until
    ``apply`` runs. Nothing has been written into the buffer yet, so a caller that refuses the
    append afterwards (a duplicate or out-of-order sequence) leaves it as it came.
    """

    view: memoryview
    batches: list[RecordBatch]
    headers: list[BatchHeader]
    record_count: int
    has_producer_id: bool
    # The header max timestamps to write back (batch index -> value) and the batches rebuilt
    # with the topic's codec (batch index -> new bytes).
    max_timestamp_fixes: dict[int, int] = field(default_factory=dict)
    rebuilt: dict[int, bytearray] = field(default_factory=dict)

    @property
    def batch_count(self) -> int:
        return len(self.batches)

    def apply(
        self, first_offset: int, leader_epoch: int, now: int, *, log_append_time: bool
    ) -> AssignedOffsets:
        """Make the validated changes and assign offsets from ``first_offset``, in place.

        Rebuilt batches go out in a new buffer (``view`` then refers to it); every other
        change is written into the caller's buffer: the corrected max timestamps (with their
        CRC), each batch's base offset and partition leader epoch, and under LogAppendTime the
        broker's time (with the CRC). Must run once, with no await between it and the append.
        """
        batches = self.batches
        if self.rebuilt:
            rebuilt = self.rebuilt
            self.view = memoryview(
                bytearray().join(rebuilt.get(i, batch.buffer) for i, batch in enumerate(batches))
            )
            batches = self.batches = split_exact(self.view, None)
        for index, timestamp in self.max_timestamp_fixes.items():
            batches[index].set_max_timestamp(timestamp)
        has_producer_id = self.has_producer_id
        base_offsets: list[int] = []
        next_offset = first_offset
        max_timestamp = NO_TIMESTAMP
        offset_of_max_timestamp = -1
        last_offset_of_first_batch = -1
        for batch, header in zip(batches, self.headers, strict=True):
            if has_producer_id:
                base_offsets.append(next_offset)
            batch.set_base_offset_and_epoch(next_offset, leader_epoch)
            if log_append_time:
                batch.set_log_append_time(now)
            last = next_offset + header.last_offset_delta
            if last_offset_of_first_batch < 0:
                last_offset_of_first_batch = last
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max_timestamp = header.max_timestamp, last
            next_offset = last + 1
        last_offset = next_offset - 1
        if log_append_time:
            max_timestamp, offset_of_max_timestamp = now, last_offset
        return AssignedOffsets(
            first_offset=first_offset,
            last_offset=last_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max_timestamp,
            last_offset_of_first_batch=last_offset_of_first_batch,
            base_offsets=base_offsets,
        )


# A batch's base offset, batch length and partition leader epoch: the leader writes the
# first and last (the length between them goes back as it was).
_OFFSET_LENGTH_EPOCH: Final = struct.Struct(">qii")


@dataclass(slots=True)
class AcceptedRecords:
    """A produce buffer of uncompressed batches that ``accept_plain_batches`` (C) passed as
    they are: the common case, with nothing to rebuild or correct. The same interface as
    ``ValidatedRecords``, from one (position, batch length, last offset delta, max
    timestamp) span per batch; the headers are read only when the producer state needs them."""

    view: memoryview
    record_count: int
    has_producer_id: bool
    spans: list[PlainSpan]
    _headers: list[BatchHeader] | None = None

    @property
    def batch_count(self) -> int:
        return len(self.spans)

    @property
    def headers(self) -> list[BatchHeader]:
        """Each batch's header as it came (read once, before ``apply`` changes it)."""
        if self._headers is None:
            view = self.view
            self._headers = [
                BatchHeader(*HEADER_STRUCT.unpack_from(view, position))
                for position, _, _, _ in self.spans
            ]
        return self._headers

    def apply(
        self, first_offset: int, leader_epoch: int, now: int, *, log_append_time: bool
    ) -> AssignedOffsets:
        """``ValidatedRecords.apply`` for batches with nothing to change but their offsets
        and leader epoch (never under LogAppendTime: those go through the validator)."""
        assert not log_append_time, "LogAppendTime appends go through validate_batches"
        if self.has_producer_id and self._headers is None:
            self.headers  # noqa: B018  read before the offsets are written
        view = self.view
        base_offsets: list[int] = []
        next_offset = first_offset
        max_timestamp = NO_TIMESTAMP
        offset_of_max_timestamp = -1
        last_offset_of_first_batch = -1
        pack = _OFFSET_LENGTH_EPOCH.pack_into
        for position, batch_length, last_offset_delta, batch_max_timestamp in self.spans:
            if self.has_producer_id:
                base_offsets.append(next_offset)
            pack(view, position, next_offset, batch_length, leader_epoch)
            last = next_offset + last_offset_delta
            if last_offset_of_first_batch < 0:
                last_offset_of_first_batch = last
            if batch_max_timestamp > max_timestamp:
                max_timestamp, offset_of_max_timestamp = batch_max_timestamp, last
            next_offset = last + 1
        return AssignedOffsets(
            first_offset=first_offset,
            last_offset=next_offset - 1,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max_timestamp,
            last_offset_of_first_batch=last_offset_of_first_batch,
            base_offsets=base_offsets,
        )


def validate_batches(
    view: memoryview,
    config: LogConfig,
    *,
    topic_partition: TopicPartition,
    directory: Path,
    now: int,
    validate_timestamps: bool = True,
    budget: DecompressionBudget | None = None,
) -> ValidatedRecords | AcceptedRecords:
    """Check every batch of a producer's buffer (see the module docstring for the order).

    Changes nothing. ``budget`` bounds what the request's compressed batches may inflate to
    (a fresh one sized to ``view`` when None). Raises CorruptRecordError / InvalidRecordError
    (records layer; DecompressedSizeError past the budget), RecordTooLargeError, and for
    records that break a rule alone InvalidRecordsError or InvalidTimestampError naming every
    such record of the partition's data.
    """
    log_append_time = config.log_append_time
    max_bytes = config.max_message_bytes
    target_codec = TOPIC_CODECS.get(config.compression_type)
    compacted = config.compact_enabled
    ts_low = now - config.message_timestamp_before_max_ms
    ts_high = now + config.message_timestamp_after_max_ms
    if not log_append_time and (target_codec is None or target_codec is Compression.NONE):
        # The common case in one C call: uncompressed batches with nothing to correct.
        # Anything it declines takes the checks below, which give Kafka's errors.
        accepted = accept_plain_batches(
            view,
            max_bytes=max_bytes,
            ts_low=ts_low,
            ts_high=ts_high,
            check_timestamps=validate_timestamps,
            keys_required=compacted,
        )
        if accepted is not None:
            record_count, has_producer_id, spans = accepted
            return AcceptedRecords(view, record_count, has_producer_id, spans)
    batches = split_exact(view, topic_partition)
    if budget is None:
        budget = DecompressionBudget.for_request(view.nbytes)
    record_count = 0
    has_producer_id = False
    headers: list[BatchHeader] = []
    max_timestamp_fixes: dict[int, int] = {}
    rebuilt: dict[int, bytearray] = {}
    keyless: list[int] = []
    bad_timestamps: list[int] = []
    # Built once per partition's data rather than per batch: the scan's rules differ only
    # by whether the batch's timestamps are checked (CreateTime).
    checks = (
        RecordsCheck(ts_low=ts_low, ts_high=ts_high, keys_required=compacted),
        RecordsCheck(
            ts_low=ts_low, ts_high=ts_high, check_timestamps=True, keys_required=compacted
        ),
    )
    for index, batch in enumerate(batches):
        header = batch.ensure_valid_from_producer()  # one unpack for every field used below
        attributes = header.attributes
        if header.base_offset != 0:
            # As Kafka: offsets are the broker's to assign; a producer sends 0.
            raise InvalidRecordError(
                f"the base offset of a batch produced to {topic_partition} "
                f"should be 0, but it is {header.base_offset}"
            )
        if attributes & CONTROL_BIT:
            raise InvalidRecordError(
                f"a produce to {topic_partition} holds a control batch: only "
                f"the transaction coordinator writes those"
            )
        if attributes & TRANSACTIONAL_BIT and header.producer_id < 0:
            raise InvalidRecordError(
                f"a transactional batch to {topic_partition} carries no producer id"
            )
        size = header.batch_length + LOG_OVERHEAD
        if size > max_bytes:
            raise RecordTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes {max_bytes} of {topic_partition}",
                path=directory,
            )
        # ensure_valid checked the codec bits name a known codec.
        codec = _CODECS[attributes & COMPRESSION_MASK]
        create_time = not log_append_time and not attributes & TIMESTAMP_TYPE_BIT
        check = checks[validate_timestamps and create_time]
        # One pass over the records, compressed or not: framing, keys, timestamps, max.
        if codec is Compression.NONE:
            max_delta, scan_keyless, scan_bad = scan_uncompressed_batch(header, batch.buffer, check)
        else:
            scan = scan_batch_records(header, batch.records_buffer(), codec, check, budget=budget)
            max_delta, scan_keyless, scan_bad = scan.max_delta, scan.keyless, scan.bad_timestamps
        if scan_keyless:
            keyless += (record_count + i for i in scan_keyless)
        if scan_bad:
            bad_timestamps += (record_count + i for i in scan_bad)
        if target_codec is not None and codec != target_codec:
            new_batch = recompress_batch(
                batch, target_codec, level=_compression_level(config, target_codec)
            )
            if len(new_batch) > max_bytes:
                # As Kafka: the limit holds for the batch as stored.
                raise RecordTooLargeError(
                    f"batch of {size} bytes is {len(new_batch)} bytes as "
                    f"{config.compression_type}, more than max.message.bytes "
                    f"{max_bytes} of {topic_partition}",
                    path=directory,
                )
            rebuilt[index] = new_batch
            header = RecordBatch(memoryview(new_batch)).header()
        elif create_time:
            computed = _max_timestamp(header, max_delta)
            if computed != header.max_timestamp:
                max_timestamp_fixes[index] = computed
                header.max_timestamp = computed
        record_count += header.record_count
        if header.producer_id >= 0:
            has_producer_id = True
        headers.append(header)
    if keyless or bad_timestamps:
        _refuse_records(topic_partition, directory, keyless, bad_timestamps, ts_low, ts_high, now)
    return ValidatedRecords(
        view=view,
        batches=batches,
        headers=headers,
        record_count=record_count,
        has_producer_id=has_producer_id,
        max_timestamp_fixes=max_timestamp_fixes,
        rebuilt=rebuilt,
    )


def split_exact(view: memoryview, topic_partition: TopicPartition | None) -> list[RecordBatch]:
    """Every batch of a produce buffer, which must hold whole batches and nothing else."""
    batches: list[RecordBatch] = []
    position, end = 0, view.nbytes
    while position < end:
        size = peek_batch_size(view, position)
        if size is None or position + size > end:
            raise CorruptRecordError(
                f"produce to {topic_partition} ends with a partial batch at "
                f"position {position} of {end} bytes"
            )
        batches.append(RecordBatch(view[position : position + size]))
        position += size
    if not batches:
        raise InvalidRecordError(f"produce to {topic_partition} holds no batch")
    return batches


def _refuse_records(
    topic_partition: TopicPartition,
    directory: Path,
    keyless: list[int],
    bad_timestamps: list[int],
    ts_low: int,
    ts_high: int,
    now: int,
) -> None:
    """Raise the error naming every refused record, as Kafka's validator does: the whole
    partition's data is refused, INVALID_TIMESTAMP if any timestamp is out of range, else
    INVALID_RECORD."""
    errors = [
        RecordError(
            i,
            f"Compacted topic cannot accept message without key in topic partition "
            f"{topic_partition}.",
        )
        for i in keyless
    ]
    bounds = f"[{ts_low}, {ts_high}] (the broker's time {now})"
    errors += (
        RecordError(i, f"Timestamp of the record at index {i} is out of range {bounds}.")
        for i in bad_timestamps
    )
    errors.sort()
    if bad_timestamps:
        raise InvalidTimestampError(
            f"{len(bad_timestamps)} records produced to {topic_partition} have timestamps "
            f"outside {bounds}: message.timestamp.before.max.ms / after.max.ms",
            path=directory,
            record_errors=errors,
        )
    raise InvalidRecordsError(
        f"Compacted topic cannot accept message without key in topic partition "
        f"{topic_partition} ({len(keyless)} records without a key)",
        record_errors=errors,
    )


def _max_timestamp(header: BatchHeader, max_delta: int | None) -> int:
    """A CreateTime batch's max timestamp from its records' largest timestamp delta, as
    Kafka's validator computes it (NO_TIMESTAMP when no record has a timestamp >= 0)."""
    if max_delta is None:
        return NO_TIMESTAMP
    timestamp = max(header.base_timestamp + max_delta, NO_TIMESTAMP)
    if timestamp > INT64_MAX:
        raise InvalidRecordError(
            f"a record's timestamp {header.base_timestamp} + {max_delta} overflows an int64"
        )
    return timestamp


def _compression_level(config: LogConfig, codec: Compression) -> int | None:
    # lz4 is written at its one fast level (records.compression), snappy has none.
    if codec == Compression.GZIP:
        return None if config.compression_gzip_level < 0 else config.compression_gzip_level
    if codec == Compression.ZSTD:
        return config.compression_zstd_level
    return None
