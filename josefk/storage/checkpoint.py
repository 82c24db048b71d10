"""Offset checkpoint files in Kafka's text format, replaced atomically.

Owns reading and writing of the per-log-dir checkpoint files ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` and ``replication-offset-checkpoint`` (the high watermarks).
Imports josefk.storage.errors and josefk.storage.offsets only.

The format, one item per line, UTF-8, ``\\n`` line ends::

    0                   version
    2                   number of entries
    orders 0 1234       <topic> <partition> <offset>
    orders 1 99

Kafka's tools read exactly this, so the layout must not change. A write goes to
``<name>.tmp``, is fsynced, renamed over the file, and then the directory is fsynced so the
rename itself survives a crash: a reader sees either the old file or the new one, never a
partial one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from josefk.fileio import write_atomically
from josefk.storage.errors import KafkaStorageError, StorageError
from josefk.storage.offsets import TopicPartition

CHECKPOINT_VERSION: Final = 0
RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT: Final = "replication-offset-checkpoint"


class CorruptCheckpointError(StorageError):
    """A checkpoint file is malformed; the message says which line and why."""


class OffsetCheckpointFile:
    """One checkpoint file mapping partitions to offsets.

    Blocking (it fsyncs): call from a worker thread when on the event loop. Two writers of the
    same file must not run at once; LogManager serialises them per log dir.
    """

    __slots__ = ("path",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
        for tp in sorted(offsets):
            lines.append(f"{tp.topic} {tp.partition} {offsets[tp]}")
        try:
            write_atomically(self.path, "\n".join(lines) + "\n")
        except OSError as exc:
            raise KafkaStorageError(
                f"error while writing checkpoint: {exc.strerror or exc}", path=self.path
            ) from exc

    def read(self) -> dict[TopicPartition, int]:
        """The checkpointed offsets; an absent file reads as empty (a fresh log dir)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise KafkaStorageError(
                f"error while reading checkpoint: {exc.strerror or exc}", path=self.path
            ) from exc
        except UnicodeDecodeError as exc:
            raise CorruptCheckpointError(
                f"checkpoint is not UTF-8 text: {exc}", path=self.path
            ) from exc
        return self._parse(text)

    def _parse(self, text: str) -> dict[TopicPartition, int]:
        lines = text.splitlines()
        if not lines:
            raise CorruptCheckpointError("checkpoint is empty (no version line)", path=self.path)
        version = self._int(lines[0], 1, "version")
        if version != CHECKPOINT_VERSION:
            raise CorruptCheckpointError(
                f"unsupported checkpoint version {version}, expected {CHECKPOINT_VERSION}",
                path=self.path,
            )
        if len(lines) < 2:
            raise CorruptCheckpointError("checkpoint has no entry count line", path=self.path)
        expected = self._int(lines[1], 2, "entry count")
        entries = lines[2:]
        if len(entries) != expected:
            raise CorruptCheckpointError(
                f"checkpoint claims {expected} entries but holds {len(entries)}", path=self.path
            )
        result: dict[TopicPartition, int] = {}
        for number, line in enumerate(entries, start=3):
            parts = line.split(" ")
            if len(parts) != 3 or not parts[0]:
                raise CorruptCheckpointError(
                    f"line {number}: expected '<topic> <partition> <offset>', got {line!r}",
                    path=self.path,
                )
            partition = self._int(parts[1], number, "partition")
            offset = self._int(parts[2], number, "offset")
            result[TopicPartition(parts[0], partition)] = offset
        return result

    def _int(self, text: str, line: int, what: str) -> int:
        try:
            return int(text.strip())
        except ValueError:
            raise CorruptCheckpointError(
                f"line {line}: {what} {text!r} is not an integer", path=self.path
            ) from None

    def __repr__(self) -> str:
        return f"OffsetCheckpointFile({str(self.path)!r})"
