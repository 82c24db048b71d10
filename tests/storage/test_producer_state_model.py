"""Random producer traffic against a partition log, checked against a simple model.

Several producers send batches with retries (of recent and old batches), sequence gaps,
epoch bumps (good and bad), fenced old epochs and sequences that wrap at 2**31, while the log
rolls segments and restarts cleanly or after a crash. The model says for each batch whether
it is appended, a duplicate (answered with the original offsets), out of order or fenced;
at the end the log holds exactly the batches the model appended, each once.

What the model knows about restarts is Kafka's: a snapshot keeps each producer's last batch
only, and an unclean start replays the batches after the newest snapshot.
"""

from __future__ import annotations

import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st
from log_helpers import NOW, open_log, read_all, small_config

from josefk.records import BatchBuilder
from josefk.storage.log import Log
from josefk.storage.producer_state import (
    INT32_MAX,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    in_sequence,
    increment_sequence,
)


@dataclass(frozen=True)
class Sent:
    producer_id: int
    epoch: int
    first_sequence: int
    count: int

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.first_sequence, self.count - 1)


@dataclass(frozen=True)
class Appended:
    sent: Sent
    first_offset: int


@dataclass
class Window:
    epoch: int
    batches: deque[Appended] = field(default_factory=lambda: deque(maxlen=5))

    def add(self, appended: Appended) -> None:
        if appended.sent.epoch != self.epoch:
            self.epoch = appended.sent.epoch
            self.batches.clear()
        self.batches.append(appended)

    def last_only(self) -> Window:
        window = Window(self.epoch)
        window.batches.extend(list(self.batches)[-1:])
        return window


class Model:
    def __init__(self) -> None:
        self.log: list[Appended] = []
        self.windows: dict[int, Window] = {}
        self.snapshots: dict[int, dict[int, Window]] = {}

    def decide(self, sent: Sent) -> str | Appended:
        window = self.windows.get(sent.producer_id)
        if window is None:
            return "ok"
        if sent.epoch == window.epoch:
            for batch in window.batches:
                if (batch.sent.first_sequence, batch.sent.last_sequence) == (
                    sent.first_sequence,
                    sent.last_sequence,
                ):
                    return batch
        if sent.epoch < window.epoch:
            return "fenced"
        if sent.epoch != window.epoch:
            return "ok" if sent.first_sequence == 0 else "out_of_order"
        last = window.batches[-1].sent.last_sequence
        return "ok" if in_sequence(last, sent.first_sequence) else "out_of_order"

    def append(self, appended: Appended) -> None:
        self.log.append(appended)
        self.windows.setdefault(appended.sent.producer_id, Window(appended.sent.epoch)).add(
            appended
        )

    def snapshot(self, offset: int) -> None:
        self.snapshots[offset] = {pid: w.last_only() for pid, w in self.windows.items()}

    def clean_restart(self, end: int) -> None:
        self.snapshot(end)
        self.windows = {pid: w.last_only() for pid, w in self.windows.items()}

    def unclean_restart(self) -> None:
        offset = max(self.snapshots, default=None)
        if offset is None:
            self.windows, replay = {}, self.log
        else:
            base = self.snapshots[offset]
            self.windows = {pid: w.last_only() for pid, w in base.items()}
            replay = [a for a in self.log if a.first_offset >= offset]
        for appended in replay:
            self.windows.setdefault(appended.sent.producer_id, Window(appended.sent.epoch)).add(
                appended
            )


def batch_of(sent: Sent) -> bytearray:
    builder = BatchBuilder(
        producer_id=sent.producer_id,
        producer_epoch=sent.epoch,
        base_sequence=sent.first_sequence,
    )
    for i in range(sent.count):
        builder.append(
            None,
            f"{sent.producer_id}:{sent.epoch}:{sent.first_sequence}:{i}".encode(),
            timestamp=NOW,
        )
    return builder.build()


OPS = ("next", "next", "next", "retry", "retry", "gap", "bump", "bad_bump", "old", "clean", "crash")


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_random_producer_traffic_matches_the_model(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as directory:
        run(Path(directory) / "t-0", data)


def run(path: Path, data: st.DataObject) -> None:
    config = small_config(segment_bytes=700)
    log: Log = open_log(path, config)
    model = Model()
    # producer id -> (epoch, next sequence); producer 3 starts just below the wrap.
    clients = {1: (0, 0), 2: (4, 0), 3: (0, INT32_MAX - 3)}
    history: dict[int, list[Sent]] = {pid: [] for pid in clients}
    for _ in range(data.draw(st.integers(5, 40), label="steps")):
        op = data.draw(st.sampled_from(OPS), label="op")
        if op == "clean":
            end = log.log_end_offset
            log.close()
            model.clean_restart(end)
            log = open_log(path, config, had_clean_shutdown=True, recovery_point=end)
            continue
        if op == "crash":
            log.close_handlers()
            model.unclean_restart()
            log = open_log(path, config, had_clean_shutdown=False)
            continue
        pid = data.draw(st.sampled_from(sorted(clients)), label="producer")
        epoch, next_sequence = clients[pid]
        count = data.draw(st.integers(1, 4), label="count")
        if op == "retry":
            if not history[pid]:
                continue
            sent = data.draw(st.sampled_from(history[pid]), label="retried")
        elif op == "gap":
            skip = data.draw(st.integers(1, 3))
            sent = Sent(pid, epoch, increment_sequence(next_sequence, skip), count)
        elif op == "bump":
            sent = Sent(pid, epoch + 1, 0, count)
        elif op == "bad_bump":
            sent = Sent(pid, epoch + 1, data.draw(st.integers(1, 5)), count)
        elif op == "old":
            if epoch == 0:
                continue
            sent = Sent(pid, epoch - 1, next_sequence, count)
        else:
            sent = Sent(pid, epoch, next_sequence, count)
        expected = model.decide(sent)
        event(f"{op}: {expected if isinstance(expected, str) else 'duplicate'}")
        snapshots_before = set(log.producer_state.snapshot_offsets)
        end = log.log_end_offset
        try:
            info = log.append_as_leader(batch_of(sent), 0)
        except OutOfOrderSequenceError:
            assert expected == "out_of_order", (sent, expected)
            assert log.log_end_offset == end
            continue
        except InvalidProducerEpochError:
            assert expected == "fenced", (sent, expected)
            assert log.log_end_offset == end
            continue
        if isinstance(expected, Appended):
            assert info.first_offset == expected.first_offset, (sent, expected)
            assert log.log_end_offset == end
            continue
        assert expected == "ok", (sent, expected)
        assert info.first_offset == end
        for offset in set(log.producer_state.snapshot_offsets) - snapshots_before:
            model.snapshot(offset)  # taken by a roll, before this batch was recorded
        model.append(Appended(sent, info.first_offset))
        history[pid].append(sent)
        clients[pid] = (sent.epoch, increment_sequence(sent.last_sequence, 1))
    stored = [
        (b.producer_id, b.producer_epoch, b.base_sequence, b.base_offset) for b in read_all(log)
    ]
    assert stored == [
        (a.sent.producer_id, a.sent.epoch, a.sent.first_sequence, a.first_offset) for a in model.log
    ]
    assert len({s[:3] for s in stored}) == len(stored), "a batch was written twice"
    log.close()
