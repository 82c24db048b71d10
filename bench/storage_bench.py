"""Storage benchmark: the lower half of josefk.storage against raw file I/O in the same run.

Measures, each next to its baseline:

- append throughput of 16 KiB and 1 MiB batches through ``LogSegment.append`` (offset and
  time index entries every ``index.interval.bytes``) against ``os.write`` of the same bytes to
  a plain file (target: >= 70% of raw);
- read-slice rate: ``LogSegment.read`` (index lookup, header scan, FileSlice) per second;
- offset index lookups per second, at the tail (warm section) and anywhere (cold part);
- recovery of a 1 GiB segment of 16 KiB batches (CRC of every batch, both indexes rebuilt)
  against reading the same file sequentially (target: <= 3 s);
- start-up of 10,000 segments after a clean shutdown through the LogManager (target <= 2 s),
  and opening the same 10,000 segments with ``LogSegment.open`` alone.

Files live under ``--dir`` (default: the system's temporary directory; on the benchmark
machine /tmp and the repository share one disk). The machine has far more RAM than the files, so
every figure is for data in the page cache, as a broker's hot path usually is; nothing here
drops caches.

Usage: ``python bench/storage_bench.py [--quick] [--dir DIR] [--markdown]``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from josefk.records import BatchBuilder, RecordBatch
from josefk.storage.index import OffsetIndex
from josefk.storage.segment import LogSegment
from josefk.util.clock import SystemClock

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
TS = 1_700_000_000_000


def template_batch(batch_bytes: int, record_bytes: int = 1000) -> bytearray:
    """A valid v2 batch of about ``batch_bytes`` bytes, made of ~1 KB records."""
    builder = BatchBuilder(base_offset=0)
    value = os.urandom(record_bytes)
    while builder.uncompressed_size + record_bytes + 20 <= batch_bytes:
        builder.append(None, value, timestamp=TS)
    return builder.build()


def median_of(runs: int, function: Callable[[], float]) -> float:
    """The median of ``runs`` measurements (seconds): robust to one noisy run."""
    return statistics.median(function() for _ in range(runs))


# -- append -------------------------------------------------------------------------------


def raw_write(path: Path, batch: bytearray, count: int) -> float:
    view = memoryview(batch)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, view)
    elapsed = time.perf_counter() - start
    os.close(fd)
    path.unlink()
    return elapsed


def segment_append(directory: Path, batch: bytearray, count: int) -> float:
    header = RecordBatch(memoryview(batch))
    records = header.record_count
    view = memoryview(batch)
    segment = LogSegment.open(directory, 0, index_interval_bytes=4096, max_index_size=10 * MiB)
    start = time.perf_counter()
    offset = 0
    for _ in range(count):
        # The broker assigns offsets in place (base_offset is outside the CRC), as here.
        header.set_base_offset(offset)
        offset += records
        segment.append(offset - 1, TS, offset - 1, view)
    elapsed = time.perf_counter() - start
    segment.close()
    segment.delete_if_exists()
    return elapsed


def bench_append(directory: Path, total: int, runs: int) -> list[dict[str, object]]:
    results = []
    for batch_bytes in (16 * KiB, 1 * MiB):
        batch = template_batch(batch_bytes)
        count = total // len(batch)
        volume = count * len(batch)
        # Interleaved runs, so page-cache writeback and other noise hit both sides alike.
        raw_times, our_times = [], []
        for _ in range(runs):
            raw_times.append(raw_write(directory / "raw.bin", batch, count))
            our_times.append(segment_append(directory, batch, count))
        raw, ours = statistics.median(raw_times), statistics.median(our_times)
        # Each run's own ratio too: on a shared machine the spread says how far to trust it.
        ratios = sorted(r / o for r, o in zip(raw_times, our_times, strict=True))
        results.append(
            {
                "batch": f"{batch_bytes // KiB} KiB" if batch_bytes < MiB else "1 MiB",
                "raw_mb_s": volume / raw / 1e6,
                "segment_mb_s": volume / ours / 1e6,
                "ratio": statistics.median(ratios),
                "ratio_min": ratios[0],
                "ratio_max": ratios[-1],
                "batches_s": count / ours,
            }
        )
    return results


# -- reads and lookups --------------------------------------------------------------------


def build_segment(
    directory: Path, total: int, batch_bytes: int = 16 * KiB
) -> tuple[LogSegment, int]:
    batch = template_batch(batch_bytes)
    header = RecordBatch(memoryview(batch))
    records = header.record_count
    segment = LogSegment.open(directory, 0, index_interval_bytes=4096, max_index_size=10 * MiB)
    offset = 0
    for _ in range(total // len(batch)):
        header.set_base_offset(offset)
        offset += records
        segment.append(offset - 1, TS, offset - 1, memoryview(batch))
    return segment, offset


def bench_reads(segment: LogSegment, next_offset: int, reads: int) -> dict[str, float]:
    rng = random.Random(1)
    targets = [rng.randrange(next_offset) for _ in range(reads)]
    start = time.perf_counter()
    for target in targets:
        segment.read(target, 1 * MiB)
    random_rate = reads / (time.perf_counter() - start)
    tail = [next_offset - 1 - rng.randrange(2000) for _ in range(reads)]
    start = time.perf_counter()
    for target in tail:
        segment.read(target, 1 * MiB)
    tail_rate = reads / (time.perf_counter() - start)
    return {"random_reads_s": random_rate, "tail_reads_s": tail_rate}


def bench_lookups(directory: Path, lookups: int) -> dict[str, float]:
    entries = 10 * MiB // 8  # a full default-size index: 1,310,720 entries
    index = OffsetIndex(directory / "lookup.index", 0, max_index_size=10 * MiB)
    for n in range(entries):
        index.append(n * 10 + 5, n * 1024)
    rng = random.Random(2)
    anywhere = [rng.randrange(entries * 10) for _ in range(lookups)]
    tail = [entries * 10 - rng.randrange(5000) for _ in range(lookups)]
    start = time.perf_counter()
    for target in anywhere:
        index.lookup(target)
    anywhere_rate = lookups / (time.perf_counter() - start)
    start = time.perf_counter()
    for target in tail:
        index.lookup(target)
    tail_rate = lookups / (time.perf_counter() - start)
    index.delete_if_exists()
    return {
        "index_entries": entries,
        "lookups_anywhere_s": anywhere_rate,
        "lookups_tail_s": tail_rate,
    }


# -- recovery -------------------------------------------------------------------------------


def bench_recovery(directory: Path, size: int, runs: int) -> dict[str, float]:
    segment, next_offset = build_segment(directory, size)
    segment.close()
    path = segment.path
    file_size = path.stat().st_size

    def raw_read() -> float:
        fd = os.open(path, os.O_RDONLY)
        start = time.perf_counter()
        while os.read(fd, 4 * MiB):
            pass
        elapsed = time.perf_counter() - start
        os.close(fd)
        return elapsed

    def recover() -> float:
        reopened = LogSegment.open(
            directory,
            0,
            index_interval_bytes=4096,
            max_index_size=10 * MiB,
            file_already_exists=True,
        )
        start = time.perf_counter()
        truncated = reopened.recover(max_message_size=2 * MiB)
        elapsed = time.perf_counter() - start
        assert truncated == 0 and reopened.read_next_offset() == next_offset
        reopened.close()
        return elapsed

    raw = median_of(runs, raw_read)
    ours = median_of(runs, recover)
    LogSegment.open(directory, 0, file_already_exists=True).delete_if_exists()
    return {"segment_bytes": file_size, "raw_read_s": raw, "recover_s": ours}


# -- start-up -------------------------------------------------------------------------------


def build_log_dir(log_dir: Path, partitions: int, segments_per_partition: int) -> dict[str, int]:
    """Write ``partitions`` x ``segments_per_partition`` closed segments and a clean marker."""
    from josefk.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
    from josefk.storage.manager import CLEAN_SHUTDOWN_FILE
    from josefk.storage.offsets import TopicPartition

    batch = template_batch(4 * KiB, record_bytes=500)
    header = RecordBatch(memoryview(batch))
    records = header.record_count
    recovery_points: dict[TopicPartition, int] = {}
    for p in range(partitions):
        directory = log_dir / f"bench-{p}"
        directory.mkdir(parents=True)
        offset = 0
        for _ in range(segments_per_partition):
            segment = LogSegment.open(
                directory, offset, index_interval_bytes=4096, max_index_size=10 * MiB
            )
            for _ in range(3):
                header.set_base_offset(offset)
                offset += records
                segment.append(offset - 1, TS, offset - 1, memoryview(batch))
            segment.on_becoming_inactive_segment()
            segment.close()
        recovery_points[TopicPartition("bench", p)] = offset
    OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write(recovery_points)
    (log_dir / CLEAN_SHUTDOWN_FILE).touch()
    return {"partitions": partitions, "segments": partitions * segments_per_partition}


def start_log_manager(log_dir: Path) -> tuple[float, int]:
    from josefk.config.topic import LogConfig
    from josefk.storage.manager import LogManager, LogManagerConfig
    from josefk.util.scheduler import Scheduler

    async def main() -> tuple[float, int]:
        clock = SystemClock()
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as executor:
            manager = LogManager(
                LogManagerConfig(log_dirs=(log_dir,), recovery_threads_per_data_dir=2),
                LogConfig(),
                clock=clock,
                scheduler=Scheduler(clock),
                executor=executor,
            )
            start = time.perf_counter()
            await manager.load_logs()
            elapsed = time.perf_counter() - start
            logs = manager.all_logs()
            count = sum(len(log.log_segments()) for log in logs)
            for log in logs:
                log.close_handlers()
        return elapsed, count

    return asyncio.run(main())


def open_segments_lazily(log_dir: Path) -> float:
    start = time.perf_counter()
    opened = []
    for directory in sorted(log_dir.iterdir()):
        if not directory.is_dir():
            continue
        for log_path in sorted(directory.glob("*.log")):
            base_offset = int(log_path.name.split(".", 1)[0])
            opened.append(LogSegment.open(directory, base_offset, file_already_exists=True))
    elapsed = time.perf_counter() - start
    for segment in opened:
        segment.close_handlers()
    return elapsed


def bench_startup(directory: Path, partitions: int, per_partition: int) -> dict[str, object]:
    log_dir = directory / "logdir"
    shape = build_log_dir(log_dir, partitions, per_partition)
    lazily = open_segments_lazily(log_dir)
    result: dict[str, object] = {**shape, "segment_open_s": lazily}
    try:
        elapsed, count = start_log_manager(log_dir)
        result["log_manager_s"] = elapsed
        result["log_manager_segments"] = count
    except Exception as e:  # noqa: BLE001  the upper half may change under us; report, don't crash
        result["log_manager_error"] = f"{type(e).__name__}: {e}"
    shutil.rmtree(log_dir)
    return result


# -- report ---------------------------------------------------------------------------------


def markdown(results: dict[str, object], quick: bool) -> str:
    append = results["append"]
    reads = results["reads"]
    lookups = results["lookups"]
    recovery = results["recovery"]
    startup = results["startup"]
    assert isinstance(append, list) and isinstance(reads, dict) and isinstance(lookups, dict)
    assert isinstance(recovery, dict) and isinstance(startup, dict)
    lines = [
        "## Storage (bench/storage_bench.py)",
        "",
        f"Run on {results['machine']}{' (--quick)' if quick else ''}, load average "
        f"{results['load_before']} before and {results['load_after']} after the run (other "
        "work shared the machine); files on the same disk as "
        "the repository, all in the page cache (23 GiB RAM, nothing fsync'd during the timed "
        "loops). Each figure is the median of the runs; each baseline was measured in the same "
        "run.",
        "",
        "| what | josefk | baseline (same run) | ratio | target |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in append:
        ok = "met" if row["ratio"] >= 0.7 else "**missed**"
        lines.append(
            f"| append, {row['batch']} batches (`LogSegment.append`) | "
            f"{row['segment_mb_s']:,.0f} MB/s ({row['batches_s']:,.0f} batches/s) | "
            f"raw `os.write`: {row['raw_mb_s']:,.0f} MB/s | {row['ratio']:.0%} (runs: "
            f"{row['ratio_min']:.0%}-{row['ratio_max']:.0%}) | >= 70% of raw: {ok} |"
        )
    lines.append(
        f"| read slice (`LogSegment.read`, 1 GiB segment of 16 KiB batches) | "
        f"{reads['random_reads_s']:,.0f} reads/s at random offsets, "
        f"{reads['tail_reads_s']:,.0f} reads/s at the tail | - | - | - |"
    )
    lines.append(
        f"| offset index lookup ({lookups['index_entries']:,} entries, a full 10 MiB index) | "
        f"{lookups['lookups_anywhere_s']:,.0f}/s anywhere, {lookups['lookups_tail_s']:,.0f}/s "
        "at the tail (warm section) | - | - | - |"
    )
    size_gib = recovery["segment_bytes"] / GiB
    ok = "met" if recovery["recover_s"] <= 3 * size_gib else "**missed**"
    lines.append(
        f"| recovery of a {size_gib:.2f} GiB segment of 16 KiB batches | "
        f"{recovery['recover_s']:.2f} s | sequential read of the file: "
        f"{recovery['raw_read_s']:.2f} s | {recovery['recover_s'] / recovery['raw_read_s']:.1f}x "
        f"the read | <= 3 s per GiB: {ok} |"
    )
    segments = startup["segments"]
    if "log_manager_s" in startup:
        ok = "met" if float(startup["log_manager_s"]) <= 2 else "**missed**"  # type: ignore[arg-type]
        lines.append(
            f"| start-up after a clean shutdown, {segments:,} segments in "
            f"{startup['partitions']} partitions (`LogManager.load_logs`) | "
            f"{startup['log_manager_s']:.2f} s | `LogSegment.open` of each segment alone: "
            f"{startup['segment_open_s']:.2f} s | - | <= 2 s: {ok} |"
        )
    else:
        lines.append(
            f"| opening {segments:,} segments lazily (`LogSegment.open`; LogManager failed: "
            f"{startup['log_manager_error']}) | {startup['segment_open_s']:.2f} s | - | - | - |"
        )
    lines += [
        "",
        "Append: the segment unpacks each batch header once (offsets, max timestamp), writes "
        "the batch with one `pwrite` and adds an offset and time index entry every "
        "`index.interval.bytes` (4096, so one per 16 KiB batch); the raw baseline is one "
        "`os.write` per batch of the same bytes. Recovery reads the file in 4 MiB chunks into "
        "one reused buffer, checks size, magic, offsets and the CRC32C (hardware) of every "
        "batch and rebuilds both indexes.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller volumes, one run each")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the files")
    parser.add_argument(
        "--markdown", action="store_true", help="print a docs/benchmarks.md section"
    )
    args = parser.parse_args()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="josefk-storage-bench-", dir=args.dir))
    runs = 1 if args.quick else 5
    append_total = 256 * MiB if args.quick else 512 * MiB
    recovery_size = 256 * MiB if args.quick else 1 * GiB
    partitions, per_partition = (20, 50) if args.quick else (100, 100)
    results: dict[str, object] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    }
    results["load_before"] = f"{os.getloadavg()[0]:.1f}"
    try:
        results["append"] = bench_append(directory, append_total, runs)
        print("append", results["append"], file=sys.stderr)
        (directory / "reads").mkdir()
        segment, next_offset = build_segment(directory / "reads", recovery_size)
        results["reads"] = bench_reads(segment, next_offset, 20_000 if args.quick else 100_000)
        segment.close()
        segment.delete_if_exists()
        print("reads", results["reads"], file=sys.stderr)
        results["lookups"] = bench_lookups(directory, 20_000 if args.quick else 200_000)
        print("lookups", results["lookups"], file=sys.stderr)
        (directory / "recovery").mkdir()
        results["recovery"] = bench_recovery(directory / "recovery", recovery_size, runs)
        print("recovery", results["recovery"], file=sys.stderr)
        results["startup"] = bench_startup(directory, partitions, per_partition)
        print("startup", results["startup"], file=sys.stderr)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    results["load_after"] = f"{os.getloadavg()[0]:.1f}"
    if args.markdown:
        print(markdown(results, args.quick))


if __name__ == "__main__":
    main()
