"""The record format of Kafka's ``__transaction_state`` topic, byte for byte.

Owns the encoder and decoder of the keys and values the transaction coordinator writes, so
that Kafka's tools (kafka-dump-log's transaction log decoder) read a josefk transaction log
and josefk loads one written by Kafka.

Both start with an int16 schema version. Strings are int16-length UTF-8, arrays int32-count.
Version 0 is not flexible; version 1 (KIP-890) is flexible (compact strings and arrays,
unsigned varint lengths + 1, tagged fields after each struct).

Key::

    TransactionLogKey  v0  transactional_id string

Value::

    TransactionLogValue v0, v1
        producer_id                     int64
        producer_epoch                  int16
        transaction_timeout_ms          int32
        transaction_status              int8   (the TxnState ids, 0 Empty .. 7 PrepareEpochFence)
        transaction_partitions          nullable array of
            topic                       string
            partition_ids               array of int32
        transaction_last_update_timestamp_ms  int64
        transaction_start_timestamp_ms        int64
        (v1: tagged fields, which josefk reads past)

Kafka writes value v0 unless transaction version 2 is in use, and a null partitions array for
an Empty transaction; so does josefk. A null value is a tombstone (an expired id).

Imports nothing from josefk.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

KEY_VERSION: Final = 0
VALUE_VERSION: Final = 0
EMPTY_STATE_ID: Final = 0

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_VALUE_HEAD: Final = struct.Struct(">qhib")
_TIMESTAMPS: Final = struct.Struct(">qq")


class TxnLogSchemaError(ValueError):
    """A key or value of ``__transaction_state`` that no known schema version reads."""


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """One transactional id's metadata as the log holds it. ``partitions``: topic ->
    partition ids, in the order written."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...] = field(default_factory=tuple)
    last_update_timestamp_ms: int = -1
    start_timestamp_ms: int = -1


def _put_string(out: bytearray, value: str) -> None:
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise TxnLogSchemaError(f"string of {len(raw)} bytes does not fit an int16 length")
    out += _I16.pack(len(raw))
    out += raw


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_I16.pack(KEY_VERSION))
    _put_string(out, transactional_id)
    return bytes(out)


def encode_value(value: TxnLogValue) -> bytes:
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _VALUE_HEAD.pack(
        value.producer_id, value.producer_epoch, value.transaction_timeout_ms, value.state
    )
    if value.state == EMPTY_STATE_ID and not value.partitions:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(value.partitions))
        for topic, partition_ids in value.partitions:
            _put_string(out, topic)
            out += _I32.pack(len(partition_ids))
            for partition_id in partition_ids:
                out += _I32.pack(partition_id)
    out += _TIMESTAMPS.pack(value.last_update_timestamp_ms, value.start_timestamp_ms)
    return bytes(out)


class _Reader:
    __slots__ = ("_data", "_flexible", "_pos")

    def __init__(self, data: bytes, *, flexible: bool) -> None:
        self._data = data
        self._pos = 0
        self._flexible = flexible

    def take(self, s: struct.Struct) -> tuple[int, ...]:
        end = self._pos + s.size
        if end > len(self._data):
            raise TxnLogSchemaError(f"truncated at byte {self._pos} of {len(self._data)}")
        values = s.unpack_from(self._data, self._pos)
        self._pos = end
        return values

    def varint(self) -> int:
        result = shift = 0
        while True:
            if self._pos >= len(self._data) or shift > 28:
                raise TxnLogSchemaError("bad unsigned varint")
            byte = self._data[self._pos]
            self._pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def length(self, s: struct.Struct) -> int:
        """An array or string length: -1 for null."""
        return self.varint() - 1 if self._flexible else self.take(s)[0]

    def string(self) -> str:
        size = self.length(_I16)
        if size < 0:
            raise TxnLogSchemaError("null string where one is required")
        end = self._pos + size
        if end > len(self._data):
            raise TxnLogSchemaError("truncated string")
        try:
            text = self._data[self._pos : end].decode()
        except UnicodeDecodeError as exc:
            raise TxnLogSchemaError(f"string is not UTF-8: {exc}") from None
        self._pos = end
        return text

    def skip_tagged_fields(self) -> None:
        if not self._flexible:
            return
        for _ in range(self.varint()):
            self.varint()
            size = self.varint()
            self._pos += size
            if self._pos > len(self._data):
                raise TxnLogSchemaError("truncated tagged field")

    def done(self) -> bool:
        return self._pos == len(self._data)


def decode_key(data: bytes) -> str:
    """The transactional id of a key."""
    if len(data) < 2:
        raise TxnLogSchemaError("key shorter than its version")
    (version,) = _I16.unpack_from(data)
    if version != KEY_VERSION:
        raise TxnLogSchemaError(f"TransactionLogKey has no version {version}")
    reader = _Reader(data[2:], flexible=False)
    transactional_id = reader.string()
    if not reader.done():
        raise TxnLogSchemaError("bytes left after the key")
    return transactional_id


def decode_value(data: bytes) -> TxnLogValue:
    if len(data) < 2:
        raise TxnLogSchemaError("value shorter than its version")
    (version,) = _I16.unpack_from(data)
    if version not in (0, 1):
        raise TxnLogSchemaError(f"TransactionLogValue has no version {version}")
    reader = _Reader(data[2:], flexible=version >= 1)
    producer_id, producer_epoch, timeout_ms, state = reader.take(_VALUE_HEAD)
    count = reader.length(_I32)
    partitions: list[tuple[str, tuple[int, ...]]] = []
    for _ in range(max(count, 0)):
        topic = reader.string()
        ids = reader.length(_I32)
        if ids < 0:
            raise TxnLogSchemaError("null partition list")
        partition_ids = tuple(reader.take(_I32)[0] for _ in range(ids))
        reader.skip_tagged_fields()
        partitions.append((topic, partition_ids))
    last_update, start = reader.take(_TIMESTAMPS)
    reader.skip_tagged_fields()
    if not reader.done():
        raise TxnLogSchemaError("bytes left after the value")
    return TxnLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout_ms,
        state=state,
        partitions=tuple(partitions),
        last_update_timestamp_ms=last_update,
        start_timestamp_ms=start,
    )
