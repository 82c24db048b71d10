"""Kafka's error codes and the codec's own exceptions.

Owns ``ErrorCode`` (every error code of Kafka's protocol guide with its number, name, whether a
client may retry, and a default message) and the exceptions the codec raises: decoding bad
bytes only ever raises a ``ProtocolDecodeError`` subclass, never IndexError, struct.error,
UnicodeDecodeError or MemoryError. Imports nothing from josefk.
"""

from __future__ import annotations

from enum import IntEnum


class ProtocolError(Exception):
    """Base of every exception the codec raises."""


class ProtocolDecodeError(ProtocolError):
    """The bytes are not a valid encoding of what was asked for."""


class BufferUnderflow(ProtocolDecodeError):
    """The input ended before the value did."""


class InvalidLength(ProtocolDecodeError):
    """A length or count is negative (other than -1 for null) or larger than the bytes left."""


class UnexpectedNull(ProtocolDecodeError):
    """A null where the field is not nullable in this version."""


class InvalidVarint(ProtocolDecodeError):
    """A varint longer than its type allows."""


class InvalidString(ProtocolDecodeError):
    """A string that is not valid UTF-8."""


class MalformedData(ProtocolDecodeError):
    """Any other structural problem (out-of-range value, bad struct prefix...)."""


class UnsupportedVersion(ProtocolDecodeError):
    """An API version that is not declared for this API."""

    def __init__(self, api_key: int, version: int, message: str | None = None) -> None:
        super().__init__(message or f"api key {api_key} has no version {version}")
        self.api_key = api_key
        self.version = version


class UnknownApiKey(ProtocolDecodeError):
    """An API key josefk has no declaration for."""

    def __init__(self, api_key: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key


class InvalidFrameSize(ProtocolDecodeError):
    """A frame size prefix that is negative."""


class FrameTooLarge(ProtocolDecodeError):
    """A frame larger than the configured maximum (``socket.request.max.bytes``)."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the maximum of {max_size}")
        self.size = size
        self.max_size = max_size


class ProtocolEncodeError(ProtocolError):
    """A value cannot be encoded (wrong type, out of range, null where not allowed)."""


class ErrorCode(IntEnum):
    """Kafka's error codes. ``retriable`` and ``message`` come from the protocol guide."""

    retriable: bool
    message: str

    def __new__(cls, code: int, retriable: bool = False, message: str = "") -> ErrorCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.retriable = retriable
        member.message = message
        return member

    UNKNOWN_SERVER_ERROR = (
        -1,
        False,
        "Unexpected error on the server while processing the request.",
    )
    NONE = (0, False, "")
    OFFSET_OUT_OF_RANGE = (1, False, "The requested offset is outside the partition's range.")
    CORRUPT_MESSAGE = (
        2,
        True,
        "A record failed its CRC check, exceeds the valid size or is otherwise corrupt.",
    )
    UNKNOWN_TOPIC_OR_PARTITION = (3, True, "This server does not host this topic-partition.")
    INVALID_FETCH_SIZE = (4, False, "The requested fetch size is invalid.")
    LEADER_NOT_AVAILABLE = (
        5,
        True,
        "No leader for this topic-partition: a leader election is in progress.",
    )
    NOT_LEADER_OR_FOLLOWER = (
        6,
        True,
        "This broker is not the leader (or not a replica) of the topic-partition.",
    )
    REQUEST_TIMED_OUT = (7, True, "The request timed out.")
    BROKER_NOT_AVAILABLE = (8, False, "The broker is not available.")
    REPLICA_NOT_AVAILABLE = (
        9,
        True,
        "The replica is not available for the requested topic-partition.",
    )
    MESSAGE_TOO_LARGE = (
        10,
        False,
        "The request included a message larger than the server accepts.",
    )
    STALE_CONTROLLER_EPOCH = (11, False, "The controller moved to another broker.")
    OFFSET_METADATA_TOO_LARGE = (12, False, "The offset metadata is too large.")
    NETWORK_EXCEPTION = (13, True, "The server disconnected before a response was received.")
    COORDINATOR_LOAD_IN_PROGRESS = (
        14,
        True,
        "The coordinator is loading and cannot process requests yet.",
    )
    COORDINATOR_NOT_AVAILABLE = (15, True, "The coordinator is not available.")
    NOT_COORDINATOR = (16, True, "This is not the correct coordinator.")
    INVALID_TOPIC_EXCEPTION = (17, False, "The request tried to use an invalid topic.")
    RECORD_LIST_TOO_LARGE = (
        18,
        False,
        "A message batch in the produce request exceeds the maximum segment size.",
    )
    NOT_ENOUGH_REPLICAS = (19, True, "Fewer in-sync replicas than required.")
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = (
        20,
        True,
        "Written with fewer in-sync replicas than required.",
    )
    INVALID_REQUIRED_ACKS = (21, False, "The produce request specified an invalid value for acks.")
    ILLEGAL_GENERATION = (22, False, "The generation id is not the current generation.")
    INCONSISTENT_GROUP_PROTOCOL = (
        23,
        False,
        "The group member's protocol type or protocols are incompatible with the group.",
    )
    INVALID_GROUP_ID = (24, False, "The configured group id is invalid.")
    UNKNOWN_MEMBER_ID = (25, False, "The coordinator does not know this member.")
    INVALID_SESSION_TIMEOUT = (
        26,
        False,
        "The session timeout is outside the broker's allowed range.",
    )
    REBALANCE_IN_PROGRESS = (27, False, "The group is rebalancing; rejoin it.")
    INVALID_COMMIT_OFFSET_SIZE = (28, False, "The committing offset data size is not valid.")
    TOPIC_AUTHORIZATION_FAILED = (29, False, "Topic authorization failed.")
    GROUP_AUTHORIZATION_FAILED = (30, False, "Group authorization failed.")
    CLUSTER_AUTHORIZATION_FAILED = (31, False, "Cluster authorization failed.")
    INVALID_TIMESTAMP = (32, False, "The timestamp of the message is out of the acceptable range.")
    UNSUPPORTED_SASL_MECHANISM = (
        33,
        False,
        "The broker does not support the requested SASL mechanism.",
    )
    ILLEGAL_SASL_STATE = (34, False, "The request is not valid given the current SASL state.")
    UNSUPPORTED_VERSION = (35, False, "The version of the API is not supported.")
    TOPIC_ALREADY_EXISTS = (36, False, "The topic already exists.")
    INVALID_PARTITIONS = (37, False, "The number of partitions is invalid.")
    INVALID_REPLICATION_FACTOR = (38, False, "The replication factor is invalid.")
    INVALID_REPLICA_ASSIGNMENT = (39, False, "The replica assignment is invalid.")
    INVALID_CONFIG = (40, False, "The configuration is invalid.")
    NOT_CONTROLLER = (41, True, "This is not the correct controller for this cluster.")
    INVALID_REQUEST = (42, False, "The request is malformed or otherwise invalid for this broker.")
    UNSUPPORTED_FOR_MESSAGE_FORMAT = (
        43,
        False,
        "The message format version on the broker does not support the request.",
    )
    POLICY_VIOLATION = (44, False, "The request violates a configured policy.")
    OUT_OF_ORDER_SEQUENCE_NUMBER = (
        45,
        False,
        "The broker received an out of order sequence number.",
    )
    DUPLICATE_SEQUENCE_NUMBER = (46, False, "The broker received a duplicate sequence number.")
    INVALID_PRODUCER_EPOCH = (47, False, "The producer attempted to produce with an old epoch.")
    INVALID_TXN_STATE = (
        48,
        False,
        "The producer attempted a transactional operation in an invalid state.",
    )
    INVALID_PRODUCER_ID_MAPPING = (
        49,
        False,
        "The producer id does not match the transactional id.",
    )
    INVALID_TRANSACTION_TIMEOUT = (
        50,
        False,
        "The transaction timeout exceeds the broker's maximum.",
    )
    CONCURRENT_TRANSACTIONS = (
        51,
        True,
        "Another transaction with this transactional id is still completing.",
    )
    TRANSACTION_COORDINATOR_FENCED = (52, False, "A newer transaction coordinator took over.")
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = (53, False, "Transactional id authorization failed.")
    SECURITY_DISABLED = (54, False, "Security features are disabled.")
    OPERATION_NOT_ATTEMPTED = (55, False, "The broker did not attempt this operation.")
    KAFKA_STORAGE_ERROR = (56, True, "A disk error on the broker while accessing the log.")
    LOG_DIR_NOT_FOUND = (
        57,
        False,
        "The user-specified log directory is not found in the broker config.",
    )
    SASL_AUTHENTICATION_FAILED = (58, False, "SASL authentication failed.")
    UNKNOWN_PRODUCER_ID = (59, False, "The broker has no state for this producer id.")
    REASSIGNMENT_IN_PROGRESS = (60, False, "A partition reassignment is in progress.")
    DELEGATION_TOKEN_AUTH_DISABLED = (61, False, "Delegation token feature is not enabled.")
    DELEGATION_TOKEN_NOT_FOUND = (62, False, "Delegation token is not found on the server.")
    DELEGATION_TOKEN_OWNER_MISMATCH = (
        63,
        False,
        "The principal does not own the delegation token.",
    )
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = (
        64,
        False,
        "Delegation token requests are not allowed on this channel.",
    )
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = (65, False, "Delegation token authorization failed.")
    DELEGATION_TOKEN_EXPIRED = (66, False, "The delegation token has expired.")
    INVALID_PRINCIPAL_TYPE = (67, False, "The supplied principal type is not supported.")
    NON_EMPTY_GROUP = (68, False, "The group is not empty.")
    GROUP_ID_NOT_FOUND = (69, False, "The group id does not exist.")
    FETCH_SESSION_ID_NOT_FOUND = (70, True, "The fetch session id was not found.")
    INVALID_FETCH_SESSION_EPOCH = (71, True, "The fetch session epoch is invalid.")
    LISTENER_NOT_FOUND = (72, True, "No matching listener on the leader broker.")
    TOPIC_DELETION_DISABLED = (73, False, "Topic deletion is disabled.")
    FENCED_LEADER_EPOCH = (74, True, "The leader epoch in the request is older than the broker's.")
    UNKNOWN_LEADER_EPOCH = (75, True, "The leader epoch in the request is newer than the broker's.")
    UNSUPPORTED_COMPRESSION_TYPE = (
        76,
        False,
        "The requesting client does not support the compression type.",
    )
    STALE_BROKER_EPOCH = (77, False, "Broker epoch has changed.")
    OFFSET_NOT_AVAILABLE = (
        78,
        True,
        "The leader high watermark has not caught up after an election.",
    )
    MEMBER_ID_REQUIRED = (79, False, "The group member needs a valid member id before joining.")
    PREFERRED_LEADER_NOT_AVAILABLE = (80, True, "The preferred leader was not available.")
    GROUP_MAX_SIZE_REACHED = (81, False, "The group has reached its maximum size.")
    FENCED_INSTANCE_ID = (
        82,
        False,
        "Another member with the same group.instance.id fenced this one.",
    )
    ELIGIBLE_LEADERS_NOT_AVAILABLE = (83, True, "No eligible leader for the election.")
    ELECTION_NOT_NEEDED = (84, True, "Leader election not needed for the topic partition.")
    NO_REASSIGNMENT_IN_PROGRESS = (85, False, "No partition reassignment is in progress.")
    GROUP_SUBSCRIBED_TO_TOPIC = (
        86,
        False,
        "Offsets cannot be deleted while the group is subscribed to the topic.",
    )
    INVALID_RECORD = (87, False, "The record failed the broker's validation and was rejected.")
    UNSTABLE_OFFSET_COMMIT = (88, True, "There are unstable offsets that need to be cleared.")
    THROTTLING_QUOTA_EXCEEDED = (89, True, "The throttling quota has been exceeded.")
    PRODUCER_FENCED = (
        90,
        False,
        "A producer with a newer epoch for the same transactional id exists.",
    )
    RESOURCE_NOT_FOUND = (
        91,
        False,
        "A request illegally referred to a resource that does not exist.",
    )
    DUPLICATE_RESOURCE = (92, False, "A request illegally referred to the same resource twice.")
    UNACCEPTABLE_CREDENTIAL = (
        93,
        False,
        "The requested credential would not meet the criteria for acceptability.",
    )
    INCONSISTENT_VOTER_SET = (94, False, "The voter set is inconsistent with the leader's.")
    INVALID_UPDATE_VERSION = (95, False, "The given update version was invalid.")
    FEATURE_UPDATE_FAILED = (
        96,
        False,
        "Unable to update finalized features due to an unexpected server error.",
    )
    PRINCIPAL_DESERIALIZATION_FAILURE = (
        97,
        False,
        "The forwarded request's principal could not be deserialized.",
    )
    SNAPSHOT_NOT_FOUND = (98, False, "The requested snapshot was not found.")
    POSITION_OUT_OF_RANGE = (
        99,
        False,
        "The requested position is not within the snapshot's range.",
    )
    UNKNOWN_TOPIC_ID = (100, True, "This server does not host this topic id.")
    DUPLICATE_BROKER_REGISTRATION = (101, False, "This broker id is already registered.")
    BROKER_ID_NOT_REGISTERED = (102, False, "The given broker id was not registered.")
    INCONSISTENT_TOPIC_ID = (
        103,
        True,
        "The log's topic id does not match the topic id in the request.",
    )
    INCONSISTENT_CLUSTER_ID = (
        104,
        False,
        "The cluster id in the request does not match the broker's.",
    )
    TRANSACTIONAL_ID_NOT_FOUND = (105, False, "The transactional id could not be found.")
    FETCH_SESSION_TOPIC_ID_ERROR = (
        106,
        True,
        "The fetch session saw topic id differences between requests.",
    )
    INELIGIBLE_REPLICA = (107, False, "The new ISR contains at least one ineligible replica.")
    NEW_LEADER_ELECTED = (
        108,
        False,
        "The AlterPartition request failed because a new leader was elected.",
    )
    OFFSET_MOVED_TO_TIERED_STORAGE = (
        109,
        False,
        "The requested offset has moved to tiered storage.",
    )
    FENCED_MEMBER_EPOCH = (110, False, "The member epoch is fenced by the group coordinator.")
    UNRELEASED_INSTANCE_ID = (111, False, "The instance id is still used by another member.")
    UNSUPPORTED_ASSIGNOR = (
        112,
        False,
        "The assignor or its version range is not supported by the group.",
    )
    STALE_MEMBER_EPOCH = (113, False, "The member epoch is stale.")
    MISMATCHED_ENDPOINT_TYPE = (
        114,
        False,
        "The request was sent to an endpoint of the wrong type.",
    )
    UNSUPPORTED_ENDPOINT_TYPE = (115, False, "This endpoint type is not supported yet.")
    UNKNOWN_CONTROLLER_ID = (116, False, "This controller id is not known.")
    UNKNOWN_SUBSCRIPTION_ID = (
        117,
        False,
        "The client sent a push telemetry request with an invalid or outdated subscription id.",
    )
    TELEMETRY_TOO_LARGE = (
        118,
        False,
        "The client sent a push telemetry request larger than the broker allows.",
    )
    INVALID_REGISTRATION = (119, False, "The controller considers the broker registration invalid.")
    TRANSACTION_ABORTABLE = (
        120,
        False,
        "The server hit an error the transactional producer can abort.",
    )
    INVALID_RECORD_STATE = (
        121,
        False,
        "The record state is invalid; the acknowledgement was rejected.",
    )
    SHARE_SESSION_NOT_FOUND = (122, True, "The share session was not found.")
    INVALID_SHARE_SESSION_EPOCH = (123, True, "The share session epoch is invalid.")
    FENCED_STATE_EPOCH = (
        124,
        False,
        "The share coordinator rejected the request: the state epoch is fenced.",
    )
    INVALID_VOTER_KEY = (125, False, "The voter key does not match the receiving replica's key.")
    DUPLICATE_VOTER = (126, False, "The voter is already part of the set of voters.")
    VOTER_NOT_FOUND = (127, False, "The voter is not part of the set of voters.")
    INVALID_REGULAR_EXPRESSION = (128, False, "The regular expression is not valid.")
    REBOOTSTRAP_REQUIRED = (129, False, "The client must repeat its bootstrap process.")
    STREAMS_INVALID_TOPOLOGY = (130, False, "The supplied streams topology is invalid.")
    STREAMS_INVALID_TOPOLOGY_EPOCH = (131, False, "The supplied streams topology epoch is invalid.")
    STREAMS_TOPOLOGY_FENCED = (132, False, "The supplied streams topology epoch is outdated.")
    SHARE_SESSION_LIMIT_REACHED = (133, True, "The limit of share sessions has been reached.")

    @classmethod
    def of(cls, code: int) -> ErrorCode:
        """The member for ``code``; unknown codes map to UNKNOWN_SERVER_ERROR."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR
