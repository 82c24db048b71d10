"""SubscriptionState: the object the consumer and its group coordinator share."""

from __future__ import annotations

import logging

import pytest

from josefk.client.subscription import ConsumerRebalanceListener, SubscriptionState
from josefk.client.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_partitions_that_stay_keep_their_state_and_the_owner_hears_of_the_change() -> None:
    changes: list[tuple[set[TopicPartition], set[TopicPartition]]] = []
    state = SubscriptionState(on_change=lambda kept, dropped: changes.append((kept, dropped)))
    state.set_assignment([A0, A1])
    state.assignment[A0].position = 42
    state.set_assignment([A0, B0])
    assert state.assigned() == {A0, B0}
    assert state.positions() == {A0: 42}
    assert changes == [({A0, A1}, set()), ({A0, B0}, {A1})]


class _Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", assigned))
        raise RuntimeError("the user's hook failed")


async def test_the_listener_is_told_and_its_failures_are_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listener = _Recorder()
    state = SubscriptionState(listener)
    state.set_assignment([A0, A1])
    await state.partitions_revoked()
    await state.partitions_revoked([A1])  # an incremental rebalance names what goes
    with caplog.at_level(logging.ERROR, logger="josefk.client.subscription"):
        await state.partitions_assigned([B0])
    assert listener.events == [("revoked", {A0, A1}), ("revoked", {A1}), ("assigned", {B0})]
    assert "on_partitions_assigned" in caplog.text
