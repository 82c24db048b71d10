"""DescribeConfigs entries for topics and brokers, with Kafka's sources and synonyms.

Owns how a topic's effective configuration is explained: a key set on the topic is
DYNAMIC_TOPIC_CONFIG, one inherited from an explicitly set broker ``log.*`` key is
STATIC_BROKER_CONFIG, anything else DEFAULT_CONFIG; synonyms list every layer that has a value,
highest precedence first, as Kafka's DescribeConfigs v1+ does. Imports josefk.config only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from josefk.config.broker import BrokerConfig
from josefk.config.topic import BROKER_DEFAULT_KEYS, LogConfig


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigs config_source values."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    BROKER_LOGGER = 8


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: list[Synonym] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


def topic_config_entries(
    broker: BrokerConfig, defaults: LogConfig, overrides: dict[str, str]
) -> list[ConfigEntry]:
    """Every topic-level key of a topic whose own settings are ``overrides``."""
    effective = defaults.with_overrides(overrides, ignore_unknown=True).to_properties()
    kafka_defaults = LogConfig().to_properties()
    entries = []
    for name, value in sorted(effective.items()):
        synonyms: list[Synonym] = []
        if name in overrides:
            synonyms.append(Synonym(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        for broker_key in BROKER_DEFAULT_KEYS.get(name, ()):
            if not broker.is_default(broker_key.key):
                synonyms.append(
                    Synonym(
                        broker_key.key,
                        broker.value_of(broker_key.key),
                        ConfigSource.STATIC_BROKER_CONFIG,
                    )
                )
        synonyms.append(Synonym(name, kafka_defaults.get(name), ConfigSource.DEFAULT_CONFIG))
        entries.append(ConfigEntry(name, value, synonyms[0].source, synonyms=synonyms))
    return entries


def broker_config_entries(broker: BrokerConfig) -> list[ConfigEntry]:
    """Every broker key; all are static in josefk (read at start-up), hence read-only."""
    entries = []
    for entry in broker.describe_entries():
        source = (
            ConfigSource.DEFAULT_CONFIG
            if entry.source == "DEFAULT_CONFIG"
            else ConfigSource.STATIC_BROKER_CONFIG
        )
        sensitive = entry.sensitive or "password" in entry.name
        value = None if sensitive else entry.value
        entries.append(
            ConfigEntry(
                entry.name,
                value,
                source,
                read_only=True,
                is_sensitive=sensitive,
                synonyms=[Synonym(entry.name, value, source)],
            )
        )
    return entries
