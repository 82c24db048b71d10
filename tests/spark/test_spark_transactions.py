"""Transactions in the ``josefk`` PySpark data source, in a real local[2] Spark against a
real broker: the source under ``kafka.isolation.level`` / ``isolation.level`` =
read_committed reads committed records only and ends at the last stable offset (an open
transaction holds it back), also in a streaming query whose ranges end in transaction
markers; the transactional sink (``transactional.id.prefix``) makes a job's records visible
together, and a job with a failed task leaves none of its records visible to read_committed
consumers (the driver aborts the tasks' transactions).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'josefk[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'josefk[spark]')")

from josefk.client import TopicPartition
from josefk.client.sync import Admin, Consumer, Producer

DEADLINE_S = 60.0


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def bootstrap(broker: Any) -> str:
    return str(broker.bootstrap)


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[Admin]:
    with Admin(bootstrap_servers=bootstrap) as client:
        yield client


def _reader(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("josefk").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _values(rows: list[Any]) -> list[bytes]:
    return [bytes(r.value) for r in sorted(rows, key=lambda r: (r.partition, r.offset))]


def _consume(bootstrap: str, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    """Every value up to the end ``isolation`` allows, read with josefk's consumer."""
    with Consumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest"
    ) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline
            for records in consumer.poll(200).values():
                values.extend(r.value or b"" for r in records)
        return sorted(values)


def test_read_committed_source_skips_aborted_and_stops_at_open(
    spark: Any, bootstrap: str, admin: Admin, tmp_path: Path
) -> None:
    topic = _topic("rc")
    admin.create_topic(topic, 1)
    with Producer(bootstrap_servers=bootstrap, transactional_id=_topic("rc-tx")) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, b"c%d" % i, partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, b"a%d" % i, partition=0)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"c4", partition=0)
        producer.commit_transaction()
        # Left open while the queries run: read_committed must end before it.
        producer.begin_transaction()
        producer.send_and_wait(topic, b"open", partition=0)

        committed = [b"c0", b"c1", b"c2", b"c3", b"c4"]
        for option in ("kafka.isolation.level", "isolation.level"):
            rows = _reader(spark, bootstrap, subscribe=topic, **{option: "read_committed"})
            assert _values(rows.collect()) == committed
        everything = _values(_reader(spark, bootstrap, subscribe=topic).collect())
        assert everything == [b"c0", b"c1", b"c2", b"c3", b"a0", b"a1", b"a2", b"c4", b"open"]

        # A streaming read_committed query: its range ends in a commit marker, which no
        # record comes back for; the read must finish by the consumer's position.
        seen: list[Any] = []
        query = (
            spark.readStream.format("josefk")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("kafka.isolation.level", "read_committed")
            .option("kafkaConsumer.pollTimeoutMs", "20000")
            .load()
            .writeStream.foreachBatch(lambda df, _id: seen.extend(df.collect()))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination()
        finally:
            query.stop()
        assert _values(seen) == committed
        producer.abort_transaction()

    with pytest.raises(Exception, match=r"isolation\.level"):
        _reader(spark, bootstrap, subscribe=topic, **{"isolation.level": "snapshot"}).collect()


def test_transactional_sink_commits_the_job_at_once(
    spark: Any, bootstrap: str, admin: Admin
) -> None:
    target = _topic("txsink")
    admin.create_topic(target, 2)
    prefix = _topic("job")
    data = [(f"k{i}".encode(), f"v{i}", i % 2) for i in range(40)]
    df = spark.createDataFrame(
        spark.sparkContext.parallelize(data, 2), "key binary, value string, partition int"
    )
    df.write.format("josefk").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", target
    ).option("transactional.id.prefix", prefix).mode("append").save()

    expected = sorted(f"v{i}".encode() for i in range(40))
    assert _consume(bootstrap, target, "read_committed", 2) == expected
    ids = {t.transactional_id: t.state for t in admin.list_transactions()}
    mine = {k: v for k, v in ids.items() if k.startswith(prefix + "-")}
    assert mine == {f"{prefix}-0": "CompleteCommit", f"{prefix}-1": "CompleteCommit"}


def test_failed_job_leaves_nothing_committed(spark: Any, bootstrap: str, admin: Admin) -> None:
    target = _topic("txfail")
    admin.create_topic(target, 1)
    prefix = _topic("failing")
    # Two tasks of ten rows: the second fails at its last row, after sending nine.
    good = [(target, f"good{i}") for i in range(10)]
    bad = [(target, f"sent{i}") for i in range(9)] + [(None, "no topic")]
    df = spark.createDataFrame(
        spark.sparkContext.parallelize(good + bad, 2), "topic string, value string"
    )
    with pytest.raises(Exception, match="no topic"):
        df.write.format("josefk").option("kafka.bootstrap.servers", bootstrap).option(
            "transactional.id.prefix", prefix
        ).mode("append").save()

    # Whatever reached the log (the first task may have finished before the second failed,
    # or been cancelled), every transaction of the job ended aborted: nothing is visible to
    # read_committed, and the last stable offset reaches the end once the markers are in.
    tp = TopicPartition(target, 0)
    deadline = time.monotonic() + DEADLINE_S
    while True:
        stable = admin.list_offsets({tp: -1}, isolation_level="read_committed")[tp]
        end = admin.list_offsets({tp: -1})[tp]
        assert stable is not None and end is not None
        if stable.offset == end.offset:
            break
        assert time.monotonic() < deadline, f"LSO {stable.offset} stuck below {end.offset}"
        time.sleep(0.1)
    assert _consume(bootstrap, target, "read_committed") == []
    uncommitted = {v.decode() for v in _consume(bootstrap, target, "read_uncommitted")}
    assert uncommitted <= {v for _, v in good + bad}
    states = {t.transactional_id: t.state for t in admin.list_transactions()}
    mine = {k: v for k, v in states.items() if k.startswith(prefix + "-")}
    assert mine and set(mine.values()) <= {"CompleteAbort", "PrepareAbort", "Empty"}


def test_streaming_transactional_sink(
    spark: Any, bootstrap: str, admin: Admin, tmp_path: Path
) -> None:
    source, target = _topic("stx-in"), _topic("stx-out")
    admin.create_topic(source, 2)
    admin.create_topic(target, 1)
    prefix = _topic("stream-job")
    with Producer(bootstrap_servers=bootstrap) as producer:
        for i in range(30):
            producer.send(source, b"m%d" % i, partition=i % 2)
        producer.flush()
    query = (
        spark.readStream.format("josefk")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10")
        .load()
        .selectExpr("upper(cast(value as string)) as value")
        .writeStream.format("josefk")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("transactional.id.prefix", prefix)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        query.stop()
    assert _consume(bootstrap, target, "read_committed") == sorted(b"M%d" % i for i in range(30))
    states = {t.transactional_id: t.state for t in admin.list_transactions()}
    mine = {k: v for k, v in states.items() if k.startswith(prefix + "-")}
    assert mine and set(mine.values()) == {"CompleteCommit"}
