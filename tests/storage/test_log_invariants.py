"""Random sequences of log operations keep the log's invariants (hypothesis state machine)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from log_helpers import check_invariants, open_log, producer_batch, small_config

from josefk.records import split_batches
from josefk.storage.log import Log
from josefk.storage.offsets import FetchIsolation
from josefk.util.clock import ManualClock


class LogMachine(RuleBasedStateMachine):
    """Model: the list of (base_offset, last_offset) of the batches in the log."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="josefk-log-"))
        self.clock = ManualClock()
        # Small indexes so that rolls on a full index happen too; index.interval.bytes keeps
        # a segment's possible entries below the index size, as Kafka's defaults do (1 GiB
        # / 4 KiB * 8 bytes < 10 MiB): recovery places entries counting from the segment's
        # start and can need more of them than the appends since a restart placed.
        self.config = small_config(
            segment_bytes=3000, segment_index_bytes=96, index_interval_bytes=400
        )
        self.log: Log = open_log(self.tmp / "t-0", self.config, clock=self.clock)
        self.batches: list[tuple[int, int]] = []

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(count=st.integers(1, 6), size=st.integers(0, 80), batches=st.integers(1, 3))
    def append(self, count: int, size: int, batches: int) -> None:
        buffer = bytearray()
        for _ in range(batches):
            buffer += producer_batch(count, value_size=size)
        info = self.log.append_as_leader(buffer, 1)
        offset = info.first_offset
        for _ in range(batches):
            self.batches.append((offset, offset + count - 1))
            offset += count
        assert info.last_offset == offset - 1

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(data=st.data())
    def move_high_watermark(self, data: st.DataObject) -> None:
        self.log.update_high_watermark(data.draw(st.integers(-2, self.log.log_end_offset + 2)))

    @precondition(lambda self: self.batches)
    @rule(data=st.data(), at_boundary=st.booleans())
    def truncate(self, data: st.DataObject, at_boundary: bool) -> None:
        if at_boundary:
            target = data.draw(st.sampled_from([b for b, _ in self.batches]))
        else:
            target = data.draw(st.integers(self.log.log_start_offset, self.log.log_end_offset))
        if target < self.log.log_end_offset:
            self.log.truncate_to(target)
            self.batches = [(b, last) for b, last in self.batches if last < target]
            assert self.log.log_end_offset == target

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        hw = self.log.high_watermark
        target = data.draw(st.integers(self.log.log_start_offset, hw))
        self.log.delete_records(target)
        assert self.log.log_start_offset == max(target, self.log.log_start_offset)
        self.batches = [(b, last) for b, last in self.batches if last >= self.log.log_start_offset]

    @rule(clean=st.booleans())
    def restart(self, clean: bool) -> None:
        log = self.log
        start, hw, recovery_point = log.log_start_offset, log.high_watermark, log.recovery_point
        if clean:
            log.close()
        else:
            log.close_handlers()  # a crash: nothing trimmed or flushed, indexes preallocated
        self.log = open_log(
            self.tmp / "t-0",
            self.config,
            clock=self.clock,
            had_clean_shutdown=clean,
            log_start_offset=start,
            recovery_point=recovery_point,
        )
        self.log.update_high_watermark(hw)
        assert self.log.log_start_offset == start
        assert self.log.high_watermark == min(hw, self.log.log_end_offset)

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.log.log_end_offset

    @rule(
        data=st.data(),
        isolation=st.sampled_from(list(FetchIsolation)),
        max_length=st.integers(1, 2000),
    )
    def read(self, data: st.DataObject, isolation: FetchIsolation, max_length: int) -> None:
        start = data.draw(st.integers(self.log.log_start_offset, self.log.log_end_offset))
        info = self.log.read(start, max_length, isolation, min_one_message=True)
        limit = (
            self.log.log_end_offset
            if isolation is FetchIsolation.LOG_END
            else self.log.high_watermark
        )
        assert info.records is not None
        got = [
            (b.base_offset, b.last_offset) for b in split_batches(bytearray(info.records.read()))
        ]
        expected = [(b, last) for b, last in self.batches if last >= start and last < limit]
        if start >= limit or not expected:
            assert got == []
            return
        # Whole batches, the first one holding start (or the first after a gap), in order.
        assert got, (start, limit, expected)
        assert got[0] == expected[0]
        assert got[0][0] <= start or all(last < start for _, last in self.batches if _ < got[0][0])
        assert got == expected[: len(got)]

    @invariant()
    def invariants(self) -> None:
        check_invariants(self.log)
        assert self.log.log_end_offset >= (self.batches[-1][1] + 1 if self.batches else 0)

    @invariant()
    def change_count_moves_with_what_a_fetch_sees(self) -> None:
        # A fetch session's idle partition stays idle while the change count holds: any
        # change of these offsets that left it alone would never be answered.
        log = self.log
        seen = (
            log.log_end_offset,
            log.high_watermark,
            log.last_stable_offset,
            log.log_start_offset,
        )
        # A restart opens a new Log, counting afresh (sessions see its new Partition).
        last = getattr(self, "last_seen", None)
        if last is not None and last[0] is log and last[2] != seen:
            assert log.change_count != last[1], (last, seen)
        self.last_seen = (log, log.change_count, seen)


LogMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestLogInvariants = LogMachine.TestCase


def test_a_high_watermark_resolved_onto_another_offset_moves_the_change_count() -> None:
    # Found by the state machine: a truncation inside a batch leaves the HW (3) on no batch;
    # the read that resolves its position lands it on the next one (4), and a fetch
    # session's quiet partition must hear of that move.
    tmp = Path(tempfile.mkdtemp(prefix="josefk-log-"))
    log = open_log(tmp / "t-0", small_config(segment_bytes=3000), clock=ManualClock())
    try:
        log.append_as_leader(producer_batch(3, value_size=0) + producer_batch(3, value_size=0), 1)
        log.update_high_watermark(3)
        log.truncate_to(4)
        before = (log.change_count, log.high_watermark)
        log.read(0, 1, FetchIsolation.HIGH_WATERMARK, min_one_message=True)
        if log.high_watermark != before[1]:
            assert log.change_count != before[0]
    finally:
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
