"""Durable share-partition state, a first step: one small file per (group, topic, partition).

Owns ``ShareStateStore``. Kafka keeps share state in ``__share_group_state`` through the
share coordinator (ShareSnapshot and ShareUpdate records); josefk does not build that yet.
What it keeps instead is enough that an acknowledged record is not delivered again after a
restart: on every acknowledgement (before it is answered) and every release of a member's
records, the share partition's start offset and its in-flight ranges (first and last offset,
state, delivery count) are written to ``<log dir>/share-state/<name>.json`` atomically and
fsynced. A load turns ACQUIRED ranges into AVAILABLE (their holders are gone: they are
delivered again, with the delivery counts as last written).

File layout (JSON): ``{"group": str, "topic": str, "partition": int, "start_offset": int,
"ranges": [[first_offset, last_offset, state, delivery_count], ...]}``; the file name is the
hex SHA-256 of group, topic and partition (group ids may hold any character).

Not replicated: in a cluster the state stays on the broker that led the partition.

Imports the share partition and josefk.fileio; must not import handlers.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from josefk.broker.partition import TopicPartition
from josefk.broker.share.partition import InFlightRange, RecordState, SharePartition
from josefk.fileio import write_atomically

logger = logging.getLogger(__name__)


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
