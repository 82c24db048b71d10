"""The offsets half of the group coordinator: commits, fetches, deletion, expiry, and the
transactional offsets pending until their marker.

Owns ``OffsetManager`` (Kafka's OffsetMetadataManager), ``OffsetCommitEntry`` and the record
of a commit whose append waits for the in-sync replicas. It works on any group type through
``group_offsets.GroupOffsets`` and the few questions every group answers (``is_empty``,
``subscribed_topics``, ``mark_dead``); whether a member may commit is its group type's
manager's to say (``classic.py``, ``consumer.py``), checked by the coordinator before it calls
here.

Durability: each commit is one batch appended through the ``OffsetsStore`` before the caller
is answered; deletion and expiry write tombstones.

Replication of commits: an OffsetCommit whose append the offsets topic's in-sync replicas do
not all hold yet (a cluster) stays pending in its group, invisible to OffsetFetch, until the
handler, having waited for the replicas, hands the append back (``settle_commit``): then it
is applied, or on a failed append (NOT_ENOUGH_REPLICAS, timeout, leadership lost) dropped with
the previous offset kept, as Kafka's pendingOffsetCommits. Where the append is replicated as
it is written (the single node) the offsets are applied at once and nothing is tracked. A
TxnOffsetCommit whose append fails likewise leaves the transaction's pending offsets.

Concurrency: event loop thread only; no method awaits.

Imports the group package's data modules, the shard and the store, josefk.protocol.errors
(the codes only); must not import handlers, the codec or the membership managers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from josefk.broker.group.group_offsets import CommittedOffset, GroupOffsets
from josefk.broker.group.offsets_schema import (
    OffsetCommitValue,
    OffsetKey,
    encode_offset_key,
    encode_offset_value,
)
from josefk.broker.group.shard import ShardPart
from josefk.broker.group.store import KeyValue, StoreAppendError, StoreWrite
from josefk.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from josefk.broker.replica_manager import AppendOutcome

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class InFlightCommit:
    """Offsets whose append waits for the offsets topic's in-sync replicas; a producer id
    for a transactional commit, else -1."""

    outcome: AppendOutcome
    group: GroupOffsets
    offsets: list[tuple[tuple[str, int], CommittedOffset]]
    producer_id: int = -1


class OffsetManager(ShardPart):
    """The committed offsets of every group of one coordinator shard."""

    def settle_commit(self, in_flight: InFlightCommit, error: BaseException | None) -> None:
        """The wait for a commit's append is over: replicated (``error`` None), its offsets
        become committed unless a commit further on in the log already is; otherwise they
        are dropped (a transaction's leave the transaction)."""
        group = in_flight.group
        replicated = error is None
        if in_flight.producer_id >= 0:
            if not replicated:
                group.drop_pending_txn_offsets(in_flight.producer_id, in_flight.offsets)
                self._report_pending()
            return
        applied = sum(
            group.complete_offset_commit(tp, committed, replicated=replicated)
            for tp, committed in in_flight.offsets
        )
        if not replicated:
            logger.info(
                "group %s: a commit of %d offsets was not replicated: %s",
                group.group_id,
                len(in_flight.offsets),
                error,
            )
        if applied and self._probe is not None:
            self._probe.offsets_committed(group.group_id, applied)

    def txn_store_offsets(
        self,
        group: GroupOffsets,
        producer_id: int,
        producer_epoch: int,
        entries: Sequence[OffsetCommitEntry],
        *,
        known: bool,
    ) -> list[ErrorCode]:
        """Write a TxnOffsetCommit's offsets as the producer's transactional batch and keep
        them pending until its marker (``complete_txn``); one error per entry, in order. A
        group not ``known`` yet is added to the shard once something is written."""
        group_id = group.group_id
        errors, accepted, awaiting = self._write_offsets(
            group, entries, -1, producer_id=producer_id, producer_epoch=producer_epoch
        )
        if accepted:
            if not known:
                self._groups[group_id] = group  # type: ignore[assignment]
            if awaiting is not None:
                self._in_flight[id(awaiting)] = InFlightCommit(
                    awaiting, group, accepted, producer_id
                )
            group.add_pending_txn_offsets(producer_id, accepted)
            self._txn_groups.setdefault(producer_id, set()).add(group_id)
            self._report_pending()
        return errors

    def store_offsets(
        self, group: GroupOffsets, entries: Sequence[OffsetCommitEntry], retention_ms: int
    ) -> list[ErrorCode]:
        errors, accepted, awaiting = self._write_offsets(group, entries, retention_ms)
        if awaiting is not None:
            group.prepare_offset_commits(accepted)
            self._in_flight[id(awaiting)] = InFlightCommit(awaiting, group, accepted)
            return errors
        for tp, committed in accepted:
            group.offsets[tp] = committed
        if accepted and self._probe is not None:
            self._probe.offsets_committed(group.group_id, len(accepted))
        return errors

    def _write_offsets(
        self,
        group: GroupOffsets,
        entries: Sequence[OffsetCommitEntry],
        retention_ms: int,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[
        list[ErrorCode], list[tuple[tuple[str, int], CommittedOffset]], AppendOutcome | None
    ]:
        """Append the entries as one batch (transactional with a producer id); one error per
        entry, the offsets written (none when the append failed) and the append's outcome
        when it is still to be replicated."""
        now = self._clock.milliseconds()
        expire = now + retention_ms if retention_ms >= 0 else None
        errors: list[ErrorCode] = []
        records: list[KeyValue] = []
        accepted: list[tuple[tuple[str, int], CommittedOffset]] = []
        limit = self.config.offset_metadata_max_bytes
        for entry in entries:
            metadata = entry.metadata or ""
            if len(metadata.encode()) > limit:
                errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(ErrorCode.NONE)
            committed = CommittedOffset(entry.offset, entry.leader_epoch, metadata, now, expire)
            accepted.append(((entry.topic, entry.partition), committed))
            records.append(
                (
                    encode_offset_key(OffsetKey(group.group_id, entry.topic, entry.partition)),
                    encode_offset_value(
                        OffsetCommitValue(entry.offset, metadata, now, entry.leader_epoch, expire)
                    ),
                )
            )
        if not records:
            return errors, [], None
        try:
            write: StoreWrite = self._store.append(
                self.partition_for(group.group_id),
                records,
                now,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
            )
        except StoreAppendError as exc:
            return [e if e else ErrorCode(exc.error) for e in errors], [], None
        for _, committed in accepted:
            committed.append_offset = write.base_offset
        return errors, accepted, write.awaiting

    def complete_txn(self, partition: int, producer_id: int, *, committed: bool) -> int:
        """A COMMIT or ABORT marker of ``producer_id`` was written to ``partition`` of the
        offsets topic (ReplicaManager.txn_marker_listeners): the pending offsets of that
        producer in the partition's groups become committed or are dropped. Returns how many
        offsets became committed. Markers of partitions this broker does not coordinate are
        none of its business (their groups load from the log when it does)."""
        if self._owned is not None and partition not in self._owned:
            return 0
        group_ids = self._txn_groups.get(producer_id)
        if not group_ids:
            return 0
        applied = 0
        for group_id in [g for g in group_ids if self.partition_for(g) == partition]:
            group_ids.discard(group_id)
            group = self._groups.get(group_id)
            if group is None:
                continue
            count = group.complete_txn(producer_id, committed=committed)
            applied += count
            if count and self._probe is not None:
                self._probe.offsets_committed(group_id, count)
        if not group_ids:
            del self._txn_groups[producer_id]
        self._report_pending()
        return applied

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> list[tuple[str, int, CommittedOffset | None]]:
        """Committed offsets of the partitions (all the group has when None); a partition
        or group without a commit comes back with None, which is not an error. Offsets of
        transactions not yet committed are not among them (``is_unstable``)."""
        group = self._groups.get(group_id)
        offsets = {} if group is None else group.offsets
        if partitions is None:
            return [(topic, p, committed) for (topic, p), committed in sorted(offsets.items())]
        return [(topic, p, offsets.get((topic, p))) for topic, p in partitions]

    def is_unstable(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether a transaction, or a commit still being replicated, has an offset of the
        partition pending: OffsetFetch with ``require_stable`` (v7+, KIP-447) answers
        UNSTABLE_OFFSET_COMMIT for it, and the client retries until it completes instead of
        starting from an offset about to change (Kafka counts both kinds)."""
        group = self._groups.get(group_id)
        return group is not None and (
            group.has_pending_txn_offsets((topic, partition))
            or group.has_pending_offset_commits((topic, partition))
        )

    def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """OffsetDelete: a top-level error and one per partition."""
        group = self._groups.get(group_id)
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        if error := self.ownership_error(group_id):
            return error, []
        if group is None or group.is_dead:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        subscribed: set[str] = set()
        if not group.is_empty:
            topics = group.subscribed_topics()
            if topics is None:
                return ErrorCode.NON_EMPTY_GROUP, []
            subscribed = topics
        errors = []
        doomed = []
        for tp in partitions:
            if tp[0] in subscribed:
                errors.append(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
            else:
                errors.append(ErrorCode.NONE)
                if (
                    tp in group.offsets
                    or group.has_pending_txn_offsets(tp)
                    or group.has_pending_offset_commits(tp)
                ):
                    doomed.append(tp)
        if doomed:
            try:
                self.write_offset_tombstones(group, doomed)
            except StoreAppendError as exc:
                return ErrorCode(exc.error), []
        return ErrorCode.NONE, errors

    def write_offset_tombstones(
        self,
        group: GroupOffsets,
        partitions: Iterable[tuple[str, int]],
        *,
        with_group: bool = False,
    ) -> None:
        partitions = list(partitions)
        records: list[KeyValue] = [
            (encode_offset_key(OffsetKey(group.group_id, topic, p)), None)
            for topic, p in partitions
        ]
        if with_group:
            records.extend((key, None) for key in group.group_record_keys())
        if records:
            self._store.append(
                self.partition_for(group.group_id), records, self._clock.milliseconds()
            )
        # Pending transactional offsets of these partitions go too: the tombstone drops
        # them when the partition is loaded again, so a later commit marker must not bring
        # them back now.
        had_pending = group.has_pending_txn_offsets()
        group.remove_offsets(partitions)
        if had_pending:
            self._report_pending()

    def remove_offsets_of_topic(self, topic: str) -> None:
        """A deleted topic's committed offsets go (tombstones), as Kafka's
        onPartitionsDeleted does, so a topic created again under the name starts clean."""
        for group in list(self._groups.values()):
            doomed = [tp for tp in group.offset_partitions() if tp[0] == topic]
            if not doomed:
                continue
            try:
                self.write_offset_tombstones(group, doomed)
            except StoreAppendError as exc:
                logger.warning(
                    "group %s: offsets of deleted topic %s not removed: %s",
                    group.group_id,
                    topic,
                    exc,
                )

    def expire_offsets(self) -> int:
        """Apply ``offsets.retention.minutes``: expire offsets (tombstones), then remove
        Empty groups left without offsets. Returns the number of offsets expired."""
        now = self._clock.milliseconds()
        total = 0
        for group in list(self._groups.values()):
            expired = group.expired_offsets(now, self.config.offsets_retention_ms)
            # A group with offsets pending (a transaction's, or a commit being
            # replicated) stays, as Kafka's hasOffsets.
            remove_group = (
                group.is_empty
                and not group.has_pending_members
                and not group.has_pending_txn_offsets()
                and not group.has_pending_offset_commits()
                and len(expired) == len(group.offsets)
            )
            if not expired and not remove_group:
                continue
            try:
                self.write_offset_tombstones(group, expired, with_group=remove_group)
            except StoreAppendError as exc:
                logger.warning("group %s: offset expiry not written: %s", group.group_id, exc)
                continue
            total += len(expired)
            if remove_group:
                group.mark_dead(now)
                del self._groups[group.group_id]
                if self._probe is not None:
                    self._probe.remove_group(group.group_id)
        if total:
            logger.info("expired %d committed offsets", total)
        if self._probe is not None:
            self._probe.offsets_expired(total)
        return total
