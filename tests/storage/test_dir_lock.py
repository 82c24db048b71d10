"""The log dir lock: exclusive, names its holder, gone when released (or when the holder
dies: the lock belongs to the open file, as the integration test with SIGKILL shows)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from josefk.storage.dir_lock import LOCK_FILE, LogDirLock, LogDirLockedError


def test_the_lock_is_exclusive_and_names_its_holder(tmp_path: Path) -> None:
    first = LogDirLock.acquire(tmp_path)
    assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    # flock locks belong to an open file: a second open, even in this process, is refused.
    with pytest.raises(
        LogDirLockedError, match=rf"in use by another josefk broker \(pid {os.getpid()}\)"
    ) as caught:
        LogDirLock.acquire(tmp_path)
    assert caught.value.owner_pid == os.getpid() and caught.value.path == tmp_path
    first.release()
    second = LogDirLock.acquire(tmp_path)
    second.release()
    second.release()  # idempotent


def test_a_stale_pid_is_replaced(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).write_text("999999999\n")
    lock = LogDirLock.acquire(tmp_path)
    assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    lock.release()
