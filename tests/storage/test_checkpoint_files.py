"""Offset checkpoint files: Kafka's text format, atomic replacement, clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.storage.checkpoint import (
    CorruptCheckpointError,
    OffsetCheckpointFile,
)
from josefk.storage.errors import KafkaStorageError
from josefk.storage.offsets import TopicPartition

topics = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789._-", min_size=1, max_size=20)
entries = st.dictionaries(
    st.builds(TopicPartition, topics, st.integers(0, 10_000)),
    st.integers(0, (1 << 63) - 1),
    max_size=30,
)


def test_kafka_text_format(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    checkpoint.write({TopicPartition("orders", 1): 99, TopicPartition("orders", 0): 1234})
    assert checkpoint.path.read_text() == "0\n2\norders 0 1234\norders 1 99\n"
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_absent_file_reads_empty(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "nothing").read() == {}


@given(offsets=entries)
def test_round_trip(
    tmp_path_factory: pytest.TempPathFactory, offsets: dict[TopicPartition, int]
) -> None:
    path = tmp_path_factory.mktemp("cp") / "replication-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets


def test_replacement_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint")
    checkpoint.write({TopicPartition("a", 0): 5})

    def failing_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(KafkaStorageError) as info:
        checkpoint.write({TopicPartition("a", 0): 6})
    assert info.value.path == checkpoint.path
    monkeypatch.undo()
    # The reader still sees the whole old file; the half-done temp file is ignored.
    assert checkpoint.read() == {TopicPartition("a", 0): 5}
    checkpoint.write({TopicPartition("a", 0): 7})
    assert checkpoint.read() == {TopicPartition("a", 0): 7}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("1\n0\n", "version 1"),
        ("x\n0\n", "version 'x'"),
        ("0\n", "entry count"),
        ("0\n2\na 0 1\n", "claims 2 entries but holds 1"),
        ("0\n1\na 0\n", "line 3"),
        ("0\n1\na zero 1\n", "partition 'zero'"),
        ("0\n1\na 0 x\n", "offset 'x'"),
    ],
)
def test_malformed_files_name_path_and_line(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError) as info:
        OffsetCheckpointFile(path).read()
    assert fragment in str(info.value)
    assert str(path) in str(info.value)
