"""The errors of josefk's log layer, one class per failure.

Owns every exception that josefk.storage raises. Each carries the file path it concerns (when
there is one) and puts it in the message, so a log line names the file without a traceback.
Imports nothing from josefk; must never import josefk.protocol or josefk.broker (the broker maps
these onto Kafka error codes itself).
"""

from __future__ import annotations

import os
from pathlib import Path


class StorageError(Exception):
    """Base class of every storage error; ``path`` is the file or directory concerned."""

    def __init__(self, message: str, *, path: str | os.PathLike[str] | None = None) -> None:
        self.path: Path | None = Path(path) if path is not None else None
        self.message = message
        super().__init__(f"{message} ({self.path})" if self.path is not None else message)


class KafkaStorageError(StorageError):
    """An I/O error on a log dir: the dir goes offline, the broker keeps running.

    ``__cause__`` holds the original OSError.
    """


class PartitionIoError(KafkaStorageError):
    """An error of one operation on one partition that says nothing about its disk (no
    memory to map an index: ENOMEM): that operation fails, the log dir stays online."""


class LogCreationError(StorageError):
    """A partition's log could not be created for a reason of that one path, not of the disk:
    a file where its directory should be, no permission on it, too many open files. The log
    dir stays online; ``__cause__`` holds the OSError."""


class LogNameRefusedError(LogCreationError):
    """The log dir's filesystem refuses the partition directory's name (too long, or
    characters it cannot store)."""


class CorruptIndexError(StorageError):
    """An .index or .timeindex file fails its sanity check; the segment's indexes are rebuilt."""


class CorruptRecordsError(StorageError):
    """Bytes in a .log file are not a valid batch (size, magic or CRC) at ``position``."""

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        position: int | None = None,
    ) -> None:
        self.position = position
        super().__init__(message, path=path)


class InvalidOffsetError(StorageError):
    """An index append that would not strictly increase the offsets, or an offset that does
    not belong to the segment."""


class IndexFullError(StorageError):
    """An append to an index that has no free slot (the segment should have rolled first)."""


class OffsetOutOfRangeError(StorageError):
    """A read or lookup asked for an offset the log does not hold."""


class LogSegmentOffsetOverflowError(StorageError):
    """An offset does not fit the segment: ``offset - base_offset`` is outside [0, 2**31 - 1].

    Index entries store offsets relative to the base as int32, so such an offset cannot be
    indexed; Kafka splits the segment (or rolls) instead.
    """

    def __init__(
        self,
        message: str,
        *,
        base_offset: int,
        offset: int,
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.base_offset = base_offset
        self.offset = offset
        super().__init__(message, path=path)


class RecordTooLargeError(StorageError):
    """A batch larger than the segment or ``max.message.bytes`` allows."""
