"""Decoded messages are ordinary instances of the public frozen, slotted dataclasses.

The generated decoders build each struct as a private mutable twin class and then switch the
instance's class (see ``josefk.protocol.compiler._builder_class``). These tests pin down that
nothing of that shows: a decoded object and one built through the dataclass constructor are
indistinguishable in type, equality, hashing, repr, the ``dataclasses`` helpers, pickling,
copying and frozen-ness.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import uuid
from typing import Any

import pytest

from josefk.protocol import api

METADATA_V = 12


def _metadata_response() -> Any:
    cls = api.response_class(api.ApiKey.METADATA)
    return cls(
        throttle_time_ms=3,
        brokers=[
            cls.MetadataResponseBroker(node_id=n, host=f"broker-{n}", port=9092, rack=None)
            for n in range(2)
        ],
        cluster_id="cluster",
        controller_id=1,
        topics=[
            cls.MetadataResponseTopic(
                name="orders",
                topic_id=uuid.UUID(int=42),
                partitions=[
                    cls.MetadataResponsePartition(
                        partition_index=p,
                        leader_id=p % 2,
                        leader_epoch=7,
                        replica_nodes=[0, 1],
                        isr_nodes=[1],
                        offline_replicas=[],
                    )
                    for p in range(3)
                ],
            )
        ],
    )


def _round_trip(value: Any) -> Any:
    message = api.response_message(api.ApiKey.METADATA)
    return message.decode(message.encode(value, METADATA_V), METADATA_V)


def _pairs() -> list[tuple[Any, Any]]:
    """(built by the constructor, decoded) for the message and each kind of nested struct."""
    built = _metadata_response()
    decoded = _round_trip(built)
    return [
        (built, decoded),
        (built.brokers[0], decoded.brokers[0]),
        (built.topics[0], decoded.topics[0]),
        (built.topics[0].partitions[1], decoded.topics[0].partitions[1]),
    ]


@pytest.mark.parametrize("index", range(4))
def test_decoded_struct_has_the_public_type_and_compares_equal(index: int) -> None:
    built, decoded = _pairs()[index]
    assert type(decoded) is type(built)
    assert isinstance(decoded, type(built))
    assert decoded == built
    assert not decoded.__ne__(built)
    assert repr(decoded) == repr(built)
    assert "Builder" not in repr(decoded)
    assert [f.name for f in dataclasses.fields(decoded)] == [
        f.name for f in dataclasses.fields(built)
    ]
    assert dataclasses.asdict(decoded) == dataclasses.asdict(built)
    assert dataclasses.astuple(decoded) == dataclasses.astuple(built)
    assert not hasattr(decoded, "__dict__")
    assert type(decoded).__slots__ == type(built).__slots__


def _outcome(action: Any, *args: Any) -> tuple[str, str]:
    """What ``action(*args)`` does: ("ok", repr of result) or (exception type, message)."""
    try:
        return ("ok", repr(action(*args)))
    except Exception as exc:  # noqa: BLE001  the outcome under test
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("index", range(4))
def test_decoded_struct_is_frozen(index: int) -> None:
    built, decoded = _pairs()[index]
    name = dataclasses.fields(decoded)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(decoded, name, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(decoded, name)
    # A name that is not a field fails exactly as on a constructed instance.
    assert _outcome(lambda: setattr(decoded, "not_a_field", 1)) == _outcome(
        lambda: setattr(built, "not_a_field", 1)
    )
    assert getattr(decoded, name) == getattr(built, name)


def _pickle_round_trip(value: Any, protocol: int) -> Any:
    return pickle.loads(pickle.dumps(value, protocol))


@pytest.mark.parametrize("index", range(4))
def test_decoded_struct_pickles_copies_and_replaces_like_a_built_one(index: int) -> None:
    built, decoded = _pairs()[index]
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        # Whatever pickling does with a constructed instance, it does with a decoded one.
        expected = _outcome(_pickle_round_trip, built, protocol)
        assert _outcome(_pickle_round_trip, decoded, protocol) == expected
    assert copy.copy(decoded) == built
    assert type(copy.copy(decoded)) is type(built)
    assert copy.deepcopy(decoded) == built
    name = dataclasses.fields(decoded)[-1].name
    replaced = dataclasses.replace(decoded, **{name: getattr(built, name)})
    assert type(replaced) is type(built) and replaced == built


def test_hash_of_a_decoded_struct_matches_a_built_one() -> None:
    built, decoded = _pairs()[1]  # a broker: ints and strings only, so hashable
    assert hash(decoded) == hash(built)
    assert {decoded: 1}[built] == 1
    _, topic = _pairs()[2]
    with pytest.raises(TypeError):
        hash(topic)  # holds a list, exactly as a built one does
    with pytest.raises(TypeError):
        hash(_pairs()[2][0])


def test_decoded_fields_absent_from_the_version_take_their_defaults() -> None:
    cls = api.response_class(api.ApiKey.METADATA)
    message = api.response_message(api.ApiKey.METADATA)
    value = cls(brokers=[cls.MetadataResponseBroker(node_id=1, host="h", port=1)])
    decoded = message.decode(message.encode(value, 0), 0)
    assert decoded == value
    assert decoded.cluster_id is None and decoded.throttle_time_ms == 0
    assert type(decoded.brokers[0]) is cls.MetadataResponseBroker


def test_decoded_request_types_are_the_public_classes() -> None:
    cls = api.request_class(api.ApiKey.PRODUCE)
    message = api.request_message(api.ApiKey.PRODUCE)
    value = cls(
        acks=-1,
        timeout_ms=100,
        topic_data=[
            cls.TopicProduceData(
                name="t", partition_data=[cls.PartitionProduceData(index=0, records=b"x")]
            )
        ],
    )
    for version in (3, 9):
        decoded = message.decode(message.encode(value, version), version)
        partition = decoded.topic_data[0].partition_data[0]
        assert type(decoded) is cls
        assert type(partition) is cls.PartitionProduceData
        assert bytes(partition.records) == b"x"
        with pytest.raises(dataclasses.FrozenInstanceError):
            partition.index = 1  # type: ignore[misc]
