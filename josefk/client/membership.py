"""What a consumer's group membership does the same way under both group protocols.

Owns ``GroupMembership``, the base of ``group.GroupCoordinator`` (the classic protocol) and
``consumer_group.ConsumerGroupMember`` (KIP-848): the subscription, the coordinator's
address (found again after a coordinator error or a lost connection), the background task
and its retry backoff, auto-commit, committing and fetching committed offsets, and close (a
last auto-commit, then leaving the group). A subclass supplies one step of its protocol
(``_step``), leaving, and who it commits as; everything it shares lives here once, so a fix
to auto-commit or to fetching stable offsets reaches both protocols.

Works on the consumer's ``SubscriptionState`` (subscription.py), never on the consumer
itself. Imports josefk.protocol and josefk.client's cluster, errors, offsets, subscription
and types modules; never josefk.client.consumer, josefk.storage or josefk.broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from josefk.client.cluster import KafkaClient, find_coordinator
from josefk.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from josefk.client.offsets import commit_offsets, fetch_committed_offsets
from josefk.client.subscription import GroupMemberConfig, SubscriptionState
from josefk.client.types import TopicPartition
from josefk.protocol.errors import ErrorCode

log = logging.getLogger("josefk.client.membership")

# Errors that mean "find the coordinator again".
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


class GroupMembership:
    """One consumer's membership in its group; see the module docstring. All methods run
    on the consumer's loop; ``commit`` may run beside the background task."""

    member_id: str

    def __init__(
        self, client: KafkaClient, config: GroupMemberConfig, subscriptions: SubscriptionState
    ) -> None:
        assert config.group_id is not None
        self._client = client
        self.config = config
        self.group_id: str = config.group_id
        # What the consumer consumes: the member sets the assignment there, reads the
        # positions to commit and has the rebalance listener told.
        self._subscriptions = subscriptions
        self._coordinator: int | None = None
        self._topics: list[str] = []
        self._interval_s = config.heartbeat_interval_ms / 1000
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._joined = asyncio.Event()
        self._next_auto_commit = 0.0
        self._closing = False

    # ------------------------------------------------------------------ what a protocol supplies

    async def _step(self) -> None:
        """One round of the protocol: join or heartbeat as needed, auto-commit, wait."""
        raise NotImplementedError

    async def _leave(self, *, closing: bool = False) -> None:
        """Leave the group (unsubscribe, or ``closing`` the consumer)."""
        raise NotImplementedError

    def _subscription_changed(self) -> None:
        """The topics changed: the next round tells the group."""
        raise NotImplementedError

    def _commit_identity(self) -> tuple[int, str, str | None]:
        """(generation or member epoch, member id, group instance id) a subscribed member
        commits with; (-1, "", None) while it has none."""
        raise NotImplementedError

    def _may_auto_commit(self) -> bool:
        """Whether the positions may be committed now."""
        return True

    def _on_error(self, exc: KafkaError) -> None:
        """A round failed with ``exc`` (the coordinator is already forgotten if need be)."""

    # ------------------------------------------------------------------ the consumer's calls

    @property
    def subscribed(self) -> bool:
        return bool(self._topics)

    @property
    def joined(self) -> asyncio.Event:
        """Set while the member holds an assignment of the group's current generation/epoch."""
        return self._joined

    def subscribe(self, topics: Sequence[str]) -> None:
        self._topics = sorted(set(topics))
        self._client.add_topics(self._topics)
        self._subscription_changed()
        self._wakeup.set()

    async def unsubscribe(self) -> None:
        self._topics = []
        await self._leave()
        self._wakeup.set()

    def start(self) -> None:
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        self._task = asyncio.ensure_future(self._run())

    def polled(self) -> None:
        """The user polled: nothing to do, heartbeats run in the background task."""

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001  our own task, cancelled; _run logged what it met
                pass
        if self.config.enable_auto_commit and self._may_auto_commit():
            try:
                await self.commit(self._subscriptions.positions())
            except KafkaError as exc:
                log.warning("final auto-commit of group %s failed: %s", self.group_id, exc)
        await self._leave(closing=True)

    # ------------------------------------------------------------------ coordinator

    async def _ensure_coordinator(self) -> int:
        if self._coordinator is None:
            self._coordinator = await find_coordinator(self._client, self.group_id)
        return self._coordinator

    def _coordinator_dead(self) -> None:
        self._coordinator = None

    async def _request(
        self, api_key: int, body: object, *, timeout_s: float | None = None
    ) -> Any:  # the response of ``api_key``: callers annotate the variable they assign it to
        node_id = await self._ensure_coordinator()
        try:
            return await self._client.request(node_id, api_key, body, timeout_s=timeout_s)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._coordinator_dead()
            raise

    # ------------------------------------------------------------------ the loop

    def _backoff_s(self, attempt: int) -> float:
        return min(1.0, self.config.retry_backoff_ms / 1000 * 2.0 ** min(attempt, 5))

    async def _run(self) -> None:
        attempt = 0
        while True:
            try:
                await self._step()
                attempt = 0
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                attempt += 1
                if exc.code in COORDINATOR_ERRORS or isinstance(
                    exc, (KafkaConnectionError, KafkaTimeoutError)
                ):
                    self._coordinator_dead()
                self._on_error(exc)
                log.info("group %s: %s (attempt %d)", self.group_id, exc, attempt)
                await asyncio.sleep(self._backoff_s(attempt))
            except Exception:
                attempt += 1
                log.exception("group %s: unexpected error", self.group_id)
                await asyncio.sleep(self._backoff_s(attempt))

    async def _wait_interval(self) -> None:
        """Until the next heartbeat or auto-commit is due, or something wakes the loop."""
        interval = self._interval_s
        if self.config.enable_auto_commit:
            interval = min(interval, max(0.0, self._next_auto_commit - time.monotonic()))
        try:
            async with asyncio.timeout(interval):
                await self._wakeup.wait()
        except TimeoutError:
            pass
        self._wakeup.clear()

    async def _maybe_auto_commit(self) -> None:
        if not self.config.enable_auto_commit or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        positions = self._subscriptions.positions()
        if positions and self._may_auto_commit():
            try:
                await self.commit(positions)
            except KafkaError as exc:
                log.info("auto-commit of group %s failed: %s", self.group_id, exc)
                self._on_error(exc)

    # ------------------------------------------------------------------ offsets

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit as this member while subscribed, as a simple (generation -1) commit when
        the consumer assigned its partitions itself."""
        if not offsets:
            return
        generation, member_id, instance_id = (
            self._commit_identity() if self._topics else (-1, "", None)
        )
        await commit_offsets(
            self._client,
            await self._ensure_coordinator(),
            self.group_id,
            offsets,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
        )

    async def fetch_committed(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The committed offsets; a read_committed consumer asks for stable ones (KIP-447)
        and waits, up to ``request_timeout_ms``, while a transaction holds offsets of the
        group pending, as Kafka's consumer does, instead of starting from older ones."""
        require_stable = self.config.isolation_level == "read_committed"
        clock = self.config.clock
        unstable_deadline = clock() + self.config.request_timeout_ms / 1000
        attempt = 0
        while True:
            try:
                return await fetch_committed_offsets(
                    self._client,
                    await self._ensure_coordinator(),
                    self.group_id,
                    list(partitions),
                    require_stable=require_stable,
                )
            except KafkaError as exc:
                if exc.code == ErrorCode.UNSTABLE_OFFSET_COMMIT and clock() < unstable_deadline:
                    await asyncio.sleep(
                        min(self.config.retry_backoff_max_ms, self.config.retry_backoff_ms) / 1000
                    )
                    continue
                if not exc.retriable and exc.code not in COORDINATOR_ERRORS:
                    raise
                self._coordinator_dead()
                if attempt == 4:
                    raise
                await asyncio.sleep(self.config.retry_backoff_ms / 1000 * 2**attempt)
                attempt += 1
