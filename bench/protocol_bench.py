"""Protocol codec speed: josefk.protocol next to kafka-python's protocol classes, same run.

    python bench/protocol_bench.py [--rounds 30]

Operations (per-operation time is the fastest of ``--rounds`` runs of a batch of calls):

* decode a Produce request (v9, flexible) with 100 partitions of 1 KiB record data each: the
  body on both sides, and josefk's whole frame (``decode_request``, request header included)
  next to the same kafka-python body decode;
* encode a Fetch response (v16) for 100 partitions, prefix only: josefk leaves each partition's
  records out (``encode_response_parts``, the sendfile path) while kafka-python is given
  empty record data, so both write the same structure;
* encode and decode a Metadata response (v12) with 1,000 partitions (10 topics x 100).

kafka-python 3.x generates its classes from Kafka's message schemas; it is the baseline.

josefk decodes with its C extension when it is built (``josefk.protocol._cdecode``) and with
generated Python otherwise; the decode rows are run on both paths (the default path's row,
then a "pure Python" row through ``CompiledMessage.python_decoder``), each against its own
kafka-python batches. ``JOSEFK_PURE_PYTHON=1`` makes both rows pure Python.

Time is CPU time of this thread. The cyclic garbage collector is paused during each timed
batch and run between batches, as ``timeit`` does: what a collection costs depends on every
object in the process, not on the codec, and a collection landing in one side's batch and not
the other's is noise. Both codecs build the same objects (one per struct, one list per
array), so they trigger the collector alike. ``--gc`` leaves it running instead.

Not a test: nothing here asserts. Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka.protocol.consumer import FetchResponse as KpFetchResponse
from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse
from kafka.protocol.producer import ProduceRequest as KpProduceRequest

from josefk.protocol import api, compiler
from josefk.protocol.compiler import as_byte_view
from josefk.protocol.headers import RequestHeader

PRODUCE_V = 9
FETCH_V = 16
METADATA_V = 12


class FileSlice:
    """Stands in for the broker's (file, position, size) slice: only its size is read."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


def _batch(operation: Callable[[], object], calls: int, pause_gc: bool) -> float:
    if pause_gc:
        gc.collect()
        gc.disable()
    try:
        start = time.thread_time()
        for _ in range(calls):
            operation()
        return (time.thread_time() - start) / calls
    finally:
        if pause_gc:
            gc.enable()


def compare(
    ours: Callable[[], object], theirs: Callable[[], object], rounds: int, pause_gc: bool = True
) -> tuple[float, float]:
    """Seconds per call for each side: the fastest of ``rounds`` interleaved batches.

    CPU time of this thread (``thread_time``), batches alternating between the two sides, so
    other work on a shared machine slows both alike and is mostly not counted at all; the
    garbage collector paused during batches unless ``--gc`` (see the module docstring).
    """
    # Size batches to ~20 ms so the clock's resolution does not matter.
    calls_ours = max(1, int(0.02 / max(_batch(ours, 3, pause_gc), 1e-7)))
    calls_theirs = max(1, int(0.02 / max(_batch(theirs, 3, pause_gc), 1e-7)))
    best_ours = best_theirs = float("inf")
    for _ in range(rounds):
        best_ours = min(best_ours, _batch(ours, calls_ours, pause_gc))
        best_theirs = min(best_theirs, _batch(theirs, calls_theirs, pause_gc))
    return best_ours, best_theirs


def to_kp(kp_cls: Any, obj: Any, version: int) -> Any:
    """kafka-python's object holding the same values as josefk's ``obj`` (same field names)."""
    struct = kp_cls._struct if hasattr(kp_cls, "_struct") else kp_cls
    kwargs: dict[str, Any] = {}
    for name in obj.__dataclass_fields__:
        kp_name = "authorized_operations" if name.endswith("authorized_operations") else name
        if kp_name not in struct.fields:
            continue
        value = getattr(obj, name)
        kp_field = struct.fields[kp_name]
        sub = getattr(kp_field, "data_class", None)
        if sub is not None and value is not None:
            if isinstance(value, list):
                value = [to_kp(sub, v, version) for v in value]
            else:
                value = to_kp(sub, value, version)
        elif kp_field.type_str == "bitfield":
            value = None
        elif isinstance(value, memoryview):
            value = bytes(value)
        kwargs[kp_name] = value
    return kp_cls(version=version, **kwargs)


def produce_request() -> Any:
    cls = api.request_class(api.ApiKey.PRODUCE)
    records = os.urandom(1024)
    return cls(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            cls.TopicProduceData(
                name=f"topic-{t}",
                partition_data=[
                    cls.PartitionProduceData(index=p, records=records) for p in range(10)
                ],
            )
            for t in range(10)
        ],
    )


def fetch_response(records: Callable[[], Any]) -> Any:
    cls = api.response_class(api.ApiKey.FETCH)
    return cls(
        session_id=12,
        responses=[
            cls.FetchableTopicResponse(
                topic_id=uuid.uuid4(),
                partitions=[
                    cls.PartitionData(
                        partition_index=p,
                        high_watermark=1_000_000 + p,
                        last_stable_offset=1_000_000 + p,
                        log_start_offset=0,
                        records=records(),
                    )
                    for p in range(10)
                ],
            )
            for _ in range(10)
        ],
    )


def metadata_response() -> Any:
    cls = api.response_class(api.ApiKey.METADATA)
    return cls(
        brokers=[
            cls.MetadataResponseBroker(node_id=n, host=f"broker-{n}", port=9092) for n in range(3)
        ],
        cluster_id="josefk-bench",
        controller_id=0,
        topics=[
            cls.MetadataResponseTopic(
                name=f"topic-{t}",
                topic_id=uuid.uuid4(),
                partitions=[
                    cls.MetadataResponsePartition(
                        partition_index=p,
                        leader_id=p % 3,
                        leader_epoch=5,
                        replica_nodes=[0, 1, 2],
                        isr_nodes=[0, 1, 2],
                    )
                    for p in range(100)
                ],
            )
            for t in range(10)
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument(
        "--gc", action="store_true", help="leave the garbage collector running while timing"
    )
    args = parser.parse_args()
    rounds = args.rounds
    pause_gc = not args.gc
    rows: list[tuple[str, float, float]] = []

    # Produce request decode: the body on both sides, then josefk's whole frame.
    produce = api.request_message(api.ApiKey.PRODUCE)
    produce_body = produce.encode(produce_request(), PRODUCE_V)
    frame = api.encode_request(
        RequestHeader(
            request_api_key=0, request_api_version=PRODUCE_V, correlation_id=1, client_id="b"
        ),
        produce_request(),
    )[4:]
    ours, theirs = compare(
        lambda: produce.decode(produce_body, PRODUCE_V),
        lambda: KpProduceRequest.decode(produce_body, version=PRODUCE_V),
        rounds,
        pause_gc,
    )
    rows.append(("Decode Produce request v9 body, 100 partitions x 1 KiB", ours, theirs))
    py_produce = produce.python_decoder(PRODUCE_V)
    ours, theirs = compare(
        lambda: py_produce(as_byte_view(produce_body), 0)[0],
        lambda: KpProduceRequest.decode(produce_body, version=PRODUCE_V),
        rounds,
        pause_gc,
    )
    rows.append(("… pure-Python decoder", ours, theirs))
    ours, theirs = compare(
        lambda: api.decode_request(frame),
        lambda: KpProduceRequest.decode(produce_body, version=PRODUCE_V),
        rounds,
        pause_gc,
    )
    rows.append(("… josefk with its request header (`decode_request`)", ours, theirs))

    # Fetch response prefix encode.
    fetch_ours = fetch_response(lambda: FileSlice(1 << 20))
    fetch_kp = to_kp(KpFetchResponse, fetch_response(lambda: b""), FETCH_V)
    ours, theirs = compare(
        lambda: api.encode_response_parts(7, fetch_ours, FETCH_V),
        lambda: fetch_kp.encode(version=FETCH_V),
        rounds,
        pause_gc,
    )
    rows.append(("Encode Fetch response v16 prefix, 100 partitions", ours, theirs))

    # Metadata response encode and decode.
    metadata = api.response_message(api.ApiKey.METADATA)
    meta = metadata_response()
    meta_kp = to_kp(KpMetadataResponse, meta, METADATA_V)
    meta_bytes = metadata.encode(meta, METADATA_V)
    ours, theirs = compare(
        lambda: metadata.encode(meta, METADATA_V),
        lambda: meta_kp.encode(version=METADATA_V),
        rounds,
        pause_gc,
    )
    rows.append(("Encode Metadata response v12, 1,000 partitions", ours, theirs))
    ours, theirs = compare(
        lambda: metadata.decode(meta_bytes, METADATA_V),
        lambda: KpMetadataResponse.decode(meta_bytes, version=METADATA_V),
        rounds,
        pause_gc,
    )
    rows.append(("Decode Metadata response v12, 1,000 partitions", ours, theirs))
    py_metadata = metadata.python_decoder(METADATA_V)
    ours, theirs = compare(
        lambda: py_metadata(as_byte_view(meta_bytes), 0)[0],
        lambda: KpMetadataResponse.decode(meta_bytes, version=METADATA_V),
        rounds,
        pause_gc,
    )
    rows.append(("… pure-Python decoder", ours, theirs))

    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    print("garbage collector:", "running" if args.gc else "paused during timed batches")
    print("default decoder:", "C extension" if compiler.C_DECODER else "pure Python")
    print()
    print("| Operation | josefk | kafka-python | speed-up |")
    print("|---|---:|---:|---:|")
    for name, ours, theirs in rows:
        print(f"| {name} | {ours * 1e6:,.1f} µs | {theirs * 1e6:,.1f} µs | {theirs / ours:.1f}x |")


if __name__ == "__main__":
    main()
