"""Hypothesis strategies and helpers shared by the record batch tests (not a test module)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from josefk.records import BatchBuilder, Compression, TimestampType

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

payloads = st.one_of(st.none(), st.binary(max_size=300))
header_keys = st.text(max_size=20)
headers = st.lists(st.tuples(header_keys, payloads), max_size=4).map(tuple)
# Timestamps stay within what real producers send so deltas from the first never overflow.
timestamps = st.one_of(
    st.just(-1),
    st.integers(min_value=0, max_value=(1 << 62)),
    st.integers(min_value=1_600_000_000_000, max_value=1_900_000_000_000),
)
codecs = st.sampled_from(list(Compression))


@dataclass(frozen=True)
class InputRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


input_records = st.builds(InputRecord, payloads, payloads, headers, timestamps)
record_lists = st.lists(input_records, min_size=1, max_size=30)


@dataclass(frozen=True)
class BatchSpec:
    base_offset: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    timestamp_type: TimestampType
    compression: Compression
    records: list[InputRecord]


batch_specs = st.builds(
    BatchSpec,
    base_offset=st.integers(min_value=0, max_value=(1 << 62)),
    partition_leader_epoch=st.integers(min_value=-1, max_value=(1 << 31) - 1),
    producer_id=st.integers(min_value=-1, max_value=INT64_MAX),
    producer_epoch=st.integers(min_value=-1, max_value=(1 << 15) - 1),
    base_sequence=st.integers(min_value=-1, max_value=(1 << 31) - 1),
    is_transactional=st.booleans(),
    timestamp_type=st.sampled_from(list(TimestampType)),
    compression=codecs,
    records=record_lists,
)


def build(spec: BatchSpec, *, log_append_time: int | None = None) -> bytearray:
    builder = BatchBuilder(
        base_offset=spec.base_offset,
        partition_leader_epoch=spec.partition_leader_epoch,
        producer_id=spec.producer_id,
        producer_epoch=spec.producer_epoch,
        base_sequence=spec.base_sequence,
        is_transactional=spec.is_transactional,
        timestamp_type=spec.timestamp_type,
        compression=spec.compression,
        log_append_time=log_append_time,
    )
    for record in spec.records:
        builder.append(record.key, record.value, record.headers, record.timestamp)
    return builder.build()
