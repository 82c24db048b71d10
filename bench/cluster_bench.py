"""The replicated cluster's cost and failover time, against a single replica in the same run.

Starts a real etcd and three ``josefk serve`` brokers on this machine (the client shares the
same cores), then measures with confluent-kafka (librdkafka), 1 KiB records:

1. throughput: RF=1 acks=1 (the baseline) and RF=3 acks=all min.insync.replicas=2, each the
   best of ``--rounds`` runs of ``--mb`` MB, rounds alternating between the two, with the
   brokers' own CPU seconds per GB moved (the sum over the three processes, read from
   /proc); first the machine's memory is warmed (``--warm-gb`` written and deleted: see
   ``warm_memory``);
2. latency: p50/p99 of the delivery latency librdkafka measures per record, at half of the
   best RF=3 throughput of this tree (or ``--rate-mb`` MB/s) for ``--latency-s`` seconds
   after a two-second warm-up at the same rate (not counted),
   both configurations, each after a sync and a ``--settle-s`` pause;
3. failover: an acks=all producer sends a record every millisecond to one partition; its
   leader is SIGKILLed; the time from the kill to the first acknowledged record sent after it,
   and to the first Metadata answer (from a surviving broker, asked every 10 ms) that names
   the new leader, with the default ``josefk.etcd.session.timeout.ms`` and with
   ``--fast-session-ms``; with the latter also with librdkafka's periodic metadata refresh
   at ``--client-refresh-ms`` (see ``failover``) and with josefk's own producer.

With ``--baseline-ref REF`` the throughput and latency measurements run on two clusters side
by side, this tree's and REF's (checked out in a temporary ``git worktree``), rounds
alternating between them; ``--skip-failover`` leaves out part 3; ``--latency-curve
8,16,32,64`` adds p50/p99 at each of those loads.

Prints a table; ``--quick`` for a smoke run. Loopback only, bounded in time.

    .venv/bin/python bench/cluster_bench.py --rounds 3
    .venv/bin/python bench/cluster_bench.py --rounds 3 --baseline-ref d487483 --skip-failover
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from serve_process import baseline_tree, warm_memory

ROOT = Path(__file__).resolve().parent.parent
RECORD = b"x" * 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    def __init__(
        self, base: Path, session_ms: int, settings: Sequence[str] = (), root: Path = ROOT
    ) -> None:
        """``root``: the source tree whose josefk the brokers run (a baseline's worktree)."""
        self.base = base
        self.root = root
        self.session_ms = session_ms
        self.settings = list(settings)
        self.etcd: subprocess.Popen[bytes] | None = None
        self.brokers: dict[int, subprocess.Popen[bytes]] = {}
        self.ports: dict[int, int] = {}

    def start(self) -> Cluster:
        etcd = shutil.which("etcd")
        if etcd is None:
            sys.exit("etcd is not installed (Debian package etcd-server)")
        client, peer = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{client}"
        log = (self.base / "etcd.log").open("ab")
        self.etcd = subprocess.Popen(
            [etcd, "--data-dir", str(self.base / "etcd"),
             "--listen-client-urls", f"http://{self.endpoint}",
             "--advertise-client-urls", f"http://{self.endpoint}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"default=http://127.0.0.1:{peer}"],
            stdout=log, stderr=log,
        )  # fmt: skip
        # Until etcd's /health says it serves: its client port opens before it has elected
        # itself, and a broker that connects then gets no answer and refuses to start.
        deadline = time.monotonic() + 30
        while True:
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=0.5) as answer,
            ):
                if json.loads(answer.read()).get("health") == "true":
                    break
            if time.monotonic() > deadline:
                sys.exit("etcd did not start")
            time.sleep(0.1)
        for broker_id in (1, 2, 3):
            self.start_broker(broker_id)
        return self

    def start_broker(self, broker_id: int) -> None:
        port = self.ports.setdefault(broker_id, free_port())
        env = dict(os.environ, PYTHONPATH=str(self.root))
        log = (self.base / f"broker{broker_id}.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "josefk", "serve",
             "--data-dir", str(self.base / f"broker{broker_id}"),
             "--listen", f"127.0.0.1:{port}", "--metrics-port", "0",
             "--set", f"broker.id={broker_id}",
             "--set", f"josefk.etcd.endpoints={self.endpoint}",
             "--set", f"josefk.etcd.session.timeout.ms={self.session_ms}",
             *[arg for setting in self.settings for arg in ("--set", setting)]],
            stdout=subprocess.PIPE, stderr=log, env=env, cwd=self.root,
        )  # fmt: skip
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        if "listening on" not in line:
            sys.exit(f"broker {broker_id} did not start; see {self.base}/broker{broker_id}.log")
        self.brokers[broker_id] = process

    @property
    def bootstrap(self) -> str:
        return ",".join(
            f"127.0.0.1:{self.ports[b]}" for b, p in self.brokers.items() if p.poll() is None
        )

    def cpu_seconds(self) -> float:
        total = 0.0
        for process in self.brokers.values():
            if process.poll() is None:
                fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / CLK_TCK
        return total

    def create(self, name: str, partitions: int, rf: int, min_isr: int) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        topic = NewTopic(name, partitions, rf, config={"min.insync.replicas": str(min_isr)})
        for attempt in range(3):
            try:
                for future in admin.create_topics([topic]).values():
                    future.result(30)
                break
            except KafkaException as exc:
                # Right after a broker restart librdkafka may drop the connection a request
                # was on (_DESTROY_BROKER: it decommissions brokers Metadata no longer lists).
                code = exc.args[0].code()
                if code == KafkaError.TOPIC_ALREADY_EXISTS and attempt > 0:
                    break
                if code != KafkaError._DESTROY_BROKER or attempt == 2:
                    raise
                admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = list(admin.list_topics(name, timeout=10).topics[name].partitions.values())
            # A broker that has not applied the new topic yet answers it without partitions.
            if len(found) == partitions and all(p.leader > 0 and len(p.isrs) == rf for p in found):
                return
            time.sleep(0.1)
        sys.exit(f"topic {name} did not get its leaders")

    def leader_of(self, name: str, partition: int) -> int:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return int(admin.list_topics(name, timeout=10).topics[name].partitions[partition].leader)

    def stop(self) -> None:
        for process in self.brokers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.brokers.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        if self.etcd is not None:
            self.etcd.terminate()
            self.etcd.wait(30)


def producer(cluster: Cluster, acks: str, **extra: Any) -> Producer:
    conf = {
        "bootstrap.servers": cluster.bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "log_level": 2,
    }
    conf.update(extra)
    return Producer(conf)


def throughput(
    cluster: Cluster, topic: str, acks: str, megabytes: int
) -> tuple[float, float, float]:
    """(MB/s, the brokers' CPU s/GB, this client process's CPU s/GB: librdkafka's threads
    and the Python loop that feeds it, which share the two cores with the brokers)."""
    p = producer(cluster, acks)
    count = megabytes * 1024
    failures: list[Any] = []
    client0 = sum(os.times()[:2])
    cpu0, t0 = cluster.cpu_seconds(), time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, RECORD, on_delivery=lambda e, m: e and failures.append(e))
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - t0
    cpu = cluster.cpu_seconds() - cpu0
    if failures:
        sys.exit(f"{len(failures)} records failed: {failures[:3]}")
    client = sum(os.times()[:2]) - client0
    gigabytes = count * 1024 / 1e9
    return megabytes * 1.048576 / elapsed, cpu / gigabytes, client / gigabytes


def latency(
    cluster: Cluster,
    topic: str,
    acks: str,
    rate_mb: float,
    seconds: float,
    warmup_s: float = 2.0,
    linger_ms: float = 1,
) -> tuple[float, float]:
    """p50 and p99 of librdkafka's per-record delivery latency at ``rate_mb`` MB/s. The load
    runs ``warmup_s`` longer than ``seconds`` and the records of that first stretch are not
    counted: they include the producer's start (bootstrap, Metadata, a connection to each
    leader, ApiVersions), which held up the first 50-300 ms of records and so, at these
    rates, set the p99 by itself (1% of 10 s at 50 MB/s is 100 ms of records)."""
    p = producer(cluster, acks, **{"linger.ms": linger_ms})
    latencies: list[float] = []

    def done(err: Any, msg: Any) -> None:
        if err is None and msg.latency() is not None:
            latencies.append(msg.latency() * 1000)

    def warm(err: Any, msg: Any) -> None:
        pass

    per_ms = rate_mb * 1024 / 1000  # records per millisecond
    start = time.perf_counter()
    sent = 0
    while (now := time.perf_counter() - start) < seconds + warmup_s:
        due = int(now * 1000 * per_ms)
        callback = warm if now < warmup_s else done
        while sent < due:
            try:
                p.produce(topic, RECORD, on_delivery=callback)
            except BufferError:
                # The brokers fall behind this rate: the wait for room is part of the
                # latency of the records queued behind it.
                p.poll(0.001)
                continue
            sent += 1
        p.poll(0.001)
    p.flush(60)
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99)]


def failover(cluster: Cluster, topic: str, **client: Any) -> tuple[float, float]:
    """(seconds from the SIGKILL of the leader to the first acknowledged acks=all record
    sent after it, seconds until Metadata from a surviving broker names the new leader).
    The difference is the client's discovery: librdkafka re-asks for the leader of an
    unavailable partition once a second, and when the answer that names the new leader also
    drops the dead broker from the broker list, it decommissions that broker, loses the
    partition's new delegation and waits for the next one-second scan (its debug log:
    "Reverting from preferred replica ... to leader -1"). A periodic metadata refresh
    (``client``: ``topic.metadata.refresh.interval.ms``) takes another path and avoids both."""
    p = producer(
        cluster,
        "all",
        **{"linger.ms": 0, "message.timeout.ms": 60_000, "enable.idempotence": True, **client},
    )
    leader = cluster.leader_of(topic, 0)
    acked_after: list[float] = []

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked_after.append(time.monotonic())

    for _ in range(200):
        p.produce(topic, RECORD, partition=0)
        p.poll(0.001)
    p.flush(30)
    survivor = next(b for b in cluster.brokers if b != leader)
    watcher = AdminClient(
        {"bootstrap.servers": f"127.0.0.1:{cluster.ports[survivor]}", "log_level": 0}
    )
    elected: list[float] = []

    def watch() -> None:
        while not elected and time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                found = watcher.list_topics(topic, timeout=1).topics[topic].partitions[0]
                if found.leader not in (-1, leader):
                    elected.append(time.monotonic())
            time.sleep(0.01)

    cluster.brokers[leader].kill()
    cluster.brokers[leader].wait()
    killed_at = time.monotonic()  # every record sent from here on was sent after the kill
    deadline = killed_at + 60
    watching = threading.Thread(target=watch, daemon=True)
    watching.start()
    while not acked_after and time.monotonic() < deadline:
        try:
            p.produce(topic, RECORD, partition=0, on_delivery=done)
        except BufferError:
            pass
        p.poll(0.001)
    watching.join(60)
    result = acked_after[0] - killed_at if acked_after else float("nan")
    named = elected[0] - killed_at if elected else float("nan")
    p.flush(60)
    cluster.start_broker(leader)
    return result, named


def failover_josefk(cluster: Cluster, topic: str) -> float:
    """As ``failover``, with josefk's own asyncio producer (acks=all, idempotent): it asks
    for fresh metadata after retry.backoff.ms (100 ms) when a leader is unreachable, rather
    than on librdkafka's one-second timer."""
    import asyncio

    from josefk.client import AIOProducer

    async def run() -> float:
        async with AIOProducer(
            bootstrap_servers=cluster.bootstrap,
            acks="all",
            linger_ms=0,
            enable_idempotence=True,
            delivery_timeout_ms=60_000,
        ) as p:
            for _ in range(200):
                await p.send(topic, RECORD, partition=0)
            await p.flush()
            leader = cluster.leader_of(topic, 0)
            cluster.brokers[leader].kill()
            cluster.brokers[leader].wait()
            killed_at = time.monotonic()
            acked: list[float] = []

            def done(future: Any) -> None:
                if not future.cancelled() and future.exception() is None:
                    acked.append(time.monotonic())

            while not acked and time.monotonic() - killed_at < 60:
                (await p.send(topic, RECORD, partition=0)).add_done_callback(done)
                await asyncio.sleep(0.001)
            await p.flush()
        cluster.start_broker(leader)
        return acked[0] - killed_at if acked else float("nan")

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument(
        "--rate-mb",
        type=float,
        default=0.0,
        help="the latency run's load (default: half of this tree's best RF=3 MB/s)",
    )
    parser.add_argument("--latency-s", type=float, default=10.0)
    parser.add_argument(
        "--latency-curve",
        default="",
        help="comma-separated MB/s: also p50/p99 at each of these loads, every tree and config",
    )
    parser.add_argument("--fast-session-ms", type=int, default=2000)
    parser.add_argument("--settle-s", type=float, default=10.0)
    parser.add_argument(
        "--client-refresh-ms",
        type=int,
        default=250,
        help="librdkafka's topic.metadata.refresh.interval.ms for the last failover run",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--baseline-ref",
        default="",
        help="also run this git ref (a temporary worktree) on its own cluster, rounds alternating",
    )
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument(
        "--warm-gb",
        type=float,
        default=-1,
        help="GB written and deleted before measuring (default: what the rounds will write)",
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.mb, args.latency_s, args.settle_s = 1, 32, 3.0, 0.0
    with contextlib.ExitStack() as stack:
        trees = [("this tree", ROOT)]
        if args.baseline_ref:
            trees.append((args.baseline_ref, stack.enter_context(baseline_tree(args.baseline_ref))))
        run(args, trees)


def run(args: argparse.Namespace, trees: list[tuple[str, Path]]) -> None:
    configs = (("rf1", 1, "1", 1), ("rf3", 3, "all", 2))
    with tempfile.TemporaryDirectory(prefix="josefk-cluster-bench-") as tmp:
        clusters = []
        try:
            for index, (_, root) in enumerate(trees):
                (Path(tmp) / f"default{index}").mkdir()
                clusters.append(Cluster(Path(tmp) / f"default{index}", 6000, root=root).start())
            # Every replica writes its copy: RF=1 writes each MB once, RF=3 three times.
            warm_gb = args.warm_gb
            if warm_gb < 0:
                warm_gb = len(trees) * args.rounds * args.mb * 4 / 1024 + 1
            warm_memory(Path(tmp), warm_gb)
            results: dict[tuple[int, str], list[tuple[float, float, float]]] = {
                (i, c[0]): [] for i in range(len(trees)) for c in configs
            }
            # Rounds alternate between the configurations and the trees, so that none gets
            # the quieter machine (writeback of earlier rounds, page cache state) to itself.
            for round_ in range(args.rounds):
                for index, cluster in enumerate(clusters):
                    for name, rf, acks, min_isr in configs:
                        topic = f"{name}-{round_}"
                        cluster.create(topic, 3, rf, min_isr)
                        result = throughput(cluster, topic, acks, args.mb)
                        results[index, name].append(result)
                        print(
                            f"round {round_} {trees[index][0]} {name}: {result[0]:.1f} MB/s, "
                            f"{result[1]:.2f} broker CPU s/GB, client CPU {result[2]:.2f} s/GB, "
                            f"load {os.getloadavg()[0]:.1f}",
                            file=sys.stderr,
                            flush=True,
                        )
            # The latency load: --rate-mb, or half of this tree's best RF=3 throughput (the
            # same rate for the baseline, so that both carry the same load).
            rate = args.rate_mb or max(results[0, "rf3"])[0] / 2
            rows = []
            for index, cluster in enumerate(clusters):
                for name, rf, acks, min_isr in configs:
                    best = max(results[index, name])
                    cluster.create(f"{name}-latency", 3, rf, min_isr)
                    # As bench/broker_bench.py: let the throughput rounds' writeback finish
                    # first, or this VM's I/O aftermath (slow vCPU wake-ups) sets the tail.
                    os.sync()
                    time.sleep(args.settle_s)
                    p50, p99 = latency(cluster, f"{name}-latency", acks, rate, args.latency_s)
                    rounds = [round(r[0]) for r in results[index, name]]
                    rows.append((trees[index][0], name, acks, best[0], best[1], p50, p99, rounds))
            if args.latency_curve:
                latency_curve(args, trees, clusters, configs)
            if args.skip_failover:
                print_rows(rows, rate)
                return
            cluster = clusters[0]
            cluster.create("failover", 1, 3, 2)
            default_failover = failover(cluster, "failover")
        finally:
            for each in clusters:
                each.stop()
        fast = Cluster(Path(tmp) / "fast", args.fast_session_ms)
        (Path(tmp) / "fast").mkdir()
        fast.start()
        try:
            fast.create("failover", 1, 3, 2)
            fast_failover = failover(fast, "failover")
            fast.create("failover-refresh", 1, 3, 2)
            fast_refresh = failover(
                fast,
                "failover-refresh",
                **{"topic.metadata.refresh.interval.ms": args.client_refresh_ms},
            )
            fast.create("failover-josefk", 1, 3, 2)
            fast_josefk = failover_josefk(fast, "failover-josefk")
        finally:
            fast.stop()
    print_rows(rows, rate)
    for label, (acked, named) in (
        ("the default session timeout (6000 ms)", default_failover),
        (f"josefk.etcd.session.timeout.ms={args.fast_session_ms}", fast_failover),
        (
            f"josefk.etcd.session.timeout.ms={args.fast_session_ms} and librdkafka's "
            f"topic.metadata.refresh.interval.ms={args.client_refresh_ms}",
            fast_refresh,
        ),
    ):
        print(
            f"failover with {label}: {acked:.2f} s from SIGKILL to the first acks=all ack, "
            f"{named:.2f} s until Metadata names the new leader"
        )
    print(
        f"failover with josefk.etcd.session.timeout.ms={args.fast_session_ms} and josefk's own "
        f"producer: {fast_josefk:.2f} s from SIGKILL to the first acks=all ack"
    )


def latency_curve(
    args: argparse.Namespace,
    trees: list[tuple[str, Path]],
    clusters: list[Cluster],
    configs: Sequence[tuple[str, int, str, int]],
) -> None:
    """p50/p99 at each load of ``--latency-curve``, lowest first, on a fresh topic per
    tree and configuration: where the tail leaves the target, not just one point."""
    rates = sorted(float(rate) for rate in args.latency_curve.split(","))
    print(f"{'code':12} {'config':6} {'acks':4} " + " ".join(f"{r:>18g}" for r in rates))
    for index, cluster in enumerate(clusters):
        for name, rf, acks, min_isr in configs:
            topic = f"{name}-curve"
            cluster.create(topic, 3, rf, min_isr)
            cells = []
            for rate in rates:
                os.sync()
                time.sleep(args.settle_s)
                cpu0, t0 = cluster.cpu_seconds(), time.perf_counter()
                p50, p99 = latency(cluster, topic, acks, rate, args.latency_s)
                busy = (cluster.cpu_seconds() - cpu0) / (time.perf_counter() - t0) * 100
                cells.append(f"{p50:6.2f}/{p99:6.2f} {busy:3.0f}%")
            print(f"{trees[index][0][:12]:12} {name:6} {acks:4} " + " ".join(cells), flush=True)
    print(
        "(p50/p99 ms of librdkafka's delivery latency at each MB/s, and the three brokers' "
        "CPU over the run, warm-up included, in % of one core)"
    )


def print_rows(rows: list[tuple[Any, ...]], rate: float) -> None:
    print(
        f"{'code':12} {'config':6} {'acks':4} {'MB/s':>7} {'CPU s/GB':>9} "
        f"{'p50 ms':>7} {'p99 ms':>7}  rounds (MB/s); latency at {rate:.1f} MB/s"
    )
    for code, name, acks, mbs, cpu, p50, p99, rounds in rows:
        print(
            f"{code[:12]:12} {name:6} {acks:4} {mbs:7.1f} {cpu:9.2f} {p50:7.2f} {p99:7.2f}  {rounds}"
        )
    for index in range(0, len(rows), 2):
        print(
            f"{rows[index][0]}: RF=3 throughput is {rows[index + 1][3] / rows[index][3] * 100:.0f}% "
            f"of RF=1 (best rounds)"
        )


if __name__ == "__main__":
    main()
