"""Producer benchmark: josefk's client (this tree and a baseline commit) against
confluent-kafka (librdkafka), 1 KiB records, acks=1 and acks=all, one ``josefk serve``, one run.

Starts a real ``josefk serve`` (this tree's) on a temporary data dir and checks out the
baseline commit (``--baseline-ref``, default d487483) into a temporary ``git worktree`` with
its C extension built. Then, per round and per acks setting, each producer sends ``--mb`` MB
of 1 KiB records to partition 0 of a fresh topic (created first) from its own process, and
the parent measures:

* wall seconds from the first send to the end of the flush (inside the child), so MB/s;
* the child's own CPU seconds over the same span (``time.process_time()``: all its threads,
  librdkafka's included), per GB sent;
* the broker's CPU seconds (utime+stime from /proc/<pid>/stat) over the child's run, per GB;
* the records that landed (the partition's log end offset), which must be the count sent.

``josefk perf`` also runs ``josefk perf produce --json --broker-metrics URL`` of this tree as a
client: its own MB/s, record and request latencies beside what the broker's log got and what
its Prometheus endpoint counted (records and bytes in, Produce requests, TotalTimeMs).

Producers: linger 5 ms, ~1 MB batches (librdkafka's default batch.size; josefk gets the
same), no compression, no idempotence for librdkafka (josefk's default under acks=all is
idempotent, kept as a user gets it). Each figure is the fastest of ``--rounds`` interleaved
rounds, the producers taking turns going first; on a shared machine other work only ever
slows a round down.

    python bench/client_perf_bench.py                  # 200 MB per run, 2 rounds
    python bench/client_perf_bench.py --mb 20 --rounds 1   # a smoke run

Not a test: nothing here asserts but the landed-record check.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
SIZE = 1024
LINGER_MS = 5
BATCH_SIZE = 1_000_000


@dataclass
class Run:
    client: str
    acks: str
    records: int
    seconds: float
    client_cpu: float
    broker_cpu: float
    landed: int
    round_index: int
    perf: dict[str, Any] | None = None  # josefk perf produce's own JSON report

    @property
    def gb(self) -> float:
        return self.records * SIZE / 1e9

    @property
    def mb_per_s(self) -> float:
        return self.records * SIZE / self.seconds / 1e6


# ---------------------------------------------------------------------- children


def child_josefk(bootstrap: str, topic: str, acks: str, count: int) -> dict[str, float]:
    import uvloop

    from josefk.client import AIOProducer

    value = os.urandom(SIZE)

    async def main() -> dict[str, float]:
        async with AIOProducer(
            bootstrap_servers=bootstrap,
            acks=acks,
            linger_ms=LINGER_MS,
            batch_size=BATCH_SIZE,
        ) as producer:
            await producer.partitions_for(topic)
            cpu = time.process_time()
            start = time.perf_counter()
            send = producer.send
            for _ in range(count):
                await send(topic, value, partition=0)
            await producer.flush()
            return {
                "seconds": time.perf_counter() - start,
                "cpu": time.process_time() - cpu,
            }

    return uvloop.run(main())


def child_confluent(bootstrap: str, topic: str, acks: str, count: int) -> dict[str, float]:
    from confluent_kafka import Producer
    from serve_process import THROUGHPUT_PRODUCER

    value = os.urandom(SIZE)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            **THROUGHPUT_PRODUCER,
            "linger.ms": LINGER_MS,
            "batch.size": BATCH_SIZE,
            "acks": acks,
        }
    )
    producer.list_topics(topic, timeout=10)
    failed: list[Any] = []
    cpu = time.process_time()
    start = time.perf_counter()
    # The delivery callback is what a user's confluent-kafka code has per record too.
    produce = producer.produce

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for _ in range(count):
        while True:
            try:
                produce(topic, value, partition=0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.001)
    producer.flush(120)
    result = {"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu}
    if failed:
        raise SystemExit(f"{len(failed)} records failed: {failed[0]}")
    return result


def child_main(argv: list[str]) -> None:
    kind, bootstrap, topic, acks, count = argv
    sys.path.insert(0, str(BENCH))
    fn = child_josefk if kind == "josefk" else child_confluent
    print(json.dumps(fn(bootstrap, topic, acks, int(count))), flush=True)


# ---------------------------------------------------------------------- parent


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Broker:
    """``josefk serve`` of this tree on free ports, its Prometheus endpoint known (for the
    ``josefk perf`` client's --broker-metrics)."""

    def __init__(self, data_dir: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.metrics_port = probe.getsockname()[1]
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
                str(self.metrics_port),
                "--log-level",
                "warning",
                # Deleted topics' files go at once, so their pages are free for the next run.
                "--set",
                "log.segment.delete.delay.ms=0",
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        match = re.search(r"listening on \w+://([^:]+):(\d+)", line)
        if not match:
            raise RuntimeError(f"broker did not start: {line!r}")
        self.bootstrap = f"{match.group(1)}:{match.group(2)}"
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)


def make_baseline(ref: str) -> Path:
    """A detached worktree of ``ref`` with its C extension, importable by PYTHONPATH."""
    path = Path(tempfile.mkdtemp(prefix="josefk-baseline-"))
    path.rmdir()
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(path), ref],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    try:
        _build_extensions(path)
    except BaseException:
        drop_baseline(path)
        raise
    return path


def _build_extensions(path: Path) -> None:
    """The C extensions, as setup.py builds them: copied when the source is this tree's,
    compiled otherwise (setup.py itself would read the baseline's pyproject metadata)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for package, name in (("protocol", "_cdecode"), ("records", "_crecords")):
        source = path / "josefk" / package / f"{name}.c"
        built = ROOT / "josefk" / package / f"{name}{suffix}"
        target = path / "josefk" / package / f"{name}{suffix}"
        if not source.exists():
            continue
        if built.exists() and source.read_bytes() == built.with_name(f"{name}.c").read_bytes():
            shutil.copy2(built, target)
            continue
        subprocess.run(
            [
                "cc",
                "-shared",
                "-fPIC",
                "-O2",
                f"-I{sysconfig.get_paths()['include']}",
                str(source),
                "-o",
                str(target),
            ],
            check=True,
        )


def drop_baseline(path: Path) -> None:
    subprocess.run(
        ["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True
    )
    shutil.rmtree(path, ignore_errors=True)


async def _admin(bootstrap: str, topic: str | None, action: str) -> int:
    from josefk.client import AIOAdmin, TopicPartition

    async with AIOAdmin(bootstrap_servers=bootstrap) as admin:
        assert topic is not None
        if action == "create":
            await admin.create_topic(topic, 1)
            return 0
        if action == "delete":
            await admin.delete_topics([topic])
            return 0
        tp = TopicPartition(topic, 0)
        offsets = await admin.list_offsets({tp: admin.LATEST})
        found = offsets[tp]
        return -1 if found is None else found.offset


def admin(bootstrap: str, topic: str, action: str = "count") -> int:
    sys.path.insert(0, str(ROOT))
    return asyncio.run(_admin(bootstrap, topic, action))


def child_command(
    client: str, tree: Path, broker: Broker, topic: str, acks: str, count: int
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one producer process."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    if client == "josefk perf":
        cmd = [
            sys.executable,
            "-m",
            "josefk",
            "perf",
            "produce",
            topic,
            "--count",
            str(count),
            "--size",
            str(SIZE),
            "--acks",
            acks,
            "--batch-size",
            str(BATCH_SIZE),
            "--linger-ms",
            str(LINGER_MS),
            "--bootstrap",
            broker.bootstrap,
            "--broker-metrics",
            broker.metrics_url,
            "--json",
        ]
    else:
        kind = "confluent" if client == "confluent-kafka" else "josefk"
        cmd = [
            sys.executable,
            __file__,
            "--child",
            kind,
            broker.bootstrap,
            topic,
            acks,
            str(count),
        ]
    return cmd, env


def measure(
    broker: Broker, client: str, tree: Path, topic: str, acks: str, count: int
) -> tuple[dict[str, Any], float]:
    """Run one producer process; its JSON result and the broker CPU spent meanwhile."""
    cmd, env = child_command(client, tree, broker, topic, acks, count)
    broker_pid = broker.process.pid
    before = cpu_seconds(broker_pid)
    done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, timeout=900)
    broker_cpu = cpu_seconds(broker_pid) - before
    if done.returncode != 0:
        raise RuntimeError(f"{client} failed: {done.stderr[-2000:]}")
    out = done.stdout.strip()
    return json.loads(out[out.find("{") :]), broker_cpu


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=float, default=200, help="MB of 1 KiB records per run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--acks", default="1,all")
    parser.add_argument("--baseline-ref", default="d487483")
    parser.add_argument("--no-perf", action="store_true", help="skip the josefk perf client")
    parser.add_argument(
        "--keep-topics",
        action="store_true",
        help="keep each run's topic (later runs then write into memory the VM never touched)",
    )
    args = parser.parse_args()
    count = int(args.mb * 1e6 / SIZE)
    baseline = make_baseline(args.baseline_ref)
    trees = {
        "josefk": ROOT,
        f"josefk {args.baseline_ref}": baseline,
        "confluent-kafka": ROOT,
    }
    if not args.no_perf:
        trees["josefk perf"] = ROOT
    data_dir = Path(tempfile.mkdtemp(prefix="josefk-client-perf-bench-"))
    broker = Broker(data_dir)
    runs: list[Run] = []
    try:
        clients = list(trees)
        for round_index in range(args.rounds):
            shift = round_index % len(clients)
            order = clients[shift:] + clients[:shift]
            for acks in args.acks.split(","):
                for client in order:
                    topic = f"perf-{client.replace(' ', '-')}-{acks}-{round_index}"
                    admin(broker.bootstrap, topic, "create")
                    result, broker_cpu = measure(broker, client, trees[client], topic, acks, count)
                    landed = admin(broker.bootstrap, topic)
                    if not args.keep_topics:
                        # The next run's segments then go into the pages these freed, as a
                        # broker keeping up with retention writes (see docs/benchmarks.md,
                        # "Reading figures on this VM"), not into memory the VM never touched.
                        admin(broker.bootstrap, topic, "delete")
                    if client == "josefk perf":
                        seconds, cpu, perf = result["seconds"], float("nan"), result
                    else:
                        seconds, cpu, perf = result["seconds"], result["cpu"], None
                    run = Run(
                        client, acks, count, seconds, cpu, broker_cpu, landed, round_index, perf
                    )
                    runs.append(run)
                    print(
                        f"round {round_index + 1} acks={acks:3} {client:22} "
                        f"{run.mb_per_s:7.1f} MB/s  client {cpu / run.gb:5.2f} CPU s/GB  "
                        f"broker {broker_cpu / run.gb:5.2f} CPU s/GB  landed {landed}"
                        + (f"\n    perf {json.dumps(perf)}" if perf else ""),
                        flush=True,
                    )
                    if landed != count:
                        print(f"  !! {client}: {landed} records landed, {count} sent", flush=True)
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
        drop_baseline(baseline)
    print()
    print(markdown(runs, args, count))


def markdown(runs: list[Run], args: argparse.Namespace, count: int) -> str:
    best: dict[tuple[str, str], Run] = {}
    for run in runs:
        key = (run.client, run.acks)
        if key not in best or run.seconds < best[key].seconds:
            best[key] = run
    lines = [
        f"{time.strftime('%Y-%m-%d')}, `python bench/client_perf_bench.py --mb {args.mb:g} "
        f"--rounds {args.rounds}` on {os.cpu_count()} cores ({platform.machine()}), Python "
        f"{platform.python_version()}: {count:,} records of 1 KiB per run to one partition, "
        f"fastest of {args.rounds} rounds.",
        "",
        "| acks | producer | MB/s | vs librdkafka | client CPU s/GB | broker CPU s/GB |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for acks in args.acks.split(","):
        ref = best.get(("confluent-kafka", acks))
        for (client, a), run in best.items():
            if a != acks:
                continue
            ratio = f"{run.mb_per_s / ref.mb_per_s:.2f}x" if ref else ""
            cpu = "" if run.client_cpu != run.client_cpu else f"{run.client_cpu / run.gb:.2f}"
            lines.append(
                f"| {acks} | {client} | {run.mb_per_s:.1f} | {ratio} | {cpu} | "
                f"{run.broker_cpu / run.gb:.2f} |"
            )
    perf_runs = [r for r in runs if r.perf]
    if perf_runs:
        lines += [
            "",
            "`josefk perf produce` beside the broker's view of the same run (every round):",
            "",
            "| acks | round | perf MB/s | broker MB/s | landed | record p50 / p99 ms | "
            "request p50 / p99 ms | broker TotalTimeMs mean / p50 / p99 | requests perf / "
            "broker |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for run in perf_runs:
            perf = run.perf or {}
            lat = perf.get("latency_ms", {})
            req = perf.get("requests", {})
            rlat = req.get("latency_ms", {})
            broker = perf.get("broker", {})
            lines.append(
                f"| {run.acks} | {run.round_index + 1} | {perf.get('mb_per_second', 0):.1f} | "
                f"{broker.get('mb_per_second', 0):.1f} | {run.landed:,} | "
                f"{lat.get('p50')} / {lat.get('p99')} | {rlat.get('p50')} / {rlat.get('p99')} | "
                f"{broker.get('total_time_ms_mean')} / {broker.get('total_time_ms_p50')} / "
                f"{broker.get('total_time_ms_p99')} | {req.get('count')} / "
                f"{broker.get('produce_requests')} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
