"""Kafka's __consumer_offsets records of consumer groups (types 3, 5-8) round-trip, and the
loader skips what it cannot read."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.broker.group.consumer_records import (
    ConsumerKey,
    ConsumerRecordError,
    CurrentAssignmentValue,
    MemberMetadataValue,
    decode_current_assignment,
    decode_epoch,
    decode_key,
    decode_member_metadata,
    decode_target_member,
    encode_current_assignment,
    encode_epoch,
    encode_key,
    encode_member_metadata,
    encode_target_member,
)

names = st.text(max_size=20)
maybe = st.none() | names
parts = st.dictionaries(
    st.uuids(), st.frozensets(st.integers(0, 2**31 - 1), max_size=5), max_size=4
)


@given(st.sampled_from([3, 6]), names)
def test_group_keys(kind: int, group: str) -> None:
    assert decode_key(encode_key(ConsumerKey(kind, group))) == ConsumerKey(kind, group)


@given(st.sampled_from([5, 7, 8]), names, names)
def test_member_keys(kind: int, group: str, member: str) -> None:
    key = ConsumerKey(kind, group, member)
    assert decode_key(encode_key(key)) == key


@given(st.integers(-(2**31), 2**31 - 1))
def test_epochs(epoch: int) -> None:
    assert decode_epoch(encode_epoch(epoch)) == epoch


member_metadata = st.builds(
    MemberMetadataValue,
    maybe,
    maybe,
    names,
    names,
    st.lists(names, max_size=4).map(tuple),
    maybe,
    st.integers(-1, 10**6),
    maybe,
)


@given(member_metadata)
def test_member_metadata(value: MemberMetadataValue) -> None:
    assert decode_member_metadata(encode_member_metadata(value)) == value


@given(parts)
def test_target_member(assignment: dict[uuid.UUID, frozenset[int]]) -> None:
    assert decode_target_member(encode_target_member(assignment)) == assignment


@given(st.integers(-2, 1000), st.integers(-2, 1000), st.sampled_from([1, 2, 3]), parts, parts)
def test_current_assignment(
    epoch: int,
    previous: int,
    state: int,
    assigned: dict[uuid.UUID, frozenset[int]],
    revoking: dict[uuid.UUID, frozenset[int]],
) -> None:
    value = CurrentAssignmentValue(epoch, previous, state, assigned, revoking)
    assert decode_current_assignment(encode_current_assignment(value)) == value


def test_truncated_and_unknown_records_are_refused() -> None:
    with pytest.raises(ConsumerRecordError):
        decode_current_assignment(
            encode_current_assignment(
                CurrentAssignmentValue(1, 0, 1, {uuid.uuid4(): frozenset({1})}, {})
            )[:-6]
        )
    with pytest.raises(ConsumerRecordError):
        decode_epoch(b"\x00\x01\x00\x00\x00\x01\x00")  # value version 1
    with pytest.raises(ConsumerRecordError):
        decode_key(encode_key(ConsumerKey(3, "g")) + b"x")
