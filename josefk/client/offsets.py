"""Committed offsets of a group: OffsetCommit and OffsetFetch for any group.

Owns ``commit_offsets`` and ``fetch_committed_offsets``, used by both kinds of group member
(membership.py and its two protocols) and by the admin client, which resets the offsets of
an empty group. Imports josefk.protocol and josefk.client's cluster, errors and types; never
a group member module, josefk.storage or josefk.broker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from josefk.client.cluster import KafkaClient
from josefk.client.errors import error_for
from josefk.client.types import TopicPartition
from josefk.protocol import ApiKey
from josefk.protocol.message_types import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)


async def commit_offsets(
    client: KafkaClient,
    node_id: int,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
    metadata: str = "",
) -> None:
    """OffsetCommit; raises the first partition's typed error."""
    if not offsets:
        return
    req = OffsetCommitRequest
    by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            req.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata=metadata,
            )
        )
    body = req(
        group_id=group_id,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        topics=[req.OffsetCommitRequestTopic(name=n, partitions=p) for n, p in by_topic.items()],
    )
    response: OffsetCommitResponse = await client.request(node_id, ApiKey.OFFSET_COMMIT, body)
    for topic in response.topics:
        for part in topic.partitions:
            if part.error_code:
                raise error_for(
                    part.error_code,
                    group=group_id,
                    topic=topic.name,
                    partition=part.partition_index,
                )


async def fetch_committed_offsets(
    client: KafkaClient,
    node_id: int,
    group_id: str,
    partitions: Sequence[TopicPartition] | None,
    *,
    require_stable: bool = False,
) -> dict[TopicPartition, int | None]:
    """OffsetFetch: committed offset per partition (None when nothing is committed).
    ``partitions`` None asks for every partition the group has offsets for.
    ``require_stable`` (KIP-447): a partition with offsets pending in an open transaction
    answers UNSTABLE_OFFSET_COMMIT (raised, retriable) instead of the older offset."""
    req = OffsetFetchRequest
    by_topic: dict[str, list[int]] = {}
    for tp in partitions or ():
        by_topic.setdefault(tp.topic, []).append(tp.partition)

    def build(version: int) -> OffsetFetchRequest:
        if version >= 8:
            topics = (
                None
                if partitions is None
                else [
                    req.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                        name=n, partition_indexes=p
                    )
                    for n, p in by_topic.items()
                ]
            )
            return req(
                groups=[req.OffsetFetchRequestGroup(group_id=group_id, topics=topics)],
                require_stable=require_stable,
            )
        topics7 = (
            None
            if partitions is None
            else [
                req.OffsetFetchRequestTopic(name=n, partition_indexes=p)
                for n, p in by_topic.items()
            ]
        )
        return req(group_id=group_id, topics=topics7, require_stable=require_stable)

    response: OffsetFetchResponse = await client.request(node_id, ApiKey.OFFSET_FETCH, build)
    out: dict[TopicPartition, int | None] = {}
    topics_resp: Sequence[
        OffsetFetchResponse.OffsetFetchResponseTopics | OffsetFetchResponse.OffsetFetchResponseTopic
    ]
    if getattr(response, "groups", None):
        group = response.groups[0]
        if group.error_code:
            raise error_for(group.error_code, group=group_id)
        topics_resp = group.topics
    else:
        if getattr(response, "error_code", 0):
            raise error_for(response.error_code, group=group_id)
        topics_resp = response.topics
    for topic in topics_resp:
        for part in topic.partitions:
            if part.error_code:
                raise error_for(part.error_code, group=group_id, topic=topic.name)
            tp = TopicPartition(topic.name, part.partition_index)
            out[tp] = part.committed_offset if part.committed_offset >= 0 else None
    return out
