"""InitProducerId (22): a producer id and epoch for an idempotent producer.

Without a transactional id (idempotence alone) the producer gets a fresh id at epoch 0, or,
from v3 on (KIP-360), its epoch bumped when it names the id and epoch it holds; ids come from
the broker's ``ProducerIdManager`` and are never reused across restarts.

Transactional ids go to the broker's ``TransactionCoordinator`` (josefk.broker.txn): a new
id at epoch 0 or the epoch bumped, the previous epoch's open transaction aborted first
(CONCURRENT_TRANSACTIONS meanwhile), INVALID_TRANSACTION_TIMEOUT above
``transaction.max.timeout.ms``, NOT_COORDINATOR for an id another broker coordinates. An
empty transactional id is INVALID_REQUEST, as in Kafka. Served up to v5: v6 is KIP-939's
two-phase commit, which josefk does not do.

Authorization, as Kafka's: a transactional id needs WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); idempotence alone needs IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging

from josefk.broker.context import RequestContext
from josefk.broker.handlers import Reply, handles
from josefk.broker.producer_ids import ProducerFencedError, ProducerIdBlockError
from josefk.protocol.acls import AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import InitProducerIdRequest, InitProducerIdResponse

logger = logging.getLogger(__name__)

Response = InitProducerIdResponse

_NO_PRODUCER_ID = -1
_NO_PRODUCER_EPOCH = -1


def _error(error: ErrorCode) -> InitProducerIdResponse:
    return Response(
        throttle_time_ms=0,
        error_code=error,
        producer_id=_NO_PRODUCER_ID,
        producer_epoch=_NO_PRODUCER_EPOCH,
    )


def _fenced(version: int) -> ErrorCode:
    # PRODUCER_FENCED exists from v4 (KIP-588); older clients know INVALID_PRODUCER_EPOCH.
    return ErrorCode.PRODUCER_FENCED if version >= 4 else ErrorCode.INVALID_PRODUCER_EPOCH


@handles(ApiKey.INIT_PRODUCER_ID, max_version=5)
def handle_init_producer_id(
    context: RequestContext, request: InitProducerIdRequest
) -> Reply[InitProducerIdResponse]:
    transactional_id = request.transactional_id
    if transactional_id and not context.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if (
        transactional_id is None
        and not context.authorize_cluster(AclOperation.IDEMPOTENT_WRITE)
        and not context.authorize_any(AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if transactional_id is not None:
        # A coroutine: the coordinator's answer waits for its log write.
        return _init_transactional(context, request, transactional_id)
    producer_id = request.producer_id
    producer_epoch = request.producer_epoch
    if (producer_id == _NO_PRODUCER_ID) != (producer_epoch == _NO_PRODUCER_EPOCH):
        # Kafka: an id without an epoch, or the other way round, is malformed.
        return _error(ErrorCode.INVALID_REQUEST)
    manager = context.broker.producer_ids
    if manager is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        producer_id, producer_epoch = manager.init_producer_id(producer_id, producer_epoch)
    except ProducerFencedError as exc:
        logger.info("InitProducerId fenced: %s", exc)
        return _error(_fenced(context.api_version))
    except ProducerIdBlockError:
        logger.exception("cannot allocate a producer id")
        # Retriable: the client tries again, as after a coordinator move in Kafka.
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


async def _init_transactional(
    context: RequestContext, request: InitProducerIdRequest, transactional_id: str
) -> InitProducerIdResponse:
    if not transactional_id:
        return _error(ErrorCode.INVALID_REQUEST)
    producer_id = request.producer_id
    producer_epoch = request.producer_epoch
    if (producer_id == _NO_PRODUCER_ID) != (producer_epoch == _NO_PRODUCER_EPOCH):
        return _error(ErrorCode.INVALID_REQUEST)
    coordinator = context.broker.txn_coordinator
    if coordinator is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    result = await coordinator.init_producer_id(
        transactional_id, request.transaction_timeout_ms, producer_id, producer_epoch
    )
    if result.error == ErrorCode.PRODUCER_FENCED:
        return _error(_fenced(context.api_version))
    if result.error:
        return _error(result.error)
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
