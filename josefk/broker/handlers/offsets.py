"""Committed-offset APIs: OffsetCommit (v2-v9), OffsetFetch (v1-v9) and OffsetDelete.

A commit for a partition that does not exist in the cluster is refused with
UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees it, as Kafka's request handler does: the
check is against the cluster's metadata, not this broker's replicas (a group's coordinator
leads its ``__consumer_offsets`` partition, not its topics), and a topic this broker's view
does not know yet (created a moment ago through another broker) is waited for
(``TopicAdmin.await_topics``) before it is refused. Everything else is the coordinator's. OffsetFetch answers -1 and no error for a partition or group without a
commit, and from v7 with ``require_stable`` UNSTABLE_OFFSET_COMMIT (retriable) for a partition
whose transactional offset is still pending, or whose commit is still being replicated (a
cluster: the coordinator shows a commit only once the offsets topic's in-sync replicas hold
it). Versions that name topics by id (v10) are not served. TxnOffsetCommit is in
josefk.broker.handlers.txn_offset_commit.

Authorization, as Kafka's: OffsetCommit needs READ on the group (every partition
GROUP_AUTHORIZATION_FAILED otherwise) and READ on each topic (TOPIC_AUTHORIZATION_FAILED for
its partitions, also in TxnOffsetCommit through ``commit_entries``); OffsetFetch DESCRIBE on
the group and on each topic (a topic the principal may not DESCRIBE is left out of an
all-topics answer); OffsetDelete DELETE on the group and READ on each topic.

Imports josefk.protocol and the group package; must not import the server or network layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from josefk.broker.context import RequestContext
from josefk.broker.group.coordinator import GroupCoordinator, OffsetCommitEntry
from josefk.broker.group.group import CommittedOffset
from josefk.broker.group.store import replication_error
from josefk.broker.handlers import handles
from josefk.broker.handlers.groups import coordinator_of, may_read_group, wait_replicated
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TxnOffsetCommitRequest,
)

OFFSET_COMMIT: Final = OffsetCommitResponse
OFFSET_FETCH: Final = OffsetFetchResponse
OFFSET_DELETE: Final = OffsetDeleteResponse


@handles(ApiKey.OFFSET_COMMIT, max_version=9)
async def handle_offset_commit(
    context: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    version = context.api_version
    coordinator = coordinator_of(context)
    entries, slots = await commit_entries(context, request.topics, leader_epochs=version >= 6)
    if not may_read_group(context, request.group_id):
        slots = [(name, index, ErrorCode.GROUP_AUTHORIZATION_FAILED) for name, index, _ in slots]
        results = []
    elif coordinator is None:
        results = [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(entries)
    elif entries:
        results = coordinator.commit_offsets(
            request.group_id,
            request.generation_id_or_member_epoch,
            request.member_id,
            request.group_instance_id if version >= 7 else None,
            entries,
            retention_ms=request.retention_time_ms if version <= 4 else -1,
            api_version=version,
        )
        results = await replicated(context, coordinator, results)
    else:
        results = []
    return OFFSET_COMMIT(
        topics=[
            OFFSET_COMMIT.OffsetCommitResponseTopic(
                name=name,
                partitions=[
                    OFFSET_COMMIT.OffsetCommitResponsePartition(
                        partition_index=index, error_code=error
                    )
                    for index, error in partitions
                ],
            )
            for name, partitions in errors_by_topic(slots, results).items()
        ]
    )


Slot = tuple[str, int, ErrorCode | None]


async def commit_entries(
    context: RequestContext,
    topics: Sequence[
        OffsetCommitRequest.OffsetCommitRequestTopic
        | TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    ],
    *,
    leader_epochs: bool,
) -> tuple[list[OffsetCommitEntry], list[Slot]]:
    """The commit entries of an OffsetCommit / TxnOffsetCommit request's topics, and a slot
    per partition in request order: the error already known (a partition that does not exist
    in the cluster: UNKNOWN_TOPIC_OR_PARTITION, as Kafka's request handler refuses it before
    the coordinator), or None where the coordinator's result goes."""
    readable = context.authorized_names(
        AclOperation.READ, ResourceType.TOPIC, {topic.name for topic in topics}
    )
    known = await existing_partitions(
        context,
        [(t.name, p.partition_index) for t in topics if t.name in readable for p in t.partitions],
    )
    entries: list[OffsetCommitEntry] = []
    slots: list[Slot] = []
    for topic in topics:
        for p in topic.partitions:
            if topic.name not in readable:
                slots.append((topic.name, p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if (topic.name, p.partition_index) not in known:
                slots.append((topic.name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            slots.append((topic.name, p.partition_index, None))
            entries.append(
                OffsetCommitEntry(
                    topic.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if leader_epochs else -1,
                    p.committed_metadata,
                )
            )
    return entries, slots


async def existing_partitions(
    context: RequestContext, asked: list[tuple[str, int]]
) -> set[tuple[str, int]]:
    """The partitions of ``asked`` that exist in the cluster, whoever hosts them. In a
    cluster, topics this broker's metadata view lacks are first waited for, so that one just
    created through another broker is not refused while the view catches up."""
    broker = context.broker
    metadata = broker.metadata
    if metadata is None:  # not yet started: this broker's own partitions are all it knows
        replicas = broker.replica_manager
        return {tp for tp in asked if replicas.get_partition(*tp) is not None}
    known = {tp for tp in asked if metadata.partition(*tp) is not None}
    # A partition past a known topic's count may come from a CreatePartitions just made: its
    # topic is waited for too.
    missing = {name for name, index in asked if (name, index) not in known}
    if missing:
        await broker.topic_admin.await_topics(missing)
        known = {tp for tp in asked if metadata.partition(*tp) is not None}
    return known


def errors_by_topic(
    slots: list[Slot], results: list[ErrorCode]
) -> dict[str, list[tuple[int, ErrorCode]]]:
    """Each partition's error by topic, in request order: the slot's own, else the next of
    the coordinator's ``results`` (one per entry of ``commit_entries``)."""
    answers = iter(results)
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for name, index, refused in slots:
        by_topic.setdefault(name, []).append(
            (index, refused if refused is not None else next(answers))
        )
    return by_topic


async def replicated(
    context: RequestContext, coordinator: GroupCoordinator, results: list[ErrorCode]
) -> list[ErrorCode]:
    """Answer a commit only once the offsets topic's in-sync replicas hold it, as Kafka's
    coordinator appends with acks=-1: a commit answered is a commit a new coordinator has.
    Failing that within offsets.commit.timeout.ms, the commits are answered with Kafka's
    translation of the append error and the client retries. Either way the coordinator
    makes the commit visible or drops it (``wait_replicated``); call this right after the
    coordinator call that appended, with nothing awaited in between."""
    failed = await wait_replicated(context, coordinator)
    if failed is None:
        return results
    error = replication_error(failed)
    return [e or error for e in results]


_Answer = tuple[int, CommittedOffset | None, ErrorCode]


def _fetch_group(
    context: RequestContext,
    group_id: str,
    topics: Sequence[
        OffsetFetchRequest.OffsetFetchRequestTopic | OffsetFetchRequest.OffsetFetchRequestTopics
    ]
    | None,
    require_stable: bool,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[ErrorCode, dict[str, list[_Answer]]]:
    coordinator = coordinator_of(context)
    if not context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
    if error := coordinator.ownership_error(group_id):
        return error, {}
    # v9+: a consumer group member fetches at its member epoch (KIP-848).
    if error := coordinator.validate_offset_fetch(group_id, *member):
        return error, {}
    checked = context.broker.authorizer is not None
    by_topic: dict[str, list[_Answer]] = {}
    wanted: list[tuple[str, int]] | None = None
    if topics is not None:
        wanted = []
        for topic in topics:
            if checked and not context.authorize(
                AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name
            ):
                by_topic[topic.name] = [
                    (index, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for index in topic.partition_indexes
                ]
            else:
                wanted.extend((topic.name, index) for index in topic.partition_indexes)
    for name, partition, committed in coordinator.fetch_offsets(group_id, wanted):
        if (
            checked
            and topics is None
            and not context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        ):
            continue
        if require_stable and coordinator.is_unstable(group_id, name, partition):
            # As Kafka: no offset, and a retriable error until the transaction completes.
            by_topic.setdefault(name, []).append(
                (partition, None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
            )
        else:
            by_topic.setdefault(name, []).append((partition, committed, ErrorCode.NONE))
    return ErrorCode.NONE, by_topic


@handles(ApiKey.OFFSET_FETCH, max_version=9)
def handle_offset_fetch(
    context: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    version = context.api_version
    require_stable = version >= 7 and bool(request.require_stable)
    if version >= 8:
        groups = []
        for group in request.groups:
            member = (group.member_id, group.member_epoch) if version >= 9 else (None, -1)
            error, by_topic = _fetch_group(
                context, group.group_id, group.topics, require_stable, member
            )
            groups.append(
                OFFSET_FETCH.OffsetFetchResponseGroup(
                    group_id=group.group_id,
                    topics=[
                        OFFSET_FETCH.OffsetFetchResponseTopics(
                            name=name,
                            partitions=[
                                OFFSET_FETCH.OffsetFetchResponsePartitions(
                                    partition_index=index,
                                    committed_offset=-1 if c is None else c.offset,
                                    committed_leader_epoch=-1 if c is None else c.leader_epoch,
                                    metadata="" if c is None else c.metadata,
                                    error_code=partition_error,
                                )
                                for index, c, partition_error in partitions
                            ],
                        )
                        for name, partitions in by_topic.items()
                    ],
                    error_code=error,
                )
            )
        return OFFSET_FETCH(groups=groups)
    error, by_topic = _fetch_group(context, request.group_id, request.topics, require_stable)
    # Before v2 there is no top-level error: it goes on every partition, the requested ones
    # when the group itself failed (Kafka's getErrorResponse), not on an empty answer.
    group_error = error if version < 2 else ErrorCode.NONE
    if group_error and request.topics is not None:
        by_topic = {
            topic.name: [(index, None, group_error) for index in topic.partition_indexes]
            for topic in request.topics
        }
    return OFFSET_FETCH(
        topics=[
            OFFSET_FETCH.OffsetFetchResponseTopic(
                name=name,
                partitions=[
                    OFFSET_FETCH.OffsetFetchResponsePartition(
                        partition_index=index,
                        committed_offset=-1 if c is None else c.offset,
                        committed_leader_epoch=-1 if c is None else c.leader_epoch,
                        metadata="" if c is None else c.metadata,
                        error_code=group_error or partition_error,
                    )
                    for index, c, partition_error in partitions
                ],
            )
            for name, partitions in by_topic.items()
        ],
        error_code=error,
    )


@handles(ApiKey.OFFSET_DELETE)
def handle_offset_delete(
    context: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    coordinator = coordinator_of(context)
    if not context.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return OFFSET_DELETE(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if coordinator is None:
        return OFFSET_DELETE(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    readable = context.authorized_names(
        AclOperation.READ, ResourceType.TOPIC, {t.name for t in request.topics}
    )
    asked = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    wanted = [(name, index) for name, index in asked if name in readable]
    top, errors = coordinator.delete_offsets(request.group_id, wanted)
    if top:
        return OFFSET_DELETE(error_code=top)
    done = dict(zip(wanted, errors, strict=True))
    by_topic: dict[str, list[OffsetDeleteResponse.OffsetDeleteResponsePartition]] = {}
    for name, index in asked:
        error = done.get((name, index), ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        by_topic.setdefault(name, []).append(
            OFFSET_DELETE.OffsetDeleteResponsePartition(partition_index=index, error_code=error)
        )
    return OFFSET_DELETE(
        topics=[
            OFFSET_DELETE.OffsetDeleteResponseTopic(name=name, partitions=partitions)
            for name, partitions in by_topic.items()
        ]
    )
