"""A leader's cost per follower fetch in a fetch session of many partitions, most of them idle.

A follower's fetch session with its leader holds every partition it follows there: in a
three-broker cluster each broker leads a third of the partitions and each of its two
followers has them all in its session (the three internal topics alone bring 150 partitions,
50 to a session). The replica fetcher sends a fetch per round trip (each append to any of
them ends one), so what the leader does per fetch for each idle partition of the session is
paid at the rate of appends.

The replica manager of broker 0 leads ``--partitions`` partitions of one topic with broker 1
in the ISR, over real logs in a temporary directory, and the real Fetch handler answers
broker 1's fetch session through the codec (request encoded and decoded, answer encoded), no
socket: one partition at a time gets a 1 KiB-record batch, then the follower fetches it
(records) and fetches again naming its new offset (the high watermark moves), as a
replicating follower does. Reported: microseconds of CPU per fetch, for this tree and (with
``--baseline-ref``) the given commit in the same run, each in a process of its own, rounds
alternating.

    .venv/bin/python bench/session_fetch_bench.py --partitions 50,1000,3300 --baseline-ref HEAD~1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from serve_process import baseline_tree

ROOT = Path(__file__).resolve().parent.parent


async def measure(partitions: int, rounds: int) -> float:
    """CPU microseconds per follower fetch (in this process's josefk)."""
    from josefk.broker.catalog import TopicCatalog
    from josefk.broker.context import RequestContext
    from josefk.broker.fetch_session import FetchSessionCache
    from josefk.broker.handlers import registered_handlers
    from josefk.broker.replica_manager import ReplicaManager
    from josefk.broker.topic_admin import LocalTopicAdmin
    from josefk.cluster.values import PartitionState
    from josefk.config.broker import BrokerConfig
    from josefk.config.topic import LogConfig
    from josefk.protocol.api import (
        ApiKey,
        decode_request,
        encode_request,
        encode_response_parts,
        request_class,
    )
    from josefk.protocol.headers import RequestHeader
    from josefk.records.builder import BatchBuilder
    from josefk.storage.manager import LogManager, LogManagerConfig
    from josefk.storage.offsets import TopicPartition
    from josefk.util.clock import SystemClock
    from josefk.util.scheduler import InlineExecutor, Scheduler

    fetch_class = request_class(ApiKey.FETCH)
    clock = SystemClock()
    with tempfile.TemporaryDirectory(prefix="josefk-session-bench-") as tmp:
        logs = LogManager(
            LogManagerConfig(log_dirs=(Path(tmp),)),
            LogConfig(),
            clock=clock,
            scheduler=Scheduler(clock),
            executor=InlineExecutor(),
        )
        await logs.startup()
        try:
            replicas = ReplicaManager(
                logs, TopicCatalog.load(Path(tmp)), broker_id=0, default_log_config=LogConfig()
            )
            LocalTopicAdmin(replicas, broker_id=0).create_topic_now("t", partitions, {})
            state = PartitionState((0, 1), 0, 1, (0, 1), 1)
            for p in range(partitions):
                partition = replicas.get_partition("t", p)
                assert partition is not None
                partition.make_leader(state)
            broker = SimpleNamespace(
                replica_manager=replicas,
                fetch_sessions=FetchSessionCache(10),
                metrics=None,
                authorizer=None,
                config=BrokerConfig(),
            )
            handler = registered_handlers()[ApiKey.FETCH].fn
            builder = BatchBuilder(base_offset=0)
            for i in range(16):
                builder.append(f"k{i}".encode(), b"x" * 1024, timestamp=0)
            batch = bytes(builder.build())  # each append gets a writable copy, as a request's
            offsets = dict.fromkeys(range(partitions), 0)
            session = [0, 0]  # id, epoch

            async def fetch(named: dict[int, int]) -> Any:
                request = fetch_class(
                    replica_id=1,
                    max_wait_ms=0,
                    min_bytes=1,
                    max_bytes=10 << 20,
                    isolation_level=0,
                    session_id=session[0],
                    session_epoch=session[1],
                    topics=[
                        fetch_class.FetchTopic(
                            topic="t",
                            partitions=[
                                fetch_class.FetchTopic.FetchPartition(
                                    partition=p,
                                    current_leader_epoch=1,
                                    fetch_offset=offset,
                                    last_fetched_epoch=-1,
                                    log_start_offset=0,
                                    partition_max_bytes=1 << 20,
                                )
                                for p, offset in named.items()
                            ],
                        )
                    ]
                    if named
                    else [],
                    forgotten_topics_data=[],
                    rack_id="",
                )
                header = RequestHeader(
                    request_api_key=ApiKey.FETCH,
                    request_api_version=12,
                    correlation_id=1,
                    client_id="bench",
                )
                header, decoded = decode_request(encode_request(header, request)[4:])
                context = RequestContext(broker, header, 12, None)  # type: ignore[arg-type]
                response = await handler(context, decoded)
                encode_response_parts(1, response, 12, api_key=ApiKey.FETCH)
                if session[0] == 0:
                    session[0] = response.session_id
                session[1] += 1
                return response

            await fetch(offsets)  # the full fetch that makes the session
            await fetch({})
            fetches = 0
            cpu0 = time.process_time()
            for i in range(rounds):
                p = i % partitions
                [outcome] = replicas.append_records(
                    [(TopicPartition("t", p), memoryview(bytearray(batch)))], acks=1
                )
                assert outcome.error is None, outcome.error
                await fetch({})  # answers p's records
                offsets[p] += 16
                await fetch({p: offsets[p]})  # the follower's new offset: the HW moves
                fetches += 2
            return (time.process_time() - cpu0) / fetches * 1e6
        finally:
            await logs.shutdown()


def run_worker(root: Path, partitions: int, rounds: int) -> float:
    output = subprocess.run(
        [sys.executable, __file__, "--worker", str(partitions), "--rounds", str(rounds)],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{Path(__file__).parent}"),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(json.loads(output.strip().splitlines()[-1])["us_per_fetch"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", default="50,1000,3300")
    parser.add_argument("--rounds", type=int, default=2000, help="appends (two fetches each)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tree; the best counts")
    parser.add_argument("--baseline-ref", default="")
    parser.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        cost = asyncio.run(measure(args.worker, args.rounds))
        print(json.dumps({"us_per_fetch": cost}))
        return
    with contextlib.ExitStack() as stack:
        trees = [("this tree", ROOT)]
        if args.baseline_ref:
            trees.append((args.baseline_ref, stack.enter_context(baseline_tree(args.baseline_ref))))
        counts = [int(n) for n in args.partitions.split(",")]
        best: dict[tuple[str, int], float] = {}
        for _ in range(args.repeat):
            for count in counts:
                for name, root in trees:
                    cost = run_worker(root, count, args.rounds)
                    key = (name, count)
                    best[key] = min(best.get(key, cost), cost)
        print(f"{'partitions in the session':>26} " + " ".join(f"{n:>14}" for n, _ in trees))
        for count in counts:
            print(f"{count:>26} " + " ".join(f"{best[n, count]:>11.0f} us" for n, _ in trees))
        print("(CPU microseconds per follower fetch, best of --repeat runs)")


if __name__ == "__main__":
    main()
