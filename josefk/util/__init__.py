"""The bottom utility layer: injectable time and the clock-driven task scheduler.

Owns ``josefk.util.clock`` (``Clock``, ``SystemClock``, ``ManualClock``, ``JitterSource``) and
``josefk.util.scheduler`` (``Scheduler``, ``InlineExecutor``), used alike by the log layer
(retention, rolls, flushes), the replica manager and the group and transaction coordinators.
Imports the standard library only; every josefk package may import it (tests/test_layering.py).
"""
