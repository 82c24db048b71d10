"""The ``__consumer_offsets`` key/value formats: golden bytes worked out from Kafka's schemas,
round trips of every version, and the coordinator partition of a group id."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.broker.group.assignment import (
    SubscriptionFormatError,
    encode_subscription,
    subscribed_topics,
)
from josefk.broker.group.offsets_schema import (
    GroupKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitValue,
    OffsetKey,
    OffsetsSchemaError,
    coordinator_partition,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)


def s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


# -- golden bytes ------------------------------------------------------------------------


def test_offset_key_bytes() -> None:
    # version 1, "g", "t", partition 3
    expected = b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert encode_offset_key(OffsetKey("g", "t", 3)) == expected
    assert decode_key(expected) == OffsetKey("g", "t", 3)
    # version 0 has the same layout
    assert decode_key(b"\x00\x00" + expected[2:]) == OffsetKey("g", "t", 3)


def test_group_key_bytes() -> None:
    expected = b"\x00\x02" + b"\x00\x05group"
    assert encode_group_key(GroupKey("group")) == expected
    assert decode_key(expected) == GroupKey("group")


def test_offset_value_v3_bytes() -> None:
    value = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=5)
    expected = (
        b"\x00\x03"
        + struct.pack(">q", 42)
        + struct.pack(">i", 5)
        + b"\x00\x01m"
        + struct.pack(">q", 1000)
    )
    assert encode_offset_value(value) == expected
    assert decode_offset_value(expected) == value


def test_offset_value_with_expiry_is_v1() -> None:
    value = OffsetCommitValue(42, "", 1000, -1, expire_timestamp=2000)
    expected = (
        b"\x00\x01"
        + struct.pack(">q", 42)
        + b"\x00\x00"
        + struct.pack(">q", 1000)
        + struct.pack(">q", 2000)
    )
    assert encode_offset_value(value) == expected
    assert decode_offset_value(expected) == value


def test_offset_value_v0_and_v2() -> None:
    body = struct.pack(">q", 7) + s("x") + struct.pack(">q", 9)
    for version in (0, 2):
        assert decode_offset_value(struct.pack(">h", version) + body) == OffsetCommitValue(
            7, "x", 9
        )


MEMBER = MemberRecord(
    member_id="m-1",
    group_instance_id="i",
    client_id="c",
    client_host="/127.0.0.1",
    rebalance_timeout_ms=300_000,
    session_timeout_ms=45_000,
    subscription=b"\x01\x02",
    assignment=b"\x03",
)


def test_group_value_v3_bytes() -> None:
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=4,
        protocol="range",
        leader="m-1",
        current_state_timestamp=123,
        members=(MEMBER,),
    )
    expected = (
        b"\x00\x03"
        + s("consumer")
        + struct.pack(">i", 4)
        + s("range")
        + s("m-1")
        + struct.pack(">q", 123)
        + struct.pack(">i", 1)
        + s("m-1")
        + s("i")
        + s("c")
        + s("/127.0.0.1")
        + struct.pack(">i", 300_000)
        + struct.pack(">i", 45_000)
        + struct.pack(">i", 2)
        + b"\x01\x02"
        + struct.pack(">i", 1)
        + b"\x03"
    )
    assert encode_group_value(value) == expected
    assert decode_group_value(expected) == value


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("consumer", 2, None, None, 5, ())
    expected = (
        b"\x00\x03"
        + s("consumer")
        + struct.pack(">i", 2)
        + b"\xff\xff\xff\xff"
        + struct.pack(">q", 5)
        + struct.pack(">i", 0)
    )
    assert encode_group_value(value) == expected
    assert decode_group_value(expected) == value


def test_group_value_v0_member_has_no_rebalance_timeout() -> None:
    raw = (
        b"\x00\x00"
        + s("consumer")
        + struct.pack(">i", 1)
        + s("range")
        + s("m")
        + struct.pack(">i", 1)
        + s("m")
        + s("c")
        + s("h")
        + struct.pack(">i", 10_000)
        + struct.pack(">i", 0)
        + struct.pack(">i", 0)
    )
    [member] = decode_group_value(raw).members
    assert member.session_timeout_ms == member.rebalance_timeout_ms == 10_000
    assert member.group_instance_id is None


@pytest.mark.parametrize(
    "raw",
    [b"", b"\x00", b"\x00\x07" + s("g"), b"\x00\x01\x00\x05ab", b"\x00\x02\xff\xff"],
)
def test_bad_keys(raw: bytes) -> None:
    with pytest.raises(OffsetsSchemaError):
        decode_key(raw)


# -- round trips -------------------------------------------------------------------------

names = st.text(max_size=20)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@given(names, names, int32)
def test_offset_key_round_trip(group: str, topic: str, partition: int) -> None:
    key = OffsetKey(group, topic, partition)
    assert decode_key(encode_offset_key(key)) == key


@given(int64, names, int64, int32, st.one_of(st.none(), st.integers(0, 2**63 - 1)))
def test_offset_value_round_trip(
    offset: int, metadata: str, timestamp: int, epoch: int, expire: int | None
) -> None:
    value = OffsetCommitValue(offset, metadata, timestamp, epoch if expire is None else -1, expire)
    assert decode_offset_value(encode_offset_value(value)) == value


members = st.builds(
    MemberRecord,
    member_id=names,
    group_instance_id=st.one_of(st.none(), names),
    client_id=names,
    client_host=names,
    rebalance_timeout_ms=int32,
    session_timeout_ms=int32,
    subscription=st.binary(max_size=40),
    assignment=st.binary(max_size=40),
)


@given(
    names,
    int32,
    st.one_of(st.none(), names),
    st.one_of(st.none(), names),
    int64,
    st.lists(members, max_size=4),
)
def test_group_value_round_trip(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    timestamp: int,
    member_list: list[MemberRecord],
) -> None:
    value = GroupMetadataValue(
        protocol_type, generation, protocol, leader, timestamp, tuple(member_list)
    )
    assert decode_group_value(encode_group_value(value)) == value


# -- coordinator partition ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "partitions", "expected"),
    [
        ("", 50, 0),
        # "hello".hashCode() == 99162322 in Java
        ("hello", 50, 99162322 % 50),
        ("hello", 2**31 - 1, 99162322),
        # "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs maps it to 0
        ("polygenelubricants", 50, 0),
        # "Aa" and "BB" collide in Java (2112)
        ("Aa", 50, 2112 % 50),
        ("BB", 50, 2112 % 50),
    ],
)
def test_coordinator_partition_matches_java(group: str, partitions: int, expected: int) -> None:
    assert coordinator_partition(group, partitions) == expected


def test_coordinator_partition_counts_utf16_units() -> None:
    # U+1F600 is two UTF-16 code units (0xD83D, 0xDE00): 31 * 0xD83D + 0xDE00
    assert coordinator_partition("\U0001f600", 2**31 - 1) == 31 * 0xD83D + 0xDE00


@given(st.text(max_size=30))
def test_coordinator_partition_in_range(group: str) -> None:
    assert 0 <= coordinator_partition(group, 50) < 50


# -- consumer subscription ------------------------------------------------------------------


@given(st.lists(st.text(min_size=1, max_size=10), max_size=5), st.one_of(st.none(), st.binary()))
def test_subscription_topics(topics: list[str], user_data: bytes | None) -> None:
    assert subscribed_topics(encode_subscription(topics, user_data)) == topics


def test_subscription_garbage() -> None:
    with pytest.raises(SubscriptionFormatError):
        subscribed_topics(b"\x00\x00\x00\x00\x00\x02\x00\x09ab")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_topics_of_kafka_python_subscriptions(version: int) -> None:
    """kafka-python 3.x encodes ConsumerProtocolSubscription from Kafka's own schema."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    subscription = ConsumerProtocolSubscription(
        topics=["orders", "payments"],
        user_data=b"\x00\x01",
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic="orders", partitions=[2])
        ],
        generation_id=4,
        rack_id="rack-a",
        version=version,
    )
    encoded = bytes(subscription.encode(version=version))
    assert subscribed_topics(encoded) == ["orders", "payments"]
    if version == 0:
        assert encoded == encode_subscription(["orders", "payments"], b"\x00\x01")
