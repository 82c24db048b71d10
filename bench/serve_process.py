"""A ``josefk serve`` process for benchmarks: started on a free port, stopped with SIGTERM;
and what the benchmarks measure it with alike: a process's CPU seconds (``cpu_seconds``) and
a producer set for throughput (``THROUGHPUT_PRODUCER``) and kept full (``produce_all``), a partition read from its start (``fetch_all``),
and the machine's memory warmed before measuring (``warm_memory``).

The benchmarks import it as a sibling module (they run as scripts from bench/).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class ServeProcess:
    """Waits for the broker's one ready line on stdout, then knows its bootstrap address."""

    def __init__(self, data_dir: Path, settings: Sequence[str] = (), root: Path = ROOT) -> None:
        """``settings``: ``key=value`` broker settings (``--set``). ``ready_s`` is the time
        from starting the process to its ready line (the broker's start-up). ``root``: the
        source tree whose josefk runs (a baseline's worktree, see ``baseline_tree``)."""
        started = time.perf_counter()
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
            text=True,
            cwd=root,
            env=dict(os.environ, PYTHONPATH=str(root)),
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        self.ready_s = time.perf_counter() - started
        match = re.search(r"listening on \w+://([^:]+):(\d+)", line)
        if not match:
            raise RuntimeError(f"broker did not start: {line!r}")
        self.bootstrap = f"{match.group(1)}:{match.group(2)}"

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)


@contextlib.contextmanager
def baseline_tree(ref: str) -> Iterator[Path]:
    """``ref`` checked out in a temporary detached ``git worktree`` with its C extensions
    built in place (compiled directly with this Python's compiler settings: ``setup.py``
    would need a setuptools that reads the tree's pyproject), removed afterwards. Benchmarks
    run the baseline from it beside the current tree in the same run."""
    where = Path(tempfile.mkdtemp(prefix="josefk-baseline-"))
    tree = where / "tree"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(tree), ref],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        config = sysconfig.get_config_vars()
        suffix = config["EXT_SUFFIX"]
        for source in sorted(tree.glob("josefk/**/_c*.c")):
            subprocess.run(
                [
                    *shlex.split(config["CC"]),
                    *shlex.split(config["CFLAGS"]),
                    *shlex.split(config["CCSHARED"]),
                    f"-I{sysconfig.get_paths()['include']}",
                    str(source),
                    *shlex.split(config["LDSHARED"])[1:],
                    "-o",
                    str(source.with_suffix("")) + suffix,
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        yield tree
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(tree)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        shutil.rmtree(where, ignore_errors=True)


# confluent-kafka producer settings for throughput: big batches after 5 ms, no idempotence.
THROUGHPUT_PRODUCER: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    # The client holds at most 32 MiB of unsent messages, the Java producer's default
    # buffer.memory. A 2 GB queue let it pile up ~1 GB of messages whose heap pages the kernel
    # had to fault in afresh (1-3 s of the client's system time per GB on this VM) and took
    # that CPU from the broker on the same two cores.
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 32 * 1024,
    "enable.idempotence": False,
}


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used so far (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime, fields 14 and 15 of proc(5), counted after the command name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_all(producer: Any, topic: str, value: bytes, count: int) -> None:
    """Queue ``count`` copies of ``value`` as fast as the confluent-kafka ``producer`` takes
    them: a full queue is served (delivery reports) until it has room again."""
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.001)


def fetch_all(bootstrap: str, topic: str, count: int, **settings: Any) -> tuple[int, float]:
    """Read ``count`` messages of ``topic``'s partition 0 from its start with a confluent-kafka
    consumer tuned for throughput: how many it read and the seconds it took."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.max.messages.kbytes": 1_000_000,
            **settings,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    while got < count:
        got += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
    seconds = time.perf_counter() - started
    consumer.close()
    return got, seconds


def warm_memory(directory: Path, gigabytes: float) -> None:
    """Write and delete ``gigabytes`` of file data before measuring. On a virtual machine
    whose memory the host backs on first touch, the first write into a page of memory costs
    several times what a later one does (seen here: 3 GB written to the page cache took 7.6 s
    of system CPU the first time, 0.65 s the third), and RF=3 writes three times the data:
    without this the bench measures the host's memory faults, not the broker. A broker that
    keeps up with retention writes into pages it recycles, the warm case."""
    chunk = b"\0" * (1 << 20)
    path = directory / "warm-up"
    with path.open("wb") as out:
        for _ in range(int(gigabytes * 1024)):
            out.write(chunk)
    path.unlink()
