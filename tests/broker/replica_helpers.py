"""A replica manager over real logs in a directory, on a manual clock: the broker unit tests'
way to stand up a broker's data path without sockets (conftest.py's fixtures and the
property tests that cannot take function-scoped fixtures)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
from log_helpers import NOW

from josefk.broker.catalog import TopicCatalog, TopicInfo
from josefk.broker.replica_manager import ReplicaManager
from josefk.broker.topic_admin import LocalTopicAdmin
from josefk.config.topic import LogConfig
from josefk.storage.manager import LogManager, LogManagerConfig
from josefk.util.clock import ManualClock
from josefk.util.scheduler import InlineExecutor, Scheduler


@asynccontextmanager
async def replica_manager(log_dir: Path, broker_id: int) -> AsyncIterator[ReplicaManager]:
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


def create_topic(
    replicas: ReplicaManager, name: str, partitions: int, configs: dict[str, str] | None = None
) -> TopicInfo:
    """Create a topic on ``replicas`` as a single node does (catalog and logs together)."""
    admin = LocalTopicAdmin(replicas, broker_id=replicas.broker_id)
    return admin.create_topic_now(name, partitions, configs or {})
