"""A broker's live copy of the cluster metadata, kept current by an etcd watch.

Owns ``ClusterWatcher``: it reads a snapshot, then applies every change under the prefix in
revision order to ``view`` (a ``ClusterView``) and tells its listener which entries changed.
Nothing polls: changes arrive by watch.

When etcd goes away (restarted, or unreachable) the view stays as it was, so the broker keeps
serving produce and fetch for partitions whose leadership does not change; the watcher
reconnects with a capped backoff and resumes the watch after the last revision it applied,
or, if etcd compacted that history meanwhile, reads a fresh snapshot and reports the
difference as changes. ``connected`` says which of the two the broker is in.

Imports josefk.cluster.metadata_store, values and errors; never the etcd client itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from josefk.cluster.errors import EtcdUnavailableError, HistoryCompactedError, MetadataStoreError
from josefk.cluster.metadata_store import (
    EtcdMetadataStore,
    decode_broker_configs,
    group_of_key,
)
from josefk.cluster.values import (
    BrokerRegistration,
    ClusterView,
    ControllerClaim,
    MetadataEvent,
    PartitionState,
    TopicRecord,
    VersionedPartitionState,
    ViewChange,
)

logger = logging.getLogger(__name__)

__all__ = ["ClusterView", "ClusterWatcher", "ViewChange"]

_BACKOFF_START_S = 0.1
_BACKOFF_MAX_S = 2.0


Listener = Callable[[list[ViewChange]], None]


class ClusterWatcher:
    def __init__(self, store: EtcdMetadataStore, listener: Listener | None = None) -> None:
        self.store = store
        self.view = ClusterView()
        self._listener = listener
        self._task: asyncio.Task[None] | None = None
        # Exactly one of the two is set: the broker is following etcd, or serving from the
        # last view while it reconnects.
        self.connected = asyncio.Event()
        self.disconnected = asyncio.Event()
        self._advanced = asyncio.Event()

    async def start(self) -> None:
        """Read the first snapshot (raises if etcd is unreachable) and start watching."""
        self.view = ClusterView.of(await self.store.snapshot())
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        backoff = _BACKOFF_START_S
        while True:
            try:
                async for event in self.store.watch(
                    self.view.revision + 1, on_started=self._watching
                ):
                    backoff = _BACKOFF_START_S
                    changes = self._apply(event)
                    self._advanced.set()
                    self._notify(changes)
                raise EtcdUnavailableError("the etcd watch ended")
            except HistoryCompactedError:
                logger.warning("etcd compacted the history this broker missed: re-reading")
                await self._resync()
            except (MetadataStoreError, OSError) as exc:
                if self.connected.is_set():
                    logger.warning("lost the etcd watch (%s); serving from the last view", exc)
                    self.connected.clear()
                    self.disconnected.set()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)
                with contextlib.suppress(MetadataStoreError, OSError):
                    await self._resync()

    async def _resync(self) -> None:
        """A fresh snapshot replaces the view; differences are reported as changes."""
        snapshot = await self.store.snapshot()
        old, new = self.view, ClusterView.of(snapshot)
        changes = [
            *_differences("broker", old.brokers, new.brokers),
            *_differences("topic", old.topics, new.topics),
            *_differences("partition", old.partitions, new.partitions),
            *_differences("broker_config", old.broker_configs, new.broker_configs),
        ]
        changes += [ViewChange("shutdown", b) for b in old.shutting_down ^ new.shutting_down]
        if old.controller != new.controller:
            changes.append(ViewChange("controller", None, removed=new.controller is None))
        if old.acls != new.acls:
            changes.append(ViewChange("acls", None, removed=new.acls is None))
        self.view = new
        self._advanced.set()
        self._notify(changes)

    async def caught_up(self, revision: int) -> None:
        """Return once the view holds everything etcd had at ``revision``."""
        while self.view.revision < revision:
            self._advanced.clear()
            await self._advanced.wait()

    def _watching(self) -> None:
        if not self.connected.is_set():
            if self.disconnected.is_set():
                logger.info("etcd watch restored after revision %d", self.view.revision)
            self.disconnected.clear()
            self.connected.set()

    def _apply(self, event: MetadataEvent) -> list[ViewChange]:
        view = self.view
        view.changes += 1
        view.revision = max(view.revision, event.mod_revision)
        parts = self.store.split_key(event.key.encode())
        value = event.value
        removed = value is None
        if parts == ["cluster_id"] and value is not None:
            view.cluster_id = value.decode()
            return []
        if parts == ["acls"]:
            view.acls = value
            return [ViewChange("acls", None, removed)]
        if parts == ["controller"]:
            view.controller = None if value is None else ControllerClaim.decode(value)
            return [ViewChange("controller", None, removed)]
        if len(parts) == 2 and parts[0] == "brokers":
            broker_id = int(parts[1])
            if value is None:
                view.brokers.pop(broker_id, None)
            else:
                view.brokers[broker_id] = BrokerRegistration.decode(
                    value, broker_epoch=event.create_revision
                )
            return [ViewChange("broker", broker_id, removed)]
        if len(parts) == 2 and parts[0] == "topics":
            name = parts[1]
            if value is None:
                view.topics.pop(name, None)
            else:
                view.topics[name] = TopicRecord.decode(value)
            return [ViewChange("topic", name, removed)]
        if len(parts) == 2 and parts[0] == "shutdown":
            broker_id = int(parts[1])
            if value is None:
                view.shutting_down.discard(broker_id)
            else:
                view.shutting_down.add(broker_id)
            return [ViewChange("shutdown", broker_id, removed)]
        if len(parts) == 3 and parts[0] == "partitions":
            key = (parts[1], int(parts[2]))
            if value is None:
                view.partitions.pop(key, None)
            else:
                view.partitions[key] = VersionedPartitionState(
                    PartitionState.decode(value), event.mod_revision
                )
            return [ViewChange("partition", key, removed)]
        if len(parts) == 3 and parts[:2] == ["configs", "brokers"]:
            name = parts[2]
            if value is None:
                view.broker_configs.pop(name, None)
            else:
                view.broker_configs[name] = decode_broker_configs(value)
            return [ViewChange("broker_config", name, removed)]
        if len(parts) == 3 and parts[:2] == ["configs", "groups"]:
            group = group_of_key(parts[2])
            if value is None:
                view.group_configs.pop(group, None)
            else:
                view.group_configs[group] = decode_broker_configs(value)
            return []
        return []

    def _notify(self, changes: list[ViewChange]) -> None:
        if changes and self._listener is not None:
            try:
                self._listener(changes)
            except Exception:
                logger.exception("a metadata listener failed on %s", changes)


def _differences(
    kind: str, before: Mapping[Any, Any], after: Mapping[Any, Any]
) -> list[ViewChange]:
    return [
        ViewChange(kind, name, removed=name not in after)
        for name in before.keys() | after.keys()
        if before.get(name) != after.get(name)
    ]
