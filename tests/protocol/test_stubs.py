"""josefk/protocol/message_types.pyi: current with the declarations, and true to the classes.

The stub file is generated (``python -m josefk.protocol.stubgen``) and checked in so that mypy
checks the handlers' and the client's field access. These tests fail when a declaration
changed without the stubs being regenerated, and when the stubs name a class, struct or field
the run-time classes do not have.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from josefk.protocol import message_types
from josefk.protocol.api import registry
from josefk.protocol.compiler import STUB_COMMAND
from josefk.protocol.stubgen import STUB_PATH, expected_stubs, main


def test_checked_in_stubs_are_current() -> None:
    assert STUB_PATH.read_text() == expected_stubs(), (
        f"{STUB_PATH.name} is out of date with josefk/protocol/messages: "
        f"run `.venv/bin/{STUB_COMMAND}` and commit the result"
    )


def test_check_mode_reports_a_stale_file(tmp_path: Any, monkeypatch: Any, capsys: Any) -> None:
    stale = tmp_path / "message_types.pyi"
    stale.write_text("# an old version\n")
    monkeypatch.setattr("josefk.protocol.stubgen.STUB_PATH", stale)
    assert main(["--check"]) == 1
    assert STUB_COMMAND in capsys.readouterr().err
    assert main([]) == 0
    assert stale.read_text() == expected_stubs()
    assert main(["--check"]) == 0


def _is_alias(node: ast.stmt) -> bool:
    return isinstance(node, ast.AnnAssign) and "TypeAlias" in ast.unparse(node.annotation)


def _stub_classes() -> list[tuple[str, ast.ClassDef | ast.AnnAssign]]:
    """(dotted path, node) of every class and class-level alias in the stub file."""
    found: list[tuple[str, ast.ClassDef | ast.AnnAssign]] = []

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                found.append((prefix + node.name, node))
                walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.AnnAssign) and _is_alias(node):
                assert isinstance(node.target, ast.Name)
                found.append((prefix + node.target.id, node))

    walk(ast.parse(STUB_PATH.read_text()).body, "")
    return found


def _resolve(path: str) -> Any:
    obj: Any = message_types
    for step in path.split("."):
        obj = getattr(obj, step)
    return obj


def test_every_stub_class_exists_with_the_same_fields() -> None:
    checked = 0
    for path, node in _stub_classes():
        if any(step.startswith("_") for step in path.split(".")):
            continue  # a stub-only name for a struct its parent cannot name (see stub_lines)
        cls = _resolve(path)
        assert isinstance(cls, type), path
        if isinstance(node, ast.ClassDef):
            declared = [
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign)
                and isinstance(s.target, ast.Name)
                and "ClassVar" not in ast.unparse(s.annotation)
                and not _is_alias(s)
            ]
            assert declared == [f.name for f in dataclasses.fields(cls)], path
            checked += 1
    assert checked > 100
    assert any(isinstance(node, ast.AnnAssign) for _, node in _stub_classes())


def test_every_message_is_importable_by_name() -> None:
    for entry in registry().values():
        for compiled in (entry.request, entry.response):
            assert getattr(message_types, compiled.name) is compiled.cls


def test_a_struct_declared_twice_alike_is_one_class() -> None:
    """AddPartitionsToTxn declares its topics before v4 and inside each transaction from v4
    (one of Kafka's common structs): both fields hold the same class, so a v3 request built
    with ``AddPartitionsToTxnRequest.AddPartitionsToTxnTopic`` type-checks and decodes equal."""
    request_cls = message_types.AddPartitionsToTxnRequest
    topic = request_cls.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])
    request = request_cls(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=7,
        v3_and_below_producer_epoch=1,
        v3_and_below_topics=[topic],
    )
    compiled = request_cls.COMPILED
    decoded = compiled.decode(compiled.encode(request, 3), 3)
    assert type(decoded.v3_and_below_topics[0]) is request_cls.AddPartitionsToTxnTopic
    assert decoded == request
    nested = request_cls.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic
    assert nested is request_cls.AddPartitionsToTxnTopic


@pytest.mark.slow  # a mypy run over josefk.protocol: seconds, not milliseconds
def test_mypy_checks_field_access_through_the_stubs(tmp_path: Path) -> None:
    from mypy import api

    source = tmp_path / "use.py"
    source.write_text(
        "from josefk.protocol.message_types import ProduceRequest, ProduceResponse\n"
        "\n"
        "def f(request: ProduceRequest) -> ProduceResponse:\n"
        "    n = request.acks + len(request.topic_data[0].partition_data)\n"
        "    return ProduceResponse(throttle_time_ms=n, responses=request.acks_typo)\n"
    )
    out, _, status = api.run(
        [str(source), "--strict", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"]
    )
    assert status == 1, out
    assert out.count("error:") == 1, out
    assert '"ProduceRequest" has no attribute "acks_typo"' in out
