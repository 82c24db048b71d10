"""TxnOffsetCommit (28): a group's offsets committed inside a producer's transaction.

The offsets are written to ``__consumer_offsets`` as the producer's transactional batch and
stay pending in the group coordinator, invisible to OffsetFetch, until the transaction's
COMMIT marker reaches the group's offsets partition (an ABORT drops them). From v3 the request
carries the consumer's generation, member id and instance id (KIP-447), checked as OffsetCommit
checks them so that a zombie of an older generation cannot commit. Partitions that do not
exist in the cluster are UNKNOWN_TOPIC_OR_PARTITION, as for OffsetCommit; a producer epoch the
offsets partition's producer state refuses is INVALID_PRODUCER_EPOCH. The answer waits until
the offsets topic's in-sync replicas hold the batch, as OffsetCommit's does. Authorization:
WRITE on the transactional id, READ on the group, READ on each topic (Kafka's order).

Imports josefk.protocol and the group package; must not import the server, the network layer
or the transaction coordinator (AddOffsetsToTxn, which enrols the offsets partition in the
transaction, is that coordinator's).
"""

from __future__ import annotations

from typing import Final

from josefk.broker.context import RequestContext
from josefk.broker.handlers import handles
from josefk.broker.handlers.groups import coordinator_of, may_read_group
from josefk.broker.handlers.offsets import commit_entries, errors_by_topic, replicated
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import TxnOffsetCommitRequest, TxnOffsetCommitResponse

TXN_OFFSET_COMMIT: Final = TxnOffsetCommitResponse


@handles(ApiKey.TXN_OFFSET_COMMIT)
async def handle_txn_offset_commit(
    context: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    version = context.api_version
    coordinator = coordinator_of(context)
    entries, slots = await commit_entries(context, request.topics, leader_epochs=version >= 2)
    results: list[ErrorCode]
    refused = (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if not context.authorize(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        )
        else ErrorCode.GROUP_AUTHORIZATION_FAILED
        if not may_read_group(context, request.group_id)
        else None
    )
    if refused is not None:
        slots = [(name, index, refused) for name, index, _ in slots]
        results = []
    elif not entries:
        results = []
    elif coordinator is None:
        results = [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(entries)
    else:
        results = coordinator.txn_commit_offsets(
            request.group_id,
            request.producer_id,
            request.producer_epoch,
            request.generation_id if version >= 3 else -1,
            request.member_id if version >= 3 else "",
            request.group_instance_id if version >= 3 else None,
            entries,
        )
        results = await replicated(context, coordinator, results)
    return TXN_OFFSET_COMMIT(
        throttle_time_ms=0,
        topics=[
            TXN_OFFSET_COMMIT.TxnOffsetCommitResponseTopic(
                name=name,
                partitions=[
                    TXN_OFFSET_COMMIT.TxnOffsetCommitResponsePartition(
                        partition_index=index, error_code=error
                    )
                    for index, error in partitions
                ],
            )
            for name, partitions in errors_by_topic(slots, results).items()
        ],
    )
