"""The ``josefk`` PySpark data source against a real broker in a real local[2] Spark.

One SparkSession and one ``josefk serve`` process for the module (Spark takes tens of seconds
to start on two cores); every test uses its own topics and checkpoint directories. Covered:
batch read equals what was produced (keys, values, headers, timestamps, offsets, across
partitions split by minPartitions); a streaming query under Trigger.AvailableNow stopped and
restarted twice over one checkpoint, with new records, a new partition and a new topic
matching the pattern in between, sees every record exactly once; maxOffsetsPerTrigger caps
micro-batches; batch and streaming writes land in topics and read back; offsets deleted
under a query (DeleteRecords) fail it with failOnDataLoss=true and are skipped with false.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'josefk[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'josefk[spark]')")

from josefk.client import AIOAdmin, TopicPartition
from josefk.client.sync import Admin, Producer

Key = tuple[str, int, int]  # topic, partition, offset


class Sent(NamedTuple):
    key: bytes | None
    value: bytes
    timestamp_ms: int


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def bootstrap(broker: Any) -> str:
    return str(broker.bootstrap)


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[Admin]:
    with Admin(bootstrap_servers=bootstrap) as client:
        yield client


@pytest.fixture(scope="module")
def producer(bootstrap: str) -> Iterator[Producer]:
    with Producer(bootstrap_servers=bootstrap, linger_ms=1) as client:
        yield client


def produce(
    producer: Producer,
    topic: str,
    count: int,
    *,
    partition: int | None = None,
    tag: str = "",
    headers: bool = False,
) -> dict[Key, Sent]:
    """Send ``count`` records; returns (key, value) by where each landed."""
    futures = []
    for i in range(count):
        key = None if i % 5 == 4 else f"k{i % 7}".encode()
        value = f"{tag}{topic}-{i}".encode()
        hdrs = [("n", str(i).encode()), ("empty", None)] if headers and i % 2 else None
        futures.append(
            (key, value, producer.send(topic, value, key, partition=partition, headers=hdrs))
        )
    producer.flush()
    out: dict[Key, Sent] = {}
    for key, value, future in futures:
        meta = future.result()
        out[(meta.topic, meta.partition, meta.offset)] = Sent(key, value, meta.timestamp)
    return out


def delete_records(bootstrap: str, before: Mapping[TopicPartition, int]) -> None:
    """DeleteRecords through the asyncio admin (the blocking facade has no such method)."""

    async def run() -> None:
        async with AIOAdmin(bootstrap_servers=bootstrap) as client:
            await client.delete_records(before)

    asyncio.run(run())


def reader(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("josefk").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


class Batches:
    """A foreachBatch sink keeping each micro-batch's rows (the function runs on the driver)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[Any]]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        self.batches.append(
            (batch_id, df.select("topic", "partition", "offset", "value").collect())
        )

    def seen(self) -> list[Key]:
        return [(r.topic, r.partition, r.offset) for _, rows in self.batches for r in rows]

    def sizes(self) -> list[int]:
        return [len(rows) for _, rows in self.batches]


def run_available_now(
    spark: Any, bootstrap: str, checkpoint: Path, sink: Callable[[Any, int], None], **options: str
) -> None:
    """One streaming run under Trigger.AvailableNow, to its end (errors raised)."""
    stream = spark.readStream.format("josefk").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        stream = stream.option(k, v)
    query = (
        stream.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        query.stop()


# ---------------------------------------------------------------------------- batch


def test_batch_read_equals_what_was_produced(
    spark: Any, bootstrap: str, admin: Admin, producer: Producer
) -> None:
    topic = _topic("batch")
    admin.create_topic(topic, 3)
    produced = produce(producer, topic, 240, headers=True)
    df = reader(spark, bootstrap, subscribe=topic, includeHeaders="true", minPartitions="7")
    assert [f.name for f in df.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert df.rdd.getNumPartitions() >= 7
    rows = df.collect()
    got = {(r.topic, r.partition, r.offset): (r.key, r.value) for r in rows}
    assert len(rows) == len(got) == 240
    assert got == {k: (s.key, s.value) for k, s in produced.items()}
    for r in rows:
        i = int(r.value.decode().rsplit("-", 1)[1])
        expected = [("n", str(i).encode()), ("empty", None)] if i % 2 else []
        assert [(h.key, h.value) for h in r.headers] == expected
        assert r.timestampType == 0
        # Spark hands back naive datetimes in the session's (here: the machine's) time zone.
        sent = produced[(r.topic, r.partition, r.offset)]
        assert round(r.timestamp.timestamp() * 1000) == sent.timestamp_ms

    # Explicit offsets: a JSON start (with -2 for earliest) and end per partition.
    part = reader(
        spark,
        bootstrap,
        assign=f'{{"{topic}": [0, 2]}}',
        startingOffsets=f'{{"{topic}": {{"0": 3, "2": -2}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 10, "2": -1}}}}',
    ).collect()
    expected_keys = {k for k in produced if (k[1] == 0 and 3 <= k[2] < 10) or k[1] == 2}
    assert {(r.topic, r.partition, r.offset) for r in part} == expected_keys
    assert len(part) == len(expected_keys)


def test_batch_write_lands_in_topic(
    spark: Any, bootstrap: str, admin: Admin, producer: Producer
) -> None:
    target = _topic("written")
    admin.create_topic(target, 2)
    data = [
        (f"k{i}".encode(), f"value-{i}", i % 2, [("src", b"spark")] if i % 3 == 0 else [])
        for i in range(50)
    ]
    df = spark.createDataFrame(
        data,
        "key binary, value string, partition int, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("josefk").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", target
    ).mode("append").save()
    rows = reader(spark, bootstrap, subscribe=target, includeHeaders="true").collect()
    got = sorted(
        (r.key, r.value.decode(), r.partition, [(h.key, h.value) for h in r.headers]) for r in rows
    )
    assert got == sorted((k, v, p, h) for k, v, p, h in data)


def test_write_errors_surface_in_the_query(spark: Any, bootstrap: str) -> None:
    no_value = spark.createDataFrame([("t", b"k")], "topic string, key binary")
    with pytest.raises(Exception, match="value column"):
        no_value.write.format("josefk").option("kafka.bootstrap.servers", bootstrap).mode(
            "append"
        ).save()
    null_topic = spark.createDataFrame([(None, b"v")], "topic string, value binary")
    with pytest.raises(Exception, match="no topic"):
        null_topic.write.format("josefk").option("kafka.bootstrap.servers", bootstrap).mode(
            "append"
        ).save()


# ---------------------------------------------------------------------------- streaming


def test_available_now_restarts_see_every_record_once(
    spark: Any, bootstrap: str, admin: Admin, producer: Producer, tmp_path: Path
) -> None:
    prefix = _topic("stream")
    first = f"{prefix}-a"
    admin.create_topic(first, 2)
    checkpoint = tmp_path / "checkpoint"
    sink = Batches()
    options = {"subscribePattern": f"{prefix}-.*", "startingOffsets": "earliest"}

    produced = produce(producer, first, 60)
    run_available_now(spark, bootstrap, checkpoint, sink, **options)
    assert sorted(sink.seen()) == sorted(produced)

    # Second run: more records, and a partition added to the topic.
    admin.create_partitions({first: 3})
    produced |= produce(producer, first, 30)
    produced |= produce(producer, first, 10, partition=2, tag="new-partition")
    run_available_now(spark, bootstrap, checkpoint, sink, **options)
    assert sorted(sink.seen()) == sorted(produced)

    # Third run: a new topic matching the pattern, and more records in the old one.
    second = f"{prefix}-b"
    admin.create_topic(second, 1)
    produced |= produce(producer, second, 15)
    produced |= produce(producer, first, 20)
    run_available_now(spark, bootstrap, checkpoint, sink, **options)
    keys = sink.seen()
    assert len(keys) == len(set(keys)) == len(produced)
    assert set(keys) == set(produced)
    values = {(r.topic, r.partition, r.offset): r.value for _, rows in sink.batches for r in rows}
    assert values == {k: s.value for k, s in produced.items()}


def test_max_offsets_per_trigger_caps_batches(
    spark: Any, bootstrap: str, admin: Admin, producer: Producer, tmp_path: Path
) -> None:
    """On Spark 4.2+ under AvailableNow (the source's ReadMaxRows). Spark 4.0/4.1 ask for the
    latest offset before telling the source where the query stands, so there the first batch
    of a run is not limited: records produced while the query runs are."""
    from josefk.spark.source import HAS_READ_LIMITS

    topic = _topic("capped")
    admin.create_topic(topic, 3)
    produced = produce(producer, topic, 70)
    sink = Batches()
    options = {"subscribe": topic, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "25"}
    if HAS_READ_LIMITS:
        run_available_now(spark, bootstrap, tmp_path / "checkpoint", sink, **options)
        sizes = [s for s in sink.sizes() if s]
    else:
        stream = spark.readStream.format("josefk").option("kafka.bootstrap.servers", bootstrap)
        for k, v in options.items():
            stream = stream.option(k, v)
        query = (
            stream.load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        try:
            query.processAllAvailable()
            first_run = len(sink.batches)
            produced |= produce(producer, topic, 70)
            query.processAllAvailable()
        finally:
            query.stop()
        sizes = [s for s in sink.sizes()[first_run:] if s]
    assert sizes and max(sizes) <= 25
    assert len(sizes) >= 3
    assert sorted(sink.seen()) == sorted(produced)


def test_streaming_write_lands_in_topic_and_reads_back(
    spark: Any, bootstrap: str, admin: Admin, producer: Producer, tmp_path: Path
) -> None:
    source, target = _topic("in"), _topic("out")
    admin.create_topic(source, 2)
    admin.create_topic(target, 1)
    produced = produce(producer, source, 40)
    stream = (
        spark.readStream.format("josefk")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(cast(value as string)) as value")
    )
    query = (
        stream.writeStream.format("josefk")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = reader(spark, bootstrap, subscribe=target).collect()
    got = sorted((r.key or b"", r.value) for r in rows)
    assert got == sorted((s.key or b"", s.value.upper()) for s in produced.values())


def test_data_loss_fails_the_query_or_is_skipped(
    spark: Any, bootstrap: str, admin: Admin, producer: Producer, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    topic = _topic("lossy")
    admin.create_topic(topic, 1)
    checkpoint = tmp_path / "checkpoint"
    sink = Batches()
    options = {"subscribe": topic, "startingOffsets": "earliest"}
    produce(producer, topic, 20)
    run_available_now(spark, bootstrap, checkpoint, sink, **options)
    assert sorted(o for _, _, o in sink.seen()) == list(range(20))

    # Offsets 20..49 arrive and 20..34 are deleted before the query reads them.
    later = produce(producer, topic, 30)
    delete_records(bootstrap, {TopicPartition(topic, 0): 35})

    with pytest.raises(StreamingQueryException, match="failOnDataLoss"):
        run_available_now(spark, bootstrap, checkpoint, sink, **options)
    assert len(sink.seen()) == 20  # the failed run delivered nothing

    run_available_now(spark, bootstrap, checkpoint, sink, failOnDataLoss="false", **options)
    offsets = sorted(o for _, _, o in sink.seen())
    assert offsets == list(range(20)) + list(range(35, 50))
    assert {o for _, _, o in later} >= set(range(35, 50))

    # A batch read whose starting offset is gone fails the same way.
    with pytest.raises(Exception, match="failOnDataLoss"):
        reader(
            spark, bootstrap, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 5}}}}'
        ).collect()
    skipped = reader(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets=f'{{"{topic}": {{"0": 5}}}}',
        failOnDataLoss="false",
    ).collect()
    assert sorted(r.offset for r in skipped) == list(range(35, 50))


# ---------------------------------------------------------------------------- reader calls


def test_stream_reader_call_shapes_of_both_api_generations(
    bootstrap: str, admin: Admin, producer: Producer
) -> None:
    """The stream reader driven directly, as Spark 4.0/4.1 (``latestOffset()``) and Spark
    4.2+ (``latestOffset(start, limit)``, AvailableNow) call it; and it survives pickling
    with its admin connection open (Spark ships it to the executors)."""
    import pickle

    from josefk.spark.options import SourceOptions
    from josefk.spark.source import (
        JosefkStreamReader,
        ReadAllAvailable,
        ReadMaxRows,
        source_schema,
    )

    topic = _topic("shapes")
    admin.create_topic(topic, 2)
    produced = produce(producer, topic, 30)
    options = SourceOptions.parse(
        {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": topic,
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "10",
        },
        streaming=True,
    )
    reader = JosefkStreamReader(options, source_schema())
    try:
        start = reader.initialOffset()
        assert start == {topic: {"0": 0, "1": 0}}

        def advance(a: dict[str, Any], b: dict[str, Any]) -> int:
            return sum(b[topic][p] - a[topic][p] for p in b[topic])

        # Spark 4.0/4.1: no arguments; the limit applies from the last end handed out.
        end1 = reader.latestOffset()
        assert advance(start, end1) == 10
        end2 = reader.latestOffset()
        assert advance(end1, end2) == 10

        rows = 0
        copy = pickle.loads(pickle.dumps(reader))
        for part in reader.partitions(start, end2):
            for batch in copy.read(part):
                rows += batch.num_rows
                assert batch.schema.names[:3] == ["key", "value", "topic"]
        assert rows == 20

        # Spark 4.2+: explicit start and limit.
        assert advance(start, reader.latestOffset(start, ReadMaxRows(7))) == 7
        everything = reader.latestOffset(start, ReadAllAvailable())
        assert advance(start, everything) == len(produced) == 30
        assert reader.reportLatestOffset() == everything

        # AvailableNow: records produced after the trigger was prepared are not read.
        reader.prepareForTriggerAvailableNow()
        produce(producer, topic, 5)
        assert reader.latestOffset(start, ReadAllAvailable()) == everything
        assert reader.latestOffset(everything, ReadAllAvailable()) == everything
    finally:
        reader.stop()

    # startingTimestamp: the first offset at or after the time; the end when none is.
    def starting_at(timestamp_ms: int) -> dict[str, Any]:
        by_time = JosefkStreamReader(
            SourceOptions.parse(
                {
                    "kafka.bootstrap.servers": bootstrap,
                    "subscribe": topic,
                    "startingTimestamp": str(timestamp_ms),
                },
                streaming=True,
            ),
            source_schema(),
        )
        try:
            return by_time.initialOffset()
        finally:
            by_time.stop()

    assert starting_at(0) == start
    ends = admin.list_offsets({TopicPartition(topic, p): -1 for p in (0, 1)})
    assert starting_at(2**62) == {
        topic: {str(tp.partition): hit.offset for tp, hit in ends.items() if hit is not None}
    }
    middle = sorted(produced.items(), key=lambda item: item[1].timestamp_ms)[15][1].timestamp_ms
    found = starting_at(middle)
    for partition, offset in found[topic].items():
        earlier = [
            k for k, s in produced.items() if k[1] == int(partition) and s.timestamp_ms < middle
        ]
        assert offset == len(earlier)
