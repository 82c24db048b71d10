"""Cost per byte: the broker's own CPU seconds per GB produced and consumed (issue 34).

Starts a real ``josefk serve`` on a temporary data dir, produces ``--gb`` GB with
confluent-kafka (librdkafka: ``linger.ms=5``, ``batch.size=1 MB``, acks=1 and acks=all,
1 KiB and 100 B records) into a one-partition topic and into a 64-partition topic, and reads
them back with one kcat (librdkafka without per-message Python objects): the one-partition
topic gives one partition per fetch, the 64-partition one many partitions per fetch. For
each it prints MB/s and the broker process's CPU (utime + stime of /proc/<pid>/stat) per GB
moved: the client runs on the same cores, so throughput depends on the machine's load but
the broker's CPU per GB much less.

With ``--baseline-ref REF`` the same measurements run against REF, checked out in a
temporary ``git worktree`` (its C extension built in place), in the same run, the two
brokers alternating round by round. It also prints the machine's floor for the same bytes:
a Python loop receiving them from a socket and ``os.write``-ing them to a file (the least a
broker that writes what it receives can spend), and ``sendfile`` of a file to a socket (the
least a fetch can spend); each measured as the CPU of a child process (``os.wait4``).

    python bench/cost_bench.py --gb 1 --baseline-ref d487483
    python bench/cost_bench.py --quick           # 0.2 GB, one round, for a smoke run

Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from serve_process import ROOT, THROUGHPUT_PRODUCER, ServeProcess, produce_all

PARTITIONS_MANY = 64


def user_system_seconds(pid: int) -> tuple[float, float]:
    """A process's user and system CPU seconds so far (utime, stime of proc(5))."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


@dataclass
class Cost:
    name: str
    nbytes: int
    seconds: float
    cpu_s: float
    user_s: float = 0.0

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / self.seconds / 1e6

    @property
    def cpu_per_gb(self) -> float:
        return self.cpu_s / (self.nbytes / 1e9)

    @property
    def user_per_gb(self) -> float:
        return self.user_s / (self.nbytes / 1e9)


def _spent(before: tuple[float, float], after: tuple[float, float]) -> tuple[float, float]:
    """(total, user) CPU seconds between two ``Broker.cpu`` readings."""
    user = after[0] - before[0]
    return user + after[1] - before[1], user


class Broker(ServeProcess):
    """``josefk serve`` from the source tree ``tree`` (its package first on sys.path)."""

    def __init__(self, tree: Path, data_dir: Path, settings: Sequence[str] = ()) -> None:
        super().__init__(data_dir, settings, root=tree)
        self.data_dir = data_dir
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})

    def cpu(self) -> tuple[float, float]:
        """User and system CPU seconds so far."""
        return user_system_seconds(self.process.pid)


@contextlib.contextmanager
def topic(broker: Broker, name: str, partitions: int) -> Iterator[str]:
    """A topic for one measurement, deleted with its files afterwards so that each one starts
    from the same page cache."""
    new = NewTopic(name, partitions, 1, config={"file.delete.delay.ms": "0"})
    broker.admin.create_topics([new])[name].result(30)
    try:
        yield name
    finally:
        broker.admin.delete_topics([name])[name].result(30)
        deadline = time.monotonic() + 30
        while any(broker.data_dir.glob(f"{name}-*")) and time.monotonic() < deadline:
            time.sleep(0.05)  # the broker removes the renamed directories in the background


def produce(broker: Broker, name: str, nbytes: int, size: int, acks: str) -> Cost:
    errors = 0

    def delivered(err: object, msg: object) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": acks,
            **THROUGHPUT_PRODUCER,
            "delivery.report.only.error": True,
            "on_delivery": delivered,
        }
    )
    value = os.urandom(size)
    producer.produce(name, value)
    producer.flush(30)  # warm-up: connections and metadata are not part of the figure
    count = nbytes // size
    cpu_before, started = broker.cpu(), time.perf_counter()
    produce_all(producer, name, value, count)
    producer.flush(300)
    seconds, (cpu, user) = time.perf_counter() - started, _spent(cpu_before, broker.cpu())
    del producer
    if errors:
        raise RuntimeError(f"{errors} messages were not delivered")
    return Cost(f"produce {size} B acks={acks}", count * size, seconds, cpu, user)


def consume(broker: Broker, name: str, count: int, size: int, partitions: int) -> Cost:
    """Read ``count`` messages of every partition from the start with one kcat."""
    command = [
        "kcat",
        "-b",
        broker.bootstrap,
        "-C",
        "-t",
        name,
        "-o",
        "beginning",
        "-e",
        "-q",
        "-c",
        str(count),
        "-f",
        "%s",
        "-X",
        "fetch.max.bytes=52428800",
        "-X",
        "max.partition.fetch.bytes=10485760",
        "-X",
        "queued.max.messages.kbytes=1000000",
    ]
    # Warm-up: the first Fetch a broker answers compiles the response's encoder (~50-100 ms
    # of CPU once per process), which is not a cost per byte.
    warm_up = [*command]
    warm_up[warm_up.index("-c") + 1] = "1"
    subprocess.run(warm_up, stdout=subprocess.DEVNULL, check=True)
    cpu_before, started = broker.cpu(), time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
    seconds, (cpu, user) = time.perf_counter() - started, _spent(cpu_before, broker.cpu())
    what = "1 partition" if partitions == 1 else f"{partitions} partitions"
    return Cost(f"consume {size} B, {what}", count * size, seconds, cpu, user)


def produce_frames(broker: Broker, name: str, nbytes: int, size: int) -> Cost:
    """Pipelined Produce requests (v9, acks=1) of one ~1 MB batch of ``size``-byte records
    each, built once and sent over one socket with up to 8 unanswered: what the broker costs
    per GB when every request is as large as librdkafka's ``batch.size`` allows, whatever
    the client's own speed (a Python producer of 100 B records on these cores sends
    100-300 KB requests, and the broker's cost per request then dominates)."""
    from storage_bench import template_batch

    from josefk.protocol.api import ApiKey, encode_request, request_class
    from josefk.protocol.headers import RequestHeader

    batch = bytes(template_batch(1_000_000, size))
    request = request_class(ApiKey.PRODUCE)
    topic_data = request.TopicProduceData
    partition = topic_data.PartitionProduceData(index=0, records=batch)
    body = request(
        transactional_id=None,
        acks=1,
        timeout_ms=30_000,
        topic_data=[topic_data(name=name, partition_data=[partition])],
    )
    header = RequestHeader(
        request_api_key=ApiKey.PRODUCE,
        request_api_version=9,
        correlation_id=1,
        client_id="cost-bench",
    )
    frame = encode_request(header, body)
    count = max(1, nbytes // len(batch))
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        answered = 0

        def read_answers() -> None:
            nonlocal answered
            pending = b""
            while answered < count + 1:
                data = sock.recv(1 << 16)
                if not data:
                    return
                pending += data
                while len(pending) >= 4:
                    length = int.from_bytes(pending[:4], "big")
                    if len(pending) < 4 + length:
                        break
                    pending = pending[4 + length :]
                    answered += 1

        reader = threading.Thread(target=read_answers, name="answers")
        reader.start()
        sock.sendall(frame)  # warm-up: the topic's first segment, the codecs
        while answered < 1 and reader.is_alive():
            time.sleep(0.001)
        cpu_before, started = broker.cpu(), time.perf_counter()
        for sent in range(count):
            sock.sendall(frame)
            while sent - (answered - 1) >= 8 and reader.is_alive():
                time.sleep(0.0002)  # at most 8 requests in flight, as librdkafka's default 5
        reader.join(timeout=300)
        seconds, (cpu, user) = time.perf_counter() - started, _spent(cpu_before, broker.cpu())
    if answered < count + 1:
        raise RuntimeError(f"{count + 1 - answered} produce requests were not answered")
    return Cost(
        f"produce {size} B, 1 MB requests (raw frames)", count * len(batch), seconds, cpu, user
    )


def _child_cpu(pid: int) -> tuple[float, float]:
    """(total, user) CPU seconds of a child once it has exited."""
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        raise RuntimeError(f"child exited with {status}")
    return usage.ru_utime + usage.ru_stime, usage.ru_utime


_RECEIVE_AND_WRITE = """
import os, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
buf = bytearray(1 << 20)
view = memoryview(buf)
while True:
    n = sock.recv_into(buf)
    if not n:
        break
    os.write(fd, view[:n])
os.close(fd)
"""


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of a TCP connection on loopback, as between a client and the broker."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        ours = socket.create_connection(server.getsockname())
        theirs, _ = server.accept()
    return ours, theirs


def floor_receive_write(path: Path, nbytes: int) -> Cost:
    """A Python process receiving ``nbytes`` from a TCP socket and ``os.write``-ing them to
    a file: its CPU is the floor of a broker that stores what it receives."""
    ours, theirs = _tcp_pair()
    chunk = os.urandom(1 << 20)
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", _RECEIVE_AND_WRITE, str(theirs.fileno()), str(path)],
        pass_fds=(theirs.fileno(),),
    )
    theirs.close()
    sent = 0
    while sent < nbytes:
        ours.sendall(chunk)
        sent += len(chunk)
    ours.close()
    cpu, user = _child_cpu(child.pid)
    child.returncode = 0
    seconds = time.perf_counter() - started
    path.unlink()
    return Cost("floor: recv_into + os.write (Python)", sent, seconds, cpu, user)


_SENDFILE = """
import os, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
fd = os.open(sys.argv[2], os.O_RDONLY)
size = os.fstat(fd).st_size
offset = 0
while offset < size:
    offset += os.sendfile(sock.fileno(), fd, offset, min(size - offset, 10 << 20))
os.close(fd)
sock.close()
"""


def floor_sendfile(path: Path, nbytes: int) -> Cost:
    """``sendfile`` of a file in the page cache to a socket, 10 MiB per call: the floor of
    a fetch (the reader here just drains the TCP socket)."""
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as out:
        for _ in range(nbytes >> 20):
            out.write(chunk)
    ours, theirs = _tcp_pair()
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", _SENDFILE, str(theirs.fileno()), str(path)],
        pass_fds=(theirs.fileno(),),
    )
    theirs.close()
    buf = bytearray(1 << 20)
    got = 0
    while n := ours.recv_into(buf):
        got += n
    ours.close()
    cpu, user = _child_cpu(child.pid)
    child.returncode = 0
    seconds = time.perf_counter() - started
    path.unlink()
    return Cost("floor: sendfile", got, seconds, cpu, user)


def baseline_tree(ref: str, where: Path) -> Path:
    """``ref`` checked out in a temporary git worktree, its C extensions built in place
    (compiled directly: an older pyproject.toml may not pass today's setuptools checks)."""
    tree = where / "baseline"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(tree), ref],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for source in sorted(tree.glob("josefk/*/_c*.c")):
        target = source.with_name(source.stem + suffix)
        command = ["cc", "-O3", "-fPIC", "-shared", f"-I{include}", str(source), "-o", str(target)]
        subprocess.run(command, check=True)
    return tree


def measure(
    tree: Path, data_dir: Path, nbytes: int, sizes: list[int], tag: str, *, raw_only: bool
) -> list[Cost]:
    broker = Broker(tree, data_dir)
    results: list[Cost] = []

    def report(cost: Cost) -> None:
        results.append(cost)
        print(
            f"[{tag}] {cost.name}: {cost.mb_per_s:,.1f} MB/s, "
            f"broker CPU {cost.cpu_per_gb:.3f} s/GB (user {cost.user_per_gb:.3f})",
            flush=True,
        )

    try:
        for size in sizes:
            with topic(broker, f"cost-raw-{size}", 1) as name:
                report(produce_frames(broker, name, nbytes, size))
        if raw_only:
            return results
        for size in sizes:
            for acks in ("1", "all"):
                with topic(broker, f"cost-{size}-{acks}", 1) as name:
                    report(produce(broker, name, nbytes, size, acks))
                    if acks == "1":
                        report(consume(broker, name, nbytes // size, size, 1))
        with topic(broker, "cost-many", PARTITIONS_MANY) as name:
            produced = produce(broker, name, nbytes, 1024, "1")
            produced.name += f", {PARTITIONS_MANY} partitions"
            report(produced)
            report(consume(broker, name, nbytes // 1024, 1024, PARTITIONS_MANY))
    finally:
        broker.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=1.0, help="GB per measurement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sizes", default="1024,100", help="record sizes, comma-separated")
    parser.add_argument("--baseline-ref", help="git ref to measure alongside, e.g. main")
    parser.add_argument(
        "--raw-only", action="store_true", help="only the pipelined 1 MB requests, no librdkafka"
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.gb, args.rounds = 0.2, 1
    nbytes = int(args.gb * 1e9)
    sizes = [int(s) for s in args.sizes.split(",")]
    where = Path(tempfile.mkdtemp(prefix="josefk-cost-"))
    trees = {"this": ROOT}
    try:
        if args.baseline_ref:
            trees = {"base": baseline_tree(args.baseline_ref, where), "this": ROOT}
        results: dict[str, dict[str, list[Cost]]] = {tag: {} for tag in trees}
        floors: dict[str, list[Cost]] = {}
        for n in range(args.rounds):
            order = list(trees.items())
            if n % 2:
                order.reverse()
            for tag, tree in order:
                data_dir = where / f"data-{tag}-{n}"
                for cost in measure(tree, data_dir, nbytes, sizes, tag, raw_only=args.raw_only):
                    results[tag].setdefault(cost.name, []).append(cost)
                shutil.rmtree(data_dir, ignore_errors=True)
            for floor in (floor_receive_write, floor_sendfile):
                cost = floor(where / "floor", nbytes)
                floors.setdefault(cost.name, []).append(cost)
                print(
                    f"{cost.name}: {cost.mb_per_s:,.1f} MB/s, CPU {cost.cpu_per_gb:.3f} s/GB "
                    f"(user {cost.user_per_gb:.3f})"
                )
        print(
            f"\n{args.gb:g} GB per measurement, {args.rounds} rounds: median broker CPU s/GB "
            "(the lower one of an even count), its user part and MB/s; then every round's\n"
        )
        tags = list(trees)
        print("| measurement | " + " | ".join(tags) + " |")
        print("| --- |" + " ---: |" * len(tags))
        for name in results[tags[-1]]:
            cells = []
            for tag in tags:
                runs = sorted(results[tag].get(name, []), key=lambda c: c.cpu_per_gb)
                if not runs:
                    cells.append("-")
                    continue
                mid = runs[(len(runs) - 1) // 2]
                each = " / ".join(f"{c.cpu_per_gb:.2f}" for c in runs)
                cells.append(
                    f"{mid.cpu_per_gb:.2f}, user {mid.user_per_gb:.2f} "
                    f"({mid.mb_per_s:,.0f} MB/s; {each})"
                )
            print(f"| {name} | " + " | ".join(cells) + " |")
        for name, runs in floors.items():
            runs.sort(key=lambda c: c.cpu_per_gb)
            mid = runs[(len(runs) - 1) // 2]
            print(
                f"| {name} | {mid.cpu_per_gb:.2f}, user {mid.user_per_gb:.2f} "
                f"({mid.mb_per_s:,.0f} MB/s) |"
            )
    finally:
        if "base" in trees:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(trees["base"])],
                cwd=ROOT,
                check=False,
            )
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    threading.current_thread().name = "cost-bench"
    main()
