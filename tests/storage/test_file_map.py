"""josefk.fileio.map_file: the shared file mapping the indexes use, which with the C extension
keeps no file descriptor (Python's mmap keeps a duplicate for as long as the map lives)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from josefk import fileio

needs_cmap = pytest.mark.skipif(
    fileio.MAPS_HOLD_DESCRIPTORS,
    reason="the C extension josefk.fileio._cmap is not built (or JOSEFK_PURE_PYTHON=1)",
)


@pytest.fixture
def fd(tmp_path: Path) -> Iterator[int]:
    path = tmp_path / "file"
    path.write_bytes(bytes(8192))
    descriptor = os.open(path, os.O_RDWR)
    yield descriptor
    os.close(descriptor)


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_writes_through_the_map_are_the_file_s_bytes(fd: int) -> None:
    mapped = fileio.map_file(fd, 8192, writable=True)
    struct.pack_into(">ii", mapped, 8, 7, 4096)
    assert os.pread(fd, 8, 8) == struct.pack(">ii", 7, 4096)
    os.pwrite(fd, b"abcd", 100)
    assert mapped[100:104] == b"abcd"
    assert mapped[100] == ord("a")
    assert len(mapped) == 8192
    mapped.flush()
    mapped.close()


@needs_cmap
def test_a_map_holds_no_file_descriptor(tmp_path: Path) -> None:
    before = _open_descriptors()
    maps = []
    for i in range(50):
        path = tmp_path / f"index-{i}"
        path.write_bytes(bytes(4096))
        descriptor = os.open(path, os.O_RDWR)
        maps.append(fileio.map_file(descriptor, 4096, writable=True))
        os.close(descriptor)
    assert _open_descriptors() == before
    for i, mapped in enumerate(maps):
        mapped[0:0]  # still usable after its descriptor closed
        struct.pack_into(">i", mapped, 0, i)
    assert [
        struct.unpack_from(">i", (tmp_path / f"index-{i}").read_bytes())[0] for i in range(50)
    ] == list(range(50))
    for mapped in maps:
        mapped.close()


@needs_cmap
def test_close_waits_for_views_and_use_after_close_is_an_error(fd: int) -> None:
    mapped = fileio.map_file(fd, 8192, writable=True)
    view = memoryview(mapped)
    with pytest.raises(BufferError):
        mapped.close()
    view[0] = 1
    view.release()
    mapped.close()
    assert mapped.closed
    mapped.close()  # twice: nothing
    for use in (lambda: mapped[0:4], lambda: len(mapped), mapped.flush, lambda: memoryview(mapped)):
        with pytest.raises(ValueError, match="closed"):
            use()


@needs_cmap
def test_a_read_only_map_refuses_writes(fd: int) -> None:
    mapped = fileio.map_file(fd, 8192, writable=False)
    with pytest.raises((BufferError, TypeError)):  # struct: TypeError for a read-only one
        struct.pack_into(">i", mapped, 0, 1)
    assert struct.unpack_from(">i", mapped, 0) == (0,)
    mapped.flush()  # nothing to write back
    mapped.close()


@needs_cmap
def test_bad_arguments(fd: int) -> None:
    with pytest.raises(ValueError):
        fileio.map_file(fd, 0, writable=True)
    with pytest.raises(OSError):
        fileio.map_file(-1, 4096, writable=True)
    mapped = fileio.map_file(fd, 8192, writable=True)
    with pytest.raises(ValueError):
        mapped[0:10:2]
    with pytest.raises(IndexError):
        mapped[8192]
    assert mapped[-1] == 0
    mapped.close()
