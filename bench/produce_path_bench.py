"""The broker's produce path in process: CPU per partition batch, without sockets or a client.

A replica manager over real logs in a temporary directory (one topic of ``--partitions``
partitions, this node their leader, the system clock), the registered Produce handler, and
Produce requests that carry every partition with one small batch (``--records`` records of
``--size`` bytes), decoded from their wire bytes once per request as the network layer does,
then handled and their answers encoded. This is what ``spread_bench.py`` measures through a
socket, with none of the network's cost, so that the handler's own cost per partition batch
can be compared build against build (``--profile`` prints cProfile's top functions).

    python bench/produce_path_bench.py --partitions 10000 --requests 10

Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import inspect
import pstats
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

# The request bytes spread_bench sends through a socket (a sibling module: run from bench/).
from spread_bench import PRODUCE_VERSION as VERSION
from spread_bench import TOPIC, batch, produce_request

from josefk.broker.catalog import TopicCatalog
from josefk.broker.context import RequestContext
from josefk.broker.handlers import registered_handlers
from josefk.broker.replica_manager import ReplicaManager
from josefk.broker.server import _GC_YOUNG_THRESHOLD
from josefk.broker.topic_admin import LocalTopicAdmin
from josefk.config.broker import BrokerConfig
from josefk.config.topic import LogConfig
from josefk.protocol.api import ApiKey, decode_request, encode_response_parts
from josefk.storage.manager import LogManager, LogManagerConfig
from josefk.util.clock import SystemClock
from josefk.util.scheduler import InlineExecutor, Scheduler


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="produce-path-") as tmp:
        log_dir = Path(tmp)
        clock = SystemClock()
        logs = LogManager(
            LogManagerConfig(log_dirs=(log_dir,)),
            LogConfig(),
            clock=clock,
            scheduler=Scheduler(clock),
            executor=InlineExecutor(),
        )
        await logs.startup()
        replicas = ReplicaManager(
            logs, TopicCatalog.load(log_dir), broker_id=0, default_log_config=LogConfig()
        )
        LocalTopicAdmin(replicas, broker_id=0).create_topic_now(TOPIC, args.partitions, {})
        broker: Any = _Broker(replicas)
        handler = registered_handlers()[ApiKey.PRODUCE].fn
        # Without the length prefix, as the network layer hands a frame over.
        frame = produce_request(args.partitions, batch(args.records, args.size), acks=1)[4:]

        def one_request() -> None:
            # A fresh writable frame per request, as the network layer hands over.
            header, request = decode_request(memoryview(bytearray(frame)))
            context = RequestContext(
                broker=broker,
                header=header,
                api_version=VERSION,
                connection=None,  # type: ignore[arg-type]
            )
            response = handler(context, request)
            assert not inspect.isawaitable(response)
            encode_response_parts(1, response, VERSION, api_key=ApiKey.PRODUCE)

        one_request()  # every partition's first append (files, maps) out of the rounds
        if args.gc != "python":
            # The broker's collector settings; "restarted": the topic existed at start-up, so
            # the broker froze its objects (a topic created while it runs is not frozen).
            gc.collect()
            if args.gc == "restarted":
                gc.freeze()
            gc.set_threshold(_GC_YOUNG_THRESHOLD, 20, 20)
        rounds = []
        profiler = cProfile.Profile() if args.profile else None
        for _ in range(args.rounds):
            started = time.process_time()
            if profiler is not None:
                profiler.enable()
            for _ in range(args.requests):
                one_request()
            if profiler is not None:
                profiler.disable()
            rounds.append((time.process_time() - started) / (args.requests * args.partitions) * 1e6)
        print(
            f"{args.partitions:,} partitions, {args.records} x {args.size} B a batch, gc {args.gc}: "
            f"{statistics.median(rounds):.2f} CPU µs a partition batch "
            f"(rounds {', '.join(f'{r:.2f}' for r in rounds)})"
        )
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)
        await logs.shutdown()


class _Broker:
    """The parts of the broker context the Produce handler reads."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self.replica_manager = replicas
        self.metrics = None
        self.authorizer = None
        self.txn_coordinator = None
        self.config = BrokerConfig()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--records", type=int, default=1)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--gc",
        choices=("python", "created", "restarted"),
        default="created",
        help="the collector as CPython sets it, or as the broker does for a topic created "
        "while it runs (the default) or present at its start-up (frozen)",
    )
    parser.add_argument(
        "--profile", type=int, default=0, help="print cProfile's top N functions by own time"
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
