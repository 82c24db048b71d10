"""A partition as the broker sees it: the local log plus leadership state.

Owns ``Partition``: the leader epoch, the replica set and ISR, and the rule that moves the high
watermark (the smallest log end offset among in-sync replicas). On a single node the ISR is the
leader alone, so the high watermark follows the log end offset at once; the shape stays that of
a replicated partition so that followers can be added without changing callers.

Imports josefk.storage; must not import josefk.protocol or the handlers.
"""

from __future__ import annotations

from dataclasses import dataclass

from josefk.storage.log import Log
from josefk.storage.offsets import FetchIsolation, LogAppendInfo, TopicPartition
from josefk.storage.segment import FetchDataInfo

__all__ = ["Partition", "PartitionRead", "TopicPartition"]


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """A read and the offsets the fetch response reports with it, taken at the same moment."""

    info: FetchDataInfo
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int


class Partition:
    """Leader state of one partition. Methods run on the event loop thread and never await,
    so an append and the high watermark move it causes are seen together."""

    def __init__(self, tp: TopicPartition, log: Log, *, local_broker_id: int) -> None:
        self.tp = tp
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader_id = local_broker_id
        self.leader_epoch = 0
        self.partition_epoch = 0
        self.replicas: list[int] = [local_broker_id]
        self.isr: list[int] = [local_broker_id]
        # Becoming leader: the HW read back from the checkpoint may lag the log after a crash;
        # with this replica alone in sync, everything in the log is committed.
        self._maybe_increment_high_watermark()

    def append_records_to_leader(self, records: memoryview) -> LogAppendInfo:
        """Append a producer's batches; with the leader as the only in-sync replica the high
        watermark moves to the new log end offset before this returns."""
        info = self.log.append_as_leader(records, self.leader_epoch)
        self._maybe_increment_high_watermark()
        return info

    def _maybe_increment_high_watermark(self) -> bool:
        # The HW is the minimum LEO over the ISR; the ISR here is this replica alone.
        moved = self.log.maybe_increment_high_watermark(self.log.log_end_offset_metadata)
        return moved is not None

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        *,
        min_one_message: bool,
    ) -> PartitionRead:
        log = self.log
        info = log.read(fetch_offset, max_bytes, isolation, min_one_message=min_one_message)
        return PartitionRead(
            info=info,
            high_watermark=log.high_watermark,
            last_stable_offset=log.last_stable_offset,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
        )
