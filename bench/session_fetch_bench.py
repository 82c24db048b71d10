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
import inspect
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


async def measure(partitions: int, rounds: int, side: str) -> float:
    """CPU microseconds per follower fetch (in this process's josefk): the leader's alone
    (``side`` "leader": the follower's requests built here), or the leader's and broker 1's
    ``ReplicaFetcher`` together ("both": the fetcher builds the requests and appends)."""
    from josefk.broker.catalog import TopicCatalog
    from josefk.broker.context import RequestContext
    from josefk.broker.fetch_session import FetchSessionCache
    from josefk.broker.handlers import registered_handlers
    from josefk.broker.replica_fetcher import FetcherSettings, ReplicaFetcher
    from josefk.broker.replica_manager import ReplicaManager
    from josefk.broker.topic_admin import LocalTopicAdmin
    from josefk.cluster.values import PartitionState
    from josefk.config.broker import BrokerConfig
    from josefk.config.topic import LogConfig
    from josefk.protocol.api import (
        ApiKey,
        decode_request,
        decode_response,
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
    state = PartitionState((0, 1), 0, 1, (0, 1), 1)

    async def broker(directory: Path, broker_id: int) -> tuple[LogManager, ReplicaManager]:
        logs = LogManager(
            LogManagerConfig(log_dirs=(directory,)),
            LogConfig(),
            clock=clock,
            scheduler=Scheduler(clock),
            executor=InlineExecutor(),
        )
        await logs.startup()
        replicas = ReplicaManager(
            logs, TopicCatalog.load(directory), broker_id=broker_id, default_log_config=LogConfig()
        )
        LocalTopicAdmin(replicas, broker_id=broker_id).create_topic_now("t", partitions, {})
        for p in range(partitions):
            partition = replicas.get_partition("t", p)
            assert partition is not None
            if broker_id == 0:
                partition.make_leader(state)
            else:
                partition.make_follower(state)
        return logs, replicas

    with tempfile.TemporaryDirectory(prefix="josefk-session-bench-") as tmp:
        (Path(tmp) / "0").mkdir()
        (Path(tmp) / "1").mkdir()
        logs, replicas = await broker(Path(tmp) / "0", 0)
        follower_logs, follower = await broker(Path(tmp) / "1", 1)
        try:
            context_broker = SimpleNamespace(
                replica_manager=replicas,
                fetch_sessions=FetchSessionCache(10),
                metrics=None,
                authorizer=None,
                config=BrokerConfig(),
            )
            handlers = registered_handlers()

            class Wire:
                """Leader broker 0 behind what the fetcher uses of a BrokerConnection:
                the request encoded and decoded, the answer encoded and decoded."""

                closed = False

                def version_for(self, api_key: int) -> int:
                    return handlers[api_key].max_version

                async def request(
                    self,
                    api_key: int,
                    body: Any,
                    *,
                    version: int | None = None,
                    timeout_s: float = 30,
                ) -> Any:
                    version = 12 if version is None and api_key == ApiKey.FETCH else version
                    version = self.version_for(api_key) if version is None else version
                    header = RequestHeader(
                        request_api_key=api_key,
                        request_api_version=version,
                        correlation_id=1,
                        client_id="bench",
                    )
                    header, decoded = decode_request(encode_request(header, body)[4:])
                    context = RequestContext(context_broker, header, version, None)  # type: ignore[arg-type]
                    response = handlers[api_key].fn(context, decoded)
                    if inspect.isawaitable(response):
                        response = await response
                    if side == "leader":
                        encode_response_parts(1, response, version, api_key=api_key)
                        return response
                    _, parts = encode_response_parts(1, response, version, api_key=api_key)
                    frame = b"".join(p.read() if hasattr(p, "read") else bytes(p) for p in parts)
                    return decode_response(frame[4:], api_key, version)[1]

            wire = Wire()
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
                response = await wire.request(ApiKey.FETCH, request)
                if session[0] == 0:
                    session[0] = response.session_id
                session[1] += 1
                return response

            fetcher = ReplicaFetcher(
                0,
                lambda: None,
                FetcherSettings(broker_id=1, max_wait_ms=0, min_bytes=0),
                on_high_watermark=lambda tp: None,
            )
            for p in range(partitions):
                partition = follower.get_partition("t", p)
                assert partition is not None
                fetcher.follow(partition)

            async def fetcher_round() -> None:
                # What the fetcher's loop (ReplicaFetcher._run) does each round, the
                # connection being there. Trees before baeb10f filtered the followed
                # partitions into a new dict each round; later ones have ``_active``.
                now = asyncio.get_running_loop().time()
                active_of = getattr(fetcher, "_active", None)
                active = (
                    active_of(now)
                    if active_of is not None
                    else {t: f for t, f in fetcher._partitions.items() if f.delayed_until <= now}
                )
                await fetcher._truncate(wire, active)  # type: ignore[arg-type]
                await fetcher._fetch_once(wire, active)  # type: ignore[arg-type]

            if side == "leader":
                await fetch(offsets)  # the full fetch that makes the session
                await fetch({})
            else:
                await fetcher_round()  # the truncation (nothing to find) and the full fetch
                await fetcher_round()
            fetches = 0
            cpu0 = time.process_time()
            for i in range(rounds):
                p = i % partitions
                [outcome] = replicas.append_records(
                    [(TopicPartition("t", p), memoryview(bytearray(batch)))], acks=1
                )
                assert outcome.error is None, outcome.error
                if side == "leader":
                    await fetch({})  # answers p's records
                    offsets[p] += 16
                    await fetch({p: offsets[p]})  # the follower's new offset: the HW moves
                else:
                    await fetcher_round()
                    await fetcher_round()
                fetches += 2
            cost = (time.process_time() - cpu0) / fetches * 1e6
            if side == "both":
                grown = follower.get_partition("t", (rounds - 1) % partitions)
                assert grown is not None and grown.log.log_end_offset > 0
            return cost
        finally:
            await logs.shutdown()
            await follower_logs.shutdown()


def run_worker(root: Path, partitions: int, rounds: int, side: str) -> float:
    output = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            str(partitions),
            "--rounds",
            str(rounds),
            "--side",
            side,
        ],
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
    parser.add_argument(
        "--side",
        choices=("leader", "both"),
        default="leader",
        help="the leader alone, or the follower's ReplicaFetcher and the leader together",
    )
    parser.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        cost = asyncio.run(measure(args.worker, args.rounds, args.side))
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
                    cost = run_worker(root, count, args.rounds, args.side)
                    key = (name, count)
                    best[key] = min(best.get(key, cost), cost)
        print(f"{'partitions in the session':>26} " + " ".join(f"{n:>14}" for n, _ in trees))
        for count in counts:
            print(f"{count:>26} " + " ".join(f"{best[n, count]:>11.0f} us" for n, _ in trees))
        print(f"(CPU microseconds per follower fetch, {args.side}, best of --repeat runs)")


if __name__ == "__main__":
    main()
