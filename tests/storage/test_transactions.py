"""Transactions in the partition log: the last stable offset, markers, ``.txnindex``.

Unit tests of each rule, then a property test: random interleavings of transactional and
plain producers, commits and aborts, clean and unclean restarts and segment deletion, checked
against a model after every step: the last stable offset never passes an open transaction's
first offset, the ``.txnindex`` files (read by an independent reader of Kafka's format) list
exactly the aborted transactions whose markers the log still holds, and a read_committed
reader sees exactly the committed and plain records below the last stable offset.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_txn_format import read_log_file, read_txn_index
from log_helpers import NOW, open_log, read_all, small_config

from josefk.records import BatchBuilder, build_control_batch
from josefk.records.errors import InvalidRecordError
from josefk.records.record import ControlRecordType, iter_records
from josefk.storage.log import Log
from josefk.storage.offsets import AbortedTxn, AppendOrigin, FetchIsolation, TxnMarker
from josefk.storage.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)


def batch(
    producer_id: int = -1,
    epoch: int = 0,
    sequence: int = -1,
    values: tuple[bytes, ...] = (b"v",),
    *,
    transactional: bool = False,
) -> bytearray:
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
    )
    for value in values:
        builder.append(None, value, timestamp=NOW)
    return builder.build()


def append(log: Log, data: bytearray, origin: AppendOrigin = AppendOrigin.CLIENT) -> int:
    """Append as the single-node leader does: the HW follows the LEO."""
    info = log.append_as_leader(data, 0, origin=origin)
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def mark(log: Log, producer_id: int, committed: bool, epoch: int = 0, coordinator: int = 0) -> int:
    info = log.append_txn_marker(TxnMarker(producer_id, epoch, coordinator, committed), 0)
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def committed_values(log: Log) -> list[bytes]:
    """What a read_committed consumer keeps: reads to the LSO, drops aborted transactions'
    batches using the aborted list the log gives (Kafka's consumer algorithm)."""
    values: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.last_stable_offset:
        info = log.read(offset, 1 << 20, FetchIsolation.TXN_COMMITTED, min_one_message=True)
        aborted = sorted(log.aborted_transactions_for_read(info), key=lambda a: a.first_offset)
        batches = read_all_from(info)
        if not batches:
            break
        skipping: set[int] = set()
        for b in batches:
            while aborted and aborted[0].first_offset <= b.last_offset:
                skipping.add(aborted.pop(0).producer_id)
            if b.is_control:
                skipping.discard(b.producer_id)
            elif b.producer_id in skipping and b.is_transactional:
                pass
            elif b.base_offset >= offset or b.last_offset >= offset:
                values.extend(r.value or b"" for r in iter_records(b) if r.offset >= offset)
            offset = b.next_offset
    return values


def read_all_from(info: object) -> list:  # type: ignore[type-arg]
    from josefk.records import split_batches

    records = info.records  # type: ignore[attr-defined]
    data = records.read() if records is not None else b""
    return list(split_batches(bytearray(data)))


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return open_log(tmp_path / "t-0", small_config(segment_bytes=4096))


# -- the rules ----------------------------------------------------------------------------------


def test_an_open_transaction_holds_the_last_stable_offset_until_its_commit(log: Log) -> None:
    append(log, batch(values=(b"plain",)))
    first = append(log, batch(7, 0, 0, (b"t1", b"t2"), transactional=True))
    append(log, batch(values=(b"after",)))
    assert log.high_watermark == 4
    assert log.last_stable_offset == first == 1
    assert log.producer_state.ongoing_transactions == {1: 7}
    assert committed_values(log) == [b"plain"]

    marker = mark(log, 7, committed=True)
    assert marker == 4
    assert log.last_stable_offset == log.high_watermark == 5
    assert committed_values(log) == [b"plain", b"t1", b"t2", b"after"]
    assert log.collect_aborted_transactions(0, 5) == []


def test_an_aborted_transaction_is_indexed_and_dropped_by_read_committed(log: Log) -> None:
    append(log, batch(5, 0, 0, (b"a1",), transactional=True))
    append(log, batch(6, 0, 0, (b"c1",), transactional=True))
    append(log, batch(5, 0, 1, (b"a2",), transactional=True))
    assert mark(log, 5, committed=False) == 3
    # Producer 6 is still open at offset 1: that is the LSO the entry records.
    assert log.collect_aborted_transactions(0, 10) == [AbortedTxn(5, 0, 3, 1)]
    assert log.last_stable_offset == 1
    mark(log, 6, committed=True)
    assert committed_values(log) == [b"c1"]
    # read_uncommitted sees everything, aborted records included (not the markers' data).
    assert [r.value for b in read_all(log, 0, FetchIsolation.HIGH_WATERMARK)
            if not b.is_control for r in iter_records(b)] == [b"a1", b"c1", b"a2"]  # fmt: skip
    entries = read_txn_index(log.active_segment.txn_index.path)
    assert [(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
            for e in entries] == [(5, 0, 3, 1)]  # fmt: skip


def test_a_plain_batch_from_a_producer_with_an_open_transaction_is_refused(log: Log) -> None:
    append(log, batch(3, 0, 0, transactional=True))
    end = log.log_end_offset
    with pytest.raises(InvalidTxnStateError):
        append(log, batch(3, 0, 1))
    assert log.log_end_offset == end
    mark(log, 3, committed=True)
    append(log, batch(3, 0, 1))  # the transaction is over: plain writes are fine again


def test_clients_cannot_write_control_batches(log: Log) -> None:
    forged = build_control_batch(
        ControlRecordType.COMMIT, producer_id=3, producer_epoch=0, coordinator_epoch=0,
        timestamp=NOW,
    )  # fmt: skip
    with pytest.raises(InvalidRecordError, match="control batch"):
        append(log, forged)
    assert log.log_end_offset == 0


def test_a_transactional_batch_without_a_producer_id_is_refused(log: Log) -> None:
    with pytest.raises(InvalidRecordError):
        append(log, batch(transactional=True))


def test_markers_from_an_old_epoch_or_an_old_coordinator_are_refused(log: Log) -> None:
    append(log, batch(3, 2, 0, transactional=True))
    mark(log, 3, committed=True, epoch=2, coordinator=5)
    end = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        mark(log, 3, committed=False, epoch=1, coordinator=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        mark(log, 3, committed=False, epoch=2, coordinator=4)
    assert log.log_end_offset == end
    # A marker for a newer epoch (the coordinator fenced the producer) is written.
    mark(log, 3, committed=False, epoch=3, coordinator=5)


def test_the_group_coordinator_writes_transactional_batches_without_sequences(log: Log) -> None:
    append(log, batch(9, 1, -1, (b"offsets",), transactional=True), AppendOrigin.COORDINATOR)
    assert log.last_stable_offset == 0
    with pytest.raises(InvalidRecordError):  # a client must give sequences
        append(log, batch(9, 1, -1, (b"x",), transactional=True))
    mark(log, 9, committed=True, epoch=1)
    assert log.last_stable_offset == log.high_watermark


def test_an_empty_transaction_marker_changes_no_offset_and_indexes_nothing(log: Log) -> None:
    mark(log, 4, committed=False)
    assert log.collect_aborted_transactions(0, 10) == []
    assert not log.active_segment.txn_index.path.exists()


@pytest.mark.parametrize("clean", [True, False])
def test_open_transactions_and_the_index_survive_a_restart(tmp_path: Path, clean: bool) -> None:
    path = tmp_path / "t-0"
    config = small_config(segment_bytes=300)
    log = open_log(path, config)
    for i in range(6):
        append(log, batch(1, 0, i, (b"x" * 40,), transactional=True))
        if i == 2:
            mark(log, 1, committed=False)
    open_first = 4
    append(log, batch(2, 0, 0, (b"y",), transactional=True))
    assert log.num_segments > 2
    aborted_before = log.collect_aborted_transactions(0, log.log_end_offset)
    assert len(aborted_before) == 1
    if clean:
        log.close()
    else:
        log.close_handlers()
        # Lose every transaction index: an unclean start must rebuild them.
        for index in path.glob("*.txnindex"):
            index.unlink()
    log = open_log(path, config, had_clean_shutdown=clean, recovery_point=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == aborted_before
    assert log.last_stable_offset == open_first
    assert set(log.producer_state.ongoing_transactions.values()) == {1, 2}
    mark(log, 1, committed=True)
    mark(log, 2, committed=True)
    assert log.last_stable_offset == log.high_watermark


def test_truncation_reopens_a_transaction_and_drops_its_index_entry(log: Log) -> None:
    append(log, batch(1, 0, 0, transactional=True))
    marker = mark(log, 1, committed=False)
    assert log.collect_aborted_transactions(0, 10)
    log.truncate_to(marker)
    assert log.collect_aborted_transactions(0, 10) == []
    assert log.producer_state.ongoing_transactions == {0: 1}
    assert log.last_stable_offset == 0


def test_the_last_stable_offset_is_never_below_the_log_start_offset(log: Log) -> None:
    append(log, batch(1, 0, 0, transactional=True))
    append(log, batch(values=(b"p",)))
    log.maybe_increment_log_start_offset(1)
    assert log.last_stable_offset == 1


# -- the property -------------------------------------------------------------------------------


@dataclass
class Model:
    """What the log must hold: every record with its fate, the open transactions, the
    aborted transactions whose markers are in the log."""

    records: dict[int, tuple[bytes, int, bool]] = field(default_factory=dict)  # offset -> ...
    open_txns: dict[int, int] = field(default_factory=dict)  # producer -> first offset
    txn_offsets: dict[int, list[int]] = field(default_factory=dict)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # pid, first, marker
    committed: set[int] = field(default_factory=set)  # offsets of committed txn records
    plain: set[int] = field(default_factory=set)


PRODUCERS = (1, 2, 3)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_transactions_keep_the_last_stable_offset_and_the_index_right(
    data: st.DataObject,
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t-0"
        config = small_config(segment_bytes=600)
        log = open_log(path, config)
        model = Model()
        sequences = dict.fromkeys(PRODUCERS, 0)
        for step in range(data.draw(st.integers(5, 45), label="steps")):
            op = data.draw(
                st.sampled_from(
                    ("txn", "txn", "txn", "plain", "commit", "abort", "restart", "crash", "trim")
                ),
                label="op",
            )
            pid = data.draw(st.sampled_from(PRODUCERS), label="producer")
            if op == "txn":
                count = data.draw(st.integers(1, 3), label="count")
                values = tuple(f"{pid}:{step}:{i}".encode() for i in range(count))
                first = append(log, batch(pid, 0, sequences[pid], values, transactional=True))
                sequences[pid] += count
                model.open_txns.setdefault(pid, first)
                model.txn_offsets.setdefault(pid, []).extend(range(first, first + count))
            elif op == "plain":
                if pid in model.open_txns:
                    with pytest.raises(InvalidTxnStateError):
                        append(log, batch(pid, 0, sequences[pid]))
                    continue
                first = append(log, batch(pid, 0, sequences[pid], (f"p{step}".encode(),)))
                sequences[pid] += 1
                model.plain.add(first)
            elif op in ("commit", "abort"):
                offset = mark(log, pid, committed=op == "commit")
                first = model.open_txns.pop(pid, None)
                offsets = model.txn_offsets.pop(pid, [])
                if first is not None:
                    if op == "commit":
                        model.committed.update(offsets)
                    else:
                        model.aborted.append((pid, first, offset))
            elif op == "restart":
                log.close()
                log = open_log(path, config, had_clean_shutdown=True, recovery_point=0)
            elif op == "crash":
                log.close_handlers()
                log = open_log(path, config, had_clean_shutdown=False)
            elif op == "trim":
                if log.num_segments < 3:
                    continue
                target = log.log_segments()[1].base_offset
                log.maybe_increment_log_start_offset(target)
                log.delete_old_segments()
            log.update_high_watermark(log.log_end_offset)
            check(log, model, path)


def check(log: Log, model: Model, path: Path) -> None:
    start = log.log_start_offset
    open_firsts = [f for f in model.open_txns.values()]
    expected_lso = min([log.high_watermark, *open_firsts])
    assert log.last_stable_offset == max(expected_lso, start)
    assert {pid for pid in log.producer_state.ongoing_transactions.values()} == set(model.open_txns)
    # The index files, read independently, hold exactly the aborted transactions whose
    # markers are still in the log.
    base_offsets = {s.base_offset for s in log.log_segments()}
    indexed = []
    markers = {}
    for log_file in sorted(path.glob("*.log")):
        base = int(log_file.name.split(".")[0])
        if base not in base_offsets:
            continue
        for b in read_log_file(log_file):
            if b.control:
                assert b.marker is not None and b.transactional
                markers[b.base_offset] = b.marker
        indexed += [
            (e.producer_id, e.first_offset, e.last_offset)
            for e in read_txn_index(log_file.with_suffix(".txnindex"))
        ]
    first_segment_base = min(base_offsets)
    expected = [a for a in model.aborted if a[2] >= first_segment_base]
    assert indexed == expected
    for _, _, marker_offset in expected:
        assert markers[marker_offset][0] == ControlRecordType.ABORT
    # A read_committed reader sees exactly the committed and plain records below the LSO.
    visible = set()
    for offset in model.plain | model.committed:
        if start <= offset < log.last_stable_offset:
            visible.add(offset)
    assert len(committed_values(log)) == len(visible)
