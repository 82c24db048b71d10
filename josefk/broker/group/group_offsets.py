"""The offsets half of a group, whatever its type: committed offsets and those still pending.

Owns ``CommittedOffset`` and ``GroupOffsets``, the base of every group type (the classic
``GroupMetadata``, the KIP-848 ``ConsumerGroup``): the offsets a group has committed, the
transactional offsets kept per producer until its marker, and the plain commits whose append
the in-sync replicas do not all hold yet. Which offsets retention may expire depends on the
group type (``_expired_offsets``); the rules that follow from pending offsets do not.

Transactional offsets (KIP-98): a TxnOffsetCommit's offsets are kept per producer id in
``pending_txn_offsets``, invisible to OffsetFetch, until that producer's COMMIT marker moves
them into ``offsets`` (each one only if it is newer in the log than the committed offset it
would replace, Kafka's rule) or its ABORT marker drops them.

Plain offsets whose append the offsets topic's in-sync replicas do not all hold yet (a
cluster) wait in ``pending_offset_commits``, invisible to OffsetFetch, as Kafka's
pendingOffsetCommits: ``complete_offset_commit`` applies one once replicated (again only if
it is newer in the log than the committed offset, so two commits in flight end in log order)
or drops it when the append failed, leaving the previous offset.

Imports nothing from josefk; never schedules, awaits or writes anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None
    # Base offset in __consumer_offsets of the batch holding the commit (-1: not known). A
    # transactional commit completes after later plain commits may have been written: the
    # one further on in the log wins, as in Kafka.
    append_offset: int = -1

    def older_than(self, other: CommittedOffset) -> bool:
        return self.append_offset < other.append_offset


class GroupOffsets:
    """A group's offsets. Changed only from the event loop thread, by the coordinator."""

    group_id: str

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        # Transactional commits not yet completed by a marker: producer id -> offsets.
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = {}
        # Plain commits appended but not yet replicated, in append order per partition.
        self.pending_offset_commits: dict[tuple[str, int], list[CommittedOffset]] = {}

    # -- what the offsets half asks of every group type ----------------------------------

    @property
    def is_empty(self) -> bool:
        """No members: offsets may be deleted, and the group removed with its last one."""
        raise NotImplementedError

    @property
    def has_pending_members(self) -> bool:
        """Members about to join (a classic group's KIP-394 ids): keep the group."""
        return False

    @property
    def is_dead(self) -> bool:
        raise NotImplementedError

    def mark_dead(self, now_ms: int) -> None:
        """The group is removed (deleted, or expired with its last offset)."""
        raise NotImplementedError

    def group_record_keys(self) -> list[bytes]:
        """The ``__consumer_offsets`` keys of the group's own records (not its offsets),
        tombstoned when the group goes."""
        raise NotImplementedError

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to, or None when that cannot be known."""
        raise NotImplementedError

    # -- plain offsets waiting for replication ---------------------------------------------

    def has_pending_offset_commits(self, tp: tuple[str, int] | None = None) -> bool:
        if tp is None:
            return bool(self.pending_offset_commits)
        return tp in self.pending_offset_commits

    def prepare_offset_commits(
        self, offsets: Sequence[tuple[tuple[str, int], CommittedOffset]]
    ) -> None:
        for tp, committed in offsets:
            self.pending_offset_commits.setdefault(tp, []).append(committed)

    def complete_offset_commit(
        self, tp: tuple[str, int], committed: CommittedOffset, *, replicated: bool
    ) -> bool:
        """The append holding ``committed`` is settled: once ``replicated`` it becomes the
        committed offset unless one further on in the log already is; otherwise it is
        dropped and the previous offset stays. A commit no longer pending (its partition's
        offsets were deleted meanwhile) changes nothing. Returns whether it was applied."""
        pending = self.pending_offset_commits.get(tp)
        if pending is None:
            return False
        # Identity, not equality: two commits of the same offset are two appends.
        index = next((i for i, c in enumerate(pending) if c is committed), None)
        if index is None:
            return False
        del pending[index]
        if not pending:
            del self.pending_offset_commits[tp]
        if not replicated:
            return False
        current = self.offsets.get(tp)
        if current is not None and not current.older_than(committed):
            return False
        self.offsets[tp] = committed
        return True

    def drop_pending_txn_offsets(
        self, producer_id: int, offsets: Sequence[tuple[tuple[str, int], CommittedOffset]]
    ) -> None:
        """A transactional commit's append failed: its offsets leave the transaction unless
        a later commit of the transaction replaced them (Kafka's failedTxnOffsetCommit)."""
        pending = self.pending_txn_offsets.get(producer_id)
        if pending is None:
            return
        for tp, committed in offsets:
            if pending.get(tp) is committed:
                del pending[tp]
        if not pending:
            del self.pending_txn_offsets[producer_id]

    # -- transactional offsets ------------------------------------------------------------

    def has_pending_txn_offsets(self, tp: tuple[str, int] | None = None) -> bool:
        """Whether a transaction has offsets pending (for ``tp``, or any partition)."""
        if tp is None:
            return bool(self.pending_txn_offsets)
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    @property
    def pending_txn_offset_count(self) -> int:
        return sum(len(pending) for pending in self.pending_txn_offsets.values())

    def add_pending_txn_offsets(
        self, producer_id: int, offsets: Sequence[tuple[tuple[str, int], CommittedOffset]]
    ) -> None:
        pending = self.pending_txn_offsets.setdefault(producer_id, {})
        for tp, committed in offsets:
            pending[tp] = committed

    def complete_txn(self, producer_id: int, *, committed: bool) -> int:
        """The producer's transaction ended: on commit its pending offsets replace the
        committed ones they are newer than; on abort they are dropped. Returns how many
        offsets became committed."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if pending is None or not committed:
            return 0
        applied = 0
        for tp, offset in pending.items():
            current = self.offsets.get(tp)
            if current is None or current.older_than(offset):
                self.offsets[tp] = offset
                applied += 1
        return applied

    def remove_offsets(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Committed and pending offsets of the partitions go (OffsetDelete, DeleteGroups,
        topic deletion): a transaction that commits later does not bring them back."""
        for tp in partitions:
            self.offsets.pop(tp, None)
            self.pending_offset_commits.pop(tp, None)
        for producer_id in list(self.pending_txn_offsets):
            pending = self.pending_txn_offsets[producer_id]
            for tp in partitions:
                pending.pop(tp, None)
            if not pending:
                del self.pending_txn_offsets[producer_id]

    def offset_partitions(self) -> list[tuple[str, int]]:
        """Every partition with a committed or pending offset."""
        found = dict.fromkeys(self.offsets)
        found.update(dict.fromkeys(self.pending_offset_commits))
        for pending in self.pending_txn_offsets.values():
            found.update(dict.fromkeys(pending))
        return list(found)

    # -- offsets retention ----------------------------------------------------------------

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Offsets that ``offsets.retention.minutes`` removes now, as Kafka decides (KIP-211):
        an explicit expire timestamp always counts; an Empty group's offsets expire
        ``retention`` after it became Empty (after their commit for groups that never had
        members); a Stable consumer group keeps the offsets of subscribed topics and expires
        the others ``retention`` after their commit; other groups keep everything. A
        partition with a transactional or plain offset pending keeps its committed offset
        (the commit's completion would otherwise race the tombstone)."""
        return [
            tp
            for tp in self._expired_offsets(now_ms, retention_ms)
            if not self.has_pending_txn_offsets(tp) and tp not in self.pending_offset_commits
        ]

    def _expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """The offsets retention would expire, before pending offsets are spared."""
        return self._explicitly_expired(now_ms)

    def _explicitly_expired(self, now_ms: int) -> list[tuple[str, int]]:
        return [
            tp
            for tp, committed in self.offsets.items()
            if committed.expire_timestamp is not None and now_ms >= committed.expire_timestamp
        ]
