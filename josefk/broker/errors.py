"""The broker's failures and how they, and those of the layers below, become Kafka error codes.

Owns the exception types the broker's own layers raise (replication: ``NotLeaderOrFollowerError``
and the acks=all failures; the replica manager's ``UnknownTopicOrPartitionError``) and
``error_code_for``: one table from those and the storage and records exceptions to
``ErrorCode``, so that every handler answers the same failure the same way. Defined here, below
every other broker module, so that the modules raising them and the handlers mapping them
import them from one low place: this module imports no other josefk.broker module
(tests/test_layering.py), only josefk.protocol.errors, josefk.records, josefk.storage and
josefk.config.topic errors.
"""

from __future__ import annotations

import logging

from josefk.config.topic import InvalidConfigError
from josefk.protocol.errors import ErrorCode
from josefk.records.errors import (
    CorruptRecordError,
    DecompressedSizeError,
    InvalidRecordError,
    UnsupportedCompressionError,
)
from josefk.storage.errors import (
    KafkaStorageError,
    LogCreationError,
    LogNameRefusedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from josefk.storage.log import (
    LogClosedError,
    RecordBatchTooLargeError,
)
from josefk.storage.log_validator import InvalidTimestampError
from josefk.storage.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)

# -- replication (raised by Partition and the replica manager) ---------------------------------


class NotLeaderOrFollowerError(Exception):
    """This broker does not lead the partition (clients refresh metadata and retry)."""


class NotEnoughReplicasError(Exception):
    """acks=all refused before the append: fewer in-sync replicas than min.insync.replicas."""


class NotEnoughReplicasAfterAppendError(Exception):
    """acks=all: appended, but the ISR shrank below min.insync.replicas while waiting."""


class RequestTimedOutError(Exception):
    """acks=all: the in-sync replicas did not all have the records within the timeout."""


class FencedLeaderEpochError(Exception):
    """The request carries a leader epoch older than this replica's (the sender is behind)."""


class UnknownLeaderEpochError(Exception):
    """The request carries a leader epoch newer than this replica's (this one is behind)."""


# -- the replica manager ---------------------------------------------------------------------


class TopicExistsError(Exception):
    """A topic of that name exists already."""


class UnknownTopicOrPartitionError(Exception):
    """This broker hosts no such topic or partition."""


# -- topic administration (josefk.broker.topic_admin; both implementations raise these) ---------


class NotControllerError(Exception):
    """A cluster's topic changes are the controller's, and this broker is not it (the client
    refreshes its metadata and asks the controller)."""


class InvalidReplicationFactorError(Exception):
    """A replication factor the brokers cannot hold (below 1, or more than live brokers)."""


class InvalidReplicaAssignmentError(Exception):
    """Explicit replica assignments naming unknown or duplicate brokers, or uneven ones."""


class InvalidPartitionsError(Exception):
    """A partition count that cannot be: not positive, or not more than the topic has."""


class InvalidTopicNameError(Exception):
    """A topic name that cannot be used (illegal, internal, or colliding with another)."""


class InvalidRequestError(Exception):
    """A request whose parts contradict one another."""


class MetadataUnavailableError(Exception):
    """A cluster's metadata store (etcd) did not answer; retriable."""


logger = logging.getLogger(__name__)

_TABLE: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (NotLeaderOrFollowerError, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (NotEnoughReplicasError, ErrorCode.NOT_ENOUGH_REPLICAS),
    (NotEnoughReplicasAfterAppendError, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
    (RequestTimedOutError, ErrorCode.REQUEST_TIMED_OUT),
    (UnknownTopicOrPartitionError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (TopicExistsError, ErrorCode.TOPIC_ALREADY_EXISTS),
    (NotControllerError, ErrorCode.NOT_CONTROLLER),
    (InvalidReplicationFactorError, ErrorCode.INVALID_REPLICATION_FACTOR),
    (InvalidReplicaAssignmentError, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (InvalidPartitionsError, ErrorCode.INVALID_PARTITIONS),
    (InvalidTopicNameError, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (InvalidRequestError, ErrorCode.INVALID_REQUEST),
    # etcd away (restarting, cut off): the client tries again.
    (MetadataUnavailableError, ErrorCode.REQUEST_TIMED_OUT),
    (FencedLeaderEpochError, ErrorCode.FENCED_LEADER_EPOCH),
    (UnknownLeaderEpochError, ErrorCode.UNKNOWN_LEADER_EPOCH),
    (RecordBatchTooLargeError, ErrorCode.RECORD_LIST_TOO_LARGE),
    (RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (DecompressedSizeError, ErrorCode.MESSAGE_TOO_LARGE),
    (CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (InvalidRecordError, ErrorCode.INVALID_RECORD),
    (UnsupportedCompressionError, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    (InvalidTimestampError, ErrorCode.INVALID_TIMESTAMP),
    (OffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
    (KafkaStorageError, ErrorCode.KAFKA_STORAGE_ERROR),
    # A partition directory the filesystem will not name: the topic's name is the problem.
    (LogNameRefusedError, ErrorCode.INVALID_TOPIC_EXCEPTION),
    # One path in the way (a file where the directory goes, permissions): a broker-side
    # problem no retry fixes, and not a failing disk (KAFKA_STORAGE_ERROR would say so).
    (LogCreationError, ErrorCode.UNKNOWN_SERVER_ERROR),
    (LogClosedError, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (InvalidConfigError, ErrorCode.INVALID_CONFIG),
    (OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (UnknownProducerIdError, ErrorCode.UNKNOWN_PRODUCER_ID),
    (InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
    (TransactionCoordinatorFencedError, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (StorageError, ErrorCode.KAFKA_STORAGE_ERROR),
)


def error_code_for(exc: BaseException, *, log: bool = True) -> ErrorCode:
    """The error code a client should see for ``exc``; unexpected ones are logged (unless
    ``log`` is off: the caller logs them itself)."""
    for kind, code in _TABLE:
        if isinstance(exc, kind):
            return code
    if log:
        logger.exception("unexpected error while serving a request", exc_info=exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR
