"""Kafka's v2 record batch (magic 2): the bottom layer of josefk.

Owns the byte layout of record batches and records: a zero-copy header view, validation and
CRC32C, the in-place rewrite of broker-owned fields, record iteration and batch building, and
the compression codecs. Imports nothing else from josefk.
"""

from josefk.records.batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    Compression,
    RecordBatch,
    TimestampType,
    peek_batch_size,
    split_batches,
)
from josefk.records.builder import BatchBuilder, build_control_batch, recompress_batch
from josefk.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, compress, decompress
from josefk.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordsError,
    UnsupportedCompressionError,
)
from josefk.records.record import (
    ControlRecordType,
    Record,
    batch_max_timestamp,
    decode_control_type,
    decode_end_txn_marker,
    iter_records,
    max_timestamp_delta,
)

__all__ = [
    "COMPRESSION_MASK",
    "CONTROL_BIT",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "DELETE_HORIZON_BIT",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "TIMESTAMP_TYPE_BIT",
    "TRANSACTIONAL_BIT",
    "BatchBuilder",
    "BatchHeader",
    "Compression",
    "ControlRecordType",
    "CorruptRecordError",
    "InvalidRecordError",
    "Record",
    "RecordBatch",
    "RecordsError",
    "TimestampType",
    "UnsupportedCompressionError",
    "batch_max_timestamp",
    "build_control_batch",
    "compress",
    "decode_control_type",
    "decode_end_txn_marker",
    "decompress",
    "iter_records",
    "max_timestamp_delta",
    "peek_batch_size",
    "recompress_batch",
    "split_batches",
]
