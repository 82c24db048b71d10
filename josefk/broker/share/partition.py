"""One share partition: the records of a topic partition in flight for one share group.

Owns ``SharePartition`` (KIP-932's state machine, kept on the partition leader) and the
record states. A share partition has a start offset (the SPSO: every record below it is done
with) and an end offset (the SPEO: the next offset never yet acquired); between them each
record is in one state:

    AVAILABLE --acquire--> ACQUIRED --accept--> ACKNOWLEDGED
        ^                      |  --reject/gap--> ARCHIVED
        +--release/lock expiry-+  (ARCHIVED instead once delivery_count reached the limit)

The records between start and end are kept as ranges (``InFlightRange``: first and last
offset, state, delivery count, holder and lock deadline), never one object per record:
acquiring a fetched batch adds one range, an acknowledgement of part of a range splits it at
the range's edges only. Ranges are sorted, contiguous and never overlap; the start offset
moves past every leading range that is ACKNOWLEDGED or ARCHIVED, which are then dropped.

Invariants (tests/broker/test_share_partition.py holds them under hypothesis):
- an offset is ACQUIRED by at most one member at a time;
- an ACKNOWLEDGED or ARCHIVED offset is never acquired again;
- ``delivery_count`` of a range goes up by one each time it is acquired; a range released
  (explicitly, by lock expiry or by its holder leaving) once it has been delivered
  ``delivery_count_limit`` times is ARCHIVED instead of AVAILABLE.
- no more than ``max_record_locks`` offsets are between start and end (Kafka's in-flight
  limit, ``group.share.partition.max.record.locks``): new records are not acquired past it.

Time comes from the caller (``now_ms`` on an injected clock); nothing here sleeps or
schedules. The state is in memory (see docs/ARCHITECTURE.md for what survives a restart).

Concurrency: event loop thread only; no method awaits.

Imports nothing of josefk but the error codes; must not import handlers or storage.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from josefk.protocol.errors import ErrorCode


class RecordState(IntEnum):
    """Kafka's record states of a share partition (their ids in ``__share_group_state``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """The acknowledge types of ShareFetch and ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    # KIP-1222 (ShareFetch/ShareAcknowledge v2, only with is_renew_ack): the records stay
    # ACQUIRED by the member and their acquisition lock starts again.
    RENEW = 4


NO_HOLDER: Final = ""


@dataclass(slots=True)
class InFlightRange:
    """Offsets ``first_offset``..``last_offset`` (inclusive), all in one state."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int = 0
    member_id: str = NO_HOLDER
    lock_deadline_ms: int = 0

    @property
    def count(self) -> int:
        return self.last_offset - self.first_offset + 1

    def split_at(self, offset: int) -> InFlightRange:
        """Cut this range before ``offset`` (first < offset <= last); return the upper part."""
        upper = InFlightRange(
            offset,
            self.last_offset,
            self.state,
            self.delivery_count,
            self.member_id,
            self.lock_deadline_ms,
        )
        self.last_offset = offset - 1
        return upper


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """What a ShareFetch answers: offsets acquired by the member and their delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """``first_offset``..``last_offset`` with one type for all, or one type per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


class SharePartition:
    """The in-flight records of one (group, topic, partition). Event loop thread only."""

    def __init__(
        self,
        start_offset: int,
        *,
        record_lock_duration_ms: int = 30_000,
        delivery_count_limit: int = 5,
        max_record_locks: int = 2000,
    ) -> None:
        self.start_offset = start_offset
        # The next offset never acquired: records from here on are read from the log.
        self.end_offset = start_offset
        self.record_lock_duration_ms = record_lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self._ranges: list[InFlightRange] = []

    def restore(self, ranges: list[InFlightRange]) -> None:
        """Take saved ranges (contiguous, from the start offset on) as the in-flight state."""
        self._ranges = [r for r in ranges if r.last_offset >= self.start_offset]
        if self._ranges:
            self.end_offset = self._ranges[-1].last_offset + 1
        self._advance_start()

    # -- reads ------------------------------------------------------------------------------

    @property
    def ranges(self) -> list[InFlightRange]:
        """The in-flight ranges, in offset order (read only: tests and describe)."""
        return list(self._ranges)

    def next_fetch_offset(self) -> int:
        """Where a fetch for this partition should read from: the first AVAILABLE offset in
        flight, else the end offset."""
        for r in self._ranges:
            if r.state is RecordState.AVAILABLE:
                return r.first_offset
        return self.end_offset

    def acquirable(self, log_end: int) -> bool:
        """Whether a fetch could acquire anything with the log holding offsets < ``log_end``."""
        if any(r.state is RecordState.AVAILABLE for r in self._ranges):
            return True
        return self.end_offset < log_end and self.end_offset - self.start_offset < (
            self.max_record_locks
        )

    def next_lock_deadline_ms(self) -> int | None:
        deadlines = [r.lock_deadline_ms for r in self._ranges if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def state_of(self, offset: int) -> RecordState | None:
        """The state of ``offset``: None at or past the end offset; ACKNOWLEDGED below the
        start offset (done with)."""
        if offset >= self.end_offset:
            return None
        if offset < self.start_offset:
            return RecordState.ACKNOWLEDGED
        for r in self._ranges:
            if r.first_offset <= offset <= r.last_offset:
                return r.state
        return None

    def lag(self, high_watermark: int) -> int:
        """Records up to ``high_watermark`` not yet done with (KIP-1226's lag): from the start
        offset on, less those acknowledged or archived in flight."""
        settled = sum(
            r.count
            for r in self._ranges
            if r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        )
        return max(high_watermark - self.start_offset - settled, 0)

    def acquired_by(self, member_id: str) -> int:
        return sum(
            r.count
            for r in self._ranges
            if r.state is RecordState.ACQUIRED and r.member_id == member_id
        )

    # -- transitions --------------------------------------------------------------------------

    def reset_start(self, offset: int) -> None:
        """Move the start offset forward to ``offset`` (the log's start moved past it, or the
        offset was reset): ranges below it are dropped."""
        if offset <= self.start_offset:
            return
        self._split_before(offset)
        self._ranges = [r for r in self._ranges if r.first_offset >= offset]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)

    def acquire(
        self,
        member_id: str,
        first_offset: int,
        last_offset: int,
        *,
        max_records: int,
        now_ms: int,
    ) -> list[AcquiredRange]:
        """Acquire for ``member_id`` what may be acquired of ``first_offset``..``last_offset``
        (the offsets the log read covered): AVAILABLE ranges in flight, then new offsets from
        the end offset on, at most ``max_records`` offsets and within the in-flight limit."""
        self.expire_locks(now_ms)
        deadline = now_ms + self.record_lock_duration_ms
        budget = max(max_records, 1)
        acquired: list[AcquiredRange] = []
        for r in list(self._ranges):
            if budget <= 0:
                break
            if r.state is not RecordState.AVAILABLE:
                continue
            if r.last_offset < first_offset or r.first_offset > last_offset:
                continue
            low = max(r.first_offset, first_offset)
            high = min(r.last_offset, last_offset, low + budget - 1)
            self._split_before(low)
            self._split_before(high + 1)
            for piece in self._covering(low, high):
                piece.state = RecordState.ACQUIRED
                piece.member_id = member_id
                piece.lock_deadline_ms = deadline
                piece.delivery_count += 1
                acquired.append(
                    AcquiredRange(piece.first_offset, piece.last_offset, piece.delivery_count)
                )
                budget -= piece.count
        if budget > 0 and last_offset >= self.end_offset:
            low = max(self.end_offset, first_offset)
            room = self.max_record_locks - (self.end_offset - self.start_offset)
            high = min(last_offset, low + min(budget, room) - 1)
            if low > self.end_offset:
                # The read began past the end (the offsets between are gone from the log):
                # they are done with, so that ranges stay contiguous.
                self._ranges.append(InFlightRange(self.end_offset, low - 1, RecordState.ARCHIVED))
                self.end_offset = low
                room = self.max_record_locks - (self.end_offset - self.start_offset)
                high = min(last_offset, low + min(budget, room) - 1)
            if high >= low:
                self._ranges.append(
                    InFlightRange(low, high, RecordState.ACQUIRED, 1, member_id, deadline)
                )
                self.end_offset = high + 1
                acquired.append(AcquiredRange(low, high, 1))
        return _merge(acquired)

    def acknowledge(
        self,
        member_id: str,
        batches: Iterable[AcknowledgementBatch],
        *,
        renew: bool = False,
        now_ms: int = 0,
    ) -> ErrorCode:
        """Apply a member's acknowledgements. Every offset named must be ACQUIRED by the
        member with its lock not over at ``now_ms`` (else INVALID_RECORD_STATE, and nothing of
        that batch changes); a type list
        must have one entry or one per offset (else INVALID_REQUEST). RENEW is a type only
        when ``renew`` (the request's is_renew_ack): it restarts the lock at ``now_ms``."""
        allowed = _ACK_TYPES if renew else _ACK_TYPES_NO_RENEW
        # A lock already over ended the member's hold: those records are available again (to be
        # delivered once more), so a late acknowledgement or renewal of them is refused, as
        # Kafka's lock timer would have released them before it arrived.
        self.expire_locks(now_ms)
        error = ErrorCode.NONE
        for batch in batches:
            types = batch.acknowledge_types
            count = batch.last_offset - batch.first_offset + 1
            if count <= 0 or not types or (len(types) != 1 and len(types) != count):
                error = ErrorCode.INVALID_REQUEST
                continue
            if any(t not in allowed for t in types):
                error = ErrorCode.INVALID_REQUEST
                continue
            if not self._held_by(member_id, batch.first_offset, batch.last_offset, types):
                error = ErrorCode.INVALID_RECORD_STATE
                continue
            for low, high, kind in _runs(batch.first_offset, batch.last_offset, types):
                self._split_before(low)
                self._split_before(high + 1)
                for piece in self._covering(low, high):
                    if piece.state is not RecordState.ACQUIRED:
                        continue
                    if kind == AcknowledgeType.RENEW:
                        piece.lock_deadline_ms = now_ms + self.record_lock_duration_ms
                    else:
                        self._settle(piece, AcknowledgeType(kind))
        self._advance_start()
        return error

    def withhold(
        self, member_id: str, acquired: list[AcquiredRange], skipped: Iterable[tuple[int, int]]
    ) -> list[AcquiredRange]:
        """Archive the offsets of ``skipped`` ranges that ``member_id`` just acquired (records
        no client delivers: transaction markers, aborted transactions under read_committed)
        and return ``acquired`` without them."""
        out = list(acquired)
        for low, high in skipped:
            kept: list[AcquiredRange] = []
            for a in out:
                if a.last_offset < low or a.first_offset > high:
                    kept.append(a)
                    continue
                first, last = max(a.first_offset, low), min(a.last_offset, high)
                self.acknowledge(
                    member_id, [AcknowledgementBatch(first, last, (int(AcknowledgeType.GAP),))]
                )
                if a.first_offset < first:
                    kept.append(AcquiredRange(a.first_offset, first - 1, a.delivery_count))
                if last < a.last_offset:
                    kept.append(AcquiredRange(last + 1, a.last_offset, a.delivery_count))
            out = kept
        return out

    def release_member(self, member_id: str) -> int:
        """Release everything ``member_id`` holds (it left, expired, or closed its share
        session); the count of offsets released."""
        released = 0
        for r in self._ranges:
            if r.state is RecordState.ACQUIRED and r.member_id == member_id:
                released += r.count
                self._settle(r, AcknowledgeType.RELEASE)
        self._advance_start()
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Release every range whose acquisition lock has passed; the count released."""
        released = 0
        for r in self._ranges:
            if r.state is RecordState.ACQUIRED and r.lock_deadline_ms <= now_ms:
                released += r.count
                self._settle(r, AcknowledgeType.RELEASE)
        if released:
            self._advance_start()
        return released

    # -- internals ----------------------------------------------------------------------------

    def _settle(self, r: InFlightRange, kind: AcknowledgeType) -> None:
        if kind is AcknowledgeType.ACCEPT:
            r.state = RecordState.ACKNOWLEDGED
        elif kind is AcknowledgeType.RELEASE:
            r.state = (
                RecordState.ARCHIVED
                if r.delivery_count >= self.delivery_count_limit
                else RecordState.AVAILABLE
            )
        else:
            r.state = RecordState.ARCHIVED
        r.member_id = NO_HOLDER
        r.lock_deadline_ms = 0

    def _held_by(self, member_id: str, first: int, last: int, types: tuple[int, ...]) -> bool:
        """Every offset of first..last ACQUIRED by ``member_id``; an offset acknowledged as a
        gap may instead be one the member holds in a range of any state it acquired with."""
        if first < self.start_offset or last >= self.end_offset:
            return False
        for r in self._ranges:
            if r.last_offset < first or r.first_offset > last:
                continue
            if r.state is not RecordState.ACQUIRED or r.member_id != member_id:
                return False
        return True

    def _covering(self, low: int, high: int) -> Iterator[InFlightRange]:
        for r in self._ranges:
            if r.first_offset >= low and r.last_offset <= high:
                yield r

    def _split_before(self, offset: int) -> None:
        """Make ``offset`` the first offset of a range, when a range straddles it."""
        for i, r in enumerate(self._ranges):
            if r.first_offset < offset <= r.last_offset:
                self._ranges.insert(i + 1, r.split_at(offset))
                return

    def _advance_start(self) -> None:
        done = 0
        for r in self._ranges:
            if r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                done += 1
            else:
                break
        if done:
            self.start_offset = self._ranges[done - 1].last_offset + 1
            del self._ranges[:done]
        if not self._ranges:
            self.start_offset = self.end_offset
        self._coalesce()

    def _coalesce(self) -> None:
        """Join neighbours in the same settled state, so that ranges stay few."""
        merged: list[InFlightRange] = []
        for r in self._ranges:
            prev = merged[-1] if merged else None
            if (
                prev is not None
                and prev.state is r.state
                and r.state is not RecordState.ACQUIRED
                and prev.delivery_count == r.delivery_count
                and prev.last_offset + 1 == r.first_offset
            ):
                prev.last_offset = r.last_offset
            else:
                merged.append(r)
        self._ranges = merged


_ACK_TYPES: Final = frozenset(int(t) for t in AcknowledgeType)
_ACK_TYPES_NO_RENEW: Final = _ACK_TYPES - {int(AcknowledgeType.RENEW)}


def _runs(
    first_offset: int, last_offset: int, types: tuple[int, ...]
) -> Iterator[tuple[int, int, int]]:
    """(low, high, type) runs of one acknowledgement batch (one type: the whole batch)."""
    if len(types) == 1:
        yield first_offset, last_offset, types[0]
        return
    start = 0
    for i in range(1, len(types) + 1):
        if i == len(types) or types[i] != types[start]:
            yield first_offset + start, first_offset + i - 1, types[start]
            start = i


def _merge(acquired: list[AcquiredRange]) -> list[AcquiredRange]:
    out: list[AcquiredRange] = []
    for a in acquired:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.last_offset + 1 == a.first_offset
            and prev.delivery_count == a.delivery_count
        ):
            out[-1] = AcquiredRange(prev.first_offset, a.last_offset, a.delivery_count)
        else:
            out.append(a)
    return out
