"""The consumer's fetcher: Fetch requests in flight, fetched data buffered per partition,
and its decoding into records.

Owns ``Fetcher`` (as Kafka's Fetcher and aiokafka's) and ``FetchedChunk``. One task sends one
Fetch request per leader broker for every assigned partition that has a position and fewer
than two fetched chunks waiting, so while the user works through one chunk the next is
already in flight or buffered. Fetches are full (sessionless: session id 0, epoch -1); an
incremental fetch session (KIP-227) would be kept here. A fetch names its partitions in
assignment order and the broker reads them in that order until ``fetch_max_bytes`` is used
up, so a partition that returned records moves to the back of the order (as Kafka's consumer
does). A chunk's records are decoded batch by batch into ``ConsumerRecord`` tuples
(decode.py) by the ``take`` that first reaches it, so the next fetch is already on its way;
control batches are skipped and aborted transactions dropped under read_committed.

Positions live in the ``SubscriptionState`` (subscription.py) the fetcher shares with its
consumer: the fetcher moves a partition's fetch offset as responses come and its position as
records are taken; ``set_position`` (a seek, or an out-of-range reset) bumps the partition's
seek generation and drops what was buffered, so a late response for the old offset is
ignored. Positions a partition lacks are resolved by the consumer (committed offsets, reset
policy) through the ``resolve_positions`` callback.

Imports josefk.protocol, josefk.records and josefk.client (cluster, decode, errors,
subscription, types); never josefk.client.consumer, the group modules, josefk.storage or
josefk.broker.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Final

from josefk.client.cluster import METADATA_ERRORS, KafkaClient
from josefk.client.decode import decode_records, next_fetch_offset
from josefk.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    error_for,
)
from josefk.client.subscription import PartitionState, SubscriptionState
from josefk.client.types import ConsumerRecord, TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import FetchRequest, FetchResponse
from josefk.records import CorruptRecordError

log = logging.getLogger("josefk.client.consumer")

EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
_MAX_PENDING_CHUNKS: Final = 2


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """The consumer settings the fetcher reads (ConsumerConfig's names)."""

    fetch_min_bytes: int
    fetch_max_wait_ms: int
    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    isolation: int  # 1: read_committed
    check_crcs: bool
    auto_offset_reset: str
    retry_backoff_ms: int
    request_timeout_ms: int


class FetchedChunk:
    """One partition's record data from one fetch response, consumed from ``index`` on.

    Decoded on first use (``records`` None until then), in the user's poll rather than when
    the response arrives, so the next fetch is on its way while this one is decoded.
    """

    __slots__ = (
        "aborted",
        "check_crcs",
        "data",
        "fetch_offset",
        "generation",
        "index",
        "next_offset",
        "records",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        data: Any,
        fetch_offset: int,
        generation: int,
        aborted: list[tuple[int, int]] | None = None,
        check_crcs: bool = False,
        next_offset: int = -1,
    ) -> None:
        self.tp = tp
        # Past the chunk's last batch, control batches included: where the position goes
        # once every record is taken (so it moves past transaction markers, as in Kafka).
        self.next_offset = next_offset
        self.check_crcs = check_crcs
        self.data = data
        self.aborted = aborted
        self.fetch_offset = fetch_offset
        self.records: list[ConsumerRecord] | None = None
        self.index = 0
        self.generation = generation

    def decoded(self) -> list[ConsumerRecord]:
        records = self.records
        if records is None:
            records, _ = decode_records(
                self.tp.topic,
                self.tp.partition,
                self.data,
                self.fetch_offset,
                aborted_transactions=self.aborted,
                check_crcs=self.check_crcs,
            )
            self.records = records
            self.data = None
        return records


class Fetcher:
    """Fetches for the partitions of ``subscriptions``; see the module."""

    def __init__(
        self,
        client: KafkaClient,
        subscriptions: SubscriptionState,
        config: FetcherConfig,
        resolve_positions: Callable[[Sequence[TopicPartition]], Awaitable[None]],
    ) -> None:
        self._client = client
        self._subscriptions = subscriptions
        self.config = config
        self._resolve_positions = resolve_positions
        self.chunks: collections.deque[FetchedChunk] = collections.deque()
        self._pending_chunks: dict[TopicPartition, int] = collections.defaultdict(int)
        self._in_flight_nodes: set[int] = set()
        self._in_flight_tps: set[TopicPartition] = set()
        # Set when records (or an error) are there to take; cleared when nothing is left.
        self.data_ready = asyncio.Event()
        self.wakeup = asyncio.Event()
        # Errors for the user's next poll, oldest first.
        self.errors: list[KafkaError] = []
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def _assignment(self) -> dict[TopicPartition, PartitionState]:
        return self._subscriptions.assignment

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in list(self._tasks):
            task.cancel()

    def drop(self, partitions: Iterable[TopicPartition]) -> None:
        """Forget what was buffered for ``partitions`` (no longer assigned)."""
        dropped = set(partitions)
        if dropped:
            self.chunks = collections.deque(c for c in self.chunks if c.tp not in dropped)
            for tp in dropped:
                self._pending_chunks.pop(tp, None)
        self.wakeup.set()

    def set_position(
        self,
        tp: TopicPartition,
        state: PartitionState,
        offset: int | None,
        reset: int | None = None,
    ) -> None:
        """Consume ``tp`` from ``offset`` (None: resolve it, by ``reset`` when given): a new
        seek generation, and whatever was buffered for the partition dropped."""
        state.position = offset
        state.fetch_offset = offset
        state.reset = reset
        state.generation += 1
        if self._pending_chunks.get(tp):
            self.chunks = collections.deque(c for c in self.chunks if c.tp != tp)
            self._pending_chunks[tp] = 0
        self.wakeup.set()

    async def _run(self) -> None:
        while True:
            await self.wakeup.wait()
            self.wakeup.clear()
            try:
                await self._fetch_round()
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                log.debug("fetch round failed: %s", exc)
                self._wake_later()
            except Exception:
                log.exception("fetch round failed")
                self._wake_later()

    def _wake_later(self) -> None:
        asyncio.get_running_loop().call_later(self.config.retry_backoff_ms / 1000, self.wakeup.set)

    async def _fetch_round(self) -> None:
        unresolved = [
            tp for tp, s in self._assignment.items() if s.position is None and not s.paused
        ]
        if unresolved:
            await self._resolve_positions(unresolved)
        if self._client.metadata_stale:
            # Stale after a leader error or a lost connection, or simply old.
            try:
                await self._client.refresh_metadata()
            except KafkaError as exc:
                log.debug("metadata refresh failed: %s", exc)
                self._wake_later()
                return
        metadata = self._client.metadata
        by_node: dict[int, list[tuple[TopicPartition, int, int]]] = {}
        need_metadata = False
        for tp, state in self._assignment.items():
            if (
                state.paused
                or state.fetch_offset is None
                or tp in self._in_flight_tps
                or self._pending_chunks.get(tp, 0) >= _MAX_PENDING_CHUNKS
            ):
                continue
            leader = metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                need_metadata = True
                continue
            if leader in self._in_flight_nodes:
                continue
            by_node.setdefault(leader, []).append((tp, state.fetch_offset, state.generation))
        for node_id, parts in by_node.items():
            self._in_flight_nodes.add(node_id)
            self._in_flight_tps.update(tp for tp, _, _ in parts)
            task = asyncio.ensure_future(self._fetch(node_id, parts))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if need_metadata:
            self._client.invalidate()
            try:
                await self._client.refresh_metadata()
            except KafkaError as exc:
                log.debug("metadata refresh failed: %s", exc)
            self._wake_later()

    def _fetch_request(
        self, version: int, parts: Sequence[tuple[TopicPartition, int, int]]
    ) -> FetchRequest:
        req = FetchRequest
        metadata = self._client.metadata
        topics = []
        # One entry per run of a topic's partitions in the order of ``parts`` (groupby joins
        # neighbours only): gathering a topic's partitions together would undo the rotation.
        for name, run in groupby(parts, key=lambda part: part[0].topic):
            partitions = [
                req.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=-1,
                    fetch_offset=offset,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=self.config.max_partition_fetch_bytes,
                )
                for tp, offset, _ in run
            ]
            info = metadata.topics.get(name)
            topic_id = info.topic_id if info is not None else None
            kwargs: dict[str, Any] = {"topic": name, "partitions": partitions}
            if topic_id is not None:
                kwargs["topic_id"] = topic_id
            topics.append(req.FetchTopic(**kwargs))
        return req(
            replica_id=-1,
            max_wait_ms=self.config.fetch_max_wait_ms,
            min_bytes=self.config.fetch_min_bytes,
            max_bytes=self.config.fetch_max_bytes,
            isolation_level=self.config.isolation,
            session_id=0,
            session_epoch=-1,
            topics=topics,
        )

    async def _fetch(self, node_id: int, parts: list[tuple[TopicPartition, int, int]]) -> None:
        try:
            conn = await self._client.connection(node_id)
            version = conn.version_for(ApiKey.FETCH)
            metadata = self._client.metadata
            if version >= 13 and any(
                (info := metadata.topics.get(tp.topic)) is None or info.topic_id is None
                for tp, _, _ in parts
            ):
                version = 12
            body = self._fetch_request(version, parts)
            timeout_s = self.config.request_timeout_ms / 1000 + self.config.fetch_max_wait_ms / 1000
            response: FetchResponse = await conn.request(
                ApiKey.FETCH, body, version=version, timeout_s=timeout_s
            )
            self._handle_fetch_response(version, parts, response)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("fetch from node %d failed: %s", node_id, exc)
            self._client.invalidate()
            self._wake_later()
        except KafkaError as exc:
            self.errors.append(exc)
            self.data_ready.set()
        finally:
            self._in_flight_nodes.discard(node_id)
            self._in_flight_tps.difference_update(tp for tp, _, _ in parts)
            self.wakeup.set()

    def _handle_fetch_response(
        self, version: int, parts: list[tuple[TopicPartition, int, int]], response: FetchResponse
    ) -> None:
        if response.error_code:
            raise error_for(response.error_code)
        sent = {tp: (offset, generation) for tp, offset, generation in parts}
        names_by_id = self._client.metadata.topic_names_by_id
        got_data = False
        refresh = False
        for topic in response.responses:
            name = topic.topic if version < 13 else names_by_id.get(topic.topic_id, "")
            for part in topic.partitions:
                tp = TopicPartition(name, part.partition_index)
                request = sent.get(tp)
                state = self._assignment.get(tp)
                if request is None or state is None:
                    continue
                offset, generation = request
                if state.generation != generation or state.fetch_offset != offset:
                    continue  # the user sought elsewhere while this fetch was in flight
                code = part.error_code
                if code:
                    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        if self.config.auto_offset_reset == "none":
                            self.errors.append(
                                OffsetOutOfRangeError(
                                    topic=tp.topic, partition=tp.partition, offset=offset
                                )
                            )
                            got_data = True
                        else:
                            reset = (
                                EARLIEST_TIMESTAMP
                                if self.config.auto_offset_reset == "earliest"
                                else LATEST_TIMESTAMP
                            )
                            log.info(
                                "offset %d out of range for %s: resetting to %s",
                                offset,
                                tp,
                                self.config.auto_offset_reset,
                            )
                            self.set_position(tp, state, None, reset)
                    elif code in METADATA_ERRORS or ErrorCode(code).retriable:
                        refresh = True
                    else:
                        self.errors.append(error_for(code, topic=tp.topic, partition=tp.partition))
                        got_data = True
                    continue
                state.high_watermark = part.high_watermark
                state.log_start_offset = part.log_start_offset
                next_offset, has_records = next_fetch_offset(part.records, offset)
                state.fetch_offset = next_offset
                if not has_records and next_offset > offset:
                    # Only control batches (transaction markers) or aborted data: nothing
                    # to return, but the position moves past them, after any chunk before.
                    if self._pending_chunks.get(tp, 0) == 0:
                        if state.position is not None and state.position < next_offset:
                            state.position = next_offset
                    else:
                        empty = FetchedChunk(tp, None, offset, generation, next_offset=next_offset)
                        empty.records = []
                        self.chunks.append(empty)
                        self._pending_chunks[tp] += 1
                if has_records:
                    aborted = None
                    if self.config.isolation and part.aborted_transactions:
                        aborted = [
                            (a.producer_id, a.first_offset) for a in part.aborted_transactions
                        ]
                    self.chunks.append(
                        FetchedChunk(
                            tp,
                            part.records,
                            offset,
                            generation,
                            aborted,
                            self.config.check_crcs,
                            next_offset,
                        )
                    )
                    self._pending_chunks[tp] += 1
                    got_data = True
                    # To the back of the fetch order: the next fetch asks for the others first.
                    del self._assignment[tp]
                    self._assignment[tp] = state
        if refresh:
            self._client.invalidate()
            self._wake_later()
        if got_data:
            self.data_ready.set()

    # ------------------------------------------------------------------ taking records

    def raise_pending_error(self) -> None:
        if self.errors:
            error = self.errors.pop(0)
            raise error

    def take(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        remaining = max_records
        chunks = self.chunks
        while chunks and remaining > 0:
            chunk = chunks[0]
            state = self._assignment.get(chunk.tp)
            if state is None or state.generation != chunk.generation or state.position is None:
                chunks.popleft()
                self._pending_chunks[chunk.tp] = max(0, self._pending_chunks[chunk.tp] - 1)
                continue
            if state.paused:
                chunks.rotate(-1)
                if all(
                    self._assignment.get(c.tp) is not None and self._assignment[c.tp].paused
                    for c in chunks
                ):
                    break
                continue
            try:
                records = chunk.decoded()
            except CorruptRecordError as exc:
                chunks.popleft()
                self._pending_chunks[chunk.tp] = max(0, self._pending_chunks[chunk.tp] - 1)
                raise KafkaError(
                    f"corrupt records in {chunk.tp} after offset {chunk.fetch_offset}: {exc}",
                    topic=chunk.tp.topic,
                    partition=chunk.tp.partition,
                ) from exc
            start = chunk.index
            position = state.position
            # Skip records before the position (a compressed batch starts earlier).
            while start < len(records) and records[start].offset < position:
                start += 1
            end = min(len(records), start + remaining)
            if end > start:
                taken = records[start:end]
                existing = out.get(chunk.tp)
                if existing is None:
                    out[chunk.tp] = taken
                else:
                    existing.extend(taken)
                remaining -= end - start
                state.position = records[end - 1].offset + 1
            chunk.index = end
            if end >= len(records):
                if chunk.next_offset > state.position:
                    state.position = chunk.next_offset
                chunks.popleft()
                self._pending_chunks[chunk.tp] = max(0, self._pending_chunks[chunk.tp] - 1)
                self.wakeup.set()
        if not chunks or not out:
            # Nothing left, or only chunks of paused partitions: wait for new data.
            self.data_ready.clear()
        return out
