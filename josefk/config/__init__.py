"""Broker and topic configuration with Kafka's property names and defaults.

Owns the pydantic models and their loading from a properties file, the environment and the
command line. Must not import josefk.broker or josefk.storage.

- ``BrokerConfig`` (broker.py): every broker key, Kafka's defaults, validation, derived values
  such as ``retention_ms`` and ``default_log_config()``;
- ``LogConfig`` (topic.py): topic-level configs and their broker-level synonyms;
- ``load_broker_config`` (loader.py): defaults < file < ``JOSEFK_*`` env < ``--set`` < flags;
- properties.py: Java ``.properties`` syntax and Kafka's ``meta.properties``.

The names below are imported lazily: the storage layer imports ``josefk.config.topic``, which
runs this file first, and should not pay for building BrokerConfig's model on the way.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from josefk.config.broker import (
        BROKER_CONFIG_KEYS,
        BrokerConfig,
        BrokerConfigError,
        ConfigEntry,
        ConfigProblem,
        Listener,
        parse_host_port,
    )
    from josefk.config.loader import env_key, env_name, load_broker_config, parse_overrides
    from josefk.config.properties import (
        MetaProperties,
        MetaPropertiesError,
        PropertiesSyntaxError,
        ensure_meta_properties,
        format_properties,
        generate_uuid,
        parse_properties,
        read_properties_file,
    )
    from josefk.config.topic import InvalidConfigError, LogConfig

_MODULE_OF: dict[str, str] = {
    "BROKER_CONFIG_KEYS": "josefk.config.broker",
    "BrokerConfig": "josefk.config.broker",
    "BrokerConfigError": "josefk.config.broker",
    "ConfigEntry": "josefk.config.broker",
    "ConfigProblem": "josefk.config.broker",
    "InvalidConfigError": "josefk.config.topic",
    "Listener": "josefk.config.broker",
    "LogConfig": "josefk.config.topic",
    "MetaProperties": "josefk.config.properties",
    "MetaPropertiesError": "josefk.config.properties",
    "PropertiesSyntaxError": "josefk.config.properties",
    "ensure_meta_properties": "josefk.config.properties",
    "env_key": "josefk.config.loader",
    "env_name": "josefk.config.loader",
    "format_properties": "josefk.config.properties",
    "generate_uuid": "josefk.config.properties",
    "load_broker_config": "josefk.config.loader",
    "parse_host_port": "josefk.config.broker",
    "parse_overrides": "josefk.config.loader",
    "parse_properties": "josefk.config.properties",
    "read_properties_file": "josefk.config.properties",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BROKER_CONFIG_KEYS",
    "BrokerConfig",
    "BrokerConfigError",
    "ConfigEntry",
    "ConfigProblem",
    "InvalidConfigError",
    "Listener",
    "LogConfig",
    "MetaProperties",
    "MetaPropertiesError",
    "PropertiesSyntaxError",
    "ensure_meta_properties",
    "env_key",
    "env_name",
    "format_properties",
    "generate_uuid",
    "load_broker_config",
    "parse_host_port",
    "parse_overrides",
    "parse_properties",
    "read_properties_file",
]
