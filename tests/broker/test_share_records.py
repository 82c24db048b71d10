"""The share group records in __consumer_offsets, byte for byte as Kafka 4.1's message specs
lay them out (key: int16 record type, int16-length strings; value: int16 version 0, then a
flexible struct with compact strings and arrays and empty tagged-field sections), written
out by hand here from the specs' field order; and the loader's reading of them (Kafka 4.0's
ShareGroupPartitionMetadata, type 9, is skipped)."""

from __future__ import annotations

import uuid

from josefk.broker.group.consumer_records import decode_target_member, encode_epoch
from josefk.broker.group.consumer_records import encode_target_member as encode_target
from josefk.broker.group.loader import read_groups
from josefk.broker.group.offsets_schema import coordinator_partition
from josefk.broker.group.share_records import (
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_PARTITION_METADATA,
    SHARE_GROUP_STATE_PARTITION_METADATA,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    ShareCurrentAssignment,
    ShareGroupMetadataValue,
    ShareKey,
    ShareMemberMetadata,
    StatePartitionMetadata,
    decode_current_assignment,
    decode_group_metadata,
    decode_key,
    decode_member_metadata,
    decode_state_partition_metadata,
    encode_current_assignment,
    encode_group_metadata,
    encode_key,
    encode_member_metadata,
    encode_state_partition_metadata,
)
from josefk.broker.group.store import MemoryOffsetsStore

TOPIC = uuid.UUID(int=1)
V0 = bytes.fromhex("0000")  # the value's version
NO_TAGS = b"\x00"


def test_keys() -> None:
    assert encode_key(ShareKey(SHARE_GROUP_METADATA, "g")) == bytes.fromhex("000b 0001 67")
    for kind in (10, 13, 14):
        raw = encode_key(ShareKey(kind, "g", "m"))
        assert raw == bytes([0, kind]) + bytes.fromhex("0001 67 0001 6d")
        assert decode_key(raw) == ShareKey(kind, "g", "m")
    for kind in (11, 12, 15):
        assert decode_key(encode_key(ShareKey(kind, "gg"))) == ShareKey(kind, "gg")


def test_group_metadata_is_epoch_then_metadata_hash() -> None:
    raw = encode_group_metadata(ShareGroupMetadataValue(5, 7))
    assert raw == V0 + bytes.fromhex("00000005 0000000000000007") + NO_TAGS
    assert decode_group_metadata(raw) == ShareGroupMetadataValue(5, 7)


def test_member_metadata() -> None:
    value = ShareMemberMetadata(None, "c", "h", ("t", "u"))
    raw = encode_member_metadata(value)
    # rack id null, client id, client host, subscribed topic names: no rebalance timeout,
    # no instance id (a share member has neither).
    assert raw == V0 + bytes.fromhex("00 0263 0268 03 0274 0275") + NO_TAGS
    assert decode_member_metadata(raw) == value


def test_assignments_and_epochs() -> None:
    topic = TOPIC.bytes.hex()
    raw = encode_current_assignment(ShareCurrentAssignment(4, 1, 1, {TOPIC: frozenset({0, 2})}))
    # member epoch, previous member epoch, state (int8), assigned partitions: no
    # partitions pending revocation (a share member never revokes).
    expected = "00000004 00000001 01 02" + topic + "03 00000000 00000002 00"
    assert raw == V0 + bytes.fromhex(expected) + NO_TAGS
    assert decode_current_assignment(raw).assigned == {TOPIC: frozenset({0, 2})}
    target = encode_target({TOPIC: frozenset({1})})
    assert target == V0 + bytes.fromhex("02" + topic + "02 00000001 00") + NO_TAGS
    assert decode_target_member(target) == {TOPIC: frozenset({1})}
    assert encode_epoch(4) == V0 + bytes.fromhex("00000004") + NO_TAGS


def test_state_partition_metadata_is_initializing_initialized_deleting() -> None:
    value = StatePartitionMetadata(
        initializing={},
        initialized={TOPIC: ("t", frozenset({0, 1}))},
        deleting={uuid.UUID(int=2): "d"},
    )
    raw = encode_state_partition_metadata(value)
    expected = (
        "01"  # initializing: empty
        + "02"
        + TOPIC.bytes.hex()
        + "0274 03 00000000 00000001 00"  # name, partitions, tags
        + "02"
        + uuid.UUID(int=2).bytes.hex()
        + "0264 00"  # deleting: id, name, tags
    )
    assert raw == V0 + bytes.fromhex(expected) + NO_TAGS
    assert decode_state_partition_metadata(raw) == value


def test_the_loader_reads_share_groups_and_skips_kafka_40s_partition_metadata() -> None:
    store = MemoryOffsetsStore(4)
    partition = coordinator_partition("g", 4)
    records: list[tuple[bytes, bytes | None]] = [
        # Kafka 4.0's subscription metadata: whatever its value, 4.1 has no such record.
        (encode_key(ShareKey(SHARE_GROUP_PARTITION_METADATA, "g")), b"\x00\x00junk"),
        (
            encode_key(ShareKey(SHARE_GROUP_MEMBER_METADATA, "g", "m")),
            encode_member_metadata(ShareMemberMetadata("r", "c", "h", ("t",))),
        ),
        (
            encode_key(ShareKey(SHARE_GROUP_METADATA, "g")),
            encode_group_metadata(ShareGroupMetadataValue(3)),
        ),
        (
            encode_key(ShareKey(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, "g", "m")),
            encode_target({TOPIC: frozenset({0})}),
        ),
        (encode_key(ShareKey(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, "g")), encode_epoch(3)),
        (
            encode_key(ShareKey(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m")),
            encode_current_assignment(ShareCurrentAssignment(3, 2, 1, {TOPIC: frozenset({0})})),
        ),
        (
            encode_key(ShareKey(SHARE_GROUP_STATE_PARTITION_METADATA, "g")),
            encode_state_partition_metadata(
                StatePartitionMetadata(initialized={TOPIC: ("t", frozenset({0}))})
            ),
        ),
    ]
    store.append(partition, records, 0)
    loaded = read_groups(store, [partition])["g"].share
    assert loaded is not None
    assert (loaded.epoch, loaded.assignment_epoch) == (3, 3)
    assert loaded.members["m"].rack_id == "r"
    assert loaded.targets == {"m": {TOPIC: frozenset({0})}}
    assert loaded.current["m"].previous_member_epoch == 2
    assert loaded.state_partitions.initialized == {TOPIC: ("t", frozenset({0}))}
    # A tombstone of the group's epoch record deletes the group.
    store.append(partition, [(encode_key(ShareKey(SHARE_GROUP_METADATA, "g")), None)], 0)
    assert "g" not in read_groups(store, [partition])
