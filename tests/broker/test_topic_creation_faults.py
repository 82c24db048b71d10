"""Topic creation is all or nothing, with faults injected part way (inside a real, in-process
Broker; the faults are fakes standing in for the disk): nothing is left behind in the
catalog (in memory or on disk) or in the log dir, and a failing disk leaves a topic that the
next start completes, never one with fewer partitions."""

from __future__ import annotations

import errno
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import josefk.broker.catalog as catalog_module
import josefk.broker.replica_manager as replica_manager_module
from josefk.broker.catalog import CATALOG_FILE
from josefk.broker.partition import Partition
from josefk.broker.replica_manager import ReplicaManager
from josefk.broker.server import Broker
from josefk.broker.topic_admin import LocalTopicAdmin
from josefk.config.broker import BrokerConfig
from josefk.storage.errors import KafkaStorageError, LogCreationError, LogNameRefusedError


def config_for(data: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(data),
            "offsets.topic.num.partitions": "1",
            "josefk.metrics.enable": "false",
        }
    )


class Topics:
    """The broker's replicas and, to create and grow topics, its single-node topic admin."""

    def __init__(self, broker: Broker) -> None:
        assert broker.replica_manager is not None and broker.local_topics is not None
        self.replicas: ReplicaManager = broker.replica_manager
        self.admin: LocalTopicAdmin = broker.local_topics
        self.catalog = self.replicas.catalog

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        self.admin.create_topic_now(name, partitions, configs)

    async def create_partitions(self, name: str, total: int) -> None:
        await self.admin.create_partitions(name, total, assignments=None, validate_only=False)

    def partitions(self) -> Iterator[Partition]:
        return self.replicas.partitions()

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.replicas.get_partition(topic, index)


async def started(data: Path) -> tuple[Broker, Topics]:
    broker = Broker(config_for(data))
    await broker.start()
    return broker, Topics(broker)


def on_disk(data: Path) -> dict[str, int]:
    document = json.loads((data / CATALOG_FILE).read_text())
    return {t["name"]: t["partitions"] for t in document["topics"]}


def dirs_of(data: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data.iterdir() if p.name.startswith(f"{topic}-"))


def fail_partition(monkeypatch: pytest.MonkeyPatch, topic: str, index: int, code: int) -> None:
    """Make writing partition ``index``'s partition.metadata fail with ``code``."""
    original = replica_manager_module.write_partition_metadata

    def failing(directory: Path, topic_id: Any) -> None:
        if directory.name == f"{topic}-{index}":
            raise OSError(code, "injected", str(directory / "partition.metadata"))
        original(directory, topic_id)

    monkeypatch.setattr(replica_manager_module, "write_partition_metadata", failing)


@pytest.mark.parametrize(
    ("code", "kind"),
    [(errno.ENAMETOOLONG, LogNameRefusedError), (errno.EMFILE, LogCreationError)],
)
async def test_a_path_fault_part_way_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, kind: type[Exception]
) -> None:
    broker, topics = await started(tmp_path)
    try:
        fail_partition(monkeypatch, "t", 2, code)
        with pytest.raises(kind):
            topics.create_topic("t", 4, {"retention.ms": "1000"})
        assert "t" not in topics.catalog and "t" not in on_disk(tmp_path)
        assert dirs_of(tmp_path, "t") == []
        assert [p for p in topics.partitions() if p.tp.topic == "t"] == []
        assert broker.log_manager.offline_log_dirs == {}
        # The log dir takes new topics, and the same one once the fault is gone.
        topics.create_topic("u", 2, {})
        monkeypatch.undo()
        topics.create_topic("t", 4, {})
        assert on_disk(tmp_path)["t"] == 4
    finally:
        await broker.stop()


async def test_a_path_fault_while_adding_partitions_keeps_the_old_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, topics = await started(tmp_path)
    try:
        topics.create_topic("t", 2, {})
        fail_partition(monkeypatch, "t", 3, errno.EEXIST)
        with pytest.raises(LogCreationError):
            await topics.create_partitions("t", 5)
        info = topics.catalog.get("t")
        assert info is not None and info.partitions == 2 and on_disk(tmp_path)["t"] == 2
        assert dirs_of(tmp_path, "t") == ["t-0", "t-1"]
        assert topics.get_partition("t", 2) is None
    finally:
        await broker.stop()


async def test_a_catalog_write_failure_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, topics = await started(tmp_path)
    try:

        def no_space(path: Path, data: bytes) -> None:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

        monkeypatch.setattr(catalog_module, "write_atomically", no_space)
        with pytest.raises(KafkaStorageError):
            topics.create_topic("t", 3, {})
        assert "t" not in topics.catalog
        assert dirs_of(tmp_path, "t") == []
        monkeypatch.undo()
        assert "t" not in on_disk(tmp_path)
    finally:
        await broker.stop()


async def test_a_disk_failure_part_way_is_completed_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, topics = await started(tmp_path)
    try:
        fail_partition(monkeypatch, "t", 1, errno.EIO)
        with pytest.raises(KafkaStorageError):
            topics.create_topic("t", 3, {})
        assert list(broker.log_manager.offline_log_dirs) == [tmp_path.absolute()]  # noqa: ASYNC240  a test's look at its own tmp dir
        # The partitions made so far are in the failed dir and cannot be removed: the
        # topic stays whole in the catalog rather than leave directories it does not name.
        assert on_disk(tmp_path)["t"] == 3
    finally:
        await broker.stop()
        monkeypatch.undo()

    broker, topics = await started(tmp_path)
    try:
        assert broker.log_manager.offline_log_dirs == {}
        assert [topics.get_partition("t", i) is not None for i in range(3)] == [True] * 3
        assert dirs_of(tmp_path, "t") == ["t-0", "t-1", "t-2"]
    finally:
        await broker.stop()
