"""The share-partition state files of josefk before ``__share_group_state``: read once.

Owns ``migrate_json_state``. josefk's first share groups wrote each share partition's state to
``<log dir>/share-state/<sha256>.json``: ``{"group": str, "topic": str, "partition": int,
"start_offset": int, "ranges": [[first_offset, last_offset, state, delivery_count], ...]}``.
At the start of a single node, after the share coordinator loaded its topic, each file whose
share partition has no state in the topic yet is written there as a ShareSnapshot (its topic
named by id from the catalog; ACQUIRED ranges as available), and the directory is renamed
``share-state.migrated`` so that it is never read again. A cluster broker does not migrate
(its files were never replicated: state kept before the cluster is not carried over).

Imports the share coordinator and records and the catalog; must not import handlers.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from josefk.broker.partition import TopicPartition
from josefk.broker.share.coordinator import ShareCoordinator
from josefk.broker.share.partition import InFlightRange, RecordState, SharePartition
from josefk.broker.share.records import AVAILABLE, ShareStateKey, StateBatch
from josefk.fileio import write_atomically

logger = logging.getLogger(__name__)

MIGRATED_SUFFIX = ".migrated"


async def migrate_json_state(directory: Path, coordinator: ShareCoordinator, catalog: Any) -> int:
    """Move the state files under ``directory`` into ``__share_group_state``; the count
    moved. Nothing to do when the directory is absent."""
    # Once, at start-up before any listener opens: the blocking reads cannot delay a client.
    if not directory.is_dir():  # noqa: ASYNC240
        return 0
    moved = 0
    for (group_id, tp), (start, ranges) in ShareStateStore(directory).load().items():
        info = catalog.get(tp.topic)
        if info is None:
            continue
        key = ShareStateKey(group_id, info.topic_id, tp.partition)
        if key in coordinator.states:
            continue
        batches = [
            StateBatch(
                r.first_offset,
                r.last_offset,
                AVAILABLE if r.state is RecordState.AVAILABLE else int(r.state),
                r.delivery_count,
            )
            for r in ranges
        ]
        error = await coordinator.write(
            key, state_epoch=0, leader_epoch=-1, start_offset=start, batches=batches
        )
        if error:
            logger.warning("share state of %s %s not migrated: %s", group_id, tp, error.name)
            return moved
        moved += 1
    directory.rename(directory.with_name(directory.name + MIGRATED_SUFFIX))  # noqa: ASYNC240
    logger.info(
        "moved %d share partition states from %s to the share coordinator", moved, directory
    )
    return moved


class ShareStateStore:
    """Share-partition state files under one directory. Event loop thread only."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _path(self, group_id: str, tp: TopicPartition) -> Path:
        key = json.dumps([group_id, tp.topic, tp.partition]).encode()
        return self.directory / f"{hashlib.sha256(key).hexdigest()}.json"

    def save(self, group_id: str, tp: TopicPartition, sp: SharePartition) -> None:
        body = {
            "group": group_id,
            "topic": tp.topic,
            "partition": tp.partition,
            "start_offset": sp.start_offset,
            "ranges": [
                [r.first_offset, r.last_offset, int(r.state), r.delivery_count] for r in sp.ranges
            ],
        }
        write_atomically(self._path(group_id, tp), json.dumps(body, separators=(",", ":")))

    def delete(self, group_id: str, tp: TopicPartition) -> None:
        self._path(group_id, tp).unlink(missing_ok=True)

    def load(self) -> dict[tuple[str, TopicPartition], tuple[int, list[InFlightRange]]]:
        """Every saved share partition: its start offset and ranges (ACQUIRED as AVAILABLE)."""
        found: dict[tuple[str, TopicPartition], tuple[int, list[InFlightRange]]] = {}
        for path in sorted(self.directory.glob("*.json")):
            try:
                body = json.loads(path.read_text())
                tp = TopicPartition(str(body["topic"]), int(body["partition"]))
                ranges = []
                for first, last, state, count in body["ranges"]:
                    kind = RecordState(int(state))
                    if kind is RecordState.ACQUIRED:
                        kind = RecordState.AVAILABLE
                    ranges.append(InFlightRange(int(first), int(last), kind, int(count)))
                found[(str(body["group"]), tp)] = (int(body["start_offset"]), ranges)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                logger.warning("ignoring unreadable share state %s: %s", path, exc)
        return found
