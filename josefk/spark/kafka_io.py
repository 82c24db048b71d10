"""What the data source does with josefk's client: offset lookups, range reads, writes.

Owns ``OffsetLookup`` (driver side: which partitions a subscription covers, their earliest
and latest offsets, offsets by timestamp), ``read_range`` (executor side: the records of one
``OffsetRange`` as pyarrow RecordBatches or tuples, up to the range's end, which the driver
took from the high watermark, or the last stable offset under read_committed), ``write_rows``
(executor side: rows produced with josefk's producer, every delivery awaited so an error
fails the task), ``write_rows_in_transaction`` (the same inside a transaction left open
for the driver), ``complete_transactions`` (driver side: EndTxn for each task's) and
``fence_transactions`` (driver side, after a failed job: InitProducerId for each task that
left no commit message, aborting whatever it left open).

Each executor call runs josefk's asyncio client on a private event loop driven from the
calling thread (``run_until_complete`` step by step), so a read yields batch after batch
without buffering the whole range and without a helper thread.

Imports josefk.client and josefk.spark's pure modules; pyarrow only inside the functions
that build Arrow data; never pyspark (the caller hands in the Arrow schema).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar

from josefk.client import (
    AIOAdmin,
    AIOConsumer,
    AIOProducer,
    ClientConfig,
    ConsumerRecord,
    KafkaClient,
    KafkaTimeoutError,
    TopicPartition,
    complete_transaction,
)
from josefk.client import PreparedTransaction as PreparedTransaction  # for source.py
from josefk.client.errors import OffsetOutOfRangeError
from josefk.client.transactions import TransactionManager
from josefk.spark.options import EARLIEST, LATEST, Subscription
from josefk.spark.planning import OffsetRange

log = logging.getLogger("josefk.spark")

T = TypeVar("T")
TopicPartitionKey = tuple[str, int]

# Records asked of the consumer per poll; also the most rows in one Arrow batch.
_ROWS_PER_POLL: Final = 50_000
# How long one poll of a range read waits before the reader looks at the position again.
_POLL_STEP_MS: Final = 500
_CLIENT_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(ClientConfig))


class DataLossError(RuntimeError):
    """Offsets the query must read are gone (below the log start offset, or the partition
    or topic was deleted) and ``failOnDataLoss`` is true."""


DATA_LOSS_HINT: Final = (
    "Some data may have been lost: the offsets are no longer in josefk (deleted by retention "
    "or DeleteRecords, or the topic was deleted). If the query should skip such data and go "
    'on, set the source option "failOnDataLoss" to "false".'
)


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Fail with ``message`` or log it as a warning, per ``failOnDataLoss``."""
    if fail_on_data_loss:
        raise DataLossError(f"{message}. {DATA_LOSS_HINT}")
    log.warning("%s; failOnDataLoss=false: skipping the lost offsets", message)


def _admin_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in settings.items() if k in _CLIENT_FIELDS}
    # Looking offsets up must never create a topic the query merely subscribes to.
    out["allow_auto_create_topics"] = False
    return out


class OffsetLookup:
    """Driver-side lookups with one admin connection kept open between calls.

    Methods block the calling thread; call them from one thread at a time. ``close`` releases
    the connection (the object stays usable: the next call reconnects).
    """

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._settings = _admin_settings(settings)
        # Under read_committed the latest offset is the last stable offset: a range never
        # ends inside an open transaction.
        self._isolation = str(settings.get("isolation_level", "read_uncommitted"))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._admin: AIOAdmin | None = None

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    async def _connected(self) -> AIOAdmin:
        if self._admin is None:
            admin = AIOAdmin(**self._settings)
            await admin.start()
            self._admin = admin
        return self._admin

    def close(self) -> None:
        if self._loop is None:
            return
        if self._admin is not None:
            admin, self._admin = self._admin, None
            try:
                self._run(admin.close())
            except Exception:  # closing a broken connection must not fail the query
                log.debug("closing the admin client failed", exc_info=True)
        self._loop.close()
        self._loop = None

    def partitions(self, subscription: Subscription) -> list[TopicPartitionKey]:
        """The partitions the subscription covers now (sorted); missing topics cover none."""
        return self._run(self._partitions(subscription))

    async def _partitions(self, subscription: Subscription) -> list[TopicPartitionKey]:
        admin = await self._connected()
        existing = set(await admin.list_topics())
        if subscription.assign:
            wanted = sorted({t for t, _ in subscription.assign} & existing)
        else:
            wanted = sorted(t for t in existing if subscription.matches(t))
        if not wanted:
            return []
        found: set[TopicPartitionKey] = set()
        for topic in await admin.describe_topics(wanted):
            for p in topic.partitions:
                found.add((topic.name, p.partition))
        if subscription.assign:
            return sorted(tp for tp in subscription.assign if tp in found)
        return sorted(found)

    def _list(
        self, tps: Iterable[TopicPartitionKey], timestamp: int
    ) -> dict[TopicPartitionKey, int]:
        wanted = {TopicPartition(t, p): timestamp for t, p in tps}
        if not wanted:
            return {}

        async def run() -> dict[TopicPartitionKey, int]:
            admin = await self._connected()
            found = await admin.list_offsets(wanted, isolation_level=self._isolation)
            return {(tp.topic, tp.partition): hit.offset for tp, hit in found.items() if hit}

        return self._run(run())

    def earliest(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Each partition's log start offset."""
        return self._list(tps, EARLIEST)

    def latest(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Each partition's high watermark (last stable offset under read_committed): the
        end of what a consumer may read."""
        return self._list(tps, LATEST)

    def for_time(
        self, tps: Sequence[TopicPartitionKey], timestamp_ms: int
    ) -> dict[TopicPartitionKey, int]:
        """The first offset with a timestamp >= ``timestamp_ms``; the latest when none is."""
        by_time = self._list(tps, timestamp_ms)
        missing = [tp for tp in tps if tp not in by_time]
        return {**self.latest(missing), **by_time}


# ---------------------------------------------------------------------------- reading


def _records_to_arrow(
    records: Sequence[ConsumerRecord],
    topic: str,
    partition: int,
    include_headers: bool,
    schema: Any,
) -> Any:
    """One RecordBatch in the source schema: columns built from whole lists, not per row."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    n = len(records)
    # ConsumerRecord fields: topic, partition, offset, timestamp, timestamp_type, key,
    # value, headers, leader_epoch. zip(*) transposes in C.
    _, _, offsets, timestamps, ts_types, keys, values, headers, _ = zip(*records, strict=True)
    arrays = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        # Kafka timestamps are milliseconds; Spark's are microseconds (the cast scales).
        pa.array(timestamps, pa.timestamp("ms", tz="UTC")).cast(schema.field(5).type),
        pa.array(ts_types, pa.int32()),
    ]
    if include_headers:
        arrays.append(pa.array(headers, schema.field(7).type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _records_to_rows(
    records: Sequence[ConsumerRecord], include_headers: bool
) -> Iterator[tuple[Any, ...]]:
    import datetime

    utc = datetime.UTC
    from_ts = datetime.datetime.fromtimestamp
    for r in records:
        row: tuple[Any, ...] = (
            r.key,
            r.value,
            r.topic,
            r.partition,
            r.offset,
            from_ts(r.timestamp / 1000, utc),
            int(r.timestamp_type),
        )
        if include_headers:
            row += ([(k, v) for k, v in r.headers],)
        yield row


def read_range(
    offset_range: OffsetRange,
    settings: Mapping[str, Any],
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    arrow_schema: Any | None,
) -> Iterator[Any]:
    """The records of ``offset_range``: pyarrow RecordBatches when ``arrow_schema`` is given,
    else row tuples in the source schema's column order.

    Offsets the log no longer holds (the log start offset moved past them) are reported per
    ``fail_on_data_loss``; when skipping, the read goes on from the log start offset.
    """
    tp = TopicPartition(offset_range.topic, offset_range.partition)
    until = offset_range.until_offset
    if offset_range.size == 0:
        return
    consumer_settings = dict(settings)
    consumer_settings.update(
        auto_offset_reset="none", enable_auto_commit=False, allow_auto_create_topics=False
    )
    consumer_settings.pop("group_id", None)
    loop = asyncio.new_event_loop()
    consumer = AIOConsumer(**consumer_settings)
    try:
        loop.run_until_complete(consumer.start())
        consumer.assign([tp])
        consumer.seek(tp, offset_range.from_offset)
        position = offset_range.from_offset
        # Under read_committed a range may end in offsets no record comes back for
        # (transaction markers, aborted records): the consumer's position moves past them,
        # so progress is measured by the position, polled in short steps.
        step_ms = min(poll_timeout_ms, _POLL_STEP_MS)
        last_progress = time.monotonic()
        while position < until:
            try:
                got = loop.run_until_complete(
                    consumer.getmany(timeout_ms=step_ms, max_records=_ROWS_PER_POLL)
                )
            except OffsetOutOfRangeError:
                earliest = loop.run_until_complete(consumer.beginning_offsets([tp])).get(tp, 0)
                if position >= earliest:
                    raise  # past the end: the partition was truncated or recreated
                report_data_loss(
                    f"{tp.topic}-{tp.partition}: offsets {position}..{earliest - 1} are below "
                    f"the log start offset {earliest}",
                    fail_on_data_loss,
                )
                position = min(earliest, until)
                consumer.seek(tp, position)
                continue
            records = got.get(tp)
            moved = loop.run_until_complete(consumer.position(tp))
            if not records and moved <= position:
                if time.monotonic() - last_progress >= poll_timeout_ms / 1000:
                    raise KafkaTimeoutError(
                        f"no records from {tp.topic}-{tp.partition} at offset {position} within "
                        f"{poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs) although the range "
                        f"ends at {until}"
                    )
                continue
            last_progress = time.monotonic()
            position = max(position, moved)
            if not records:
                continue
            if records[-1].offset >= until:
                records = [r for r in records if r.offset < until]
                position = until
            if not records:
                continue
            if arrow_schema is not None:
                yield _records_to_arrow(
                    records, tp.topic, tp.partition, include_headers, arrow_schema
                )
            else:
                yield from _records_to_rows(records, include_headers)
    finally:
        try:
            loop.run_until_complete(consumer.close())
        finally:
            loop.close()


# ---------------------------------------------------------------------------- writing


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"key and value must be binary or string, got {type(value).__name__}")


def _headers(value: Any) -> list[tuple[str, bytes | None]] | None:
    if not value:
        return None
    out: list[tuple[str, bytes | None]] = []
    for h in value:
        if isinstance(h, Mapping):
            out.append((str(h["key"]), _as_bytes(h["value"])))
        else:
            key, val = h[0], h[1]
            out.append((str(key), _as_bytes(val)))
    return out


def write_rows(
    rows: Iterable[Sequence[Any]],
    columns: Sequence[str],
    settings: Mapping[str, Any],
    default_topic: str | None,
) -> int:
    """Produce every row and wait for every delivery; returns the number of records.

    ``columns`` names the row fields in order (value required; key, topic, partition,
    headers optional). The first failed delivery is raised, so the Spark task fails and the
    query with it.
    """

    async def run() -> int:
        producer = AIOProducer(**settings)
        await producer.start()
        try:
            return await _produce_rows(producer, rows, columns, default_topic)
        finally:
            await producer.close()

    return _run_once(run())


def write_rows_in_transaction(
    rows: Iterable[Sequence[Any]],
    columns: Sequence[str],
    settings: Mapping[str, Any],
    default_topic: str | None,
    transactional_id: str,
) -> tuple[int, PreparedTransaction]:
    """``write_rows`` inside one transaction of ``transactional_id``, left open for the
    driver to end (``complete_transactions``). InitProducerId fences an earlier attempt of
    the same task (its open transaction is aborted by the coordinator). A failure aborts the
    transaction (best effort: the coordinator times it out otherwise)."""

    async def run() -> tuple[int, PreparedTransaction]:
        producer = AIOProducer(**{**settings, "transactional_id": transactional_id})
        await producer.start()
        try:
            await producer.init_transactions()
            producer.begin_transaction()
            count = await _produce_rows(producer, rows, columns, default_topic)
            return count, await producer.prepare_transaction()
        finally:
            await producer.close()  # aborts unless the transaction was prepared

    return _run_once(run())


def complete_transactions(
    settings: Mapping[str, Any], prepared: Sequence[PreparedTransaction], *, commit: bool
) -> None:
    """Driver side: commit (or abort) every task's prepared transaction, one after the
    other. A failure midway leaves the later ones open until the coordinator aborts them at
    their transaction timeout; the exception names how far it got."""
    if not any(p.started for p in prepared):
        return

    async def run() -> None:
        client = KafkaClient(**_admin_settings(settings))
        await client.start()
        done = 0
        try:
            for one in prepared:
                await complete_transaction(client, one, commit=commit)
                done += 1
        except Exception as exc:
            verb = "commit" if commit else "abort"
            raise RuntimeError(
                f"could {verb} only {done} of {len(prepared)} task transactions "
                f"(failed at {prepared[done].transactional_id}): {exc}"
            ) from exc
        finally:
            await client.close()

    _run_once(run())


def fence_transactions(settings: Mapping[str, Any], transactional_ids: Sequence[str]) -> None:
    """Driver side, when a job failed: take over each transactional id whose task left no
    commit message (it failed, or was cancelled, possibly after preparing its transaction).
    InitProducerId bumps the id's epoch, which aborts its open transaction and fences a
    task attempt still running."""
    if not transactional_ids:
        return

    async def run() -> None:
        client = KafkaClient(**_admin_settings(settings))
        await client.start()
        try:
            for transactional_id in transactional_ids:
                manager = TransactionManager(
                    client,
                    transactional_id,
                    transaction_timeout_ms=int(settings.get("transaction_timeout_ms", 60_000)),
                    max_block_ms=int(settings.get("max_block_ms", 60_000)),
                    retry_backoff_ms=client.config.retry_backoff_ms,
                    retry_backoff_max_ms=client.config.retry_backoff_max_ms,
                    clock=client.config.clock,
                )
                await manager.init()
        finally:
            await client.close()

    _run_once(run())


def _run_once(coro: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


async def _produce_rows(
    producer: AIOProducer,
    rows: Iterable[Sequence[Any]],
    columns: Sequence[str],
    default_topic: str | None,
) -> int:
    index = {name.lower(): i for i, name in enumerate(columns)}
    value_i = index["value"]
    key_i = index.get("key")
    topic_i = index.get("topic")
    partition_i = index.get("partition")
    headers_i = index.get("headers")
    count = 0
    pending: list[asyncio.Future[Any]] = []
    for row in rows:
        topic = row[topic_i] if topic_i is not None else None
        topic = topic or default_topic
        if not topic:
            raise ValueError("a row has no topic: set the topic option or a non-null topic column")
        partition = row[partition_i] if partition_i is not None else None
        future = await producer.send(
            topic,
            _as_bytes(row[value_i]),
            _as_bytes(row[key_i]) if key_i is not None else None,
            partition=int(partition) if partition is not None else None,
            headers=_headers(row[headers_i]) if headers_i is not None else None,
        )
        pending.append(future)
        count += 1
        if len(pending) >= 10_000:
            await asyncio.gather(*pending)
            pending.clear()
    await producer.flush()
    await asyncio.gather(*pending)
    return count
