"""The console's memory of the last few minutes: bounded time series of counters and gauges.

Owns ``Series`` (a fixed number of ``(time_ms, value)`` samples, oldest dropped first) and
``History`` (series by name, and the rate of a counter series between its samples). The
sampler feeds it; the API reads it. Nothing here does I/O or reads a clock: every sample
carries the time the caller took it, so tests drive it with made-up times.

Imports nothing of josefk.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable


class Series:
    """The last ``capacity`` samples of one quantity, in the order they were taken."""

    __slots__ = ("_samples",)

    def __init__(self, capacity: int) -> None:
        self._samples: collections.deque[tuple[int, float]] = collections.deque(maxlen=capacity)

    def add(self, time_ms: int, value: float) -> None:
        self._samples.append((time_ms, value))

    def points(self) -> list[tuple[int, float]]:
        return list(self._samples)

    def rates(self) -> list[tuple[int, float]]:
        """Per second between consecutive samples of a counter, stamped with the later one.

        A counter that went down (a broker restarted and its metrics started again from
        zero, or retention shrank a log) has no meaningful rate for that step: it is 0, not a
        negative spike.
        """
        out: list[tuple[int, float]] = []
        previous: tuple[int, float] | None = None
        for time_ms, value in self._samples:
            if previous is not None and time_ms > previous[0]:
                delta = value - previous[1]
                out.append((time_ms, max(0.0, delta) * 1000.0 / (time_ms - previous[0])))
            previous = (time_ms, value)
        return out

    def __len__(self) -> int:
        return len(self._samples)


class History:
    """Series by name (``records_in``, ``topic:orders``, ``lag:my-group``, ...), each keeping
    ``capacity`` samples. A name not sampled for a whole window is forgotten by ``retain``
    so that deleted topics and groups do not hold memory for ever."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._series: dict[str, Series] = {}

    def add(self, name: str, time_ms: int, value: float) -> None:
        series = self._series.get(name)
        if series is None:
            series = self._series[name] = Series(self.capacity)
        series.add(time_ms, value)

    def get(self, name: str) -> Series | None:
        return self._series.get(name)

    def points(self, name: str) -> list[tuple[int, float]]:
        series = self._series.get(name)
        return [] if series is None else series.points()

    def rates(self, name: str) -> list[tuple[int, float]]:
        series = self._series.get(name)
        return [] if series is None else series.rates()

    def retain(self, names: Iterable[str], *, prefix: str) -> None:
        """Drop the series under ``prefix`` whose names are not in ``names``."""
        keep = set(names)
        for name in [n for n in self._series if n.startswith(prefix) and n not in keep]:
            del self._series[name]
