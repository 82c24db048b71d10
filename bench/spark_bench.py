"""Spark benchmark: rows per second read into Spark from josefk, next to the client alone.

Starts a real ``josefk serve`` process on a temporary data dir, produces N records of 1 KiB
(default 1,000,000) over P partitions (default 2, one per core) with josefk's producer, then
reads all of them back three ways in the same run:

* client: josefk's ``AIOConsumer`` alone (assign every partition, read from the beginning in
  polls of up to 50,000 records): the baseline;
* arrow: the data source's executor-side read (``josefk.spark.kafka_io.read_range``) turning
  the same records into pyarrow RecordBatches, partitions one after the other, no Spark;
* spark: ``spark.read.format("josefk")`` in local[P] with ``sum(length(value))`` over all rows,
  so every row's bytes cross into the JVM (the Python data source API has no column pruning).

Spark's own start-up is timed separately and left out of the spark figure. Each figure is the
fastest of ``--rounds`` rounds (default 2; Spark's first round also warms the JVM).

    python bench/spark_bench.py                 # 1,000,000 x 1 KiB, prints Markdown
    python bench/spark_bench.py --records 100000

Not a test: nothing here asserts. Broker, client and Spark share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serve_process import ServeProcess  # noqa: E402

from josefk.client import AIOAdmin, AIOConsumer, AIOProducer, TopicPartition  # noqa: E402


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> float:
    async def main() -> float:
        async with AIOAdmin(bootstrap_servers=bootstrap) as admin:
            await admin.create_topic(topic, partitions)
        producer = AIOProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=262_144)
        await producer.start()
        value = os.urandom(size)
        started = time.perf_counter()
        pending = []
        for i in range(records):
            pending.append(await producer.send(topic, value, partition=i % partitions))
            if len(pending) >= 50_000:
                await asyncio.gather(*pending)
                pending.clear()
        await producer.flush()
        await asyncio.gather(*pending)
        elapsed = time.perf_counter() - started
        await producer.close()
        return elapsed

    return asyncio.run(main())


def read_with_client(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    async def main() -> float:
        consumer = AIOConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        started = time.perf_counter()
        seen = 0
        value_bytes = 0
        while seen < records:
            got = await consumer.getmany(timeout_ms=10_000, max_records=50_000)
            for batch in got.values():
                seen += len(batch)
                value_bytes += sum(len(r.value or b"") for r in batch)
        elapsed = time.perf_counter() - started
        await consumer.close()
        assert seen == records, seen
        return elapsed

    return asyncio.run(main())


def read_into_arrow(bootstrap: str, topic: str, partitions: int, per_partition: list[int]) -> float:
    from pyspark.sql.pandas.types import to_arrow_schema

    from josefk.spark.kafka_io import read_range
    from josefk.spark.planning import OffsetRange
    from josefk.spark.source import source_schema

    try:
        schema = to_arrow_schema(source_schema(), timezone="UTC")
    except TypeError:
        schema = to_arrow_schema(source_schema())
    started = time.perf_counter()
    rows = 0
    for p in range(partitions):
        r = OffsetRange(topic, p, 0, per_partition[p])
        for batch in read_range(
            r,
            {"bootstrap_servers": bootstrap},
            include_headers=False,
            fail_on_data_loss=True,
            poll_timeout_ms=30_000,
            arrow_schema=schema,
        ):
            rows += batch.num_rows
    elapsed = time.perf_counter() - started
    assert rows == sum(per_partition), rows
    return elapsed


def read_with_spark(spark: object, bootstrap: str, topic: str, records: int) -> float:
    from pyspark.sql import functions as F

    started = time.perf_counter()
    row = (
        spark.read.format("josefk")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .agg(F.count("*").alias("rows"), F.sum(F.length("value")).alias("bytes"))
        .collect()[0]
    )
    elapsed = time.perf_counter() - started
    assert row.rows == records, row
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description="rows/s read into Spark from josefk")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="josefk-spark-bench-"))
    broker = ServeProcess(tmp / "data")
    try:
        topic = "spark-bench"
        produce_s = produce(broker.bootstrap, topic, args.partitions, args.records, args.size)
        print(f"produced {args.records:,} x {args.size} B in {produce_s:.1f} s", flush=True)
        per_partition = [
            args.records // args.partitions + (1 if p < args.records % args.partitions else 0)
            for p in range(args.partitions)
        ]
        from josefk.spark import local_session

        started = time.perf_counter()
        spark = local_session("josefk-spark-bench", cores=args.partitions)
        spark_start_s = time.perf_counter() - started
        print(f"spark session started in {spark_start_s:.1f} s", flush=True)
        best: dict[str, float] = {}
        for round_no in range(1, args.rounds + 1):
            for name, run in (
                (
                    "client",
                    lambda: read_with_client(
                        broker.bootstrap, topic, args.partitions, args.records
                    ),
                ),
                (
                    "arrow",
                    lambda: read_into_arrow(
                        broker.bootstrap, topic, args.partitions, per_partition
                    ),
                ),
                ("spark", lambda: read_with_spark(spark, broker.bootstrap, topic, args.records)),
            ):
                seconds = run()
                best[name] = min(best.get(name, seconds), seconds)
                print(
                    f"round {round_no} {name}: {seconds:.2f} s, "
                    f"{args.records / seconds:,.0f} rows/s",
                    flush=True,
                )
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    import pyarrow
    import pyspark

    mb = args.records * args.size / 1e6
    print()
    print(
        f"{args.records:,} records of {args.size} B over {args.partitions} partitions; "
        f"{os.cpu_count()} cores ({platform.machine()}), Python {platform.python_version()}, "
        f"pyspark {pyspark.__version__}, pyarrow {pyarrow.__version__}, load average "
        f"{os.getloadavg()[0]:.1f}; fastest of {args.rounds} rounds; Spark start-up "
        f"{spark_start_s:.1f} s not included."
    )
    print()
    print("| reader | seconds | rows/s | MB/s | vs client |")
    print("|---|---:|---:|---:|---:|")
    labels = {
        "client": "josefk client alone (AIOConsumer, 1 process)",
        "arrow": "data source read path, no Spark (Arrow batches, 1 process)",
        "spark": f'Spark local[{args.partitions}], `format("josefk")`',
    }
    for name in ("client", "arrow", "spark"):
        s = best[name]
        print(
            f"| {labels[name]} | {s:.2f} | {args.records / s:,.0f} | {mb / s:,.1f} | "
            f"{best['client'] / s:.2f}x |"
        )


if __name__ == "__main__":
    main()
