"""Helpers for the partition log tests: producer batches, a manual-clock log, invariants."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from josefk.config.topic import LogConfig
from josefk.records import BatchBuilder, RecordBatch, split_batches
from josefk.storage.log import Log
from josefk.storage.offsets import FetchIsolation
from josefk.util.clock import JitterSource, ManualClock
from josefk.util.scheduler import InlineExecutor, Scheduler

NOW = 1_700_000_000_000


def producer_batch(
    count: int = 1,
    *,
    timestamp: int = NOW,
    value_size: int = 10,
    timestamps: Sequence[int] | None = None,
) -> bytearray:
    """A batch as a producer sends it: base offset 0, consecutive offsets."""
    builder = BatchBuilder(base_offset=0)
    for i in range(count):
        ts = timestamps[i] if timestamps is not None else timestamp
        builder.append(f"k{i}".encode(), b"v" * value_size, timestamp=ts)
    return builder.build()


def small_config(**overrides: object) -> LogConfig:
    values: dict[str, object] = {
        "segment_bytes": 1024,
        "segment_index_bytes": 1200,
        "index_interval_bytes": 100,
        "file_delete_delay_ms": 1000,
    }
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


def open_log(
    path: Path,
    config: LogConfig | None = None,
    *,
    clock: ManualClock | None = None,
    scheduler: Scheduler | None = None,
    **kwargs: object,
) -> Log:
    clock = clock if clock is not None else ManualClock(wall_ms=NOW)
    return Log.load(
        path,
        config if config is not None else small_config(),
        clock=clock,
        jitter=JitterSource(7),
        scheduler=scheduler,
        executor=InlineExecutor(),
        **kwargs,  # type: ignore[arg-type]
    )


def read_all(
    log: Log, start: int = 0, isolation: FetchIsolation = FetchIsolation.LOG_END
) -> list[RecordBatch]:
    """Every batch from ``start`` to the isolation limit, reading segment after segment."""
    out: list[RecordBatch] = []
    offset = max(start, log.log_start_offset)
    while True:
        info = log.read(offset, 1 << 20, isolation, min_one_message=True)
        data = info.records.read() if info.records is not None else b""
        batches = list(split_batches(bytearray(data)))
        if not batches:
            return out
        out.extend(batches)
        offset = batches[-1].next_offset


def check_invariants(log: Log) -> None:
    assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
    assert log.recovery_point <= log.log_end_offset
    segments = log.log_segments()
    bases = [s.base_offset for s in segments]
    assert bases == sorted(bases) and len(set(bases)) == len(bases)
    for segment, next_segment in itertools.pairwise(segments):
        info = segment.read(segment.base_offset, 1 << 30)
        if info is None or info.records is None:
            continue
        for batch in split_batches(bytearray(info.records.read())):
            assert segment.base_offset <= batch.base_offset
            assert batch.last_offset < next_segment.base_offset
    # A truncation inside a batch leaves a gap below the LEO (as in Kafka), never the reverse.
    assert log.active_segment.read_next_offset() <= log.log_end_offset
