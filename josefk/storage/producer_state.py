"""Per-partition producer state for idempotent producers, and its ``.snapshot`` files.

Owns ``ProducerStateManager`` (Kafka's class of that name): for each producer id seen in a
partition, its epoch and the metadata of its last five batches (first and last sequence,
first and last offset, timestamp), which is what lets the leader recognise a retried batch
and answer it with the offsets it got the first time instead of writing it again. Also owns
the errors a producer's batch can raise here, the snapshot file format and the header-only
scan that rebuilds the state from segment files. Imports josefk.records and the rest of
josefk.storage; never josefk.protocol or josefk.broker (the broker maps the errors to codes).

The rules, as Kafka's leader applies them to a client's batch (never per record):

- a batch whose (epoch, first sequence, last sequence) equals one of the producer's last
  five batches is a duplicate: nothing is written and the append answers with the original
  offsets and no error (current Kafka answers NONE with the first attempt's base offset;
  DUPLICATE_SEQUENCE_NUMBER is the legacy code, which clients treat the same way);
- an epoch below the producer's current epoch: ``InvalidProducerEpochError``
  (INVALID_PRODUCER_EPOCH, what Kafka answers a Produce since KIP-588);
- a newer epoch must start at sequence 0, else ``OutOfOrderSequenceError``;
- the same epoch must continue at last sequence + 1 (wrapping from 2**31 - 1 to 0), else
  ``OutOfOrderSequenceError``;
- a producer id the partition has no state for is accepted at any sequence. Kafka answered
  UNKNOWN_PRODUCER_ID here before KIP-360 (2.5); since then the broker accepts the batch and
  starts tracking the producer, because the state may have been removed by retention or
  expiration and the producer cannot tell. ``UnknownProducerIdError`` exists for the wire
  mapping only; the append path never raises it.

Transactions (KIP-98), as Kafka's ``ProducerAppendInfo``:

- a producer's first transactional batch opens its transaction at that batch's base offset
  (``current_txn_first_offset``); the partition's open transactions, oldest first, decide its
  first unstable offset, and with it the last stable offset a read_committed fetch stops at;
- a plain batch from a producer whose transaction is open: ``InvalidTxnStateError``;
- a COMMIT or ABORT marker (``TxnMarker``, written by the transaction coordinator) closes it:
  an epoch below the producer's is ``InvalidProducerEpochError``, a coordinator epoch below
  the last one seen is ``TransactionCoordinatorFencedError``. It yields a ``CompletedTxn``
  (none for a producer with nothing open: an empty transaction changes no offset), which
  stays unstable until the high watermark passes its marker (``on_high_watermark_updated``);
  an aborted one goes into the ``.txnindex`` of the segment holding the marker (the Log
  writes it);
- batches written by the broker's own coordinators (``AppendOrigin.COORDINATOR``: the group
  coordinator's transactional offset commits) carry a producer id but no sequence, and are
  not sequence-checked.

Snapshot file ``<offset as 20 digits>.snapshot``: the producer state as of every offset below
``offset``. Big-endian, Kafka's ProducerSnapshot version 1::

    version                  int16    1
    crc                      uint32   CRC32C of every byte after this field
    producer_entries         int32 count, then per entry:
        producer_id              int64
        epoch                    int16
        last_sequence            int32
        last_offset              int64
        offset_delta             int32    last_offset - first offset of the last batch
        timestamp                int64
        coordinator_epoch        int32
        current_txn_first_offset int64    -1: no transaction open

Only each producer's last batch is stored (as Kafka does), so after a restart only a retry of
the producer's very last batch is recognised until new batches fill the window again.

Concurrency: the manager belongs to one Log and is used on its event loop, except while the
Log is being loaded (a worker thread, before the Log is shared). No method awaits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final, NamedTuple

from crc32c import crc32c

from josefk.fileio import write_atomically
from josefk.records.batch import (
    CONTROL_BIT,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    TRANSACTIONAL_BIT,
    BatchHeader,
    RecordBatch,
)
from josefk.records.errors import InvalidRecordError
from josefk.records.record import (
    ControlRecordType,
    decode_control_type,
    decode_end_txn_marker,
    iter_records,
)
from josefk.storage.errors import StorageError
from josefk.storage.file_records import FileRecords
from josefk.storage.offsets import AppendOrigin, TxnMarker
from josefk.storage.segment import DELETED_FILE_SUFFIX, PRODUCER_SNAPSHOT_FILE_SUFFIX

_log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN: Final = 5
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
INT32_MAX: Final = (1 << 31) - 1
SNAPSHOT_VERSION: Final = 1

_VERSION_CRC = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_ENTRIES_OFFSET: Final = _VERSION_CRC.size
_SCAN_CHUNK: Final = 64 * 1024


# -- errors -------------------------------------------------------------------------------------


class ProducerStateError(StorageError):
    """A producer's batch that the partition's producer state rejects."""

    def __init__(self, message: str, *, producer_id: int, path: Path | None = None) -> None:
        self.producer_id = producer_id
        super().__init__(message, path=path)


class OutOfOrderSequenceError(ProducerStateError):
    """A batch's first sequence does not follow the producer's last one (a gap, or a new
    epoch not starting at 0)."""


class InvalidProducerEpochError(ProducerStateError):
    """A batch from an epoch older than the producer's current one (a fenced producer)."""


class UnknownProducerIdError(ProducerStateError):
    """No state for the producer id. Kept for the wire mapping; see the module docstring."""


class InvalidTxnStateError(ProducerStateError):
    """A plain batch from a producer whose transaction is open in the partition."""


class TransactionCoordinatorFencedError(ProducerStateError):
    """A marker from a transaction coordinator older than one that already wrote here."""


class CorruptSnapshotError(StorageError):
    """A ``.snapshot`` file that is too short, of an unknown version, or fails its CRC."""


# -- sequences ----------------------------------------------------------------------------------


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past 2**31 - 1 to 0 as Kafka's sequences do."""
    return (sequence + increment) % (INT32_MAX + 1)


def decrement_sequence(sequence: int, decrement: int) -> int:
    return (sequence - decrement) % (INT32_MAX + 1)


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """Whether ``next_sequence`` directly follows ``last_sequence`` (wrapping at 2**31)."""
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


# -- state --------------------------------------------------------------------------------------


class CompletedTxn(NamedTuple):
    """A transaction a marker just closed: the producer's first offset in the partition and
    the marker's offset (``last_offset``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class BatchMetadata(NamedTuple):
    """One appended batch of a producer: its last sequence and offset and how many records
    back its first ones are (``offset_delta``), and its timestamp. A tuple: one is made per
    appended batch, on the produce path."""

    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_sequence(self) -> int:
        return decrement_sequence(self.last_sequence, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """One producer id in one partition: its epoch and its last five batches, oldest first."""

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        batches: Iterable[BatchMetadata] = (),
        coordinator_epoch: int = -1,
        current_txn_first_offset: int = -1,
        last_timestamp: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset
        self.last_timestamp = last_timestamp

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def find_duplicate(
        self, producer_epoch: int, first_sequence: int, last_sequence: int
    ) -> BatchMetadata | None:
        """The retained batch with exactly this epoch and sequence range, if any."""
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.last_sequence == last_sequence and batch.first_sequence == first_sequence:
                return batch
        return None

    def add_batch(self, producer_epoch: int, batch: BatchMetadata) -> None:
        """Record an appended batch; a new epoch forgets the old epoch's batches."""
        if producer_epoch != self.producer_epoch:
            self.producer_epoch = producer_epoch
            self.batches.clear()
        self.batches.append(batch)
        self.last_timestamp = batch.timestamp

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
            f"batches={list(self.batches)})"
        )


# -- snapshot files -----------------------------------------------------------------------------


def snapshot_file(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{PRODUCER_SNAPSHOT_FILE_SUFFIX}"


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The bytes of a snapshot file holding ``entries`` (each with its last batch only)."""
    body = bytearray(_COUNT.size)
    count = 0
    for entry in entries:
        body += _ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            entry.last_sequence,
            entry.last_data_offset,
            entry.last_offset_delta,
            entry.last_timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
        count += 1
    _COUNT.pack_into(body, 0, count)
    return _VERSION_CRC.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes | memoryview, path: Path | None = None) -> list[ProducerStateEntry]:
    """The entries of a snapshot file; raises CorruptSnapshotError naming ``path``."""
    view = memoryview(data)
    if view.nbytes < _ENTRIES_OFFSET + _COUNT.size:
        raise CorruptSnapshotError(f"snapshot of {view.nbytes} bytes is too short", path=path)
    version, crc = _VERSION_CRC.unpack_from(view, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}", path=path)
    actual = crc32c(view[_ENTRIES_OFFSET:])
    if actual != crc:
        raise CorruptSnapshotError(
            f"snapshot CRC {actual:#010x} does not match the stored {crc:#010x}", path=path
        )
    (count,) = _COUNT.unpack_from(view, _ENTRIES_OFFSET)
    start = _ENTRIES_OFFSET + _COUNT.size
    if count < 0 or start + count * _ENTRY.size != view.nbytes:
        raise CorruptSnapshotError(
            f"snapshot claims {count} entries but holds {view.nbytes - start} bytes of them",
            path=path,
        )
    entries = []
    for (
        producer_id,
        epoch,
        last_sequence,
        last_offset,
        offset_delta,
        timestamp,
        coordinator_epoch,
        txn_first_offset,
    ) in _ENTRY.iter_unpack(view[start:]):
        batches = (
            [BatchMetadata(last_sequence, last_offset, offset_delta, timestamp)]
            if last_offset >= 0
            else []
        )
        entries.append(
            ProducerStateEntry(
                producer_id,
                epoch,
                batches=batches,
                coordinator_epoch=coordinator_epoch,
                current_txn_first_offset=txn_first_offset,
                last_timestamp=timestamp,
            )
        )
    return entries


def fsync_file(path: Path) -> None:
    """fsync a file if it still exists (a snapshot may be deleted before its flush runs)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- reading batch headers from segment files ---------------------------------------------------


def scan_batch_headers(records: FileRecords, position: int = 0) -> Iterator[BatchHeader]:
    """Every whole batch's header from ``position``, reading headers, not records."""
    for _, header in scan_batch_positions(records, position):
        yield header


def scan_batch_positions(
    records: FileRecords, position: int = 0
) -> Iterator[tuple[int, BatchHeader]]:
    """Every whole batch's position and header from ``position``, reading headers, not
    records.

    Reads 64 KiB at a time and jumps over bodies that do not fit, so rebuilding producer
    state from a segment of large batches reads little more than their headers. Stops at an
    incomplete tail (recovery has already cut any).
    """
    limit = records.size_in_bytes()
    chunk: bytes = b""
    chunk_start = position
    unpack = HEADER_STRUCT.unpack_from
    while position + HEADER_SIZE <= limit:
        relative = position - chunk_start
        if relative < 0 or relative + HEADER_SIZE > len(chunk):
            chunk = records.read(position, min(_SCAN_CHUNK, limit - position))
            chunk_start, relative = position, 0
            if len(chunk) < HEADER_SIZE:
                return
        header = BatchHeader(*unpack(chunk, relative))
        size = header.batch_length + LOG_OVERHEAD
        if header.batch_length <= 0 or position + size > limit:
            return
        yield position, header
        position += size


def decode_marker(batch: RecordBatch) -> TxnMarker | None:
    """The COMMIT or ABORT marker a control batch holds; None for other control records
    (a leader change). Raises CorruptRecordError for an unreadable control record."""
    for record in iter_records(batch):
        control_type = decode_control_type(record.key)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        return TxnMarker(
            batch.producer_id,
            batch.producer_epoch,
            decode_end_txn_marker(record.value),
            control_type is ControlRecordType.COMMIT,
        )
    return None


def read_marker(records: FileRecords, position: int, header: BatchHeader) -> TxnMarker | None:
    """``decode_marker`` of the control batch at ``position`` (its header already read)."""
    data = records.read(position, header.batch_length + LOG_OVERHEAD)
    return decode_marker(RecordBatch(memoryview(data)))


# -- the manager --------------------------------------------------------------------------------


def snapshot_offsets_in(file_names: Iterable[str]) -> list[int]:
    """The offsets of the producer snapshots among a directory's file names, ascending."""
    offsets = []
    for name in file_names:
        if name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
            stem = name[: -len(PRODUCER_SNAPSHOT_FILE_SUFFIX)]
            if stem.isdigit():
                offsets.append(int(stem))
    return sorted(offsets)


class ProducerStateManager:
    """The producer state of one partition and its snapshot files in the partition directory.

    The Log calls ``check_append`` before it assigns offsets to a client's batches (raising,
    or returning the original batch of a duplicate) and ``on_leader_append`` after it wrote
    them; followers and recovery use ``replay`` (no sequence checks, as Kafka's replication
    origin). Snapshots are taken by the Log at roll and close (``take_snapshot``) and read
    back by ``load_latest_snapshot``.
    """

    def __init__(
        self,
        directory: Path,
        *,
        producer_id_expiration_ms: int = 86_400_000,
        name: str = "",
        file_names: Iterable[str] | None = None,
    ) -> None:
        """``file_names``: the directory's file names when the caller has just listed it
        (the log's load), to find the snapshots without listing it again."""
        self._dir = directory
        self._name = name or directory.name
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # First offset -> producer id of each open transaction, in offset order (they open
        # in append order; a snapshot load sorts them).
        self._ongoing: dict[int, int] = {}
        # Completed transactions whose marker the high watermark has not passed yet.
        self._unreplicated: list[CompletedTxn] = []
        self._snapshots: list[int] = (
            self._list_snapshots() if file_names is None else snapshot_offsets_in(file_names)
        )

    def _list_snapshots(self) -> list[int]:
        with contextlib.suppress(FileNotFoundError), os.scandir(self._dir) as entries:
            return snapshot_offsets_in(entry.name for entry in entries)
        return []

    # -- accessors ------------------------------------------------------------------------------

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    # -- leader appends -------------------------------------------------------------------------

    def check_append(
        self, headers: Sequence[BatchHeader], origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> BatchMetadata | None:
        """Validate a leader append's data batches (in order) before any is written.

        Returns the original batch when one of them is a duplicate of a batch still in its
        producer's window (the append then writes nothing, as Kafka's); raises
        InvalidProducerEpochError, OutOfOrderSequenceError, InvalidTxnStateError, or
        InvalidRecordError for a client's batch with a producer id but no sequence. Batches
        without a producer id pass; a coordinator's batches are not sequence-checked.
        Changes nothing: the state moves only in ``on_leader_append``.
        """
        # Producer id -> (epoch, last sequence) after the earlier batches of this append.
        pending: dict[int, tuple[int, int]] = {}
        opened: set[int] = set()
        for header in headers:
            producer_id = header.producer_id
            if producer_id < 0:
                continue
            entry = self._producers.get(producer_id)
            if header.attributes & TRANSACTIONAL_BIT:
                opened.add(producer_id)
            elif producer_id in opened or (
                entry is not None and entry.current_txn_first_offset >= 0
            ):
                raise InvalidTxnStateError(
                    f"producer {producer_id} wrote a non-transactional batch to {self._name} "
                    f"while its transaction is open",
                    producer_id=producer_id,
                    path=self._dir,
                )
            if origin is AppendOrigin.COORDINATOR:
                current_epoch = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
                if header.producer_epoch < current_epoch:
                    raise InvalidProducerEpochError(
                        f"epoch {header.producer_epoch} of producer {producer_id} is older "
                        f"than its current epoch {current_epoch} in {self._name}",
                        producer_id=producer_id,
                        path=self._dir,
                    )
                continue
            first_sequence = header.base_sequence
            if first_sequence < 0:
                raise InvalidRecordError(
                    f"batch of producer {producer_id} to {self._name} has a producer id but "
                    f"no sequence ({first_sequence})"
                )
            epoch = header.producer_epoch
            last_sequence = increment_sequence(first_sequence, header.last_offset_delta)
            current_epoch = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
            if entry is not None:
                duplicate = entry.find_duplicate(epoch, first_sequence, last_sequence)
                if duplicate is not None:
                    return duplicate
            earlier = pending.get(producer_id)
            updated_epoch = earlier[0] if earlier is not None else current_epoch
            if epoch < updated_epoch:
                raise InvalidProducerEpochError(
                    f"epoch {epoch} of producer {producer_id} is older than its current "
                    f"epoch {updated_epoch} in {self._name}",
                    producer_id=producer_id,
                    path=self._dir,
                )
            if epoch != updated_epoch:
                if first_sequence != 0 and updated_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"producer {producer_id} starts its new epoch {epoch} at sequence "
                        f"{first_sequence}, not 0 (current epoch {updated_epoch}) in {self._name}",
                        producer_id=producer_id,
                        path=self._dir,
                    )
            else:
                if earlier is not None:
                    current_last = earlier[1]
                elif entry is not None and epoch == entry.producer_epoch:
                    current_last = entry.last_sequence
                else:
                    current_last = NO_SEQUENCE
                # No current epoch: the producer's records are gone (retention, DeleteRecords,
                # expiration); any sequence is accepted, as in Kafka.
                if current_epoch != NO_PRODUCER_EPOCH and not in_sequence(
                    current_last, first_sequence
                ):
                    raise OutOfOrderSequenceError(
                        f"out of order sequence for producer {producer_id} epoch {epoch} in "
                        f"{self._name}: {first_sequence} (incoming first sequence), "
                        f"{current_last} (current last sequence)",
                        producer_id=producer_id,
                        path=self._dir,
                    )
            pending[producer_id] = (epoch, last_sequence)
        return None

    def on_leader_append(
        self, headers: Sequence[BatchHeader], base_offsets: Sequence[int], timestamp: int | None
    ) -> None:
        """Record batches just written at ``base_offsets``; ``timestamp`` is the log append
        time (None under CreateTime: each batch's max timestamp counts)."""
        for header, base_offset in zip(headers, base_offsets, strict=True):
            if header.producer_id >= 0:
                self._record(
                    header,
                    base_offset,
                    header.max_timestamp if timestamp is None else timestamp,
                )

    def replay(self, header: BatchHeader, marker: TxnMarker | None = None) -> CompletedTxn | None:
        """Apply a batch already in the log (recovery, follower append): no checks, an old
        epoch is logged and taken, as Kafka's replication origin does. A control batch comes
        with its decoded ``marker`` (None for control records other than COMMIT/ABORT);
        returns the transaction a marker completed, for the caller's ``.txnindex``."""
        if header.producer_id < 0:
            return None
        if header.attributes & CONTROL_BIT:
            if marker is None:
                return None
            return self._complete(marker, header.base_offset, header.max_timestamp)
        self._record(header, header.base_offset, header.max_timestamp)
        return None

    def _record(self, header: BatchHeader, base_offset: int, timestamp: int) -> None:
        producer_id = header.producer_id
        delta = header.last_offset_delta
        batch = BatchMetadata(
            increment_sequence(header.base_sequence, delta), base_offset + delta, delta, timestamp
        )
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id, header.producer_epoch)
            self._producers[producer_id] = entry
        entry.add_batch(header.producer_epoch, batch)
        if header.attributes & TRANSACTIONAL_BIT and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = base_offset
            self._ongoing[base_offset] = producer_id

    # -- transactions ---------------------------------------------------------------------------

    def check_marker(self, marker: TxnMarker) -> None:
        """Validate a coordinator's marker before it is written (changes nothing)."""
        entry = self._producers.get(marker.producer_id)
        if entry is None:
            return
        if marker.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"marker epoch {marker.producer_epoch} of producer {marker.producer_id} is "
                f"older than its current epoch {entry.producer_epoch} in {self._name}",
                producer_id=marker.producer_id,
                path=self._dir,
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker of producer {marker.producer_id} from coordinator epoch "
                f"{marker.coordinator_epoch}, older than {entry.coordinator_epoch}, in {self._name}",
                producer_id=marker.producer_id,
                path=self._dir,
            )

    def on_marker_append(
        self, marker: TxnMarker, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        """A marker was written at ``offset``: the producer's transaction (if it had one
        open here) is complete; returns it."""
        return self._complete(marker, offset, timestamp)

    def _complete(self, marker: TxnMarker, offset: int, timestamp: int) -> CompletedTxn | None:
        producer_id = marker.producer_id
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id, marker.producer_epoch)
            self._producers[producer_id] = entry
        completed = None
        first_offset = entry.current_txn_first_offset
        if first_offset >= 0:
            completed = CompletedTxn(producer_id, first_offset, offset, not marker.committed)
            self._ongoing.pop(first_offset, None)
            self._unreplicated.append(completed)
        if marker.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = marker.producer_epoch
            entry.batches.clear()
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = timestamp
        return completed

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The last stable offset a ``.txnindex`` entry records for a transaction just
        completed: the first offset of the oldest transaction still open, else just past
        the marker."""
        for first_offset in self._ongoing:
            return first_offset
        return completed.last_offset + 1

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open, or complete but with
        its marker not yet under the high watermark; None when there is none."""
        first = next(iter(self._ongoing), None)
        for txn in self._unreplicated:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is now below the high watermark are stable."""
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]

    @property
    def ongoing_transactions(self) -> Mapping[int, int]:
        """First offset -> producer id of each open transaction, oldest first."""
        return self._ongoing

    # -- expiration -----------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        expired = [
            producer_id
            for producer_id, entry in self._producers.items()
            if self._is_expired(entry, now_ms)
        ]
        for producer_id in expired:
            del self._producers[producer_id]
        return len(expired)

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    # -- snapshots ------------------------------------------------------------------------------

    def take_snapshot(self, offset: int, *, sync: bool) -> Path | None:
        """Write the state as ``<offset>.snapshot`` unless a snapshot at ``offset`` exists.

        ``offset`` is the log end offset the state covers. With ``sync`` the file is fsynced
        before this returns (clean shutdown); otherwise the caller flushes it later (roll).
        Blocking but small: one short write per producer id.
        """
        if offset in self._snapshots:
            return None
        path = snapshot_file(self._dir, offset)
        # Whole or absent for readers; a torn file after a power loss fails its CRC and is
        # skipped at load.
        write_atomically(path, encode_snapshot(self._producers.values()), sync=sync)
        self._snapshots.append(offset)
        self._snapshots.sort()
        return path

    def load_latest_snapshot(
        self, max_offset: int, now_ms: int, *, delete_later: bool = True
    ) -> int | None:
        """Replace the state with the newest readable snapshot at or below ``max_offset``;
        returns its offset (the log must be replayed from there), or None if there is none
        (replay from the log's start). With ``delete_later`` (``max_offset`` is the log end
        offset) snapshots above it describe offsets the log no longer holds and are
        deleted; corrupt ones are deleted with a warning naming the file. Producers already
        expired at ``now_ms`` are not loaded."""
        self.clear()
        if delete_later:
            self.delete_snapshots_after(max_offset)
        for offset in reversed(list(self._snapshots)):
            if offset > max_offset:
                continue
            path = snapshot_file(self._dir, offset)
            try:
                # open() rather than Path.read_bytes: once per partition at start-up.
                with open(path, "rb") as file:
                    data = file.read()
                entries = decode_snapshot(data, path)
            except (CorruptSnapshotError, OSError) as exc:
                _log.warning("%s: skipping producer snapshot %s: %s", self._name, path, exc)
                self._snapshots.remove(offset)
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            for entry in entries:
                if not self._is_expired(entry, now_ms):
                    self._producers[entry.producer_id] = entry
            self._ongoing = {
                entry.current_txn_first_offset: entry.producer_id
                for entry in sorted(
                    (e for e in self._producers.values() if e.current_txn_first_offset >= 0),
                    key=lambda e: e.current_txn_first_offset,
                )
            }
            return offset
        return None

    def delete_snapshots_after(self, offset: int) -> None:
        """Delete every snapshot above ``offset`` (their offsets were truncated away)."""
        for doomed in [o for o in self._snapshots if o > offset]:
            self._snapshots.remove(doomed)
            snapshot_file(self._dir, doomed).unlink(missing_ok=True)

    def mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Rename the snapshot at ``offset`` (its segment is being deleted) to ``.deleted``;
        returns the new path for the caller to remove later, None if there was none."""
        if offset not in self._snapshots:
            return None
        self._snapshots.remove(offset)
        path = snapshot_file(self._dir, offset)
        target = path.with_name(path.name + DELETED_FILE_SUFFIX)
        try:
            path.rename(target)
        except FileNotFoundError:
            return None
        return target

    def truncate_fully(self) -> None:
        """Forget every producer and delete every snapshot (the log starts over)."""
        self.clear()
        self.delete_snapshots_after(-1)

    def clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()


__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "CompletedTxn",
    "CorruptSnapshotError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "OutOfOrderSequenceError",
    "ProducerStateEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "TransactionCoordinatorFencedError",
    "UnknownProducerIdError",
    "decode_marker",
    "decode_snapshot",
    "encode_snapshot",
    "in_sequence",
    "read_marker",
    "scan_batch_headers",
    "scan_batch_positions",
    "snapshot_file",
]
