"""``josefk dump-log``: print what a segment's files hold, like Kafka's kafka-dump-log.

Owns the command only: reading goes through josefk.storage (FileRecords, the indexes) and
josefk.records (batch headers, record iteration). Imports nothing from josefk.broker or
josefk.protocol, and never writes to the files it reads.

For a .log file, one line per batch (base and last offset, count, position, create time,
size, magic, compression codec, CRC and whether it is valid), records under their batch with
``--print-records``, and the number of bytes after the last whole batch if any. For .index and
.timeindex files, their entries; when the .log of the same segment sits next to them, the
entries are checked against it (``--verify-index-only`` prints only the problems). ``--json``
prints one JSON document for scripts. Exit status 1 when a batch is invalid or an index entry
disagrees with the log.
"""

from __future__ import annotations

import bisect
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from josefk.records import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    RecordBatch,
    RecordsError,
    iter_records,
)
from josefk.records.record import ControlRecordType, decode_control_type
from josefk.storage.errors import StorageError
from josefk.storage.file_records import FileRecords
from josefk.storage.index import OffsetIndex, TimeIndex
from josefk.storage.segment import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    offset_from_file_name,
)

_SUFFIXES = (".deleted", ".cleaned", ".swap")


def _kind(path: Path) -> str:
    name = path.name
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for kind in (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX):
        if name.endswith(kind):
            return kind
    return ""


def _sibling(path: Path, suffix: str) -> Path:
    name = path.name
    trailing = next((s for s in _SUFFIXES if name.endswith(s)), "")
    stem = name.split(".", 1)[0]
    return path.with_name(stem + suffix + trailing)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


# -- .log ---------------------------------------------------------------------------------


def _batch_info(position: int, batch: RecordBatch) -> dict[str, Any]:
    header = batch.header()
    try:
        batch.ensure_valid()
        valid, error = True, None
    except RecordsError as e:
        valid, error = False, str(e)
    attributes = header.attributes
    codec = attributes & COMPRESSION_MASK
    codec_names = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    info: dict[str, Any] = {
        "base_offset": header.base_offset,
        "last_offset": header.base_offset + header.last_offset_delta,
        "count": header.record_count,
        "base_sequence": header.base_sequence,
        "last_sequence": batch.last_sequence,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "partition_leader_epoch": header.partition_leader_epoch,
        "is_transactional": bool(attributes & TRANSACTIONAL_BIT),
        "is_control": bool(attributes & CONTROL_BIT),
        # Set by the log cleaner on a batch whose tombstones it kept (KIP-534): they go at
        # the first cleaning after this time. The base timestamp field holds it.
        "delete_horizon_ms": header.base_timestamp if attributes & DELETE_HORIZON_BIT else None,
        "position": position,
        "timestamp_type": "LogAppendTime" if attributes & TIMESTAMP_TYPE_BIT else "CreateTime",
        "create_time": header.max_timestamp,
        "size": batch.size_in_bytes,
        "magic": header.magic,
        "compression_codec": codec_names.get(codec, f"unknown({codec})"),
        "crc": header.crc,
        "crc_valid": valid,
    }
    if error is not None:
        info["error"] = error
    return info


def _record_infos(batch: RecordBatch) -> Iterator[dict[str, Any]]:
    for record in iter_records(batch):
        info: dict[str, Any] = {
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key_size": -1 if record.key is None else len(record.key),
            "value_size": -1 if record.value is None else len(record.value),
            "headers": {k: _text(v) for k, v in record.headers},
            "key": _text(record.key),
            "payload": _text(record.value),
        }
        if batch.is_control:
            try:
                info["control_type"] = decode_control_type(record.key).name
            except RecordsError:
                info["control_type"] = ControlRecordType.UNKNOWN.name
        yield info


def _dump_log(path: Path, print_records: bool, max_message_size: int) -> dict[str, Any]:
    records = FileRecords.open(path, file_already_exists=True, mutable=False)
    batches: list[dict[str, Any]] = []
    end, problem = 0, None
    try:
        for position, batch in records.batches_from(0, max_batch_size=max_message_size):
            info = _batch_info(position, batch)
            if print_records:
                try:
                    info["records"] = list(_record_infos(batch))
                except RecordsError as e:
                    info["records_error"] = str(e)
            batches.append(info)
            end = position + batch.size_in_bytes
    except StorageError as e:
        problem = e.message
    finally:
        records.close()
    result: dict[str, Any] = {
        "file": str(path),
        "kind": "log",
        "base_offset": _base_offset(path),
        "size": records.size_in_bytes(),
        "batches": batches,
        "invalid_bytes": records.size_in_bytes() - end,
    }
    if problem is not None:
        result["error"] = problem
    result["ok"] = all(b["crc_valid"] for b in batches) and result["invalid_bytes"] == 0
    return result


def _base_offset(path: Path) -> int | None:
    try:
        return offset_from_file_name(path)
    except ValueError:
        return None


# -- indexes ------------------------------------------------------------------------------


def _index_entries(index: OffsetIndex | TimeIndex) -> list[Any]:
    entries: list[Any] = []
    for n in range(index.entries):
        entry = index.entry(n)
        # An index still preallocated (active segment, or after a crash) ends in zeros, which
        # read as entries at the base offset; the real entries stop before them.
        if n > 0 and entry.offset == index.base_offset:
            break
        entries.append(entry)
    return entries


class _LogMap:
    """Where each batch of a .log starts and ends, from one scan, to check indexes against."""

    def __init__(self, path: Path) -> None:
        self.starts: dict[int, int] = {}  # position -> last offset
        self.last_offsets: list[int] = []
        self.max_timestamps: list[int] = []
        self.problem: str | None = None
        log = FileRecords.open(path, file_already_exists=True, mutable=False)
        try:
            for position, batch in log.batches_from(0):
                last_offset = batch.last_offset
                self.starts[position] = last_offset
                self.last_offsets.append(last_offset)
                self.max_timestamps.append(batch.max_timestamp)
        except StorageError as e:
            self.problem = e.message
        finally:
            log.close()

    def max_timestamp_of_batch_holding(self, offset: int) -> int | None:
        i = bisect.bisect_left(self.last_offsets, offset)
        return self.max_timestamps[i] if i < len(self.last_offsets) else None


def _log_map(path: Path, verify: bool, problems: list[str]) -> _LogMap | None:
    log_path = _sibling(path, LOG_FILE_SUFFIX)
    if not log_path.exists():
        if verify:
            problems.append(f"no log file {log_path.name} to verify against")
        return None
    log_map = _LogMap(log_path)
    if log_map.problem is not None:
        problems.append(
            f"log {log_path.name} is corrupt after its valid batches: {log_map.problem}"
        )
    return log_map


def _read_index(path: Path, kind: type[OffsetIndex] | type[TimeIndex]) -> tuple[int, list[Any]]:
    """The base offset named by the file and every entry of the index, read-only."""
    base_offset = _base_offset(path) or 0
    index = kind(path, base_offset, writable=False)
    try:
        return base_offset, _index_entries(index)
    finally:
        index.close_handler()


def _dump_offset_index(path: Path, verify: bool) -> dict[str, Any]:
    base_offset, entries = _read_index(path, OffsetIndex)
    problems: list[str] = []
    log_map = _log_map(path, verify, problems)
    previous = None
    for entry in entries:
        if previous is not None and entry.offset <= previous:
            problems.append(f"index offset {entry.offset} does not increase")
        previous = entry.offset
        if log_map is None:
            continue
        last_offset = log_map.starts.get(entry.position)
        if last_offset is None:
            problems.append(
                f"index entry {entry.offset} points at position {entry.position}, "
                "where no batch starts"
            )
        elif last_offset != entry.offset:
            problems.append(
                f"index offset {entry.offset} at position {entry.position}, but the batch "
                f"there ends at offset {last_offset}"
            )
    return {
        "file": str(path),
        "kind": "offset_index",
        "base_offset": base_offset,
        "entries": [{"offset": e.offset, "position": e.position} for e in entries],
        "problems": problems,
        "ok": not problems,
    }


def _dump_time_index(path: Path, verify: bool) -> dict[str, Any]:
    base_offset, entries = _read_index(path, TimeIndex)
    problems: list[str] = []
    log_map = _log_map(path, verify, problems)
    previous = None
    for entry in entries:
        if previous is not None and entry.timestamp <= previous:
            problems.append(f"time index timestamp {entry.timestamp} does not increase")
        previous = entry.timestamp
        if log_map is None:
            continue
        max_timestamp = log_map.max_timestamp_of_batch_holding(entry.offset)
        if max_timestamp is None:
            problems.append(f"time index offset {entry.offset} is past the end of the log")
        elif max_timestamp != entry.timestamp:
            problems.append(
                f"time index entry ({entry.timestamp}, {entry.offset}), but the batch holding "
                f"that offset has max timestamp {max_timestamp}"
            )
    return {
        "file": str(path),
        "kind": "time_index",
        "base_offset": base_offset,
        "entries": [{"timestamp": e.timestamp, "offset": e.offset} for e in entries],
        "problems": problems,
        "ok": not problems,
    }


# -- printing -----------------------------------------------------------------------------


def _fields(info: dict[str, Any], names: list[str]) -> str:
    return " ".join(
        f"[bold]{name}:[/bold] {escape(str(info[name]))}" for name in names if name in info
    )


_BATCH_FIELDS = [
    "base_offset",
    "last_offset",
    "count",
    "base_sequence",
    "last_sequence",
    "producer_id",
    "producer_epoch",
    "partition_leader_epoch",
    "is_transactional",
    "is_control",
    "delete_horizon_ms",
    "position",
    "create_time",
    "size",
    "magic",
    "compression_codec",
    "crc",
    "crc_valid",
]
_RECORD_FIELDS = [
    "offset",
    "timestamp",
    "key_size",
    "value_size",
    "headers",
    "control_type",
    "key",
    "payload",
]


def _print(console: Console, result: dict[str, Any], verify_only: bool) -> None:
    console.print(f"[bold cyan]Dumping {escape(result['file'])}[/bold cyan]")
    kind = result["kind"]
    if kind == "log":
        console.print(f"Log starting offset: {result['base_offset']}")
        for batch in result["batches"]:
            style = "" if batch["crc_valid"] else "[red]"
            console.print(style + _fields(batch, _BATCH_FIELDS), highlight=False)
            if "error" in batch:
                console.print(f"  [red]{escape(batch['error'])}[/red]")
            for record in batch.get("records", ()):
                console.print("| " + _fields(record, _RECORD_FIELDS), highlight=False)
            if "records_error" in batch:
                console.print(f"  [red]records unreadable: {escape(batch['records_error'])}[/red]")
        if result.get("error"):
            console.print(f"[red]{escape(result['error'])}[/red]")
        if result["invalid_bytes"]:
            console.print(
                f"[red]Found {result['invalid_bytes']} invalid bytes at the end of "
                f"{escape(Path(result['file']).name)}[/red]"
            )
        return
    if not verify_only:
        names = ["offset", "position"] if kind == "offset_index" else ["timestamp", "offset"]
        for entry in result["entries"]:
            console.print(_fields(entry, names), highlight=False)
    for problem in result["problems"]:
        console.print(f"[red]{escape(problem)}[/red]")
    if verify_only and not result["problems"]:
        console.print(f"[green]{len(result['entries'])} entries verified against the log[/green]")


@click.command("dump-log")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--print-records", "--print-data-log", is_flag=True, help="Print every record.")
@click.option(
    "--verify-index-only", is_flag=True, help="Check .index/.timeindex against the .log only."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document, for scripts.")
@click.option(
    "--max-message-size",
    type=int,
    default=2**31 - 1,
    show_default=True,
    help="Batches claiming more bytes than this are reported as corrupt.",
)
def dump_log(
    files: tuple[Path, ...],
    print_records: bool,
    verify_index_only: bool,
    as_json: bool,
    max_message_size: int,
) -> None:
    """Print the batches of .log files and the entries of .index/.timeindex files."""
    results: list[dict[str, Any]] = []
    console = Console(highlight=False, soft_wrap=True)
    for path in files:
        kind = _kind(path)
        try:
            if kind == LOG_FILE_SUFFIX:
                if verify_index_only:
                    continue
                result = _dump_log(path, print_records, max_message_size)
            elif kind == INDEX_FILE_SUFFIX:
                result = _dump_offset_index(path, verify_index_only)
            elif kind == TIME_INDEX_FILE_SUFFIX:
                result = _dump_time_index(path, verify_index_only)
            else:
                result = {"file": str(path), "kind": "unknown", "ok": False}
                if not as_json:
                    console.print(
                        f"[yellow]Ignoring {escape(str(path))}: not a segment file[/yellow]"
                    )
                results.append(result)
                continue
        except StorageError as e:
            result = {"file": str(path), "kind": kind.lstrip("."), "ok": False, "error": str(e)}
            if not as_json:
                console.print(f"[red]{escape(str(e))}[/red]")
            results.append(result)
            continue
        results.append(result)
        if not as_json:
            _print(console, result, verify_index_only)
    if as_json:
        json.dump({"files": results}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    if not all(r["ok"] for r in results):
        sys.exit(1)
