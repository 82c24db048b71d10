"""A Spark pipeline on josefk: JSON events in, per-user windowed totals out.

Reads a topic of JSON events (``{"user": "u3", "amount": 12.5, "ts": 1700000000000}``, ts in
epoch milliseconds) with the ``josefk`` data source, sums the amounts and counts the events of
each user in one-minute event-time windows, and writes each updated total as a JSON record,
keyed by user, to another topic (every micro-batch's updated windows, through foreachBatch
and the batch writer: Python data source sinks take append mode only). The query's checkpoint makes a rerun continue where the last
one stopped.

Run against a broker (``josefk serve`` in another terminal)::

    python examples/spark_pipeline.py --bootstrap 127.0.0.1:9092 --demo-events 1000

``--demo-events N`` first produces N sample events with josefk's client; ``--available-now``
(the default) processes what is there and stops, ``--continuous`` keeps running until Ctrl-C.
Needs ``pip install "josefk[spark]"`` and Java 17.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from josefk.client.sync import Admin, Producer
from josefk.spark import local_session

EVENT_SCHEMA = "user string, amount double, ts long"


def produce_demo_events(bootstrap: str, topic: str, count: int, seed: int = 7) -> None:
    """``count`` events of 5 users spread over the last five minutes."""
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000)
    with Admin(bootstrap_servers=bootstrap) as admin:
        if topic not in admin.list_topics():
            admin.create_topic(topic, 2)
    with Producer(bootstrap_servers=bootstrap) as producer:
        for _ in range(count):
            user = f"u{rng.randrange(5)}"
            event = {
                "user": user,
                "amount": round(rng.uniform(1, 100), 2),
                "ts": now_ms - rng.randrange(300_000),
            }
            producer.send(topic, json.dumps(event).encode(), user.encode())
        producer.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--input", default="events")
    parser.add_argument("--output", default="user-totals")
    parser.add_argument("--checkpoint", default="./spark-pipeline-checkpoint")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--demo-events", type=int, default=0)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--available-now", dest="continuous", action="store_false")
    mode.add_argument("--continuous", dest="continuous", action="store_true")
    parser.set_defaults(continuous=False)
    args = parser.parse_args()

    if args.demo_events:
        produce_demo_events(args.bootstrap, args.input, args.demo_events)

    spark = local_session("josefk-spark-pipeline")
    events = (
        spark.readStream.format("josefk")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10000")
        .load()
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.user", "e.amount", F.timestamp_millis("e.ts").alias("event_time"))
        .where(F.col("user").isNotNull())
    )
    totals = (
        events.withWatermark("event_time", "10 minutes")
        .groupBy(F.window("event_time", args.window), "user")
        .agg(F.count("*").alias("events"), F.round(F.sum("amount"), 2).alias("total"))
    )
    out = totals.select(
        F.col("user").cast("binary").alias("key"),
        F.to_json(
            F.struct(
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"),
                "user",
                "events",
                "total",
            )
        ).alias("value"),
    )

    def write_totals(batch: DataFrame, batch_id: int) -> None:
        # Python data source sinks take append mode only; the updated windows of each
        # micro-batch go out through the batch writer instead, as Spark's docs suggest.
        batch.write.format("josefk").option("kafka.bootstrap.servers", args.bootstrap).option(
            "topic", args.output
        ).mode("append").save()

    writer = (
        out.writeStream.foreachBatch(write_totals)
        .option("checkpointLocation", args.checkpoint)
        .outputMode("update")
    )
    query = writer.start() if args.continuous else writer.trigger(availableNow=True).start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()

    written = (
        spark.read.format("josefk")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.output)
        .load()
        .select(F.col("value").cast("string").alias("json"))
        .collect()
    )
    print(f"{args.output} holds {len(written)} window totals; the last few:")
    for row in written[-5:]:
        print(" ", row.json)
    spark.stop()


if __name__ == "__main__":
    main()
