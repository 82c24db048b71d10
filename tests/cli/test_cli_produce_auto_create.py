"""``josefk produce`` to a topic that does not exist creates it when the broker allows
auto-creation (as Kafka's producers and kcat do), and otherwise says how to create it.

Before: an unknown topic was always an error, whatever the broker allowed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import BrokerProcess, josefk

pytestmark = pytest.mark.timeout(120)


def start_broker(base: Path, *settings: str) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(base / "data", base / "broker.stderr.log", settings=list(settings))
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    yield from start_broker(tmp_path, "num.partitions=2")


@pytest.fixture
def one_partition_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    yield from start_broker(tmp_path, "num.partitions=1")


@pytest.fixture
def strict_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    yield from start_broker(tmp_path, "auto.create.topics.enable=false")


def test_produce_creates_a_new_topic_when_the_broker_allows(broker: BrokerProcess) -> None:
    result = josefk(broker, "produce", "fresh", stdin="a\nb\nc\n")
    assert 'created topic "fresh" on first use (2 partitions;' in result.stderr
    assert "auto.create.topics.enable=true" in result.stderr
    assert "produced 3 records" in result.stdout
    consumed = josefk(broker, "consume", "fresh", "--from", "beginning", "--count", "3")
    assert sorted(consumed.stdout.split()) == ["a", "b", "c"]


def test_the_note_of_a_topic_created_with_one_partition_says_partition(
    one_partition_broker: BrokerProcess,
) -> None:
    result = josefk(one_partition_broker, "produce", "jobs", stdin="a\n")
    assert 'created topic "jobs" on first use (1 partition;' in result.stderr


def test_produce_says_how_to_create_a_topic_when_the_broker_does_not(
    strict_broker: BrokerProcess,
) -> None:
    result = josefk(strict_broker, "produce", "fresh", stdin="a\n", expect=1)
    assert 'unknown topic "fresh"' in result.stderr
    assert "auto.create.topics.enable=false" in result.stderr
    assert "josefk topics create fresh" in result.stderr
    josefk(strict_broker, "topics", "describe", "fresh", expect=1)


def test_produce_to_a_typo_says_so_before_producing_and_no_create_refuses(
    broker: BrokerProcess,
) -> None:
    """Before: a mistyped topic was created with no word of the topic it resembled, and
    there was no way to refuse the creation."""
    josefk(broker, "topics", "create", "orders")
    refused = josefk(broker, "produce", "ordres", "--no-create", stdin="a\n", expect=1)
    assert 'unknown topic "ordres"; did you mean "orders"?' in refused.stderr
    assert "--no-create" in refused.stderr
    josefk(broker, "topics", "describe", "ordres", expect=1)

    created = josefk(broker, "produce", "ordres", stdin="a\n")
    said = created.stderr.splitlines()
    assert 'did you mean "orders"?' in said[0], created
    assert "created topic" in said[1] and "--no-create" in said[1], created
    assert "produced 1 record" in created.stdout
