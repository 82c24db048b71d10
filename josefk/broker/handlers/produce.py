"""Produce (0): validate each partition's batches, assign offsets in place and append.

Work is per batch: the record bytes arrive as a memoryview into the request frame, get their
offsets written in place by the log and go to the segment file without a copy. With acks=-1
the request is complete once the high watermark passes the appended offsets; with the leader
as the only in-sync replica that is at once, unless ``min.insync.replicas`` asks for more
replicas than are in sync (NOT_ENOUGH_REPLICAS), as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from josefk.broker.context import RequestContext
from josefk.broker.errors import error_code_for
from josefk.broker.handlers import NO_RESPONSE, handles
from josefk.broker.network import CloseConnection
from josefk.protocol.api import ApiKey, response_class
from josefk.protocol.errors import ErrorCode
from josefk.records.errors import RecordsError
from josefk.storage.errors import StorageError

Response = response_class(ApiKey.PRODUCE)
TopicResponse = Response.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse

_VALID_ACKS = (-1, 0, 1)


@handles(ApiKey.PRODUCE)
def handle_produce(context: RequestContext, request: Any) -> Any:
    broker = context.broker
    replicas = broker.replica_manager
    metrics = broker.metrics
    acks = request.acks
    responses = []
    for topic in request.topic_data:
        name = topic.name
        partition_responses = []
        for data in topic.partition_data:
            error = ErrorCode.NONE
            base_offset = -1
            log_append_time = -1
            log_start_offset = -1
            records = data.records
            partition = replicas.get_partition(name, data.index)
            if acks not in _VALID_ACKS:
                error = ErrorCode.INVALID_REQUIRED_ACKS
            elif partition is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif records is None or len(records) == 0:
                error = ErrorCode.CORRUPT_MESSAGE
            elif acks == -1 and len(partition.isr) < partition.log.config.min_insync_replicas:
                error = ErrorCode.NOT_ENOUGH_REPLICAS
            else:
                try:
                    info = replicas.append_to_leader(partition, records)
                except (RecordsError, StorageError, ValueError) as exc:
                    error = error_code_for(exc)
                else:
                    base_offset = info.first_offset
                    log_append_time = info.log_append_time
                    log_start_offset = info.log_start_offset
                    if metrics is not None:
                        metrics.topics.produced(
                            name, messages=info.record_count, nbytes=info.valid_bytes
                        )
            if error and metrics is not None:
                metrics.topics.produce_failed(
                    name, rejected_bytes=0 if records is None else len(records)
                )
            partition_responses.append(
                PartitionResponse(
                    index=data.index,
                    error_code=error,
                    base_offset=base_offset,
                    log_append_time_ms=log_append_time,
                    log_start_offset=log_start_offset,
                    error_message=None if not error else error.message,
                )
            )
        responses.append(TopicResponse(name=name, partition_responses=partition_responses))
    if acks == 0:
        failed = [
            (topic.name, partition.index, ErrorCode(partition.error_code).name)
            for topic in responses
            for partition in topic.partition_responses
            if partition.error_code
        ]
        if failed:
            # An acks=0 producer reads no answer; as Kafka does, closing the connection is how
            # it learns that something failed (it then refreshes its metadata).
            raise CloseConnection(f"acks=0 produce failed for {failed}")
        return NO_RESPONSE
    return Response(responses=responses)
