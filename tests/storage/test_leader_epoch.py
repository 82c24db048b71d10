"""The leader-epoch cache and its checkpoint file: the docstring's worked example, Kafka's
text format byte for byte, and a model-based property test over random operations."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from log_helpers import open_log, producer_batch, read_all

from josefk.storage.checkpoint import CorruptCheckpointError
from josefk.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache


def test_worked_example(tmp_path: Path) -> None:
    cache = LeaderEpochCache.load(tmp_path)
    assert cache.end_offset_for(0, 0) == (-1, -1)
    for epoch, offset in [(0, 0), (2, 100), (5, 250)]:
        assert cache.assign(epoch, offset)
    assert not cache.assign(5, 260)  # same epoch, later append: nothing new
    assert cache.end_offset_for(0, 300) == (0, 100)
    assert cache.end_offset_for(1, 300) == (0, 100)
    assert cache.end_offset_for(5, 300) == (5, 300)
    assert cache.end_offset_for(6, 300) == (-1, -1)
    assert cache.epoch_for_offset(99) == 0 and cache.epoch_for_offset(100) == 2
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n3\n0 0\n2 100\n5 250\n"
    assert LeaderEpochCache.load(tmp_path).entries() == [(0, 0), (2, 100), (5, 250)]


def test_an_epoch_older_than_the_first_known_one(tmp_path: Path) -> None:
    cache = LeaderEpochCache.load(tmp_path)
    cache.assign(3, 40)
    cache.assign(4, 90)
    assert cache.end_offset_for(1, 100) == (1, 40)


def test_assign_drops_entries_a_truncation_left_behind(tmp_path: Path) -> None:
    cache = LeaderEpochCache.load(tmp_path)
    for epoch, offset in [(0, 0), (2, 100), (5, 250)]:
        cache.assign(epoch, offset)
    # A follower learns that the leader's epoch 3 began at 150: our epoch 5 at 250 is gone.
    cache.assign(3, 150)
    assert cache.entries() == [(0, 0), (2, 100), (3, 150)]


def test_truncation_from_end_and_start(tmp_path: Path) -> None:
    cache = LeaderEpochCache.load(tmp_path)
    for epoch, offset in [(0, 0), (2, 100), (5, 250)]:
        cache.assign(epoch, offset)
    cache.truncate_from_end(250)
    assert cache.entries() == [(0, 0), (2, 100)]
    cache.truncate_from_start(120)
    assert cache.entries() == [(2, 120)]
    assert LeaderEpochCache.load(tmp_path).entries() == [(2, 120)]


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\n0 0\n", "0\n2\n3 10\n2 20\n", "0\n1\nx 1\n", "0\n2\n1 5\n2 5\n"],
)
def test_a_corrupt_checkpoint_names_its_file(tmp_path: Path, text: str) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text(text)
    with pytest.raises(CorruptCheckpointError, match=LEADER_EPOCH_CHECKPOINT):
        LeaderEpochCache.load(tmp_path)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 8), st.integers(0, 60)),
        st.tuples(st.just("end"), st.integers(0, 60), st.just(0)),
        st.tuples(st.just("start"), st.integers(0, 60), st.just(0)),
    ),
    max_size=30,
)


@given(operations, st.integers(-1, 9), st.integers(0, 60))
def test_matches_a_model(ops: list[tuple[str, int, int]], query: int, leo_extra: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cache = LeaderEpochCache.load(Path(tmp))
        model: list[tuple[int, int]] = []
        for op, a, b in ops:
            if op == "assign":
                cache.assign(a, b)
                if not (model and model[-1][0] == a and model[-1][1] <= b):
                    model = [(e, o) for e, o in model if e < a and o < b] + [(a, b)]
            elif op == "end":
                cache.truncate_from_end(a)
                model = [(e, o) for e, o in model if o < a]
            else:
                cache.truncate_from_start(a)
                before = [(e, o) for e, o in model if o <= a]
                if before:
                    model = [(before[-1][0], a)] + [(e, o) for e, o in model if o > a]
            assert cache.entries() == model
            epochs = [e for e, _ in model]
            offsets = [o for _, o in model]
            assert epochs == sorted(set(epochs)) and offsets == sorted(set(offsets))
        assert LeaderEpochCache.load(Path(tmp)).entries() == model
        leo = (model[-1][1] if model else 0) + leo_extra
        epoch, end = cache.end_offset_for(query, leo)
        known = [e for e, _ in model]
        if query == -1 or not model or query > known[-1]:
            assert (epoch, end) == (-1, -1)
        elif query == known[-1]:
            assert (epoch, end) == (query, leo)
        else:
            # The end is where the first epoch newer than the query began.
            assert end == next(o for e, o in model if e > query)
            assert epoch == max((e for e in known if e <= query), default=query)


def test_the_log_keeps_its_epochs_through_appends_truncation_and_restarts(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    leader.append_as_leader(producer_batch(3), leader_epoch=0)
    leader.append_as_leader(producer_batch(2), leader_epoch=0)
    leader.append_as_leader(producer_batch(4), leader_epoch=2)
    assert leader.leader_epoch_cache.entries() == [(0, 0), (2, 5)]
    assert leader.end_offset_for_epoch(0) == (0, 5)
    assert leader.end_offset_for_epoch(1) == (0, 5)
    assert leader.end_offset_for_epoch(2) == (2, 9)

    # A follower appending the leader's batches ends up with the same epochs.
    follower = open_log(tmp_path / "follower" / "t-0")
    for batch in read_all(leader):
        follower.append_as_follower(bytes(batch.buffer))
    assert follower.leader_epoch_cache.entries() == [(0, 0), (2, 5)]

    # Truncating a divergent tail forgets the epochs that began in it; a restart keeps that.
    follower.truncate_to(5)
    assert follower.leader_epoch_cache.entries() == [(0, 0)]
    follower.close()
    reopened = open_log(tmp_path / "follower" / "t-0")
    assert reopened.leader_epoch_cache.entries() == [(0, 0)]
    assert reopened.log_end_offset == 5

    # A checkpoint ahead of the log (the log lost its tail in a crash) is trimmed at load.
    leader.close()
    (tmp_path / "leader" / "t-0" / LEADER_EPOCH_CHECKPOINT).write_text("0\n3\n0 0\n2 5\n3 40\n")
    assert open_log(tmp_path / "leader" / "t-0").leader_epoch_cache.entries() == [(0, 0), (2, 5)]


# -- deferred saving (a partition being created writes its checkpoint off the loop) ------------


def test_deferred_changes_are_written_by_the_caller_then_saving_is_immediate_again(
    tmp_path: Path,
) -> None:
    cache = LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT)
    cache.defer_saves()
    assert cache.take_pending() is None
    cache.assign(0, 0)
    assert not cache.path.exists()  # kept in memory while deferred
    pending = cache.take_pending()
    assert pending == "0\n1\n0 0\n"
    assert cache.take_pending() is None
    cache.write_text(pending)
    assert cache.path.read_text() == "0\n1\n0 0\n"
    # A change after the text was taken is written when the deferral ends.
    cache.assign(1, 5)
    assert cache.path.read_text() == "0\n1\n0 0\n"
    cache.end_deferral()
    assert cache.path.read_text() == "0\n2\n0 0\n1 5\n"
    cache.assign(2, 9)
    assert LeaderEpochCache.load(tmp_path).entries() == [(0, 0), (1, 5), (2, 9)]
