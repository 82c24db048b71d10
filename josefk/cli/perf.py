"""``josefk perf produce|consume|end-to-end``: quick throughput and latency figures against a
broker.

Owns the load loops and their report: records/s, MB/s and, for produce, the latency of each
record from ``send`` to its acknowledgement (p50/p95/p99/max), with a live rich progress bar
on stderr; produce takes a rate cap (``--throughput``) and values from a file
(``--payload-file``), consume reads as a group member (``--group``), and end-to-end times
each record from send to a consumer's receipt. For the project's recorded benchmarks see bench/; this verb is for a person
sizing up a running broker. A missing topic is created for ``perf produce`` (broker
defaults or ``--partitions``).
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import random
import time
from dataclasses import dataclass
from typing import Any

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from josefk.cli.common import (
    CliError,
    admin_for,
    bootstrap_option,
    client_settings,
    describe_error,
    describe_existing_topics,
    json_option,
    resolve_bootstrap,
    run,
)
from josefk.cli.completion import complete_topics
from josefk.cli.output import human_bytes, note, print_fields, print_json, stderr_console
from josefk.cli.produce import COMPRESSIONS
from josefk.client import AIOConsumer, AIOProducer, RecordMetadata, TopicPartition
from josefk.client.errors import KafkaError, UnknownTopicOrPartitionError

_PROGRESS_EVERY = 1_000
_MB = 1_000_000


@click.group("perf", short_help="Measure produce and consume throughput and latency.")
def perf() -> None:
    """Measure produce and consume throughput (and produce latency) against a broker."""


def _progress(total: int, label: str, *, disable: bool) -> Progress:
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=stderr_console(),
        disable=disable,
        transient=True,
    )


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (0.0 for an empty one)."""
    if not sorted_values:
        return 0.0
    # ceil(p * n) is the 1-based rank; the epsilon keeps 0.99 * 100 (99.00000000000001) at 99.
    rank = math.ceil(fraction * len(sorted_values) - 1e-9)
    return sorted_values[max(0, min(len(sorted_values), rank) - 1)]


@dataclass(frozen=True, slots=True)
class PerfResult:
    records: int
    bytes: int
    seconds: float
    latencies_ms: list[float]

    def as_dict(self) -> dict[str, Any]:
        seconds = max(self.seconds, 1e-9)
        out: dict[str, Any] = {
            "records": self.records,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 6),
            "records_per_second": round(self.records / seconds, 1),
            "mb_per_second": round(self.bytes / seconds / _MB, 3),
        }
        if self.latencies_ms:
            ordered = sorted(self.latencies_ms)
            out["latency_ms"] = {
                "p50": round(percentile(ordered, 0.50), 3),
                "p95": round(percentile(ordered, 0.95), 3),
                "p99": round(percentile(ordered, 0.99), 3),
                "max": round(ordered[-1], 3),
            }
        return out


def _report(
    kind: str, topic: str, result: PerfResult, as_json: bool, extra: dict[str, Any]
) -> None:
    data = {"kind": kind, "topic": topic, **extra, **result.as_dict()}
    if as_json:
        print_json(data)
        return
    pairs: list[tuple[str, Any]] = [
        ("records", data["records"]),
        ("bytes", f"{data['bytes']} ({human_bytes(data['bytes'])})"),
        ("seconds", f"{data['seconds']:.3f}"),
        ("records/s", f"{data['records_per_second']:,.0f}"),
        ("MB/s", f"{data['mb_per_second']:.2f}"),
    ]
    if "latency_ms" in data:
        lat = data["latency_ms"]
        pairs.append(
            (
                "latency ms",
                f"p50 {lat['p50']}  p95 {lat['p95']}  p99 {lat['p99']}  max {lat['max']}",
            )
        )
    print_fields(pairs)


@perf.command("produce", short_help="Produce N records of a given size; rate and latency.")
@click.argument("topic", shell_complete=complete_topics)
@click.option("-n", "--count", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option(
    "-s", "--size", type=click.IntRange(min=0), default=100, show_default=True, help="Value bytes."
)
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.option(
    "-z", "--compression", type=click.Choice(COMPRESSIONS), default="none", show_default=True
)
@click.option("--batch-size", type=click.IntRange(min=1), default=65_536, show_default=True)
@click.option("--linger-ms", type=click.FloatRange(min=0), default=5.0, show_default=True)
@click.option(
    "--partitions", type=click.IntRange(min=1), help="Partitions if the topic must be created."
)
@click.option(
    "--throughput",
    type=click.FloatRange(min=0, min_open=True),
    metavar="N",
    help="At most N records a second (default: as fast as the broker takes them), as "
    "kafka-producer-perf-test.sh --throughput.",
)
@click.option(
    "--payload-file",
    type=click.Path(exists=True, dir_okay=False),
    help="Values are this file's lines, picked at random (as kafka-producer-perf-test.sh); "
    "--size is then ignored.",
)
@bootstrap_option
@json_option
def perf_produce(
    topic: str,
    count: int,
    size: int,
    acks: str,
    compression: str,
    batch_size: int,
    linger_ms: float,
    partitions: int | None,
    throughput: float | None,
    payload_file: str | None,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Produce --count records of --size random bytes to TOPIC and report records/s, MB/s
    and the send-to-acknowledgement latency percentiles."""
    server = resolve_bootstrap(bootstrap)
    # One random value for all records: compression ratios stay honest (random bytes) and
    # generating data is kept out of the measurement.
    value = os.urandom(size)
    payloads: list[bytes] = []
    if payload_file is not None:
        with open(payload_file, "rb") as file:
            payloads = [line for line in file.read().split(b"\n") if line]
        if not payloads:
            raise click.BadParameter(f"{payload_file} has no lines", param_hint="--payload-file")
    pick = random.Random(0).choice

    async def go() -> PerfResult:
        async with admin_for(server) as admin:
            try:
                await admin.describe_topics([topic])
            except UnknownTopicOrPartitionError:
                await admin.create_topic(topic, partitions or -1)
                if not as_json:
                    note(f"created topic {topic}")
        latencies: list[float] = []
        clock = time.perf_counter
        with _progress(count, f"produce {topic}", disable=as_json) as progress:
            task = progress.add_task("produce", total=count)
            async with AIOProducer(
                bootstrap_servers=server,
                **client_settings(),
                client_id="josefk-perf",
                acks=acks,
                compression_type=compression,
                batch_size=batch_size,
                linger_ms=linger_ms,
                allow_auto_create_topics=False,
            ) as producer:
                await producer.partitions_for(topic)
                record_latency = latencies.append
                errors: list[BaseException] = []

                def done(sent_at: float, future: asyncio.Future[RecordMetadata]) -> None:
                    error = future.exception()
                    if error is not None:
                        errors.append(error)
                        return
                    record_latency((clock() - sent_at) * 1000.0)
                    # Acknowledgements drive the bar, so it moves during the final flush.
                    if len(latencies) % _PROGRESS_EVERY == 0:
                        progress.update(task, completed=len(latencies))

                started = clock()
                sent_bytes = 0
                for n in range(count):
                    if throughput is not None:
                        # Pace to the cap: record n is due n/N seconds after the start.
                        ahead = started + n / throughput - clock()
                        if ahead > 0:
                            await asyncio.sleep(ahead)
                    record_value = pick(payloads) if payloads else value
                    sent_bytes += len(record_value)
                    future = await producer.send(topic, record_value)
                    # No future is kept: a long run must not hold one object per record.
                    future.add_done_callback(functools.partial(done, clock()))
                    if n % _PROGRESS_EVERY == 0:
                        # Let the sender and the callbacks run: send() only yields when the
                        # producer's buffer is full.
                        await asyncio.sleep(0)
                await producer.flush()
                elapsed = clock() - started
                progress.update(task, completed=len(latencies))
        if errors:
            first = errors[0]
            raise CliError(
                f"{len(errors)} of {count} records not delivered: "
                + (describe_error(first) if isinstance(first, KafkaError) else str(first))
            )
        return PerfResult(count, sent_bytes, elapsed, latencies)

    result = run(go(), bootstrap=server)
    extra: dict[str, Any] = {"size": size, "acks": acks, "compression": compression}
    if throughput is not None:
        extra["throughput_cap"] = throughput
    if payload_file is not None:
        extra["payload_file"] = payload_file
    _report("produce", topic, result, as_json, extra)


@perf.command("consume", short_help="Read N records from the beginning; rate.")
@click.argument("topic", shell_complete=complete_topics)
@click.option("-n", "--count", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Stop after this many seconds without a record.",
)
@click.option(
    "-g",
    "--group",
    help="Read as a member of this consumer group, from its committed offsets (else the "
    "beginning), committing as it goes: the rate a group consumer gets, rebalance included.",
)
@bootstrap_option
@json_option
def perf_consume(
    topic: str,
    count: int,
    idle_timeout: float,
    group: str | None,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Read up to --count records of TOPIC from the beginning of every partition (or as a
    --group member) and report records/s and MB/s (keys and values)."""
    server = resolve_bootstrap(bootstrap)
    group_settings: dict[str, Any] = {}
    if group is not None:
        group_settings = {
            "group_id": group,
            "enable_auto_commit": True,
            "auto_offset_reset": "earliest",
        }

    async def go() -> PerfResult:
        async with admin_for(server) as admin:
            (description,) = await describe_existing_topics(admin, [topic])
        tps = [TopicPartition(topic, p.partition) for p in description.partitions]
        consumed = size = 0
        clock = time.perf_counter
        with _progress(count, f"consume {topic}", disable=as_json) as progress:
            task = progress.add_task("consume", total=count)
            async with AIOConsumer(
                bootstrap_servers=server,
                **client_settings(),
                client_id="josefk-perf",
                allow_auto_create_topics=False,
                max_poll_records=10_000,
                **group_settings,
            ) as consumer:
                if group is not None:
                    consumer.subscribe([topic])
                else:
                    consumer.assign(tps)
                    consumer.seek_to_beginning(*tps)
                started = last = clock()
                while consumed < count:
                    batches = await consumer.getmany(
                        timeout_ms=200, max_records=min(10_000, count - consumed)
                    )
                    if not batches:
                        if clock() - last >= idle_timeout:
                            break
                        continue
                    last = clock()
                    for records in batches.values():
                        consumed += len(records)
                        for r in records:
                            size += len(r.value or b"") + len(r.key or b"")
                    progress.update(task, completed=consumed)
                # An idle wait at the end is not reading time.
                elapsed = (last if consumed < count else clock()) - started
        if consumed < count and not as_json:
            note(f"only {consumed} of {count} records before {idle_timeout:g}s without one")
        return PerfResult(consumed, size, elapsed, [])

    result = run(go(), bootstrap=server)
    _report("consume", topic, result, as_json, {"group": group} if group else {})


@perf.command("end-to-end", short_help="Latency from send to a consumer's receipt.")
@click.argument("topic", shell_complete=complete_topics)
@click.option("-n", "--count", type=click.IntRange(min=1), default=1_000, show_default=True)
@click.option(
    "-s", "--size", type=click.IntRange(min=0), default=100, show_default=True, help="Value bytes."
)
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@bootstrap_option
@json_option
def perf_end_to_end(
    topic: str, count: int, size: int, acks: str, bootstrap: str | None, as_json: bool
) -> None:
    """Send one record at a time to TOPIC and wait until a consumer reads it back: the
    end-to-end latency percentiles (as Kafka's EndToEndLatency tool). Records go to
    partition 0; create TOPIC first or it is created with the broker's defaults."""
    server = resolve_bootstrap(bootstrap)
    value = os.urandom(size)

    async def go() -> PerfResult:
        async with admin_for(server) as admin:
            try:
                await admin.describe_topics([topic])
            except UnknownTopicOrPartitionError:
                await admin.create_topic(topic, -1)
        tp = TopicPartition(topic, 0)
        latencies: list[float] = []
        clock = time.perf_counter
        async with (
            AIOProducer(
                bootstrap_servers=server,
                **client_settings(),
                client_id="josefk-perf",
                acks=acks,
                linger_ms=0,
                allow_auto_create_topics=False,
            ) as producer,
            AIOConsumer(
                bootstrap_servers=server,
                **client_settings(),
                client_id="josefk-perf",
                allow_auto_create_topics=False,
                fetch_max_wait_ms=100,
            ) as consumer,
        ):
            await producer.partitions_for(topic)
            consumer.assign([tp])
            consumer.seek_to_end(tp)
            await consumer.position(tp)
            started = clock()
            for n in range(count):
                sent_at = clock()
                await producer.send(topic, value, str(n).encode(), partition=0)
                while True:
                    record = await asyncio.wait_for(consumer.getone(), timeout=30)
                    if record.key == str(n).encode():
                        break
                latencies.append((clock() - sent_at) * 1000.0)
            elapsed = clock() - started
        return PerfResult(count, count * size, elapsed, latencies)

    result = run(go(), bootstrap=server)
    _report("end-to-end", topic, result, as_json, {"size": size, "acks": acks})
