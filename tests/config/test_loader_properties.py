"""Java .properties syntax edge cases and Kafka's meta.properties file."""

from __future__ import annotations

import base64
import itertools
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.config import (
    MetaProperties,
    MetaPropertiesError,
    PropertiesSyntaxError,
    ensure_meta_properties,
    format_properties,
    generate_uuid,
    parse_properties,
    read_properties_file,
)
from josefk.config.properties import is_valid_uuid


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b", {"a": "b"}),
        ("a:b", {"a": "b"}),
        ("a b", {"a": "b"}),
        ("a\tb", {"a": "b"}),
        ("  a  =  b  ", {"a": "b  "}),  # trailing blanks of a value are kept, as in Java
        ("a = = b", {"a": "= b"}),  # only one separator is consumed
        ("a: =b", {"a": "=b"}),
        ("a", {"a": ""}),
        ("a=", {"a": ""}),
        ("=b", {"": "b"}),
        ("# comment\n! also\n   # indented\n\na=1", {"a": "1"}),
        ("a=1 # not a comment", {"a": "1 # not a comment"}),
        ("a=1\na=2", {"a": "2"}),
        ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
        ("a=x\\\n    y\\\n\tz", {"a": "xyz"}),
        ("a=x\\\\\nb=y", {"a": "x\\", "b": "y"}),  # even backslashes do not continue
        ("a=x\\\\\\\n y", {"a": "x\\y"}),
        ("# comment \\\na=1", {"a": "1"}),  # comments never continue
        ("a=x\\", {"a": "x"}),  # a continuation at end of input is dropped
        ("a\\=b=c", {"a=b": "c"}),
        ("a\\:b:c", {"a:b": "c"}),
        ("a\\ b c", {"a b": "c"}),
        ("a=\\ lead", {"a": " lead"}),
        ("a=tab\\there\\nnew\\rret\\fff", {"a": "tab\there\nnew\rret\fff"}),
        ("a=\\u00e9t\\u00E9", {"a": "été"}),
        ("a=\\ud83d\\ude00", {"a": "😀"}),
        ("a=\\q\\#\\!", {"a": "q#!"}),
        ("key\\\n  continued=v", {"keycontinued": "v"}),
        ("é=ü", {"é": "ü"}),
    ],
)
def test_properties_syntax(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(PropertiesSyntaxError) as info:
        parse_properties("a=1\n\nb=\\u12g4", source="server.properties")
    assert info.value.line == 3
    assert "server.properties, line 3" in str(info.value)


def test_read_file_handles_bom_and_latin1(tmp_path: Path) -> None:
    utf8 = tmp_path / "a.properties"
    utf8.write_bytes("\ufeffname=café\n".encode())
    assert read_properties_file(utf8) == {"name": "café"}
    latin = tmp_path / "b.properties"
    latin.write_bytes("name=caf\xe9\n".encode("latin-1"))
    assert read_properties_file(latin) == {"name": "café"}


_texts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)


@given(st.dictionaries(_texts, _texts, max_size=8))
def test_format_then_parse_round_trips(props: dict[str, str]) -> None:
    assert parse_properties(format_properties(props, comment="a\nb")) == props


# ------------------------------------------------------------------------------ meta.properties


def test_generated_uuids_are_kafkas_text_form() -> None:
    for _ in range(200):
        text = generate_uuid()
        assert len(text) == 22 and "=" not in text and not text.startswith("-")
        assert is_valid_uuid(text)
        raw = base64.urlsafe_b64decode(text + "==")
        assert uuid.UUID(bytes=raw).version == 4


def test_generate_uuid_redraws_ids_starting_with_dash() -> None:
    first = bytes([0xF8]) + bytes(15)  # base64 of 0xF8... starts with '-'
    second = bytes(range(16))
    draws = itertools.chain([first, second])
    text = generate_uuid(lambda n: next(draws))
    assert not text.startswith("-")
    assert is_valid_uuid(text)


@pytest.mark.parametrize(
    "text", ["", "short", "A" * 23, "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAA+A"]
)
def test_invalid_uuids(text: str) -> None:
    assert not is_valid_uuid(text)


def test_meta_properties_write_then_read(tmp_path: Path) -> None:
    cluster_id = generate_uuid()
    meta = MetaProperties(node_id=3, cluster_id=cluster_id, directory_id=generate_uuid())
    path = meta.write(tmp_path / "logs", now=datetime(2026, 11, 22, 5, 0, tzinfo=UTC))
    text = path.read_text()
    assert text.startswith("#Sun Nov 22 05:00:00 UTC 2026\n")
    assert "version=1\n" in text and "node.id=3\n" in text and f"cluster.id={cluster_id}\n" in text
    assert MetaProperties.read(tmp_path / "logs") == meta
    assert [p.name for p in (tmp_path / "logs").iterdir()] == ["meta.properties"]


def test_meta_properties_absent(tmp_path: Path) -> None:
    assert MetaProperties.read(tmp_path) is None


def test_meta_properties_as_kafka_writes_it(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(
        "#\n#Tue Mar 18 10:00:00 UTC 2025\n"
        "node.id=1\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\nversion=1\n"
        "cluster.id=5L6g3nShT-eMCtK--X86sw\n"
    )
    meta = MetaProperties.read(tmp_path)
    assert meta == MetaProperties(
        version=1,
        node_id=1,
        cluster_id="5L6g3nShT-eMCtK--X86sw",
        directory_id="J8aAPcfLQt2bqs1JT_rMgQ",
    )


def test_meta_properties_version_0() -> None:
    meta = MetaProperties.from_properties({"version": "0", "broker.id": "5"})
    assert (meta.version, meta.node_id, meta.cluster_id) == (0, 5, None)
    assert meta.to_properties() == {"version": "0", "broker.id": "5"}


@pytest.mark.parametrize(
    ("props", "words"),
    [
        ({}, "no version"),
        ({"version": "x"}, "not an integer"),
        ({"version": "2", "node.id": "1"}, "unsupported version 2"),
        ({"version": "1", "cluster.id": "5L6g3nShT-eMCtK--X86sw"}, "needs node.id"),
        ({"version": "1", "node.id": "1"}, "needs cluster.id"),
        ({"version": "1", "node.id": "one", "cluster.id": "c"}, "node.id 'one'"),
        (
            {"version": "1", "node.id": "1", "cluster.id": "c", "directory.id": "bad"},
            "directory.id",
        ),
    ],
)
def test_meta_properties_errors(props: dict[str, str], words: str) -> None:
    with pytest.raises(MetaPropertiesError, match=words):
        MetaProperties.from_properties(props, path="/d/meta.properties")


@given(st.text(max_size=200))
def test_any_text_parses_or_raises_the_syntax_error(text: str) -> None:
    try:
        result = parse_properties(text)
    except PropertiesSyntaxError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in result.items())


# ------------------------------------------------------------------------------ start-up identity


def test_ensure_meta_properties_formats_fresh_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    cluster_id = ensure_meta_properties(dirs, node_id=2)
    assert is_valid_uuid(cluster_id)
    metas = [MetaProperties.read(d) for d in dirs]
    assert all(m is not None and m.cluster_id == cluster_id and m.node_id == 2 for m in metas)
    directory_ids = {m.directory_id for m in metas if m is not None}
    assert len(directory_ids) == 2
    # A restart keeps the identity.
    assert ensure_meta_properties(dirs, node_id=2) == cluster_id
    assert [MetaProperties.read(d) for d in dirs] == metas


def test_ensure_meta_properties_adopts_the_existing_cluster(tmp_path: Path) -> None:
    MetaProperties(node_id=1, cluster_id="5L6g3nShT-eMCtK--X86sw").write(tmp_path / "old")
    cluster_id = ensure_meta_properties([tmp_path / "old", tmp_path / "new"], node_id=1)
    assert cluster_id == "5L6g3nShT-eMCtK--X86sw"
    new = MetaProperties.read(tmp_path / "new")
    assert new is not None and new.cluster_id == cluster_id


def test_ensure_meta_properties_refuses_mismatches(tmp_path: Path) -> None:
    MetaProperties(node_id=1, cluster_id=generate_uuid()).write(tmp_path / "a")
    with pytest.raises(MetaPropertiesError, match=r"stored node id 1 does not match node\.id=2"):
        ensure_meta_properties([tmp_path / "a"], node_id=2)
    MetaProperties(node_id=1, cluster_id=generate_uuid()).write(tmp_path / "b")
    with pytest.raises(MetaPropertiesError, match="different clusters"):
        ensure_meta_properties([tmp_path / "a", tmp_path / "b"], node_id=1)


def test_ensure_meta_properties_fills_a_version_0_cluster_id(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=0\nbroker.id=4\n")
    cluster_id = ensure_meta_properties([tmp_path], node_id=4)
    meta = MetaProperties.read(tmp_path)
    assert meta == MetaProperties(version=0, node_id=4, cluster_id=cluster_id)
