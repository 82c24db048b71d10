"""Durable file replacement, the one way josefk rewrites a small file in place, and file
maps that keep no descriptor.

Owns ``write_atomically`` (temporary file, fsync, rename over the target, fsync of the
directory: a reader sees the old file or the new one, whole, and after a crash the new one
once the call returned) and ``fsync_dir``. Checkpoints, the leader-epoch file,
meta.properties, the topic catalog, partition.metadata, producer-state snapshots, the
producer id block file and the dynamic broker configs all go through it.

Also owns ``map_file``, the shared mapping the segment indexes use: the C extension's
``FileMap`` (``_cmap.c``, built by setup.py where a compiler is), which holds no file
descriptor once made, or without it (or with ``JOSEFK_PURE_PYTHON=1``) ``mmap.mmap``, which
holds a duplicate of the descriptor for as long as the map lives. ``MAPS_HOLD_DESCRIPTORS``
says which, so that the broker bounds its index maps by the open file limit only when they
count against it.

Imports the standard library only; every josefk package may import it.
"""

from __future__ import annotations

import importlib
import mmap
import os
from pathlib import Path
from typing import Any, Final

__all__ = ["MAPS_HOLD_DESCRIPTORS", "fsync_dir", "map_file", "write_atomically"]


def _load_cmap() -> Any:
    if os.environ.get("JOSEFK_PURE_PYTHON") == "1":
        return None
    try:
        return importlib.import_module("josefk.fileio._cmap")
    except ImportError:
        return None


_cmap: Any = _load_cmap()
MAPS_HOLD_DESCRIPTORS: Final = _cmap is None


def map_file(fd: int, length: int, *, writable: bool) -> Any:
    """A shared mapping of the first ``length`` (> 0) bytes of the open file ``fd``, which
    the caller may close at once. Supports the buffer protocol (writable if ``writable``),
    ``len``, slicing into bytes, ``flush()`` (msync) and ``close()`` (BufferError while a
    view of it exists); ValueError after ``close()``. Raises OSError as mmap does."""
    if _cmap is not None:
        return _cmap.map_file(fd, length, writable)
    return mmap.mmap(fd, length, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)


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
