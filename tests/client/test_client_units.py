"""Unit and property tests of the client's pure parts: murmur2 partitioning, the
ConsumerProtocol bytes, the assignors and the error mapping. No broker needed."""

from __future__ import annotations

import random
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from kafka.protocol.old.consumer_protocol import (
    ConsumerProtocolMemberAssignment_v0,
    ConsumerProtocolMemberMetadata_v0,
)

from josefk.client import errors
from josefk.client.assignors import RangeAssignor, RoundRobinAssignor
from josefk.client.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from josefk.client.partitioner import DefaultPartitioner, murmur2, partition_for_key
from josefk.client.types import TopicPartition
from josefk.protocol import ErrorCode

# -------------------------------------------------------------------- murmur2


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    assert murmur2(key) & 0x7FFFFFFF == kafka_python_murmur2(key) & 0x7FFFFFFF


def test_murmur2_known_java_values() -> None:
    # Values of org.apache.kafka.common.utils.Utils.murmur2 quoted in Kafka's own tests
    # (as signed Java ints), reproduced here as facts about the function.
    known = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536}
    for key, java in known.items():
        assert murmur2(key) == java & 0xFFFFFFFF


@given(st.binary(min_size=1, max_size=32), st.integers(min_value=1, max_value=200))
def test_partition_for_key_is_stable_and_in_range(key: bytes, partitions: int) -> None:
    chosen = partition_for_key(key, partitions)
    assert 0 <= chosen < partitions
    assert chosen == (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions


def test_keyless_records_stick_until_a_batch_completes() -> None:
    partitioner = DefaultPartitioner(random.Random(7))
    parts = [0, 1, 2, 3]
    first = partitioner("t", None, parts, parts)
    assert all(partitioner("t", None, parts, parts) == first for _ in range(20))
    partitioner.batch_completed("t", first, parts)
    assert partitioner("t", None, parts, parts) != first


class _CountedPartitions(tuple[int, ...]):
    """A topic's partition ids that count how often they are walked."""

    walks = 0

    def __contains__(self, item: object) -> bool:
        type(self).walks += 1
        return super().__contains__(item)

    def __iter__(self) -> Iterator[int]:
        type(self).walks += 1
        return super().__iter__()


def test_the_sticky_choice_does_not_walk_the_partitions() -> None:
    """Thousands of partitions: a keyless send and a completed batch each cost the same as
    with four (before, every send checked the sticky partition against the whole list)."""
    parts = _CountedPartitions(range(10_000))
    partitioner = DefaultPartitioner(random.Random(3))
    chosen = set()
    for _ in range(50):
        current = partitioner("t", None, parts, parts)
        assert all(partitioner("t", None, parts, parts) == current for _ in range(10))
        partitioner.batch_completed("t", current, parts)
        chosen.add(current)
    assert _CountedPartitions.walks == 0
    assert len(chosen) > 40  # the choice moves on each completed batch
    # New metadata (another sequence): the sticky choice is checked against it.
    fewer = (0, 1)
    assert partitioner("t", None, fewer, fewer) in fewer


# -------------------------------------------------------------------- consumer protocol

topic_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-._0123456789", min_size=1, max_size=20)


@given(st.lists(topic_names, max_size=5), st.none() | st.binary(max_size=20))
def test_subscription_round_trip_and_kafka_python_reads_it(
    topics: list[str], user_data: bytes | None
) -> None:
    for version in (0, 1, 2, 3):
        sub = Subscription(
            topics,
            user_data,
            [TopicPartition("x", 1)] if version else [],
            5 if version >= 2 else -1,
            "r1" if version >= 3 else None,
            version,
        )
        assert decode_subscription(encode_subscription(sub)) == sub
    encoded = encode_subscription(Subscription(topics, user_data, version=0))
    theirs = ConsumerProtocolMemberMetadata_v0.decode(encoded)
    assert list(theirs.topics) == topics
    ours = decode_subscription(
        ConsumerProtocolMemberMetadata_v0(0, topics, user_data or b"").encode()
    )
    assert ours.topics == topics


@given(
    st.dictionaries(
        topic_names, st.lists(st.integers(0, 1000), unique=True, max_size=8), max_size=4
    )
)
def test_assignment_round_trip_and_kafka_python_reads_it(layout: dict[str, list[int]]) -> None:
    partitions = sorted(TopicPartition(t, p) for t, ps in layout.items() for p in ps)
    encoded = encode_assignment(Assignment(partitions, b"u"))
    decoded = decode_assignment(encoded)
    assert sorted(decoded.partitions) == partitions and decoded.user_data == b"u"
    theirs = ConsumerProtocolMemberAssignment_v0.decode(encoded)
    assert sorted((tp.topic, tp.partition) for tp in theirs.partitions()) == partitions
    back = decode_assignment(
        ConsumerProtocolMemberAssignment_v0(
            0, sorted((t, sorted(ps)) for t, ps in layout.items()), b""
        ).encode()
    )
    assert sorted(back.partitions) == partitions


def test_empty_assignment_bytes_mean_no_partitions() -> None:
    assert decode_assignment(b"").partitions == []


# -------------------------------------------------------------------- assignors

members_strategy = st.dictionaries(
    st.text(alphabet="abcdef0123", min_size=1, max_size=6),
    st.lists(st.sampled_from(["t1", "t2", "t3"]), min_size=1, unique=True),
    min_size=1,
    max_size=6,
)
counts_strategy = st.fixed_dictionaries(
    {"t1": st.integers(0, 12), "t2": st.integers(0, 12), "t3": st.integers(0, 12)}
)


@given(members_strategy, counts_strategy)
def test_assignors_hand_out_each_subscribed_partition_once(
    members: dict[str, list[str]], counts: dict[str, int]
) -> None:
    for assignor in (RangeAssignor(), RoundRobinAssignor()):
        plan = assignor.assign(counts, members)
        assert set(plan) == set(members)
        handed = [tp for parts in plan.values() for tp in parts]
        assert len(handed) == len(set(handed))
        wanted = {
            TopicPartition(t, p) for ts in members.values() for t in ts for p in range(counts[t])
        }
        assert set(handed) == wanted
        for member, parts in plan.items():
            assert all(tp.topic in members[member] for tp in parts)


def test_range_assignor_as_kafka_describes_it() -> None:
    # Two members, two topics of three partitions: C0 gets t0p0, t0p1, t1p0, t1p1.
    plan = RangeAssignor().assign({"t0": 3, "t1": 3}, {"C0": ["t0", "t1"], "C1": ["t0", "t1"]})
    assert plan["C0"] == [
        TopicPartition("t0", 0),
        TopicPartition("t0", 1),
        TopicPartition("t1", 0),
        TopicPartition("t1", 1),
    ]
    assert plan["C1"] == [TopicPartition("t0", 2), TopicPartition("t1", 2)]


def test_roundrobin_assignor_as_kafka_describes_it() -> None:
    plan = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, {"C0": ["t0", "t1"], "C1": ["t0", "t1"]})
    assert plan["C0"] == [TopicPartition("t0", 0), TopicPartition("t0", 2), TopicPartition("t1", 1)]
    assert plan["C1"] == [TopicPartition("t0", 1), TopicPartition("t1", 0), TopicPartition("t1", 2)]


# -------------------------------------------------------------------- errors


def test_every_error_code_has_a_typed_exception() -> None:
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        err = errors.error_for(code.value, topic="t")
        assert isinstance(err, errors.KafkaError)
        assert (err.code, err.name, err.retriable) == (code.value, code.name, code.retriable)
        assert code.name in str(err)
    assert isinstance(errors.error_for(3), errors.UnknownTopicOrPartitionError)
    assert errors.NotLeaderOrFollowerError.retriable
    assert not errors.TopicAlreadyExistsError.retriable
    assert errors.error_for(32767).code == -1
    errors.raise_for(0)
