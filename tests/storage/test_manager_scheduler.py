"""The clock-driven scheduler and the injectable clocks the storage layer uses."""

from __future__ import annotations

import asyncio

import pytest

from josefk.util.clock import JitterSource, ManualClock, SystemClock
from josefk.util.scheduler import InlineExecutor, Scheduler


def test_manual_clock() -> None:
    clock = ManualClock(wall_ms=1000, monotonic_ms=5)
    clock.advance(10)
    assert (clock.milliseconds(), clock.monotonic_ms()) == (1010, 15)
    clock.set_wall(0)
    assert (clock.milliseconds(), clock.monotonic_ms()) == (0, 15)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_system_clock_is_sane() -> None:
    clock = SystemClock()
    assert clock.milliseconds() > 1_600_000_000_000
    assert clock.monotonic_ms() <= clock.monotonic_ms()


def test_jitter_is_seeded_and_bounded() -> None:
    a = [JitterSource(1).segment_jitter_ms(1000, 600) for _ in range(5)]
    b = [JitterSource(1).segment_jitter_ms(1000, 600) for _ in range(5)]
    assert a == b
    source = JitterSource(2)
    draws = [source.segment_jitter_ms(1000, 600) for _ in range(200)]
    assert all(0 <= d < 600 for d in draws) and len(set(draws)) > 50
    assert source.segment_jitter_ms(0, 600) == 0


async def test_delayed_and_periodic_tasks_run_in_due_order() -> None:
    clock = ManualClock()
    scheduler = Scheduler(clock)
    runs: list[str] = []

    async def periodic() -> None:
        runs.append(f"p@{clock.monotonic_ms()}")

    scheduler.schedule("once", lambda: runs.append(f"o@{clock.monotonic_ms()}"), delay_ms=150)
    task = scheduler.schedule("periodic", periodic, delay_ms=100, period_ms=100)
    assert await scheduler.run_due() == 0
    clock.advance(100)
    assert await scheduler.run_due() == 1
    clock.advance(100)
    await scheduler.run_due()
    assert runs == ["p@100", "o@200", "p@200"]
    # Falling far behind skips the missed runs instead of running them in a burst.
    clock.advance(1000)
    assert await scheduler.run_due() == 1
    assert scheduler.next_due_ms() == 1300
    task.cancel()
    clock.advance(1000)
    assert await scheduler.run_due() == 0
    assert task.runs == 3


async def test_a_failing_task_keeps_its_schedule() -> None:
    clock = ManualClock()
    scheduler = Scheduler(clock)
    calls = 0

    def flaky() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    scheduler.schedule("flaky", flaky, period_ms=10)
    await scheduler.run_due()
    clock.advance(10)
    await scheduler.run_due()
    assert calls == 2


async def test_blocking_work_goes_to_the_executor() -> None:
    clock = ManualClock()
    scheduler = Scheduler(clock)
    done: list[int] = []
    scheduler.schedule_blocking("delete", lambda: done.append(1), InlineExecutor(), delay_ms=5)
    clock.advance(5)
    await scheduler.run_due()
    assert done == [1]


async def test_run_forever_wakes_for_new_tasks_and_stops_on_shutdown() -> None:
    clock = ManualClock()
    scheduler = Scheduler(clock)
    ran = asyncio.Event()
    runner = asyncio.create_task(scheduler.run_forever())
    await asyncio.sleep(0)  # let it start waiting with nothing scheduled
    scheduler.schedule("now", ran.set)
    await asyncio.wait_for(ran.wait(), 5)
    scheduler.shutdown()
    await asyncio.wait_for(runner, 5)
    assert scheduler.pending == []
    with pytest.raises(RuntimeError):
        scheduler.schedule("late", lambda: None)


async def test_run_forever_ends_when_cancelled_as_it_is_woken() -> None:
    """A cancel shortly after a wake-up (a shutdown that schedules or cancels work, then
    cancels the runner) ends the runner. Python 3.11's wait_for swallowed that cancellation
    while a task was pending, and the runner then waited forever (a broker's stop hung)."""
    for iterations in range(4):
        scheduler = Scheduler(ManualClock())
        scheduler.schedule("far", lambda: None, delay_ms=3_600_000)
        runner = asyncio.create_task(scheduler.run_forever())
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # waiting for "far"
        scheduler.schedule("later", lambda: None, delay_ms=60_000)  # wakes the runner
        for _ in range(iterations):
            await asyncio.sleep(0)
        runner.cancel()
        done, _ = await asyncio.wait([runner], timeout=5)
        scheduler.shutdown()
        assert done == {runner}, f"the runner ignored a cancel {iterations} iterations after waking"
