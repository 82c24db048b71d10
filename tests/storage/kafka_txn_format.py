"""An independent reader of Kafka's on-disk transaction formats, for tests.

Written from the format's description (the record batch v2 header, the control record key and
value, the 34-byte ``.txnindex`` entry), with ``struct`` and ``crc32c`` only: it shares no code
with josefk, so a test that passes through it checks josefk's bytes, not josefk's reading of
its own bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")  # through record count: 61 bytes
_CRC_START = 21  # the CRC covers attributes to the end of the batch
_TXN_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: bool
    # For a control batch: (control type, coordinator epoch) of its one record.
    marker: tuple[int, int] | None


@dataclass(frozen=True)
class TxnIndexEntry:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's signed varint) at ``position``: (value, next position)."""
    shift = raw = 0
    while True:
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7


def _control_record(records: bytes) -> tuple[int, int]:
    length, position = _varint(records, 0)
    end = position + length
    position += 1  # record attributes
    _, position = _varint(records, position)  # timestamp delta
    _, position = _varint(records, position)  # offset delta
    key_length, position = _varint(records, position)
    key = records[position : position + key_length]
    position += key_length
    value_length, position = _varint(records, position)
    value = records[position : position + value_length]
    position += value_length
    header_count, position = _varint(records, position)
    assert header_count == 0 and position == end, "control record with trailing fields"
    key_version, control_type = struct.unpack(">hh", key)
    value_version, coordinator_epoch = struct.unpack(">hi", value)
    assert key_version == 0 and value_version == 0, (key_version, value_version)
    return control_type, coordinator_epoch


def read_log_file(path: Path) -> list[Batch]:
    """Every batch of a ``.log`` file; asserts each is whole and passes its CRC."""
    data = path.read_bytes()
    batches = []
    position = 0
    while position < len(data):
        (
            base_offset, batch_length, _ple, magic, crc, attributes, last_delta,
            _first_ts, _max_ts, producer_id, epoch, _base_seq, count,
        ) = _HEADER.unpack_from(data, position)  # fmt: skip
        end = position + 12 + batch_length
        assert magic == 2 and end <= len(data), f"bad batch at {position} of {path}"
        assert crc32c(data[position + _CRC_START : end]) == crc, f"CRC fails at {position}"
        control = bool(attributes & 0x20)
        marker = None
        if control:
            assert count == 1 and attributes & 0x07 == 0, "a marker is one uncompressed record"
            marker = _control_record(data[position + _HEADER.size : end])
        batches.append(
            Batch(
                base_offset,
                base_offset + last_delta,
                producer_id,
                epoch,
                bool(attributes & 0x10),
                control,
                marker,
            )
        )
        position = end
    return batches


def read_txn_index(path: Path) -> list[TxnIndexEntry]:
    """Every entry of a ``.txnindex`` file ([] when the file does not exist)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    assert len(data) % _TXN_ENTRY.size == 0, f"{path} is {len(data)} bytes"
    entries = []
    for version, producer_id, first, last, lso in _TXN_ENTRY.iter_unpack(data):
        assert version == 0
        entries.append(TxnIndexEntry(producer_id, first, last, lso))
    return entries
