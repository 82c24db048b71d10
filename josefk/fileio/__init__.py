"""Durable file replacement, the one way josefk rewrites a small file in place.

Owns ``write_atomically`` (temporary file, fsync, rename over the target, fsync of the
directory: a reader sees the old file or the new one, whole, and after a crash the new one
once the call returned) and ``fsync_dir``. Checkpoints, the leader-epoch file,
meta.properties, the topic catalog, partition.metadata, producer-state snapshots, the
producer id block file and the dynamic broker configs all go through it.

Imports the standard library only; every josefk package may import it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_dir", "write_atomically"]


def fsync_dir(directory: Path) -> None:
    """Make a rename or create inside ``directory`` durable (POSIX needs the dir fsynced)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(
    path: Path, data: bytes | str, *, sync: bool = True, mode: int = 0o644
) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8). With ``sync`` off the
    replacement is still atomic for readers but not durable: callers that fsync later, or
    can lose the file (a producer snapshot is rebuilt from the log), skip the cost. ``mode``
    is the new file's permissions (0o600 for a file holding secrets)."""
    raw = data.encode() if isinstance(data, str) else data
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(temp, path)
    if sync:
        fsync_dir(path.parent)
