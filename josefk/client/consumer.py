"""The asyncio consumer: assign/seek or group subscription, positions, polling, commits.

Owns ``ConsumerConfig`` and ``AIOConsumer``; the fetching itself is the ``Fetcher``'s
(fetcher.py: Fetch requests in flight, buffered chunks, decoding into records).

Positions. Each assigned partition has a *position* (the offset of the next record handed to
the user) and a *fetch offset* (the next offset to ask the broker for; ahead of the position
while fetched records wait in the buffer). A partition without a position is resolved before
fetching: from the group's committed offset when there is one, else by ``auto_offset_reset``
(earliest / latest through ListOffsets); the fetcher asks for it (``_resolve_positions``).
``seek`` sets both offsets and drops whatever was buffered or in flight for the partition (a
per-partition seek generation tells a late fetch response that its records are stale).

Fetch pipelining (fetcher.py). One Fetch request per leader broker for every partition that
has fewer than two fetched chunks waiting, so while the user works through one chunk the
next is already in flight or buffered; a chunk is decoded by the poll that first reaches it;
a partition that returned records moves to the back of the fetch order.

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

Imports josefk.protocol, josefk.records and josefk.client modules (fetcher, group,
subscription...); never josefk.storage or josefk.broker, and the fetcher never imports it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from josefk.client.cluster import ClientConfig, KafkaClient
from josefk.client.consumer_group import ConsumerGroupMember
from josefk.client.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    error_for,
)
from josefk.client.fetcher import EARLIEST_TIMESTAMP as EARLIEST_TIMESTAMP
from josefk.client.fetcher import LATEST_TIMESTAMP as LATEST_TIMESTAMP
from josefk.client.fetcher import Fetcher, FetcherConfig
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
    ListOffsetsRequest,
    ListOffsetsResponse,
)

if TYPE_CHECKING:
    from josefk.client.assignors import Assignor

log = logging.getLogger("josefk.client.consumer")


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
        self._fetcher = Fetcher(
            self._client,
            self._subscriptions,
            FetcherConfig(
                fetch_min_bytes=config.fetch_min_bytes,
                fetch_max_wait_ms=config.fetch_max_wait_ms,
                fetch_max_bytes=config.fetch_max_bytes,
                max_partition_fetch_bytes=config.max_partition_fetch_bytes,
                isolation=1 if config.isolation_level == "read_committed" else 0,
                check_crcs=config.check_crcs,
                auto_offset_reset=config.auto_offset_reset,
                retry_backoff_ms=config.retry_backoff_ms,
                request_timeout_ms=config.request_timeout_ms,
            ),
            self._resolve_positions,
        )
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
        self._fetcher.start()
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
            self._fetcher.stop()
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
        self._fetcher.drop(dropped)

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
        self._fetcher.set_position(tp, state, offset, reset)

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
        self._fetcher.wakeup.set()

    def highwater(self, tp: TopicPartition) -> int:
        """The partition's high watermark from the last fetch response (-1 if none yet)."""
        return self._state(TopicPartition(*tp)).high_watermark

    # ------------------------------------------------------------------ offsets lookups

    async def list_offsets(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """ListOffsets for each partition (timestamp -2 earliest, -1 latest, else by time)."""
        return await list_offsets(
            self._client, timestamps, isolation_level=self._fetcher.config.isolation
        )

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
                self._fetcher.errors.append(
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

    # ------------------------------------------------------------------ polling

    async def getmany(
        self, *, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Fetched records by partition, at most ``max_records`` (default
        ``max_poll_records``); waits up to ``timeout_ms`` when none are buffered."""
        self._check_open()
        fetcher = self._fetcher
        fetcher.raise_pending_error()
        limit = max_records or self.config.max_poll_records
        got = self._take(limit)
        if got or timeout_ms <= 0:
            return got
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            fetcher.wakeup.set()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {}
            try:
                async with asyncio.timeout(remaining):
                    await fetcher.data_ready.wait()
            except TimeoutError:
                return {}
            fetcher.raise_pending_error()
            got = self._take(limit)
            if got:
                return got

    def _take(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out = self._fetcher.take(max_records)
        if self._coordinator is not None:
            self._coordinator.polled()
        return out

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
            by_topic: dict[str, list[ListOffsetsRequest.ListOffsetsPartition]] = {}
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
