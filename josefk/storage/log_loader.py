"""Loading a partition directory (Kafka's LogLoader): clean-up, recovery, producer state.

Owns what happens to a ``<topic>-<partition>`` directory before its ``Log`` serves anything:
the clean-up of interrupted operations (``.deleted``, ``.cleaned`` and ``.swap`` files,
orphan indexes), opening the segments, recovering those past the recovery point (or all of
them after an unclean shutdown) and those whose files disagree, and the rebuild of the
producer state from the newest snapshot and a replay of the batch headers after it (writing
back the ``.txnindex`` entries of recovered segments). ``Log.load`` calls ``load_segments``
and then ``rebuild_producer_state``; truncation calls the rebuild again. Blocking file work:
run it before the log is shared, off the event loop. Imports josefk.records,
josefk.config.topic and josefk.storage's segment, file, producer-state and offset modules;
never josefk.storage.log (which imports this module), josefk.protocol or josefk.broker.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from josefk.config.topic import LogConfig
from josefk.records.batch import CONTROL_BIT
from josefk.records.errors import RecordsError
from josefk.storage.errors import CorruptIndexError, IndexFullError, StorageError
from josefk.storage.file_records import FileRecords
from josefk.storage.offsets import AbortedTxn, TopicPartition
from josefk.storage.producer_state import ProducerStateManager, read_marker, scan_batch_positions
from josefk.storage.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    LogSegment,
    log_file,
    offset_from_file_name,
    offset_index_file,
    time_index_file,
    txn_index_file,
)
from josefk.util.clock import Clock, JitterSource

_log = logging.getLogger(__name__)


def load_segments(
    path: Path,
    config: LogConfig,
    *,
    topic_partition: TopicPartition,
    log_start_offset: int,
    recovery_point: int,
    had_clean_shutdown: bool,
    clock: Clock,
    jitter: JitterSource,
) -> tuple[list[LogSegment], set[int], list[str]]:
    """Clean up, open and recover the segments of ``path`` (created if missing).

    Returns the segments by base offset (at least one: an empty log gets a segment at
    ``log_start_offset``), the base offsets of the segments recovered that hold a
    transaction marker, whose ``.txnindex`` the producer-state rebuild must write back,
    and the names of the producer snapshots as listed after the clean-up, so that the
    producer state need not list the directory again. Leftovers of interrupted
    operations are handled as Kafka does (``remove_temp_files_and_complete_swaps``). Unless
    the log dir had a clean shutdown, every segment from the one holding ``recovery_point``
    onwards is recovered (batches validated, indexes rebuilt); the first segment found with
    an invalid tail is truncated there and every later segment deleted. Every other segment
    gets a cheap check that its files agree (``LogSegment.check_files_agree``), clean
    shutdown or not; one that fails is recovered the same way, with a warning naming its
    files, but the segments after it stay (they were flushed and are whole). Raises OSError.
    """
    try:
        needs_recovery, names = remove_temp_files_and_complete_swaps(path)
    except (FileNotFoundError, NotADirectoryError):
        if os.path.isdir(path):
            raise
        # Listed first and created only when missing: a mkdir per partition (failing with
        # EEXIST, then a stat) was a measurable share of a start at 10,000 partitions. A
        # file in the way fails in mkdir, with EEXIST, as before.
        path.mkdir(parents=True, exist_ok=True)
        needs_recovery, names = remove_temp_files_and_complete_swaps(path)
    segments: dict[int, LogSegment] = {}
    # Names, not Path objects and stat calls: start-up with thousands of segments
    # is dominated by per-file overhead.
    for name in sorted(n for n in names if n.endswith(LOG_FILE_SUFFIX)):
        try:
            base_offset = offset_from_file_name(name)
        except ValueError:
            _log.warning("ignoring %s in %s: not named after an offset", name, path)
            continue
        segment = open_segment(path, base_offset, config, clock, jitter, exists=True)
        segments[base_offset] = segment
        stem = name[: -len(LOG_FILE_SUFFIX)]
        if stem + INDEX_FILE_SUFFIX not in names or stem + TIME_INDEX_FILE_SUFFIX not in names:
            needs_recovery.add(base_offset)
    bases = sorted(segments)
    unflushed = bases[max(bisect.bisect_right(bases, recovery_point) - 1, 0) :]
    if not had_clean_shutdown:
        needs_recovery.update(unflushed)
    else:
        # Indexes stay closed until first use so that start-up is fast; only the
        # segments past the recovery point (normally just the active one) are
        # checked now, and rebuilt if their index is unusable.
        for base_offset in unflushed:
            if base_offset in needs_recovery:
                continue
            try:
                segments[base_offset].sanity_check()
            except CorruptIndexError as exc:
                _log.warning("%s: rebuilding indexes: %s", topic_partition, exc)
                needs_recovery.add(base_offset)
    # Every other segment's files must agree with each other, clean shutdown or not:
    # a file cut short while the broker was down is recovered like a crashed one.
    damaged: set[int] = set()
    for base_offset in bases:
        if base_offset in needs_recovery:
            continue
        segment = segments[base_offset]
        problem = segment.check_files_agree()
        if problem is not None:
            _log.warning(
                "%s: the files of segment %d disagree (%s): %s; recovering the "
                "segment as after a crash",
                topic_partition,
                base_offset,
                ", ".join(
                    str(p)
                    for p in (
                        segment.path,
                        segment.offset_index.path,
                        segment.time_index.path,
                    )
                ),
                problem,
            )
            needs_recovery.add(base_offset)
            damaged.add(base_offset)
    for position, base_offset in enumerate(bases):
        if base_offset not in needs_recovery or base_offset not in segments:
            continue
        truncated = _recover_segment(segments[base_offset], config)
        if position + 1 < len(bases):
            release_indexes(segments[base_offset])
        if truncated > 0:
            _log.warning(
                "%s: truncated %d invalid bytes at the end of segment %d (%s)",
                topic_partition,
                truncated,
                base_offset,
                segments[base_offset].path,
            )
            if base_offset in damaged:
                # Damaged at rest, not a crash's torn tail: the later segments were
                # flushed and are whole, so they stay (offsets may have a gap).
                continue
            # Everything after corruption is unreachable by offset order: drop it.
            for later in bases[position + 1 :]:
                doomed = segments.pop(later)
                doomed.close_handlers()
                doomed.delete_if_exists()
            break
    bases = sorted(segments)
    if bases:
        active = segments[bases[-1]]
        if active.read_next_offset() < log_start_offset:
            # The checkpoint says records were deleted beyond what is on disk
            # (DeleteRecords then a crash before retention ran): start afresh there.
            for segment in segments.values():
                segment.close_handlers()
                segment.delete_if_exists()
            segments.clear()
            bases = []
    if not bases:
        segments[log_start_offset] = open_segment(
            path, log_start_offset, config, clock, jitter, exists=False
        )
        bases = [log_start_offset]
    segments[bases[-1]].resize_indexes(config.segment_index_bytes)
    # Only a recovered segment holding a transaction marker can get .txnindex entries back:
    # without one, the producer-state replay that writes them (a second replay of the log,
    # from an older snapshot) would write nothing.
    txn_indexes_to_rebuild = {
        b for b in needs_recovery.intersection(segments) if segments[b].recovered_control_batches
    }
    # Nothing above creates or removes a snapshot, so the listing still holds for them.
    snapshots = [n for n in names if n.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX)]
    return [segments[b] for b in bases], txn_indexes_to_rebuild, snapshots


def rebuild_producer_state(
    state: ProducerStateManager,
    segments_in_range: Callable[[int, int], Sequence[LogSegment]],
    *,
    first_base_offset: int,
    directory: Path,
    name: str,
    end: int,
    now: int,
    rebuild_txn_indexes: Collection[int] = (),
) -> None:
    """Load the newest snapshot at or below ``end`` (the log end offset) and replay the batch
    headers after it (all of the log without one). Blocking: at load and after a truncation.

    ``rebuild_txn_indexes``: base offsets of segments just recovered, whose ``.txnindex``
    was emptied. Each entry needs the producer state as of its marker, so a separate replay,
    from a snapshot at or below the first of them, writes them back (Kafka rebuilds them the
    same way); the state kept is the one from the newest snapshot, as after any restart.
    """
    state.delete_snapshots_after(end)
    if rebuild_txn_indexes:
        scratch = ProducerStateManager(directory, name=name)
        first = min(rebuild_txn_indexes)
        replay_batches(
            scratch,
            segments_in_range,
            scratch.load_latest_snapshot(first, now, delete_later=False),
            first_base_offset=first_base_offset,
            end=max(rebuild_txn_indexes) + 1,
            index_aborts_in=rebuild_txn_indexes,
        )
    replay_batches(
        state,
        segments_in_range,
        state.load_latest_snapshot(end, now),
        first_base_offset=first_base_offset,
        end=end,
        index_aborts_in=(),
    )


def replay_batches(
    state: ProducerStateManager,
    segments_in_range: Callable[[int, int], Sequence[LogSegment]],
    snapshot_offset: int | None,
    *,
    first_base_offset: int,
    end: int,
    index_aborts_in: Collection[int],
) -> None:
    """Replay the batches from ``snapshot_offset`` (the log start without one) into the
    segments before ``end``, writing aborted transactions into the ``.txnindex`` of the
    segments whose base offset is in ``index_aborts_in``."""
    replay_from = first_base_offset if snapshot_offset is None else snapshot_offset
    if replay_from >= end:
        return
    for segment in segments_in_range(replay_from, end):
        index_aborts = segment.base_offset in index_aborts_in
        records = segment.log
        for position, header in scan_batch_positions(records):
            if header.base_offset + header.last_offset_delta < replay_from:
                continue
            if header.attributes & CONTROL_BIT and header.producer_id >= 0:
                completed = state.replay(header, read_marker(records, position, header))
                if completed is not None and completed.is_aborted and index_aborts:
                    segment.txn_index.append(
                        AbortedTxn(
                            completed.producer_id,
                            completed.first_offset,
                            completed.last_offset,
                            state.last_stable_offset_after(completed),
                        )
                    )
            else:
                state.replay(header)


def open_segment(
    directory: Path,
    base_offset: int,
    config: LogConfig,
    clock: Clock,
    jitter: JitterSource,
    *,
    exists: bool,
) -> LogSegment:
    return LogSegment.open(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        rolling_jitter_ms=jitter.segment_jitter_ms(config.segment_jitter_ms, config.segment_ms),
        clock=clock,
        file_already_exists=exists,
        init_file_size=config.initial_file_size,
        preallocate=config.preallocate,
    )


def _recover_segment(segment: LogSegment, config: LogConfig) -> int:
    """``segment.recover``, giving the indexes more room if recovery needs it.

    Appends made since a restart place index entries counting bytes from the restart, while
    recovery counts from the segment's start, so it can need more entries than appends did.
    With Kafka's defaults the index never fills first (1 GiB / 4 KiB * 8 bytes < 10 MiB);
    with a small ``segment.index.bytes`` it could, and failing to load would take the whole
    log dir offline. The larger index is trimmed when the segment stops being active.
    """
    try:
        return segment.recover(config.max_message_bytes)
    except IndexFullError:
        # At most one entry per index.interval.bytes, and one per batch; 12 bytes covers
        # the larger of the two entry sizes.
        room = (segment.size() // (config.index_interval_bytes + 1) + 2) * 12
        for index in (segment.offset_index, segment.time_index):
            index.max_index_size = max(index.max_index_size, room)
        return segment.recover(config.max_message_bytes)


def release_indexes(segment: LogSegment) -> None:
    segment.offset_index.close()
    segment.time_index.close()
    segment.txn_index.close()


def remove_temp_files_and_complete_swaps(directory: Path) -> tuple[set[int], set[str]]:
    """Kafka's clean-up of a partition directory before loading; returns the base offsets
    whose indexes must be rebuilt and the names of the files left.

    - ``*.deleted``: a deletion the crash interrupted; finish it.
    - ``*.cleaned``: output of a compaction that never got swapped in; discard it, and every
      ``.swap`` file at or above the smallest cleaned offset (it belongs to that compaction).
    - ``*.log.swap``: a compaction whose swap-in was interrupted after the new segment was
      complete: delete the segments its offsets cover, then rename it into place. Its
      indexes are rebuilt (index ``.swap`` files are discarded).
    - an ``.index``/``.timeindex`` without its ``.log``: an orphan; remove it.
    """
    needs_recovery: set[int] = set()
    swaps: list[Path] = []
    cleaned_offsets: list[int] = []
    with os.scandir(directory) as entries:
        files = [entry.name for entry in entries if entry.is_file()]
    names = set(files)
    for name in files:
        if name.endswith(DELETED_FILE_SUFFIX):
            os.unlink(directory / name)
            names.discard(name)
        elif name.endswith(CLEANED_FILE_SUFFIX):
            with contextlib.suppress(ValueError):
                cleaned_offsets.append(offset_from_file_name(name))
            os.unlink(directory / name)
            names.discard(name)
        elif name.endswith(SWAP_FILE_SUFFIX):
            swaps.append(directory / name)
    min_cleaned = min(cleaned_offsets) if cleaned_offsets else None
    for swap in sorted(swaps):
        try:
            base = offset_from_file_name(swap.name)
        except ValueError:
            continue
        is_log = swap.name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX)
        if not is_log or (min_cleaned is not None and base >= min_cleaned):
            swap.unlink(missing_ok=True)
            continue
        next_offset = _next_offset_of_log_file(swap)
        for existing in directory.glob(f"*{LOG_FILE_SUFFIX}"):
            try:
                existing_base = offset_from_file_name(existing.name)
            except ValueError:
                continue
            if base <= existing_base < max(next_offset, base + 1):
                for stale in (
                    existing,
                    offset_index_file(directory, existing_base),
                    time_index_file(directory, existing_base),
                    txn_index_file(directory, existing_base),
                ):
                    stale.unlink(missing_ok=True)
        swap.rename(log_file(directory, base))
        # Indexes, the transaction index among them, are rebuilt by the recovery.
        offset_index_file(directory, base).unlink(missing_ok=True)
        time_index_file(directory, base).unlink(missing_ok=True)
        txn_index_file(directory, base).unlink(missing_ok=True)
        needs_recovery.add(base)
    if swaps:
        names = {entry for entry in os.listdir(directory) if (directory / entry).is_file()}
    for name in list(names):
        for suffix in (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX):
            if name.endswith(suffix) and name[: -len(suffix)] + LOG_FILE_SUFFIX not in names:
                with contextlib.suppress(ValueError):
                    offset_from_file_name(name)
                    os.unlink(directory / name)
                    names.discard(name)
    return needs_recovery, names


def _next_offset_of_log_file(path: Path) -> int:
    records = FileRecords.open(path, file_already_exists=True)
    try:
        next_offset = -1
        for _, batch in records.batches_from(0):
            next_offset = batch.next_offset
        return next_offset
    except (RecordsError, StorageError):
        return next_offset
    finally:
        records.close()
