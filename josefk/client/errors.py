"""Typed exceptions of josefk's client.

Owns ``KafkaError`` (the base: ``code``, ``name``, ``retriable`` and a message), one subclass
per Kafka error code, built from ``josefk.protocol.ErrorCode`` and reachable through
``error_for(code)`` / ``raise_for(code)`` or by name (``errors.UnknownTopicOrPartitionError``),
and the client-side failures that have no wire code: ``KafkaConnectionError`` (the socket
failed or closed; retriable), ``KafkaTimeoutError`` (a request or an operation ran out of
time; retriable), ``UnsupportedVersionError`` (no version of an API both sides speak) and
``IllegalStateError`` (the client was used wrongly, e.g. after close),
``SslAuthenticationError`` (the TLS handshake failed: an untrusted certificate, a plaintext
listener), and the transactional
producer's ``FatalTransactionError`` / ``AbortableTransactionError`` /
``TransactionAbortedError`` (each with the broker's error as ``cause``).

Imports only josefk.protocol.errors; no I/O.
"""

from __future__ import annotations

from typing import Any, ClassVar

from josefk.protocol.errors import ErrorCode


class KafkaError(Exception):
    """Base of every error the client raises.

    ``code`` is Kafka's error code (-1 for the client-side errors that have none of their own
    besides UNKNOWN_SERVER_ERROR), ``name`` its upper-case name as in the protocol guide and
    ``retriable`` whether trying again may succeed.
    """

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False
    default_message: ClassVar[str] = ""

    def __init__(self, message: str | None = None, **context: Any) -> None:
        self.message = message or self.default_message or self.name
        self.context = context
        super().__init__(self.message)

    def __str__(self) -> str:
        detail = ", ".join(f"{k}={v}" for k, v in self.context.items())
        text = f"[{self.name} ({self.code})] {self.message}"
        return f"{text} ({detail})" if detail else text


class KafkaConnectionError(KafkaError):
    """The connection to a broker failed or closed before the response arrived."""

    code = ErrorCode.NETWORK_EXCEPTION.value
    name = "NETWORK_EXCEPTION"
    retriable = True


class NotAKafkaBrokerError(KafkaConnectionError):
    """Something answered at the address, but not the Kafka protocol (or never answered the
    first request): retrying the same address will not help."""

    retriable = False


class UnknownBrokerError(KafkaConnectionError):
    """A request for one broker by id (a broker's configs or loggers, say) names a broker the
    cluster's metadata does not list."""


class KafkaTimeoutError(KafkaError):
    """A request or a client operation did not finish in time."""

    code = ErrorCode.REQUEST_TIMED_OUT.value
    name = "REQUEST_TIMED_OUT"
    retriable = True


class SslAuthenticationError(KafkaError):
    """The TLS handshake with the broker failed (its certificate is not trusted or does not
    name the host, ours was refused, or the listener does not speak TLS): retrying the same
    settings will not help, as Kafka's SslAuthenticationException."""

    code = -1
    name = "SSL_AUTHENTICATION_FAILED"
    retriable = False


class UnsupportedVersionError(KafkaError):
    """The broker and this client share no version of an API."""

    code = ErrorCode.UNSUPPORTED_VERSION.value
    name = "UNSUPPORTED_VERSION"
    retriable = False


class IllegalStateError(KafkaError):
    """The client was used in a way its state does not allow (closed, not subscribed...)."""

    code = -1
    name = "ILLEGAL_STATE"
    retriable = False


class TransactionError(KafkaError):
    """Base of the transactional producer's own failures; ``cause`` is the error behind it
    (the broker's typed error) when there is one."""

    code = -1
    name = "TRANSACTION_ERROR"
    retriable = False

    def __init__(
        self, message: str | None = None, *, cause: BaseException | None = None, **context: Any
    ) -> None:
        if message is None and cause is not None:
            message = str(cause)
        super().__init__(message, **context)
        self.cause = cause


class FatalTransactionError(TransactionError):
    """The transactional producer can never send again (fenced by a newer producer with the
    same transactional id, not authorised...): the only thing left is ``close()``."""

    name = "FATAL_TRANSACTION_ERROR"


class AbortableTransactionError(TransactionError):
    """The current transaction cannot commit (a record failed, the coordinator said so):
    call ``abort_transaction()``, after which a new transaction may begin."""

    name = "ABORTABLE_TRANSACTION_ERROR"


class TransactionAbortedError(TransactionError):
    """The record's transaction was aborted before the record was sent."""

    name = "TRANSACTION_ABORTED"


def _class_name(code_name: str) -> str:
    camel = "".join(part.capitalize() for part in code_name.split("_"))
    return camel if camel.endswith(("Error", "Exception")) else camel + "Error"


_BY_CODE: dict[int, type[KafkaError]] = {}


def _build_classes() -> None:
    namespace = globals()
    for member in ErrorCode:
        if member is ErrorCode.NONE:
            continue
        cls_name = _class_name(member.name)
        cls = type(
            cls_name,
            (KafkaError,),
            {
                "code": member.value,
                "name": member.name,
                "retriable": member.retriable,
                "default_message": member.message,
                "__doc__": member.message or member.name,
                "__module__": __name__,
            },
        )
        _BY_CODE[member.value] = cls
        namespace[cls_name] = cls


_build_classes()

# Names used by the client itself, declared so that type checkers and readers see them.
UnknownServerError: type[KafkaError] = _BY_CODE[-1]
OffsetOutOfRangeError: type[KafkaError] = _BY_CODE[1]
UnknownTopicOrPartitionError: type[KafkaError] = _BY_CODE[3]
LeaderNotAvailableError: type[KafkaError] = _BY_CODE[5]
NotLeaderOrFollowerError: type[KafkaError] = _BY_CODE[6]
RequestTimedOutError: type[KafkaError] = _BY_CODE[7]
MessageTooLargeError: type[KafkaError] = _BY_CODE[10]
CoordinatorLoadInProgressError: type[KafkaError] = _BY_CODE[14]
CoordinatorNotAvailableError: type[KafkaError] = _BY_CODE[15]
NotCoordinatorError: type[KafkaError] = _BY_CODE[16]
IllegalGenerationError: type[KafkaError] = _BY_CODE[22]
UnknownMemberIdError: type[KafkaError] = _BY_CODE[25]
RebalanceInProgressError: type[KafkaError] = _BY_CODE[27]
TopicAlreadyExistsError: type[KafkaError] = _BY_CODE[36]
InvalidPartitionsError: type[KafkaError] = _BY_CODE[37]
InvalidConfigError: type[KafkaError] = _BY_CODE[40]
OutOfOrderSequenceNumberError: type[KafkaError] = _BY_CODE[45]
DuplicateSequenceNumberError: type[KafkaError] = _BY_CODE[46]
InvalidProducerEpochError: type[KafkaError] = _BY_CODE[47]
UnknownProducerIdError: type[KafkaError] = _BY_CODE[59]
NonEmptyGroupError: type[KafkaError] = _BY_CODE[68]
GroupIdNotFoundError: type[KafkaError] = _BY_CODE[69]
MemberIdRequiredError: type[KafkaError] = _BY_CODE.get(79, KafkaError)
ProducerFencedError: type[KafkaError] = _BY_CODE[90]
ConcurrentTransactionsError: type[KafkaError] = _BY_CODE[51]
SaslAuthenticationFailedError: type[KafkaError] = _BY_CODE[58]
UnsupportedSaslMechanismError: type[KafkaError] = _BY_CODE[33]
IllegalSaslStateError: type[KafkaError] = _BY_CODE[34]


def error_class(code: int) -> type[KafkaError]:
    """The exception class of a Kafka error code (KafkaError itself for unknown codes)."""
    return _BY_CODE.get(code, KafkaError)


def error_for(code: int, message: str | None = None, **context: Any) -> KafkaError:
    """An exception instance for a non-zero error code."""
    cls = _BY_CODE.get(code)
    if cls is None:
        err = KafkaError(message or f"unknown error code {code}", **context)
        return err
    return cls(message, **context)


def raise_for(code: int, message: str | None = None, **context: Any) -> None:
    """Raise the typed exception of ``code`` unless it is 0 (NONE)."""
    if code:
        raise error_for(code, message, **context)


__all__ = [
    "AbortableTransactionError",
    "ConcurrentTransactionsError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "DuplicateSequenceNumberError",
    "FatalTransactionError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "IllegalStateError",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "LeaderNotAvailableError",
    "MemberIdRequiredError",
    "MessageTooLargeError",
    "NonEmptyGroupError",
    "NotAKafkaBrokerError",
    "NotCoordinatorError",
    "NotLeaderOrFollowerError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceNumberError",
    "ProducerFencedError",
    "RebalanceInProgressError",
    "RequestTimedOutError",
    "SaslAuthenticationFailedError",
    "SslAuthenticationError",
    "TopicAlreadyExistsError",
    "TransactionAbortedError",
    "TransactionError",
    "UnknownBrokerError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownTopicOrPartitionError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "error_class",
    "error_for",
    "raise_for",
]
