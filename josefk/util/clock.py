"""Injectable time and randomness: clocks and the roll-jitter source.

Owns ``Clock`` (the protocol every time-dependent class takes: the log layer, the replica
manager, the coordinators), ``SystemClock`` (the real one), ``ManualClock`` (tests move it by
hand) and ``JitterSource`` (the seeded random numbers for ``segment.jitter.ms``). Imports
nothing from josefk.

Why inject: retention, rolling by ``segment.ms``, session timeouts and the schedulers all
compare "now" with timestamps; tests drive them by advancing a ManualClock instead of sleeping, so they assert
behaviour and never timings.
"""

from __future__ import annotations

import random
import time
from typing import Protocol


class Clock(Protocol):
    """A source of time in milliseconds.

    ``milliseconds`` is wall-clock time (epoch ms), the time Kafka compares with record
    timestamps; ``monotonic_ms`` never goes back and is what intervals are measured with.
    """

    def milliseconds(self) -> int: ...

    def monotonic_ms(self) -> int: ...


class SystemClock:
    """The real clock."""

    __slots__ = ()

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that only moves when told to; wall and monotonic time advance together.

    Not thread-safe to advance while another thread reads it; tests advance it from the
    event loop's thread.
    """

    __slots__ = ("_monotonic_ms", "_wall_ms")

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic_ms: int = 0) -> None:
        self._wall_ms = wall_ms
        self._monotonic_ms = monotonic_ms

    def milliseconds(self) -> int:
        return self._wall_ms

    def monotonic_ms(self) -> int:
        return self._monotonic_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"a clock cannot go back ({ms} ms)")
        self._wall_ms += ms
        self._monotonic_ms += ms

    def set_wall(self, wall_ms: int) -> None:
        """Jump the wall clock (as NTP might), leaving monotonic time alone."""
        self._wall_ms = wall_ms

    def __repr__(self) -> str:
        return f"ManualClock(wall_ms={self._wall_ms}, monotonic_ms={self._monotonic_ms})"


class JitterSource:
    """Draws each new segment's roll jitter, uniformly in [0, min(segment.jitter.ms, segment.ms)).

    Kafka subtracts a random jitter from ``segment.ms`` per segment so that partitions created
    together do not all roll (and hit the disk) at the same instant. Seed it in tests to get
    reproducible jitters.
    """

    __slots__ = ("_random",)

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)

    def segment_jitter_ms(self, segment_jitter_ms: int, segment_ms: int) -> int:
        bound = min(segment_jitter_ms, segment_ms)
        if bound <= 0:
            return 0
        return self._random.randrange(bound)
