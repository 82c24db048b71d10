"""Fixtures of the replica manager's unit tests: real logs in a temporary directory on a
manual clock, one topic "t" of one partition with min.insync.replicas=2; followers are
simulated by their fetch requests, or (``follower_replicas``) are a second replica manager
with logs of its own and no topics yet."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replica_helpers import create_topic, replica_manager

from josefk.broker.replica_manager import ReplicaManager


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[ReplicaManager]:
    """Broker 0."""
    async with replica_manager(tmp_path, 0) as manager:
        create_topic(manager, "t", 1, {"min.insync.replicas": "2"})
        yield manager


@pytest.fixture
async def follower_replicas(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ReplicaManager]:
    """Broker 1, in a log dir of its own."""
    async with replica_manager(tmp_path_factory.mktemp("follower"), 1) as manager:
        yield manager
