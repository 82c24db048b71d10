"""ListOffsets (2): earliest, latest, max timestamp, or the first offset at a timestamp.

Special timestamps as Kafka defines them: -2 earliest (log start offset), -1 latest (the high
watermark, or the last stable offset for read_committed), -3 the record with the largest
timestamp (KIP-734), -4 earliest local and -5 earliest tiered (both the log start offset: josefk
keeps every segment locally). A timestamp no record reaches answers offset -1. A special
timestamp asked with a version older than the one that defined it, or a negative timestamp
that is none of these, answers UNSUPPORTED_VERSION (Kafka's check, before the partition is
looked up). A partition asked for more than once is INVALID_REQUEST at each place it is asked
(after the ACL check), as Kafka answers.
"""

from __future__ import annotations

from collections import Counter

from josefk.broker.context import RequestContext
from josefk.broker.errors import error_code_for
from josefk.broker.handlers import handles
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import ListOffsetsRequest, ListOffsetsResponse
from josefk.storage.errors import StorageError

Response = ListOffsetsResponse
TopicResponse = Response.ListOffsetsTopicResponse
PartitionResponse = TopicResponse.ListOffsetsPartitionResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
EARLIEST_TIERED = -5
_READ_COMMITTED = 1
# The first version that may ask for each special timestamp (KAFKA-17331); any other
# negative timestamp is no timestamp at all. Both are UNSUPPORTED_VERSION, as Kafka answers.
_SPECIAL_SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, EARLIEST_TIERED: 9}


@handles(ApiKey.LIST_OFFSETS)
def handle_list_offsets(
    context: RequestContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    replicas = context.broker.replica_manager
    read_committed = context.api_version >= 2 and request.isolation_level == _READ_COMMITTED
    asked = Counter(
        (topic.name, wanted.partition_index)
        for topic in request.topics
        for wanted in topic.partitions
    )
    topics = []
    for topic in request.topics:
        partitions = []
        described = context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for wanted in topic.partitions:
            entry = PartitionResponse(
                partition_index=wanted.partition_index,
                error_code=ErrorCode.NONE,
                timestamp=-1,
                offset=-1,
                leader_epoch=-1,
            )
            partition = replicas.get_partition(topic.name, wanted.partition_index)
            if not described:
                entry = _with_error(entry, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif asked[topic.name, wanted.partition_index] > 1:
                entry = _with_error(entry, ErrorCode.INVALID_REQUEST)
            elif wanted.timestamp < 0 and context.api_version < _SPECIAL_SINCE.get(
                wanted.timestamp, 2**31
            ):
                entry = _with_error(entry, ErrorCode.UNSUPPORTED_VERSION)
            elif partition is None:
                entry = _with_error(entry, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif (
                wanted.current_leader_epoch >= 0
                and wanted.current_leader_epoch != partition.leader_epoch
            ):
                entry = _with_error(
                    entry,
                    ErrorCode.FENCED_LEADER_EPOCH
                    if wanted.current_leader_epoch < partition.leader_epoch
                    else ErrorCode.UNKNOWN_LEADER_EPOCH,
                )
            else:
                log = partition.log
                timestamp = wanted.timestamp
                try:
                    if timestamp == LATEST:
                        offset = log.last_stable_offset if read_committed else log.high_watermark
                        found: tuple[int, int] | None = (-1, offset)
                    elif timestamp in (EARLIEST, EARLIEST_LOCAL, EARLIEST_TIERED):
                        found = (-1, log.log_start_offset)
                    else:
                        match = log.fetch_offset_by_timestamp(timestamp)
                        found = None if match is None else (match.timestamp, match.offset)
                except (StorageError, ValueError) as exc:
                    entry = _with_error(entry, error_code_for(exc))
                else:
                    if found is not None:
                        entry = PartitionResponse(
                            partition_index=wanted.partition_index,
                            error_code=ErrorCode.NONE,
                            timestamp=found[0],
                            offset=found[1],
                            leader_epoch=partition.leader_epoch,
                        )
            partitions.append(entry)
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
    return Response(topics=topics)


def _with_error(
    entry: ListOffsetsResponse.ListOffsetsPartitionResponse, error: ErrorCode
) -> ListOffsetsResponse.ListOffsetsPartitionResponse:
    return PartitionResponse(
        partition_index=entry.partition_index,
        error_code=error,
        timestamp=-1,
        offset=-1,
        leader_epoch=-1,
    )
