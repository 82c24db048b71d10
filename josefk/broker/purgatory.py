"""Delayed operations: requests that wait for something to happen to a partition.

Owns ``Purgatory``: a fetch with ``min_bytes`` not yet met waits here on the partitions it
touches and is woken by whatever changes them (an append, a high watermark move), or by its
deadline. Nothing polls. A fetch session's idle partitions are watched standing instead
(``watch``): registered once, when the session finds one idle, not at every wait of every
fetch, so a follower's session of thousands of idle partitions parks at the cost of the few
it fetches.

Also owns ``OffsetPurgatory``, for acks=all produces: each waits for one offset per
partition, and a high watermark move wakes only the produces it has passed, in offset order.
With many produce requests in flight on a partition (a pipelining producer), waking them all
at every move, each to find most still short and park again, cost more than the rest of
the produce path together. DeleteRecords waiting for a partition's low watermark park in
one too. A request that parks gives its place in the broker-wide request gate back
(josefk.broker.parking's ``request_parked``, the only import from josefk): parked requests do
not count against ``queued.max.requests``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Protocol

from josefk.broker.parking import request_parked


async def _park(waiter: asyncio.Future[None], timeout_s: float) -> bool:
    """Wait for ``waiter``: True when it was woken, False at the timeout."""
    request_parked()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await waiter
    return waiter.done() and not waiter.cancelled()


class Waiter(Protocol):
    """What a key's watchers hold: a parked future, or a standing watch that takes a
    notification as a future takes its result."""

    def done(self) -> bool: ...
    def set_result(self, result: None, /) -> None: ...


class Purgatory:
    """Futures parked under keys (topic partitions); ``notify`` wakes every waiter on a key.

    Only the event loop thread uses it. A waiter is woken at most once per ``wait`` call;
    the caller re-checks its condition and waits again while time is left, which is why a
    spurious wake-up is harmless.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[Waiter]] = {}
        # Every future parked in ``wait``, also those under no key (a session waiting only
        # on its standing watches): ``close`` wakes them all.
        self._parked: set[asyncio.Future[None]] = set()
        self._closed = False

    @property
    def size(self) -> int:
        """Operations waiting right now (exported as a metric)."""
        return len(self._parked)

    async def wait(
        self,
        keys: Iterable[Hashable],
        timeout_s: float,
        *,
        waiter: asyncio.Future[None] | None = None,
    ) -> bool:
        """Park until one of ``keys`` is notified (True) or ``timeout_s`` passes (False).
        ``waiter``: the future to park, made by a caller that also hands it to standing
        watches (``watch``), which may wake it; then it parks even under no key."""
        keys = list(keys)
        if timeout_s <= 0 or (not keys and waiter is None) or self._closed:
            return False
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
        watchers_by_key = self._watchers
        for key in keys:
            watchers = watchers_by_key.get(key)
            if watchers is None:
                watchers_by_key[key] = {waiter}
            else:
                watchers.add(waiter)
        self._parked.add(waiter)
        try:
            return await _park(waiter, timeout_s)
        finally:
            self._parked.discard(waiter)
            for key in keys:
                self.unwatch(key, waiter)

    def watch(self, key: Hashable, watcher: Waiter) -> Callable[[], None]:
        """Keep ``watcher`` under ``key`` until the key is notified (its ``set_result`` is
        then called, and it is no longer kept) or the returned function is called. Standing,
        unlike ``wait``: for what is watched across many waits. Watching again is harmless."""
        watchers = self._watchers.get(key)
        if watchers is None:
            self._watchers[key] = {watcher}
        else:
            watchers.add(watcher)
        return lambda: self.unwatch(key, watcher)

    def unwatch(self, key: Hashable, watcher: Waiter) -> None:
        watchers = self._watchers.get(key)
        if watchers is not None:
            watchers.discard(watcher)
            if not watchers:
                del self._watchers[key]

    def close(self) -> None:
        """Shutting down: wake every waiter now and park no more, so that in-flight fetches
        answer with what they have instead of holding shutdown for their max wait."""
        self._closed = True
        for watchers in list(self._watchers.values()):
            for waiter in list(watchers):
                if not waiter.done():
                    waiter.set_result(None)
        for parked in self._parked:
            if not parked.done():
                parked.set_result(None)

    def notify(self, key: Hashable) -> None:
        watchers = self._watchers.pop(key, None)
        if watchers:
            for waiter in watchers:
                if not waiter.done():
                    waiter.set_result(None)


# One parked produce on one key: (offset, arrival order, the produce's future).
_OffsetWaiter = tuple[int, int, asyncio.Future[None]]


class OffsetPurgatory:
    """Futures parked under keys, each until the key's position reaches an offset.

    ``advance(key, position)`` wakes the waiters whose offset on ``key`` is at most
    ``position``; ``notify(key)`` wakes every waiter on ``key`` (leadership or the ISR
    changed: each must re-check). As ``Purgatory``: only the event loop thread uses it, and a
    woken caller re-checks its condition, so a spurious wake-up is harmless.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._heaps: dict[Hashable, list[_OffsetWaiter]] = {}
        self._order = itertools.count()
        self._waiting = 0
        self._closed = False

    @property
    def size(self) -> int:
        return self._waiting

    async def wait(self, offsets: Sequence[tuple[Hashable, int]], timeout_s: float) -> bool:
        """Park until one key reaches its offset or is notified (True), or ``timeout_s``
        passes (False)."""
        if timeout_s <= 0 or not offsets or self._closed:
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        order = next(self._order)
        for key, offset in offsets:
            heapq.heappush(self._heaps.setdefault(key, []), (offset, order, waiter))
        self._waiting += 1
        try:
            return await _park(waiter, timeout_s)
        finally:
            self._waiting -= 1
            # Entries still parked for this waiter (its other keys, or all of them after a
            # timeout) go now, so that a key that never advances does not collect them.
            for key, _ in offsets:
                heap = self._heaps.get(key)
                if heap is not None and any(entry[2] is waiter for entry in heap):
                    heap[:] = [entry for entry in heap if entry[2] is not waiter]
                    heapq.heapify(heap)
                    if not heap:
                        del self._heaps[key]

    def advance(self, key: Hashable, position: int) -> None:
        heap = self._heaps.get(key)
        if not heap:
            return
        while heap and heap[0][0] <= position:
            waiter = heapq.heappop(heap)[2]
            if not waiter.done():
                waiter.set_result(None)
        if not heap:
            del self._heaps[key]

    def notify(self, key: Hashable) -> None:
        for _, _, waiter in self._heaps.pop(key, ()):
            if not waiter.done():
                waiter.set_result(None)

    def notify_all(self) -> None:
        """Wake every waiter on every key (something all of them depend on changed)."""
        for key in list(self._heaps):
            self.notify(key)

    def close(self) -> None:
        self._closed = True
        self.notify_all()
