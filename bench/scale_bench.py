"""Scale: one broker with many partitions (issue 34), beside the baseline commit in the same run.

For each case (a partition count laid out as one topic, or as topics of 10 partitions) a fresh
``josefk serve`` on a fresh data dir is measured:

- CreateTopics time for every partition (one request; confluent-kafka's AdminClient);
- idle CPU: the broker's own CPU seconds (utime+stime) over ``--idle`` seconds with no client,
  as % of one core;
- RSS (VmRSS) and open file descriptors, idle and after the produce run;
- Metadata latency for all topics: a raw Metadata v1 request with a null topic list on one
  connection, median of 5 (the response size is printed beside it);
- produce throughput, 1 KiB records from librdkafka (confluent-kafka, acks=1) or, with
  ``--client josefk``, josefk's own producer: first to a 1-partition topic, then round robin
  over every partition of the case, same record count;
  the ratio spread/single and the broker's CPU seconds per GB of each; with ``--keyless``,
  the same records once more without a partition (the client's default partitioner, sticky
  for keyless records) in batches of ``--keyless-batch-size`` (Kafka's default 16 KiB), with
  the share of the case's partitions they reached, beside the 1-partition topic once more in
  batches of that size (what the keyless ratio owes to the smaller batches, not to the
  partition count);
- start-up: SIGTERM (its time printed), then the time from exec to the broker's ready line
  (clean shutdown) and the broker's CPU seconds by then (imports included); then SIGKILL
  (after more records, so the logs have unflushed tails) and the same figures again.

``--baseline-ref REF`` checks REF out in a temporary ``git worktree`` (the built C extension
copied in) and runs the same cases from it in the same invocation, for the cases with at least
``--baseline-min`` partitions. Prints a Markdown table.

    .venv/bin/python bench/scale_bench.py --quick --baseline-ref d487483
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from serve_process import THROUGHPUT_PRODUCER, cpu_seconds  # noqa: E402

RECORD = b"x" * 1024


@dataclass(frozen=True)
class Case:
    partitions: int
    per_topic: int  # partitions per topic; == partitions for one topic

    @property
    def topics(self) -> int:
        return self.partitions // self.per_topic

    @property
    def label(self) -> str:
        if self.topics == 1:
            return f"{self.partitions:,} (1 topic)"
        return f"{self.partitions:,} ({self.topics:,} topics x {self.per_topic})"

    def topic_names(self) -> list[str]:
        return [f"scale-{i:05d}" for i in range(self.topics)]


@dataclass
class Result:
    build: str
    case: Case
    figures: dict[str, Any] = field(default_factory=dict)


class Broker:
    """A ``josefk serve`` run from ``root`` (its own source tree first on the path)."""

    def __init__(
        self, root: Path, data_dir: Path, log: Path, settings: tuple[str, ...] = ()
    ) -> None:
        env = dict(os.environ, PYTHONPATH=str(root))
        started = time.perf_counter()
        self._stderr = open(log, "ab")  # noqa: SIM115 - closed in stop/kill
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "josefk",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                str(data_dir),
                "--metrics-port",
                "0",
                "--log-level",
                "warning",
                *(arg for setting in settings for arg in ("--set", setting)),
            ],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            cwd=root,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        self.ready_s = time.perf_counter() - started
        # The CPU the start-up took (imports included): steadier than the wall time when
        # the machine is shared.
        self.ready_cpu_s = cpu_seconds(self.process.pid) if self.process.poll() is None else 0.0
        if "listening on" not in line:
            raise RuntimeError(f"broker did not start: {line!r} (see {log})")
        address = line.split("://", 1)[1].split()[0].rstrip(",")
        host, port = address.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.bootstrap = f"{host}:{port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self) -> float:
        started = time.perf_counter()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=300)
        self._stderr.close()
        return time.perf_counter() - started

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=60)
        self._stderr.close()


def metadata_all_topics(host: str, port: int, rounds: int = 5) -> tuple[float, int]:
    """Median seconds of a Metadata v1 request for all topics (null list), response bytes."""
    header = struct.pack(">hhih", 3, 1, 0, 5) + b"bench"
    times: list[float] = []
    size = 0
    with socket.create_connection((host, port)) as sock:
        for correlation in range(rounds):
            body = struct.pack(">hhih", 3, 1, correlation, 5) + b"bench" + struct.pack(">i", -1)
            assert len(body) == len(header) + 4
            started = time.perf_counter()
            sock.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
            _recv_exactly(sock, size)
            times.append(time.perf_counter() - started)
    return statistics.median(times), size


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(min(count - len(chunks), 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def create_topics(bootstrap: str, case: Case) -> float:
    from confluent_kafka.admin import AdminClient, NewTopic

    # A slow creation (the baseline's) must not hit librdkafka's 60 s socket timeout.
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    started = time.perf_counter()
    futures = admin.create_topics(
        [NewTopic(name, case.per_topic, 1) for name in case.topic_names()],
        operation_timeout=900,
        request_timeout=900,
    )
    for future in futures.values():
        future.result(timeout=600)
    seconds = time.perf_counter() - started
    # Wait until every partition has a leader in Metadata.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        metadata = admin.list_topics(timeout=60)
        ready = sum(
            1
            for name, topic in metadata.topics.items()
            if name.startswith("scale-")
            for partition in topic.partitions.values()
            if partition.leader >= 0
        )
        if ready >= case.partitions:
            return seconds
        time.sleep(0.2)
    raise RuntimeError("partitions never got leaders")


def produce(
    bootstrap: str,
    targets: list[tuple[str, int | None]],
    count: int,
    broker: Broker,
    client: str = "librdkafka",
    batch_size: int | None = None,
) -> tuple[float, float]:
    """Send ``count`` 1 KiB records round robin over ``targets``: MB/s and broker CPU s/GB.
    A target's partition None leaves the choice to the client's default partitioner
    (keyless records: sticky). ``client``: librdkafka (confluent-kafka) or josefk (this
    tree's ``AIOProducer`` on uvloop), both with ``THROUGHPUT_PRODUCER``'s batch size,
    linger and buffer unless ``batch_size`` is given."""
    if client == "josefk":
        return produce_josefk(bootstrap, targets, count, broker, batch_size)
    from confluent_kafka import Producer

    settings = dict(THROUGHPUT_PRODUCER)
    if batch_size is not None:
        settings["batch.size"] = batch_size
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, **settings})
    producer.list_topics(timeout=60)
    errors = 0

    def delivered(error: Any, _message: Any) -> None:
        nonlocal errors
        if error is not None:
            errors += 1

    n = len(targets)
    cpu_before = broker.cpu()
    client_before = time.process_time()
    started = time.perf_counter()
    for i in range(count):
        topic, partition = targets[i % n]
        keywords = {} if partition is None else {"partition": partition}
        while True:
            try:
                producer.produce(topic, RECORD, on_delivery=delivered, **keywords)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(300)
    seconds = time.perf_counter() - started
    cpu = broker.cpu() - cpu_before
    client = time.process_time() - client_before
    if remaining or errors:
        raise RuntimeError(f"{remaining} records undelivered, {errors} errors")
    gigabytes = count * len(RECORD) / 1e9
    print(
        f"#   {n} partitions: {seconds:.1f} s, broker CPU {cpu:.1f} s, "
        f"client (librdkafka) CPU {client:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return count * len(RECORD) / 1e6 / seconds, cpu / gigabytes


def produce_josefk(
    bootstrap: str,
    targets: list[tuple[str, int | None]],
    count: int,
    broker: Broker,
    batch_size: int | None = None,
) -> tuple[float, float]:
    import uvloop

    from josefk.client import AIOProducer

    async def run() -> tuple[float, float, float]:
        async with AIOProducer(
            bootstrap_servers=bootstrap,
            acks=1,
            linger_ms=THROUGHPUT_PRODUCER["linger.ms"],
            batch_size=batch_size or THROUGHPUT_PRODUCER["batch.size"],
            buffer_memory=THROUGHPUT_PRODUCER["queue.buffering.max.kbytes"] * 1024,
        ) as producer:
            await producer.send(targets[0][0], b"", partition=targets[0][1] or 0)
            await producer.flush()  # connected, metadata known
            cpu_before = broker.cpu()
            client_before = time.process_time()
            started = time.perf_counter()
            n = len(targets)
            for i in range(count):
                topic, partition = targets[i % n]
                await producer.send(topic, RECORD, partition=partition)
            await producer.flush()
            return (
                time.perf_counter() - started,
                broker.cpu() - cpu_before,
                time.process_time() - client_before,
            )

    seconds, cpu, client = uvloop.run(run())
    print(
        f"#   {len(targets)} partitions: {seconds:.1f} s, broker CPU {cpu:.1f} s, "
        f"client (josefk) CPU {client:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return count * len(RECORD) / 1e6 / seconds, cpu / (count * len(RECORD) / 1e9)


def partition_log_bytes(data: Path, case: Case) -> dict[str, int]:
    """Each of the case's partition dirs: the bytes of its segment files (read off the data
    dir: which partitions a run reached)."""
    names = set(case.topic_names())
    sizes = {}
    with os.scandir(data) as entries:
        for entry in entries:
            if entry.is_dir() and entry.name.rpartition("-")[0] in names:
                with os.scandir(entry.path) as files:
                    sizes[entry.name] = sum(
                        f.stat().st_size for f in files if f.name.endswith(".log")
                    )
    return sizes


def run_case(root: Path, build: str, case: Case, args: argparse.Namespace) -> Result:
    result = Result(build, case)
    f = result.figures
    work = Path(tempfile.mkdtemp(prefix="scale-", dir=args.tmp))
    data, log = work / "data", work / "broker.log"
    broker: Broker | None = None
    try:
        broker = Broker(root, data, log)
        f["create_s"] = create_topics(broker.bootstrap, case)
        single = Case(1, 1)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("single", 1, 1)])["single"].result(timeout=60)
        time.sleep(1)  # let the creation's background work (partition.metadata writes) end
        cpu_before = broker.cpu()
        time.sleep(args.idle)
        f["idle_cpu_pct"] = (broker.cpu() - cpu_before) / args.idle * 100
        f["rss_idle_mb"] = broker.rss_mb()
        f["fds_idle"] = broker.fds()
        f["metadata_ms"], f["metadata_bytes"] = metadata_all_topics(broker.host, broker.port)
        f["metadata_ms"] *= 1000
        f["single_mbs"], f["single_cpu_gb"] = produce(
            broker.bootstrap, [("single", 0)], args.records, broker, args.client
        )
        del single
        targets = [(t, p) for t in case.topic_names() for p in range(case.per_topic)]
        random.Random(1).shuffle(targets)
        f["spread_mbs"], f["spread_cpu_gb"] = produce(
            broker.bootstrap, targets, args.records, broker, args.client
        )
        f["spread_ratio"] = f["spread_mbs"] / f["single_mbs"]
        if args.keyless:
            # One partition in batches of the keyless run's size first: what the keyless
            # ratio owes to the batch size rather than to the partition count.
            f["single_batch_mbs"], f["single_batch_cpu_gb"] = produce(
                broker.bootstrap,
                [("single", 0)],
                args.records,
                broker,
                args.client,
                batch_size=args.keyless_batch_size,
            )
            # Keyless records, the partition left to the client (Kafka's default for them),
            # in batches of Kafka's default batch.size: how much of the case they reach.
            before = partition_log_bytes(data, case)
            f["keyless_mbs"], f["keyless_cpu_gb"] = produce(
                broker.bootstrap,
                [(t, None) for t in case.topic_names()],
                args.records,
                broker,
                args.client,
                batch_size=args.keyless_batch_size,
            )
            after = partition_log_bytes(data, case)
            f["keyless_ratio"] = f["keyless_mbs"] / f["single_mbs"]
            f["keyless_batch_ratio"] = f["keyless_mbs"] / f["single_batch_mbs"]
            grown = sum(1 for name, size in after.items() if size > before.get(name, 0))
            f["keyless_reach"] = grown / case.partitions
        f["rss_loaded_mb"] = broker.rss_mb()
        f["stop_s"] = broker.stop()
        broker = Broker(root, data, log)
        f["start_clean_s"] = broker.ready_s
        f["start_clean_cpu_s"] = broker.ready_cpu_s
        f["rss_restart_mb"] = broker.rss_mb()
        f["fds_restart"] = broker.fds()
        # Unflushed tails in every partition, then a crash.
        produce(broker.bootstrap, targets, max(len(targets), args.records // 4), broker)
        broker.kill()
        broker = Broker(root, data, log)
        f["start_kill_s"] = broker.ready_s
        f["start_kill_cpu_s"] = broker.ready_cpu_s
        broker.stop()
    finally:
        if broker is not None and broker.process.poll() is None:
            broker.kill()  # a failed case leaves no broker behind
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return result


@contextmanager
def baseline_checkout(ref: str, tmp: str | None) -> Iterator[Path]:
    """REF in a temporary git worktree, with this tree's built C extension copied in (the
    extension is built in place, not tracked)."""
    path = Path(tempfile.mkdtemp(prefix="scale-baseline-", dir=tmp))
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(path), ref],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    try:
        for built in (ROOT / "josefk").rglob("*.so"):
            target = path / built.relative_to(ROOT)
            if target.parent.is_dir() and not target.exists():
                shutil.copy2(built, target)
        yield path
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True
        )
        shutil.rmtree(path, ignore_errors=True)


COLUMNS: list[tuple[str, str, str]] = [
    ("create_s", "CreateTopics s", "{:.1f}"),
    ("idle_cpu_pct", "idle CPU %", "{:.2f}"),
    ("rss_idle_mb", "RSS idle MB", "{:.0f}"),
    ("fds_idle", "fds", "{}"),
    ("metadata_ms", "Metadata all ms", "{:.1f}"),
    ("metadata_bytes", "Metadata bytes", "{:,}"),
    ("single_mbs", "1-partition MB/s", "{:.0f}"),
    ("spread_mbs", "spread MB/s", "{:.0f}"),
    ("spread_ratio", "spread/1-partition", "{:.2f}"),
    ("keyless_mbs", "keyless MB/s", "{:.0f}"),
    ("keyless_ratio", "keyless/1-partition", "{:.2f}"),
    ("keyless_reach", "partitions reached", "{:.0%}"),
    ("single_batch_mbs", "1-partition MB/s, keyless batch size", "{:.0f}"),
    ("keyless_batch_ratio", "keyless/1-partition, same batch size", "{:.2f}"),
    ("single_cpu_gb", "1-partition CPU s/GB", "{:.1f}"),
    ("spread_cpu_gb", "spread CPU s/GB", "{:.1f}"),
    ("single_batch_cpu_gb", "1-partition CPU s/GB, keyless batch size", "{:.1f}"),
    ("keyless_cpu_gb", "keyless CPU s/GB", "{:.1f}"),
    ("rss_loaded_mb", "RSS after produce MB", "{:.0f}"),
    ("stop_s", "SIGTERM stop s", "{:.1f}"),
    ("start_clean_s", "start-up clean s", "{:.1f}"),
    ("start_clean_cpu_s", "(CPU s)", "{:.1f}"),
    ("start_kill_s", "start-up after SIGKILL s", "{:.1f}"),
    ("start_kill_cpu_s", "(CPU s)", "{:.1f}"),
    ("rss_restart_mb", "RSS after restart MB", "{:.0f}"),
]


def table(results: list[Result]) -> str:
    lines = [
        "| build | partitions | " + " | ".join(title for _, title, _ in COLUMNS) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    for result in results:
        cells = []
        for key, _, fmt in COLUMNS:
            value = result.figures.get(key)
            cells.append("-" if value is None else fmt.format(value))
        lines.append(f"| {result.build} | {result.case.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer cases, shorter idle")
    parser.add_argument("--baseline-ref", help="a commit to measure beside this tree")
    parser.add_argument(
        "--baseline-min", type=int, default=10_000, help="baseline only from this many partitions"
    )
    parser.add_argument(
        "--baseline-only-one-topic",
        action="store_true",
        help="baseline only for the one-topic layout (saves time: the baseline is slow)",
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument(
        "--client",
        choices=("librdkafka", "josefk"),
        default="librdkafka",
        help="the producer of the throughput runs (josefk: this tree's client, for every build)",
    )
    parser.add_argument(
        "--keyless",
        action="store_true",
        help="also send the records keyless, the partition chosen by the client (sticky)",
    )
    parser.add_argument(
        "--keyless-batch-size",
        type=int,
        default=16_384,
        help="batch.size of the keyless run (default: Kafka's default, 16 KiB)",
    )
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--cases", help="e.g. 100:100,10000:10 (partitions:per-topic)")
    parser.add_argument("--tmp", default=None, help="where data dirs go")
    parser.add_argument("--keep", action="store_true", help="keep the data dirs")
    args = parser.parse_args()
    if args.cases:
        cases = [
            Case(int(p), int(t)) for p, t in (item.split(":") for item in args.cases.split(","))
        ]
    elif args.quick:
        cases = [Case(100, 100), Case(1000, 1000), Case(10_000, 10_000), Case(10_000, 10)]
    else:
        cases = [
            Case(100, 100),
            Case(100, 10),
            Case(1000, 1000),
            Case(1000, 10),
            Case(10_000, 10_000),
            Case(10_000, 10),
        ]
    if args.quick and args.idle == 30.0:
        args.idle = 15.0
    results: list[Result] = []
    builds: list[tuple[str, Path | None]] = [("this tree", ROOT)]
    with contextlib_nullcontext_or_baseline(args) as baseline:
        if baseline is not None:
            builds.append((f"baseline {args.baseline_ref}", baseline))
        for case in cases:
            for build, root in builds:
                if root is None or (
                    root != ROOT
                    and (
                        case.partitions < args.baseline_min
                        or (args.baseline_only_one_topic and case.topics > 1)
                    )
                ):
                    continue
                print(f"# {build}: {case.label}", file=sys.stderr, flush=True)
                try:
                    results.append(run_case(root, build, case, args))
                except Exception as exc:  # noqa: BLE001 - a failed case is a finding
                    print(f"#   failed: {exc!r}", file=sys.stderr, flush=True)
                    results.append(Result(build + f" (failed: {exc})", case))
                print(table(results[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(results))


@contextmanager
def contextlib_nullcontext_or_baseline(args: argparse.Namespace) -> Iterator[Path | None]:
    if args.baseline_ref is None:
        yield None
        return
    with baseline_checkout(args.baseline_ref, args.tmp) as path:
        yield path


if __name__ == "__main__":
    main()
