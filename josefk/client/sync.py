"""Blocking facade of josefk's client for scripts and notebooks.

Owns ``Producer``, ``Consumer``, ``ShareConsumer`` and ``Admin``: each runs its asyncio
counterpart (``AIOProducer``, ``AIOConsumer``, ``AIOShareConsumer``, ``AIOAdmin``) on a private event loop in a daemon thread
and blocks the calling thread on each call. ``Producer.send`` returns a
``concurrent.futures.Future`` of the ``RecordMetadata`` so a script can send many records and
wait once (``flush``). Works inside a running event loop too (e.g. Jupyter), because the
client's loop is not the caller's. Not for hot paths: every call crosses threads.

Imports josefk.client modules only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, Self, TypeVar

from josefk.client.admin import (
    AIOAdmin,
    ClusterDescription,
    ConfigEntry,
    GroupDescription,
    GroupListing,
    NewTopic,
    ProducerState,
    ResourceType,
    TopicDescription,
    TransactionDescription,
    TransactionListing,
)
from josefk.client.consumer import AIOConsumer
from josefk.client.errors import KafkaError
from josefk.client.producer import AIOProducer, HeadersInput
from josefk.client.share_consumer import AcknowledgeType, AIOShareConsumer, ShareConsumerRecord
from josefk.client.types import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

T = TypeVar("T")
A = TypeVar("A", AIOProducer, AIOConsumer, AIOShareConsumer, AIOAdmin)


class _LoopThread:
    """An event loop running forever in a daemon thread, until ``stop``."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        self.loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)


async def _make(cls: type[T], *args: Any, **settings: Any) -> T:
    obj = cls(*args, **settings)
    await obj.start()  # type: ignore[attr-defined]
    return obj


class _Blocking(Generic[A]):
    """One async client object on its own loop thread, closed with the facade; each public
    class below is one of these."""

    def __init__(self, thread_name: str, cls: type[A], *args: Any, **settings: Any) -> None:
        self._thread = _LoopThread(thread_name)
        try:
            self._async: A = self._thread.run(_make(cls, *args, **settings))
        except BaseException:
            self._thread.stop()
            raise

    def _call(self, fn: Any, *args: Any) -> Any:
        """Run a plain (not async) method of the client object on its loop."""

        async def call() -> Any:
            return fn(*args)

        return self._thread.run(call())

    async def _close(self) -> None:
        await self._async.close()

    def close(self) -> None:
        try:
            self._thread.run(self._close())
        finally:
            self._thread.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Producer(_Blocking[AIOProducer]):
    """Blocking producer: ``Producer(bootstrap_servers=...)`` takes ProducerConfig's settings."""

    def __init__(self, **settings: Any) -> None:
        self._queueing: set[asyncio.Future[Any]] = set()
        # The last record sent through ``AIOProducer.send`` (its topic had no metadata yet):
        # the next such record waits for it, so records keep the order they were sent in.
        self._last_queued: asyncio.Future[Any] | None = None
        super().__init__("josefk-producer", AIOProducer, **settings)
        self._producer = self._async

    async def _delivered(self, queued: asyncio.Future[Any]) -> RecordMetadata:
        future = await queued
        result: RecordMetadata = await future
        return result

    async def _send_after(
        self,
        previous: asyncio.Future[Any] | None,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        kwargs: dict[str, Any],
    ) -> asyncio.Future[RecordMetadata]:
        if previous is not None and not previous.done():
            await asyncio.wait({previous})  # its turn, not its outcome
        return await self._producer.send(topic, value, key, **kwargs)

    async def _queued(self) -> None:
        """Wait until every record sent so far is queued in the producer: a record whose
        topic had no metadata yet is still on its way through ``AIOProducer.send``, and a
        flush or commit must not overtake it."""
        while self._queueing:
            await asyncio.gather(*list(self._queueing), return_exceptions=True)

    def _submit(
        self,
        result: concurrent.futures.Future[RecordMetadata],
        topic: str,
        value: bytes | None,
        key: bytes | None,
        kwargs: dict[str, Any],
    ) -> None:
        """On the loop: queue the record at once when possible, else through ``send``."""
        if not result.set_running_or_notify_cancel():
            return
        future: asyncio.Future[RecordMetadata] | None = None
        # While an earlier record still waits for its topic's metadata, this one must not be
        # appended ahead of it: it waits its turn behind it.
        if not self._queueing:
            try:
                future = self._producer.send_nowait(topic, value, key, **kwargs)
            except BaseException as exc:  # noqa: BLE001  handed to the caller's future, which raises it
                result.set_exception(exc)
                return
        if future is None:
            queued = asyncio.ensure_future(
                self._send_after(self._last_queued, topic, value, key, kwargs)
            )
            self._last_queued = queued
            self._queueing.add(queued)
            queued.add_done_callback(self._queueing.discard)
            future = asyncio.ensure_future(self._delivered(queued))

        def done(f: asyncio.Future[RecordMetadata]) -> None:
            if f.cancelled():
                result.set_exception(asyncio.CancelledError())
            elif (exc := f.exception()) is not None:
                result.set_exception(exc)
            else:
                result.set_result(f.result())

        future.add_done_callback(done)

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: HeadersInput = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue a record; the future resolves on delivery."""
        kwargs = {"partition": partition, "timestamp_ms": timestamp_ms, "headers": headers}
        result: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        self._thread.loop.call_soon_threadsafe(self._submit, result, topic, value, key, kwargs)
        return result

    def send_and_wait(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: HeadersInput = None,
    ) -> RecordMetadata:
        return self.send(
            topic, value, key, partition=partition, timestamp_ms=timestamp_ms, headers=headers
        ).result()

    def flush(self, timeout_s: float | None = None) -> None:
        async def flush() -> None:
            await self._queued()
            await self._producer.flush(timeout_s)

        self._thread.run(flush())

    def partitions_for(self, topic: str) -> list[int]:
        return self._thread.run(self._producer.partitions_for(topic))

    def init_transactions(self) -> None:
        self._thread.run(self._producer.init_transactions())

    def begin_transaction(self) -> None:
        async def begin() -> None:
            self._producer.begin_transaction()

        self._thread.run(begin())

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int] | Sequence[tuple[TopicPartition, int]],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        self._thread.run(self._producer.send_offsets_to_transaction(offsets, group_metadata))

    def commit_transaction(self) -> None:
        async def commit() -> None:
            await self._queued()
            await self._producer.commit_transaction()

        self._thread.run(commit())

    def abort_transaction(self) -> None:
        async def abort() -> None:
            await self._queued()
            await self._producer.abort_transaction()

        self._thread.run(abort())

    def close(self, timeout_s: float | None = None) -> None:
        async def close() -> None:
            await self._queued()
            await self._producer.close(timeout_s)

        try:
            self._thread.run(close())
        finally:
            self._thread.stop()


class Consumer(_Blocking[AIOConsumer]):
    """Blocking consumer: ``Consumer("topic", group_id="g", bootstrap_servers=...)``."""

    def __init__(self, *topics: str, **settings: Any) -> None:
        super().__init__("josefk-consumer", AIOConsumer, *topics, **settings)
        self._consumer = self._async

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._call(self._consumer.assign, list(partitions))

    def subscribe(self, topics: Iterable[str]) -> None:
        self._call(self._consumer.subscribe, list(topics))

    def assignment(self) -> set[TopicPartition]:
        result: set[TopicPartition] = self._call(self._consumer.assignment)
        return result

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._call(self._consumer.seek, tp, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._call(self._consumer.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._call(self._consumer.seek_to_end, *partitions)

    def seek_to_timestamp(self, timestamp_ms: int, *partitions: TopicPartition) -> None:
        self._thread.run(self._consumer.seek_to_timestamp(timestamp_ms, *partitions))

    def position(self, tp: TopicPartition) -> int:
        return self._thread.run(self._consumer.position(tp))

    def poll(
        self, timeout_ms: int = 1_000, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records by partition, waiting up to ``timeout_ms`` for some."""
        return self._thread.run(
            self._consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        )

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while True:
            for records in self.poll(1_000).values():
                yield from records

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        self._thread.run(self._consumer.commit(offsets))

    def group_metadata(self) -> ConsumerGroupMetadata:
        result: ConsumerGroupMetadata = self._call(self._consumer.group_metadata)
        return result

    def committed(self, tp: TopicPartition) -> int | None:
        return self._thread.run(self._consumer.committed(tp))

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._thread.run(self._consumer.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._thread.run(self._consumer.end_offsets(list(partitions)))

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._thread.run(self._consumer.offsets_for_times(timestamps))


class ShareConsumer(_Blocking[AIOShareConsumer]):
    """Blocking share group member (KIP-932):
    ``ShareConsumer("topic", group_id="g", bootstrap_servers=...)`` takes
    ``AIOShareConsumer``'s settings (``acknowledgement_mode="explicit"`` to acknowledge each
    record with a type)."""

    def __init__(self, *topics: str, **settings: Any) -> None:
        super().__init__("josefk-share-consumer", AIOShareConsumer, **settings)
        self._consumer = self._async
        if topics:
            self.subscribe(topics)

    def subscribe(self, topics: Iterable[str]) -> None:
        self._call(self._consumer.subscribe, list(topics))

    def assignment(self) -> list[TopicPartition]:
        result: list[TopicPartition] = self._call(self._consumer.assignment)
        return result

    def poll(self, timeout_ms: int = 1_000) -> list[ShareConsumerRecord]:
        """Records acquired for this member, waiting up to ``timeout_ms`` for some; sends the
        acknowledgements made since the last poll (implicit mode: accepts the last poll's)."""
        return self._thread.run(self._consumer.poll(timeout_ms))

    def __iter__(self) -> Iterator[ShareConsumerRecord]:
        while True:
            yield from self.poll(1_000)

    def acknowledge(
        self, record: ShareConsumerRecord, ack_type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        self._call(self._consumer.acknowledge, record, ack_type)

    def commit(self) -> None:
        """Send the pending acknowledgements now and wait for the broker's answer."""
        self._thread.run(self._consumer.commit())


class Admin(_Blocking[AIOAdmin]):
    """Blocking admin client; the methods mirror ``AIOAdmin``'s."""

    def __init__(self, **settings: Any) -> None:
        super().__init__("josefk-admin", AIOAdmin, **settings)
        self._admin = self._async

    def describe_cluster(self) -> ClusterDescription:
        return self._thread.run(self._admin.describe_cluster())

    def list_topics(self, *, include_internal: bool = False) -> list[str]:
        return self._thread.run(self._admin.list_topics(include_internal=include_internal))

    def describe_topics(self, topics: Sequence[str] | None = None) -> list[TopicDescription]:
        return self._thread.run(self._admin.describe_topics(topics))

    def create_topics(
        self, topics: Iterable[NewTopic | str], *, validate_only: bool = False
    ) -> dict[str, KafkaError | None]:
        return self._thread.run(
            self._admin.create_topics(list(topics), validate_only=validate_only)
        )

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        self._thread.run(
            self._admin.create_topic(name, num_partitions, replication_factor, configs)
        )

    def delete_topics(self, topics: Iterable[str]) -> dict[str, KafkaError | None]:
        return self._thread.run(self._admin.delete_topics(list(topics)))

    def delete_topic(self, name: str) -> None:
        self._thread.run(self._admin.delete_topic(name))

    def create_partitions(self, new_totals: Mapping[str, int]) -> dict[str, KafkaError | None]:
        return self._thread.run(self._admin.create_partitions(new_totals))

    def describe_configs(
        self, resources: Iterable[tuple[ResourceType | int, str]]
    ) -> dict[tuple[ResourceType, str], dict[str, ConfigEntry]]:
        return self._thread.run(self._admin.describe_configs(list(resources)))

    def describe_topic_configs(self, topic: str) -> dict[str, ConfigEntry]:
        return self._thread.run(self._admin.describe_topic_configs(topic))

    def alter_configs(
        self, resource: tuple[ResourceType | int, str], changes: Mapping[str, Any]
    ) -> None:
        self._thread.run(self._admin.alter_configs(resource, changes))

    def list_offsets(
        self,
        timestamps: Mapping[TopicPartition, int],
        *,
        isolation_level: str = "read_uncommitted",
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._thread.run(
            self._admin.list_offsets(timestamps, isolation_level=isolation_level)
        )

    def list_transactions(
        self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
    ) -> list[TransactionListing]:
        return self._thread.run(
            self._admin.list_transactions(states=list(states), producer_ids=list(producer_ids))
        )

    def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[TransactionDescription]:
        return self._thread.run(self._admin.describe_transactions(transactional_ids))

    def describe_producers(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
        return self._thread.run(self._admin.describe_producers(list(partitions)))

    def list_groups(self) -> list[GroupListing]:
        return self._thread.run(self._admin.list_groups())

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        return self._thread.run(self._admin.describe_groups(group_ids))

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, KafkaError | None]:
        return self._thread.run(self._admin.delete_groups(group_ids))

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        return self._thread.run(self._admin.list_group_offsets(group_id))

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        self._thread.run(self._admin.alter_group_offsets(group_id, offsets))

    def list_share_group_offsets(self, group_id: str) -> dict[TopicPartition, tuple[int, int]]:
        return self._thread.run(self._admin.list_share_group_offsets(group_id))

    def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        self._thread.run(self._admin.alter_share_group_offsets(group_id, offsets))

    def delete_share_group_offsets(self, group_id: str, topics: Sequence[str]) -> None:
        self._thread.run(self._admin.delete_share_group_offsets(group_id, topics))

    def reset_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition], *, to: str | int = "earliest"
    ) -> dict[TopicPartition, int]:
        return self._thread.run(self._admin.reset_group_offsets(group_id, partitions, to=to))
