"""LogManager.get_or_create_log: a problem of one path fails that log and leaves the log dir
online; a failing disk takes the log dir offline. ``remove_new_log`` undoes a creation."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from log_helpers import NOW, producer_batch, small_config

from josefk.storage.errors import KafkaStorageError, LogCreationError, LogNameRefusedError
from josefk.storage.manager import LogManager, LogManagerConfig
from josefk.storage.offsets import TopicPartition
from josefk.util.clock import JitterSource, ManualClock
from josefk.util.scheduler import InlineExecutor, Scheduler


def manager_for(dirs: list[Path], failures: list[Path]) -> LogManager:
    clock = ManualClock(wall_ms=NOW)
    return LogManager(
        LogManagerConfig(log_dirs=tuple(dirs)),
        small_config(),
        clock=clock,
        scheduler=Scheduler(clock),
        executor=InlineExecutor(),
        jitter=JitterSource(3),
        on_log_dir_failure=lambda path, error: failures.append(path),
    )


async def test_a_file_in_the_way_fails_that_log_only(tmp_path: Path) -> None:
    failures: list[Path] = []
    manager = manager_for([tmp_path], failures)
    await manager.startup()
    (tmp_path / "t-0").write_text("a file")

    with pytest.raises(LogCreationError) as info:
        manager.get_or_create_log(TopicPartition("t", 0))
    assert not isinstance(info.value, KafkaStorageError)
    assert "a file is in the way" in str(info.value)
    assert str(tmp_path / "t-0") in str(info.value)
    assert (tmp_path / "t-0").read_text() == "a file"
    assert failures == [] and manager.offline_log_dirs == {}
    log = manager.get_or_create_log(TopicPartition("t", 1))
    log.append_as_leader(producer_batch(2), 0)
    await manager.shutdown()


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (errno.ENAMETOOLONG, LogNameRefusedError),
        (errno.EINVAL, LogNameRefusedError),
        (errno.EACCES, LogCreationError),
        (errno.EMFILE, LogCreationError),
    ],
)
async def test_path_errors_leave_nothing_and_the_dir_online(
    tmp_path: Path, code: int, kind: type[Exception]
) -> None:
    failures: list[Path] = []
    manager = manager_for([tmp_path], failures)
    await manager.startup()

    def refuse(directory: Path) -> None:
        raise OSError(code, "refused", str(directory / "partition.metadata"))

    with pytest.raises(kind):
        manager.get_or_create_log(TopicPartition("t", 0), prepare=refuse)
    assert not (tmp_path / "t-0").exists()
    assert manager.get_log(TopicPartition("t", 0)) is None
    assert failures == [] and manager.offline_log_dirs == {}
    await manager.shutdown()


async def test_a_disk_error_takes_the_dir_offline(tmp_path: Path) -> None:
    failures: list[Path] = []
    manager = manager_for([tmp_path], failures)
    await manager.startup()

    def fail(directory: Path) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with pytest.raises(KafkaStorageError):
        manager.get_or_create_log(TopicPartition("t", 0), prepare=fail)
    assert failures == [tmp_path]
    await manager.shutdown()


async def test_remove_new_log(tmp_path: Path) -> None:
    manager = manager_for([tmp_path], [])
    await manager.startup()
    tp = TopicPartition("t", 0)
    manager.get_or_create_log(tp)
    manager.remove_new_log(tp)
    assert manager.get_log(tp) is None
    assert list(tmp_path.glob("t-0*")) == []  # noqa: ASYNC240  a test's look at its own tmp dir
    await manager.shutdown()
