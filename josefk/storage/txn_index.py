"""A segment's transaction index, ``<base offset>.txnindex``: the aborted transactions whose
ABORT marker the segment holds.

Owns ``TransactionIndex``. Kafka's format, entries of 34 bytes, big-endian::

    version              int16    0
    producer_id          int64
    first_offset         int64    the producer's first offset of the transaction
    last_offset          int64    the offset of its ABORT marker
    last_stable_offset   int64    the partition's last stable offset once it completed

appended in marker order (``last_offset`` grows). A read_committed fetch collects the entries
that overlap what it returns, so the consumer can drop the aborted batches. The file is made
on the first entry (most segments never get one, as in Kafka) and is not mapped: entries are
few, so they are read once on first use and kept.

Imports josefk.storage.offsets and josefk.storage.errors only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from pathlib import Path
from typing import Final

from josefk.storage.errors import KafkaStorageError
from josefk.storage.offsets import AbortedTxn

_log = logging.getLogger(__name__)

ENTRY: Final = struct.Struct(">hqqqq")
ENTRY_SIZE: Final = ENTRY.size  # 34
CURRENT_VERSION: Final = 0


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The valid entries at the start of a ``.txnindex`` file's bytes: whole, of version 0,
    markers in increasing order; whatever follows the first that is not is left out."""
    entries: list[AbortedTxn] = []
    whole = len(data) - len(data) % ENTRY_SIZE
    for version, producer_id, first, last, lso in ENTRY.iter_unpack(data[:whole]):
        if version != CURRENT_VERSION or (entries and last <= entries[-1].last_offset):
            break
        entries.append(AbortedTxn(producer_id, first, last, lso))
    return entries


class TransactionIndex:
    """The aborted transactions of one segment, in the order their markers were written."""

    def __init__(self, path: str | os.PathLike[str], base_offset: int) -> None:
        # Made a Path on first use (``path``): start-up opens one index per segment.
        self._path: str | os.PathLike[str] = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None
        self._fd: int | None = None
        self._dirty = False

    @property
    def path(self) -> Path:
        path = self._path
        if not isinstance(path, Path):
            path = self._path = Path(path)
        return path

    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry; the file is read on first use."""
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot read transaction index: {exc}", path=self.path
            ) from exc
        entries = decode_entries(data)
        valid = len(entries) * ENTRY_SIZE
        if valid != len(data):
            # A torn write (power loss mid-append) or damage at rest: keep the entries
            # before it, say which file lost what.
            _log.warning(
                "%s: transaction index has %d bytes after its last valid entry; truncating",
                self._path,
                len(data) - valid,
            )
            self._truncate_file(valid)
        return entries

    # -- writes -------------------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction; its marker must follow the last entry's."""
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} does not follow the last "
                f"entry of {self._path}, which ends at {entries[-1].last_offset}"
            )
        data = ENTRY.pack(
            CURRENT_VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
            txn.last_stable_offset,
        )  # fmt: skip
        try:
            if self._fd is None:
                self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(self._fd, data)
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot append to transaction index: {exc}", path=self.path
            ) from exc
        entries.append(txn)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Forget the transactions whose marker is at ``offset`` or later (the log is cut
        there)."""
        entries = self.entries
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep != len(entries):
            del entries[keep:]
            self._truncate_file(keep * ENTRY_SIZE)

    def reset(self) -> None:
        """Forget every entry (the segment is being recovered and its index rebuilt)."""
        self._entries = []
        self._truncate_file(0)

    def _truncate_file(self, size: int) -> None:
        try:
            os.truncate(self._path, size)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot truncate transaction index: {exc}", path=self.path
            ) from exc
        self._dirty = True

    # -- reads --------------------------------------------------------------------------------

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The entries overlapping [``fetch_offset``, ``upper_bound_offset``), and whether the
        search may stop here: an entry whose last stable offset reaches the upper bound
        means no later segment holds one that overlaps (Kafka's rule)."""
        found: list[AbortedTxn] = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    # -- files --------------------------------------------------------------------------------

    def flush(self) -> None:
        if self._dirty and self._fd is not None:
            os.fsync(self._fd)
        elif self._dirty and self.path.exists():
            fd = os.open(self._path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                if self._dirty:
                    os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
            self._dirty = False

    def close_handler(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def rename_to(self, path: Path) -> None:
        try:
            os.rename(self._path, path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot rename transaction index to {path}: {exc}", path=self.path
            ) from exc
        self._path = path

    def delete_if_exists(self) -> None:
        self.close_handler()
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot delete transaction index: {exc}", path=self.path
            ) from exc

    def __repr__(self) -> str:
        return f"TransactionIndex({str(self._path)!r}, entries={self._entries!r})"


__all__ = ["CURRENT_VERSION", "ENTRY_SIZE", "TransactionIndex", "decode_entries"]
