"""DeleteRecords (21): raise a partition's log start offset (the "low watermark").

Offset -1 means the high watermark. An offset past the high watermark is refused with
OFFSET_OUT_OF_RANGE, as Kafka does; segments wholly below the new log start offset go.
The records of an internal topic cannot be deleted: INVALID_TOPIC_EXCEPTION, as Kafka answers
(the response has no message field). Only the partition's leader deletes (clients send the
request to it); a follower in a cluster answers NOT_LEADER_OR_FOLLOWER and takes the new log
start offset from the leader's fetch responses.

DELETE on the topic is needed (TOPIC_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from typing import Any

from josefk.broker.catalog import is_internal_topic
from josefk.broker.context import RequestContext
from josefk.broker.errors import error_code_for
from josefk.broker.handlers import handles
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey, response_class
from josefk.protocol.errors import ErrorCode
from josefk.storage.errors import StorageError

Response = response_class(ApiKey.DELETE_RECORDS)
TopicResult = Response.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult

HIGH_WATERMARK = -1


@handles(ApiKey.DELETE_RECORDS)
def handle_delete_records(context: RequestContext, request: Any) -> Any:
    replicas = context.broker.replica_manager
    topics = []
    for topic in request.topics:
        partitions = []
        internal = is_internal_topic(topic.name)
        deletable = context.authorize(AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        for wanted in topic.partitions:
            low_watermark, error = -1, ErrorCode.NONE
            partition = replicas.get_partition(topic.name, wanted.partition_index)
            if not deletable:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif internal:
                error = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif not partition.is_leader:
                # A follower (in a cluster) must not move its own log start: the leader's
                # reaches the followers with its fetch responses.
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                log = partition.log
                offset = log.high_watermark if wanted.offset == HIGH_WATERMARK else wanted.offset
                if offset < 0 or offset > log.high_watermark:
                    error = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    try:
                        low_watermark = log.delete_records(offset)
                    except (StorageError, ValueError) as exc:
                        error = error_code_for(exc)
            partitions.append(
                PartitionResult(
                    partition_index=wanted.partition_index,
                    low_watermark=low_watermark,
                    error_code=error,
                )
            )
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return Response(topics=topics)
