"""The share partitions of this broker and the share sessions of the members fetching them.

Owns ``SharePartitionManager`` (Kafka's SharePartitionManager in spirit): one
``SharePartition`` per (group, topic, partition) this broker leads, created on the first
ShareFetch for it with its start offset from the group's ``share.auto.offset.reset``
(``latest``: the high watermark; ``earliest``: the log start offset), and one
``ShareSession`` per (group, member): the partitions it fetches and its epoch (0 opens,
-1 closes, otherwise the next epoch; INVALID_SHARE_SESSION_EPOCH / SHARE_SESSION_NOT_FOUND).

A member that misses its session timeout (the coordinator's ``on_member_gone``), or closes
its share session, releases everything it holds; one that leaves its group does too, unless
it still has a share session here: then its session stays until the member closes it (epoch
-1, with its last acknowledgements; librdkafka sends the leave and the closing
ShareAcknowledge side by side, and Kafka's share sessions do not depend on membership). A
waiting ShareFetch is woken by a release (``changed``) as it is by an append.

Durable state: a share partition is made (``load``) from the state its share coordinator
keeps in ``__share_group_state`` (``SharePersister``: the coordinator itself on this broker,
or over the inter-broker listener), or, with none kept, its new start offset is written there
before any record is acquired. ``persist`` writes the whole state (start offset, in-flight
ranges; an acquired range as available) after acknowledgements and before they are
answered; releases are written in the background (``persist_later``). Writes of one share
partition are made one at a time, so a later write never carries older state. A broker that
stops leading a partition drops its share partitions (``leadership_changed``); a write
fenced by a newer leader's epoch drops it too.

Concurrency: event loop thread only; nothing awaits halfway through a change (the handler
awaits between calls; a write takes the state as it is when the write begins).

Imports the share partition, the share records and the coordinator's ReadResult, the
broker's TopicPartition, the storage layer's FileSlice (to read batch headers of what a fetch
read) and josefk.util's clock; must not import handlers, the codec or the group coordinator
(it is told of members going).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from josefk.broker.partition import TopicPartition
from josefk.broker.share import records
from josefk.broker.share.coordinator import ReadResult
from josefk.broker.share.partition import InFlightRange, RecordState, SharePartition
from josefk.broker.share.records import ShareStateKey, StateBatch
from josefk.protocol.errors import ErrorCode
from josefk.records.batch import (
    BASE_OFFSET_OFFSET,
    CONTROL_BIT,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    TRANSACTIONAL_BIT,
    peek_attributes,
    peek_producer,
)
from josefk.storage.file_records import FileSlice
from josefk.util.clock import Clock

logger = logging.getLogger(__name__)

INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    # The epoch the member's next request must carry.
    epoch: int = 1
    partitions: dict[TopicPartition, None] = field(default_factory=dict)
    # The id each topic of the session had when the member named it: a topic deleted since
    # is still answered under that id (the catalog no longer knows it).
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class SharePersister(Protocol):
    """Where share partitions' state is kept: the share coordinator (``coordinator.py``),
    called directly on this broker or over the inter-broker listener (``persister.py``)."""

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ReadResult: ...

    async def write(
        self,
        key: ShareStateKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> ErrorCode: ...

    async def delete(self, key: ShareStateKey) -> ErrorCode: ...


@dataclass(slots=True)
class _Durable:
    """What the manager knows of one share partition's durable state."""

    key: ShareStateKey
    leader_epoch: int
    state_epoch: int = 0
    # Changes made in memory, and the last of them written (writes are whole states, made
    # one at a time per share partition, so a write covers every change before it).
    changes: int = 0
    written: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


_TO_RECORD: Final = {
    RecordState.AVAILABLE: records.AVAILABLE,
    # An acquired record is kept as available: after a crash it is delivered again.
    RecordState.ACQUIRED: records.AVAILABLE,
    RecordState.ACKNOWLEDGED: records.ACKNOWLEDGED,
    RecordState.ARCHIVED: records.ARCHIVED,
}
_FROM_RECORD: Final = {
    records.AVAILABLE: RecordState.AVAILABLE,
    records.ACKNOWLEDGED: RecordState.ACKNOWLEDGED,
    records.ARCHIVED: RecordState.ARCHIVED,
}


def state_batches(sp: SharePartition) -> list[StateBatch]:
    """The share partition's in-flight ranges as ``__share_group_state`` batches."""
    return [
        StateBatch(r.first_offset, r.last_offset, _TO_RECORD[r.state], r.delivery_count)
        for r in sp.ranges
    ]


def in_flight(start_offset: int, batches: Sequence[StateBatch]) -> list[InFlightRange]:
    """Stored batches as contiguous in-flight ranges from ``start_offset``: offsets no batch
    names (never delivered) are AVAILABLE."""
    ranges: list[InFlightRange] = []
    at = start_offset
    for b in sorted(batches, key=lambda x: x.first_offset):
        if b.last_offset < at:
            continue
        if b.first_offset > at:
            ranges.append(InFlightRange(at, b.first_offset - 1, RecordState.AVAILABLE, 0))
        state = _FROM_RECORD.get(b.delivery_state, RecordState.AVAILABLE)
        ranges.append(
            InFlightRange(max(b.first_offset, at), b.last_offset, state, b.delivery_count)
        )
        at = b.last_offset + 1
    return ranges


class SharePartitionManager:
    """Share partitions and share sessions of one broker. Event loop thread only."""

    def __init__(
        self,
        clock: Clock,
        *,
        record_lock_duration_ms: int = 30_000,
        delivery_count_limit: int = 5,
        max_record_locks: int = 2000,
        max_sessions: int = 2000,
        persister: SharePersister | None = None,
    ) -> None:
        self._clock = clock
        self.record_lock_duration_ms = record_lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.max_sessions = max_sessions
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._changed = asyncio.Event()
        self.persister = persister
        self._durable: dict[tuple[str, TopicPartition], _Durable] = {}
        self._background: set[asyncio.Task[Any]] = set()
        # The broker's ShareProbe (josefk.metrics.share), when metrics are on.
        self.probe: Any = None
        # A group's own share.record.lock.duration.ms (None: the broker's), set by the server.
        self.group_lock_duration_ms: Callable[[str], int | None] = lambda _group: None

    def now_ms(self) -> int:
        return self._clock.monotonic_ms()

    # -- share partitions ---------------------------------------------------------------------

    async def load(
        self,
        group_id: str,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        *,
        leader_epoch: int,
        start: int,
    ) -> ErrorCode:
        """Make the share partition unless it is here: its state read from the share
        coordinator, or (none kept) a new state at ``start`` written there first, so that a
        restart or a new leader begins where this one did."""
        key = (group_id, tp)
        if key in self.partitions:
            return ErrorCode.NONE
        if self.persister is None:
            self.share_partition(group_id, tp, start)
            return ErrorCode.NONE
        state_key = ShareStateKey(group_id, topic_id, tp.partition)
        began = self._clock.monotonic_ms()
        result = await self.persister.read(state_key, leader_epoch)
        if key in self.partitions:  # made by another request while this one waited
            return ErrorCode.NONE
        if result.error:
            return result.error
        durable = _Durable(state_key, leader_epoch)
        if result.state is not None:
            sp = self._new_partition(result.state.start_offset)
            sp.restore(in_flight(result.state.start_offset, result.state.batches))
            durable.state_epoch = result.state.state_epoch
        else:
            sp = self._new_partition(start)
            error = await self.persister.write(
                state_key, state_epoch=0, leader_epoch=leader_epoch, start_offset=start, batches=()
            )
            if key in self.partitions:
                return ErrorCode.NONE
            if error:
                return error
        self.partitions[key] = sp
        self._durable[key] = durable
        if self.probe is not None:
            self.probe.partition_loaded(self._clock.monotonic_ms() - began)
        return ErrorCode.NONE

    def _new_partition(self, start: int) -> SharePartition:
        return SharePartition(
            start,
            record_lock_duration_ms=self.record_lock_duration_ms,
            delivery_count_limit=self.delivery_count_limit,
            max_record_locks=self.max_record_locks,
        )

    def share_partition(self, group_id: str, tp: TopicPartition, start: int) -> SharePartition:
        """The share partition, made with start offset ``start`` on first use (without a
        persister; with one, ``load`` makes it)."""
        key = (group_id, tp)
        sp = self.partitions.get(key)
        if sp is None:
            sp = self._new_partition(start)
            self.partitions[key] = sp
        sp.record_lock_duration_ms = self.lock_duration_ms(group_id)
        return sp

    def lock_duration_ms(self, group_id: str) -> int:
        """The acquisition lock of ``group_id``'s records: its group config, else the broker's."""
        own = self.group_lock_duration_ms(group_id)
        return self.record_lock_duration_ms if own is None else own

    def existing(self, group_id: str, tp: TopicPartition) -> SharePartition | None:
        sp = self.partitions.get((group_id, tp))
        if sp is not None:
            # The group's config may have changed since: locks taken from now on follow it.
            sp.record_lock_duration_ms = self.lock_duration_ms(group_id)
        return sp

    def changed(self, group_id: str, tp: TopicPartition) -> None:
        """The share partition's state changed in memory (to be written)."""
        durable = self._durable.get((group_id, tp))
        if durable is not None:
            durable.changes += 1

    async def persist(self, group_id: str, tp: TopicPartition) -> ErrorCode:
        """Write the share partition's state to the share coordinator, replicated, unless a
        write since its last change did (after acknowledgements, before they are answered)."""
        self.changed(group_id, tp)
        durable = self._durable.get((group_id, tp))
        if durable is None or self.persister is None:
            return ErrorCode.NONE
        wanted = durable.changes
        async with durable.lock:
            if durable.written >= wanted:
                return ErrorCode.NONE
            sp = self.partitions.get((group_id, tp))
            if sp is None:
                return ErrorCode.NONE
            covers = durable.changes
            error = await self.persister.write(
                durable.key,
                state_epoch=durable.state_epoch,
                leader_epoch=durable.leader_epoch,
                start_offset=sp.start_offset,
                batches=state_batches(sp),
            )
            if error:
                logger.warning("share state of %s %s not written: %s", group_id, tp, error.name)
                if error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
                    # Another broker leads the partition now, or the group's offsets were
                    # reset: this state is stale, the next fetch reads the new one.
                    self._forget((group_id, tp))
                return error
            durable.written = max(durable.written, covers)
            return ErrorCode.NONE

    def persist_later(self, group_id: str, tp: TopicPartition) -> None:
        """``persist`` in the background (a release nobody waits for)."""
        self.changed(group_id, tp)
        if self.persister is None or (group_id, tp) not in self._durable:
            return
        task = asyncio.ensure_future(self.persist(group_id, tp))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _forget(self, key: tuple[str, TopicPartition]) -> None:
        self.partitions.pop(key, None)
        self._durable.pop(key, None)

    def _delete_later(self, key: tuple[str, TopicPartition]) -> None:
        durable = self._durable.get(key)
        self._forget(key)
        if durable is not None and self.persister is not None:
            task = asyncio.ensure_future(self.persister.delete(durable.key))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    # -- operators' changes (AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups) --

    async def reset(
        self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID, start_offset: int
    ) -> ErrorCode:
        """A new start offset for an empty group's share partition: a new state (the next
        state epoch, nothing in flight). A leader holding the old state is fenced by the
        state epoch at its next write and reads the new state."""
        self._forget((group_id, tp))
        if self.persister is None:
            return ErrorCode.NONE
        key = ShareStateKey(group_id, topic_id, tp.partition)
        current = await self.persister.read(key, -1)
        if current.error:
            return current.error
        epoch = 0 if current.state is None else current.state.state_epoch + 1
        self._forget((group_id, tp))
        return await self.persister.write(
            key, state_epoch=epoch, leader_epoch=-1, start_offset=start_offset, batches=()
        )

    async def delete_state(
        self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID
    ) -> ErrorCode:
        self._forget((group_id, tp))
        if self.persister is None:
            return ErrorCode.NONE
        return await self.persister.delete(ShareStateKey(group_id, topic_id, tp.partition))

    async def read_state(
        self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID
    ) -> ReadResult:
        """The share partition's durable state (for DescribeShareGroupOffsets where this
        broker does not hold the share partition); it records no leader epoch."""
        if self.persister is None:
            return ReadResult(ErrorCode.NONE)
        return await self.persister.read(ShareStateKey(group_id, topic_id, tp.partition), -1)

    def leadership_changed(self, tp: TopicPartition, leads: bool) -> None:
        """This broker stopped (or started) leading ``tp``: its share partitions here are
        dropped, and made again from the share coordinator's state when it leads again."""
        if leads:
            return
        for key in [k for k in self.partitions if k[1] == tp]:
            self._forget(key)
        self._notify()

    def of_group(self, group_id: str) -> dict[TopicPartition, SharePartition]:
        return {tp: sp for (g, tp), sp in self.partitions.items() if g == group_id}

    def drop_group(
        self, group_id: str, partitions: Iterable[tuple[TopicPartition, uuid.UUID]] = ()
    ) -> None:
        """The group was deleted: its share partitions here and the state of ``partitions``
        (those of the topics it read) go."""
        for key in [k for k in self.partitions if k[0] == group_id]:
            self._delete_later(key)
        if self.persister is None:
            return
        for tp, topic_id in partitions:
            task = asyncio.ensure_future(
                self.persister.delete(ShareStateKey(group_id, topic_id, tp.partition))
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[1].topic == topic]:
            self._delete_later(key)

    def stats(self) -> tuple[int, int, list[tuple[str, TopicPartition, int, int]]]:
        """Share sessions, the partitions they fetch, and each share partition's (group,
        partition, offsets in flight, ranges in flight): for the metrics."""
        session_partitions = sum(len(s.partitions) for s in self.sessions.values())
        return (
            len(self.sessions),
            session_partitions,
            [
                (group, tp, sp.end_offset - sp.start_offset, len(sp.ranges))
                for (group, tp), sp in self.partitions.items()
            ],
        )

    async def close(self) -> None:
        """Let the background writes end (the broker stops)."""
        if self._background:
            await asyncio.wait(list(self._background), timeout=5)

    # -- sessions -------------------------------------------------------------------------

    def open_session(
        self, group_id: str, member_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, ShareSession | None]:
        """Epoch 0: a new session replacing the member's old one (whose records it keeps:
        the member is the same)."""
        key = (group_id, member_id)
        if key not in self.sessions and len(self.sessions) >= self.max_sessions:
            return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None
        session = ShareSession(group_id, member_id)
        session.partitions = dict.fromkeys(partitions)
        self.sessions[key] = session
        return ErrorCode.NONE, session

    def session_for(
        self, group_id: str, member_id: str, epoch: int
    ) -> tuple[ErrorCode, ShareSession | None]:
        """The member's session for a request with ``epoch`` (> 0 or -1)."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch != FINAL_EPOCH:
            if epoch != session.epoch:
                return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
            session.epoch = next_epoch(session.epoch)
        return ErrorCode.NONE, session

    def close_session(self, group_id: str, member_id: str) -> None:
        """The member closed its session (epoch -1): what it holds here is released. The
        last session of a group closed, its share partitions here go once written (an empty
        group's offsets may be reset elsewhere; they are read again on the next fetch)."""
        self.sessions.pop((group_id, member_id), None)
        self.release_member(group_id, member_id)
        self._maybe_idle(group_id)

    def _maybe_idle(self, group_id: str) -> None:
        if self.persister is None or any(g == group_id for g, _ in self.sessions):
            return
        task = asyncio.ensure_future(self._drop_idle(group_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _drop_idle(self, group_id: str) -> None:
        for key in [k for k in self.partitions if k[0] == group_id]:
            await self.persist(*key)
            if not any(g == group_id for g, _ in self.sessions):
                self._forget(key)

    def forget(self, session: ShareSession, tp: TopicPartition) -> None:
        session.partitions.pop(tp, None)
        sp = self.partitions.get((session.group_id, tp))
        if sp is not None and sp.release_member(session.member_id):
            self.persist_later(session.group_id, tp)
            self._notify()

    # -- members ------------------------------------------------------------------------------

    def release_member(self, group_id: str, member_id: str) -> int:
        """Release every record ``member_id`` holds in ``group_id`` (it left or expired)."""
        released = 0
        for (g, tp), sp in list(self.partitions.items()):
            if g == group_id:
                count = sp.release_member(member_id)
                if count:
                    released += count
                    self.persist_later(g, tp)
        if released:
            self._notify()
        return released

    def member_gone(self, group_id: str, member_id: str, left: bool = False) -> None:
        """The coordinator's listener: the member left the group (``left``) or was removed.
        A member that left with a share session still open closes it itself; what it holds
        stays acquired until then (or until the locks end)."""
        if left and (group_id, member_id) in self.sessions:
            return
        self.sessions.pop((group_id, member_id), None)
        self.release_member(group_id, member_id)
        self._maybe_idle(group_id)

    # -- waiting ------------------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def notify(self) -> None:
        """Records became acquirable (an acknowledgement released some)."""
        self._notify()

    async def wait_changed(self, timeout_s: float) -> bool:
        if timeout_s <= 0:
            return False
        event = self._changed
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def next_lock_deadline_ms(self, keys: Iterable[tuple[str, TopicPartition]]) -> int | None:
        deadlines = [
            d
            for key in keys
            if (sp := self.partitions.get(key)) is not None
            and (d := sp.next_lock_deadline_ms()) is not None
        ]
        return min(deadlines) if deadlines else None


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """What a share fetch needs of one batch read: its offsets, whether it is a control batch
    (a transaction marker), and its producer when it is transactional."""

    base_offset: int
    last_offset: int
    is_control: bool
    producer_id: int
    # Where the batch ends in what was read (bytes from its start).
    end: int = 0


def batch_spans(records: object, until_offset: int | None = None) -> list[BatchSpan]:
    """The whole batches in ``records`` (a log FileSlice, or bytes), reading only their
    headers (records/batch.py's fixed positions: base offset, length, attributes, last
    offset delta, producer id); with ``until_offset``, up to the batch that holds it (a share fetch
    acquires a few records of what may be a read of megabytes)."""
    if isinstance(records, FileSlice):
        fd, position, size = records.fd, records.position, records.size

        def header(at: int) -> bytes:
            return os.pread(fd, HEADER_SIZE, position + at)
    elif isinstance(records, (bytes, bytearray, memoryview)):
        view = memoryview(records)
        size = len(view)

        def header(at: int) -> bytes:
            return bytes(view[at : at + HEADER_SIZE])
    else:
        return []
    spans = []
    at = 0
    while at + HEADER_SIZE <= size:
        raw = header(at)
        if len(raw) < HEADER_SIZE:
            break
        base_offset, length = struct.unpack_from(">qi", raw, BASE_OFFSET_OFFSET)
        attributes = peek_attributes(raw)
        (delta,) = struct.unpack_from(">i", raw, LAST_OFFSET_DELTA_OFFSET)
        producer_id, _ = peek_producer(raw)
        end = at + LOG_OVERHEAD + length
        if length <= 0 or end > size:
            break
        spans.append(
            BatchSpan(
                base_offset,
                base_offset + delta,
                bool(attributes & CONTROL_BIT),
                producer_id if attributes & TRANSACTIONAL_BIT else -1,
                end,
            )
        )
        at = end
        if until_offset is not None and base_offset + delta >= until_offset:
            break
    return spans


def trim_to(records: object, spans: list[BatchSpan], last_offset: int) -> object:
    """``records`` (a FileSlice, or bytes) cut after the batch holding ``last_offset``: a share
    fetch sends the batches of what it acquired, not the whole read (a read of megabytes for
    ten acquired records would cost both ends the parsing of every record in it)."""
    end = next((s.end for s in spans if s.last_offset >= last_offset), None)
    if end is None:
        return records
    if isinstance(records, FileSlice):
        return dataclasses.replace(records, size=min(end, records.size))
    if isinstance(records, (bytes, bytearray, memoryview)):
        return records[:end]
    return records


def not_deliverable(
    spans: list[BatchSpan], aborted: Iterable[tuple[int, int, int]] | None
) -> list[tuple[int, int]]:
    """Offset ranges a share fetch must not deliver: control batches (transaction markers,
    which no client returns, so none would acknowledge them) and, under read_committed, the
    batches of aborted transactions (``aborted``: (producer id, first offset, marker offset))."""
    skipped = []
    for span in spans:
        if span.is_control:
            skipped.append((span.base_offset, span.last_offset))
        elif span.producer_id >= 0 and aborted is not None:
            for producer_id, first, last in aborted:
                if producer_id == span.producer_id and first <= span.base_offset <= last:
                    skipped.append((span.base_offset, span.last_offset))
                    break
    return skipped
