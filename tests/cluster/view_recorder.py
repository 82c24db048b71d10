"""Helpers for tests that drive a real ClusterWatcher over a real etcd: a connected metadata
store, and a listener that records the watcher's changes so a test can wait for one by watch
rather than by polling."""

from __future__ import annotations

import asyncio

from etcd_server import EtcdServer

from josefk.cluster.metadata_store import EtcdMetadataStore, parse_endpoints
from josefk.cluster.watcher import ViewChange


async def store_on(etcd: EtcdServer) -> EtcdMetadataStore:
    store = EtcdMetadataStore(parse_endpoints(etcd.endpoint), timeout_s=2.0)
    await store.connect()
    return store


class Recorder:
    """The watcher's listener: what changed, to wait for a change by watch."""

    def __init__(self) -> None:
        self.changes: list[ViewChange] = []
        self._arrived = asyncio.Event()

    def __call__(self, changes: list[ViewChange]) -> None:
        self.changes.extend(changes)
        self._arrived.set()

    async def until(self, change: ViewChange, timeout_s: float = 30.0) -> None:
        async with asyncio.timeout(timeout_s):
            while change not in self.changes:
                self._arrived.clear()
                await self._arrived.wait()
