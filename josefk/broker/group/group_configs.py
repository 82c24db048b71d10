"""Per-group configs of KIP-848 consumer groups and KIP-932 share groups (Kafka's GROUP
config resource, type 32).

Owns ``GroupConfigStore``: each group's overrides of ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` (the broker's ``group.consumer.session.timeout.ms`` /
``group.consumer.heartbeat.interval.ms`` for that group), set with IncrementalAlterConfigs
and read with DescribeConfigs, checked as Kafka checks them (an integer within the broker's
``group.consumer.min/max.*`` bounds, INVALID_CONFIG otherwise; an unknown key INVALID_CONFIG);
and a share group's ``share.auto.offset.reset`` (latest, earliest; Kafka's ``by_duration:``
is refused), ``share.isolation.level`` (read_uncommitted, read_committed) and (Kafka 4.2)
``share.record.lock.duration.ms`` (the group's acquisition lock, instead of the broker's
``group.share.record.lock.duration.ms``; within Kafka's default bounds, 15 s to 60 s, the
values of its ``group.share.min/max.record.lock.duration.ms``).

Where they live: the single node keeps them in ``group-configs.json`` in the first log dir,
replaced whole and atomically on each change (``josefk.fileio``, ``GroupConfigStore``); a
cluster keeps them in etcd, ``P/configs/groups/<group>``, written by compare-and-swap by the
broker a client reached and read from every broker's watched view
(``EtcdGroupConfigStore``), so the group's coordinator sees a change wherever it was made.

The consumer group manager asks ``session_timeout_ms`` / ``heartbeat_interval_ms`` of a
group at each heartbeat, so a change applies from the member's next heartbeat on.

Imports josefk.fileio and the group shard's GroupConfig (the etcd store is handed in as
callables); must not import handlers or josefk.cluster.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Final

from josefk.broker.group.shard import GroupConfig
from josefk.fileio import write_atomically

FILE_NAME: Final = "group-configs.json"
_FORMAT_VERSION: Final = 1
SESSION_TIMEOUT: Final = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL: Final = "consumer.heartbeat.interval.ms"
# KIP-932 share groups' configs, with Kafka's defaults and the values they may take.
SHARE_AUTO_OFFSET_RESET: Final = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL: Final = "share.isolation.level"
SHARE_RECORD_LOCK_DURATION: Final = "share.record.lock.duration.ms"
SHARE_GROUP_CONFIG_DEFAULTS: Final[dict[str, str]] = {
    SHARE_AUTO_OFFSET_RESET: "latest",
    SHARE_ISOLATION_LEVEL: "read_uncommitted",
}
_SHARE_VALUES: Final[dict[str, tuple[str, ...]]] = {
    SHARE_AUTO_OFFSET_RESET: ("latest", "earliest"),
    SHARE_ISOLATION_LEVEL: ("read_uncommitted", "read_committed"),
}
GROUP_CONFIG_KEYS: Final = (
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_ISOLATION_LEVEL,
    SHARE_RECORD_LOCK_DURATION,
)


class InvalidGroupConfig(ValueError):
    """A group config change Kafka refuses with INVALID_CONFIG (the message names the key)."""


class GroupConfigStore:
    """Every group's config overrides, by group id. Event loop thread only (the file write
    runs in the caller's executor)."""

    def __init__(self, path: Path | None, groups: dict[str, dict[str, str]]) -> None:
        # path None: in memory only (unit tests).
        self.path = path
        self._groups = groups
        self._writing = asyncio.Lock()

    @classmethod
    def load(cls, log_dir: str | Path) -> GroupConfigStore:
        """Read the file; one that cannot be parsed stops start-up (ValueError naming it)
        rather than dropping settings an operator made."""
        path = Path(log_dir) / FILE_NAME
        if not path.exists():
            return cls(path, {})
        try:
            document = json.loads(path.read_bytes())
            if not isinstance(document, dict) or document.get("version") != _FORMAT_VERSION:
                raise ValueError("unknown format")
            groups = {
                str(group): {str(k): str(v) for k, v in dict(configs).items()}
                for group, configs in dict(document.get("groups", {})).items()
            }
        except (ValueError, TypeError, AttributeError) as exc:
            raise ValueError(f"cannot read {path}: {exc}") from None
        return cls(path, groups)

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._groups.get(group_id, {}))

    def session_timeout_ms(self, group_id: str, default: int) -> int:
        value = self._groups.get(group_id, {}).get(SESSION_TIMEOUT)
        return default if value is None else int(value)

    def heartbeat_interval_ms(self, group_id: str, default: int) -> int:
        value = self._groups.get(group_id, {}).get(HEARTBEAT_INTERVAL)
        return default if value is None else int(value)

    def alter(
        self,
        group_id: str,
        change: Callable[[dict[str, str]], dict[str, str]],
        config: GroupConfig,
    ) -> dict[str, str]:
        """The group's overrides after ``change``, checked (InvalidGroupConfig); nothing is
        stored: ``store`` does that."""
        new = change(self.overrides(group_id))
        check(new, config)
        return new

    def encode_with(self, group_id: str, overrides: Mapping[str, str]) -> bytes:
        groups = {**self._groups, group_id: dict(overrides)}
        if not overrides:
            del groups[group_id]
        document = {
            "version": _FORMAT_VERSION,
            "groups": {g: dict(sorted(c.items())) for g, c in sorted(groups.items())},
        }
        return json.dumps(document, indent=1).encode() + b"\n"

    def store(self, group_id: str, overrides: Mapping[str, str]) -> Callable[[], None]:
        """A function that writes the file with ``group_id``'s new overrides (run it in an
        executor), after which ``apply`` makes them current."""
        data = self.encode_with(group_id, overrides)
        path = self.path
        return (lambda: write_atomically(path, data)) if path is not None else (lambda: None)

    def apply(self, group_id: str, overrides: Mapping[str, str]) -> None:
        if overrides:
            self._groups[group_id] = dict(overrides)
        else:
            self._groups.pop(group_id, None)

    async def update(
        self,
        group_id: str,
        change: Callable[[dict[str, str]], dict[str, str]],
        config: GroupConfig,
        *,
        validate_only: bool = False,
    ) -> dict[str, str]:
        """Check ``change`` (InvalidGroupConfig), then write the file and apply it. One
        change at a time: two written at once would share the temporary file (one of them
        failing) and the later file would lack the earlier change."""
        async with self._writing:
            new = self.alter(group_id, change, config)
            if not validate_only:
                await asyncio.get_running_loop().run_in_executor(None, self.store(group_id, new))
                self.apply(group_id, new)
            return new


class EtcdGroupConfigStore:
    """A cluster's group configs: read from the broker's watched view of etcd, written by
    compare-and-swap through the metadata store."""

    def __init__(
        self,
        view: Callable[[], Mapping[str, Mapping[str, str]]],
        write: Callable[
            [str, Callable[[dict[str, str]], dict[str, str]]], Awaitable[dict[str, str]]
        ],
    ) -> None:
        self._view = view
        self._write = write

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._view().get(group_id, {}))

    def session_timeout_ms(self, group_id: str, default: int) -> int:
        value = self._view().get(group_id, {}).get(SESSION_TIMEOUT)
        return default if value is None else int(value)

    def heartbeat_interval_ms(self, group_id: str, default: int) -> int:
        value = self._view().get(group_id, {}).get(HEARTBEAT_INTERVAL)
        return default if value is None else int(value)

    async def update(
        self,
        group_id: str,
        change: Callable[[dict[str, str]], dict[str, str]],
        config: GroupConfig,
        *,
        validate_only: bool = False,
    ) -> dict[str, str]:
        def checked(stored: dict[str, str]) -> dict[str, str]:
            new = change(stored)
            check(new, config)
            return new

        if validate_only:
            return checked(self.overrides(group_id))
        return await self._write(group_id, checked)


GroupConfigs = GroupConfigStore | EtcdGroupConfigStore


def check(overrides: Mapping[str, str], config: GroupConfig) -> None:
    """Kafka's GroupConfig validation: known keys, integers within the broker's bounds."""
    bounds = {
        SESSION_TIMEOUT: (
            config.consumer_min_session_timeout_ms,
            config.consumer_max_session_timeout_ms,
        ),
        HEARTBEAT_INTERVAL: (
            config.consumer_min_heartbeat_interval_ms,
            config.consumer_max_heartbeat_interval_ms,
        ),
        SHARE_RECORD_LOCK_DURATION: (
            config.share_min_record_lock_duration_ms,
            config.share_max_record_lock_duration_ms,
        ),
    }
    for name, value in overrides.items():
        if name in _SHARE_VALUES:
            if value not in _SHARE_VALUES[name]:
                raise InvalidGroupConfig(
                    f"Invalid value {value} for configuration {name}: "
                    f"String must be one of: {', '.join(_SHARE_VALUES[name])}"
                )
            continue
        if name not in bounds:
            raise InvalidGroupConfig(f"Unknown group config name: {name}")
        try:
            number = int(value)
        except ValueError:
            raise InvalidGroupConfig(
                f"Invalid value {value} for configuration {name}: Not a number of type INT"
            ) from None
        low, high = bounds[name]
        if not low <= number <= high:
            raise InvalidGroupConfig(
                f"Invalid value {value} for configuration {name}: "
                f"Value must be between {low} and {high}"
            )
