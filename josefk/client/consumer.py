"""The asyncio consumer: assign/seek or group subscription, pipelined fetching, commits.

Owns ``ConsumerConfig`` and ``AIOConsumer``.

Positions. Each assigned partition has a *position* (the offset of the next record handed to
the user) and a *fetch offset* (the next offset to ask the broker for; ahead of the position
while fetched records wait in the buffer). A partition without a position is resolved before
fetching: from the group's committed offset when there is one, else by ``auto_offset_reset``
(earliest / latest through ListOffsets). ``seek`` sets both offsets and drops whatever was
buffered or in flight for the partition (a per-partition seek generation tells a late fetch
response that its records are stale).

Fetch pipelining. One fetcher task sends one Fetch request per leader broker for every
partition that has fewer than two fetched chunks waiting, so while the user works through one
chunk the next is already in flight or buffered. A chunk's records are decoded batch by
batch into ``ConsumerRecord`` tuples (decode.py) by the poll that first reaches it, so the
next fetch is already on its way; control batches are skipped. A fetch names its partitions
in assignment order and the broker reads them in that order until ``fetch_max_bytes`` is used
up, so a partition that returned records moves to the back of the order (as Kafka's consumer
does): partitions that always have more than the limit waiting cannot starve the others.

Errors: OFFSET_OUT_OF_RANGE resets the position by ``auto_offset_reset`` (or raises
OffsetOutOfRangeError from the next poll when it is "none"); leader errors refresh metadata
and fetch again; other errors are raised from the next poll.

Groups. With ``group_id`` and ``subscribe(...)`` a ``GroupCoordinator`` (group.py; or, with
``group_protocol="consumer"``, a KIP-848 ``ConsumerGroupMember``, consumer_group.py) runs the
classic protocol in the background and sets the assignment in the consumer's
``SubscriptionState`` (subscription.py), the one object the two share; ``commit`` /
``commit_async`` store positions in the group (also for an assign()-only consumer with a
group_id, as Kafka allows), and auto-commit commits every ``auto_commit_interval_ms``.
A ``ConsumerRebalanceListener`` hears about partitions revoked and assigned. Topics given
without a group_id are consumed whole (every partition assigned, no group).

Isolation. With ``isolation_level="read_committed"`` the broker stops at the last stable
offset and lists the aborted transactions of the range; their batches are dropped (decode.py).
Control batches (transaction markers) are never returned under either level, but the
position moves past them, so it may run ahead of the last record returned, as in Kafka.
``group_metadata()`` gives a transactional producer what send_offsets_to_transaction needs.

Imports josefk.protocol, josefk.records and josefk.client modules; never josefk.storage or
josefk.broker.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, Any, Final

from josefk.client.cluster import METADATA_ERRORS, ClientConfig, KafkaClient
from josefk.client.consumer_group import ConsumerGroupMember
from josefk.client.decode import decode_records, next_fetch_offset
from josefk.client.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    error_for,
)
from josefk.client.group import GroupCoordinator
from josefk.client.subscription import (
    ConsumerRebalanceListener as ConsumerRebalanceListener,
)
from josefk.client.subscription import PartitionState, SubscriptionState
from josefk.client.types import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndTimestamp,
    TopicPartition,
)
from josefk.protocol import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from josefk.records import CorruptRecordError

if TYPE_CHECKING:
    from josefk.client.assignors import Assignor

log = logging.getLogger("josefk.client.consumer")

EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
_MAX_PENDING_CHUNKS: Final = 2


@dataclass(kw_only=True)
class ConsumerConfig(ClientConfig):
    """Consumer settings, with Kafka's names and defaults where Kafka has them."""

    group_id: str | None = None
    group_instance_id: str | None = None
    auto_offset_reset: str = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 52_428_800
    max_partition_fetch_bytes: int = 1_048_576
    max_poll_records: int = 500
    isolation_level: str = "read_uncommitted"
    # Verify each fetched batch's CRC32C before reading it (librdkafka's default: off).
    check_crcs: bool = False
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    rebalance_timeout_ms: int | None = None
    partition_assignment_strategy: Sequence[Assignor] = field(default_factory=tuple)
    rebalance_listener: ConsumerRebalanceListener | None = None
    # "classic" (JoinGroup/SyncGroup, client-side assignors) or "consumer" (KIP-848: the
    # broker assigns; Kafka's group.protocol), with the server-side assignor to ask for.
    group_protocol: str = "classic"
    group_remote_assignor: str | None = None
    exclude_internal_topics: bool = True


class _Chunk:
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


class AIOConsumer:
    """An asyncio Kafka consumer.

    Usage::

        consumer = AIOConsumer(bootstrap_servers="127.0.0.1:9092", auto_offset_reset="earliest")
        await consumer.start()
        consumer.assign([TopicPartition("events", 0)])
        async for record in consumer:
            print(record.offset, record.key, record.value)

    or with a group: ``AIOConsumer("events", group_id="g", ...)`` / ``subscribe([...])``.
    Topics given without a group_id are consumed whole: every partition is assigned.
    Methods must be called on the loop that ran ``start``.
    """

    def __init__(self, *topics: str, config: ConsumerConfig | None = None, **settings: Any) -> None:
        if config is None:
            config = ConsumerConfig(**settings)
        elif settings:
            raise TypeError("pass either a ConsumerConfig or keyword settings, not both")
        if config.auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError("auto_offset_reset must be earliest, latest or none")
        if config.isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation_level must be read_uncommitted or read_committed")
        self.config = config
        self._client = KafkaClient(config)
        self._subscriptions = SubscriptionState(config.rebalance_listener, self._assignment_changed)
        self._chunks: collections.deque[_Chunk] = collections.deque()
        self._pending_chunks: dict[TopicPartition, int] = collections.defaultdict(int)
        self._in_flight_nodes: set[int] = set()
        self._in_flight_tps: set[TopicPartition] = set()
        self._data_ready = asyncio.Event()
        self._fetch_wakeup = asyncio.Event()
        self._errors: list[KafkaError] = []
        self._fetcher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._isolation = 1 if config.isolation_level == "read_committed" else 0
        self._subscription: list[str] = list(topics)
        self._coordinator: GroupCoordinator | ConsumerGroupMember | None = None
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        if self._started:
            return
        await self._client.start()
        self._started = True
        self._fetcher = asyncio.ensure_future(self._run_fetcher())
        if self.config.group_id is not None:
            if self.config.group_protocol == "consumer":
                self._coordinator = ConsumerGroupMember(
                    self._client, self.config, self._subscriptions
                )
            else:
                self._coordinator = GroupCoordinator(self._client, self.config, self._subscriptions)
            if self._subscription:
                self._coordinator.subscribe(self._subscription)
            self._coordinator.start()
        elif self._subscription:
            # Topics without a group: every partition of them, as aiokafka does.
            partitions: list[TopicPartition] = []
            for topic in self._subscription:
                info = await self._client.wait_for_topic(topic)
                partitions.extend(TopicPartition(topic, p) for p in info.partition_ids)
            self._set_assignment(partitions)

    async def close(self) -> None:
        """Commit (auto-commit), leave the group, stop fetching and close connections."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._coordinator is not None:
                await self._coordinator.close()
        finally:
            if self._fetcher is not None:
                self._fetcher.cancel()
            for task in list(self._tasks):
                task.cancel()
            await self._client.close()

    async def __aenter__(self) -> AIOConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("consumer is closed")
        if not self._started:
            raise IllegalStateError("consumer not started: call await start() first")

    @property
    def client(self) -> KafkaClient:
        return self._client

    # ------------------------------------------------------------------ assignment

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (no group rebalancing)."""
        self._check_open()
        if self._coordinator is not None and self._coordinator.subscribed:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        self._set_assignment([TopicPartition(*tp) for tp in partitions])

    def subscribe(
        self, topics: Iterable[str], *, listener: ConsumerRebalanceListener | None = None
    ) -> None:
        """Join ``group_id`` and consume what the group assigns of ``topics``.

        ``listener`` is told about each rebalance (e.g. to commit what it processed when
        partitions are revoked); it replaces a listener given before.
        """
        self._check_open()
        if self._coordinator is None:
            raise IllegalStateError("subscribe() needs a group_id")
        self._subscription = list(topics)
        if listener is not None:
            self._subscriptions.listener = listener
        self._coordinator.subscribe(self._subscription)

    async def unsubscribe(self) -> None:
        if self._coordinator is not None:
            await self._coordinator.unsubscribe()
        self._set_assignment([])

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group, generation, member id and instance id, for a transactional
        producer's ``send_offsets_to_transaction`` (KIP-447)."""
        if self.config.group_id is None:
            raise IllegalStateError("group_metadata() needs a group_id")
        coordinator = self._coordinator
        if coordinator is None:
            return ConsumerGroupMetadata(
                self.config.group_id, group_instance_id=self.config.group_instance_id
            )
        return ConsumerGroupMetadata(
            self.config.group_id,
            coordinator.generation_id,
            coordinator.member_id,
            self.config.group_instance_id,
        )

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def subscription(self) -> set[str]:
        return set(self._subscription)

    @property
    def _assignment(self) -> dict[TopicPartition, PartitionState]:
        """The live map of assigned partitions (owned by the subscription state)."""
        return self._subscriptions.assignment

    def _set_assignment(self, partitions: Sequence[TopicPartition]) -> None:
        """Replace the assignment; kept partitions keep their positions."""
        self._subscriptions.set_assignment(partitions)

    def _assignment_changed(
        self, assigned: set[TopicPartition], dropped: set[TopicPartition]
    ) -> None:
        """The assignment changed (here or in the group): fetch for the new partitions and
        forget what was buffered for the dropped ones."""
        self._client.add_topics({tp.topic for tp in assigned})
        if dropped:
            self._chunks = collections.deque(c for c in self._chunks if c.tp not in dropped)
            for tp in dropped:
                self._pending_chunks.pop(tp, None)
        self._fetch_wakeup.set()

    def _state(self, tp: TopicPartition) -> PartitionState:
        state = self._assignment.get(tp)
        if state is None:
            raise IllegalStateError(f"{tp} is not assigned to this consumer")
        return state

    # ------------------------------------------------------------------ positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Consume ``tp`` from ``offset`` on."""
        state = self._state(TopicPartition(*tp))
        self._set_position(TopicPartition(*tp), state, offset)

    def _set_position(
        self,
        tp: TopicPartition,
        state: PartitionState,
        offset: int | None,
        reset: int | None = None,
    ) -> None:
        state.position = offset
        state.fetch_offset = offset
        state.reset = reset
        state.generation += 1
        if self._pending_chunks.get(tp):
            self._chunks = collections.deque(c for c in self._chunks if c.tp != tp)
            self._pending_chunks[tp] = 0
        self._fetch_wakeup.set()

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._assignment):
            self._set_position(
                TopicPartition(*tp), self._state(TopicPartition(*tp)), None, EARLIEST_TIMESTAMP
            )

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._assignment):
            self._set_position(
                TopicPartition(*tp), self._state(TopicPartition(*tp)), None, LATEST_TIMESTAMP
            )

    async def seek_to_timestamp(self, timestamp_ms: int, *partitions: TopicPartition) -> None:
        """Position each partition at its first record with a timestamp >= ``timestamp_ms``
        (at the end when there is none)."""
        tps = [TopicPartition(*tp) for tp in partitions] or list(self._assignment)
        found = await self.offsets_for_times({tp: timestamp_ms for tp in tps})
        ends: dict[TopicPartition, int] = {}
        missing = [tp for tp, hit in found.items() if hit is None]
        if missing:
            ends = await self.end_offsets(missing)
        for tp in tps:
            hit = found.get(tp)
            self.seek(tp, hit.offset if hit is not None else ends[tp])

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record to be returned for ``tp`` (resolved if needed)."""
        tp = TopicPartition(*tp)
        while (position := self._state(tp).position) is None:
            await self._resolve_positions([tp])
        return position

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(TopicPartition(*tp)).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(TopicPartition(*tp)).paused = False
        self._fetch_wakeup.set()

    def highwater(self, tp: TopicPartition) -> int:
        """The partition's high watermark from the last fetch response (-1 if none yet)."""
        return self._state(TopicPartition(*tp)).high_watermark

    # ------------------------------------------------------------------ offsets lookups

    async def list_offsets(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """ListOffsets for each partition (timestamp -2 earliest, -1 latest, else by time)."""
        return await list_offsets(self._client, timestamps, isolation_level=self._isolation)

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        found = await self.list_offsets(
            {TopicPartition(*tp): EARLIEST_TIMESTAMP for tp in partitions}
        )
        return {tp: hit.offset for tp, hit in found.items() if hit is not None}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self.list_offsets(
            {TopicPartition(*tp): LATEST_TIMESTAMP for tp in partitions}
        )
        return {tp: hit.offset for tp, hit in found.items() if hit is not None}

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return await self.list_offsets(timestamps)

    async def _resolve_positions(self, tps: Sequence[TopicPartition]) -> None:
        """Give positions to partitions that lack one: committed offset, else reset policy.

        Each lookup remembers the partition's seek generation; a result that comes back
        after the user sought elsewhere is dropped.
        """
        unresolved = {
            tp: self._assignment[tp].generation
            for tp in tps
            if tp in self._assignment and self._assignment[tp].position is None
        }
        if not unresolved:
            return

        def current(tp: TopicPartition) -> PartitionState | None:
            state = self._assignment.get(tp)
            if state is None or state.position is not None or state.generation != unresolved[tp]:
                return None
            return state

        if self._coordinator is not None:
            needing_committed = [tp for tp in unresolved if self._assignment[tp].reset is None]
            if needing_committed:
                committed = await self._coordinator.fetch_committed(needing_committed)
                for tp, offset in committed.items():
                    state = current(tp) if tp in unresolved else None
                    if state is not None and offset is not None and offset >= 0:
                        self._set_position(tp, state, offset)
        wanted: dict[TopicPartition, int] = {}
        for tp in unresolved:
            state = current(tp)
            if state is None:
                continue
            unresolved[tp] = state.generation
            if state.reset is not None:
                wanted[tp] = state.reset
            elif self.config.auto_offset_reset == "earliest":
                wanted[tp] = EARLIEST_TIMESTAMP
            elif self.config.auto_offset_reset == "latest":
                wanted[tp] = LATEST_TIMESTAMP
            else:
                self._errors.append(
                    OffsetOutOfRangeError(
                        "no committed offset and auto_offset_reset=none",
                        topic=tp.topic,
                        partition=tp.partition,
                    )
                )
        if not wanted:
            return
        found = await self.list_offsets(wanted)
        for tp, hit in found.items():
            state = current(tp)
            if state is not None and hit is not None:
                self._set_position(tp, state, hit.offset)

    # ------------------------------------------------------------------ fetching

    async def _run_fetcher(self) -> None:
        while True:
            await self._fetch_wakeup.wait()
            self._fetch_wakeup.clear()
            try:
                await self._fetch_round()
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                log.debug("fetch round failed: %s", exc)
                self._wake_fetcher_later()
            except Exception:
                log.exception("fetch round failed")
                self._wake_fetcher_later()

    def _wake_fetcher_later(self) -> None:
        asyncio.get_running_loop().call_later(
            self.config.retry_backoff_ms / 1000, self._fetch_wakeup.set
        )

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
                self._wake_fetcher_later()
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
            self._wake_fetcher_later()

    def _fetch_request(self, version: int, parts: Sequence[tuple[TopicPartition, int, int]]) -> Any:
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
            isolation_level=self._isolation,
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
            self._wake_fetcher_later()
        except KafkaError as exc:
            self._errors.append(exc)
            self._data_ready.set()
        finally:
            self._in_flight_nodes.discard(node_id)
            self._in_flight_tps.difference_update(tp for tp, _, _ in parts)
            self._fetch_wakeup.set()

    def _handle_fetch_response(
        self, version: int, parts: list[tuple[TopicPartition, int, int]], response: Any
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
                            self._errors.append(
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
                            self._set_position(tp, state, None, reset)
                    elif code in METADATA_ERRORS or ErrorCode(code).retriable:
                        refresh = True
                    else:
                        self._errors.append(error_for(code, topic=tp.topic, partition=tp.partition))
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
                        empty = _Chunk(tp, None, offset, generation, next_offset=next_offset)
                        empty.records = []
                        self._chunks.append(empty)
                        self._pending_chunks[tp] += 1
                if has_records:
                    aborted = None
                    if self._isolation and part.aborted_transactions:
                        aborted = [
                            (a.producer_id, a.first_offset) for a in part.aborted_transactions
                        ]
                    self._chunks.append(
                        _Chunk(
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
            self._wake_fetcher_later()
        if got_data:
            self._data_ready.set()

    # ------------------------------------------------------------------ polling

    def _raise_pending_error(self) -> None:
        if self._errors:
            error = self._errors.pop(0)
            raise error

    def _take(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        remaining = max_records
        chunks = self._chunks
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
                self._fetch_wakeup.set()
        if not chunks or not out:
            # Nothing left, or only chunks of paused partitions: wait for new data.
            self._data_ready.clear()
        if self._coordinator is not None:
            self._coordinator.polled()
        return out

    async def getmany(
        self, *, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Fetched records by partition, at most ``max_records`` (default
        ``max_poll_records``); waits up to ``timeout_ms`` when none are buffered."""
        self._check_open()
        self._raise_pending_error()
        limit = max_records or self.config.max_poll_records
        got = self._take(limit)
        if got or timeout_ms <= 0:
            return got
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            self._fetch_wakeup.set()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {}
            try:
                async with asyncio.timeout(remaining):
                    await self._data_ready.wait()
            except TimeoutError:
                return {}
            self._raise_pending_error()
            got = self._take(limit)
            if got:
                return got

    async def getone(self, *, timeout_ms: int | None = None) -> ConsumerRecord:
        """The next record; waits for it (up to ``timeout_ms`` if given, then
        KafkaTimeoutError)."""
        while True:
            got = await self.getmany(
                timeout_ms=timeout_ms if timeout_ms is not None else 3_600_000, max_records=1
            )
            for records in got.values():
                return records[0]
            if timeout_ms is not None:
                raise KafkaTimeoutError(f"no record within {timeout_ms} ms")

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ConsumerRecord]:
        while not self._closed:
            got = await self.getmany(timeout_ms=1_000)
            for records in got.values():
                for record in records:
                    yield record

    # ------------------------------------------------------------------ commits

    def positions(self) -> dict[TopicPartition, int]:
        """Current positions of the assigned partitions that have one."""
        return self._subscriptions.positions()

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) to the group, and wait."""
        self._check_open()
        if self._coordinator is None:
            raise IllegalStateError("commit() needs a group_id")
        await self._coordinator.commit(dict(offsets) if offsets is not None else self.positions())

    def commit_async(
        self, offsets: Mapping[TopicPartition, int] | None = None
    ) -> asyncio.Future[None]:
        """Start a commit; the returned future says how it went."""
        return asyncio.ensure_future(self.commit(offsets))

    async def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset of ``tp`` (None when none)."""
        if self._coordinator is None:
            raise IllegalStateError("committed() needs a group_id")
        found = await self._coordinator.fetch_committed([TopicPartition(*tp)])
        return found.get(TopicPartition(*tp))


async def list_offsets(
    client: KafkaClient,
    timestamps: Mapping[TopicPartition, int],
    *,
    isolation_level: int = 0,
    attempts: int = 5,
) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """ListOffsets for each partition, sent to each partition's leader; retried on leader
    errors. A partition with no record at or after its timestamp maps to None."""
    result: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    todo = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
    req = ListOffsetsRequest
    for attempt in range(attempts):
        if not todo:
            break
        if attempt:
            await asyncio.sleep(min(1.0, client.config.retry_backoff_ms / 1000 * 2**attempt))
            await client.refresh_metadata({tp.topic for tp in todo})
        else:
            missing = [
                tp.topic
                for tp in todo
                if client.metadata.leader_for(tp.topic, tp.partition) is None
            ]
            if missing:
                await client.refresh_metadata(missing)
        by_node: dict[int, dict[TopicPartition, int]] = {}
        last_error: KafkaError | None = None
        for tp, ts in todo.items():
            leader = client.metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                info = client.metadata.topics.get(tp.topic)
                if (
                    info is not None
                    and info.error_code
                    and not ErrorCode(info.error_code).retriable
                ):
                    raise error_for(info.error_code, topic=tp.topic)
                continue
            by_node.setdefault(leader, {})[tp] = ts
        for node_id, wanted in by_node.items():
            by_topic: dict[str, list[Any]] = {}
            for tp, ts in wanted.items():
                by_topic.setdefault(tp.topic, []).append(
                    req.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=tp.partition, current_leader_epoch=-1, timestamp=ts
                    )
                )
            body = req(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[req.ListOffsetsTopic(name=n, partitions=p) for n, p in by_topic.items()],
                timeout_ms=client.config.request_timeout_ms,
            )
            try:
                response: ListOffsetsResponse = await client.request(
                    node_id, ApiKey.LIST_OFFSETS, body
                )
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last_error = exc
                continue
            for topic in response.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    if tp not in todo:
                        continue
                    if part.error_code:
                        err = error_for(part.error_code, topic=tp.topic, partition=tp.partition)
                        if not err.retriable:
                            raise err
                        last_error = err
                        continue
                    del todo[tp]
                    result[tp] = (
                        None if part.offset < 0 else OffsetAndTimestamp(part.offset, part.timestamp)
                    )
        if todo and attempt == attempts - 1:
            if last_error is not None:
                raise last_error
            raise KafkaTimeoutError(f"no leader for {sorted(todo)}")
    return result
