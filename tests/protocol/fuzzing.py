"""Mutation fuzzing of request and response frames (shared by test_fuzz.py and the long run).

The corpus is every golden frame plus, for every declared API and version, a few random
requests and responses encoded by josefk. Each round takes a frame, applies one to four
mutations (bit flips, interesting bytes, large length prefixes, truncation, insertion,
deletion, splicing) and decodes it; anything but success or a ``ProtocolDecodeError`` is a
failure, reported with the frame that caused it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from josefk.protocol import api
from josefk.protocol.errors import ProtocolDecodeError
from josefk.protocol.headers import RequestHeader, parse_request_header
from josefk.protocol.messages import all_specs
from tests.protocol.strategies import random_message, versions_of

GOLDEN = Path(__file__).parent / "golden"
INTERESTING = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
BIG_LENGTHS = (
    b"\x7f\xff\xff\xff",
    b"\xff\xff\xff\xfe",
    b"\xff\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff\xff\xff\x0f",
    b"\x80\x80\x80\x80\x80\x80",
    b"\x7f\xff",
)


@dataclass(slots=True)
class Corpus:
    # (frame, api key, version, is_request); response frames carry their header too.
    frames: list[tuple[bytes, int, int, bool]] = field(default_factory=list)


def build_corpus(rng: random.Random, per_version: int = 2) -> Corpus:
    corpus = Corpus()
    for path in sorted(GOLDEN.glob("*/*.bin")):
        frame = path.read_bytes()
        info = parse_request_header(memoryview(frame))
        corpus.frames.append((frame, info.api_key, info.api_version, True))
    for request, response in all_specs():
        for version in versions_of(request):
            for _ in range(per_version):
                header = RequestHeader(
                    request_api_key=request.api_key,
                    request_api_version=version,
                    correlation_id=rng.randint(0, 1000),
                    client_id="fuzz",
                )
                body = random_message(request, version, rng)
                frame = api.encode_request(header, body)[4:]
                corpus.frames.append((frame, request.api_key, version, True))
                body = random_message(response, version, rng)
                frame = api.encode_response(7, body, version, api_key=response.api_key)[4:]
                corpus.frames.append((frame, response.api_key, version, False))
    return corpus


def mutate(frame: bytes, rng: random.Random, corpus: Corpus) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        if not data:
            data += rng.randbytes(rng.randint(1, 8))
            continue
        at = rng.randrange(len(data))
        if op == 0:
            data[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[at] = rng.choice(INTERESTING)
        elif op == 2:
            chunk = rng.choice(BIG_LENGTHS)
            data[at : at + len(chunk)] = chunk
        elif op == 3:
            del data[rng.randrange(len(data) + 1) :]
        elif op == 4:
            data[at:at] = rng.randbytes(rng.randint(1, 6))
        elif op == 5:
            del data[at : at + rng.randint(1, 6)]
        elif op == 6:
            other = rng.choice(corpus.frames)[0]
            start = rng.randrange(len(other) + 1)
            data[at:] = other[start : start + rng.randint(0, 40)]
        else:
            data[at] = rng.randrange(256)
    return bytes(data)


def decode_any(frame: bytes, api_key: int, version: int, is_request: bool) -> None:
    """Decode like the broker (requests) or the client (responses) would."""
    if is_request:
        api.decode_request(frame)
    else:
        api.decode_response(frame, api_key, version)


def run(frames: int, seed: int = 0) -> tuple[int, int, int]:
    """Mutate and decode ``frames`` frames; returns (decoded ok, codec errors, corpus size).

    Raises AssertionError naming the frame on any exception that is not the codec's own.
    """
    rng = random.Random(seed)
    corpus = build_corpus(rng)
    ok = rejected = 0
    for _ in range(frames):
        frame, api_key, version, is_request = rng.choice(corpus.frames)
        mutated = mutate(frame, rng, corpus)
        try:
            decode_any(mutated, api_key, version, is_request)
            ok += 1
        except ProtocolDecodeError:
            rejected += 1
        except Exception as exc:
            raise AssertionError(
                f"{type(exc).__name__}: {exc} decoding api {api_key} v{version} "
                f"{'request' if is_request else 'response'} {mutated.hex()}"
            ) from exc
    return ok, rejected, len(corpus.frames)
