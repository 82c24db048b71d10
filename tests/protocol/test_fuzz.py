"""Hostile input: decoding never raises anything but the codec's own errors.

* random bytes and mutated valid bodies for every (API, version, request/response);
* a mutation loop over golden and generated frames, ``JOSEFK_FUZZ_FRAMES`` frames (default
  20,000; the long run uses 1,000,000);
* hypothesis-driven bytes into ``decode_request`` and the framing decoder.
"""

from __future__ import annotations

import os
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.protocol import api
from josefk.protocol.compiler import compile_message
from josefk.protocol.errors import InvalidLength, ProtocolDecodeError
from josefk.protocol.framing import FrameDecoder
from josefk.protocol.messages import all_specs
from josefk.protocol.schema import MessageSpec
from tests.protocol import fuzzing
from tests.protocol.strategies import random_message, versions_of

CASES = [
    pytest.param(spec, version, id=f"{spec.class_name}-v{version}")
    for pair in all_specs()
    for spec in pair
    for version in versions_of(spec)
]


def _decode_only_codec_errors(spec: MessageSpec, version: int, data: bytes) -> None:
    try:
        compile_message(spec).decode(data, version)
    except ProtocolDecodeError:
        pass


@pytest.mark.parametrize(("spec", "version"), CASES)
def test_mutated_bodies_raise_only_codec_errors(spec: MessageSpec, version: int) -> None:
    rng = random.Random(f"{spec.class_name}-{version}")
    message = compile_message(spec)
    corpus = fuzzing.Corpus()
    encoded = [message.encode(random_message(spec, version, rng), version) for _ in range(3)]
    corpus.frames = [(frame, spec.api_key, version, True) for frame in encoded]
    for frame in encoded:
        # Every prefix of a valid encoding is either valid or an underflow.
        for cut in range(len(frame)):
            _decode_only_codec_errors(spec, version, frame[:cut])
    for _ in range(60):
        _decode_only_codec_errors(spec, version, fuzzing.mutate(rng.choice(encoded), rng, corpus))
    for size in (0, 1, 2, 5, 17, 64):
        _decode_only_codec_errors(spec, version, rng.randbytes(size))


def test_mutation_loop() -> None:
    frames = int(os.environ.get("JOSEFK_FUZZ_FRAMES", "20000"))
    ok, rejected, corpus_size = fuzzing.run(
        frames, seed=int(os.environ.get("JOSEFK_FUZZ_SEED", "0"))
    )
    assert ok + rejected == frames
    assert corpus_size > 100
    assert rejected > 0 and ok > 0


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_request_frames(data: bytes) -> None:
    try:
        api.decode_request(data)
    except ProtocolDecodeError:
        pass


@settings(max_examples=200)
@given(
    st.sampled_from(sorted(api.registry())),
    st.integers(0, 20),
    st.binary(max_size=120),
)
def test_random_bodies_behind_a_valid_header(api_key: int, version: int, body: bytes) -> None:
    header = struct.pack(">hhih", api_key, version, 1, -1)
    try:
        api.decode_request(header + body)
    except ProtocolDecodeError:
        pass


@settings(max_examples=200)
@given(st.binary(max_size=64))
def test_framing_on_random_bytes(data: bytes) -> None:
    try:
        FrameDecoder(max_frame_size=1 << 20).feed(data)
    except ProtocolDecodeError:
        pass


def test_huge_array_count_is_refused_without_allocating() -> None:
    # Metadata v0 request: topics array claims 2**31-1 entries in a 4-byte body.
    message = api.request_message(api.ApiKey.METADATA)
    with pytest.raises(InvalidLength):
        message.decode(b"\x7f\xff\xff\xff", 0)
    # The same in a flexible version, with a 5-byte varint count.
    with pytest.raises(InvalidLength):
        message.decode(b"\xff\xff\xff\xff\x07\x00\x00", 12)
    # An int32 array of primitives (replica nodes) claiming too much.
    response = api.response_message(api.ApiKey.METADATA)
    # brokers=[], one topic "t" with one partition whose replica_nodes claims 2**31-1.
    body = struct.pack(">iihh", 0, 1, 0, 1) + b"t" + struct.pack(">ihii", 1, 0, 0, 1)
    with pytest.raises(InvalidLength):
        response.decode(body + b"\x7f\xff\xff\xff" + b"\x00" * 8, 0)


GOLDEN_FRAMES = [path.read_bytes() for path in sorted(fuzzing.GOLDEN.glob("*/*.bin"))]


@settings(max_examples=300)
@given(
    st.sampled_from(GOLDEN_FRAMES),
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, 200),
)
def test_mutated_golden_frames(frame: bytes, edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(frame)
    for at, value in edits:
        data[at % len(data)] = value
    try:
        api.decode_request(bytes(data[: len(data) - cut % 8]))
    except ProtocolDecodeError:
        pass
