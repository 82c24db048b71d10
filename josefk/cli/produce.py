"""``josefk produce TOPIC``: one record per input line, then a summary.

Owns reading lines (stdin or ``--file``; as they arrive, so an interactive session sends each
line at once), splitting a key off with ``--key-separator``, the headers of ``-H k=v``, and
the summary (records and offsets per partition), and transactions (``--transactional-id``,
committing every ``--transaction-size`` records and at the end of the input). Records go through josefk.client's
AIOProducer. A topic that does not exist is created on first use when the broker allows it
(``auto.create.topics.enable``), as Kafka's producers and kcat do, with a note saying so
(and naming close matches: a typo shows) before the first record is read; ``--no-create``
refuses instead. When the broker does not create it, the error names close matches and how
to create it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import AsyncIterator
from typing import IO, Any

import click

from josefk.cli.common import (
    CLI_CONNECT_TIMEOUT_MS,
    CliError,
    admin_for,
    bootstrap_option,
    client_settings,
    describe_error,
    describe_existing_topics,
    json_option,
    parse_key_values,
    resolve_bootstrap,
    run,
)
from josefk.cli.completion import complete_topics
from josefk.cli.output import note, print_json, print_table
from josefk.client import AIOAdmin, AIOProducer, RecordMetadata
from josefk.client.errors import KafkaError, UnknownTopicOrPartitionError

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
_READ_CHUNK = 1 << 16


async def read_lines(stream: IO[bytes], delimiter: bytes | None = b"\n") -> AsyncIterator[bytes]:
    """The lines of ``stream`` without their line ends (a ``\\r`` before a newline goes too),
    or its records split at ``delimiter``; ``delimiter`` None: the whole stream is one.

    A daemon thread does the blocking reads so the event loop (the producer's sender) keeps
    running while input is awaited, and so Ctrl-C is not held up by a read nobody will
    finish; a bounded queue keeps a fast file from outrunning the producer.

    The thread reads the file descriptor with ``os.read``, never through the stream's
    buffered reader: a thread blocked in ``BufferedReader.read1`` holds that reader's lock,
    and at interpreter shutdown after Ctrl-C the main thread wants the same lock to flush
    stdin, which aborts Python ("_enter_buffered_busy", exit 134 instead of 130).
    """
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(maxsize=64)
    fd = stream.fileno()

    def read(size: int) -> bytes:
        return os.read(fd, size)

    def put(item: bytes | BaseException | None) -> None:
        asyncio.run_coroutine_threadsafe(chunks.put(item), loop).result()

    def pump() -> None:
        try:
            while chunk := read(_READ_CHUNK):
                put(chunk)
            put(None)
        except RuntimeError:  # the loop is gone: the command is over
            return
        except BaseException as exc:  # noqa: BLE001  an I/O error goes to the reader
            with contextlib.suppress(RuntimeError):
                put(exc)

    threading.Thread(target=pump, name="josefk-produce-stdin", daemon=True).start()
    pending = b""
    newline = delimiter == b"\n"
    whole: list[bytes] = []
    while (chunk := await chunks.get()) is not None:
        if isinstance(chunk, BaseException):
            raise CliError(f"cannot read the input: {chunk}")
        if delimiter is None:
            whole.append(chunk)
            continue
        pending += chunk
        *lines, pending = pending.split(delimiter)
        for line in lines:
            yield line[:-1] if newline and line.endswith(b"\r") else line
    if delimiter is None:
        yield b"".join(whole)
    elif pending:
        yield pending


@click.command("produce", short_help="Produce lines from stdin or a file as records.")
@click.argument("topic", shell_complete=complete_topics)
@click.option(
    "-f",
    "--file",
    "paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="Read records from this file instead of stdin (repeatable: one after the other).",
)
@click.option(
    "--whole-file",
    is_flag=True,
    help="The whole input (--file or stdin, binary or text) is one record's value; with "
    "several --file, one record per file.",
)
@click.option(
    "-D",
    "--delimiter",
    metavar="SEP",
    help="Records end at SEP instead of a newline, as kcat's -D (escapes \\n \\t \\0 "
    "\\r \\\\ understood).",
)
@click.option(
    "-Z",
    "--null-value",
    is_flag=True,
    help="Send an empty value as null: a tombstone, which compaction removes with its key "
    "(as kcat's -Z).",
)
@click.option(
    "-k",
    "--key-separator",
    metavar="SEP",
    help="Split each line at the first SEP into key and value (no SEP: no key).",
)
@click.option(
    "-H", "--header", "headers", multiple=True, metavar="KEY=VALUE", help="Header on every record."
)
@click.option("-p", "--partition", type=int, help="Write to this partition (default: by key).")
@click.option(
    "-z", "--compression", type=click.Choice(COMPRESSIONS), default="none", show_default=True
)
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.option(
    "--transactional-id",
    metavar="ID",
    help="Write in transactions under this transactional id (read_committed consumers see "
    "the records only once committed). Fences an older producer with the same id.",
)
@click.option(
    "--transaction-size",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --transactional-id: commit every N records (default: the whole input is one "
    "transaction). Ctrl-C or an error aborts the open transaction.",
)
@click.option(
    "--no-create",
    is_flag=True,
    help="Refuse to produce to a topic that does not exist, instead of letting the broker "
    "create it on first use (auto.create.topics.enable, as kcat and Kafka's producers do).",
)
@bootstrap_option
@json_option
def produce(
    topic: str,
    paths: tuple[str, ...],
    whole_file: bool,
    delimiter: str | None,
    null_value: bool,
    key_separator: str | None,
    headers: tuple[str, ...],
    partition: int | None,
    compression: str,
    acks: str,
    transactional_id: str | None,
    transaction_size: int | None,
    no_create: bool,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Send each line of stdin (or --file) to TOPIC as one record.

    \b
      printf 'alice:1\\nbob:2\\n' | josefk produce orders -k : -H source=cli
      printf 'alice:\\n' | josefk produce orders -k : -Z      # a tombstone for alice
      josefk produce images --file logo.png --whole-file
      printf 'a;b;c' | josefk produce letters --delimiter ';'
      seq 1000 | josefk produce payments --transactional-id loader --transaction-size 100
    """
    if transaction_size is not None and transactional_id is None:
        raise click.UsageError("--transaction-size needs --transactional-id")
    if transactional_id is not None and acks != "all":
        raise click.UsageError("--transactional-id needs --acks all")
    header_list = [(k, v.encode()) for k, v in parse_key_values(headers, "--header").items()]
    separator = key_separator.encode() if key_separator else None
    server = resolve_bootstrap(bootstrap)
    if whole_file and delimiter is not None:
        raise click.UsageError("--whole-file and --delimiter exclude each other")
    record_end: bytes | None = None if whole_file else b"\n"
    if delimiter is not None:
        record_end = _unescape(delimiter).encode()
        if not record_end:
            raise click.BadParameter("empty delimiter", param_hint="--delimiter")
    sources = list(paths) or ["-"]
    if sys.stdin.isatty() and "-" in sources and not as_json:
        note(f"reading records for {topic} from stdin, one per line; Ctrl-D to finish")

    async def go() -> _Tally:
        async with admin_for(server) as admin:
            try:
                (description,) = await describe_existing_topics(admin, [topic])
            except CliError as unknown:
                if no_create:
                    raise CliError(f"{unknown}; not created (--no-create)") from None
                # Said before the first record is read, with close matches: a typo shows
                # before any data goes to the wrong topic.
                note(f"{unknown.message}; asking the broker to create it on first use")
                description = await _create_on_first_use(server, topic, unknown)
        count = len(description.partitions)
        if partition is not None and not 0 <= partition < count:
            raise CliError(f'topic "{topic}" has partitions 0..{count - 1}, not {partition}')
        tally = _Tally()
        async with AIOProducer(
            bootstrap_servers=server,
            **client_settings(),
            client_id="josefk-cli",
            acks=acks,
            compression_type=compression,
            allow_auto_create_topics=False,
            transactional_id=transactional_id,
        ) as producer:
            in_transaction = 0  # records sent in the open transaction
            if transactional_id is not None:
                await producer.init_transactions()
            async for line in _records(sources, record_end):
                if transactional_id is not None and not in_transaction:
                    producer.begin_transaction()
                key: bytes | None = None
                value: bytes | None = line
                if separator is not None:
                    head, sep, tail = line.partition(separator)
                    if sep:
                        key, value = head, tail
                if null_value and not value:
                    value = None
                tally.bytes += len(value or b"") + (len(key) if key else 0)
                future = await producer.send(
                    topic, value, key, partition=partition, headers=header_list or None
                )
                future.add_done_callback(tally.delivered)
                if transactional_id is not None:
                    in_transaction += 1
                    if transaction_size is not None and in_transaction >= transaction_size:
                        await _commit(producer, tally)
                        in_transaction = 0
            if in_transaction:
                await _commit(producer, tally)
            await producer.flush()
        return tally

    tally = run(go(), bootstrap=server)
    summary: dict[str, Any] = {
        "topic": topic,
        "records": tally.records,
        "bytes": tally.bytes,
        "acks": acks,
        "compression": compression,
        "partitions": [
            {
                "partition": p,
                "records": n,
                # acks=0 gets no offsets back from the broker.
                "first_offset": first if first >= 0 else None,
                "last_offset": last if last >= 0 else None,
            }
            for p, (n, first, last) in sorted(tally.partitions.items())
        ],
        "failed": tally.failed,
        "error": tally.error,
    }
    if transactional_id is not None:
        summary["transactional_id"] = transactional_id
        summary["transactions"] = tally.transactions
    if as_json:
        print_json(summary)
    else:
        noun = "record" if tally.records == 1 else "records"
        line = f"produced {tally.records} {noun} ({tally.bytes} bytes) to {topic}"
        if transactional_id is not None:
            line += f" in {tally.transactions} committed transaction(s) as {transactional_id}"
        click.echo(line)
        if tally.records:
            print_table(
                ["PARTITION", "RECORDS", "FIRST-OFFSET", "LAST-OFFSET"],
                [
                    (p["partition"], p["records"], p["first_offset"], p["last_offset"])
                    for p in summary["partitions"]
                ],
            )
    if tally.failed:
        total = tally.failed + tally.records
        raise CliError(f"{tally.failed} of {total} records not delivered: {tally.error}")


async def _records(sources: list[str], record_end: bytes | None) -> AsyncIterator[bytes]:
    """The records of each source in turn ("-" is stdin), split at ``record_end``."""
    for source in sources:
        if source == "-":
            async for record in read_lines(sys.stdin.buffer, record_end):
                yield record
            continue
        # Opening is instant; the reads go through read_lines' thread.
        with open(source, "rb") as stream:  # noqa: ASYNC230
            async for record in read_lines(stream, record_end):
                yield record


def _unescape(text: str) -> str:
    """kcat's delimiter escapes: \\n \\t \\r \\0 \\\\."""
    escapes = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}
    out, i = "", 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in escapes:
            out += escapes[text[i + 1]]
            i += 2
        else:
            out += text[i]
            i += 1
    return out


class _Tally:
    """Delivery outcomes counted as they arrive, so a large input keeps no future alive."""

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.failed = 0
        self.transactions = 0
        self.error: str | None = None
        # partition -> [records, first offset, last offset]
        self.partitions: dict[int, list[int]] = {}

    def delivered(self, future: asyncio.Future[RecordMetadata]) -> None:
        error = future.exception()
        if error is not None:
            self.failed += 1
            if self.error is None:
                self.error = describe_error(error) if isinstance(error, KafkaError) else str(error)
            return
        meta = future.result()
        self.records += 1
        entry = self.partitions.get(meta.partition)
        if entry is None:
            self.partitions[meta.partition] = [1, meta.offset, meta.offset]
        else:
            entry[0] += 1
            entry[1] = min(entry[1], meta.offset)
            entry[2] = max(entry[2], meta.offset)


async def _commit(producer: AIOProducer, tally: _Tally) -> None:
    """Commit the open transaction; on failure abort it (when the producer still can) and
    stop: the records of an aborted transaction are not retried."""
    try:
        await producer.commit_transaction()
    except KafkaError as exc:
        with contextlib.suppress(KafkaError):
            await producer.abort_transaction()
        raise CliError(f"transaction aborted: {describe_error(exc)}") from None
    tally.transactions += 1


async def _create_on_first_use(server: str, topic: str, unknown: CliError) -> Any:
    """Ask the broker to create ``topic`` the way producers do (a Metadata request that
    allows auto-creation); the broker's settings decide. Returns its description."""
    async with AIOAdmin(
        bootstrap_servers=server,
        **client_settings(),
        client_id="josefk-cli",
        allow_auto_create_topics=True,
        connect_timeout_ms=CLI_CONNECT_TIMEOUT_MS,
    ) as creator:
        with contextlib.suppress(KafkaError):
            await creator.client.wait_for_topic(topic, timeout_s=5.0)
        try:
            (description,) = await creator.describe_topics([topic])
        except UnknownTopicOrPartitionError:
            raise CliError(
                f"{unknown}; the broker does not create topics on first use "
                f"(auto.create.topics.enable=false): create it with "
                f"`josefk topics create {topic}`"
            ) from None
    count = len(description.partitions)
    noun = "partition" if count == 1 else "partitions"
    note(
        f'created topic "{topic}" on first use ({count} {noun}; '
        "the broker has auto.create.topics.enable=true); --no-create refuses unknown topics"
    )
    return description
