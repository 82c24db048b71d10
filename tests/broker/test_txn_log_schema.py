"""The ``__transaction_state`` record format: round trips, Kafka's bytes, bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.broker.txn.log_schema import (
    TxnLogSchemaError,
    TxnLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

_names = st.text(min_size=1, max_size=30)
_partitions = st.lists(
    st.tuples(_names, st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)),
    max_size=5,
).map(tuple)


@given(
    transactional_id=st.text(max_size=50),
    producer_id=st.integers(-1, 2**63 - 1),
    producer_epoch=st.integers(-1, 2**15 - 1),
    timeout=st.integers(0, 2**31 - 1),
    state=st.integers(1, 7),
    partitions=_partitions,
    last_update=st.integers(-1, 2**62),
    start=st.integers(-1, 2**62),
)
def test_keys_and_values_round_trip(
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    timeout: int,
    state: int,
    partitions: tuple[tuple[str, tuple[int, ...]], ...],
    last_update: int,
    start: int,
) -> None:
    assert decode_key(encode_key(transactional_id)) == transactional_id
    value = TxnLogValue(producer_id, producer_epoch, timeout, state, partitions, last_update, start)
    assert decode_value(encode_value(value)) == value


def test_the_bytes_are_kafkas_v0_layout() -> None:
    assert encode_key("t1") == b"\x00\x00\x00\x02t1"
    value = TxnLogValue(7, 2, 60_000, 1, (("orders", (0, 3)),), 1000, 900)
    expected = (
        struct.pack(">hqhib", 0, 7, 2, 60_000, 1)
        + struct.pack(">i", 1)
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">iii", 2, 0, 3)
        + struct.pack(">qq", 1000, 900)
    )
    assert encode_value(value) == expected


def test_an_empty_transaction_writes_a_null_partition_array() -> None:
    raw = encode_value(TxnLogValue(7, 0, 60_000, 0, (), 5, -1))
    assert raw[2 + 15 : 2 + 19] == struct.pack(">i", -1)
    assert decode_value(raw).partitions == ()


def test_a_flexible_v1_value_with_tagged_fields_is_read() -> None:
    raw = (
        struct.pack(">hqhib", 1, 9, 4, 1000, 2)
        + bytes([2])  # compact array of 1
        + bytes([2])
        + b"t"  # compact string "t"
        + bytes([2])
        + struct.pack(">i", 5)  # partitions [5]
        + bytes([0])  # the topic's tagged fields
        + struct.pack(">qq", 10, 8)
        + bytes([1, 0, 3])
        + b"abc"  # one tagged field (tag 0, 3 bytes)
    )
    assert decode_value(raw) == TxnLogValue(9, 4, 1000, 2, (("t", (5,)),), 10, 8)


@pytest.mark.parametrize(
    "raw",
    [b"", b"\x00", b"\x00\x05\x00\x00", b"\x00\x00\x00\x05ab", b"\x00\x00\x00\x01a!"],
)
def test_bad_keys_are_named_errors(raw: bytes) -> None:
    with pytest.raises(TxnLogSchemaError):
        decode_key(raw)


def test_bad_values_are_named_errors() -> None:
    good = encode_value(TxnLogValue(1, 0, 10, 1, (("t", (0,)),), 1, 1))
    for raw in (b"", b"\x00\x09" + good[2:], good[:-1], good + b"\x00"):
        with pytest.raises(TxnLogSchemaError):
            decode_value(raw)
