"""DescribeConfigs entries for topics and brokers, with Kafka's sources and synonyms.

Owns how an effective configuration is explained. A broker key's value comes from the first
layer that has it, highest precedence first (``BrokerConfigLayers``): a dynamic per-broker
override (DYNAMIC_BROKER_CONFIG), a dynamic cluster-wide default
(DYNAMIC_DEFAULT_BROKER_CONFIG), the broker's start-up settings (STATIC_BROKER_CONFIG), Kafka's
default (DEFAULT_CONFIG). A topic key set on the topic is DYNAMIC_TOPIC_CONFIG, one inherited
from a broker ``log.*`` key takes that key's source. Synonyms list every layer that has a
value, highest precedence first, as Kafka's DescribeConfigs v1+ does; sensitive values
(passwords, private keys) are answered as null.

Imports josefk.config only.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from josefk.config.broker import BROKER_CONFIG_KEYS, BROKER_KEYS, BrokerConfig, is_sensitive_key
from josefk.config.definitions import ConfigKey
from josefk.config.topic import BROKER_DEFAULT_KEYS, TOPIC_KEYS, LogConfig


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigs config_source values."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    BROKER_LOGGER = 8
    # ConfigResource.Type's GROUP (KIP-848 group configs); 3 above is the ACL resource type.
    GROUP_CONFIG = 32


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
    # The key's declaration (documentation and type for DescribeConfigs v3+); None for a
    # name nothing declares.
    declared: ConfigKey | None = None

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


_LISTENER_PREFIX: Final = "listener.name."


def listener_base_name(name: str) -> str | None:
    """``listener.name.ssl.ssl.keystore.location`` -> ``ssl.keystore.location``; None for a
    name without a listener prefix."""
    if not name.startswith(_LISTENER_PREFIX):
        return None
    _, _, rest = name[len(_LISTENER_PREFIX) :].partition(".")
    return rest or None


def is_sensitive(name: str) -> bool:
    """Whether DescribeConfigs must hide the value (Kafka's PASSWORD type): the key's
    declaration (josefk.config.broker.BROKER_KEYS), a listener-prefixed key's base key's."""
    return is_sensitive_key(name)


def declaration(name: str) -> ConfigKey | None:
    """A broker key's declaration; a listener-prefixed key's base key's."""
    return BROKER_KEYS.get(listener_base_name(name) or name)


# Kafka's broker-level synonyms: names that set the same thing in other units, highest
# precedence first (DynamicBrokerConfig.brokerConfigSynonyms).
_SYNONYM_GROUPS: Final[tuple[tuple[str, ...], ...]] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    """The broker keys that set ``name``'s value, ``name`` among them, in precedence order;
    a listener key's base name follows it (a listener override beats the base key)."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    base = listener_base_name(name)
    return (name, base) if base is not None else (name,)


@functools.cache
def kafka_defaults() -> Mapping[str, str]:
    """Every broker key's default, as strings (keys whose default is null are absent)."""
    return BrokerConfig().to_properties()


@dataclass(frozen=True, slots=True)
class BrokerConfigLayers:
    """A broker's settings by where they come from, and the value in force of each key.

    ``static`` holds only the keys set explicitly at start-up; ``effective`` every key with
    a value; ``dynamic_keys`` the names that may be changed without a restart.
    """

    per_broker: Mapping[str, str]
    cluster_default: Mapping[str, str]
    static: Mapping[str, str]
    effective: Mapping[str, str]
    dynamic_keys: frozenset[str] = frozenset()

    @classmethod
    def of_static(cls, config: BrokerConfig) -> BrokerConfigLayers:
        """A broker with no dynamic configuration."""
        return cls({}, {}, config.to_properties(include_defaults=False), config.to_properties())

    def synonyms(self, names: Sequence[str], *, with_defaults: bool = True) -> list[Synonym]:
        """Every layer's value of each of ``names``, layer by layer, highest first."""
        layers: list[tuple[Mapping[str, str], ConfigSource]] = [
            (self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, ConfigSource.STATIC_BROKER_CONFIG),
        ]
        if with_defaults:
            layers.append((kafka_defaults(), ConfigSource.DEFAULT_CONFIG))
        return [
            Synonym(name, None if is_sensitive(name) else layer[name], source)
            for layer, source in layers
            for name in names
            if name in layer
        ]


def topic_config_entries(
    layers: BrokerConfigLayers, defaults: LogConfig, overrides: dict[str, str]
) -> list[ConfigEntry]:
    """Every topic-level key of a topic whose own settings are ``overrides``; ``defaults``
    is the broker's topic default in force (dynamic broker configs included)."""
    effective = defaults.with_overrides(overrides, ignore_unknown=True).to_properties()
    topic_defaults = LogConfig().to_properties()
    entries = []
    for name, value in sorted(effective.items()):
        synonyms: list[Synonym] = []
        if name in overrides:
            synonyms.append(Synonym(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker_keys = [candidate.key for candidate in BROKER_DEFAULT_KEYS.get(name, ())]
        synonyms += layers.synonyms(broker_keys, with_defaults=False)
        synonyms.append(Synonym(name, topic_defaults.get(name), ConfigSource.DEFAULT_CONFIG))
        entries.append(
            ConfigEntry(
                name, value, synonyms[0].source, synonyms=synonyms, declared=TOPIC_KEYS.get(name)
            )
        )
    for name, value in sorted(overrides.items()):
        declared = TOPIC_KEYS.get(name)
        if name not in effective and declared is not None:
            # An inert key (josefk.config.topic.INERT_TOPIC_KEYS): the topic's own setting.
            synonyms = [Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG)]
            entries.append(
                ConfigEntry(
                    name,
                    value,
                    ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    synonyms=synonyms,
                    declared=declared,
                )
            )
    return entries


def broker_config_entries(
    layers: BrokerConfigLayers, names: Iterable[str] | None = None
) -> list[ConfigEntry]:
    """One broker's keys (every key it knows, or ``names``) as DescribeConfigs answers
    them for the resource named by its id."""
    if names is None:
        names = sorted(
            {*BROKER_CONFIG_KEYS, *layers.per_broker, *layers.cluster_default, *layers.static}
        )
    entries = []
    for name in names:
        synonyms = layers.synonyms(broker_synonyms(name))
        # A more precise synonym set above this key is reported on that key's own entry.
        while synonyms and synonyms[0].name != name:
            synonyms.pop(0)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        sensitive = is_sensitive(name)
        value = None if sensitive else layers.effective.get(name)
        entries.append(
            ConfigEntry(
                name,
                value,
                source,
                read_only=name not in layers.dynamic_keys,
                is_sensitive=sensitive,
                synonyms=synonyms,
                declared=declaration(name),
            )
        )
    return entries


def cluster_default_entries(layers: BrokerConfigLayers) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults, as Kafka answers the broker resource named ""."""
    entries = []
    for name, value in sorted(layers.cluster_default.items()):
        sensitive = is_sensitive(name)
        shown = None if sensitive else value
        entries.append(
            ConfigEntry(
                name,
                shown,
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                read_only=False,
                is_sensitive=sensitive,
                synonyms=[Synonym(name, shown, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)],
                declared=declaration(name),
            )
        )
    return entries
