"""OffsetForLeaderEpoch (23): where a leader epoch ended, from the leader's epoch cache.

A follower asks it after a leader change to find where its log diverges from the new
leader's (KIP-101/KIP-279) and truncates there before fetching; consumers ask it to detect
log truncation after an unclean leader election (KIP-320). The answer for an epoch is the
largest epoch at or below it that this log knows and the offset where the next one began
(or the log end offset for the current epoch); an epoch newer than any known is answered
(-1, -1).
"""

from __future__ import annotations

from josefk.broker.context import RequestContext
from josefk.broker.errors import error_code_for
from josefk.broker.handlers import handles
from josefk.broker.partition import TopicPartition
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

Response = OffsetForLeaderEpochResponse
TopicResult = Response.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
def handle_offset_for_leader_epoch(
    context: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    replicas = context.broker.replica_manager
    replica_id = request.replica_id if context.api_version >= 3 else -2
    topics = []
    for topic in request.topics:
        partitions = []
        described = context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
        for wanted in topic.partitions:
            epoch, end_offset, error = -1, -1, ErrorCode.NONE
            if not described:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                try:
                    epoch, end_offset = replicas.end_offset_for_leader_epoch(
                        TopicPartition(topic.topic, wanted.partition),
                        current_leader_epoch=wanted.current_leader_epoch,
                        leader_epoch=wanted.leader_epoch,
                        replica_id=replica_id,
                    )
                except Exception as exc:  # noqa: BLE001  per partition, as Kafka answers it
                    error = error_code_for(exc)
            partitions.append(
                EpochEndOffset(
                    error_code=error,
                    partition=wanted.partition,
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        topics.append(TopicResult(topic=topic.topic, partitions=partitions))
    return Response(throttle_time_ms=0, topics=topics)
