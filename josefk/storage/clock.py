"""Moved to josefk.util.clock; this name stays while branches written against it merge.

Import ``Clock``, ``SystemClock``, ``ManualClock`` and ``JitterSource`` from josefk.util.clock.
"""

from josefk.util.clock import Clock, JitterSource, ManualClock, SystemClock

__all__ = ["Clock", "JitterSource", "ManualClock", "SystemClock"]
