"""Producer id allocation for InitProducerId, persisted so that no id is handed out twice.

Owns ``ProducerIdManager``. Kafka's controller hands brokers blocks of producer ids and
records the next free block durably; josefk, a single node, does the same with a small file
in the first log dir, ``producer-id-block``::

    1                   format version
    5000                the first id of the next block: ids below it may have been handed out

Before the first id of a block is handed out, the file is rewritten (temporary file, fsync,
rename, fsync of the dir) to point past that block, so after any restart, clean or SIGKILL,
allocation resumes above every id ever returned. Up to a block's worth of ids is skipped by a
restart, as in Kafka.

Epochs (KIP-360): a request naming the producer id and epoch this broker last gave out gets
the same id with the epoch bumped, or a fresh id at epoch 0 once the epoch would reach
32767 (Kafka's exhaustion rule: an epoch >= Short.MAX_VALUE - 1 is not bumped); a retry of a
bump that already happened gets the same answer again; an older epoch is fenced. An id the
broker does not remember (given out before a restart, or never) gets a fresh id: the epochs
of producer ids without a transactional id are not persisted (Kafka's coordinator keeps no
state for them either, and gives such producers a fresh id every time).

Imports josefk.fileio (the atomic file write) only; never protocol or handlers.
Runs on the event loop; ``init_producer_id`` blocks for one small fsynced write once per
block.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from josefk.fileio import write_atomically

logger = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_FILE: Final = "producer-id-block"
PRODUCER_ID_BLOCK_SIZE: Final = 1000
FILE_VERSION: Final = 1
# Kafka bumps an epoch only below Short.MAX_VALUE - 1; beyond that a new id is needed.
MAX_BUMPABLE_EPOCH: Final = 32766
# How many producer ids' latest epochs are remembered for bumps (LRU).
REMEMBERED_EPOCHS: Final = 100_000


class ProducerIdBlockError(Exception):
    """The block file is unreadable or cannot be written; ``path`` names it."""

    def __init__(self, message: str, *, path: Path) -> None:
        self.path = path
        super().__init__(f"{message} ({path})")


class ProducerFencedError(Exception):
    """An epoch bump asked with an epoch older than the one last handed out."""


class ProducerIdManager:
    """Hands out producer ids and epochs. Build with ``ProducerIdManager.load``."""

    def __init__(self, path: Path, next_block_start: int, *, block_size: int) -> None:
        self._path = path
        self._block_size = block_size
        # Ids in [_next_id, _block_end) may be handed out without touching the file.
        self._next_id = next_block_start
        self._block_end = next_block_start
        self._epochs: OrderedDict[int, int] = OrderedDict()
        self._fetch_next: Callable[[], Awaitable[range]] | None = None
        self._next_block: range | None = None
        self._fetching = False

    @classmethod
    def load(
        cls, log_dir: str | os.PathLike[str], *, block_size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> ProducerIdManager:
        """Read ``<log_dir>/producer-id-block`` (absent: ids start at 0). Blocking."""
        path = Path(log_dir) / PRODUCER_ID_BLOCK_FILE
        try:
            text = path.read_text(encoding="ascii")
        except FileNotFoundError:
            return cls(path, 0, block_size=block_size)
        except (OSError, UnicodeDecodeError) as exc:
            raise ProducerIdBlockError(
                f"cannot read the producer id block: {exc}", path=path
            ) from exc
        lines = text.split()
        if len(lines) != 2 or not all(line.isdigit() for line in lines):
            raise ProducerIdBlockError(f"malformed producer id block file {text!r}", path=path)
        if int(lines[0]) != FILE_VERSION:
            raise ProducerIdBlockError(f"unknown producer id block version {lines[0]}", path=path)
        return cls(path, int(lines[1]), block_size=block_size)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def next_block_start(self) -> int:
        """The first id of the block after the current one, as persisted."""
        return self._block_end

    def use_cluster_blocks(self, first: range, fetch_next: Callable[[], Awaitable[range]]) -> None:
        """In a cluster, blocks come from etcd (taken by compare-and-swap, so no two brokers
        ever get the same ids) instead of the local file: ``first`` now, and the next one
        fetched in the background once half of the current one is used."""
        self._next_id, self._block_end = first.start, first.stop
        self._fetch_next = fetch_next
        self._next_block = None

    def _maybe_prefetch(self) -> None:
        if self._fetch_next is None or self._next_block is not None or self._fetching:
            return
        if self._next_id - (self._block_end - self._block_size) < self._block_size // 2:
            return
        self._fetching = True

        async def fetch() -> None:
            try:
                assert self._fetch_next is not None
                self._next_block = await self._fetch_next()
            except Exception:
                logger.exception("cannot take a producer id block from the cluster")
            finally:
                self._fetching = False

        asyncio.get_running_loop().create_task(fetch())

    def generate_producer_id(self) -> int:
        """A producer id never handed out before, by this broker or before its restarts."""
        if self._fetch_next is not None:
            self._maybe_prefetch()
            if self._next_id >= self._block_end:
                block, self._next_block = self._next_block, None
                if block is None:
                    self._maybe_prefetch()
                    raise ProducerIdBlockError(
                        "the next producer id block is still on its way from etcd", path=self._path
                    )
                self._next_id, self._block_end = block.start, block.stop
        elif self._next_id >= self._block_end:
            self._persist(self._next_id + self._block_size)
        producer_id = self._next_id
        self._next_id += 1
        return producer_id

    def init_producer_id(self, producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
        """The (producer id, epoch) an InitProducerId without a transactional id gets.

        With no id in the request, a fresh id at epoch 0. With the id and epoch the broker
        last gave out, the epoch bumped (a fresh id when exhausted); with the epoch before
        that (a retried bump), the current one again; with an older one, ProducerFencedError.
        """
        if producer_id >= 0 and producer_epoch >= 0:
            current = self._epochs.get(producer_id)
            if current is not None:
                if producer_epoch == current - 1:
                    self._epochs.move_to_end(producer_id)
                    return producer_id, current
                if producer_epoch == current and current < MAX_BUMPABLE_EPOCH:
                    return self._remember(producer_id, current + 1)
                if producer_epoch < current:
                    raise ProducerFencedError(
                        f"producer {producer_id} asked to bump epoch {producer_epoch}, but its "
                        f"current epoch is {current}"
                    )
        return self._remember(self.generate_producer_id(), 0)

    def _remember(self, producer_id: int, epoch: int) -> tuple[int, int]:
        self._epochs[producer_id] = epoch
        self._epochs.move_to_end(producer_id)
        while len(self._epochs) > REMEMBERED_EPOCHS:
            self._epochs.popitem(last=False)
        return producer_id, epoch

    def _persist(self, block_end: int) -> None:
        try:
            write_atomically(self._path, f"{FILE_VERSION}\n{block_end}\n")
        except OSError as exc:
            raise ProducerIdBlockError(
                f"cannot persist the producer id block: {exc.strerror or exc}", path=self._path
            ) from exc
        logger.info("producer ids up to %d reserved in %s", block_end - 1, self._path)
        self._block_end = block_end
