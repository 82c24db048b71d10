"""The broker's fixed cost per partition batch: Produce requests spread over many partitions.

Starts a real ``josefk serve`` (and, with ``--baseline-ref``, the same from a temporary git
worktree of that commit, rounds alternating), creates one topic of ``--partitions``
partitions, then sends pre-encoded Produce requests over one raw socket: each request carries
every partition with one small batch (``--records`` records of ``--size`` bytes, uncompressed,
CreateTime), the shape librdkafka sends when records are spread round robin over thousands
of partitions. The same records then go as one request to a single partition, all in one
batch (the single-partition shape). The figure is the broker's CPU time (utime+stime from
/proc) per partition batch, and per request of the single-partition shape.

    python bench/spread_bench.py --partitions 10000 --requests 20 --baseline-ref main

The client costs almost nothing: the request bytes are built once and sent again (the broker
writes offsets into its own copy, and the CRC does not cover them), so the broker's CPU is
what is measured. Requests go one at a time with ``--window`` in flight. Not a test: nothing
here asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from serve_process import ROOT, ServeProcess, baseline_tree, cpu_seconds

from josefk.protocol.api import decode_response, encode_request
from josefk.protocol.headers import RequestHeader
from josefk.protocol.message_types import ProduceRequest
from josefk.records.builder import BatchBuilder

PRODUCE_VERSION = 9
TOPIC = "spread"


def batch(records: int, size: int) -> bytes:
    builder = BatchBuilder()
    now = int(time.time() * 1000)
    for i in range(records):
        builder.append(None, (b"%08d" % i).ljust(size, b"x"), timestamp=now)
    return bytes(builder.build())


def produce_request(partitions: int, records: bytes, acks: int) -> bytes:
    body = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=i, records=records)
                    for i in range(partitions)
                ],
            )
        ],
    )
    header = RequestHeader(
        request_api_key=0,
        request_api_version=PRODUCE_VERSION,
        correlation_id=1,
        client_id="spread-bench",
    )
    return encode_request(header, body)


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(min(count - len(chunks), 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def _read_response(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    return _recv_exactly(sock, size)


def create_topic(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    future = admin.create_topics(
        [NewTopic(TOPIC, partitions, 1)], operation_timeout=600, request_timeout=600
    )[TOPIC]
    future.result(timeout=600)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        topic = admin.list_topics(timeout=60).topics.get(TOPIC)
        if (
            topic is not None
            and sum(p.leader >= 0 for p in topic.partitions.values()) >= partitions
        ):
            return
        time.sleep(0.2)
    raise RuntimeError("partitions never got leaders")


def send(sock: socket.socket, frame: bytes, count: int, window: int) -> None:
    """Send ``frame`` ``count`` times, ``window`` in flight; the last answer is decoded and
    must hold no error (decoding every one would make the client the bottleneck)."""
    in_flight = 0
    response = b""
    for _ in range(count):
        sock.sendall(frame)
        in_flight += 1
        if in_flight >= window:
            response = _read_response(sock)
            in_flight -= 1
    for _ in range(in_flight):
        response = _read_response(sock)
    _check(response)


def _check(response: bytes) -> None:
    _, body = decode_response(response, 0, PRODUCE_VERSION)
    errors = {p.error_code for t in body.responses for p in t.partition_responses if p.error_code}
    if errors:
        raise RuntimeError(f"produce answered with error codes {sorted(errors)}")


class Attached:
    """A broker started by hand (``--attach``, e.g. under a profiler): not stopped here."""

    def __init__(self, bootstrap: str, pid: int) -> None:
        self.build = bootstrap
        self.pid = pid
        host, port = bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.bootstrap = bootstrap

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        pass


class Broker:
    def __init__(self, root: Path, build: str, tmp: str | None, settings: list[str]) -> None:
        self.build = build
        self.work = Path(tempfile.mkdtemp(prefix="spread-", dir=tmp))
        self.serve = ServeProcess(self.work / "data", settings, root=root)
        self.pid = self.serve.process.pid
        host, port = self.serve.bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.bootstrap = self.serve.bootstrap

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        import shutil

        self.serve.stop()
        shutil.rmtree(self.work, ignore_errors=True)


def measure(
    broker: Broker | Attached, frame: bytes, count: int, window: int, *, warm_up: bool = True
) -> tuple[float, float]:
    """(broker CPU seconds, wall seconds) for ``count`` sends of ``frame``, after one
    unmeasured send on the same connection unless not ``warm_up``."""
    with socket.create_connection(broker.address) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if warm_up:
            send(sock, frame, 1, 1)  # connection set-up
        cpu_before = broker.cpu()
        started = time.perf_counter()
        send(sock, frame, count, window)
        seconds = time.perf_counter() - started
        return broker.cpu() - cpu_before, seconds


@contextlib.contextmanager
def trees(baseline_ref: str | None) -> Iterator[list[tuple[str, Path]]]:
    if baseline_ref is None:
        yield [("this tree", ROOT)]
        return
    with baseline_tree(baseline_ref) as tree:
        yield [("this tree", ROOT), (baseline_ref, tree)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=20, help="spread requests per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=1, help="records per partition batch")
    parser.add_argument("--size", type=int, default=100, help="bytes per record value")
    parser.add_argument("--acks", type=int, default=1)
    parser.add_argument("--window", type=int, default=2, help="requests in flight")
    parser.add_argument(
        "--single-repeat",
        type=int,
        default=10,
        help="the one-partition shape is sent this many times as often (it is cheap)",
    )
    parser.add_argument("--baseline-ref", help="a commit measured beside this tree")
    parser.add_argument("--tmp", default=None, help="where data dirs go")
    parser.add_argument("--set", action="append", default=[], help="broker setting key=value")
    parser.add_argument(
        "--attach", metavar="HOST:PORT", help="measure a running broker instead (with --pid)"
    )
    parser.add_argument("--pid", type=int, help="the --attach broker's process id")
    args = parser.parse_args()

    per_batch = batch(args.records, args.size)
    spread_frame = produce_request(args.partitions, per_batch, args.acks)
    # The same records to one partition: batches of up to 1,000 records (a 1 MB batch would
    # pass max.message.bytes), concatenated in one partition's data.
    total = args.records * args.partitions
    per_single = min(total, 1000)
    single_frame = produce_request(
        1, batch(per_single, args.size) * max(total // per_single, 1), args.acks
    )
    batches = args.requests * args.partitions
    print(
        f"# {args.partitions} partitions x 1 batch of {args.records} x {args.size} B "
        f"({len(per_batch)} B), request {len(spread_frame) / 1e6:.2f} MB, acks={args.acks}",
        file=sys.stderr,
    )
    with trees(None if args.attach else args.baseline_ref) as roots:
        brokers: list[Broker | Attached] = []
        first: dict[str, float] = {}
        try:
            for build, root in roots:
                broker = (
                    Attached(args.attach, args.pid)
                    if args.attach
                    else Broker(root, build, args.tmp, args.set)
                )
                brokers.append(broker)
                if not args.attach:
                    create_topic(broker.bootstrap, args.partitions)
                # Every partition gets its first append (its index files created and
                # mapped) before the measured rounds; measured apart.
                first_cpu, _ = measure(broker, spread_frame, 1, 1, warm_up=False)
                first[broker.build] = first_cpu / args.partitions * 1e6
                print(
                    f"# {broker.build}: first request, first append to every partition: "
                    f"{first_cpu:.2f} CPU s",
                    file=sys.stderr,
                    flush=True,
                )
            spread: dict[str, list[float]] = {b.build: [] for b in brokers}
            single: dict[str, list[float]] = {b.build: [] for b in brokers}
            for round_ in range(args.rounds):
                for broker in brokers:
                    cpu, wall = measure(broker, spread_frame, args.requests, args.window)
                    spread[broker.build].append(cpu / batches * 1e6)
                    cpu1, wall1 = measure(
                        broker, single_frame, args.requests * args.single_repeat, args.window
                    )
                    single[broker.build].append(cpu1 / batches / args.single_repeat * 1e6)
                    print(
                        f"# round {round_} {broker.build}: spread {cpu:.2f} CPU s "
                        f"({wall:.2f} s wall), one partition {cpu1:.2f} CPU s ({wall1:.2f} s wall)",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            for broker in brokers:
                broker.stop()
    print(
        "| build | partitions | records per batch | broker CPU µs per partition batch (spread; "
        "rounds) | first append to a partition, µs | broker CPU µs per same records to one "
        "partition | spread / one partition |"
    )
    print("|---|---|---|---|---|---|---|")
    for build in spread:
        s = statistics.median(spread[build])
        o = statistics.median(single[build])
        rounds = ", ".join(f"{r:.1f}" for r in spread[build])
        print(
            f"| {build} | {args.partitions:,} | {args.records} | {s:.1f} ({rounds}) "
            f"| {first.get(build, float('nan')):.0f} | {o:.1f} | {s / o:.1f}x |"
        )


if __name__ == "__main__":
    main()
