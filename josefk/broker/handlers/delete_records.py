"""DeleteRecords (21): raise a partition's log start offset (the "low watermark").

Offset -1 means the high watermark. An offset past the high watermark is refused with
OFFSET_OUT_OF_RANGE, as Kafka does; segments wholly below the new log start offset go.
The records of an internal topic cannot be deleted: INVALID_TOPIC_EXCEPTION, as Kafka answers
(the response has no message field). Only the partition's leader deletes (clients send the
request to it); a follower in a cluster answers NOT_LEADER_OR_FOLLOWER and takes the new log
start offset from the leader's fetch responses.

The leader answers a partition once its low watermark, the smallest log start offset over
itself and every follower on a live broker, has reached the offset (Kafka's delayed
delete-records): followers report their log start offsets in their fetches, and the replica
manager's DeleteRecords purgatory holds the answer until then. The ``low_watermark`` answered
is that value. On a single node (no followers) the answer is immediate. A partition still
short at the request's ``timeout_ms`` gets REQUEST_TIMED_OUT (its log start offset on the
leader has moved all the same), one whose leadership moved meanwhile NOT_LEADER_OR_FOLLOWER.

DELETE on the topic is needed (TOPIC_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from josefk.broker.catalog import is_internal_topic
from josefk.broker.context import RequestContext
from josefk.broker.errors import error_code_for
from josefk.broker.handlers import Reply, handles
from josefk.broker.partition import TopicPartition
from josefk.broker.replica_manager import DeleteRecordsOutcome
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import DeleteRecordsRequest, DeleteRecordsResponse

Response = DeleteRecordsResponse
TopicResult = Response.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult


@handles(ApiKey.DELETE_RECORDS)
def handle_delete_records(
    context: RequestContext, request: DeleteRecordsRequest
) -> Reply[DeleteRecordsResponse]:
    replicas = context.broker.replica_manager
    refused: dict[tuple[str, int], ErrorCode] = {}
    entries: list[tuple[TopicPartition, int]] = []
    for topic in request.topics:
        internal = is_internal_topic(topic.name)
        deletable = context.authorize(AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        for wanted in topic.partitions:
            if not deletable:
                refused[(topic.name, wanted.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif internal:
                refused[(topic.name, wanted.partition_index)] = ErrorCode.INVALID_TOPIC_EXCEPTION
            else:
                entries.append((TopicPartition(topic.name, wanted.partition_index), wanted.offset))
    outcomes = replicas.delete_records(entries)
    if any(o.pending for o in outcomes):
        return _respond_after_low_watermark(context, request, outcomes, refused)
    return _respond(request, outcomes, refused)


async def _respond_after_low_watermark(
    context: RequestContext,
    request: DeleteRecordsRequest,
    outcomes: list[DeleteRecordsOutcome],
    refused: dict[tuple[str, int], ErrorCode],
) -> DeleteRecordsResponse:
    await context.broker.replica_manager.wait_for_low_watermark(outcomes, request.timeout_ms)
    return _respond(request, outcomes, refused)


def _respond(
    request: DeleteRecordsRequest,
    outcomes: list[DeleteRecordsOutcome],
    refused: dict[tuple[str, int], ErrorCode],
) -> DeleteRecordsResponse:
    by_partition = {(o.tp.topic, o.tp.partition): o for o in outcomes}
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            key = (topic.name, wanted.partition_index)
            low_watermark, error = -1, refused.get(key, ErrorCode.NONE)
            outcome = by_partition.get(key)
            if outcome is not None:
                low_watermark = outcome.low_watermark
                if outcome.error is not None:
                    error = error_code_for(outcome.error)
            partitions.append(
                PartitionResult(
                    partition_index=wanted.partition_index,
                    low_watermark=low_watermark,
                    error_code=error,
                )
            )
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return Response(topics=topics)
