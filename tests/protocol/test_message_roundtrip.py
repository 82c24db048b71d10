"""Every (API, version, request/response) declared round-trips: encode -> decode -> equal.

Covers every module under josefk.protocol.messages, whoever wrote it, since the cases come
from all_specs().
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.protocol.compiler import compile_message
from josefk.protocol.messages import all_specs
from josefk.protocol.schema import MessageSpec
from tests.protocol.strategies import message_strategy, versions_of

CASES = [
    pytest.param(spec, version, id=f"{spec.class_name}-v{version}")
    for pair in all_specs()
    for spec in pair
    for version in versions_of(spec)
]


@pytest.mark.parametrize(("spec", "version"), CASES)
@settings(max_examples=8)
@given(data=st.data())
def test_round_trip(spec: MessageSpec, version: int, data: Any) -> None:
    message = compile_message(spec)
    value = data.draw(message_strategy(spec, version))
    encoded = message.encode(value, version)
    decoded = message.decode(encoded, version)
    assert decoded == value
    # Decoding is exact: re-encoding the decoded value gives the same bytes.
    assert message.encode(decoded, version) == encoded
    # The parts encoding, joined, is the same frame.
    parts = message.encode_parts(value, version)
    assert b"".join(bytes(part) for part in parts) == encoded


@pytest.mark.parametrize(("spec", "version"), CASES)
def test_defaults_round_trip(spec: MessageSpec, version: int) -> None:
    message = compile_message(spec)
    value = message.cls()
    assert message.decode(message.encode(value, version), version) == value
