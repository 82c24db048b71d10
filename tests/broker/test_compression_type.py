"""``compression.type`` through the replica manager of an in-process Broker: the broker-level
default and topic overrides decide the codec batches are stored in."""

from __future__ import annotations

from pathlib import Path

from josefk.broker.server import Broker
from josefk.config.broker import BrokerConfig
from josefk.records import BatchBuilder, Compression, RecordBatch, split_batches
from josefk.records.record import iter_records
from josefk.storage.offsets import FetchIsolation


def producer_batch(codec: Compression, count: int = 10) -> memoryview:
    builder = BatchBuilder(compression=codec)
    for i in range(count):
        builder.append(f"k{i}".encode(), b"value-%d" % i * 10, timestamp=1_700_000_000_000 + i)
    return memoryview(builder.build())


async def started(data: Path, **settings: str) -> Broker:
    broker = Broker(
        BrokerConfig.from_properties(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": str(data),
                "josefk.metrics.enable": "false",
                **settings,
            }
        )
    )
    await broker.start()
    return broker


def stored(broker: Broker, topic: str) -> list[RecordBatch]:
    assert broker.replica_manager is not None
    partition = broker.replica_manager.get_partition(topic, 0)
    assert partition is not None
    read = partition.log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    assert read.records is not None
    return list(split_batches(read.records.read()))


async def test_topic_and_broker_compression_type(tmp_path: Path) -> None:
    broker = await started(tmp_path, **{"compression.type": "gzip"})
    try:
        replicas, topics = broker.replica_manager, broker.local_topics
        assert replicas is not None and topics is not None
        topics.create_topic_now("by-default", 1, {})
        topics.create_topic_now("zstd", 1, {"compression.type": "zstd"})
        topics.create_topic_now("kept", 1, {"compression.type": "producer"})
        for topic in ("by-default", "zstd", "kept"):
            partition = replicas.get_partition(topic, 0)
            assert partition is not None
            for codec in (Compression.NONE, Compression.LZ4):
                info = replicas.append_to_leader(partition, producer_batch(codec))
                assert info.record_count == 10
        assert [b.compression for b in stored(broker, "by-default")] == [Compression.GZIP] * 2
        assert [b.compression for b in stored(broker, "zstd")] == [Compression.ZSTD] * 2
        assert [b.compression for b in stored(broker, "kept")] == [
            Compression.NONE,
            Compression.LZ4,
        ]
        for topic in ("by-default", "zstd", "kept"):
            batches = stored(broker, topic)
            for batch in batches:
                batch.ensure_valid()
            assert [(r.offset, r.key) for b in batches for r in iter_records(b)] == [
                (n * 10 + i, f"k{i}".encode()) for n in range(2) for i in range(10)
            ]
        # An altered topic config applies from the next append.
        await topics.alter_topic_configs(
            "zstd", lambda _: {"compression.type": "uncompressed"}, validate_only=False
        )
        partition = replicas.get_partition("zstd", 0)
        assert partition is not None
        replicas.append_to_leader(partition, producer_batch(Compression.SNAPPY))
        assert stored(broker, "zstd")[-1].compression == Compression.NONE
    finally:
        await broker.stop()
