"""Broker and topic configuration with Kafka's property names and defaults.

Owns the pydantic models and their loading from a properties file, the environment and the
command line. Must not import josefk.broker or josefk.storage.

- ``BrokerConfig`` (broker.py): every broker key, Kafka's defaults, validation, derived values
  such as ``retention_ms`` and ``default_log_config()``;
- ``LogConfig`` (topic.py): topic-level configs and their broker-level synonyms;
- ``load_broker_config`` (loader.py): defaults < file < ``JOSEFK_*`` env < ``--set`` < flags;
- properties.py: Java ``.properties`` syntax and Kafka's ``meta.properties``.
"""

from josefk.config.broker import (
    BROKER_CONFIG_KEYS,
    BrokerConfig,
    BrokerConfigError,
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

__all__ = [
    "BROKER_CONFIG_KEYS",
    "BrokerConfig",
    "BrokerConfigError",
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
