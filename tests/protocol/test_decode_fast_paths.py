"""The generated decoders' fast paths agree with their general code.

Decoders read a length prefix together with the fixed fields before it and take a short path
for the common shapes (one- or two-byte compact lengths, int arrays of up to 31 elements);
everything else goes through the general code. These tests sit on the boundaries: sizes on
either side of each threshold, lengths written in longer (non-canonical) varints than needed,
unknown tagged fields where a fixed run has read the tagged-field count ahead, truncations and
lengths that claim more bytes than are left.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from josefk.protocol import api
from josefk.protocol.compiler import compile_message, translate_decode_error
from josefk.protocol.errors import BufferUnderflow, ProtocolDecodeError, UnexpectedNull
from tests.protocol import fuzzing
from tests.protocol.strategies import random_message

PRODUCE = api.request_message(api.ApiKey.PRODUCE)
METADATA = api.response_message(api.ApiKey.METADATA)
PRODUCE_CLS = api.request_class(api.ApiKey.PRODUCE)
METADATA_CLS = api.response_class(api.ApiKey.METADATA)


def _uvarint(value: int, width: int = 0) -> bytes:
    """``value`` as an unsigned varint, padded with continuation bytes to ``width`` bytes."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value or len(out) + 1 < width:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _produce(records: bytes | None, name: str = "orders") -> Any:
    return PRODUCE_CLS(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            PRODUCE_CLS.TopicProduceData(
                name=name,
                partition_data=[PRODUCE_CLS.PartitionProduceData(index=3, records=records)],
            )
        ],
    )


def _produce_v9_by_hand(records: bytes | None, width: int, name: bytes = b"\x07orders") -> bytes:
    """A Produce v9 body with the records length written as a ``width``-byte varint."""
    length = 0 if records is None else len(records) + 1
    return b"".join(
        [
            b"\x00",  # transactional_id: null
            b"\xff\xff\x00\x00\x03\xe8",  # acks -1, timeout_ms 1000
            b"\x02",  # one topic
            name,
            b"\x02",  # one partition
            b"\x00\x00\x00\x03",  # index 3
            _uvarint(length, width),
            records or b"",
            b"\x00",  # partition tagged fields
            b"\x00",  # topic tagged fields
            b"\x00",  # request tagged fields
        ]
    )


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 128, 129, 1024, 16382, 16383, 16384, 20000])
@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_records_of_every_length_class_round_trip(size: int, version: int) -> None:
    value = _produce(bytes(range(256)) * (size // 256) + bytes(size % 256))
    decoded = PRODUCE.decode(PRODUCE.encode(value, version), version)
    assert decoded == _produce(value.topic_data[0].partition_data[0].records)
    assert bytes(decoded.topic_data[0].partition_data[0].records) == bytes(
        value.topic_data[0].partition_data[0].records
    )


@pytest.mark.parametrize("version", [3, 9])
def test_null_records_round_trip(version: int) -> None:
    decoded = PRODUCE.decode(PRODUCE.encode(_produce(None), version), version)
    assert decoded.topic_data[0].partition_data[0].records is None


@pytest.mark.parametrize("length", [0, 1, 126, 127, 128, 300])
def test_topic_names_of_every_length_class_round_trip(length: int) -> None:
    name = "n" * length
    for version in (3, 9):
        decoded = PRODUCE.decode(PRODUCE.encode(_produce(b"r", name), version), version)
        assert decoded.topic_data[0].name == name


@pytest.mark.parametrize("size", [0, 1, 126, 127, 200])
@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_non_canonical_record_lengths_decode_the_same(size: int, width: int) -> None:
    records = bytes([7]) * size
    body = _produce_v9_by_hand(records, width)
    if width == 1 and size + 1 >= 0x80:
        width = 2  # cannot be written shorter than canonical
        body = _produce_v9_by_hand(records, width)
    decoded = PRODUCE.decode(body, 9)
    assert decoded == _produce(records)
    assert bytes(decoded.topic_data[0].partition_data[0].records) == records


@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_null_records_in_a_padded_varint_are_null(width: int) -> None:
    decoded = PRODUCE.decode(_produce_v9_by_hand(None, width), 9)
    assert decoded == _produce(None)


@pytest.mark.parametrize("width", [1, 2, 3])
def test_null_topic_name_in_a_padded_varint_is_rejected(width: int) -> None:
    with pytest.raises(UnexpectedNull):
        PRODUCE.decode(_produce_v9_by_hand(b"r", 1, name=_uvarint(0, width)), 9)


@pytest.mark.parametrize("width", [2, 3])
def test_null_host_after_a_fixed_run_in_a_padded_varint_is_rejected(width: int) -> None:
    value = METADATA_CLS(
        brokers=[METADATA_CLS.MetadataResponseBroker(node_id=1, host="h", port=9092)]
    )
    body = METADATA.encode(value, 12)
    # node_id (int32) is read together with the host's first two length bytes.
    host_at = body.index(b"\x00\x00\x00\x01\x02h") + 4
    padded = body[:host_at] + _uvarint(0, width) + body[host_at + 2 :]
    with pytest.raises(UnexpectedNull):
        METADATA.decode(padded, 12)
    empty = body[:host_at] + _uvarint(1, width) + body[host_at + 2 :]
    assert METADATA.decode(empty, 12).brokers[0].host == ""


@pytest.mark.parametrize("size", [50, 200, 1000, 20000])
def test_records_claiming_more_than_is_left_underflow(size: int) -> None:
    body = _produce_v9_by_hand(bytes(size), 0)
    cut = body[: len(body) - 3 - size // 2]
    with pytest.raises(BufferUnderflow, match=f"records: {size} bytes claimed"):
        PRODUCE.decode(cut, 9)


def _metadata(counts: tuple[int, int, int]) -> Any:
    replicas, isr, offline = counts
    return METADATA_CLS(
        brokers=[METADATA_CLS.MetadataResponseBroker(node_id=1, host="h", port=9092)],
        cluster_id="c",
        topics=[
            METADATA_CLS.MetadataResponseTopic(
                name="t",
                partitions=[
                    METADATA_CLS.MetadataResponsePartition(
                        partition_index=p,
                        leader_id=1,
                        replica_nodes=list(range(replicas)),
                        isr_nodes=list(range(100, 100 + isr)),
                        offline_replicas=list(range(-offline, 0)),
                    )
                    for p in range(2)
                ],
                topic_authorized_operations=77,
            )
        ],
    )


@pytest.mark.parametrize(
    "counts", [(0, 0, 0), (1, 1, 1), (3, 2, 0), (30, 31, 32), (31, 32, 33), (200, 0, 127)]
)
@pytest.mark.parametrize("version", [1, 9, 12, 13])
def test_int_arrays_on_either_side_of_the_fast_path_round_trip(
    counts: tuple[int, int, int], version: int
) -> None:
    value = _metadata(counts)
    decoded = METADATA.decode(METADATA.encode(value, version), version)
    partition = decoded.topics[0].partitions[1]
    assert partition.replica_nodes == value.topics[0].partitions[1].replica_nodes
    assert partition.isr_nodes == value.topics[0].partitions[1].isr_nodes
    if version >= 5:
        assert partition.offline_replicas == value.topics[0].partitions[1].offline_replicas
        assert decoded == value


def test_int_array_count_in_a_longer_varint_decodes_the_same() -> None:
    value = _metadata((2, 1, 0))
    body = METADATA.encode(value, 12)
    # The first partition's replica count (3 = two elements) follows its 14 fixed bytes.
    start = body.index(bytes.fromhex("00000000000000000001ffffffff"))
    count_at = start + 14
    assert body[count_at] == 3
    padded = body[:count_at] + _uvarint(3, 3) + body[count_at + 1 :]
    assert METADATA.decode(padded, 12) == value


def test_unknown_tagged_field_after_a_fixed_run_is_skipped() -> None:
    value = _metadata((1, 1, 0))
    body = METADATA.encode(value, 12)
    # The topic ends with topic_authorized_operations (int32) and its tagged-field count,
    # read ahead with it; then come the response's own tagged fields.
    assert body[-6:] == b"\x00\x00\x00\x4d\x00\x00"
    with_tag = body[:-2] + b"\x01" + _uvarint(9) + _uvarint(3) + b"abc" + b"\x00"
    assert METADATA.decode(with_tag, 12) == value
    claims_too_much = body[:-2] + b"\x01" + _uvarint(9) + _uvarint(30) + b"abc" + b"\x00"
    with pytest.raises(BufferUnderflow):
        METADATA.decode(claims_too_much, 12)


@pytest.mark.parametrize(
    ("message", "value", "version"),
    [
        (PRODUCE, _produce(bytes(300)), 9),
        (PRODUCE, _produce(b"x" * 5), 9),
        (PRODUCE, _produce(bytes(300)), 3),
        (METADATA, _metadata((3, 3, 1)), 12),
        (METADATA, _metadata((40, 1, 0)), 12),
        (METADATA, _metadata((3, 3, 1)), 4),
    ],
)
def test_every_truncation_is_a_codec_error(message: Any, value: Any, version: int) -> None:
    body = message.encode(value, version)
    for end in range(len(body)):
        try:
            message.decode(body[:end], version)
        except ProtocolDecodeError:
            continue
        # Trailing optional parts can make a prefix a valid message of its own; it must
        # then decode to something, never raise anything else.


def _outcome(decoder: Any, data: bytes) -> tuple[str, Any]:
    try:
        return ("ok", decoder(memoryview(data), 0)[0])
    except ProtocolDecodeError:
        return ("error", None)
    except Exception as exc:  # noqa: BLE001  the outcome under test, translated as decode_from does
        return ("error", translate_decode_error(exc))


@pytest.mark.parametrize(
    ("spec", "version"),
    [
        pytest.param(spec, version, id=f"{spec.class_name}-v{version}")
        for spec, version in [
            (PRODUCE.spec, 9),
            (PRODUCE.spec, 3),
            (METADATA.spec, 12),
            (METADATA.spec, 4),
            (api.response_message(api.ApiKey.FETCH).spec, 16),
            (api.request_message(api.ApiKey.FETCH).spec, 15),
            (api.response_message(api.ApiKey.API_VERSIONS).spec, 3),
            (api.response_message(api.ApiKey.DESCRIBE_LOG_DIRS).spec, 4),
        ]
    ],
)
def test_decoder_agrees_with_the_plain_decoder_on_mutated_bodies(spec: Any, version: int) -> None:
    """Differential: whatever the bytes, the decoder with read-ahead and fast paths accepts
    exactly what the general code alone accepts, with equal values. (Which typed error a
    broken body gets may differ: a read-ahead can find the end of a truncated body first.)"""
    message = compile_message(spec)
    fast, plain = message.decoder(version), message.plain_decoder(version)
    rng = random.Random(f"{spec.class_name}-{version}")
    corpus = fuzzing.Corpus()
    bodies = [message.encode(random_message(spec, version, rng), version) for _ in range(8)]
    corpus.frames.extend((body, spec.api_key, version, True) for body in bodies)
    for _ in range(3000):
        body = fuzzing.mutate(rng.choice(bodies), rng, corpus)
        if body and rng.random() < 0.5:
            # A small length re-written as a padded varint: the fast paths' boundary.
            at = rng.randrange(len(body))
            padded = _uvarint(rng.choice([0, 1, 2, 127, 128]), rng.choice([2, 3]))
            body = body[:at] + padded + body[at + 1 :]
        expected = _outcome(plain, body)
        got = _outcome(fast, body)
        assert got[0] == expected[0], body.hex()
        assert got[1] == expected[1] or expected[0] == "error", body.hex()
