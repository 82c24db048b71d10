"""``deleted_dir_name``: the name a deleted partition's directory is renamed to."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from josefk.storage.manager import DELETE_DIR_SUFFIX, deleted_dir_name
from josefk.storage.offsets import TopicPartition

_LEGAL = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@given(_LEGAL.filter(lambda t: 1 <= len(t) <= 249), st.integers(0, 2**31 - 1))
def test_the_name_fits_a_file_name_and_keeps_what_it_can(topic: str, partition: int) -> None:
    name = deleted_dir_name(TopicPartition(topic, partition))
    assert len(name.encode()) <= 255
    assert name.endswith(DELETE_DIR_SUFFIX)
    head, _, rest = name.rpartition(".")
    assert rest.endswith(DELETE_DIR_SUFFIX) and len(rest) == 32 + len(DELETE_DIR_SUFFIX)
    assert head.endswith(f"-{partition}")
    kept = head[: -len(f"-{partition}")]
    assert topic.startswith(kept)
    if len(topic) + len(name) - len(kept) <= 255:
        assert kept == topic
