"""Fixtures of the replica manager's unit tests: real logs in a temporary directory on a
manual clock, one topic "t" of one partition with min.insync.replicas=2; followers are
simulated by their fetch requests."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
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


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[ReplicaManager]:
    clock = ManualClock(wall_ms=NOW)
    logs = LogManager(
        LogManagerConfig(log_dirs=(tmp_path,)),
        LogConfig(),
        clock=clock,
        scheduler=Scheduler(clock),
        executor=InlineExecutor(),
    )
    await logs.startup()
    manager = ReplicaManager(
        logs, TopicCatalog.load(tmp_path), broker_id=0, default_log_config=LogConfig()
    )
    manager.create_topic("t", 1, {"min.insync.replicas": "2"})
    yield manager
    await logs.shutdown()
