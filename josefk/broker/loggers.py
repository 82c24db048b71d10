"""The broker's log levels as Kafka's BROKER_LOGGER config resource (KIP-412).

Owns ``logger_entries`` (DescribeConfigs: every logger the broker has, named as Python's
``logging`` names them, with its effective level in Kafka's words; ``root`` is the root
logger) and ``change_levels`` (IncrementalAlterConfigs: SET a logger's level, DELETE it back
to its parent's). A package's name (``josefk.broker.group``) is a logger too: its level is
every module's under it that has none of its own. A change lasts until the broker stops, as in Kafka; nothing is written.

Kafka's levels map onto Python's: TRACE and ALL to 5 (below DEBUG; josefk logs nothing
there), DEBUG, INFO, WARN, ERROR, FATAL (Python's CRITICAL), OFF (above every level).
Kafka's checks and messages: an unknown logger or level is INVALID_CONFIG, APPEND and
SUBTRACT are INVALID_REQUEST, and so is deleting the root logger's level. A request is
checked whole before any level changes.

Imports josefk.broker.configs and josefk.protocol.errors only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final, Protocol

from josefk.broker.configs import ConfigEntry, ConfigSource
from josefk.protocol.errors import ErrorCode

ROOT: Final = "root"
SET, DELETE = 0, 1
_TRACE: Final = 5
_OFF: Final = logging.CRITICAL + 50
_LEVELS: Final = {
    "ALL": _TRACE,
    "TRACE": _TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": _OFF,
}
# Python's level -> Kafka's name.
_NAMES: Final = {
    _TRACE: "TRACE",
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARN",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "FATAL",
    _OFF: "OFF",
}


class LevelChange(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def config_operation(self) -> int: ...

    @property
    def value(self) -> str | None: ...


def _logger(name: str) -> logging.Logger | None:
    """The logger of that name, if the broker has it or loggers below it (a package's name,
    ``josefk.broker.group``, sets every module's level under it)."""
    if name == ROOT:
        return logging.getLogger()
    if name not in logging.Logger.manager.loggerDict:
        return None
    return logging.getLogger(name)


def level_name(level: int) -> str:
    """Kafka's name of a Python level (a level between two names takes the lower one)."""
    best = max((known for known in _NAMES if known <= level), default=_TRACE)
    return _NAMES[best]


def logger_entries() -> list[ConfigEntry]:
    """Every logger's effective level, the root logger first."""
    names = sorted(
        name
        for name, known in logging.Logger.manager.loggerDict.items()
        if isinstance(known, logging.Logger)
    )
    return [
        ConfigEntry(
            name=name,
            value=level_name(logger.getEffectiveLevel()),
            source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
        )
        for name in (ROOT, *names)
        if (logger := _logger(name)) is not None
    ]


def change_levels(
    changes: Sequence[LevelChange], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Apply IncrementalAlterConfigs changes to the loggers; nothing changes if one is
    refused."""
    planned: list[tuple[logging.Logger, int]] = []
    for change in changes:
        logger = _logger(change.name)
        if logger is None:
            return ErrorCode.INVALID_CONFIG, f"Logger {change.name} does not exist!"
        if change.config_operation == SET:
            level = _LEVELS.get((change.value or "").upper())
            if level is None:
                return ErrorCode.INVALID_CONFIG, (
                    f"Cannot set the log level of {change.name} to {change.value} as it is not "
                    f"a supported log level. Valid log levels are {', '.join(_LEVELS)}"
                )
            planned.append((logger, level))
        elif change.config_operation == DELETE:
            if change.name == ROOT:
                return (
                    ErrorCode.INVALID_REQUEST,
                    "Removing the log level of the root logger is not allowed",
                )
            planned.append((logger, logging.NOTSET))
        else:
            return ErrorCode.INVALID_REQUEST, (
                f"{change.name} has an invalid operation {change.config_operation}: a logger's "
                "level is SET or DELETEd"
            )
    if not validate_only:
        for logger, level in planned:
            logger.setLevel(level)
    return ErrorCode.NONE, None
