"""Errors raised while reading or validating record batches.

Each carries enough context (offset, position, sizes) to say what was wrong and where.
Imports nothing from josefk.
"""

from __future__ import annotations


class RecordsError(Exception):
    """Base class of every record batch error."""


class CorruptRecordError(RecordsError):
    """The bytes are not a well-formed batch: bad length, bad magic or CRC mismatch.

    Kafka answers a produce of such a batch with CORRUPT_MESSAGE; recovery truncates the log
    at the first one.
    """


class InvalidRecordError(RecordsError):
    """The batch is well formed but breaks a rule the broker enforces (INVALID_RECORD)."""


class UnsupportedCompressionError(RecordsError):
    """The attributes name a compression codec josefk does not know."""


class DecompressedSizeError(CorruptRecordError):
    """A compressed batch inflates past the bound its reader set (per batch, or what is left
    of a produce request's budget); the broker answers MESSAGE_TOO_LARGE."""
