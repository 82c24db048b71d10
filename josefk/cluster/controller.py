"""The controller's decisions applied to etcd: topic lifecycle, leader elections, shutdowns.

Owns ``ClusterController``, which exists on the one broker that holds the controller claim.
Each operation reads the state it needs from etcd, decides with ``placement`` and
``election``, and writes through ``EtcdMetadataStore.controller_write``: fenced by the
controller's claim, and for a partition also by the partition's modification revision, so a
leader's concurrent ISR change makes the controller's write fail and be decided again on the
fresh state instead of overwriting it.

Failover, as the controller sees it: a broker's lease expires -> its key leaves
``P/brokers`` -> ``on_brokers_changed(live)`` -> for every partition it led, the first live ISR
member in replica order leads with leader epoch + 1 and the dead broker leaves the ISR; for
every partition it only followed, it leaves the ISR. Brokers see the new states by watch.

Its errors are josefk.cluster.errors' (re-exported here); etcd's own never leave it.

Imports josefk.cluster only.
"""

from __future__ import annotations

import functools
import logging
import random
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence

from josefk.cluster.election import (
    elect_after_failure,
    elect_for_controlled_shutdown,
    elect_preferred,
    remove_from_isr,
)
from josefk.cluster.errors import (
    ControllerFencedError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    TopicExistsError,
    UnknownTopicError,
)
from josefk.cluster.metadata_store import EtcdMetadataStore, etcd_errors_translated
from josefk.cluster.placement import InvalidReplicationFactorError, assign_replicas
from josefk.cluster.reassignment import (
    ReassignmentError,
    cancel_reassignment,
    complete_reassignment,
    original_replicas,
    start_reassignment,
)
from josefk.cluster.values import (
    ControllerClaim,
    PartitionState,
    TopicRecord,
    VersionedPartitionState,
)

logger = logging.getLogger(__name__)

__all__ = [
    "ClusterController",
    "ControllerFencedError",
    "InvalidPartitionsError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "NoReassignmentInProgressError",
    "ReassignmentError",
    "TopicExistsError",
    "UnknownTopicError",
]

# How often one partition's change is decided again after losing a race with its leader's
# ISR change; each retry reads the fresh state, so two is already unusual.
_MAX_RETRIES = 20


Decision = Callable[[PartitionState], PartitionState | None]


class ClusterController:
    """The active controller's operations. Safe to call concurrently: every write is one
    fenced etcd transaction checked against the state it was decided on."""

    def __init__(
        self,
        store: EtcdMetadataStore,
        claim: ControllerClaim,
        *,
        unclean_leader_election: bool = False,
        rng: random.Random | None = None,
        on_leader_elected: Callable[[float, bool], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.claim = claim
        self.unclean_leader_election = unclean_leader_election
        self._rng = rng if rng is not None else random.Random()
        # Told of each leader change this controller wrote: (seconds from the decision to
        # etcd accepting it, whether the new leader was outside the ISR).
        self._on_leader_elected = on_leader_elected
        self._clock = clock

    # -- topics --------------------------------------------------------------------------

    @etcd_errors_translated
    async def create_topic(
        self,
        name: str,
        *,
        partitions: int,
        replication_factor: int,
        live_brokers: Mapping[int, str | None],
        configs: Mapping[str, str] | None = None,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicRecord:
        """Create a topic: replicas placed as Kafka places them (or as ``assignments`` say),
        each partition led by its first replica with the whole replica set in sync.

        Existence is checked first, as Kafka's controller does: an existing topic is
        TopicExistsError whatever else the request gets wrong (a replication factor the live
        brokers cannot hold while one is down, say). ``validate_only``: every check made,
        nothing written (the record returned is the one that would have been)."""
        if await self.store.topic_revision(name) is not None:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if assignments:
            replica_lists = [list(a) for a in assignments]
            self._check_assignments(replica_lists, live_brokers)
        else:
            if partitions <= 0:
                raise InvalidPartitionsError("number of partitions must be larger than 0")
            replica_lists = assign_replicas(
                partitions, replication_factor, live_brokers, rng=self._rng
            )
        topic = TopicRecord(name, _new_topic_id(), len(replica_lists), dict(configs or {}))
        if validate_only:
            return topic
        states = [PartitionState(tuple(r), r[0], 0, tuple(r)) for r in replica_lists]
        if not await self.store.create_topic(self.claim, topic, states):
            await self._raise_if_fenced()
            raise TopicExistsError(f"Topic '{name}' already exists.")
        logger.info("created topic %s: %s", name, replica_lists)
        return topic

    @etcd_errors_translated
    async def create_partitions(
        self,
        name: str,
        total: int,
        *,
        live_brokers: Mapping[int, str | None],
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicRecord:
        """Grow a topic to ``total`` partitions, placed as at creation (the topic's
        replication factor) or as ``assignments`` say. ``validate_only``: every check
        made, nothing written."""
        snapshot = await self.store.snapshot()
        topic = snapshot.topics.get(name)
        if topic is None:
            raise UnknownTopicError(name)
        if total <= topic.partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {topic.partitions} partitions; {total} is not more"
            )
        new_count = total - topic.partitions
        first = snapshot.partitions.get((name, 0))
        rf = len(first.state.replicas) if first is not None else 1
        if assignments:
            replica_lists = [list(a) for a in assignments]
            if len(replica_lists) != new_count:
                raise InvalidReplicaAssignmentError(
                    f"{len(replica_lists)} assignments given for {new_count} new partitions"
                )
            self._check_assignments(replica_lists, live_brokers)
        else:
            replica_lists = assign_replicas(
                new_count, rf, live_brokers, rng=self._rng, first_partition=topic.partitions
            )
        if validate_only:
            return TopicRecord(topic.name, topic.topic_id, total, topic.configs)
        tx = self.store.client.transactions
        topic_key = self.store.key("topics", name)
        current = await self.store.client.get(topic_key)
        # The record as guarded, not as in the snapshot: any broker may have changed the
        # topic's configs since, and the grown record must keep them.
        stored = TopicRecord.decode(current.value) if current is not None else None
        if stored is None or stored.partitions != topic.partitions:
            raise InvalidPartitionsError(f"topic {name!r} changed meanwhile; try again")
        grown = TopicRecord(stored.name, stored.topic_id, total, stored.configs)
        puts = []
        for index, replicas in enumerate(replica_lists, start=topic.partitions):
            state = PartitionState(tuple(replicas), replicas[0], 0, tuple(replicas))
            puts.append((self.store.key("partitions", name, index), state.encode()))
        # The grown record last: readers believe the new partitions once it names them.
        puts.append((topic_key, grown.encode()))
        if current is None or not await self.store.controller_write(
            self.claim, puts, guards=[tx.mod(topic_key) == current.mod_revision]
        ):
            await self._raise_if_fenced()
            raise InvalidPartitionsError(f"topic {name!r} changed meanwhile; try again")
        return grown

    @etcd_errors_translated
    async def delete_topic(self, name: str) -> None:
        snapshot = await self.store.snapshot()
        topic = snapshot.topics.get(name)
        if topic is None:
            raise UnknownTopicError(name)
        if not await self.store.delete_topic(self.claim, name, topic.partitions):
            await self._raise_if_fenced()
        logger.info("deleted topic %s", name)

    def _check_assignments(
        self, replica_lists: list[list[int]], live_brokers: Mapping[int, str | None]
    ) -> None:
        sizes = {len(r) for r in replica_lists}
        if len(sizes) != 1 or 0 in sizes:
            raise InvalidReplicaAssignmentError("every partition needs the same number of replicas")
        for replicas in replica_lists:
            if len(set(replicas)) != len(replicas):
                raise InvalidReplicaAssignmentError(f"duplicate replica in {replicas}")
            unknown = [b for b in replicas if b not in live_brokers]
            if unknown:
                raise InvalidReplicaAssignmentError(f"unknown or dead brokers {unknown}")

    # -- leadership ----------------------------------------------------------------------

    @etcd_errors_translated
    async def on_brokers_changed(self, live: Collection[int]) -> int:
        """Elect new leaders where the leader is gone (or returns to a leaderless partition)
        and drop dead followers from ISRs. Returns the number of partitions changed."""
        live = set(live)

        def decide(state: PartitionState) -> PartitionState | None:
            elected = elect_after_failure(state, live, unclean=self.unclean_leader_election)
            if elected is not None:
                return elected
            if state.leader == -1:
                return None
            return remove_from_isr(state, [b for b in state.isr if b not in live])

        return await self._apply_to_all(decide)

    @etcd_errors_translated
    async def elect_preferred_leaders(
        self, live: Collection[int], partitions: Collection[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], bool]:
        """Preferred-replica election (ElectLeaders, auto.leader.rebalance.enable): for each
        partition, whether its preferred replica leads afterwards."""
        live = set(live)
        await self._apply_to_all(lambda s: elect_preferred(s, live), only=partitions)
        snapshot = await self.store.snapshot()
        keys = partitions if partitions is not None else list(snapshot.partitions)
        return {
            key: key in snapshot.partitions
            and snapshot.partitions[key].state.leader == snapshot.partitions[key].state.replicas[0]
            for key in keys
        }

    @etcd_errors_translated
    async def elect_unclean_leaders(
        self, live: Collection[int], partitions: Collection[tuple[str, int]]
    ) -> dict[tuple[str, int], bool]:
        """ElectLeaders of type unclean: a leaderless partition gets a live replica even if it
        is out of sync (acknowledged records it lacks are lost). Per partition, whether it has
        a live leader afterwards."""
        live = set(live)
        await self._apply_to_all(
            lambda s: elect_after_failure(s, live, unclean=True), only=partitions
        )
        snapshot = await self.store.snapshot()
        return {
            key: key in snapshot.partitions and snapshot.partitions[key].state.leader in live
            for key in partitions
        }

    @etcd_errors_translated
    async def controlled_shutdown(self, broker_id: int, live: Collection[int]) -> int:
        """Move leadership off a broker that is stopping; returns how many partitions it
        still leads (those with no other in-sync replica)."""
        live = set(live)
        await self._apply_to_all(lambda s: elect_for_controlled_shutdown(s, live, {broker_id}))
        snapshot = await self.store.snapshot()
        return sum(1 for v in snapshot.partitions.values() if v.state.leader == broker_id)

    # -- reassignment (KIP-455) -----------------------------------------------------------

    @etcd_errors_translated
    async def alter_partition_reassignments(
        self,
        requested: Mapping[tuple[str, int], Sequence[int] | None],
        live: Collection[int],
        *,
        allow_replication_factor_change: bool = True,
    ) -> dict[tuple[str, int], Exception | None]:
        """Start (target replicas) or cancel (None) the reassignment of each partition; per
        partition None when accepted, else the reason. Completion follows as the new
        replicas join the ISR (``complete_reassignments``)."""
        live = set(live)
        snapshot = await self.store.snapshot()
        results: dict[tuple[str, int], Exception | None] = {}
        for key, target in requested.items():
            versioned = snapshot.partitions.get(key)
            try:
                if versioned is None:
                    raise UnknownTopicError(f"{key[0]}-{key[1]} does not exist")
                decide: Decision
                if target is None:
                    if not versioned.state.reassigning:
                        raise NoReassignmentInProgressError(f"{key[0]}-{key[1]} is not moving")
                    decide = functools.partial(_cancel_or_raise, live=live)
                else:
                    wanted = tuple(target)
                    self._check_assignments([list(wanted)], {b: None for b in live})
                    if not allow_replication_factor_change and len(wanted) != len(
                        original_replicas(versioned.state)
                    ):
                        raise InvalidReplicationFactorError(
                            f"{key[0]}-{key[1]} has {len(original_replicas(versioned.state))} "
                            f"replicas; the request asks for {len(wanted)} and forbids a change"
                        )
                    decide = functools.partial(_start, target=wanted, live=live)
                await self._apply(key, versioned, decide)
                results[key] = None
            except (
                UnknownTopicError,
                NoReassignmentInProgressError,
                InvalidReplicaAssignmentError,
                InvalidReplicationFactorError,
                ReassignmentError,
            ) as exc:
                results[key] = exc
        return results

    @etcd_errors_translated
    async def complete_reassignments(self, live: Collection[int]) -> int:
        """Finish every reassignment whose target replicas are all in sync."""
        live = set(live)
        return await self._apply_to_all(lambda s: complete_reassignment(s, live))

    async def _apply_to_all(
        self, decide: Decision, *, only: Collection[tuple[str, int]] | None = None
    ) -> int:
        snapshot = await self.store.snapshot()
        changed = 0
        wanted = set(only) if only is not None else None
        for key, versioned in sorted(snapshot.partitions.items()):
            if wanted is not None and key not in wanted:
                continue
            if await self._apply(key, versioned, decide):
                changed += 1
        return changed

    async def _apply(
        self, key: tuple[str, int], versioned: VersionedPartitionState | None, decide: Decision
    ) -> bool:
        topic, partition = key
        started = self._clock()
        for _ in range(_MAX_RETRIES):
            if versioned is None:
                return False
            new = decide(versioned.state)
            if new is None:
                return False
            if await self.store.controller_set_partition(
                self.claim, topic, partition, versioned, new
            ):
                old = versioned.state
                if (
                    self._on_leader_elected is not None
                    and new.leader >= 0
                    and (new.leader != old.leader)
                ):
                    self._on_leader_elected(self._clock() - started, new.leader not in old.isr)
                logger.info(
                    "partition %s-%d: leader %d epoch %d isr %s",
                    topic,
                    partition,
                    new.leader,
                    new.leader_epoch,
                    list(new.isr),
                )
                return True
            await self._raise_if_fenced()
            versioned = await self.store.partition_state(topic, partition)
        raise RuntimeError(f"partition {topic}-{partition} kept changing under the controller")

    async def _raise_if_fenced(self) -> None:
        snapshot = await self.store.snapshot()
        if snapshot.controller != self.claim:
            raise ControllerFencedError(
                f"controller epoch {self.claim.controller_epoch} was superseded by "
                f"{snapshot.controller}"
            )


def _start(
    state: PartitionState, *, target: tuple[int, ...], live: Collection[int]
) -> PartitionState | None:
    return start_reassignment(state, target, live)


def _cancel_or_raise(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    if not state.reassigning:
        return None  # finished meanwhile
    cancelled = cancel_reassignment(state, live)
    if cancelled is None:
        raise ReassignmentError("no original replica is in sync to lead: let it finish instead")
    return cancelled


def _new_topic_id() -> str:
    """A topic id as Kafka writes it: a random UUID, base64-url without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
