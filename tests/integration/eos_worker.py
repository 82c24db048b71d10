"""One consume-transform-produce worker of the exactly-once test, run as its own process.

    python eos_worker.py BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC GROUP TRANSACTIONAL_ID BATCH ABORT_EVERY

The worker reads INPUT_TOPIC with read_committed from the group's committed offsets (manual
assignment of every partition: a restarted worker needs no rebalance), and for each batch runs
one transaction: produce ``out:<key>`` for every input record, send the consumer's positions to
the transaction, commit. Every ABORT_EVERY-th transaction is produced, flushed and deliberately
aborted, then redone, so that the output topic holds aborted records that only a
read_uncommitted consumer may see. It prints one line per step on stdout, which is how the test
driver follows it and picks its kill points:

    ready                      after init_transactions (the previous incarnation is fenced)
    open <consumed>            a transaction's records are flushed to the broker, not committed
    committed <consumed>       a commit returned; <consumed> counts input records now committed
    aborted <consumed>         a deliberate or forced abort
    done <consumed>            every input record is committed; exit 0

A fatal client error (e.g. fenced) exits 3; the driver starts a new worker. Must not import
josefk: it is a user's program, talking to the broker only through librdkafka.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

CLIENT_TIMEOUT_S = 30.0


def say(line: str) -> None:
    print(line, flush=True)


def committed_positions(consumer: Consumer, partitions: list[TopicPartition]) -> dict[int, int]:
    # require_stable: librdkafka retries while a transaction's offsets are still pending.
    committed = consumer.committed(partitions, timeout=CLIENT_TIMEOUT_S)
    return {tp.partition: max(tp.offset, 0) for tp in committed}


def retrying(call: Callable[[], None]) -> None:
    """Repeat a transactional call while librdkafka calls its error retriable (its outcome is
    then unknown and the same call must be made again), up to a deadline."""
    deadline = time.monotonic() + 4 * CLIENT_TIMEOUT_S
    while True:
        try:
            call()
            return
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise


# librdkafka re-bootstraps (KIP-899) when every broker it knows is down, which on a one-node
# cluster is every broker restart, and decommissions the broker it had learned. A
# send_offsets_to_transaction() then waits forever on the decommissioned broker it still caches
# as group coordinator, past its own timeout (librdkafka issues 5456 and 5511; the same happens
# against a one-node Kafka). Without re-bootstrapping the learned broker reconnects as usual.
CLIENT_WORKAROUNDS = {"metadata.recovery.strategy": "none"}


def main(argv: list[str]) -> int:
    bootstrap, input_topic, output_topic, group, transactional_id = argv[:5]
    batch_size, abort_every = int(argv[5]), int(argv[6])

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 20000,
            "linger.ms": 5,
            **CLIENT_WORKAROUNDS,
        }
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **CLIENT_WORKAROUNDS,
        }
    )
    producer.init_transactions(CLIENT_TIMEOUT_S)
    say("ready")

    metadata = consumer.list_topics(input_topic, timeout=CLIENT_TIMEOUT_S)
    partitions = [
        TopicPartition(input_topic, p) for p in sorted(metadata.topics[input_topic].partitions)
    ]
    ends = {}
    for tp in partitions:
        _, high = consumer.get_watermark_offsets(tp, timeout=CLIENT_TIMEOUT_S)
        ends[tp.partition] = high
    total = sum(ends.values())

    def rewind() -> dict[int, int]:
        positions = committed_positions(consumer, partitions)
        consumer.assign(
            [
                TopicPartition(input_topic, p, positions[p] if positions[p] else OFFSET_BEGINNING)
                for p in sorted(positions)
            ]
        )
        return positions

    positions = rewind()
    transactions = 0
    while sum(positions.values()) < total:
        messages = consumer.consume(num_messages=batch_size, timeout=1.0)
        records = [m for m in messages if m.error() is None]
        if not records:
            continue
        transactions += 1
        deliberate_abort = abort_every > 0 and transactions % abort_every == 0
        next_positions = dict(positions)
        for message in records:
            next_positions[message.partition()] = message.offset() + 1
        try:
            producer.begin_transaction()
            for message in records:
                key = message.key()
                producer.produce(output_topic, key=key, value=b"out:" + key)
                producer.poll(0)
            producer.flush(CLIENT_TIMEOUT_S)
            say(f"open {sum(positions.values())}")
            if deliberate_abort:
                retrying(lambda: producer.abort_transaction(CLIENT_TIMEOUT_S))
                positions = rewind()
                say(f"aborted {sum(positions.values())}")
                continue
            offsets = [TopicPartition(input_topic, p, o) for p, o in next_positions.items()]
            group_metadata = consumer.consumer_group_metadata()
            retrying(
                lambda offsets=offsets, group_metadata=group_metadata: (
                    producer.send_offsets_to_transaction(offsets, group_metadata, CLIENT_TIMEOUT_S)
                )
            )
            retrying(lambda: producer.commit_transaction(CLIENT_TIMEOUT_S))
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.txn_requires_abort():
                retrying(lambda: producer.abort_transaction(CLIENT_TIMEOUT_S))
                positions = rewind()
                say(f"aborted {sum(positions.values())}")
                continue
            say(f"fatal {error}")
            return 3
        positions = next_positions
        say(f"committed {sum(positions.values())}")
    say(f"done {sum(positions.values())}")
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
