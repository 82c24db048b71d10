"""What Kafka's ProduceRequest.validateRecords and its Fetch answer ask of a request's
version, as josefk answers it.

One v2 batch per partition: since Produce v3 (every version Kafka 4 still takes) a partition
carries exactly one batch, of the v2 format; more, or a message set of magic 0 or 1, is
INVALID_RECORD for that partition, nothing of it appended.

KIP-110: zstd came with Produce v7 and Fetch v10. A Produce request of an older version
whose batch is zstd-compressed is refused with UNSUPPORTED_COMPRESSION_TYPE for that partition
(Kafka's ProduceRequest.validateRecords; an answer, not a closed connection: KAFKA-7549),
and a Fetch of an older version answers that error for a partition whose records hold a zstd
batch, since its client could not read them. Other codecs, and the versions that know zstd,
are unchanged. sarama 1.22 (tests/integration/test_sarama.py) sends zstd in Produce v3.

Real logs and the registered Produce and Fetch handlers, through the codec (``WireLeader``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replica_helpers import create_topic
from test_fetch_rotation import WireLeader

from josefk.broker.fetch_session import FetchSessionCache
from josefk.broker.replica_manager import ReplicaManager
from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode
from josefk.records import BatchBuilder, Compression, split_batches

Produce = request_class(ApiKey.PRODUCE)
Fetch = request_class(ApiKey.FETCH)


def batch(codec: Compression) -> bytes:
    builder = BatchBuilder(compression=codec)
    for i in range(5):
        builder.append(f"k{i}".encode(), b"value-%d" % i * 20, timestamp=1_700_000_000_000 + i)
    return builder.build()


async def produce(wire: WireLeader, topic: str, records: bytes, version: int) -> Any:
    request = Produce(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            Produce.TopicProduceData(
                name=topic,
                partition_data=[Produce.PartitionProduceData(index=0, records=records)],
            )
        ],
    )
    response = await wire.request(ApiKey.PRODUCE, request, version=version, timeout_s=5)
    return response.responses[0].partition_responses[0]


async def fetch(wire: WireLeader, topic: str, version: int) -> Any:
    request = Fetch(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            Fetch.FetchTopic(
                topic=topic,
                partitions=[
                    Fetch.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    response = await wire.request(ApiKey.FETCH, request, version=version, timeout_s=5)
    return response.responses[0].partitions[0]


@pytest.fixture
def wire(replicas: ReplicaManager) -> WireLeader:
    for name in ("zstd", "gzip"):
        create_topic(replicas, name, 1)
    return WireLeader(replicas, FetchSessionCache(10))


@pytest.mark.parametrize("version", [3, 6])
async def test_a_produce_before_v7_may_not_carry_zstd(wire: WireLeader, version: int) -> None:
    answer = await produce(wire, "zstd", batch(Compression.ZSTD), version)
    assert answer.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert answer.base_offset == -1
    nothing = await fetch(wire, "zstd", 12)
    assert nothing.high_watermark == 0  # nothing was appended
    # Every other codec is taken at the same version.
    answer = await produce(wire, "gzip", batch(Compression.GZIP), version)
    assert answer.error_code == ErrorCode.NONE


async def test_a_produce_of_v7_appends_zstd(wire: WireLeader) -> None:
    answer = await produce(wire, "zstd", batch(Compression.ZSTD), 7)
    assert answer.error_code == ErrorCode.NONE and answer.base_offset == 0


@pytest.mark.parametrize("version", [4, 9])
async def test_a_fetch_before_v10_of_zstd_records_answers_the_error(
    wire: WireLeader, version: int
) -> None:
    assert (await produce(wire, "zstd", batch(Compression.ZSTD), 7)).error_code == 0
    assert (await produce(wire, "gzip", batch(Compression.GZIP), 7)).error_code == 0
    refused = await fetch(wire, "zstd", version)
    assert refused.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert not refused.records
    served = await fetch(wire, "gzip", version)
    assert served.error_code == ErrorCode.NONE
    assert [b.compression for b in split_batches(served.records)] == [Compression.GZIP]
    newer = await fetch(wire, "zstd", 10)
    assert newer.error_code == ErrorCode.NONE
    assert [b.compression for b in split_batches(newer.records)] == [Compression.ZSTD]


async def test_a_fetch_before_v10_is_refused_when_any_batch_it_would_carry_is_zstd(
    wire: WireLeader,
) -> None:
    """The check reads every batch header of the answer, not only the first."""
    assert (await produce(wire, "zstd", batch(Compression.GZIP), 7)).error_code == 0
    assert (await produce(wire, "zstd", batch(Compression.ZSTD), 7)).error_code == 0
    refused = await fetch(wire, "zstd", 9)
    assert refused.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


async def test_a_partition_given_two_batches_is_refused_and_nothing_of_it_appended(
    wire: WireLeader,
) -> None:
    two = batch(Compression.NONE) + batch(Compression.NONE)
    for version in (3, 9):
        answer = await produce(wire, "gzip", two, version)
        assert answer.error_code == ErrorCode.INVALID_RECORD
    assert (await fetch(wire, "gzip", 12)).high_watermark == 0
    one = await produce(wire, "gzip", batch(Compression.NONE), 9)
    assert one.error_code == ErrorCode.NONE and one.base_offset == 0


async def test_a_message_set_of_an_old_format_is_invalid_not_corrupt(wire: WireLeader) -> None:
    """A magic 0 or 1 message set is INVALID_RECORD (a client gives up), not CORRUPT_MESSAGE
    (which clients retry): Kafka takes only v2 batches since Produce v3."""
    old = bytearray(batch(Compression.NONE))
    old[16] = 1  # the magic byte (the CRC does not cover it)
    answer = await produce(wire, "gzip", bytes(old), 9)
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert (await fetch(wire, "gzip", 12)).high_watermark == 0
