"""A clock-driven task scheduler for background work, and an inline executor.

Owns ``Scheduler`` (delayed and periodic tasks: retention checks, flushes, checkpoints, the
delayed removal of ``.deleted`` files, the coordinators' expirations) and ``InlineExecutor``.
Imports josefk.util.clock only.

Design: tasks are due at a time on the injected clock's monotonic scale. ``run_due`` runs every
task that is due now and returns; the broker runs ``run_forever``, which sleeps on the event
loop until the next due time (or until a new task is scheduled), while tests advance a
ManualClock and call ``run_due`` step by step, so nothing in a test ever sleeps.

Tasks run on the event loop's thread. A task that does blocking disk work hands it to an
executor itself (``loop.run_in_executor``); ``schedule_blocking`` does that for a plain
function. ``InlineExecutor`` runs such work in the calling thread, which keeps tests
deterministic.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import heapq
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from josefk.util.clock import Clock

_log = logging.getLogger(__name__)

_MAX_SLEEP_S = 3600.0

T = TypeVar("T")
TaskFunction = Callable[[], Awaitable[None] | None]


class InlineExecutor(concurrent.futures.Executor):
    """An executor that runs each submitted call at once in the caller's thread (for tests)."""

    def submit(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001  handed to the future, as an executor does
            future.set_exception(exc)
        return future


@dataclass(eq=False)
class ScheduledTask:
    """A handle on a scheduled task; ``cancel`` stops future runs (a running one finishes)."""

    name: str
    function: TaskFunction
    due_ms: int
    period_ms: int | None
    cancelled: bool = False
    runs: int = 0
    _sequence: int = field(default=0, repr=False)

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    """Runs named tasks after a delay, optionally every ``period_ms``, on the event loop.

    A periodic task's next run is scheduled from when the current run started, as Kafka's
    fixed-rate scheduling does; a task that raises is logged and, if periodic, runs again at
    its next period (a failing retention check must not stop all future checks).

    Not thread-safe: schedule and run from the event loop's thread only.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._queue: list[tuple[int, int, ScheduledTask]] = []
        self._sequence = itertools.count()
        self._wakeup: asyncio.Event | None = None
        self._shutdown = False

    @property
    def clock(self) -> Clock:
        return self._clock

    def schedule(
        self,
        name: str,
        function: TaskFunction,
        *,
        delay_ms: int = 0,
        period_ms: int | None = None,
    ) -> ScheduledTask:
        """Run ``function`` (sync or async) after ``delay_ms``, then every ``period_ms``."""
        if self._shutdown:
            raise RuntimeError(f"scheduler is shut down; cannot schedule {name!r}")
        if period_ms is not None and period_ms <= 0:
            raise ValueError(f"period of {name!r} must be positive, got {period_ms}")
        task = ScheduledTask(
            name, function, self._clock.monotonic_ms() + max(0, delay_ms), period_ms
        )
        self._push(task)
        return task

    def schedule_blocking(
        self,
        name: str,
        function: Callable[[], object],
        executor: concurrent.futures.Executor | None,
        *,
        delay_ms: int = 0,
    ) -> ScheduledTask:
        """Run a blocking ``function`` once, after ``delay_ms``, in ``executor`` (off the loop)."""

        async def run() -> None:
            await asyncio.get_running_loop().run_in_executor(executor, function)

        return self.schedule(name, run, delay_ms=delay_ms)

    def _push(self, task: ScheduledTask) -> None:
        task._sequence = next(self._sequence)
        heapq.heappush(self._queue, (task.due_ms, task._sequence, task))
        if self._wakeup is not None:
            self._wakeup.set()

    def next_due_ms(self) -> int | None:
        """The monotonic time of the earliest pending task, or None when nothing is pending."""
        while self._queue and self._queue[0][2].cancelled:
            heapq.heappop(self._queue)
        return self._queue[0][0] if self._queue else None

    @property
    def pending(self) -> list[ScheduledTask]:
        return [entry[2] for entry in sorted(self._queue) if not entry[2].cancelled]

    async def run_due(self) -> int:
        """Run every task due by now (in due order) and return how many ran."""
        now = self._clock.monotonic_ms()
        ran = 0
        while self._queue and self._queue[0][0] <= now:
            _, _, task = heapq.heappop(self._queue)
            if task.cancelled:
                continue
            await self._run(task)
            ran += 1
            if task.period_ms is not None and not task.cancelled and not self._shutdown:
                task.due_ms += task.period_ms
                if task.due_ms <= now:
                    # Fell behind (a long pause): skip the missed runs instead of bursting.
                    task.due_ms = now + task.period_ms
                self._push(task)
        return ran

    async def _run(self, task: ScheduledTask) -> None:
        task.runs += 1
        try:
            result = task.function()
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001  logged; one failing task must not stop the others
            _log.exception("scheduled task %s failed", task.name)

    async def run_forever(self) -> None:
        """Run tasks as they fall due until ``shutdown``; sleeps on the loop, not in a thread."""
        self._wakeup = asyncio.Event()
        try:
            while not self._shutdown:
                await self.run_due()
                due = self.next_due_ms()
                self._wakeup.clear()
                # Capped: periods of Long.MAX ms ("never") would overflow the loop's timer.
                timeout = (
                    None
                    if due is None
                    else min(max(0, due - self._clock.monotonic_ms()) / 1000, _MAX_SLEEP_S)
                )
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a
                # cancellation that arrives in the loop iteration where the event is set
                # (a shutdown cancelling a scheduled task, then this one), and the loop would
                # then never end.
                try:
                    async with asyncio.timeout(timeout):
                        await self._wakeup.wait()
                except TimeoutError:
                    pass
        finally:
            self._wakeup = None

    def shutdown(self) -> None:
        """Cancel every pending task and stop ``run_forever``."""
        self._shutdown = True
        for _, _, task in self._queue:
            task.cancel()
        self._queue.clear()
        if self._wakeup is not None:
            self._wakeup.set()
