"""Delayed operations: requests that wait for something to happen to a partition.

Owns ``Purgatory``: a fetch with ``min_bytes`` not yet met, or a produce with acks=-1 whose
high watermark has not passed it, waits here on the partitions it touches and is woken by
whatever changes them (an append, a high watermark move), or by its deadline. Nothing polls.
Imports nothing from josefk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Hashable, Iterable


class Purgatory:
    """Futures parked under keys (topic partitions); ``notify`` wakes every waiter on a key.

    Only the event loop thread uses it. A waiter is woken at most once per ``wait`` call;
    the caller re-checks its condition and waits again while time is left, which is why a
    spurious wake-up is harmless.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[asyncio.Future[None]]] = {}
        self._waiting = 0
        self._closed = False

    @property
    def size(self) -> int:
        """Operations waiting right now (exported as a metric)."""
        return self._waiting

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Park until one of ``keys`` is notified (True) or ``timeout_s`` passes (False)."""
        keys = list(keys)
        if timeout_s <= 0 or not keys or self._closed:
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._watchers.setdefault(key, set()).add(waiter)
        self._waiting += 1
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await waiter
            return waiter.done() and not waiter.cancelled()
        finally:
            self._waiting -= 1
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(waiter)
                    if not watchers:
                        del self._watchers[key]

    def close(self) -> None:
        """Shutting down: wake every waiter now and park no more, so that in-flight fetches
        answer with what they have instead of holding shutdown for their max wait."""
        self._closed = True
        for watchers in list(self._watchers.values()):
            for waiter in watchers:
                if not waiter.done():
                    waiter.set_result(None)

    def notify(self, key: Hashable) -> None:
        watchers = self._watchers.pop(key, None)
        if watchers:
            for waiter in watchers:
                if not waiter.done():
                    waiter.set_result(None)
