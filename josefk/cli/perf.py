"""``josefk perf produce|consume|end-to-end``: quick throughput and latency figures against a
broker.

Owns the load loops and their report: records/s, MB/s and, for produce, the latency of each
record from ``send`` to its acknowledgement (p50/p95/p99/max), with a live rich progress bar
on stderr; produce takes a rate cap (``--throughput``) and values from a file
(``--payload-file``), consume reads as a group member (``--group``), and end-to-end times
each record from send to a consumer's receipt. For the project's recorded benchmarks see
bench/; this verb is for a person sizing up a running broker. A missing topic is created for
``perf produce`` (broker defaults or ``--partitions``).

``perf produce`` also reports what can be checked against the broker: the records that landed
in the topic's log (log end offsets before and after, ListOffsets), the Produce requests the
producer sent with their latency from write to response, and with ``--broker-metrics URL``
the broker's own counters over the run, read from its Prometheus endpoint (records and bytes
in, Produce requests and their TotalTimeMs). It runs on uvloop when installed, as the broker
does. Imports josefk.client and josefk.cli helpers only (urllib for the metrics scrape).
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import re
import time
import urllib.request
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
from josefk.client import AIOConsumer, AIOProducer, TopicPartition
from josefk.client.errors import KafkaError, UnknownTopicOrPartitionError

_YIELD_EVERY = 100  # records; about half a millisecond of sending at 1 KiB
_MB = 1_000_000
T = TypeVar("T")


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


def _latency_summary(values_ms: list[float]) -> dict[str, float]:
    ordered = sorted(values_ms)
    return {
        "p50": round(percentile(ordered, 0.50), 3),
        "p95": round(percentile(ordered, 0.95), 3),
        "p99": round(percentile(ordered, 0.99), 3),
        "max": round(ordered[-1], 3),
    }


@dataclass(frozen=True, slots=True)
class PerfResult:
    records: int
    bytes: int
    seconds: float
    # Not in the repr: asyncio formats the task holding this result when it restores the
    # SIGINT handler, and a million floats took a second of the tool's exit.
    latencies_ms: list[float] = field(repr=False)
    # produce only: what to check against the broker (see perf produce --help)
    checks: dict[str, Any] = field(default_factory=dict)

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
            out["latency_ms"] = _latency_summary(self.latencies_ms)
        out.update(self.checks)
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
    if "requests" in data:
        req = data["requests"]
        line = f"{req['count']} Produce, {human_bytes(req['bytes'])} of batches"
        if "latency_ms" in req:
            lat = req["latency_ms"]
            line += f"; ms mean {req['mean_ms']}  p50 {lat['p50']}  p99 {lat['p99']}"
        pairs.append(("requests", line))
    if "landed" in data:
        pairs.append(("landed in log", f"{data['landed']} records (log end offsets)"))
    if "broker" in data:
        b = data["broker"]
        pairs.append(
            (
                "broker saw",
                f"{b['messages_in']} records, {human_bytes(b['bytes_in'])} "
                f"({b['mb_per_second']:.2f} MB/s), {b['produce_requests']} Produce, "
                f"TotalTimeMs mean {b['total_time_ms_mean']}"
                + (
                    f"  p50 {b['total_time_ms_p50']}  p99 {b['total_time_ms_p99']}"
                    if "total_time_ms_p50" in b
                    else ""
                ),
            )
        )
    print_fields(pairs)


def _run_fast(coro: Coroutine[Any, Any, T], *, bootstrap: str) -> T:
    """``run`` on uvloop when it is installed (as the broker runs): the client's own cost
    is part of what perf measures, and a user's production loop is likely uvloop too."""
    try:
        import uvloop
    except ImportError:
        return run(coro, bootstrap=bootstrap)
    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        return run(coro, bootstrap=bootstrap)
    finally:
        asyncio.set_event_loop_policy(previous)


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape_metrics(url: str) -> Samples:
    """The samples of a Prometheus text endpoint: (name, labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return parse_metrics(response.read().decode())


def parse_metrics(text: str) -> Samples:
    """Prometheus text exposition: (name, labels) -> value; comments skipped."""
    samples: Samples = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            labels = frozenset(_LABEL.findall(match.group(2) or ""))
            samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def broker_view(before: Samples, after: Samples, topic: str, seconds: float) -> dict[str, Any]:
    """What the broker's metrics say happened between two scrapes, for ``topic``'s records
    and for Produce requests (all topics: the run's own when nothing else produces)."""

    def delta(name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        return after.get(key, 0.0) - before.get(key, 0.0)

    count = delta("kafka_network_requestmetrics_totaltimems_count", request="Produce")
    total = delta("kafka_network_requestmetrics_totaltimems_sum", request="Produce")
    bytes_in = delta("kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    view: dict[str, Any] = {
        "messages_in": int(delta("kafka_server_brokertopicmetrics_messagesin_total", topic=topic)),
        "bytes_in": int(bytes_in),
        "mb_per_second": round(bytes_in / max(seconds, 1e-9) / _MB, 3),
        "produce_requests": int(count),
        "total_time_ms_mean": round(total / count, 3) if count else 0.0,
    }
    for (name, labels), value in after.items():
        if name != "kafka_network_requestmetrics_totaltimems":
            continue
        found = dict(labels)
        if found.get("request") != "Produce":
            continue
        quantile = float(found.get("quantile", "nan"))
        if quantile == 0.5:
            view["total_time_ms_p50"] = round(value, 3)
        elif quantile == 0.99:
            view["total_time_ms_p99"] = round(value, 3)
    return view


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
@click.option(
    "--broker-metrics",
    metavar="URL",
    help="The broker's Prometheus endpoint (josefk serve --metrics-port; e.g. "
    "http://127.0.0.1:9404/metrics): read before and after the run, and the broker's view "
    "reported beside the producer's.",
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
    broker_metrics: str | None,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Produce --count records of --size random bytes to TOPIC and report records/s, MB/s
    and the send-to-acknowledgement latency percentiles.

    \b
    What is measured:
    - seconds: from the first send to the end of the final flush (every record acked);
      MB/s counts values only (no keys, no batch overhead).
    - latency: per record, from send() to its acknowledgement (DeliveryFuture.latency(),
      taken when the producer handles the response, before any callback). It includes
      the wait in the producer's buffer: when records are offered faster than the broker
      takes them (no --throughput), most of it is queueing, as in
      kafka-producer-perf-test.sh. Cap the rate below the maximum to see the linger and
      the request latency alone.
    - requests: the Produce requests the producer sent, their bytes of record batches,
      and each one's time from being written to its response being read.
    - landed in log: the records the topic's log end offsets grew by (ListOffsets before
      and after): must equal the records sent, unless others produce to the topic.

    \b
    Checking against the broker:
    - --broker-metrics URL reads the broker's Prometheus endpoint before and after and
      prints the broker's view: records and bytes in for TOPIC
      (kafka_server_brokertopicmetrics_messagesin_total / bytesin_total; bytes in counts
      whole batches, so it exceeds the value bytes by the record and batch overhead, and
      its MB/s is over perf's own seconds; it equals the requests' bytes above), the
      Produce requests it answered and their TotalTimeMs (kafka_network_requestmetrics_
      totaltimems: mean over the run, p50/p99 over the broker's latest 1028 requests).
      The producer's request latency is the broker's TotalTimeMs plus the network and the
      client's own event loop; the broker's request count and the producer's agree when
      nothing else produces meanwhile.
    - Without it, scrape the same series yourself (curl URL | grep -E
      'messagesin|bytesin|totaltimems.*Produce') before and after a run.
    """
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
                partition_ids = await producer.partitions_for(topic)
                tps = [TopicPartition(topic, p) for p in partition_ids]
                async with admin_for(server) as admin:
                    before_offsets = await _log_end_offsets(admin, tps)
                before_metrics = scrape_metrics(broker_metrics) if broker_metrics else None
                errors: list[BaseException] = []
                request_ms: list[float] = []
                metrics = producer.request_metrics
                metrics.on_request = lambda seconds: request_ms.append(seconds * 1000.0)
                requests_before = (metrics.requests, metrics.request_bytes)

                # Each record's latency (send to acknowledgement, as DeliveryFuture.latency()
                # gives it) comes with its batch's outcome: no handle kept per record (that
                # bookkeeping was a quarter of perf's own time).
                def settled(seconds: list[float], error: BaseException | None) -> None:
                    if error is not None:
                        errors.extend([error] * len(seconds))
                    else:
                        latencies.extend([s * 1000.0 for s in seconds])
                    progress.update(task, completed=len(latencies) + len(errors))

                metrics.on_records = settled
                send_nowait = producer.send_nowait
                started = clock()
                sent_bytes = 0
                for n in range(count):
                    if throughput is not None:
                        # Pace to the cap: record n is due n/N seconds after the start.
                        # A millisecond more: the loop's timers round to milliseconds and
                        # may fire a little before the time asked for. Due times are from
                        # the start, so the extra does not add up.
                        ahead = started + n / throughput - clock()
                        if ahead > 0:
                            await asyncio.sleep(ahead + 0.001)
                    record_value = pick(payloads) if payloads else value
                    sent_bytes += len(record_value)
                    # send() without its coroutine when the record can be queued at once.
                    if send_nowait(topic, record_value) is None:
                        await producer.send(topic, record_value)
                    if n % _YIELD_EVERY == 0:
                        # Let the responses in: sending only yields when the producer's
                        # buffer is full, and a response waiting for the loop would count in
                        # every latency.
                        await asyncio.sleep(0)
                await producer.flush()
                elapsed = clock() - started
                metrics.on_request = None
                metrics.on_records = None
                after_metrics = scrape_metrics(broker_metrics) if broker_metrics else None
                async with admin_for(server) as admin:
                    after_offsets = await _log_end_offsets(admin, tps)
        if errors:
            first = errors[0]
            raise CliError(
                f"{len(errors)} of {count} records not delivered: "
                + (describe_error(first) if isinstance(first, KafkaError) else str(first))
            )
        requests: dict[str, Any] = {
            "count": metrics.requests - requests_before[0],
            "bytes": metrics.request_bytes - requests_before[1],
        }
        if request_ms:
            requests["mean_ms"] = round(sum(request_ms) / len(request_ms), 3)
            requests["latency_ms"] = _latency_summary(request_ms)
        checks: dict[str, Any] = {
            "requests": requests,
            "landed": sum(after_offsets.values()) - sum(before_offsets.values()),
        }
        if before_metrics is not None and after_metrics is not None:
            checks["broker"] = broker_view(before_metrics, after_metrics, topic, elapsed)
        return PerfResult(count, sent_bytes, elapsed, latencies, checks)

    result = _run_fast(go(), bootstrap=server)
    extra: dict[str, Any] = {"size": size, "acks": acks, "compression": compression}
    if throughput is not None:
        extra["throughput_cap"] = throughput
    if payload_file is not None:
        extra["payload_file"] = payload_file
    _report("produce", topic, result, as_json, extra)


async def _log_end_offsets(admin: Any, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    found = await admin.list_offsets({tp: admin.LATEST for tp in tps})
    return {tp: (o.offset if o is not None else 0) for tp, o in found.items()}


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
