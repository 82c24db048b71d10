"""Record batch build and iterate rates: josefk.records next to kafka-python in the same run.

    python bench/records_bench.py [--records 1000] [--value-size 100] [--rounds 20]

Prints records per second for building a batch of ``--records`` records and for iterating
it, per codec, for josefk's BatchBuilder / iter_records and for kafka-python's
DefaultRecordBatchBuilder / DefaultRecordBatch (the baseline). kafka-python codecs that are
not installed are skipped. Rows:

* build: records with a key and one header (BatchBuilder's general path);
* build-plain: no key, no headers, timestamps a millisecond apart every 100 records (what
  a producer sends; BatchBuilder's fast path);
* iterate: josefk.records.iter_records over the first batch;
* decode: the consumer's decoder (josefk.client.decode.decode_records, ConsumerRecord
  tuples) over the plain batch, against kafka-python iterating the same bytes.

Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from functools import partial

from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from josefk.client.decode import decode_records
from josefk.records import BatchBuilder, Compression, RecordBatch, iter_records

_KAFKA_HAS = {
    Compression.NONE: lambda: True,
    Compression.GZIP: kafka_codec.has_gzip,
    Compression.SNAPPY: kafka_codec.has_snappy,
    Compression.LZ4: kafka_codec.has_lz4,
    Compression.ZSTD: kafka_codec.has_zstd,
}


def _best_rate(operation: Callable[[], object], count: int, rounds: int) -> float:
    """Records per second of the fastest of ``rounds`` runs (least disturbed by the machine)."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        operation()
        best = min(best, time.perf_counter() - start)
    return count / best


def _iterate_josefk(raw: bytes) -> int:
    return len(list(iter_records(RecordBatch(memoryview(raw)))))


def _iterate_kafka(raw: bytes) -> int:
    return len(list(DefaultRecordBatch(raw)))


def _decode_josefk(raw: bytes) -> int:
    return len(decode_records("bench", 0, memoryview(raw), 0)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()

    # Half random, half repeated: compressible like real payloads, not trivially so.
    half = args.value_size // 2
    values = [os.urandom(half) + b"x" * (args.value_size - half) for _ in range(args.records)]
    keys = [b"key-%d" % i for i in range(args.records)]
    headers = [("trace", b"abc")]
    now = 1_700_000_000_000

    def build_josefk(codec: Compression) -> bytearray:
        builder = BatchBuilder(compression=codec)
        for i in range(args.records):
            builder.append(keys[i], values[i], headers, now + i)
        return builder.build()

    def build_kafka(codec: Compression) -> bytearray:
        builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 30)
        for i in range(args.records):
            builder.append(i, now + i, keys[i], values[i], headers)
        return builder.build()  # type: ignore[no-any-return]

    def build_josefk_plain(codec: Compression) -> bytearray:
        builder = BatchBuilder(compression=codec)
        for i in range(args.records):
            builder.append(None, values[i], (), now + i // 100)
        return builder.build()

    def build_kafka_plain(codec: Compression) -> bytearray:
        builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 30)
        for i in range(args.records):
            builder.append(i, now + i // 100, None, values[i], [])
        return builder.build()  # type: ignore[no-any-return]

    print(f"{args.records} records of {args.value_size} B per batch, best of {args.rounds} rounds")
    print(
        f"{'codec':<8}{'operation':<13}{'josefk rec/s':>16}{'kafka-python rec/s':>20}{'ratio':>8}"
    )
    for codec in Compression:
        if not _KAFKA_HAS[codec]():
            print(f"{codec.name.lower():<8}skipped: kafka-python lacks the codec")
            continue
        ours = bytes(build_josefk(codec))
        theirs = bytes(build_kafka(codec))
        plain = bytes(build_josefk_plain(codec))
        rows = [
            (
                "build",
                _best_rate(partial(build_josefk, codec), args.records, args.rounds),
                _best_rate(partial(build_kafka, codec), args.records, args.rounds),
            ),
            (
                "build-plain",
                _best_rate(partial(build_josefk_plain, codec), args.records, args.rounds),
                _best_rate(partial(build_kafka_plain, codec), args.records, args.rounds),
            ),
            (
                "iterate",
                _best_rate(partial(_iterate_josefk, ours), args.records, args.rounds),
                _best_rate(partial(_iterate_kafka, theirs), args.records, args.rounds),
            ),
            (
                "decode",
                _best_rate(partial(_decode_josefk, plain), args.records, args.rounds),
                _best_rate(partial(_iterate_kafka, plain), args.records, args.rounds),
            ),
        ]
        for operation, josefk_rate, kafka_rate in rows:
            print(
                f"{codec.name.lower():<8}{operation:<13}{josefk_rate:>16,.0f}"
                f"{kafka_rate:>20,.0f}{josefk_rate / kafka_rate:>8.2f}"
            )


if __name__ == "__main__":
    main()
