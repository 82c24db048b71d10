"""How the client verbs of ``josefk`` print: rich tables for people, JSON for scripts.

Owns the stdout/stderr consoles, ``print_json`` (one document, stable key order),
``print_table`` and ``print_fields`` (a two-column summary), and the byte/rate formatting
shared by the verbs. Data goes to stdout; notes, warnings and progress go to stderr, so a
pipeline only ever sees data.

Imports rich and click only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

# A pipe has no width; rich's 80-column fallback would wrap table rows that a script greps.
_PIPE_WIDTH = 200


def stdout_console() -> Console:
    tty = sys.stdout.isatty()
    return Console(highlight=False, width=None if tty else _PIPE_WIDTH, soft_wrap=not tty)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def note(message: str) -> None:
    """A remark for people, on stderr."""
    click.echo(message, err=True)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(str(v) for v in value) if value else "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    console: Console | None = None,
) -> None:
    table = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=None,
        header_style="bold",
        pad_edge=False,
        padding=(0, 3, 0, 0),
    )
    for column in columns:
        numeric = column.isupper() and column in _NUMERIC_COLUMNS
        table.add_column(column, justify="right" if numeric else "left", overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell(v)) for v in row))
    out = console or stdout_console()
    if title:
        out.print()  # a titled table is a section of a longer report: set it apart
    out.print(table)


_NUMERIC_COLUMNS = frozenset(
    {
        "PARTITION",
        "PARTITIONS",
        "REPLICAS",
        "LEADER",
        "EPOCH",
        "LOG-START",
        "HIGH-WATERMARK",
        "RECORDS",
        "FIRST-OFFSET",
        "LAST-OFFSET",
        "COMMITTED",
        "START-OFFSET",
        "LOG-END",
        "LAG",
        "ID",
        "PORT",
        "OLD",
        "NEW",
        "MEMBERS",
    }
)


def print_fields(pairs: Sequence[tuple[str, Any]], *, console: Console | None = None) -> None:
    """``name: value`` lines, names aligned (the head of a describe)."""
    out = console or stdout_console()
    width = max((len(k) for k, _ in pairs), default=0)
    for key, value in pairs:
        out.print(Text.assemble((key.ljust(width), "bold"), "  ", cell(value)))


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"
