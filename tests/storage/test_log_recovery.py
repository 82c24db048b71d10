"""Loading a partition directory: clean and unclean restarts, corrupted tails, leftovers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from log_helpers import check_invariants, open_log, producer_batch, read_all, small_config

from josefk.storage.log import Log
from josefk.storage.segment import LogSegment


def populated(path: Path, batches: int = 30) -> Log:
    log = open_log(path)
    for _ in range(batches):
        log.append_as_leader(producer_batch(3, value_size=60), 0)
    return log


@pytest.fixture
def recover_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = LogSegment.recover

    def counting(self: LogSegment, *args: object, **kwargs: object) -> int:
        calls.append(self.base_offset)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", counting)
    return calls


def test_clean_restart_skips_recovery(tmp_path: Path, recover_calls: list[int]) -> None:
    path = tmp_path / "t-0"
    log = populated(path)
    leo, segments = log.log_end_offset, log.num_segments
    log.flush()
    log.close()
    reopened = open_log(path, had_clean_shutdown=True, recovery_point=0, log_start_offset=0)
    assert recover_calls == []
    assert reopened.log_end_offset == leo and reopened.num_segments == segments
    assert reopened.recovery_point == leo
    assert [b.base_offset for b in read_all(reopened)] == list(range(0, leo, 3))
    check_invariants(reopened)


def test_unclean_restart_recovers_after_recovery_point(
    tmp_path: Path, recover_calls: list[int]
) -> None:
    path = tmp_path / "t-0"
    log = populated(path)
    leo = log.log_end_offset
    recovery_point = log.log_segments()[-3].base_offset + 1
    log.close()
    reopened = open_log(path, had_clean_shutdown=False, recovery_point=recovery_point)
    bases = [s.base_offset for s in reopened.log_segments()]
    assert recover_calls == bases[-3:]
    assert reopened.log_end_offset == leo
    assert reopened.recovery_point == recovery_point
    check_invariants(reopened)


def test_unclean_restart_truncates_corrupted_tail(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = populated(path)
    batch_size = len(producer_batch(3, value_size=60))
    active = log.active_segment
    active_log = active.path
    last_base = active.base_offset
    log.close()
    size = active_log.stat().st_size
    assert size >= 2 * batch_size
    # Flip a byte inside the last batch and add half a batch of garbage after it.
    with open(active_log, "r+b") as handle:
        handle.seek(size - 5)
        byte = handle.read(1)
        handle.seek(size - 5)
        handle.write(bytes([byte[0] ^ 0xFF]))
        handle.seek(size)
        handle.write(b"\x00" * (batch_size // 2))
    reopened = open_log(path, had_clean_shutdown=False, recovery_point=0)
    batches = read_all(reopened)
    assert batches[-1].last_offset == reopened.log_end_offset - 1
    assert reopened.log_end_offset == (size // batch_size - 1) * 3 + last_base
    assert reopened.active_segment.path.stat().st_size == size - batch_size
    for batch in batches:
        batch.ensure_valid()
    check_invariants(reopened)
    # Appending continues right after the valid prefix.
    info = reopened.append_as_leader(producer_batch(1), 0)
    assert info.first_offset == batches[-1].next_offset


def test_corruption_in_an_older_segment_drops_later_segments(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = populated(path)
    second = log.log_segments()[1]
    second_path, second_base = second.path, second.base_offset
    log.close()
    with open(second_path, "r+b") as handle:
        handle.seek(30)
        handle.write(b"\xff\xff")
    reopened = open_log(path, had_clean_shutdown=False, recovery_point=0)
    assert reopened.log_end_offset == second_base
    assert reopened.num_segments == 2
    assert [p.name for p in sorted(path.glob("*.log"))][-1] == second_path.name
    check_invariants(reopened)


def test_missing_index_is_rebuilt_even_after_clean_shutdown(
    tmp_path: Path, recover_calls: list[int]
) -> None:
    path = tmp_path / "t-0"
    log = populated(path)
    first = log.log_segments()[0]
    index_path = first.offset_index.path
    expected = [b.base_offset for b in read_all(log)]
    log.close()
    index_path.unlink()
    reopened = open_log(path, had_clean_shutdown=True)
    assert recover_calls == [0]
    assert index_path.exists()
    assert [b.base_offset for b in read_all(reopened)] == expected


def test_leftover_files_are_handled(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = populated(path)
    segments = log.log_segments()
    expected = [b.base_offset for b in read_all(log)]
    # A compaction finished writing its .swap for segments 2 and 3 before a crash: the swap
    # holds the same batches as the segments it replaces.
    third, fourth = segments[2], segments[3]
    swap_bytes = third.path.read_bytes() + fourth.path.read_bytes()
    swap_base = third.base_offset
    fourth_base = fourth.base_offset
    log.close()
    (path / f"{swap_base:020d}.log.swap").write_bytes(swap_bytes)
    (path / f"{swap_base:020d}.index.swap").write_bytes(b"")
    (path / "00000000000000099999.log.deleted").write_bytes(b"x")
    (path / "00000000000000099999.index.deleted").write_bytes(b"x")
    (path / "00000000000000088888.log.cleaned").write_bytes(b"x")
    (path / "00000000000000088888.log.swap").write_bytes(b"x")  # after the cleaned offset
    (path / "00000000000000077777.index").write_bytes(b"")  # orphan
    reopened = open_log(path, had_clean_shutdown=True)
    names = sorted(os.listdir(path))
    assert not [n for n in names if n.endswith((".deleted", ".cleaned", ".swap"))]
    assert "00000000000000077777.index" not in names
    assert f"{fourth_base:020d}.log" not in names
    assert [b.base_offset for b in read_all(reopened)] == expected
    check_invariants(reopened)


def test_checkpointed_log_start_offset_beyond_the_data(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = populated(path, batches=3)
    log.close()
    reopened = open_log(path, had_clean_shutdown=True, log_start_offset=100, recovery_point=100)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (100, 100)
    assert reopened.num_segments == 1 and reopened.active_segment.base_offset == 100


def test_log_start_offset_from_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = populated(path)
    log.close()
    reopened = open_log(path, had_clean_shutdown=True, log_start_offset=10)
    assert reopened.log_start_offset == 10
    assert reopened.high_watermark == 10
    assert read_all(reopened, 10)[0].base_offset == 9


def test_preallocated_segments_survive_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, small_config(preallocate=True, segment_bytes=4096))
    for _ in range(5):
        log.append_as_leader(producer_batch(2), 0)
    leo = log.log_end_offset
    # No close: the file stays at its preallocated size, zeros after the last batch.
    assert log.active_segment.path.stat().st_size == 4096
    reopened = open_log(path, small_config(preallocate=True, segment_bytes=4096))
    assert reopened.log_end_offset == leo
    check_invariants(reopened)


def test_corrupt_active_index_is_rebuilt_on_clean_restart(
    tmp_path: Path, recover_calls: list[int]
) -> None:
    path = tmp_path / "t-0"
    log = populated(path, batches=4)
    expected = [b.base_offset for b in read_all(log)]
    index_path = log.active_segment.offset_index.path
    base = log.active_segment.base_offset
    log.close()
    index_path.write_bytes(b"\x00" * 13)  # not a whole number of entries
    reopened = open_log(path, had_clean_shutdown=True, recovery_point=expected[-1] + 3)
    assert recover_calls == [base]
    assert [b.base_offset for b in read_all(reopened)] == expected


@settings(max_examples=25)
@given(data=st.data(), batches=st.integers(1, 12), truncate=st.booleans())
def test_damage_anywhere_keeps_exactly_the_valid_prefix(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, batches: int, truncate: bool
) -> None:
    path = tmp_path_factory.mktemp("damage") / "t-0"
    log = open_log(path, small_config(segment_bytes=600))
    for i in range(batches):
        log.append_as_leader(producer_batch(1 + i % 3, value_size=40 + 10 * (i % 4)), 0)
    # (segment file, position in it, first offset, last offset) of every batch on disk.
    layout: list[tuple[Path, int, int, int]] = []
    for segment in log.log_segments():
        for position, batch in segment.batches():
            layout.append((segment.path, position, batch.base_offset, batch.last_offset))
    sizes = {s.path: s.size() for s in log.log_segments()}
    log.close()
    victim = data.draw(st.sampled_from(layout))
    file_path, position, first_offset, _ = victim
    size = sizes[file_path]
    end = next((p for f, p, _, _ in layout if f == file_path and p > position), size)
    if truncate:
        # A cut inside the batch (a torn write). A cut exactly at a batch boundary of an
        # older segment leaves a well-formed but shorter segment that Kafka's recovery, and
        # so josefk's, keeps, with later segments after the gap.
        cut = data.draw(st.integers(position + 1, end - 1))
        os.truncate(file_path, cut)
    else:
        # Bytes from the attributes on are under the CRC; the ones before it the broker owns.
        at = data.draw(st.integers(position + 21, end - 1))
        with open(file_path, "r+b") as handle:
            handle.seek(at)
            byte = handle.read(1)[0]
            handle.seek(at)
            handle.write(bytes([byte ^ 0x5A]))
    reopened = open_log(path, small_config(segment_bytes=600), had_clean_shutdown=False)
    kept = [(b.base_offset, b.last_offset) for b in read_all(reopened)]
    assert kept == [(f, last) for _, _, f, last in layout if f < first_offset]
    assert reopened.log_end_offset == first_offset
    check_invariants(reopened)
    reopened.close()


def test_recovery_gets_index_room_when_a_small_index_filled_after_a_restart(
    tmp_path: Path,
) -> None:
    # Appends after a restart count index.interval.bytes from the restart; recovery counts
    # from the segment's start and so wants more entries than the 12 the index holds.
    config = small_config(segment_bytes=3000, segment_index_bytes=96, index_interval_bytes=64)
    path = tmp_path / "t-0"
    log = open_log(path, config)
    for _ in range(11):
        log.append_as_leader(producer_batch(1), 0)
    log.close()
    log = open_log(path, config, had_clean_shutdown=True)
    for _ in range(8):
        log.append_as_leader(producer_batch(1), 0)
    leo = log.log_end_offset
    log.close_handlers()
    reopened = open_log(path, config, had_clean_shutdown=False)
    assert reopened.log_end_offset == leo
    assert [b.base_offset for b in read_all(reopened)] == list(range(leo))
    check_invariants(reopened)


# -- files cut short while the broker was down ---------------------------------------------------


def batch_layout(log: Log) -> list[tuple[Path, int, int, int, int]]:
    """(segment file, position, size, first offset, last offset) of every batch on disk."""
    return [
        (segment.path, position, batch.size_in_bytes, batch.base_offset, batch.last_offset)
        for segment in log.log_segments()
        for position, batch in segment.batches()
    ]


@pytest.mark.parametrize("cut", ["half", "inside_last_batch", "batch_boundary", "empty"])
def test_only_segment_cut_short_after_clean_shutdown_is_recovered(
    tmp_path: Path, recover_calls: list[int], caplog: pytest.LogCaptureFixture, cut: str
) -> None:
    path = tmp_path / "t-0"
    config = small_config(segment_bytes=1 << 20)
    log = open_log(path, config)
    for _ in range(40):
        log.append_as_leader(producer_batch(3, value_size=60), 0)
    layout = batch_layout(log)
    segment_path = log.active_segment.path
    size = log.active_segment.size()
    assert log.num_segments == 1 and log.active_segment.offset_index.entries > 5
    log.flush()
    log.close()
    last_position = layout[-1][1]
    new_size = {
        "half": size // 2,
        "inside_last_batch": last_position + 10,
        # On a boundary after the last offset index entry: only the time index's roll entry
        # (offset 119) tells that the log lost its last batch.
        "batch_boundary": last_position,
        "empty": 0,
    }[cut]
    os.truncate(segment_path, new_size)
    kept = [
        (first, last)
        for _, position, length, first, last in layout
        if position + length <= new_size
    ]

    reopened = open_log(
        path, config, had_clean_shutdown=True, recovery_point=120, log_start_offset=0
    )
    expected_leo = kept[-1][1] + 1 if kept else 0
    assert reopened.log_end_offset == expected_leo
    assert [(b.base_offset, b.last_offset) for b in read_all(reopened)] == kept
    assert recover_calls == [0]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("disagree" in w and str(segment_path) in w for w in warnings), warnings
    check_invariants(reopened)
    # Appends go on after the recovered end.
    assert reopened.append_as_leader(producer_batch(2), 0).first_offset == expected_leo
    reopened.close()
    # The repaired files agree: the next clean start recovers nothing.
    recover_calls.clear()
    again = open_log(path, config, had_clean_shutdown=True, recovery_point=expected_leo + 2)
    assert recover_calls == [] and again.log_end_offset == expected_leo + 2


def test_older_segment_cut_short_at_rest_keeps_the_later_segments(
    tmp_path: Path, recover_calls: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "t-0"
    log = populated(path)
    layout = batch_layout(log)
    leo = log.log_end_offset
    second = log.log_segments()[1]
    second_path, second_size = second.path, second.size()
    third_base = log.log_segments()[2].base_offset
    log.flush()
    log.close()
    os.truncate(second_path, second_size // 2)
    kept = [
        (first, last)
        for file, position, length, first, last in layout
        if file != second_path or position + length <= second_size // 2
    ]
    # A clean shutdown, and the damaged segment is far below the recovery point.
    reopened = open_log(path, had_clean_shutdown=True, recovery_point=leo)
    assert reopened.log_end_offset == leo
    assert [(b.base_offset, b.last_offset) for b in read_all(reopened)] == kept
    assert recover_calls == [second.base_offset]
    # An offset lost with the cut reads from the next batch that exists.
    lost = next(first for file, _, _, first, _ in layout if (first, first + 2) not in kept)
    info = reopened.read(lost, 1 << 20)
    assert info.records is not None
    assert info.fetch_offset_metadata.segment_base_offset == third_base
    assert any(str(second_path) in r.getMessage() for r in caplog.records)
    check_invariants(reopened)


def test_intact_segments_pass_the_check_without_mapping_their_indexes(
    tmp_path: Path, recover_calls: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "t-0"
    log = populated(path)
    leo = log.log_end_offset
    log.close()
    reopened = open_log(path, had_clean_shutdown=True, recovery_point=leo)
    assert recover_calls == []
    assert not any(r.levelname == "WARNING" for r in caplog.records)
    for segment in reopened.log_segments()[:-1]:
        assert segment.check_files_agree() is None
        assert not segment.offset_index.is_open and not segment.time_index.is_open
    # The active segment's indexes are sanity-checked from their bytes: still unmapped.
    active = reopened.active_segment
    assert not active.offset_index.is_open and not active.time_index.is_open


def test_index_pointing_past_the_log_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = populated(path)
    first = log.log_segments()[0]
    log_path, index_path = first.path, first.offset_index.path
    log.close()
    os.truncate(log_path, 0)
    segment = LogSegment.open(path, 0, file_already_exists=True)
    problem = segment.check_files_agree()
    assert problem is not None and "past the end of the 0-byte log" in problem, problem
    os.truncate(index_path, 0)
    problem = segment.check_files_agree()
    assert problem is not None and "time index" in problem, problem
    segment.close_handlers()
