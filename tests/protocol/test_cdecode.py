"""Differential tests of the two decoder paths: the C extension (josefk.protocol._cdecode,
walking a plan) against the generated Python decoders.

For every (API, version, request/response): random messages (tests/protocol/strategies.py)
decode to equal values of the same classes on both paths, and mutated bodies
(tests/protocol/fuzzing.py) are accepted by both with equal values or rejected by both with
``ProtocolDecodeError`` subclasses. The C path mirrors the general Python code, so against
``plain_decoder`` it must also raise the same error class; against the default Python decoder
the class may differ where a read-ahead finds the end of a truncated body first.

These tests run the Python path explicitly, whichever path is the default, so both stay
covered; they are skipped when the extension is not built.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import random
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.protocol import api, compiler
from josefk.protocol.compiler import CompiledMessage, compile_message
from josefk.protocol.errors import (
    BufferUnderflow,
    InvalidLength,
    InvalidString,
    ProtocolDecodeError,
    UnexpectedNull,
)
from josefk.protocol.headers import parse_request_header
from josefk.protocol.messages import all_specs
from josefk.protocol.schema import MessageSpec
from tests.protocol import fuzzing
from tests.protocol.strategies import message_strategy, random_message, versions_of

pytestmark = pytest.mark.skipif(
    not compiler.C_DECODER_AVAILABLE, reason="josefk.protocol._cdecode is not built"
)

MUTATIONS = 120


def _cases() -> list[Any]:
    cases = []
    for request, response in all_specs():
        for spec in (request, response):
            for version in versions_of(spec):
                cases.append(pytest.param(spec, version, id=f"{spec.class_name}-v{version}"))
    return cases


def _outcome(decoder: Any, data: bytes) -> tuple[str, Any]:
    try:
        obj, end = decoder(memoryview(data), 0)
    except ProtocolDecodeError as exc:
        return ("error", type(exc))
    except Exception as exc:  # noqa: BLE001  the outcome under test, translated as decode_from does
        return ("error", compiler.translate_decode_error(exc).__class__)
    return ("ok", (obj, end))


def _shape(value: Any) -> Any:
    """Types and values all the way down (records as bytes), for comparing decodings."""
    if dataclasses.is_dataclass(value):
        fields = tuple(_shape(getattr(value, f.name)) for f in dataclasses.fields(value))
        return (type(value), fields)
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, memoryview):
        return ("records", bytes(value))
    if isinstance(value, float) and value != value:
        return ("nan", struct.pack(">d", value))
    return (type(value), value)


def _assert_identical(c_obj: Any, py_obj: Any) -> None:
    assert _shape(c_obj) == _shape(py_obj)
    assert c_obj == py_obj or _shape(c_obj) == _shape(py_obj)


@pytest.mark.parametrize(("spec", "version"), _cases())
def test_paths_agree(spec: MessageSpec, version: int) -> None:
    message = compile_message(spec)
    c_dec, py_dec = message.c_decoder(version), message.python_decoder(version)
    plain = message.plain_decoder(version)
    rng = random.Random(f"cdecode-{spec.class_name}-{version}")
    bodies = []
    for _ in range(4):
        value = random_message(spec, version, rng)
        body = message.encode(value, version)
        bodies.append(body)
        c_obj, c_end = c_dec(memoryview(body), 0)
        py_obj, py_end = py_dec(memoryview(body), 0)
        _assert_identical(c_obj, py_obj)
        assert c_obj == value
        assert c_end == py_end == len(body)
        # Offset start and trailing bytes, as in a frame after its header.
        framed = b"\x01\x02\x03" + body + b"\xff"
        obj, end = c_dec(memoryview(framed), 3)
        assert obj == value and end == 3 + len(body)
    corpus = fuzzing.Corpus()
    corpus.frames.extend((body, spec.api_key, version, True) for body in bodies)
    for _ in range(MUTATIONS):
        body = fuzzing.mutate(rng.choice(bodies), rng, corpus)
        c_got = _outcome(c_dec, body)
        py_got = _outcome(py_dec, body)
        assert c_got[0] == py_got[0], body.hex()
        if c_got[0] == "ok":
            _assert_identical(c_got[1][0], py_got[1][0])
            assert c_got[1][1] == py_got[1][1]
        else:
            # The C path follows the general code: the same error class as plain_decoder.
            assert c_got[1] is _outcome(plain, body)[1], body.hex()


def _translated(decoder: Any) -> Any:
    """A generated Python decoder raising typed errors, as decode_from does."""

    def decode(buf: memoryview, pos: int) -> Any:
        try:
            return decoder(buf, pos)
        except ProtocolDecodeError:
            raise
        except Exception as exc:  # noqa: BLE001  translated as decode_from does
            raise compiler.translate_decode_error(exc) from None

    return decode


_PAIRS = [(spec, version) for p in _cases() for spec, version in [p.values]]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_paths_agree_on_generated_messages(data: st.DataObject) -> None:
    """Hypothesis values (shrinkable) for any (API, version, direction)."""
    spec, version = data.draw(st.sampled_from(_PAIRS))
    value = data.draw(message_strategy(spec, version))
    message = compile_message(spec)
    body = memoryview(message.encode(value, version))
    c_obj, c_end = message.c_decoder(version)(body, 0)
    py_obj, py_end = message.python_decoder(version)(body, 0)
    _assert_identical(c_obj, py_obj)
    assert c_end == py_end == len(body)


def _golden() -> list[Path]:
    return sorted(fuzzing.GOLDEN.glob("*/*.bin"))


@pytest.mark.parametrize("path", _golden(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_frames_decode_alike(path: Path) -> None:
    frame = memoryview(path.read_bytes())
    info = parse_request_header(frame)
    assert info.body_offset is not None
    message = api.request_message(info.api_key)
    c_obj, c_end = message.c_decoder(info.api_version)(frame, info.body_offset)
    py_obj, py_end = message.python_decoder(info.api_version)(frame, info.body_offset)
    _assert_identical(c_obj, py_obj)
    assert c_end == py_end


def _metadata() -> tuple[CompiledMessage, Any]:
    message = api.response_message(api.ApiKey.METADATA)
    cls = message.cls
    value = cls(
        cluster_id="c",
        brokers=[cls.MetadataResponseBroker(node_id=1, host="h", port=9092, rack="r")],
        topics=[
            cls.MetadataResponseTopic(
                name="t",
                partitions=[
                    cls.MetadataResponsePartition(partition_index=p, replica_nodes=[1, 2])
                    for p in range(3)
                ],
            )
        ],
    )
    return message, value


def test_decoded_objects_are_the_public_classes() -> None:
    message, value = _metadata()
    obj = message.c_decoder(12)(memoryview(message.encode(value, 12)), 0)[0]
    assert type(obj) is message.cls
    assert type(obj.topics[0].partitions[0]) is message.cls.MetadataResponsePartition
    assert obj == value
    assert hash(obj.brokers[0]) == hash(value.brokers[0])
    assert repr(obj.brokers[0]) == repr(value.brokers[0])
    with pytest.raises(AttributeError):
        obj.cluster_id = "other"  # type: ignore[misc]
    # Absent fields get fresh defaults: lists are not shared between decoded objects.
    other = message.c_decoder(12)(memoryview(message.encode(value, 12)), 0)[0]
    assert obj.topics[0].partitions[0].offline_replicas is not (
        other.topics[0].partitions[0].offline_replicas
    )


def test_default_path_follows_the_extension() -> None:
    message, _ = _metadata()
    expected = message.c_decoder(12) if compiler.C_DECODER else message.python_decoder(12)
    assert message.decoder(12) is expected


def test_pure_python_environment_variable() -> None:
    code = "from josefk.protocol import compiler; print(compiler.C_DECODER)"
    env = dict(os.environ, JOSEFK_PURE_PYTHON="1")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def _flexible_body(tagged_section: bytes) -> bytes:
    """An ApiVersions v3 request body with the given top-level tagged-field section."""
    name, version = b"golden", b"1.0"
    return bytes([len(name) + 1]) + name + bytes([len(version) + 1]) + version + tagged_section


@pytest.mark.parametrize(
    ("section", "error"),
    [
        (b"\x00", None),
        (b"\x02\x07\x01\xaa\x63\x00", None),  # two unknown tags, skipped
        (b"\x01\x07\x05\xaa", BufferUnderflow),  # a tag claiming more than is left
        (b"\x7f", InvalidLength),  # more tags than bytes
        (b"\x80", BufferUnderflow),  # a count cut inside its varint
        (b"", BufferUnderflow),
    ],
)
def test_tagged_sections(section: bytes, error: type[Exception] | None) -> None:
    message = api.request_message(api.ApiKey.API_VERSIONS)
    body = _flexible_body(section)
    for decoder in (message.c_decoder(3), _translated(message.plain_decoder(3))):
        if error is None:
            obj, end = decoder(memoryview(body), 0)
            assert obj.client_software_name == "golden" and end == len(body)
        else:
            with pytest.raises(error):
                decoder(memoryview(body), 0)


_BROKER = b"\x00\x00\x00\x00" + b"\x02" + b"\x00\x00\x00\x01"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        # Metadata v12 response: throttle, then a compact array of brokers claiming 2**28.
        (b"\x00\x00\x00\x00" + b"\x80\x80\x80\x80\x01", InvalidLength),
        # One broker (at least 11 bytes follow), whose host is a null, not UTF-8, too long.
        (_BROKER + b"\x00" + bytes(12), UnexpectedNull),
        (_BROKER + b"\x03\xff\xfe" + bytes(12), InvalidString),
        (_BROKER + b"\x40" + bytes(12), BufferUnderflow),
    ],
)
def test_bad_lengths_raise_typed_errors(body: bytes, error: type[Exception]) -> None:
    message = api.response_message(api.ApiKey.METADATA)
    with pytest.raises(error):
        message.c_decoder(12)(memoryview(body), 0)
    with pytest.raises(error):
        _translated(message.plain_decoder(12))(memoryview(body), 0)


def test_no_leak_on_error_paths() -> None:
    """Decodes release what they built, failed or not: memory stays flat over many."""
    message, value = _metadata()
    decoder = message.c_decoder(12)
    body = message.encode(value, 12)
    rng = random.Random(5)
    cuts = [body[:n] for n in range(len(body))]
    corpus = fuzzing.Corpus(frames=[(body, 3, 12, False)])
    cuts += [fuzzing.mutate(body, rng, corpus) for _ in range(200)]
    cuts.append(body)  # and a successful decode, whose objects the caller drops

    def run() -> None:
        for data in cuts:
            try:
                decoder(memoryview(data), 0)
            except ProtocolDecodeError:
                pass

    run()
    gc.collect()
    tracemalloc.start()
    try:
        run()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20):
            run()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024
