"""``josefk consume TOPIC...``: print records, as values, ``key:value`` lines, JSON lines or
a kcat-style format string (``%t [%p] @%o: %k=%s``); a tombstone's value prints as null.

Owns which topics are read (names, or ``^regex`` as kcat takes), where reading starts
(``--from``, ``offset:-N`` counting back from each partition's end), where it stops
(``--until`` an offset or a time), which partitions are read (all, or ``--partition``),
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
import re
import signal
import sys
import time
from collections.abc import Callable
from typing import IO, Any, Final

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
from josefk.cli.completion import complete_topics
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


# What a tombstone (a record whose value is null) prints as in the text formats.
NULL: Final = b"null"


def _value(record: ConsumerRecord) -> bytes:
    return NULL if record.value is None else record.value


def formatter(fmt: str, separator: bytes) -> Callable[[ConsumerRecord], bytes]:
    """The writer of one record: a named format or a kcat-style format string."""
    if fmt == "json":
        return lambda r: json.dumps(record_json(r), ensure_ascii=False).encode() + b"\n"
    if fmt == "key:value":
        return lambda r: (r.key or b"") + separator + _value(r) + b"\n"
    if fmt == "value":
        return lambda r: _value(r) + b"\n"
    return format_string(fmt)


# kcat's -f tokens: what each one prints of a record.
_TOKENS: Final[dict[str, Callable[[ConsumerRecord], bytes]]] = {
    "t": lambda r: r.topic.encode(),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "T": lambda r: str(r.timestamp).encode(),
    "k": lambda r: r.key if r.key is not None else b"",
    "K": lambda r: str(len(r.key) if r.key is not None else -1).encode(),
    "s": _value,
    "S": lambda r: str(len(r.value) if r.value is not None else -1).encode(),
    "h": lambda r: b",".join(k.encode() + b"=" + (v or b"") for k, v in r.headers),
}
_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}
FORMAT_TOKENS_HELP: Final = (
    "%t topic, %p partition, %o offset, %T timestamp (ms), %k key, %K key length, %s value "
    "(null for a tombstone), %S value length (-1 for a tombstone), %h headers as k=v,k=v, "
    "%% a percent sign; \\n \\t escapes"
)


def format_string(fmt: str) -> Callable[[ConsumerRecord], bytes]:
    """A kcat-style format (``'%t [%p] @%o: %k=%s %h'``), compiled once into parts. A
    newline ends each record unless the format ends with one. Unknown tokens are a usage
    error."""
    parts: list[bytes | Callable[[ConsumerRecord], bytes]] = []
    literal = ""
    i = 0
    while i < len(fmt):
        char = fmt[i]
        if char in "%\\" and i + 1 < len(fmt):
            following = fmt[i + 1]
            i += 2
            if char == "\\":
                literal += _ESCAPES.get(following, "\\" + following)
            elif following == "%":
                literal += "%"
            elif following in _TOKENS:
                if literal:
                    parts.append(literal.encode())
                    literal = ""
                parts.append(_TOKENS[following])
            else:
                raise click.BadParameter(
                    f"unknown token %{following} in {fmt!r}; known: {FORMAT_TOKENS_HELP}",
                    param_hint="--format",
                )
            continue
        literal += char
        i += 1
    if not literal.endswith("\n"):
        literal += "\n"
    parts.append(literal.encode())

    def write(record: ConsumerRecord) -> bytes:
        return b"".join(part if isinstance(part, bytes) else part(record) for part in parts)

    return write


@click.command("consume", short_help="Print records of topics.")
@click.argument(
    "topic_args",
    metavar="TOPIC...",
    nargs=-1,
    required=True,
    shell_complete=complete_topics,
)
@click.option(
    "-o",
    "--from",
    "start",
    metavar="WHERE",
    help="beginning | end | offset:N | offset:-N (N records before each partition's end, "
    "as kcat's -o -N) | timestamp:MS | timestamp:ISO-DATE | ISO-DATE. "
    "Default: beginning; with --group the committed offsets, else beginning.",
)
@click.option(
    "--until",
    metavar="WHERE",
    help="Stop each partition before offset:N or at the first record at or after "
    "timestamp:MS|ISO-DATE or ISO-DATE alone (and at its end, as --no-follow), then exit.",
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
    default="value",
    show_default=True,
    metavar="value|key:value|json|FORMAT",
    help="json: one object per line with topic, partition, offset, timestamp, key, value "
    "and headers (bytes that are not UTF-8 as base64, flagged by key_encoding/value_encoding). "
    "Or a kcat-style format string such as '%t [%p] @%o: %k=%s %h': " + FORMAT_TOKENS_HELP + ".",
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
    topic_args: tuple[str, ...],
    start: str | None,
    until: str | None,
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
    """Print the records of TOPIC(s), one per line, until Ctrl-C, --count, --until or
    --no-follow. A TOPIC that starts with ^ is a regular expression matched against the
    topic names (as kcat does).

    \b
      josefk consume orders --from beginning -n 10 --format json
      josefk consume orders --from offset:-5 --no-follow
      josefk consume orders refunds --format '%t [%p] @%o: %k=%s %h'
      josefk consume '^orders-.*' --until 2026-01-01T00:00:00
      josefk consume orders --group billing --no-follow
      josefk consume payments --isolation read_committed
      josefk consume jobs --share-group workers --ack release -n 5
    """
    spec = parse_start(start) if start is not None else None
    if share_group is not None and (
        group is not None or partitions or start is not None or until is not None
    ):
        raise click.UsageError(
            "--share-group cannot be combined with --group, --partition, --from or --until "
            "(the share group's share.auto.offset.reset decides where it starts)"
        )
    stop = parse_start(until, param="--until", relative=False) if until is not None else None
    if stop is not None and stop.kind not in ("offset", "timestamp", "end"):
        raise click.BadParameter(
            f"{until!r}: expected offset:N, timestamp:MS or an ISO date",
            param_hint="--until",
        )
    if group is not None and spec is not None and spec.kind in ("offset", "timestamp"):
        raise click.UsageError(
            "--from offset:/timestamp: cannot be combined with --group; move the group with "
            "`josefk groups reset-offsets` first"
        )
    if group is not None and partitions:
        raise click.UsageError("--partition cannot be combined with --group (the group assigns)")
    if not as_json and fmt not in FORMATS and "%" not in fmt:
        raise click.BadParameter(
            f"{fmt!r}: expected value, key:value, json or a format string with %-tokens",
            param_hint="--format",
        )
    write = formatter("json" if as_json else fmt, key_separator.encode())
    server = resolve_bootstrap(bootstrap)
    out = sys.stdout.buffer
    if share_group is not None:
        consumed = run(
            _consume_shared(
                server, topic_args, share_group, ack, count, no_follow, idle_timeout, write, out
            ),
            bootstrap=server,
        )
        if count is not None and consumed < count:
            click.echo(
                f"josefk: {consumed} of {count} records before {idle_timeout:g}s without a record",
                err=True,
            )
        return
    try:
        consumed = run(
            _consume(
                server,
                topic_args,
                spec or StartSpec("beginning"),
                partitions,
                group,
                count,
                no_follow or stop is not None,
                idle_timeout,
                write,
                out,
                shutdown_timeout,
                isolation=isolation,
                until=stop,
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


async def _resolve_topics(admin: Any, topic_args: tuple[str, ...]) -> list[str]:
    """The topics named, a ``^regex`` standing for every (non-internal) topic it matches."""
    names: list[str] = []
    known: list[str] | None = None
    for arg in topic_args:
        if not arg.startswith("^"):
            names.append(arg)
            continue
        try:
            pattern = re.compile(arg)
        except re.error as exc:
            raise click.BadParameter(f"{arg!r}: {exc}", param_hint="TOPIC") from None
        if known is None:
            known = sorted(await admin.list_topics())
        matched = [name for name in known if pattern.match(name)]
        if not matched:
            raise CliError(f"no topic matches {arg} ({len(known)} topics exist)")
        names += matched
    return list(dict.fromkeys(names))


async def _consume(
    server: str,
    topic_args: tuple[str, ...],
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
    until: StartSpec | None = None,
    group_protocol: str = "classic",
) -> int:
    async with admin_for(server) as admin:
        topics = await _resolve_topics(admin, topic_args)
        descriptions = await describe_existing_topics(admin, topics)
    all_tps: list[TopicPartition] = []
    for description in descriptions:
        known = [p.partition for p in description.partitions]
        for p in only:
            if p not in known:
                raise CliError(
                    f'topic "{description.name}" has partitions 0..{len(known) - 1}, not {p}'
                )
        all_tps += [TopicPartition(description.name, p) for p in known if not only or p in only]
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
            consumer.subscribe(topics)
        else:
            consumer.assign(all_tps)
            await _seek(consumer, all_tps, spec)
        # partition -> the offset it stops before (--no-follow: its end when first asked;
        # --until: the earlier of that and the limit).
        stop_at: dict[TopicPartition, int] = {}
        stops = count is not None or no_follow
        last_record = time.monotonic()
        while count is None or consumed < count:
            limit = None if count is None else count - consumed
            batches = await consumer.getmany(timeout_ms=200, max_records=limit)
            if batches:
                last_record = time.monotonic()
                chunk = bytearray()
                if until is not None:
                    await _stop_offsets(consumer, stop_at, until, list(batches))
                for tp, records in batches.items():
                    end = stop_at.get(tp) if until is not None else None
                    for record in records:
                        if end is not None and record.offset >= end:
                            break
                        chunk += write(record)
                        consumed += 1
                out.write(chunk)
                out.flush()
                continue
            if no_follow and await _at_end(consumer, stop_at, until):
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
    topic_args: tuple[str, ...],
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
        topics = await _resolve_topics(admin, topic_args)
        await describe_existing_topics(admin, topics)
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
        consumer.subscribe(topics)
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


async def _stop_offsets(
    consumer: AIOConsumer,
    stop_at: dict[TopicPartition, int],
    until: StartSpec | None,
    tps: list[TopicPartition],
) -> None:
    """Fill ``stop_at`` for the partitions of ``tps`` not in it yet."""
    new = [tp for tp in tps if tp not in stop_at]
    if not new:
        return
    ends = await consumer.end_offsets(new)
    limits: dict[TopicPartition, int] = {}
    if until is not None and until.kind == "offset":
        limits = {tp: until.value for tp in new}
    elif until is not None and until.kind == "timestamp":
        found = await consumer.offsets_for_times({tp: until.value for tp in new})
        limits = {tp: hit.offset for tp, hit in found.items() if hit is not None}
    for tp in new:
        end = ends.get(tp, 0)
        stop_at[tp] = min(end, limits.get(tp, end))


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
        # offset:N beyond a partition's range starts at its nearest end rather than failing;
        # offset:-N is N before each partition's end (at most back to its start).
        starts = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            end = ends.get(tp, max(spec.value, 0))
            wanted = end + spec.value if spec.value < 0 else spec.value
            consumer.seek(tp, min(max(wanted, starts.get(tp, 0)), end))


async def _at_end(
    consumer: AIOConsumer, stop_at: dict[TopicPartition, int], until: StartSpec | None = None
) -> bool:
    """True when every assigned partition's position reached the end offset it had when first
    asked about (records produced after that do not keep --no-follow running), or the
    --until limit before it."""
    assigned = consumer.assignment()
    if not assigned:
        return False
    await _stop_offsets(consumer, stop_at, until, list(assigned))
    for tp in assigned:
        if await consumer.position(tp) < stop_at.get(tp, 0):
            return False
    return True
