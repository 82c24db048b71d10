"""The leader-epoch cache of one partition and its ``leader-epoch-checkpoint`` file (KIP-101).

Owns ``LeaderEpochCache``: which leader epoch began at which offset. A replica uses it to
answer OffsetForLeaderEpoch ("where does my log end for epoch E?") and, as a follower, to
find the point where its log diverges from the leader's, so that a deposed leader's
unacknowledged tail is truncated rather than served.

Entries ``(epoch, start_offset)`` are strictly increasing in both fields. Worked example: a
partition led by epoch 0 from offset 0, epoch 2 from offset 100 and epoch 5 from offset 250,
with log end offset 300, holds [(0, 0), (2, 100), (5, 250)] and answers ``end_offset_for``:

    epoch 0 -> (0, 100)    epoch 0 ended where epoch 2 began
    epoch 1 -> (0, 100)    never a leader epoch here: the largest epoch below it, and where
                           the next known epoch began
    epoch 5 -> (5, 300)    the current epoch ends at the log end offset
    epoch 6 -> (-1, -1)    an epoch this replica has not seen

The checkpoint file, in the partition directory, is Kafka's text format::

    0                 version
    3                 number of entries
    0 0               <epoch> <start offset>
    2 100
    5 250

and is replaced atomically on every change (changes are rare: one per leader change or
truncation). Not thread-safe; the owning log calls it from the event loop (or from its
loader before the log is shared).

Imports josefk.storage.checkpoint and josefk.storage.errors only.
"""

from __future__ import annotations

import bisect
import itertools
from pathlib import Path
from typing import Final

from josefk.fileio import write_atomically
from josefk.storage.checkpoint import CorruptCheckpointError
from josefk.storage.errors import KafkaStorageError

LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1
_VERSION: Final = 0

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "LeaderEpochCache",
]


class LeaderEpochCache:
    """``(epoch, start_offset)`` entries of one partition, kept in its checkpoint file."""

    __slots__ = ("_deferred", "_dirty", "_epochs", "_offsets", "path")

    def __init__(self, path: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        # While deferred, changes are kept and marked dirty instead of written: a partition
        # being created writes its first entry with its other files, in the executor.
        self._deferred = False
        self._dirty = False
        for epoch, offset in entries or ():
            self._epochs.append(epoch)
            self._offsets.append(offset)

    @classmethod
    def load(cls, partition_dir: Path) -> LeaderEpochCache:
        """Read the partition's checkpoint (absent: empty). Entries that break the ordering
        (a file Kafka would refuse too) raise ``CorruptCheckpointError`` with the path."""
        return cls.load_file(partition_dir / LEADER_EPOCH_CHECKPOINT)

    @classmethod
    def load_file(cls, path: Path) -> LeaderEpochCache:
        """``load`` of the checkpoint at ``path`` (a log that already named it)."""
        try:
            # open() rather than Path.read_text: once per partition at start-up.
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except FileNotFoundError:
            return cls(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise KafkaStorageError(
                f"cannot read leader epoch checkpoint: {exc}", path=path
            ) from exc
        lines = text.splitlines()
        try:
            version, count = int(lines[0]), int(lines[1])
            entries = [(int(e), int(o)) for e, o in (line.split(" ") for line in lines[2:])]
        except (IndexError, ValueError) as exc:
            raise CorruptCheckpointError(
                f"malformed leader epoch checkpoint: {exc}", path=path
            ) from None
        if version != _VERSION or count != len(entries):
            raise CorruptCheckpointError(
                f"leader epoch checkpoint version {version} with {count} entries declared, "
                f"{len(entries)} present",
                path=path,
            )
        for (e1, o1), (e2, o2) in itertools.pairwise(entries):
            if not (e1 < e2 and o1 < o2):
                raise CorruptCheckpointError(
                    f"leader epoch entries out of order: ({e1}, {o1}) then ({e2}, {o2})", path=path
                )
        return cls(path, entries)

    # -- reading -------------------------------------------------------------------------

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at ``offset`` was written in (None before the first entry)."""
        index = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[index] if index >= 0 else None

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: ``(largest epoch <= epoch, the offset where it ended)``;
        ``(-1, -1)`` for an epoch newer than any known (or an empty cache)."""
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Older than anything we know: it ended at latest where our first epoch began.
            return epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    # -- changing ------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` begins at ``start_offset`` (a leader's first append in a new
        epoch, or a follower's append of the leader's batches). Entries that would break the
        ordering (an epoch at least as new, or starting at or after ``start_offset``) are
        dropped first, as after a truncation. True if anything changed (and was saved)."""
        if self._epochs and self._epochs[-1] == epoch and self._offsets[-1] <= start_offset:
            return False
        keep = len(self._epochs)
        while keep > 0 and (
            self._epochs[keep - 1] >= epoch or self._offsets[keep - 1] >= start_offset
        ):
            keep -= 1
        del self._epochs[keep:], self._offsets[keep:]
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        self._save()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: forget epochs that begin at or after it."""
        keep = bisect.bisect_left(self._offsets, end_offset)
        if keep < len(self._offsets):
            del self._epochs[keep:], self._offsets[keep:]
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset`` (retention, DeleteRecords): epochs wholly
        before it go, and the epoch it falls in now begins there."""
        index = bisect.bisect_right(self._offsets, start_offset) - 1
        if index < 0 or (index == 0 and self._offsets[0] == start_offset):
            return
        del self._epochs[:index], self._offsets[:index]
        self._offsets[0] = start_offset
        self._save()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._offsets.clear()
            self._save()

    # -- deferred saving (a partition being created) ----------------------------------------

    def defer_saves(self) -> None:
        """From now on, keep changes in memory only until ``end_deferral``; the caller writes
        them with ``take_pending`` and ``write_text`` off the loop meanwhile."""
        self._deferred = True

    def take_pending(self) -> str | None:
        """The checkpoint's text if a change was deferred since the last call (it is then
        no longer pending), else None. On the loop."""
        if not self._dirty:
            return None
        self._dirty = False
        return self._text()

    def write_text(self, text: str) -> None:
        """Write (and fsync) ``text`` from ``take_pending``. Blocking: for the executor."""
        self._write(text)

    def end_deferral(self) -> None:
        """Save at once again; a change deferred since ``take_pending`` is written now."""
        self._deferred = False
        if self._dirty:
            self._dirty = False
            self._save()

    def _text(self) -> str:
        lines = [str(_VERSION), str(len(self._epochs))]
        lines += [f"{e} {o}" for e, o in zip(self._epochs, self._offsets, strict=True)]
        return "\n".join(lines) + "\n"

    def _save(self) -> None:
        if self._deferred:
            self._dirty = True
            return
        self._write(self._text())

    def _write(self, text: str) -> None:
        try:
            write_atomically(self.path, text)
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot write leader epoch checkpoint: {exc.strerror or exc}", path=self.path
            ) from exc

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries()})"
