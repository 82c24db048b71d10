"""Small value types the partition log hands out: offsets with their position, append results.

Owns ``TopicPartition`` (and the ``<topic>-<partition>`` directory name), ``FetchIsolation``,
``AppendOrigin``, ``LogAppendInfo``, the transaction values ``TxnMarker`` and ``AbortedTxn``,
and the special ListOffsets timestamps (``LogOffsetMetadata`` and
``FetchDataInfo`` live with the segment that produces them, in josefk.storage.segment). Imports
nothing from josefk; the broker and the storage layer both use these without further imports.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final, NamedTuple

UNKNOWN_OFFSET: Final = -1
UNKNOWN_POSITION: Final = -1

# ListOffsets' special timestamps (the request's "timestamp" field).
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3

# Kafka's legal topic names: letters, digits, '.', '_', '-', at most 249 characters.
_LEGAL_TOPIC: Final = re.compile(r"[A-Za-z0-9._-]{1,249}")


class TopicPartition(NamedTuple):
    """A partition of a topic; its log lives in the directory ``<topic>-<partition>``."""

    topic: str
    partition: int

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def from_dir_name(cls, name: str) -> TopicPartition:
        """Parse ``<topic>-<partition>``; the topic itself may contain dashes.

        Raises ValueError for names that are not a partition directory (``.deleted`` dirs
        of deleted topics, ``-future``/``-stray`` dirs and stray files are told apart by the
        caller before asking).
        """
        topic, sep, number = name.rpartition("-")
        if not sep or not topic or not number.isdigit() or not _LEGAL_TOPIC.fullmatch(topic):
            raise ValueError(f"{name!r} is not a partition directory name (<topic>-<partition>)")
        return cls(topic, int(number))

    def __str__(self) -> str:
        return self.dir_name


def is_legal_topic_name(topic: str) -> bool:
    return topic not in (".", "..") and _LEGAL_TOPIC.fullmatch(topic) is not None


class FetchIsolation(enum.Enum):
    """How far a read may go: the log end (followers), the high watermark (consumers with
    read_uncommitted) or the last stable offset (read_committed)."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


class AppendOrigin(enum.Enum):
    """Who writes a leader append, which decides what it may hold (Kafka's AppendOrigin):
    a client's produce (no control batches, sequences checked), the broker's own
    coordinators (transaction markers; the group coordinator's transactional offset
    commits, which carry a producer id but no sequence)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A COMMIT or ABORT marker the transaction coordinator asks a partition to write for
    one producer's transaction."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction as the ``.txnindex`` holds it: the producer's first offset in
    the partition, the offset of its ABORT marker (``last_offset``), and the last stable
    offset once it completed. Fetch responses carry (producer_id, first_offset)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """What an append did, all a produce response needs.

    ``log_append_time`` is -1 unless the topic uses LogAppendTime; ``max_timestamp`` and
    ``offset_of_max_timestamp`` are the largest batch max timestamp of the append and the
    last offset of the (first) batch that has it, as Kafka's shallow tracking does.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    record_count: int
    batch_count: int
    valid_bytes: int
    last_offset_of_first_batch: int

    @property
    def num_messages(self) -> int:
        return self.last_offset - self.first_offset + 1
