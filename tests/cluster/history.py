"""A history checker for the cluster tests, after Jepsen's analysis of Kafka: given what a
test sent, what the cluster acknowledged (partition, offset, value) and what consumers polled
afterwards, in poll order, it reports the anomalies Jepsen looks for. None may occur for
acknowledged writes.

- lost write: an acknowledged value that no poll returned;
- duplicate: one value stored at two offsets;
- inconsistent offsets: a value polled at another offset than its acknowledgement said, or two
  values at one offset;
- non-monotonic poll: a consumer's offsets of one partition going backwards or repeating;
- phantom: a polled value that was never sent.

Must not import josefk: it judges the cluster from the clients' side only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Entry = tuple[int, int, bytes]  # partition, offset, value


@dataclass
class History:
    sent: list[bytes] = field(default_factory=list)
    acked: list[Entry] = field(default_factory=list)
    polled: list[Entry] = field(default_factory=list)

    def anomalies(self) -> list[str]:
        found: list[str] = []
        sent = set(self.sent)
        where_polled: dict[bytes, set[tuple[int, int]]] = {}
        at_offset: dict[tuple[int, int], set[bytes]] = {}
        last_offset: dict[int, int] = {}
        for partition, offset, value in self.polled:
            where_polled.setdefault(value, set()).add((partition, offset))
            at_offset.setdefault((partition, offset), set()).add(value)
            if value not in sent:
                found.append(f"phantom: {value!r} at {partition}:{offset} was never sent")
            previous = last_offset.get(partition)
            if previous is not None and offset <= previous:
                found.append(
                    f"non-monotonic poll: partition {partition} went {previous} -> {offset}"
                )
            last_offset[partition] = offset
        for value, places in where_polled.items():
            if len(places) > 1:
                found.append(f"duplicate: {value!r} stored at {sorted(places)}")
        for place, values in at_offset.items():
            if len(values) > 1:
                found.append(f"inconsistent offsets: {place} holds {sorted(values)}")
        for partition, offset, value in self.acked:
            places = where_polled.get(value)
            if not places:
                found.append(f"lost write: {value!r} acknowledged at {partition}:{offset}")
            elif (partition, offset) not in places:
                found.append(
                    f"inconsistent offsets: {value!r} acknowledged at {partition}:{offset}, "
                    f"read at {sorted(places)}"
                )
        return found

    def check(self) -> None:
        found = self.anomalies()
        assert not found, f"{len(found)} anomalies, first: " + "; ".join(found[:10])
        assert self.acked, "nothing was acknowledged: the history proves nothing"
