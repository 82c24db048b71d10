"""The producer's own cost per record, without a broker: ``await producer.send(topic, 1 KiB,
partition=0)`` in a loop, CPU nanoseconds a record (best of ``--rounds``).

The producer is never started: the topic's metadata is written into its client and its
accumulator started by hand, so no sender runs and batches only close when full (1 MB) and
are then dropped. What is left is ``send``, the accumulator, the record encoder and batch
building: the per-record path that client_perf_bench.py measures together with the socket,
the broker and the machine's other load. ``buffer_memory`` is unlimited here, so batch
memory is always fresh (page faults included, as in a producer whose buffer is filling).

To compare two trees, run the script under each one's ``PYTHONPATH``::

    PYTHONPATH=/path/to/main python bench/producer_send_bench.py
    python bench/producer_send_bench.py

Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import uvloop

import josefk
from josefk.client import AIOProducer
from josefk.client.cluster import PartitionInfo, TopicInfo

SIZE = 1024


async def measure(records: int, rounds: int) -> float:
    producer = AIOProducer(
        bootstrap_servers="127.0.0.1:9", acks=1, linger_ms=60_000, batch_size=1_000_000
    )
    producer._accumulator.buffer_memory = 1 << 62
    producer._client.metadata.topics["t"] = TopicInfo(
        "t", None, False, {0: PartitionInfo("t", 0, 1, 0, (1,), (1,))}, 0, (0,)
    )
    producer._accumulator.start(asyncio.get_running_loop())
    producer._started = True
    value = os.urandom(SIZE)
    send = producer.send
    accumulator = producer._accumulator
    best = float("inf")
    for _ in range(rounds):
        cpu = time.process_time()
        for _ in range(records):
            await send("t", value, partition=0)
        best = min(best, time.process_time() - cpu)
        accumulator.close_all()
        accumulator.ready.clear()
    return best / records * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ns = uvloop.run(measure(args.records, args.rounds))
    print(f"{os.path.dirname(os.path.dirname(josefk.__file__))}: {ns:.0f} CPU ns a record")


if __name__ == "__main__":
    main()
