"""``josefk consume TOPIC``: print records, as values, ``key:value`` lines or JSON lines.

Owns where reading starts (``--from``), which partitions are read (all, or ``--partition``),
reading in a consumer group (``--group``: committed offsets first, committed again on exit),
the output formats and when to stop: after ``--count`` records, at the end of the partitions
(``--no-follow``), or after ``--idle-timeout`` seconds without a record when either of those
is given; otherwise it follows the topic until Ctrl-C; ``--isolation read_committed`` reads
only committed transactions. Records come through josefk.client's AIOConsumer, or, with
``--share-group G``, its AIOShareConsumer, acknowledging each printed record as ``--ack``
says (accept, release, reject).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import IO, Any

import click

from josefk.cli.common import (
    CliError,
    StartSpec,
    admin_for,
    bootstrap_option,
    client_settings,
    describe_existing_topics,
    parse_start,
    resolve_bootstrap,
    run,
)
from josefk.client import AIOConsumer, ConsumerRecord, TopicPartition
from josefk.client.share_consumer import AcknowledgeType, AIOShareConsumer

FORMATS = ("value", "key:value", "json")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
ACK_TYPES = ("accept", "release", "reject")


def _text(data: bytes | None) -> tuple[str | None, bool]:
    """JSON-safe text of a key or value: UTF-8 when it is, else base64 (flag True)."""
    if data is None:
        return None, False
    try:
        return data.decode(), False
    except UnicodeDecodeError:
        return base64.b64encode(data).decode(), True


def record_json(record: ConsumerRecord) -> dict[str, Any]:
    key, key_b64 = _text(record.key)
    value, value_b64 = _text(record.value)
    out: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": record.timestamp_type.name,
        "key": key,
        "value": value,
        "headers": [{"key": k, "value": _text(v)[0]} for k, v in record.headers],
    }
    if key_b64:
        out["key_encoding"] = "base64"
    if value_b64:
        out["value_encoding"] = "base64"
    return out


def formatter(fmt: str, separator: bytes) -> Callable[[ConsumerRecord], bytes]:
    if fmt == "json":
        return lambda r: json.dumps(record_json(r), ensure_ascii=False).encode() + b"\n"
    if fmt == "key:value":
        return lambda r: (r.key or b"") + separator + (r.value or b"") + b"\n"
    return lambda r: (r.value or b"") + b"\n"


@click.command("consume", short_help="Print records of a topic.")
@click.argument("topic")
@click.option(
    "-o",
    "--from",
    "start",
    metavar="WHERE",
    help="beginning | end | offset:N | timestamp:MS | timestamp:ISO-DATE. "
    "Default: beginning; with --group the committed offsets, else beginning.",
)
@click.option(
    "-p",
    "--partition",
    "partitions",
    type=int,
    multiple=True,
    help="Read only this partition (repeatable).",
)
@click.option("-g", "--group", help="Consume as a member of this group; commits on exit.")
@click.option(
    "--share-group",
    help="Consume as a member of this share group (KIP-932): records are shared with the "
    "group's other members and acknowledged with --ack.",
)
@click.option(
    "--ack",
    type=click.Choice(ACK_TYPES),
    default="accept",
    show_default=True,
    help="With --share-group: how each printed record is acknowledged (release: delivered "
    "again, to any member; reject: never again).",
)
@click.option(
    "--group-protocol",
    type=click.Choice(["classic", "consumer"]),
    default="classic",
    show_default=True,
    help="With --group: classic (JoinGroup/SyncGroup) or consumer (Kafka 4's KIP-848: the "
    "broker assigns, rebalances are incremental).",
)
@click.option("-n", "--count", type=click.IntRange(min=1), help="Exit after this many records.")
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="value",
    show_default=True,
    help="json: one object per line with topic, partition, offset, timestamp, key, value "
    "and headers (bytes that are not UTF-8 as base64, flagged by key_encoding/value_encoding).",
)
@click.option(
    "-k",
    "--key-separator",
    default=":",
    show_default=True,
    help="Between key and value in the key:value format.",
)
@click.option(
    "--no-follow", is_flag=True, help="Exit at the end of the partitions instead of waiting."
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="With --count or --no-follow: exit after this many seconds without a record.",
)
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="With --group: how long the last commit and leaving the group may take after "
    "Ctrl-C or SIGTERM (a second Ctrl-C exits at once).",
)
@click.option(
    "--isolation",
    type=click.Choice(ISOLATION_LEVELS),
    default="read_uncommitted",
    show_default=True,
    help="read_committed: only records of committed transactions, up to the last stable "
    "offset (the end --no-follow waits for); read_uncommitted: everything, aborted "
    "transactions too. Transaction markers are never printed.",
)
@bootstrap_option
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
def consume(
    topic: str,
    start: str | None,
    partitions: tuple[int, ...],
    group: str | None,
    share_group: str | None,
    ack: str,
    group_protocol: str,
    count: int | None,
    fmt: str,
    key_separator: str,
    no_follow: bool,
    idle_timeout: float,
    shutdown_timeout: float,
    isolation: str,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Print TOPIC's records, one per line, until Ctrl-C, --count or --no-follow.

    \b
      josefk consume orders --from beginning -n 10 --format json
      josefk consume orders --group billing --no-follow
      josefk consume payments --isolation read_committed
      josefk consume jobs --share-group workers --ack release -n 5
    """
    spec = parse_start(start) if start is not None else None
    if share_group is not None and (group is not None or partitions or start is not None):
        raise click.UsageError(
            "--share-group cannot be combined with --group, --partition or --from (the share "
            "group's share.auto.offset.reset decides where it starts)"
        )
    if group is not None and spec is not None and spec.kind in ("offset", "timestamp"):
        raise click.UsageError(
            "--from offset:/timestamp: cannot be combined with --group; move the group with "
            "`josefk groups reset-offsets` first"
        )
    if group is not None and partitions:
        raise click.UsageError("--partition cannot be combined with --group (the group assigns)")
    write = formatter("json" if as_json else fmt, key_separator.encode())
    server = resolve_bootstrap(bootstrap)
    out = sys.stdout.buffer
    if share_group is not None:
        consumed = run(
            _consume_shared(
                server, topic, share_group, ack, count, no_follow, idle_timeout, write, out
            ),
            bootstrap=server,
        )
        if count is not None and consumed < count:
            click.echo(
                f"josefk: {consumed} of {count} records before {idle_timeout:g}s without a "
                "record",
                err=True,
            )
        return
    try:
        consumed = run(
            _consume(
                server,
                topic,
                spec or StartSpec("beginning"),
                partitions,
                group,
                count,
                no_follow,
                idle_timeout,
                write,
                out,
                shutdown_timeout,
                isolation=isolation,
                group_protocol=group_protocol,
            ),
            bootstrap=server,
        )
    except BrokenPipeError:
        # The reader went away (``| head``): not an error of ours. Point stdout at /dev/null
        # so the interpreter's final flush does not complain about the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
    if count is not None and consumed < count:
        click.echo(
            f"josefk: {consumed} of {count} records before {idle_timeout:g}s without a record",
            err=True,
        )


async def _consume(
    server: str,
    topic: str,
    spec: StartSpec,
    only: tuple[int, ...],
    group: str | None,
    count: int | None,
    no_follow: bool,
    idle_timeout: float,
    write: Callable[[ConsumerRecord], bytes],
    out: IO[bytes],
    shutdown_timeout: float = 5.0,
    *,
    isolation: str = "read_uncommitted",
    group_protocol: str = "classic",
) -> int:
    async with admin_for(server) as admin:
        (description,) = await describe_existing_topics(admin, [topic])
    known = [p.partition for p in description.partitions]
    for p in only:
        if p not in known:
            raise CliError(f'topic "{topic}" has partitions 0..{len(known) - 1}, not {p}')
    settings: dict[str, Any] = {
        "bootstrap_servers": server,
        **client_settings(),
        "client_id": "josefk-cli",
        "allow_auto_create_topics": False,
        "auto_offset_reset": "latest" if spec.kind == "end" else "earliest",
        "isolation_level": isolation,
    }
    if group is not None:
        # Commits as it goes (Kafka's auto.commit.interval.ms, 5 s): a kill loses at most
        # that much; what was returned by getmany is printed before the next commit.
        settings.update(
            group_id=group,
            enable_auto_commit=True,
            auto_commit_interval_ms=5000,
            group_protocol=group_protocol,
        )
    consumer = AIOConsumer(**settings)
    _terminate_like_interrupt()
    await consumer.start()
    consumed = 0
    try:
        if group is not None:
            consumer.subscribe([topic])
        else:
            tps = [TopicPartition(topic, p) for p in (only or known)]
            consumer.assign(tps)
            await _seek(consumer, tps, spec)
        stop_at: dict[TopicPartition, int] = {}
        stops = count is not None or no_follow
        last_record = time.monotonic()
        while count is None or consumed < count:
            limit = None if count is None else count - consumed
            batches = await consumer.getmany(timeout_ms=200, max_records=limit)
            if batches:
                last_record = time.monotonic()
                chunk = bytearray()
                for records in batches.values():
                    for record in records:
                        chunk += write(record)
                        consumed += 1
                out.write(chunk)
                out.flush()
                continue
            if no_follow and await _at_end(consumer, stop_at):
                break
            if stops and time.monotonic() - last_record >= idle_timeout:
                break
    finally:
        # Also on Ctrl-C or SIGTERM (the task is being cancelled): what was printed is
        # committed and the group left, within --shutdown-timeout whatever the network does.
        await _finish(consumer, group, shutdown_timeout)
    return consumed


async def _consume_shared(
    server: str,
    topic: str,
    group: str,
    ack: str,
    count: int | None,
    no_follow: bool,
    idle_timeout: float,
    write: Callable[[ConsumerRecord], bytes],
    out: IO[bytes],
) -> int:
    """Read as a share-group member, acknowledging each printed record with ``ack``; with
    --count or --no-follow, stop after --idle-timeout seconds without a record."""
    async with admin_for(server) as admin:
        await describe_existing_topics(admin, [topic])
    kind = AcknowledgeType[ack.upper()]
    consumer = AIOShareConsumer(
        bootstrap_servers=server,
        group_id=group,
        acknowledgement_mode="explicit",
        client_id="josefk-cli",
        max_poll_records=500 if count is None else min(count, 500),
    )
    _terminate_like_interrupt()
    await consumer.start()
    consumed = 0
    try:
        consumer.subscribe([topic])
        stops = count is not None or no_follow
        last_record = time.monotonic()
        while count is None or consumed < count:
            records = await consumer.poll(200)
            if records:
                last_record = time.monotonic()
                chunk = bytearray()
                for shared in records:
                    if count is not None and consumed >= count:
                        # Not printed: given back at once for another member.
                        consumer.acknowledge(shared, AcknowledgeType.RELEASE)
                        continue
                    chunk += write(shared.record)
                    consumer.acknowledge(shared, kind)
                    consumed += 1
                out.write(chunk)
                out.flush()
                await consumer.commit()
                continue
            if stops and time.monotonic() - last_record >= idle_timeout:
                break
    finally:
        await consumer.close()
    return consumed


async def _finish(consumer: AIOConsumer, group: str | None, timeout_s: float) -> None:
    async def commit_and_leave() -> None:
        try:
            if group is not None and consumer.assignment():
                await consumer.commit()
        finally:
            await consumer.close()  # leaves the group: its partitions move at once

    task = asyncio.ensure_future(commit_and_leave())
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if done:
        task.result()
        return
    # The broker does not answer (frozen, cut off): a cancelled close would itself wait on
    # the network, and so would asyncio.run's clean-up, so the deadline is kept by leaving.
    click.echo(
        f"josefk: the last commit and leaving the group did not finish within {timeout_s:g}s; "
        "the group's session timeout will remove this member",
        err=True,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def _terminate_like_interrupt() -> None:
    """SIGTERM asks for the same orderly exit as Ctrl-C (the main task is cancelled), so a
    supervisor's stop commits and leaves the group instead of killing the member."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    if main is None:
        return
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, main.cancel)


async def _seek(consumer: AIOConsumer, tps: list[TopicPartition], spec: StartSpec) -> None:
    if spec.kind == "beginning":
        consumer.seek_to_beginning(*tps)
    elif spec.kind == "end":
        consumer.seek_to_end(*tps)
    elif spec.kind == "timestamp":
        await consumer.seek_to_timestamp(spec.value, *tps)
    else:
        # offset:N beyond a partition's range starts at its nearest end rather than failing.
        starts = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, min(max(spec.value, starts.get(tp, 0)), ends.get(tp, spec.value)))


async def _at_end(consumer: AIOConsumer, stop_at: dict[TopicPartition, int]) -> bool:
    """True when every assigned partition's position reached the end offset it had when first
    asked about (records produced after that do not keep --no-follow running)."""
    assigned = consumer.assignment()
    if not assigned:
        return False
    new = [tp for tp in assigned if tp not in stop_at]
    if new:
        stop_at.update(await consumer.end_offsets(new))
    for tp in assigned:
        if await consumer.position(tp) < stop_at.get(tp, 0):
            return False
    return True
