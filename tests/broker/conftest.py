"""Fixtures of the replica manager's unit tests: real logs in a temporary directory on a
manual clock, one topic "t" of one partition with min.insync.replicas=2; followers are
simulated by their fetch requests, or (``follower_replicas``) are a second replica manager
with logs of its own and no topics yet."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
from log_helpers import NOW

from josefk.broker.catalog import TopicCatalog
from josefk.broker.replica_manager import ReplicaManager
from josefk.config.topic import LogConfig
from josefk.storage.clock import ManualClock
from josefk.storage.manager import LogManager, LogManagerConfig
from josefk.storage.scheduler import InlineExecutor, Scheduler


@asynccontextmanager
async def _replica_manager(log_dir: Path, broker_id: int) -> AsyncIterator[ReplicaManager]:
    clock = ManualClock(wall_ms=NOW)
    logs = LogManager(
        LogManagerConfig(log_dirs=(log_dir,)),
        LogConfig(),
        clock=clock,
        scheduler=Scheduler(clock),
        executor=InlineExecutor(),
    )
    await logs.startup()
    try:
        yield ReplicaManager(
            logs, TopicCatalog.load(log_dir), broker_id=broker_id, default_log_config=LogConfig()
        )
    finally:
        await logs.shutdown()


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[ReplicaManager]:
    """Broker 0."""
    async with _replica_manager(tmp_path, 0) as manager:
        manager.create_topic("t", 1, {"min.insync.replicas": "2"})
        yield manager


@pytest.fixture
async def follower_replicas(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ReplicaManager]:
    """Broker 1, in a log dir of its own."""
    async with _replica_manager(tmp_path_factory.mktemp("follower"), 1) as manager:
        yield manager
