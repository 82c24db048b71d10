"""What a consumer consumes, shared by the consumer and its group membership.

Owns ``SubscriptionState`` (the assigned partitions with each one's ``PartitionState``:
position, fetch offset, pending reset, paused; and the rebalance listener),
``ConsumerRebalanceListener`` and ``GroupMemberConfig`` (the settings group membership reads).

Why a module of its own (aiokafka has the same object): the consumer and the group
coordinator both change the assignment. The coordinator used to hold the consumer itself and
call its private methods, a type-level cycle between consumer.py and group.py. Now the consumer
creates a ``SubscriptionState``, tells it what to do when the assignment changes (drop
buffered records of partitions it lost, wake the fetcher), and hands that, not itself, to the
coordinator. Neither consumer.py nor group.py imports the other's types.

Not thread-safe: used from the consumer's event loop only. Imports josefk.client.types and
josefk.client.assignors only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from josefk.client.assignors import Assignor
from josefk.client.types import TopicPartition

log = logging.getLogger("josefk.client.subscription")


class ConsumerRebalanceListener:
    """Hooks a group member runs around each rebalance; subclass and override.

    The protocol is eager: ``on_partitions_revoked`` gets the whole assignment before the
    member joins again (after the auto-commit, if on), ``on_partitions_assigned`` the new
    one once the member has it. Exceptions are logged, not raised.
    """

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Called before giving up ``revoked``; positions are still readable here."""

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """Called once ``assigned`` is this member's; positions resolve on the next poll."""


class GroupMemberConfig(Protocol):
    """The consumer settings group membership reads (``ConsumerConfig`` has them all)."""

    @property
    def group_id(self) -> str | None: ...
    @property
    def group_instance_id(self) -> str | None: ...
    @property
    def enable_auto_commit(self) -> bool: ...
    @property
    def auto_commit_interval_ms(self) -> int: ...
    @property
    def isolation_level(self) -> str: ...
    @property
    def session_timeout_ms(self) -> int: ...
    @property
    def heartbeat_interval_ms(self) -> int: ...
    @property
    def max_poll_interval_ms(self) -> int: ...
    @property
    def rebalance_timeout_ms(self) -> int | None: ...
    @property
    def partition_assignment_strategy(self) -> Sequence[Assignor]: ...
    @property
    def request_timeout_ms(self) -> int: ...
    @property
    def retry_backoff_ms(self) -> int: ...
    @property
    def retry_backoff_max_ms(self) -> int: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def group_remote_assignor(self) -> str | None: ...


class PartitionState:
    """One assigned partition's consumption state."""

    __slots__ = (
        "fetch_offset",
        "generation",
        "high_watermark",
        "log_start_offset",
        "paused",
        "position",
        "reset",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetch_offset: int | None = None
        self.reset: int | None = None  # pending ListOffsets timestamp (earliest/latest/time)
        self.high_watermark = -1
        self.log_start_offset = -1
        self.paused = False
        self.generation = 0


AssignmentChanged = Callable[[set[TopicPartition], set[TopicPartition]], None]


class SubscriptionState:
    """The assigned partitions and their states, and the listener told of rebalances.

    ``assignment`` is the live map (the consumer's fetcher reads and updates the states in
    place); replace the set of partitions only through ``set_assignment``, which keeps the
    state of partitions that stay and calls ``on_change(kept_or_added, dropped)``.
    """

    def __init__(
        self,
        listener: ConsumerRebalanceListener | None = None,
        on_change: AssignmentChanged | None = None,
    ) -> None:
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.listener = listener
        self._on_change = on_change

    def assigned(self) -> set[TopicPartition]:
        return set(self.assignment)

    def positions(self) -> dict[TopicPartition, int]:
        """Current positions of the assigned partitions that have one."""
        return {tp: s.position for tp, s in self.assignment.items() if s.position is not None}

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment; partitions that stay keep their positions."""
        old = self.assignment
        self.assignment = {tp: old.get(tp) or PartitionState() for tp in partitions}
        if self._on_change is not None:
            self._on_change(set(self.assignment), set(old) - set(self.assignment))

    async def partitions_revoked(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Tell the listener ``partitions`` are about to be given up: the whole assignment by
        default (the classic protocol is eager), some of it in an incremental rebalance."""
        if self.listener is not None:
            revoked = set(self.assignment) if partitions is None else set(partitions)
            try:
                await self.listener.on_partitions_revoked(revoked)
            except Exception:
                log.exception("on_partitions_revoked of %r failed", self.listener)

    async def partitions_assigned(self, partitions: Sequence[TopicPartition]) -> None:
        """Tell the listener ``partitions`` are now this member's."""
        if self.listener is not None:
            try:
                await self.listener.on_partitions_assigned(set(partitions))
            except Exception:
                log.exception("on_partitions_assigned of %r failed", self.listener)
