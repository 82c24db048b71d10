"""One transactional id's metadata and the states a transaction goes through (KIP-98).

Owns ``TxnState`` (Kafka's states, with the ids the transaction log stores), the legal
transitions, and ``TxnMetadata`` (producer id and epoch, timeout, state, partitions, times,
the pending transition). A transition is prepared (``prepare``: a new value, checked against
the legal previous states), written to the log, and only then applied (``apply``); while one
is pending, every other request for the id is answered CONCURRENT_TRANSACTIONS.

Imports josefk.storage.offsets (TopicPartition) and the log schema; nothing of the broker.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Final

from josefk.broker.txn.log_schema import TxnLogValue
from josefk.storage.offsets import TopicPartition

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
# Kafka bumps an epoch only below Short.MAX_VALUE - 1; beyond that a new id is needed.
MAX_BUMPABLE_EPOCH: Final = 32766


class TxnState(enum.IntEnum):
    """The states, with the ids Kafka's transaction log stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use (``PrepareCommit``)."""
        return _DISPLAY[self]

    @classmethod
    def from_display_name(cls, name: str) -> TxnState | None:
        return _BY_DISPLAY.get(name)


_DISPLAY: Final = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_DISPLAY: Final = {name: state for state, name in _DISPLAY.items()}

_COMPLETE: Final = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})

# The states each state may be entered from (Kafka's TransactionState.validPreviousStates).
VALID_PREVIOUS: Final[dict[TxnState, frozenset[TxnState]]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY}) | _COMPLETE,
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY}) | _COMPLETE,
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY}) | _COMPLETE,
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


class IllegalTransitionError(Exception):
    """A transition the state machine does not allow (a bug, not a client error)."""


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_BUMPABLE_EPOCH


@dataclass(frozen=True, slots=True)
class TxnTransition:
    """What a transition writes and then applies: the metadata's next values."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_timestamp_ms: int
    last_update_timestamp_ms: int

    def log_value(self) -> TxnLogValue:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(self.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return TxnLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            state=int(self.state),
            partitions=tuple((topic, tuple(ids)) for topic, ids in by_topic.items()),
            last_update_timestamp_ms=self.last_update_timestamp_ms,
            start_timestamp_ms=self.start_timestamp_ms,
        )


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id. Mutated only by ``apply`` (after the log write) and by the
    pending-state bookkeeping; event loop thread only."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    # KIP-360: the id and epoch before the last bump, so that a retried InitProducerId gets
    # the same answer again. Not in the v0 log record: -1 after a reload, as in Kafka.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # The transition being written, if any (Kafka's pendingState).
    pending: TxnState | None = None
    # The coordinator epoch (leader epoch of the state partition) the metadata was loaded at.
    coordinator_epoch: int = 0

    @classmethod
    def from_log(
        cls, transactional_id: str, value: TxnLogValue, *, coordinator_epoch: int
    ) -> TxnMetadata:
        try:
            state = TxnState(value.state)
        except ValueError:
            raise IllegalTransitionError(f"unknown transaction state id {value.state}") from None
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            timeout_ms=value.transaction_timeout_ms,
            state=state,
            partitions={TopicPartition(topic, p) for topic, ids in value.partitions for p in ids},
            start_timestamp_ms=value.start_timestamp_ms,
            last_update_timestamp_ms=value.last_update_timestamp_ms,
            coordinator_epoch=coordinator_epoch,
        )

    def current(self) -> TxnTransition:
        return TxnTransition(
            producer_id=self.producer_id,
            last_producer_id=self.last_producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch,
            timeout_ms=self.timeout_ms,
            state=self.state,
            partitions=frozenset(self.partitions),
            start_timestamp_ms=self.start_timestamp_ms,
            last_update_timestamp_ms=self.last_update_timestamp_ms,
        )

    def prepare(self, state: TxnState, now_ms: int, **changes: object) -> TxnTransition:
        """The transition to ``state`` (with ``changes`` to the other fields), marked
        pending. Raises IllegalTransitionError when ``state`` may not follow the current
        one or another transition is pending. Must not be awaited between the caller's
        checks and this call."""
        if self.pending is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {self.pending.display_name} is already pending"
            )
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {self.state.display_name} -> {state.display_name}"
            )
        transition = replace(self.current(), state=state, last_update_timestamp_ms=now_ms)
        if changes:
            transition = replace(transition, **changes)  # type: ignore[arg-type]
        self.pending = state
        return transition

    def apply(self, transition: TxnTransition) -> None:
        """The transition's record is in the log: make it the metadata."""
        self.producer_id = transition.producer_id
        self.last_producer_id = transition.last_producer_id
        self.producer_epoch = transition.producer_epoch
        self.last_producer_epoch = transition.last_producer_epoch
        self.timeout_ms = transition.timeout_ms
        self.state = transition.state
        self.partitions = set(transition.partitions)
        self.start_timestamp_ms = transition.start_timestamp_ms
        self.last_update_timestamp_ms = transition.last_update_timestamp_ms
        self.pending = None

    def abandon(self) -> None:
        """The transition's write failed: nothing changes."""
        self.pending = None
