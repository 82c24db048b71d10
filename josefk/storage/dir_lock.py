"""The exclusive lock a broker holds on each of its log dirs while it runs.

Owns ``LogDirLock``: the file ``.lock`` in a log dir, held with an OS file lock (``flock``) for
the life of the process, as Kafka's LogManager locks its dirs. A second broker pointed at the
same dir cannot take it and refuses to start, instead of writing beside the first and losing
its acknowledged records. The lock belongs to the open file, so it dies with the process
however that ends (SIGKILL included): a crash never blocks the restart. The holder's pid is
written into the file after the lock is taken, so that the refusal can name it.

Imports josefk.storage.errors only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Final

from josefk.storage.errors import StorageError

LOCK_FILE: Final = ".lock"

__all__ = ["LOCK_FILE", "LogDirLock", "LogDirLockedError"]


class LogDirLockedError(StorageError):
    """Another process holds the log dir's lock."""

    def __init__(self, log_dir: Path, owner_pid: int | None) -> None:
        owner = f" (pid {owner_pid})" if owner_pid is not None else ""
        super().__init__(
            f"log dir {log_dir} is in use by another josefk broker{owner}; "
            "stop it or choose another --data-dir"
        )
        self.path = log_dir
        self.owner_pid = owner_pid


class LogDirLock:
    """Held from ``acquire`` until ``release`` (or the process ends)."""

    __slots__ = ("_fd", "log_dir")

    def __init__(self, log_dir: Path, fd: int) -> None:
        self.log_dir = log_dir
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, log_dir: str | os.PathLike[str]) -> LogDirLock:
        """Take the lock of ``log_dir`` (which must exist) without waiting; raises
        LogDirLockedError naming the holder's pid when another process has it, OSError
        when the file cannot be opened."""
        directory = Path(log_dir)
        path = directory / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read_pid(fd)
            os.close(fd)
            raise LogDirLockedError(directory, owner) from None
        except BaseException:
            os.close(fd)
            raise
        # The previous holder's pid may still be there (it was killed): replace it.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(directory, fd)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __repr__(self) -> str:
        return f"LogDirLock({str(self.log_dir)!r}, held={self._fd is not None})"


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
