"""Transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers,
DescribeTransactions, ListTransactions, DescribeProducers, and the transaction coordinator's
answer to FindCoordinator (key type 1). InitProducerId's transactional part is in
``init_producer_id.py``; TxnOffsetCommit is the group coordinator's.

Each handler turns a request of any version into calls on the broker's
``TransactionCoordinator`` (or, for WriteTxnMarkers and DescribeProducers, the replica
manager) and the answer into the version's response. PRODUCER_FENCED exists from v2 of
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn (KIP-588); older versions get
INVALID_PRODUCER_EPOCH. EndTxn stops at v4: v5 means KIP-890's epoch bump per transaction,
which josefk's coordinator does not do (clients then keep to transaction version 1).

Authorization, as Kafka's: WRITE on the transactional id for AddPartitionsToTxn (v0-3),
AddOffsetsToTxn and EndTxn (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic added
(TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED), READ on the group whose
offsets join (GROUP_AUTHORIZATION_FAILED); CLUSTER_ACTION for the brokers' own requests
(AddPartitionsToTxn v4+, WriteTxnMarkers); DESCRIBE on the id for DescribeTransactions (and
ListTransactions lists only those); READ on the topic for DescribeProducers.

Imports josefk.protocol, the txn package and the replica manager; must not import the
server or network layer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from josefk.broker.context import RequestContext
from josefk.broker.errors import error_code_for
from josefk.broker.handlers import handles
from josefk.broker.txn.coordinator import TransactionCoordinator
from josefk.broker.txn.metadata import TxnState
from josefk.broker.txn.store import TRANSACTION_STATE_TOPIC
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from josefk.storage.offsets import TopicPartition, TxnMarker

ADD_PARTITIONS: Final = AddPartitionsToTxnResponse
ADD_OFFSETS: Final = AddOffsetsToTxnResponse
END_TXN: Final = EndTxnResponse
WRITE_MARKERS: Final = WriteTxnMarkersResponse
DESCRIBE_TXNS: Final = DescribeTransactionsResponse
LIST_TXNS: Final = ListTransactionsResponse
DESCRIBE_PRODUCERS: Final = DescribeProducersResponse

OFFSETS_TOPIC: Final = "__consumer_offsets"
_MARKER_ACK_TIMEOUT_MS: Final = 30_000


def txn_coordinator_of(context: RequestContext) -> TransactionCoordinator | None:
    coordinator = context.broker.txn_coordinator
    return coordinator if isinstance(coordinator, TransactionCoordinator) else None


def fenced_error(error: ErrorCode, version: int, *, since: int = 2) -> ErrorCode:
    """PRODUCER_FENCED for versions that know it, INVALID_PRODUCER_EPOCH before."""
    if error == ErrorCode.PRODUCER_FENCED and version < since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def find_transaction_coordinator(
    context: RequestContext, transactional_id: str
) -> tuple[ErrorCode, int, str, int]:
    """FindCoordinator for a transactional id: this broker on the single node; in a
    cluster, the leader of the id's ``__transaction_state`` partition."""
    if not transactional_id:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    coordinator = txn_coordinator_of(context)
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    node = context.broker.coordinator_placement.coordinator(
        TRANSACTION_STATE_TOPIC,
        coordinator.partition_for(transactional_id),
        context.connection.listener_name,
    )
    if node is None:
        # Not created yet, or no leader right now: the client retries.
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return ErrorCode.NONE, node.broker_id, node.host, node.port


def may_write_txn(context: RequestContext, transactional_id: str | None) -> bool:
    """WRITE on the transactional id (a missing id is the handlers' INVALID_REQUEST)."""
    return not transactional_id or context.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    )


def _partition_known(context: RequestContext, tp: TopicPartition) -> bool:
    metadata = context.broker.metadata
    if metadata is not None:
        return metadata.partition(tp.topic, tp.partition) is not None
    return context.broker.replica_manager.get_partition(tp.topic, tp.partition) is not None


# -- AddPartitionsToTxn -------------------------------------------------------------------


def _topic_results(
    results: dict[TopicPartition, ErrorCode],
) -> list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult]] = {}
    for tp, error in results.items():
        by_topic.setdefault(tp.topic, []).append(
            ADD_PARTITIONS.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                partition_index=tp.partition, partition_error_code=error
            )
        )
    return [
        ADD_PARTITIONS.AddPartitionsToTxnTopicResult(name=name, results_by_partition=parts)
        for name, parts in by_topic.items()
    ]


async def _add_partitions(
    context: RequestContext,
    coordinator: TransactionCoordinator | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    topics: Sequence[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic],
    *,
    verify_only: bool = False,
) -> dict[TopicPartition, ErrorCode]:
    partitions = [
        TopicPartition(topic.name, index) for topic in topics for index in topic.partitions
    ]
    if coordinator is None:
        return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not transactional_id:
        return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST)
    if not may_write_txn(context, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = context.authorized_names(
        AclOperation.WRITE, ResourceType.TOPIC, {tp.topic for tp in partitions}
    )
    if len(writable) < len({tp.topic for tp in partitions}):
        return {
            tp: ErrorCode.OPERATION_NOT_ATTEMPTED
            if tp.topic in writable
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            for tp in partitions
        }
    unknown = [tp for tp in partitions if not _partition_known(context, tp)]
    if unknown:
        # Kafka adds none of them: the unknown ones say why, the rest were not attempted.
        return {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in partitions
        }
    if verify_only:
        return await coordinator.verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )
    error = await coordinator.add_partitions(
        transactional_id, producer_id, producer_epoch, partitions
    )
    return dict.fromkeys(partitions, error)


@handles(ApiKey.ADD_PARTITIONS_TO_TXN)
async def handle_add_partitions_to_txn(
    context: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    coordinator = txn_coordinator_of(context)
    version = context.api_version
    if version < 4:
        results = await _add_partitions(
            context,
            coordinator,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            request.v3_and_below_topics,
        )
        results = {tp: fenced_error(e, version) for tp, e in results.items()}
        return ADD_PARTITIONS(
            throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(results)
        )
    if not context.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return ADD_PARTITIONS(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[],
        )
    answers = []
    for txn in request.transactions:
        results = await _add_partitions(
            context,
            coordinator,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            txn.topics,
            verify_only=txn.verify_only,
        )
        answers.append(
            ADD_PARTITIONS.AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id, topic_results=_topic_results(results)
            )
        )
    return ADD_PARTITIONS(
        throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=answers
    )


# -- AddOffsetsToTxn ----------------------------------------------------------------------


@handles(ApiKey.ADD_OFFSETS_TO_TXN)
async def handle_add_offsets_to_txn(
    context: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    coordinator = txn_coordinator_of(context)
    groups = context.broker.group_coordinator
    if not may_write_txn(context, request.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not context.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif coordinator is None or groups is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif not request.transactional_id or not request.group_id:
        error = ErrorCode.INVALID_REQUEST
    else:
        # The group's offsets partition joins the transaction: its commit or abort marker
        # makes the group coordinator apply or drop the transaction's offsets.
        tp = TopicPartition(OFFSETS_TOPIC, groups.partition_for(request.group_id))
        error = await coordinator.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch, [tp]
        )
    return ADD_OFFSETS(throttle_time_ms=0, error_code=fenced_error(error, context.api_version))


# -- EndTxn -------------------------------------------------------------------------------


@handles(ApiKey.END_TXN, max_version=4)
async def handle_end_txn(context: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    coordinator = txn_coordinator_of(context)
    if not may_write_txn(context, request.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif coordinator is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif not request.transactional_id:
        error = ErrorCode.INVALID_REQUEST
    else:
        error = await coordinator.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
        )
    return END_TXN(throttle_time_ms=0, error_code=fenced_error(error, context.api_version))


# -- WriteTxnMarkers (from a transaction coordinator) -------------------------------------


@handles(ApiKey.WRITE_TXN_MARKERS)
async def handle_write_txn_markers(
    context: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    if not context.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return _markers_refused(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    replicas = context.broker.replica_manager
    answers = []
    for entry in request.markers:
        marker = TxnMarker(
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            coordinator_epoch=entry.coordinator_epoch,
            committed=entry.transaction_result,
        )
        tps = [
            TopicPartition(topic.name, index)
            for topic in entry.topics
            for index in topic.partition_indexes
        ]
        outcomes = replicas.append_txn_markers([(tp, marker) for tp in tps])
        if replicas.must_wait_for_acks(outcomes):
            await replicas.wait_for_acks(outcomes, _MARKER_ACK_TIMEOUT_MS)
        by_topic: dict[str, list[WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult]] = {}
        for outcome in outcomes:
            error = ErrorCode.NONE if outcome.error is None else error_code_for(outcome.error)
            by_topic.setdefault(outcome.tp.topic, []).append(
                WRITE_MARKERS.WritableTxnMarkerResult.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=outcome.tp.partition, error_code=error
                )
            )
        answers.append(
            WRITE_MARKERS.WritableTxnMarkerResult(
                producer_id=entry.producer_id,
                topics=[
                    WRITE_MARKERS.WritableTxnMarkerResult.WritableTxnMarkerTopicResult(
                        name=name, partitions=parts
                    )
                    for name, parts in by_topic.items()
                ],
            )
        )
    return WRITE_MARKERS(markers=answers)


def _markers_refused(request: WriteTxnMarkersRequest, error: ErrorCode) -> WriteTxnMarkersResponse:
    result = WRITE_MARKERS.WritableTxnMarkerResult
    topic_result = result.WritableTxnMarkerTopicResult
    return WRITE_MARKERS(
        markers=[
            result(
                producer_id=entry.producer_id,
                topics=[
                    topic_result(
                        name=topic.name,
                        partitions=[
                            topic_result.WritableTxnMarkerPartitionResult(
                                partition_index=index, error_code=error
                            )
                            for index in topic.partition_indexes
                        ],
                    )
                    for topic in entry.topics
                ],
            )
            for entry in request.markers
        ]
    )


# -- DescribeTransactions, ListTransactions -----------------------------------------------


@handles(ApiKey.DESCRIBE_TRANSACTIONS)
def handle_describe_transactions(
    context: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    coordinator = txn_coordinator_of(context)
    states = []
    for transactional_id in request.transactional_ids:
        if not context.authorize(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            error, found = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
        elif coordinator is None:
            error, found = ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        else:
            error, found = coordinator.describe(transactional_id)
        if found is None:
            states.append(
                DESCRIBE_TXNS.TransactionState(
                    error_code=error,
                    transactional_id=transactional_id,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )
            )
            continue
        states.append(
            DESCRIBE_TXNS.TransactionState(
                error_code=ErrorCode.NONE,
                transactional_id=transactional_id,
                transaction_state=found.state,
                transaction_timeout_ms=found.timeout_ms,
                transaction_start_time_ms=found.start_timestamp_ms,
                producer_id=found.producer_id,
                producer_epoch=found.producer_epoch,
                topics=[
                    DESCRIBE_TXNS.TransactionState.TopicData(topic=topic, partitions=list(ids))
                    for topic, ids in found.partitions
                ],
            )
        )
    return DESCRIBE_TXNS(throttle_time_ms=0, transaction_states=states)


@handles(ApiKey.LIST_TRANSACTIONS)
def handle_list_transactions(
    context: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    coordinator = txn_coordinator_of(context)
    if coordinator is None:
        return LIST_TXNS(
            throttle_time_ms=0,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            unknown_state_filters=[],
            transaction_states=[],
        )
    states = []
    unknown = []
    for name in request.state_filters:
        state = TxnState.from_display_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.append(state)
    if unknown and not states:
        # Only unknown states asked for: nothing can match them.
        listings = []
    else:
        try:
            listings = coordinator.list_transactions(
                states=states,
                producer_ids=request.producer_id_filters,
                min_duration_ms=request.duration_filter,
                transactional_id_pattern=request.transactional_id_pattern,
            )
        except re.error:  # an invalid pattern: Kafka answers INVALID_REQUEST
            return LIST_TXNS(
                throttle_time_ms=0,
                error_code=ErrorCode.INVALID_REQUEST,
                unknown_state_filters=unknown,
                transaction_states=[],
            )
    return LIST_TXNS(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        unknown_state_filters=unknown,
        transaction_states=[
            LIST_TXNS.TransactionState(
                transactional_id=listing.transactional_id,
                producer_id=listing.producer_id,
                transaction_state=listing.state,
            )
            for listing in listings
            if context.authorize(
                AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, listing.transactional_id
            )
        ],
    )


# -- DescribeProducers --------------------------------------------------------------------


@handles(ApiKey.DESCRIBE_PRODUCERS)
def handle_describe_producers(
    context: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    replicas = context.broker.replica_manager
    topics = []
    for topic in request.topics:
        partitions = []
        readable = context.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name)
        for index in topic.partition_indexes:
            partition = replicas.get_partition(topic.name, index)
            error = ErrorCode.NONE
            active = []
            if not readable:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if _partition_known(context, TopicPartition(topic.name, index)):
                    error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif not partition.is_leader:
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                for entry in partition.log.producer_state.producers.values():
                    active.append(
                        DESCRIBE_PRODUCERS.TopicResponse.PartitionResponse.ProducerState(
                            producer_id=entry.producer_id,
                            producer_epoch=entry.producer_epoch,
                            last_sequence=entry.last_sequence,
                            last_timestamp=entry.last_timestamp,
                            coordinator_epoch=entry.coordinator_epoch,
                            current_txn_start_offset=entry.current_txn_first_offset,
                        )
                    )
            partitions.append(
                DESCRIBE_PRODUCERS.TopicResponse.PartitionResponse(
                    partition_index=index,
                    error_code=error,
                    error_message=error.message if error else None,
                    active_producers=active,
                )
            )
        topics.append(DESCRIBE_PRODUCERS.TopicResponse(name=topic.name, partitions=partitions))
    return DESCRIBE_PRODUCERS(throttle_time_ms=0, topics=topics)
