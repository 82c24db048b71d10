"""The PySpark data source ``josefk``: batch and streaming reads and writes.

Owns ``JosefkDataSource`` (format name ``josefk``) and its readers and writers:

* ``JosefkBatchReader``: one input partition per topic-partition offset range (more with
  ``minPartitions``), ending at the high watermark; rows come back as pyarrow RecordBatches.
* ``JosefkStreamReader``: offsets are JSON dicts ``{"topic": {"partition": offset}}`` as in
  Spark's Kafka source; ``maxOffsetsPerTrigger``; ``Trigger.AvailableNow``; new partitions
  and topics matching ``subscribePattern`` join at their earliest offset; offsets lost to
  retention or DeleteRecords are reported per ``failOnDataLoss``. The reader keeps no
  position of its own beyond what Spark hands it: the checkpoint is the source of truth.
* ``JosefkBatchWriter`` / ``JosefkStreamWriter``: rows with ``value`` (and optional ``key``,
  ``topic``, ``partition``, ``headers``) produced with josefk's producer. With
  ``transactional.id.prefix`` every task writes in its own transaction
  (``<prefix>-<partition id>``), flushes it and hands it to the driver still open; the
  driver's ``commit`` ends them all with EndTxn(commit), its ``abort`` with EndTxn(abort).
  The guarantee and its window are in docs/ARCHITECTURE.md ("Spark sink transactions").
* ``isolation.level`` / ``kafka.isolation.level`` = ``read_committed``: ranges end at the
  last stable offset and aborted records are skipped.

Spark versions. The Python Data Source API changed in Spark 4.2: ``latestOffset(start,
limit)`` with ``ReadLimit``s, ``getDefaultReadLimit`` and ``SupportsTriggerAvailableNow``.
Spark 4.2+ looks at ``latestOffset``'s signature: ours takes ``start`` and ``limit`` with
defaults, so 4.2+ sees admission control and Spark 4.0/4.1 may call it with no arguments.
Without arguments the reader limits each batch from the furthest end it handed out (or that
Spark committed). Spark 4.0/4.1 ask for the latest offset before they tell the source where
the query stands, so there the first batch of each run is not limited, and AvailableNow (a
wrapper Spark puts around the source) reads everything in one batch.

Imports pyspark, pyarrow (through kafka_io) and josefk.spark's own modules; the client is
reached only through kafka_io.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from josefk.spark.kafka_io import (
    OffsetLookup,
    PreparedTransaction,
    complete_transactions,
    fence_transactions,
    read_range,
    report_data_loss,
    write_rows,
    write_rows_in_transaction,
)
from josefk.spark.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    OptionError,
    SinkOptions,
    SourceOptions,
    offsets_from_json,
    offsets_to_json,
)
from josefk.spark.planning import OffsetRange, rate_limit, split_ranges

try:  # Spark 4.2+: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    HAS_READ_LIMITS = True
except ImportError:  # Spark 4.0/4.1: Spark wraps the source for AvailableNow itself
    HAS_READ_LIMITS = False

    class ReadLimit:  # type: ignore[no-redef]
        """Stand-in on Spark < 4.2, never passed by Spark."""

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        """Stand-in on Spark < 4.2."""

    @dataclass
    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        """Stand-in on Spark < 4.2."""

        max_rows: int

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in on Spark < 4.2 (the mixin does not exist there)."""


log = logging.getLogger("josefk.spark")

TopicPartitionKey = tuple[str, int]


def source_schema(include_headers: bool = False) -> StructType:
    """The schema of Spark's Kafka source, column for column."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def arrow_schema_for(schema: StructType) -> Any | None:
    """The Arrow schema Spark expects of RecordBatches a reader yields, or None when pyarrow
    is missing (then readers yield tuples). pyspark's own conversion is used so that details
    such as the list element's name match the running Spark version."""
    try:
        from pyspark.sql.pandas.types import to_arrow_schema
    except ImportError:
        return None
    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # Spark 4.0/4.1: no timezone parameter, timestamps are UTC already
        return to_arrow_schema(schema)


# ---------------------------------------------------------------------------- offsets


def _resolve(
    spec: OffsetSpec,
    tps: Sequence[TopicPartitionKey],
    lookup: OffsetLookup,
    *,
    default: int,
) -> dict[TopicPartitionKey, int]:
    """Concrete offsets for ``tps`` from a spec; partitions a JSON spec leaves out take
    ``default`` (EARLIEST or LATEST)."""
    if spec.kind == "timestamp":
        assert spec.timestamp_ms is not None
        return lookup.for_time(tps, spec.timestamp_ms)
    if spec.kind == "earliest":
        wanted = dict.fromkeys(tps, EARLIEST)
    elif spec.kind == "latest":
        wanted = dict.fromkeys(tps, LATEST)
    else:
        wanted = {tp: spec.per_partition.get(tp, default) for tp in tps}
    need_earliest = [tp for tp, v in wanted.items() if v == EARLIEST]
    need_latest = [tp for tp, v in wanted.items() if v == LATEST]
    earliest = lookup.earliest(need_earliest)
    latest = lookup.latest(need_latest)
    out: dict[TopicPartitionKey, int] = {}
    for tp, v in wanted.items():
        out[tp] = earliest[tp] if v == EARLIEST else latest[tp] if v == LATEST else v
    return out


def _plan_ranges(
    start: dict[TopicPartitionKey, int],
    end: dict[TopicPartitionKey, int],
    lookup: OffsetLookup,
    options: SourceOptions,
) -> list[OffsetRange]:
    """Offset ranges from ``start`` to ``end`` with the data loss checks applied.

    Partitions in ``end`` but not in ``start`` are new: they are read from their earliest
    offset. A start below the log start offset, or an end below the start (the partition was
    recreated or truncated), is data loss.
    """
    earliest = lookup.earliest(end)
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        log_start = earliest.get(tp)
        if log_start is None:
            report_data_loss(f"{tp[0]}-{tp[1]} no longer exists", options.fail_on_data_loss)
            continue
        from_offset = start.get(tp, log_start)
        until = end[tp]
        if from_offset < log_start:
            report_data_loss(
                f"{tp[0]}-{tp[1]}: offsets {from_offset}..{min(log_start, until) - 1} are "
                f"below the log start offset {log_start}",
                options.fail_on_data_loss,
            )
            from_offset = min(log_start, until)
        if until < from_offset:
            report_data_loss(
                f"{tp[0]}-{tp[1]}: end offset {until} is below start offset {from_offset} "
                "(the partition was recreated or truncated)",
                options.fail_on_data_loss,
            )
            continue
        ranges.append(OffsetRange(tp[0], tp[1], from_offset, until))
    return split_ranges(ranges, options.min_partitions)


class _Readers:
    """What batch and stream readers share: options, schema, and the executor-side read."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._arrow_schema: Any | None = None

    def read_partition(self, partition: InputPartition) -> Iterator[Any]:
        if self._arrow_schema is None:
            self._arrow_schema = arrow_schema_for(self.schema)
        offset_range: OffsetRange = partition.value
        return read_range(
            offset_range,
            self.options.consumer_settings,
            include_headers=self.options.include_headers,
            fail_on_data_loss=self.options.fail_on_data_loss,
            poll_timeout_ms=self.options.poll_timeout_ms,
            arrow_schema=self._arrow_schema,
        )


class JosefkBatchReader(DataSourceReader):
    """``spark.read.format("josefk")``: offsets fixed when the query is planned."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self._readers = _Readers(options, schema)

    def partitions(self) -> Sequence[InputPartition]:
        options = self._readers.options
        lookup = OffsetLookup(options.consumer_settings)
        try:
            tps = lookup.partitions(options.subscription)
            start = _resolve(options.starting, tps, lookup, default=EARLIEST)
            end = _resolve(options.ending, tps, lookup, default=LATEST)
            # Never past the high watermark: the records beyond it are not committed yet.
            high_watermarks = lookup.latest(tps)
            end = {tp: min(offset, high_watermarks[tp]) for tp, offset in end.items()}
            ranges = _plan_ranges(start, end, lookup, options)
        finally:
            lookup.close()
        return [InputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return self._readers.read_partition(partition)


class JosefkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("josefk")``.

    Lives in one driver-side Python process for the query's life, so it keeps an admin
    connection open between calls; the executor-side copy (pickled) drops it.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self._readers = _Readers(options, schema)
        self._lookup: OffsetLookup | None = None
        # Spark 4.2+ AvailableNow: the offsets that were latest when the query started.
        self._available_now_target: dict[TopicPartitionKey, int] | None = None
        # Spark 4.0/4.1 call latestOffset() without a start; this is the furthest end we
        # handed out or Spark committed (it only moves forward: those versions call
        # initialOffset again and latestOffset before committing the previous batch).
        self._last_end: dict[TopicPartitionKey, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_lookup"] = None
        return state

    @property
    def options(self) -> SourceOptions:
        return self._readers.options

    def _cluster(self) -> OffsetLookup:
        if self._lookup is None:
            self._lookup = OffsetLookup(self.options.consumer_settings)
        return self._lookup

    def initialOffset(self) -> dict[str, Any]:
        lookup = self._cluster()
        tps = lookup.partitions(self.options.subscription)
        start = _resolve(self.options.starting, tps, lookup, default=LATEST)
        self._advance(start)
        return offsets_to_json(start)

    def _advance(self, end: dict[TopicPartitionKey, int]) -> None:
        old = self._last_end or {}
        self._last_end = {tp: max(offset, old.get(tp, offset)) for tp, offset in end.items()}

    def _latest_now(self) -> dict[TopicPartitionKey, int]:
        lookup = self._cluster()
        return lookup.latest(lookup.partitions(self.options.subscription))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = self._latest_now()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_to_json(self._latest_now())

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        if start is not None:
            start_map = offsets_from_json(start)
        else:
            start_map = dict(self._last_end) if self._last_end is not None else {}
            if self._last_end is not None and self.options.max_offsets_per_trigger is not None:
                limit = ReadMaxRows(self.options.max_offsets_per_trigger)
        latest_now = self._latest_now()
        gone = [tp for tp in start_map if tp not in latest_now]
        for tp in gone:
            report_data_loss(
                f"{tp[0]}-{tp[1]} is gone (topic or partition deleted)",
                self.options.fail_on_data_loss,
            )
            del start_map[tp]
        target = self._available_now_target
        latest = latest_now
        if target is not None:
            # AvailableNow: nothing that arrived after the query started, not even in
            # partitions created since.
            latest = {tp: min(v, target[tp]) for tp, v in latest_now.items() if tp in target}
        new = [tp for tp in latest if tp not in start_map]
        begin = dict(start_map)
        begin.update(self._cluster().earliest(new))
        for tp, offset in latest.items():
            if offset < begin.get(tp, offset):
                # The log ends before where the query stands: recreated or truncated. When
                # going on, the end moves back and partitions() skips the range.
                report_data_loss(
                    f"{tp[0]}-{tp[1]}: the log ends at {offset}, before offset {begin[tp]}",
                    self.options.fail_on_data_loss,
                )
        end = dict(latest)
        if isinstance(limit, ReadMaxRows):
            limited = rate_limit(begin, end, limit.max_rows)
            end = {tp: limited.get(tp, v) for tp, v in end.items()}
        # Partitions in the start but outside the AvailableNow target keep their place.
        for tp, offset in start_map.items():
            end.setdefault(tp, offset)
        self._advance(end)
        return offsets_to_json(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        ranges = _plan_ranges(
            offsets_from_json(start), offsets_from_json(end), self._cluster(), self.options
        )
        return [InputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return self._readers.read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        # Offsets live in Spark's checkpoint, not in a consumer group; remembering the end
        # only serves latestOffset() on Spark 4.0/4.1.
        self._advance(offsets_from_json(end))

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None


# ---------------------------------------------------------------------------- writing


@dataclass
class WrittenRecords(WriterCommitMessage):
    """What one write task produced; in the transactional mode, its open transaction."""

    records: int
    transaction: PreparedTransaction | None = None


def _task_transactional_id(prefix: str) -> str:
    """``<prefix>-<partition id>``: stable across the attempts of a task, so a retry (or a
    speculative copy) fences the attempt before it, whose open transaction is aborted."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition_id = context.partitionId() if context is not None else 0
    return f"{prefix}-{partition_id}"


class _Writes:
    """What batch and stream writers share: one task's write, and the driver's end of the
    batch (commit or abort of every task's transaction in the transactional mode)."""

    def __init__(self, sink: SinkOptions, columns: list[str]) -> None:
        self._sink = sink
        self._columns = columns

    def write(self, iterator: Iterator[Any]) -> WrittenRecords:
        sink = self._sink
        if sink.transactional_id_prefix is None:
            return WrittenRecords(
                write_rows(iterator, self._columns, sink.producer_settings, sink.topic)
            )
        count, prepared = write_rows_in_transaction(
            iterator,
            self._columns,
            sink.producer_settings,
            sink.topic,
            _task_transactional_id(sink.transactional_id_prefix),
        )
        return WrittenRecords(count, prepared)

    def end(self, messages: list[WriterCommitMessage | None], *, commit: bool) -> int:
        written = [m for m in messages if isinstance(m, WrittenRecords)]
        prepared = [m.transaction for m in written if m.transaction is not None]
        if prepared:
            complete_transactions(self._sink.producer_settings, prepared, commit=commit)
        prefix = self._sink.transactional_id_prefix
        if not commit and prefix is not None:
            # A task without a message failed or was cancelled, maybe after preparing its
            # transaction (messages are indexed by partition id, as the ids are).
            missing = [f"{prefix}-{i}" for i, m in enumerate(messages) if m is None]
            fence_transactions(self._sink.producer_settings, missing)
        return sum(m.records for m in written)


_STRINGISH = (BinaryType, StringType)


def _check_sink_schema(schema: StructType, sink: SinkOptions) -> list[str]:
    """The input's column names, after checking they can become records."""
    by_name: dict[str, DataType] = {f.name.lower(): f.dataType for f in schema.fields}

    def expect(name: str, allowed: tuple[type[DataType], ...], what: str) -> None:
        found = by_name.get(name)
        if found is not None and not isinstance(found, allowed):
            raise OptionError(f"column {name} must be {what}, got {found.simpleString()}")

    if "value" not in by_name:
        raise OptionError("the data to write needs a value column (binary or string)")
    expect("value", _STRINGISH, "binary or string")
    expect("key", _STRINGISH, "binary or string")
    expect("topic", (StringType,), "string")
    expect("partition", (IntegerType, LongType), "int")
    expect("headers", (ArrayType,), "array<struct<key: string, value: binary>>")
    if sink.topic is None and "topic" not in by_name:
        raise OptionError("set the topic option or give the data a topic column")
    return [f.name for f in schema.fields]


class JosefkBatchWriter(DataSourceWriter):
    """``df.write.format("josefk")``: every row produced; any failed delivery fails the job.
    With ``transactional.id.prefix`` the job's records become visible to read_committed
    consumers together, when the driver commits every task's transaction."""

    def __init__(self, sink: SinkOptions, columns: list[str]) -> None:
        self._writes = _Writes(sink, columns)

    def write(self, iterator: Iterator[Any]) -> WrittenRecords:
        return self._writes.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = self._writes.end(messages, commit=True)
        log.info("josefk sink: wrote %d records", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._writes.end(messages, commit=False)
        log.warning("josefk sink: write aborted")


class JosefkStreamWriter(DataSourceStreamWriter):
    """``df.writeStream.format("josefk")``: at-least-once, as Spark's Kafka sink; with
    ``transactional.id.prefix`` each micro-batch is visible to read_committed consumers all
    at once or not at all (the driver commits every task's transaction in ``commit``)."""

    def __init__(self, sink: SinkOptions, columns: list[str]) -> None:
        self._writes = _Writes(sink, columns)
        self._transactional = sink.transactional_id_prefix is not None

    def write(self, iterator: Iterator[Any]) -> WrittenRecords:
        return self._writes.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = self._writes.end(messages, commit=True)
        log.info("josefk sink: batch %d wrote %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._writes.end(messages, commit=False)
        if self._transactional:
            log.warning("josefk sink: batch %d aborted with its transactions", batchId)
        else:
            log.warning("josefk sink: batch %d aborted; records already sent stay", batchId)


# ---------------------------------------------------------------------------- the source


class JosefkDataSource(DataSource):
    """Format ``josefk``: ``spark.dataSource.register(JosefkDataSource)`` once per session."""

    @classmethod
    def name(cls) -> str:
        return "josefk"

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return source_schema(include)

    def reader(self, schema: StructType) -> JosefkBatchReader:
        return JosefkBatchReader(SourceOptions.parse(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> JosefkStreamReader:
        return JosefkStreamReader(SourceOptions.parse(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> JosefkBatchWriter:
        sink = SinkOptions.parse(self.options)
        return JosefkBatchWriter(sink, _check_sink_schema(schema, sink))

    def streamWriter(self, schema: StructType, overwrite: bool) -> JosefkStreamWriter:
        sink = SinkOptions.parse(self.options)
        return JosefkStreamWriter(sink, _check_sink_schema(schema, sink))
