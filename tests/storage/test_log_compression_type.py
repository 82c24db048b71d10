"""The topic's ``compression.type``: batches in another codec are rebuilt in the topic's."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import NOW, check_invariants, open_log, read_all, small_config

from josefk.records import BatchBuilder, Compression, CorruptRecordError, RecordBatch
from josefk.records.record import iter_records
from josefk.storage.errors import RecordTooLargeError
from josefk.util.clock import ManualClock

CODEC_NAMES = {
    Compression.NONE: "uncompressed",
    Compression.GZIP: "gzip",
    Compression.SNAPPY: "snappy",
    Compression.LZ4: "lz4",
    Compression.ZSTD: "zstd",
}


def batch(
    codec: Compression,
    count: int = 20,
    *,
    tag: str = "r",
    producer_id: int = -1,
    sequence: int = -1,
) -> bytearray:
    builder = BatchBuilder(
        compression=codec,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=sequence,
    )
    for i in range(count):
        builder.append(
            f"{tag}-k{i}".encode(), f"{tag}-value-{i}-".encode() * 5, [("h", b"x")], NOW + i
        )
    return builder.build()


def contents(batches: list[RecordBatch]) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [
        (record.offset, record.timestamp, record.key, record.value)
        for stored in batches
        for record in iter_records(stored)
    ]


@pytest.mark.parametrize("source", list(Compression))
@pytest.mark.parametrize("target", list(Compression))
def test_batches_are_stored_in_the_topics_codec(
    tmp_path: Path, source: Compression, target: Compression
) -> None:
    log = open_log(
        tmp_path / "t-0",
        small_config(segment_bytes=1 << 20, compression_type=CODEC_NAMES[target]),
    )
    log.append_as_leader(batch(Compression.NONE, 3, tag="first"), 0)
    sent = batch(source)
    expected = [
        (3 + record.offset, record.timestamp, record.key, record.value)
        for record in iter_records(RecordBatch(memoryview(bytes(sent))))
    ]
    info = log.append_as_leader(sent, 7)
    assert (info.first_offset, info.last_offset, info.record_count) == (3, 22, 20)
    first, stored = read_all(log)
    stored.ensure_valid()
    assert stored.compression == target
    assert (stored.base_offset, stored.partition_leader_epoch) == (3, 7)
    assert stored.max_timestamp == NOW + 19
    assert contents([stored]) == expected
    assert info.valid_bytes == stored.size_in_bytes
    assert log.active_segment.size() == first.size_in_bytes + stored.size_in_bytes
    check_invariants(log)


@pytest.mark.parametrize("codec", list(Compression))
def test_producer_codec_is_kept_byte_for_byte(tmp_path: Path, codec: Compression) -> None:
    for name in ("producer", CODEC_NAMES[codec]):
        log = open_log(tmp_path / name / "t-0", small_config(compression_type=name))
        sent = batch(codec, 5)
        original = bytes(sent)
        log.append_as_leader(sent, 0)
        (stored,) = read_all(log)
        # Only the broker's own fields may differ: base offset and leader epoch (bytes 0-16,
        # outside the CRC).
        assert bytes(stored.buffer)[17:] == original[17:]


def test_a_multi_batch_append_rebuilds_only_the_batches_in_other_codecs(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1 << 20, compression_type="zstd"))
    parts = [
        batch(Compression.ZSTD, 4, tag="a"),
        batch(Compression.NONE, 6, tag="b"),
        batch(Compression.LZ4, 3, tag="c"),
    ]
    kept_as_sent = bytes(parts[0])
    records = bytearray().join(parts)
    info = log.append_as_leader(records, 0)
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 12, 3)
    stored = read_all(log)
    assert [b.compression for b in stored] == [Compression.ZSTD] * 3
    assert [(b.base_offset, b.last_offset) for b in stored] == [(0, 3), (4, 9), (10, 12)]
    assert bytes(stored[0].buffer)[17:] == kept_as_sent[17:]
    assert [key for _, _, key, _ in contents(stored)] == [
        f"{tag}-k{i}".encode() for tag, n in (("a", 4), ("b", 6), ("c", 3)) for i in range(n)
    ]
    assert info.valid_bytes == sum(b.size_in_bytes for b in stored)


def test_recompression_under_log_append_time(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=NOW + 5000)
    log = open_log(
        tmp_path / "t-0",
        small_config(compression_type="gzip", message_timestamp_type="LogAppendTime"),
        clock=clock,
    )
    info = log.append_as_leader(batch(Compression.NONE, 4), 0)
    assert info.log_append_time == NOW + 5000
    (stored,) = read_all(log)
    stored.ensure_valid()
    assert stored.compression == Compression.GZIP
    assert [r.timestamp for r in iter_records(stored)] == [NOW + 5000] * 4


def test_idempotent_retry_of_a_recompressed_batch_is_a_duplicate(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(compression_type="gzip"))
    first = log.append_as_leader(batch(Compression.NONE, 5, producer_id=42, sequence=0), 0)
    retry = log.append_as_leader(batch(Compression.NONE, 5, producer_id=42, sequence=0), 0)
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert retry.record_count == 0 and log.log_end_offset == 5
    after = log.append_as_leader(batch(Compression.NONE, 2, producer_id=42, sequence=5), 0)
    assert after.first_offset == 5


def test_corrupt_codec_data_is_rejected_and_nothing_is_written(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(compression_type="gzip"))
    good = batch(Compression.NONE, 3)
    bad = batch(Compression.ZSTD, 3)
    bad[70:80] = b"\xff" * 10
    # A valid CRC over broken zstd data: only decoding finds out.
    RecordBatch(memoryview(bad)).set_max_timestamp(NOW + 2)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytearray().join([good, bad]), 0)
    assert log.log_end_offset == 0 and log.active_segment.size() == 0


def test_a_config_change_applies_from_the_next_append(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config())
    log.append_as_leader(batch(Compression.NONE, 2), 0)
    log.update_config(small_config(compression_type="snappy"))
    log.append_as_leader(batch(Compression.NONE, 2), 0)
    log.update_config(small_config(compression_type="producer"))
    log.append_as_leader(batch(Compression.LZ4, 2), 0)
    assert [b.compression for b in read_all(log)] == [
        Compression.NONE,
        Compression.SNAPPY,
        Compression.LZ4,
    ]


def test_max_message_bytes_holds_for_the_batch_as_stored(tmp_path: Path) -> None:
    # 50 records of ~100 identical bytes: small in zstd, too large once decompressed.
    builder = BatchBuilder(compression=Compression.ZSTD)
    for i in range(50):
        builder.append(None, b"z" * 100, timestamp=NOW + i)
    sent = builder.build()
    assert len(sent) < 1000
    log = open_log(
        tmp_path / "t-0",
        small_config(
            segment_bytes=1 << 20, compression_type="uncompressed", max_message_bytes=2000
        ),
    )
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(sent, 0)
    assert log.log_end_offset == 0 and log.active_segment.size() == 0
