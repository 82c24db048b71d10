"""The KIP-848 server-side assignors, as properties: every subscribed partition assigned once
to a member subscribing to its topic, balance, stickiness, and range's contiguous shares."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.broker.group.assignors import UnknownAssignorError, assign, range_, uniform

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]

Subscriptions = dict[str, frozenset[uuid.UUID]]


def flatten(assignment: dict[str, dict[uuid.UUID, frozenset[int]]]) -> list[tuple[uuid.UUID, int]]:
    return [(t, p) for topics in assignment.values() for t, ps in topics.items() for p in ps]


def counts(assignment: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in topics.values()) for m, topics in assignment.items()}


partition_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1)
members = st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=8, unique=True)


@st.composite
def groups(draw: st.DrawFn, *, homogeneous: bool) -> tuple[Subscriptions, dict[uuid.UUID, int]]:
    topic_counts = draw(partition_counts)
    names = draw(members)
    topics = sorted(topic_counts)
    if homogeneous:
        chosen = frozenset(draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)))
        return {m: chosen for m in names}, topic_counts
    subscriptions = {
        m: frozenset(draw(st.lists(st.sampled_from(TOPICS), max_size=4, unique=True)))
        for m in names
    }
    return subscriptions, topic_counts


def assert_valid(
    assignment: dict[str, dict[uuid.UUID, frozenset[int]]],
    subscriptions: Subscriptions,
    topic_counts: dict[uuid.UUID, int],
) -> None:
    assert set(assignment) == set(subscriptions)
    pairs = flatten(assignment)
    assert len(pairs) == len(set(pairs)), "a partition assigned twice"
    expected = {
        (t, p)
        for t, count in topic_counts.items()
        if any(t in s for s in subscriptions.values())
        for p in range(count)
    }
    assert set(pairs) == expected
    for member, topics in assignment.items():
        assert set(topics) <= subscriptions[member]


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=False), st.sampled_from(["uniform", "range"]))
def test_every_subscribed_partition_goes_to_one_subscriber(
    group: tuple[Subscriptions, dict[uuid.UUID, int]], assignor: str
) -> None:
    subscriptions, topic_counts = group
    assert_valid(assign(assignor, subscriptions, topic_counts, {}), subscriptions, topic_counts)


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_balances_identical_subscriptions(
    group: tuple[Subscriptions, dict[uuid.UUID, int]],
) -> None:
    subscriptions, topic_counts = group
    sizes = counts(uniform(subscriptions, topic_counts, {}))
    assert max(sizes.values()) - min(sizes.values()) <= 1


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=True), st.data())
def test_uniform_is_sticky_when_members_come_and_go(
    group: tuple[Subscriptions, dict[uuid.UUID, int]], data: st.DataObject
) -> None:
    """After a member joins or leaves, each remaining member keeps min(what it had, its new
    share) of its partitions; balance holds; the assignment stays valid."""
    subscriptions, topic_counts = group
    before = uniform(subscriptions, topic_counts, {})
    changed = dict(subscriptions)
    if data.draw(st.booleans()) or len(changed) == 1:
        changed["newcomer"] = next(iter(subscriptions.values()))
    else:
        del changed[data.draw(st.sampled_from(sorted(changed)))]
    after = uniform(changed, topic_counts, before)
    assert_valid(after, changed, topic_counts)
    sizes = counts(after)
    assert max(sizes.values()) - min(sizes.values()) <= 1
    floor = min(sizes.values())
    for member in changed:
        if member not in before:
            continue
        had = {(t, p) for t, ps in before[member].items() for p in ps}
        has = {(t, p) for t, ps in after[member].items() for p in ps}
        assert len(had & has) >= min(len(had), floor)


def test_uniform_moves_only_what_the_newcomer_needs() -> None:
    topic = TOPICS[0]
    subscriptions = {m: frozenset({topic}) for m in ("a", "b", "c")}
    before = uniform(subscriptions, {topic: 6}, {})
    assert sorted(counts(before).values()) == [2, 2, 2]
    subscriptions["d"] = frozenset({topic})
    after = uniform(subscriptions, {topic: 6}, before)
    moved = sum(len(before[m][topic] - after[m].get(topic, frozenset())) for m in "abc")
    assert moved == 1
    assert len(after["d"][topic]) == 1
    for member in "abc":
        assert after[member][topic] <= before[member][topic]


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True))
def test_range_gives_contiguous_shares_per_topic(
    group: tuple[Subscriptions, dict[uuid.UUID, int]],
) -> None:
    subscriptions, topic_counts = group
    result = range_(subscriptions, topic_counts, {})
    for topic in next(iter(subscriptions.values())):
        count = topic_counts.get(topic, 0)
        order = sorted(subscriptions)
        shares = [sorted(result[m].get(topic, frozenset())) for m in order]
        assert [p for share in shares for p in share] == list(range(count))
        sizes = [len(s) for s in shares]
        assert sizes == sorted(sizes, reverse=True)
        assert not sizes or max(sizes) - min(sizes) <= 1


def test_unknown_assignor_is_refused() -> None:
    with pytest.raises(UnknownAssignorError):
        assign("sticky", {"a": frozenset()}, {}, {})
