"""The topic catalog of a single broker: which topics exist, their ids, partition counts and
config overrides, persisted in the first log dir.

Owns ``TopicCatalog`` and the file ``josefk-topics.json``. Kafka keeps this in its metadata
log (KRaft); one node needs no consensus, so a small JSON document replaced atomically
(write temp, fsync, rename, fsync dir) does the same job. Each partition directory also gets
Kafka's ``partition.metadata`` file (``version: 0`` / ``topic_id: <base64>``) so that Kafka's
tools read the topic id where they expect it.

Imports the broker's and josefk.storage's error types only; must not import josefk.protocol
or the handlers.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from josefk.broker.errors import InvalidTopicNameError
from josefk.fileio import write_atomically
from josefk.storage.errors import KafkaStorageError

_T = TypeVar("_T")

CATALOG_FILE: Final = "josefk-topics.json"
PARTITION_METADATA_FILE: Final = "partition.metadata"
MAX_TOPIC_NAME_LENGTH: Final = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
# The broker's own topics: every group's committed offsets, the transaction log, and the share
# groups' state (KIP-932).
INTERNAL_TOPICS: Final = frozenset(
    {"__consumer_offsets", "__transaction_state", "__share_group_state"}
)


def is_internal_topic(name: str) -> bool:
    """Whether ``name`` is one of the broker's own topics. Clients may describe and read
    them; the broker refuses every request that would delete, grow, truncate, reconfigure or
    write them (INVALID_TOPIC_EXCEPTION with ``internal_topic_refusal``), because the group
    coordinator's state lives there and a change would lose it at the next start. Kafka's
    broker refuses only DeleteRecords and writes and leaves the rest to its command-line
    tools; josefk refuses them at the broker, so the Admin API cannot do it either."""
    return name in INTERNAL_TOPICS


def internal_topic_refusal(name: str, action: str) -> str:
    """The error message for an attempt to ``action`` ("delete", "add partitions to", ...)
    an internal topic."""
    return (
        f"Topic '{name}' is an internal topic of the broker: clients cannot {action} it "
        "(describing and reading it are allowed)"
    )


class InvalidTopicError(InvalidTopicNameError, ValueError):
    """A topic name Kafka would refuse (INVALID_TOPIC_EXCEPTION)."""


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1-249 characters of [a-zA-Z0-9._-], and not "." or ".."."""
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters long, more than {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_', '-'"
        )


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return is_internal_topic(self.name)


def topic_id_base64(topic_id: uuid.UUID) -> str:
    """Kafka prints topic ids as URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def collision_message(name: str, colliding: str) -> str:
    return (
        f"Topic '{name}' collides with existing topic: {colliding} "
        "('.' and '_' are the same in metric names)"
    )


class TopicCatalog:
    """Topics by name and by id. Changed only from the event loop thread; each change is
    written to disk before the method returns, so a crash never forgets a created topic."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._path = directory / CATALOG_FILE
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}

    @classmethod
    def load(cls, directory: Path) -> TopicCatalog:
        catalog = cls(directory)
        if catalog._path.exists():
            try:
                document = json.loads(catalog._path.read_text())
                for entry in document["topics"]:
                    info = TopicInfo(
                        name=entry["name"],
                        topic_id=uuid.UUID(entry["topic_id"]),
                        partitions=int(entry["partitions"]),
                        configs={str(k): str(v) for k, v in entry.get("configs", {}).items()},
                    )
                    catalog._add(info)
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{catalog._path}: unreadable topic catalog: {exc}") from exc
        return catalog

    def _add(self, info: TopicInfo) -> None:
        self._by_name[info.name] = info
        self._by_id[info.topic_id] = info

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def colliding_topic(self, name: str) -> str | None:
        """An existing topic whose name equals ``name`` once '.' and '_' are made the same
        (Kafka's rule: both become '_' in metric names, so ``a.b`` and ``a_b`` cannot
        coexist); None when there is none."""
        if "." not in name and "_" not in name:
            return None
        unified = name.replace(".", "_")
        for existing in self._by_name:
            if existing != name and existing.replace(".", "_") == unified:
                return existing
        return None

    def topics(self) -> list[TopicInfo]:
        return sorted(self._by_name.values(), key=lambda info: info.name)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def create(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(configs))
        self._write([*self._by_name.values(), info])
        self._add(info)
        return info

    def put(self, info: TopicInfo) -> None:
        """Record a topic as the cluster's metadata has it (its id included), replacing any
        entry of that name: in a cluster the catalog mirrors etcd."""
        old = self._by_name.get(info.name)
        if old == info:
            return
        if old is not None:
            self._by_id.pop(old.topic_id, None)
        self._add(info)
        self.save()

    def adopt(self, name: str, partitions: int) -> TopicInfo:
        """Record a topic found on disk but missing from the catalog (a log dir from Kafka,
        or a catalog lost in a crash before its first write)."""
        return self.create(name, partitions, {})

    def set_partitions(self, name: str, partitions: int) -> None:
        info = self._by_name[name]
        old = info.partitions
        info.partitions = partitions
        try:
            self.save()
        except BaseException:
            info.partitions = old
            raise

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        info = self._by_name[name]
        old = info.configs
        info.configs = dict(configs)
        try:
            self.save()
        except BaseException:
            info.configs = old
            raise

    def delete(self, name: str) -> TopicInfo | None:
        info = self._by_name.get(name)
        if info is not None:
            self._write([other for other in self._by_name.values() if other is not info])
            del self._by_name[name]
            self._by_id.pop(info.topic_id, None)
        return info

    def save(self) -> None:
        self._write(list(self._by_name.values()))

    def _write(self, topics: list[TopicInfo]) -> None:
        """Write ``topics`` as the whole catalog. Every change writes first and changes the
        catalog in memory only once the write succeeded, so memory and disk never disagree
        (an OSError leaves both as they were)."""
        document = {
            "version": 1,
            "topics": [
                {
                    "name": info.name,
                    "topic_id": str(info.topic_id),
                    "partitions": info.partitions,
                    "configs": info.configs,
                }
                for info in sorted(topics, key=lambda info: info.name)
            ],
        }
        write_atomically(self._path, json.dumps(document, indent=1).encode())

    @property
    def path(self) -> Path:
        return self._path


def change_catalog(catalog: TopicCatalog, change: Callable[[], _T]) -> _T:
    """Run ``change``, a change of ``catalog``; its OSError (the first log dir failing) is
    KafkaStorageError, the error a client's request is answered with."""
    try:
        return change()
    except OSError as exc:
        raise KafkaStorageError(
            f"cannot write the topic catalog: {exc.strerror or exc}", path=catalog.path
        ) from exc


def _partition_metadata_text(topic_id: uuid.UUID) -> str:
    return f"version: 0\ntopic_id: {topic_id_base64(topic_id)}\n"


def partition_metadata_is_current(partition_dir: Path, topic_id: uuid.UUID) -> bool:
    """Whether ``partition.metadata`` already says this topic id (blocking; False when the
    file is missing or unreadable: writing it then reports the error)."""
    try:
        with open(os.path.join(partition_dir, PARTITION_METADATA_FILE), "rb") as file:
            return file.read() == _partition_metadata_text(topic_id).encode()
    except OSError:
        return False


def write_partition_metadata(partition_dir: Path, topic_id: uuid.UUID) -> None:
    path = partition_dir / PARTITION_METADATA_FILE
    text = _partition_metadata_text(topic_id)
    if path.exists() and path.read_text() == text:
        return
    write_atomically(path, text.encode())
