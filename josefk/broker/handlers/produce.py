"""Produce (0): validate each partition's batches, assign offsets in place and append.

Work is per batch: the record bytes arrive as a memoryview into the request frame, get their
offsets written in place by the log and go to the segment file without a copy. With acks=-1
the request is complete once the high watermark passes the appended offsets: at once when the
leader is the only in-sync replica (the answer is then built without awaiting anything),
otherwise when followers have fetched them (the replica manager's produce purgatory).
Errors as Kafka answers them: NOT_ENOUGH_REPLICAS when the ISR is below
``min.insync.replicas`` before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank
while waiting, REQUEST_TIMED_OUT at the producer's timeout, NOT_LEADER_OR_FOLLOWER on a
broker that does not lead the partition, INVALID_TOPIC_EXCEPTION for a write to an internal
topic (only the broker writes ``__consumer_offsets``; Kafka refuses such writes too),
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition of a request holding transactional
batches but no transactional id or one the principal may not WRITE (Kafka's check: a producer that did not say which transaction
it belongs to may not write transactional data), INVALID_TXN_STATE for a producer's plain
batch while its transaction is open, INVALID_RECORD for a control batch (markers are the
transaction coordinator's), UNSUPPORTED_COMPRESSION_TYPE for a zstd batch in a request
before v7 (KIP-110: zstd came with v7), INVALID_RECORD for a partition given more than one
batch or a batch of the old formats (Kafka takes exactly one v2 batch per partition since
v3). A partition refused because of some of its records (records without a key on a
compacted topic: INVALID_RECORD; timestamps out of range: INVALID_TIMESTAMP)
names them in v8+'s ``record_errors`` with the validator's ``error_message`` (KIP-467).
With an authorizer, a topic the principal may not WRITE is TOPIC_AUTHORIZATION_FAILED for each of its partitions, decided once per topic; without one
nothing is asked.

KIP-890's server-side defence (part 1): the first transactional batch of a producer on a
partition (no transaction of that producer open there yet) is appended only if the
transaction coordinator has the partition in that producer's open transaction; otherwise
INVALID_TXN_STATE. This stops a late or stray batch (a retry that outlived its abort, a
client that skipped AddPartitionsToTxn) from opening a transaction no marker will ever
close, which would hold the last stable offset back for good. The check asks the coordinator
in this process, a dictionary lookup; where another broker coordinates the id (a cluster) the
batch is appended unverified, as by a broker without KIP-890.
"""

from __future__ import annotations

from josefk.broker.catalog import is_internal_topic
from josefk.broker.connection_errors import CloseConnection
from josefk.broker.context import RequestContext
from josefk.broker.errors import error_code_for
from josefk.broker.handlers import NO_RESPONSE, NoResponse, Reply, handles
from josefk.broker.partition import TopicPartition
from josefk.broker.replica_manager import AppendOutcome
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.compiler import fast_constructor
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import ProduceRequest, ProduceResponse
from josefk.records.batch import (
    COMPRESSION_MASK,
    MAGIC,
    MAGIC_OFFSET,
    TRANSACTIONAL_BIT,
    Compression,
    peek_attributes,
    peek_batch_size,
    peek_producer,
)
from josefk.records.errors import CorruptRecordError

Response = ProduceResponse
TopicResponse = Response.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse
# One per partition of every request: built through the class's mutable twin (the
# frozen __init__ cost several µs a partition when a request spreads over thousands).
_new_partition_response = fast_constructor(PartitionResponse)

_VALID_ACKS = (-1, 0, 1)
# KIP-110: zstd came with Produce v7; an older request may not carry a zstd batch.
_FIRST_ZSTD_VERSION = 7


@handles(ApiKey.PRODUCE)
def handle_produce(
    context: RequestContext, request: ProduceRequest
) -> Reply[ProduceResponse | NoResponse]:
    acks = request.acks
    replicas = context.broker.replica_manager
    zstd_refused = context.api_version < _FIRST_ZSTD_VERSION
    entries: list[tuple[TopicPartition, memoryview]] = []
    refused: dict[tuple[str, int], ErrorCode] = {}
    writable = (
        None
        if context.broker.authorizer is None
        else context.authorized_names(
            AclOperation.WRITE, ResourceType.TOPIC, {t.name for t in request.topic_data}
        )
    )
    for topic in request.topic_data:
        internal = is_internal_topic(topic.name)
        denied = writable is not None and topic.name not in writable
        for data in topic.partition_data:
            records = data.records
            if denied:
                refused[(topic.name, data.index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif internal:
                refused[(topic.name, data.index)] = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif acks not in _VALID_ACKS:
                refused[(topic.name, data.index)] = ErrorCode.INVALID_REQUIRED_ACKS
            elif records is None or len(records) == 0:
                refused[(topic.name, data.index)] = ErrorCode.CORRUPT_MESSAGE
            else:
                # Decoded records are a memoryview of the frame; bytes only where a caller
                # built the request by hand.
                view = records if isinstance(records, memoryview) else memoryview(records)
                if zstd_refused and peek_attributes(view) & COMPRESSION_MASK == Compression.ZSTD:
                    # As Kafka's ProduceRequest.validateRecords: the partition's error, not
                    # a closed connection (KAFKA-7549).
                    refused[(topic.name, data.index)] = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
                    continue
                try:
                    first = peek_batch_size(view)
                except CorruptRecordError:
                    first = None  # the log's validation refuses it, as CORRUPT_MESSAGE
                if first is not None and (len(view) > first or view[MAGIC_OFFSET] != MAGIC):
                    # More than one batch, or a message set of the old formats (magic 0
                    # or 1): Kafka refuses both since Produce v3 (every version it still
                    # takes), ProduceRequest.validateRecords. Not CORRUPT_MESSAGE, which
                    # clients retry.
                    refused[(topic.name, data.index)] = ErrorCode.INVALID_RECORD
                    continue
                entries.append((TopicPartition(topic.name, data.index), view))
    if (
        request.transactional_id is None
        or (
            context.broker.authorizer is not None
            and not context.authorize(
                AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
            )
        )
    ) and any(peek_attributes(records) & TRANSACTIONAL_BIT for _, records in entries):
        for tp, _ in entries:
            refused[(tp.topic, tp.partition)] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        entries = []
    elif request.transactional_id is not None:
        entries = _verify_transactional(context, request.transactional_id, entries, refused)
    outcomes = replicas.append_records(entries, acks=acks)
    if acks == -1 and replicas.must_wait_for_acks(outcomes):
        return _respond_after_acks(context, request, outcomes, refused)
    return _respond(context, request, outcomes, refused)


def _verify_transactional(
    context: RequestContext,
    transactional_id: str,
    entries: list[tuple[TopicPartition, memoryview]],
    refused: dict[tuple[str, int], ErrorCode],
) -> list[tuple[TopicPartition, memoryview]]:
    """KIP-890: refuse the partitions whose batch would open a transaction the coordinator
    does not know of (INVALID_TXN_STATE; INVALID_PRODUCER_EPOCH for a fenced producer). Per batch: one header read and a producer state
    lookup; the coordinator is asked only for a producer's first batch on a partition."""
    coordinator = context.broker.txn_coordinator
    if coordinator is None or not coordinator.owns(transactional_id):
        return entries
    replicas = context.broker.replica_manager
    kept = []
    for tp, records in entries:
        if peek_attributes(records) & TRANSACTIONAL_BIT:
            producer_id, producer_epoch = peek_producer(records)
            partition = replicas.get_partition(tp.topic, tp.partition)
            entry = (
                None if partition is None else partition.log.producer_state.last_entry(producer_id)
            )
            already_open = entry is not None and entry.current_txn_first_offset >= 0
            if not already_open:
                error = coordinator.verify_produce(
                    transactional_id, producer_id, producer_epoch, tp
                )
                if error:
                    refused[(tp.topic, tp.partition)] = error
                    continue
        kept.append((tp, records))
    return kept


def _record_errors(
    outcome: AppendOutcome | None, error: ErrorCode
) -> tuple[list[PartitionResponse.BatchIndexAndErrorMessage], str | None]:
    """KIP-467: the records a refused partition's error names (v8+ record_errors, each
    with its index among the partition's records), and the validator's message as
    error_message, so that a client fails those records with the error and retries or fails
    the others apart (librdkafka: _INVALID_DIFFERENT_RECORD). Other errors keep the error
    code's own message and no record errors."""
    exc = outcome.error if outcome is not None else None
    if not error:
        return [], None
    named = getattr(exc, "record_errors", ())
    if not named:
        return [], error.message
    message = getattr(exc, "message", None) or str(exc)
    return [
        PartitionResponse.BatchIndexAndErrorMessage(
            batch_index=one.batch_index, batch_index_error_message=one.message
        )
        for one in named
    ], message


async def _respond_after_acks(
    context: RequestContext,
    request: ProduceRequest,
    outcomes: list[AppendOutcome],
    refused: dict[tuple[str, int], ErrorCode],
) -> ProduceResponse | NoResponse:
    await context.broker.replica_manager.wait_for_acks(outcomes, request.timeout_ms)
    return _respond(context, request, outcomes, refused)


def _respond(
    context: RequestContext,
    request: ProduceRequest,
    outcomes: list[AppendOutcome],
    refused: dict[tuple[str, int], ErrorCode],
) -> ProduceResponse | NoResponse:
    metrics = context.broker.metrics
    topic_metrics = metrics.topics if metrics is not None else None
    by_partition = {(o.tp.topic, o.tp.partition): o for o in outcomes}
    responses = []
    for topic in request.topic_data:
        name = topic.name
        partition_responses = []
        # The topic's appended partitions, counted once per topic for the metrics.
        appended = messages = nbytes = 0
        for data in topic.partition_data:
            index = data.index
            current = by_partition.get((name, index))
            info = current.info if current is not None else None
            if current is None:
                error = refused[(name, index)]
            elif current.error is not None:
                error = error_code_for(current.error)
            else:
                error = ErrorCode.NONE
            if error or info is None:
                if error and topic_metrics is not None:
                    records = data.records
                    topic_metrics.produce_failed(
                        name, rejected_bytes=0 if records is None else len(records)
                    )
                # No error and no info: nothing was appended; offsets answer -1.
                record_errors, error_message = _record_errors(current, error)
                partition_responses.append(
                    _new_partition_response(
                        index=index,
                        error_code=error,
                        base_offset=-1,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=record_errors,
                        error_message=error_message,
                    )
                )
                continue
            appended += 1
            messages += info.record_count
            nbytes += info.valid_bytes
            partition_responses.append(
                _new_partition_response(
                    index=index,
                    error_code=error,
                    base_offset=info.first_offset,
                    log_append_time_ms=info.log_append_time,
                    log_start_offset=info.log_start_offset,
                    record_errors=[],
                    error_message=None,
                )
            )
        if appended and topic_metrics is not None:
            topic_metrics.produced_partitions(
                name, partitions=appended, messages=messages, nbytes=nbytes
            )
        responses.append(TopicResponse(name=name, partition_responses=partition_responses))
    if request.acks == 0:
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
