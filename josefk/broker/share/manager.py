"""The share partitions of this broker and the share sessions of the members fetching them.

Owns ``SharePartitionManager`` (Kafka's SharePartitionManager in spirit): one
``SharePartition`` per (group, topic, partition) this broker leads, created on the first
ShareFetch for it with its start offset from the group's ``share.auto.offset.reset``
(``latest``: the high watermark; ``earliest``: the log start offset), and one
``ShareSession`` per (group, member): the partitions it fetches and its epoch (0 opens,
-1 closes, otherwise the next epoch; INVALID_SHARE_SESSION_EPOCH / SHARE_SESSION_NOT_FOUND).

A member that leaves its group or misses its session timeout (the coordinator's
``on_member_gone``), or closes its share session, releases everything it holds; a waiting
ShareFetch is woken by a release (``changed``) as it is by an append.

Concurrency: event loop thread only; nothing awaits halfway through a change (the handler
awaits between calls).

Imports the share partition, the broker's TopicPartition, the storage layer's FileSlice (to
read batch headers of what a fetch read) and josefk.util's clock; must not
import handlers, the codec or the group coordinator (it is told of members going).
"""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from josefk.broker.partition import TopicPartition
from josefk.broker.share.partition import SharePartition
from josefk.broker.share.state_store import ShareStateStore
from josefk.protocol.errors import ErrorCode
from josefk.storage.file_records import FileSlice
from josefk.util.clock import Clock

INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    # The epoch the member's next request must carry.
    epoch: int = 1
    partitions: dict[TopicPartition, None] = field(default_factory=dict)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


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
        store: ShareStateStore | None = None,
    ) -> None:
        self._clock = clock
        self.record_lock_duration_ms = record_lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.max_sessions = max_sessions
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._changed = asyncio.Event()
        self._store = store
        self._saved = {} if store is None else store.load()

    def now_ms(self) -> int:
        return self._clock.monotonic_ms()

    # -- share partitions ---------------------------------------------------------------------

    def share_partition(self, group_id: str, tp: TopicPartition, start: int) -> SharePartition:
        """The share partition, made with start offset ``start`` on first use."""
        key = (group_id, tp)
        sp = self.partitions.get(key)
        if sp is None:
            saved = self._saved.pop(key, None)
            sp = SharePartition(
                start if saved is None else saved[0],
                record_lock_duration_ms=self.record_lock_duration_ms,
                delivery_count_limit=self.delivery_count_limit,
                max_record_locks=self.max_record_locks,
            )
            if saved is not None:
                sp.restore(saved[1])
            self.partitions[key] = sp
        return sp

    def existing(self, group_id: str, tp: TopicPartition) -> SharePartition | None:
        return self.partitions.get((group_id, tp))

    def persist(self, group_id: str, tp: TopicPartition) -> None:
        """Write the share partition's state (after acknowledgements, before the answer)."""
        sp = self.partitions.get((group_id, tp))
        if self._store is not None and sp is not None:
            self._store.save(group_id, tp, sp)

    def of_group(self, group_id: str) -> dict[TopicPartition, SharePartition]:
        return {tp: sp for (g, tp), sp in self.partitions.items() if g == group_id}

    def drop_group(self, group_id: str) -> None:
        """The group was deleted: its share partitions and their saved state go."""
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
            if self._store is not None:
                self._store.delete(*key)
        for key in [k for k in self._saved if k[0] == group_id]:
            del self._saved[key]
            if self._store is not None:
                self._store.delete(*key)

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[1].topic == topic]:
            del self.partitions[key]
            if self._store is not None:
                self._store.delete(*key)

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
        """The member closed its session (epoch -1): what it holds here is released."""
        self.sessions.pop((group_id, member_id), None)
        self.release_member(group_id, member_id)

    def forget(self, session: ShareSession, tp: TopicPartition) -> None:
        session.partitions.pop(tp, None)
        sp = self.partitions.get((session.group_id, tp))
        if sp is not None and sp.release_member(session.member_id):
            self._notify()

    # -- members ------------------------------------------------------------------------------

    def release_member(self, group_id: str, member_id: str) -> int:
        """Release every record ``member_id`` holds in ``group_id`` (it left or expired)."""
        released = 0
        for (g, tp), sp in self.partitions.items():
            if g == group_id:
                count = sp.release_member(member_id)
                if count:
                    released += count
                    self.persist(g, tp)
        if released:
            self._notify()
        return released

    def member_gone(self, group_id: str, member_id: str) -> None:
        """The coordinator's listener: the member left the group or was removed."""
        self.sessions.pop((group_id, member_id), None)
        self.release_member(group_id, member_id)

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


_HEADER: Final = 61  # a v2 batch header: the fields below are at fixed positions in it
_CONTROL: Final = 0x20
_TRANSACTIONAL: Final = 0x10


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """What a share fetch needs of one batch read: its offsets, whether it is a control batch
    (a transaction marker), and its producer when it is transactional."""

    base_offset: int
    last_offset: int
    is_control: bool
    producer_id: int


def batch_spans(records: object) -> list[BatchSpan]:
    """The whole batches in ``records`` (a log FileSlice, or bytes), reading only their
    headers (base offset at 0, length at 8, attributes at 21, last offset delta at 23,
    producer id at 43)."""
    if isinstance(records, FileSlice):
        fd, position, size = records.fd, records.position, records.size

        def header(at: int) -> bytes:
            return os.pread(fd, _HEADER, position + at)
    elif isinstance(records, (bytes, bytearray, memoryview)):
        view = memoryview(records)
        size = len(view)

        def header(at: int) -> bytes:
            return bytes(view[at : at + _HEADER])
    else:
        return []
    spans = []
    at = 0
    while at + _HEADER <= size:
        raw = header(at)
        if len(raw) < _HEADER:
            break
        base_offset, length = struct.unpack_from(">qi", raw, 0)
        (attributes,) = struct.unpack_from(">h", raw, 21)
        (delta,) = struct.unpack_from(">i", raw, 23)
        (producer_id,) = struct.unpack_from(">q", raw, 43)
        end = at + 12 + length
        if length <= 0 or end > size:
            break
        spans.append(
            BatchSpan(
                base_offset,
                base_offset + delta,
                bool(attributes & _CONTROL),
                producer_id if attributes & _TRANSACTIONAL else -1,
            )
        )
        at = end
    return spans


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
