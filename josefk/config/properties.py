"""Java ``.properties`` syntax and Kafka's ``meta.properties`` file.

Owns the reading and writing of the text format Kafka's ``server.properties`` and
``meta.properties`` use, written from the documented rules of ``java.util.Properties.load``:

- a *natural line* ends at ``\\n``, ``\\r`` or ``\\r\\n``; a *logical line* is one or more
  natural lines joined where a line ends in an odd number of backslashes, the leading
  whitespace of each continuation line dropped;
- a line whose first non-blank character is ``#`` or ``!`` is a comment and is never
  continued; blank lines are skipped;
- the key runs to the first unescaped ``=``, ``:`` or whitespace; then blanks, at most one
  ``=`` or ``:``, and blanks again are skipped; the rest of the line is the value;
- escapes ``\\t \\n \\r \\f \\uXXXX``; a backslash before any other character stands for that
  character (so ``\\=``, ``\\:``, ``\\ `` and ``\\\\`` put those characters in keys); a later
  duplicate key replaces an earlier one.

Also owns ``MetaProperties``: the ``meta.properties`` file Kafka keeps in every log dir
(``version``, ``node.id`` or ``broker.id``, ``cluster.id`` as a 22-character base64-url uuid
without padding, ``directory.id``), so the cluster id survives restarts, and
``ensure_meta_properties``, the start-up check that creates or verifies it in every log dir.

Must not import josefk.broker, josefk.storage or josefk.protocol.
"""

from __future__ import annotations

import base64
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from josefk.fileio import write_atomically

__all__ = [
    "META_PROPERTIES_FILE",
    "MetaProperties",
    "MetaPropertiesError",
    "PropertiesSyntaxError",
    "ensure_meta_properties",
    "format_properties",
    "generate_uuid",
    "is_valid_uuid",
    "parse_properties",
    "property_lines",
    "read_properties_file",
    "read_properties_file_lines",
]

META_PROPERTIES_FILE: Final = "meta.properties"

_BLANKS: Final = " \t\f"
_SIMPLE_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesSyntaxError(ValueError):
    """A properties text cannot be read; carries the source and the 1-based line number."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        super().__init__(f"{source}, line {line}: {reason}")
        self.source = source
        self.line = line
        self.reason = reason


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continued natural lines; returns (first line number, logical line) pairs."""
    natural = re.split(r"\r\n|\r|\n", text)
    result: list[tuple[int, str]] = []
    index = 0
    while index < len(natural):
        number = index + 1
        line = natural[index].lstrip(_BLANKS)
        index += 1
        if not line or line[0] in "#!":
            continue
        parts: list[str] = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0 or index >= len(natural):
                # A lone backslash on the very last line is dropped, as Java does.
                parts.append(line if trailing % 2 == 0 else line[:-1])
                break
            parts.append(line[:-1])
            line = natural[index].lstrip(_BLANKS)
            index += 1
        result.append((number, "".join(parts)))
    return result


def _unescape(raw: str, source: str, number: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        if char != "\\" or i + 1 >= len(raw):
            out.append(char)
            i += 1
            continue
        escaped = raw[i + 1]
        if escaped == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesSyntaxError(source, number, "malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_SIMPLE_ESCAPES.get(escaped, escaped))
        i += 2
    joined = "".join(out)
    # Java strings are UTF-16, so a pair of \\u escapes may spell one astral character.
    if any("\ud800" <= c <= "\udfff" for c in joined):
        joined = joined.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return joined


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    length = len(line)
    while i < length:
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=:" or char in _BLANKS:
            break
        i += 1
    key_end = min(i, length)
    j = key_end
    while j < length and line[j] in _BLANKS:
        j += 1
    if j < length and line[j] in "=:":
        j += 1
        while j < length and line[j] in _BLANKS:
            j += 1
    return line[:key_end], line[j:]


def parse_properties(text: str, *, source: str = "<properties>") -> dict[str, str]:
    """Parse properties text into a dict, later keys replacing earlier ones.

    >>> parse_properties("# comment\\nlog.dirs = /a,\\\\\\n    /b\\nkey:value")
    {'log.dirs': '/a,/b', 'key': 'value'}
    """
    result: dict[str, str] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        result[_unescape(raw_key, source, number)] = _unescape(raw_value, source, number)
    return result


def property_lines(text: str, *, source: str = "<properties>") -> dict[str, int]:
    """The line each key of ``parse_properties(text)`` was (last) set on, for messages."""
    return {
        _unescape(_split_key_value(line)[0], source, number): number
        for number, line in _logical_lines(text)
    }


def read_properties_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a properties file; UTF-8, falling back to ISO-8859-1 as Java's loader reads bytes.

    Raises OSError when the file cannot be read and PropertiesSyntaxError when it is malformed.
    """
    return parse_properties(_read_text(path), source=str(path))


def read_properties_file_lines(
    path: str | os.PathLike[str],
) -> tuple[dict[str, str], dict[str, int]]:
    """``read_properties_file`` and the line of each key."""
    text = _read_text(path)
    return parse_properties(text, source=str(path)), property_lines(text, source=str(path))


def _read_text(path: str | os.PathLike[str]) -> str:
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[char])
        elif char in "=:#!":
            out.append("\\" + char)
        elif char == " " and (is_key or index == 0):
            # Leading blanks of a value, and any blank in a key, would be lost on reading.
            out.append("\\ ")
        else:
            out.append(char)
    return "".join(out)


def format_properties(properties: Mapping[str, str], *, comment: str | None = None) -> str:
    """Properties text that ``parse_properties`` reads back to the same mapping."""
    lines: list[str] = []
    if comment is not None:
        lines.extend(f"#{part}" for part in comment.splitlines())
    for key, value in properties.items():
        lines.append(f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- meta.properties

_UUID_PATTERN: Final = re.compile(r"^[A-Za-z0-9_-]{22}$")
# Kafka reserves the all-zero uuid and 1 (the metadata topic id); neither may be a cluster id.
_RESERVED_UUIDS: Final = frozenset({0, 1})


def generate_uuid(random_bytes: Callable[[int], bytes] = os.urandom) -> str:
    """A random uuid in Kafka's text form: base64-url without padding, 22 characters.

    As Kafka does, ids whose text starts with ``-`` are drawn again (they read as command
    line options) and the reserved ids are never returned. ``random_bytes`` is injectable so
    tests get reproducible ids.
    """
    while True:
        value = uuid.UUID(bytes=random_bytes(16), version=4)
        text = base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")
        if value.int not in _RESERVED_UUIDS and not text.startswith("-"):
            return text


def is_valid_uuid(text: str) -> bool:
    """Whether ``text`` is a 22-character base64-url uuid that is not reserved."""
    if not _UUID_PATTERN.match(text):
        return False
    decoded = base64.urlsafe_b64decode(text + "==")
    return len(decoded) == 16 and int.from_bytes(decoded, "big") not in _RESERVED_UUIDS


class MetaPropertiesError(ValueError):
    """A ``meta.properties`` file is missing a field, malformed, or disagrees with the config."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaProperties:
    """The identity Kafka records in each log dir.

    Version 1 (KRaft, what josefk writes) has ``node.id``; version 0 (ZooKeeper era) has
    ``broker.id`` and an optional ``cluster.id``. ``directory.id`` (KIP-858) names the log
    dir itself and is kept when present.
    """

    version: int = 1
    node_id: int
    cluster_id: str | None
    directory_id: str | None = None

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], *, path: str = META_PROPERTIES_FILE
    ) -> MetaProperties:
        raw_version = props.get("version")
        if raw_version is None:
            raise MetaPropertiesError(path, "no version")
        try:
            version = int(raw_version.strip())
        except ValueError:
            raise MetaPropertiesError(path, f"version {raw_version!r} is not an integer") from None
        if version not in (0, 1):
            raise MetaPropertiesError(path, f"unsupported version {version}")
        id_key = "node.id" if version == 1 else "broker.id"
        raw_id = props.get(id_key)
        if raw_id is None:
            raise MetaPropertiesError(path, f"version {version} needs {id_key}")
        try:
            node_id = int(raw_id.strip())
        except ValueError:
            raise MetaPropertiesError(path, f"{id_key} {raw_id!r} is not an integer") from None
        cluster_id = props.get("cluster.id")
        if cluster_id is not None:
            cluster_id = cluster_id.strip()
        if version == 1 and not cluster_id:
            raise MetaPropertiesError(path, "version 1 needs cluster.id")
        directory_id = props.get("directory.id")
        if directory_id is not None and not is_valid_uuid(directory_id.strip()):
            raise MetaPropertiesError(path, f"directory.id {directory_id!r} is not a valid uuid")
        return cls(
            version=version,
            node_id=node_id,
            cluster_id=cluster_id or None,
            directory_id=directory_id.strip() if directory_id else None,
        )

    def to_properties(self) -> dict[str, str]:
        props: dict[str, str] = {"version": str(self.version)}
        props["node.id" if self.version == 1 else "broker.id"] = str(self.node_id)
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        return props

    @classmethod
    def read(cls, log_dir: str | os.PathLike[str]) -> MetaProperties | None:
        """The log dir's meta.properties, or None when the dir has none yet."""
        path = Path(log_dir) / META_PROPERTIES_FILE
        try:
            props = read_properties_file(path)
        except FileNotFoundError:
            return None
        return cls.from_properties(props, path=str(path))

    def write(self, log_dir: str | os.PathLike[str], *, now: datetime | None = None) -> Path:
        """Replace the log dir's meta.properties atomically (temp file, fsync, rename, fsync dir).

        The first line is a comment with the time, as Java's ``Properties.store`` writes.
        Blocking: call it from a thread when the event loop is running.
        """
        directory = Path(log_dir)
        directory.mkdir(parents=True, exist_ok=True)
        stamp = (now or datetime.now(UTC)).strftime("%a %b %d %H:%M:%S UTC %Y")
        text = format_properties(self.to_properties(), comment=stamp)
        target = directory / META_PROPERTIES_FILE
        write_atomically(target, text)
        return target


def ensure_meta_properties(
    log_dirs: Sequence[str | os.PathLike[str]],
    *,
    node_id: int,
    random_bytes: Callable[[int], bytes] = os.urandom,
    cluster_id: str | None = None,
) -> str:
    """Check or create ``meta.properties`` in every log dir; return the cluster id.

    Kafka's rules at start-up: every log dir that has the file must name this ``node_id`` and
    the same cluster id. Where Kafka would demand ``kafka-storage format`` first, josefk
    formats on first start: log dirs without the file get one (version 1) with the cluster id
    the others carry, or a new random one when no dir has any, and a fresh ``directory.id``.
    ``cluster_id``: the cluster this broker joins (from etcd): the dirs must belong to it or
    be new. Raises MetaPropertiesError naming the file that disagrees. Blocking (file I/O).
    """
    found: list[tuple[Path, MetaProperties]] = []
    missing: list[Path] = []
    for log_dir in log_dirs:
        directory = Path(log_dir)
        meta = MetaProperties.read(directory)
        if meta is None:
            missing.append(directory)
        else:
            found.append((directory, meta))
    expected = cluster_id
    cluster_id = None
    cluster_source: Path | None = None
    for directory, meta in found:
        path = str(directory / META_PROPERTIES_FILE)
        if meta.node_id != node_id:
            raise MetaPropertiesError(
                path,
                f"stored node id {meta.node_id} does not match node.id={node_id} of the config",
            )
        if meta.cluster_id is None:
            continue
        if cluster_id is None:
            cluster_id, cluster_source = meta.cluster_id, directory
        elif meta.cluster_id != cluster_id:
            raise MetaPropertiesError(
                path,
                f"cluster id {meta.cluster_id} differs from {cluster_id} "
                f"in {cluster_source}; the log dirs belong to different clusters",
            )
    if expected is not None and cluster_id is not None and cluster_id != expected:
        raise MetaPropertiesError(
            str(cluster_source / META_PROPERTIES_FILE) if cluster_source else "meta.properties",
            f"this log dir belongs to cluster {cluster_id}, but the cluster in etcd is "
            f"{expected}; point the broker at its own cluster or at a fresh log dir",
        )
    if cluster_id is None:
        cluster_id = expected if expected is not None else generate_uuid(random_bytes)
    for directory, meta in found:
        if meta.cluster_id is None:
            # A version 0 file without cluster.id: record the id now, as Kafka did on upgrade.
            MetaProperties(
                version=meta.version,
                node_id=meta.node_id,
                cluster_id=cluster_id,
                directory_id=meta.directory_id,
            ).write(directory)
    for directory in missing:
        MetaProperties(
            node_id=node_id, cluster_id=cluster_id, directory_id=generate_uuid(random_bytes)
        ).write(directory)
    return cluster_id
