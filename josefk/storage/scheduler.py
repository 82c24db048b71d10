"""Moved to josefk.util.scheduler; this name stays while branches written against it merge.

Import ``Scheduler``, ``ScheduledTask`` and ``InlineExecutor`` from josefk.util.scheduler.
"""

from josefk.util.scheduler import InlineExecutor, ScheduledTask, Scheduler, TaskFunction

__all__ = ["InlineExecutor", "ScheduledTask", "Scheduler", "TaskFunction"]
