"""Producer state of a partition log: duplicates, sequence and epoch rules, snapshots, restarts.

Drives ``Log.append_as_leader`` with batches carrying producer ids, as an idempotent producer
sends them, and checks what Kafka's ProducerStateManager would answer; then the ``.snapshot``
files (Kafka's byte layout, corruption, deletion with segments) and rebuilding the state at
load after clean and unclean shutdowns.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st
from log_helpers import NOW, open_log, producer_batch, read_all, small_config

from josefk.config.topic import LogConfig
from josefk.records import BatchBuilder
from josefk.records.errors import InvalidRecordError
from josefk.storage.log import Log
from josefk.storage.manager import LogManager, LogManagerConfig
from josefk.storage.offsets import TopicPartition
from josefk.storage.producer_state import (
    INT32_MAX,
    BatchMetadata,
    CorruptSnapshotError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
    in_sequence,
    snapshot_file,
    snapshot_offsets_in,
)
from josefk.util.clock import ManualClock
from josefk.util.scheduler import InlineExecutor, Scheduler


def idempotent_batch(
    producer_id: int, epoch: int, sequence: int, count: int = 1, *, timestamp: int = NOW
) -> bytearray:
    builder = BatchBuilder(
        base_offset=0, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )
    for i in range(count):
        builder.append(b"k", f"{producer_id}-{epoch}-{sequence + i}".encode(), timestamp=timestamp)
    return builder.build()


def big_config() -> LogConfig:
    return small_config(segment_bytes=1 << 20, segment_index_bytes=1 << 16)


def append(log: Log, producer_id: int, epoch: int, sequence: int, count: int = 1) -> int:
    return log.append_as_leader(
        idempotent_batch(producer_id, epoch, sequence, count), 0
    ).first_offset


def unclean_reopen(log: Log, **kwargs: object) -> Log:
    """Drop the log as a crash would (no snapshot, no flush) and load it again."""
    log.close_handlers()
    return open_log(log.dir, log.config, had_clean_shutdown=False, **kwargs)


def clean_reopen(log: Log, **kwargs: object) -> Log:
    log.flush()
    log.close()
    return open_log(
        log.dir, log.config, had_clean_shutdown=True, recovery_point=log.log_end_offset, **kwargs
    )


# -- the rules ----------------------------------------------------------------------------------


def test_a_retried_batch_is_answered_with_its_original_offsets_and_not_written(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    log.append_as_leader(producer_batch(), 0)  # no producer id: never checked
    first = log.append_as_leader(idempotent_batch(7, 0, 0, count=3), 0)
    log.append_as_leader(idempotent_batch(7, 0, 3, count=2), 0)
    end = log.log_end_offset
    retry = log.append_as_leader(idempotent_batch(7, 0, 0, count=3), 0)
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert retry.record_count == 0 and retry.valid_bytes == 0
    assert log.log_end_offset == end
    assert [b.base_offset for b in read_all(log)] == [0, 1, 4]


def test_the_window_holds_five_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    offsets = [append(log, 1, 0, seq) for seq in range(6)]
    for seq in range(1, 6):
        assert append(log, 1, 0, seq) == offsets[seq]
    # The first batch fell out of the window: its retry is now a gap in the sequence.
    with pytest.raises(OutOfOrderSequenceError):
        append(log, 1, 0, 0)


def test_sequence_gaps_are_rejected_and_nothing_is_written(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    append(log, 1, 0, 0, count=2)
    end = log.log_end_offset
    with pytest.raises(OutOfOrderSequenceError) as error:
        append(log, 1, 0, 3)
    assert error.value.producer_id == 1
    assert log.log_end_offset == end
    assert append(log, 1, 0, 2) == end


def test_an_old_epoch_is_fenced_and_a_new_epoch_starts_at_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    append(log, 1, 3, 0)
    with pytest.raises(InvalidProducerEpochError):
        append(log, 1, 2, 1)
    with pytest.raises(OutOfOrderSequenceError):
        append(log, 1, 4, 5)
    append(log, 1, 4, 0)
    with pytest.raises(InvalidProducerEpochError):
        append(log, 1, 3, 1)
    assert log.producer_state.producers[1].producer_epoch == 4


def test_an_unknown_producer_may_start_at_any_sequence(tmp_path: Path) -> None:
    # Kafka since KIP-360: no UNKNOWN_PRODUCER_ID; the state may have been expired.
    log = open_log(tmp_path / "t-0", big_config())
    append(log, 9, 0, 42)
    append(log, 9, 0, 43)
    with pytest.raises(OutOfOrderSequenceError):
        append(log, 9, 0, 42 + 5)


def test_sequences_wrap_at_two_to_the_31(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    append(log, 1, 0, INT32_MAX - 1, count=2)
    wrapped = append(log, 1, 0, 0, count=3)
    # A batch straddling the wrap: first sequence INT32_MAX, last 1.
    append(log, 2, 0, INT32_MAX - 5, count=5)
    straddling = append(log, 2, 0, INT32_MAX, count=3)
    assert log.producer_state.producers[2].last_sequence == 1
    assert append(log, 2, 0, INT32_MAX, count=3) == straddling
    assert append(log, 1, 0, 0, count=3) == wrapped
    assert in_sequence(INT32_MAX, 0) and not in_sequence(INT32_MAX, 1)


def test_batches_of_one_append_are_checked_in_order(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    both = idempotent_batch(1, 0, 0, 2) + idempotent_batch(1, 0, 2, 1)
    log.append_as_leader(both, 0)
    assert log.producer_state.producers[1].last_sequence == 2
    gap = idempotent_batch(1, 0, 3) + idempotent_batch(1, 0, 5)
    end = log.log_end_offset
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(gap, 0)
    assert log.log_end_offset == end
    assert log.producer_state.producers[1].last_sequence == 2


def test_a_producer_id_without_a_sequence_is_invalid(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(idempotent_batch(1, 0, -1), 0)


def test_log_append_time_duplicates_report_the_first_append_time(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(
        tmp_path / "t-0", small_config(message_timestamp_type="LogAppendTime"), clock=clock
    )
    first = log.append_as_leader(idempotent_batch(1, 0, 0), 0)
    clock.advance(5000)
    retry = log.append_as_leader(idempotent_batch(1, 0, 0), 0)
    assert retry.log_append_time == first.log_append_time == NOW
    assert retry.first_offset == first.first_offset


def test_idle_producers_expire(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    log = open_log(tmp_path / "t-0", big_config(), clock=clock, producer_id_expiration_ms=1000)
    append(log, 1, 0, 0)
    clock.advance(999)
    assert log.remove_expired_producers() == 0
    clock.advance(1)
    assert log.remove_expired_producers() == 1
    assert 1 not in log.producer_state.producers
    append(log, 1, 0, 17)  # unknown again: any sequence


def test_follower_appends_update_the_state(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l-0", big_config())
    append(leader, 1, 0, 0, count=2)
    append(leader, 1, 0, 2)
    follower = open_log(tmp_path / "f-0", big_config())
    for batch in read_all(leader):
        follower.append_as_follower(bytes(batch.buffer))
    assert follower.producer_state.producers[1].last_sequence == 2


# -- snapshots ----------------------------------------------------------------------------------

entries_strategy = st.lists(
    st.builds(
        lambda pid, epoch, seq, offset, delta, ts, coord, txn: ProducerStateEntry(
            pid,
            epoch,
            batches=[BatchMetadata(seq, offset, delta, ts)],
            coordinator_epoch=coord,
            current_txn_first_offset=txn,
            last_timestamp=ts,
        ),
        st.integers(0, 2**63 - 1),
        st.integers(0, 2**15 - 1),
        st.integers(0, INT32_MAX),
        st.integers(0, 2**62),
        st.integers(0, INT32_MAX),
        st.integers(-1, 2**62),
        st.integers(-1, INT32_MAX),
        st.integers(-1, 2**62),
    ),
    max_size=20,
    unique_by=lambda e: e.producer_id,
)


@given(entries_strategy)
def test_snapshot_round_trip(entries: list[ProducerStateEntry]) -> None:
    decoded = decode_snapshot(encode_snapshot(entries))
    assert [
        (e.producer_id, e.producer_epoch, list(e.batches), e.coordinator_epoch, e.last_timestamp)
        for e in decoded
    ] == [
        (e.producer_id, e.producer_epoch, list(e.batches), e.coordinator_epoch, e.last_timestamp)
        for e in entries
    ]


def test_snapshot_bytes_are_kafkas_layout() -> None:
    entry = ProducerStateEntry(
        5, 2, batches=[BatchMetadata(9, 100, 3, NOW)], coordinator_epoch=-1, last_timestamp=NOW
    )
    data = encode_snapshot([entry])
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 5, 2, 9, 100, 3, NOW, -1, -1)
    assert data == struct.pack(">hI", 1, crc32c(body)) + body


@given(st.data())
def test_a_damaged_snapshot_is_detected(data: st.DataObject) -> None:
    entries = data.draw(entries_strategy.filter(bool))
    encoded = bytearray(encode_snapshot(entries))
    if data.draw(st.booleans()):
        position = data.draw(st.integers(0, len(encoded) - 1))
        encoded[position] ^= data.draw(st.integers(1, 255))
    else:
        encoded = encoded[: data.draw(st.integers(0, len(encoded) - 1))]
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(encoded))


def test_roll_and_close_take_snapshots_and_retention_deletes_them(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    scheduler = Scheduler(clock)
    log = open_log(
        tmp_path / "t-0", small_config(retention_ms=1000), clock=clock, scheduler=scheduler
    )
    sequence = 0
    while log.num_segments < 3:
        append(log, 1, 0, sequence, count=5)
        sequence += 5
    bases = [s.base_offset for s in log.log_segments()]
    assert log.producer_state.snapshot_offsets == bases[1:]
    assert all(snapshot_file(log.dir, b).exists() for b in bases[1:])
    entries = decode_snapshot(snapshot_file(log.dir, bases[2]).read_bytes())
    assert [(e.producer_id, e.last_data_offset) for e in entries] == [(1, bases[2] - 1)]
    log.update_high_watermark(log.log_end_offset)
    clock.advance(10_000)
    assert log.delete_old_segments() >= 2
    remaining = log.log_segments()[0].base_offset
    assert all(o >= remaining for o in log.producer_state.snapshot_offsets)
    assert not snapshot_file(log.dir, bases[1]).exists() or bases[1] >= remaining
    # Retention does not forget producers (KIP-360): the retry still deduplicates.
    assert append(log, 1, 0, sequence - 5, count=5) == log.log_end_offset - 5
    end = log.log_end_offset
    log.close()
    assert snapshot_file(log.dir, end).exists()
    # A load finds the snapshots in the loader's listing, as a listing of its own would.
    listed = snapshot_offsets_in(os.listdir(log.dir))
    assert end in listed
    reopened = open_log(tmp_path / "t-0", small_config(retention_ms=1000), clock=clock)
    assert reopened.producer_state.snapshot_offsets == listed
    reopened.close()


def test_clean_restart_keeps_deduplication(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    offsets = [append(log, 1, 0, seq) for seq in range(3)]
    append(log, 2, 5, 0)
    log = clean_reopen(log)
    assert log.producer_state.latest_snapshot_offset == 4
    # Only the last batch of each producer is in a snapshot, as in Kafka.
    assert append(log, 1, 0, 2) == offsets[2]
    with pytest.raises(InvalidProducerEpochError):
        append(log, 2, 4, 1)
    assert append(log, 1, 0, 3) == 4


def test_unclean_restart_replays_the_log_after_the_last_snapshot(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config())
    offsets: list[int] = []
    sequence = 0
    while log.num_segments < 3 or log.log_end_offset - log.active_segment.base_offset < 8:
        offsets.append(append(log, 1, 0, sequence, count=4))
        sequence += 4
    snapshot = log.producer_state.latest_snapshot_offset
    assert snapshot == log.active_segment.base_offset
    log = unclean_reopen(log)
    # The roll snapshot holds the last batch before it; the batches after it are replayed.
    known = [i for i, o in enumerate(offsets) if o >= snapshot]
    known = [known[0] - 1, *known][-5:]
    assert len(known) >= 3
    for index in known:
        assert append(log, 1, 0, 4 * index, count=4) == offsets[index]
    assert append(log, 1, 0, sequence, count=4) == log.log_end_offset - 4


def test_a_corrupt_snapshot_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    offsets = [append(log, 1, 0, seq) for seq in range(4)]
    log.close()
    path = snapshot_file(log.dir, 4)
    damaged = bytearray(path.read_bytes())
    damaged[-1] ^= 0xFF
    path.write_bytes(bytes(damaged))
    with caplog.at_level(logging.WARNING):
        log = open_log(log.dir, log.config, had_clean_shutdown=True)
    assert str(path) in caplog.text
    assert not path.exists()
    # Rebuilt from the whole log instead: the full window is back.
    assert append(log, 1, 0, 1) == offsets[1]


def test_snapshots_above_the_recovered_log_end_are_ignored(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    append(log, 1, 0, 0)
    log.close()
    # A snapshot claiming offsets the log does not hold (the log lost its tail).
    future = snapshot_file(log.dir, 50)
    future.write_bytes(
        encode_snapshot([ProducerStateEntry(1, 9, batches=[BatchMetadata(99, 49, 0, NOW)])])
    )
    log = open_log(log.dir, log.config, had_clean_shutdown=False)
    assert not future.exists()
    assert log.producer_state.producers[1].producer_epoch == 0


def test_truncation_rebuilds_the_state(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", big_config())
    for seq in range(5):
        append(log, 1, 0, seq)
    log.close()
    log = open_log(log.dir, log.config, had_clean_shutdown=True)
    append(log, 1, 0, 5)
    assert log.truncate_to(3)
    assert log.producer_state.producers[1].last_sequence == 2
    assert log.producer_state.snapshot_offsets == []
    assert append(log, 1, 0, 3) == 3
    log.truncate_fully_and_start_at(100)
    assert not log.producer_state.producers
    append(log, 1, 0, 77)


async def test_the_log_manager_expires_idle_producers_on_its_schedule(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW)
    scheduler = Scheduler(clock)
    manager = LogManager(
        LogManagerConfig(
            log_dirs=(tmp_path,),
            initial_task_delay_ms=0,
            producer_id_expiration_ms=60_000,
            producer_id_expiration_check_interval_ms=10_000,
        ),
        big_config(),
        clock=clock,
        scheduler=scheduler,
        executor=InlineExecutor(),
    )
    await manager.startup()
    log = manager.get_or_create_log(TopicPartition("t", 0))
    append(log, 1, 0, 0)
    clock.advance(30_000)
    # Idle time counts from the batch timestamp (Kafka's last timestamp), here 30 s later.
    log.append_as_leader(idempotent_batch(2, 0, 0, timestamp=clock.milliseconds()), 0)
    clock.advance(30_000)
    await scheduler.run_due()
    assert sorted(log.producer_state.producers) == [2]
    clock.advance(30_000)
    await scheduler.run_due()
    assert not log.producer_state.producers
    await manager.shutdown()
