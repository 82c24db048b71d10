"""Every key of Kafka's documented broker and topic key lists is either honoured, accepted as
inert (declared so, with the reason, and listed so in docs/configuration.md), or refused with a
reason; and what the declarations say matches what the broker does with the key.

The lists are tests/config/kafka_keys/*.txt (names only, from Kafka's configuration pages).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from josefk.broker.dynamic_config import (
    DYNAMIC_KEYS,
    LOG_DEFAULT_KEYS,
    ConnectionLimits,
    LogCleanerSettings,
)
from josefk.broker.security.tls import DYNAMIC_SSL_KEYS
from josefk.config.broker import (
    BROKER_KEYS,
    INERT_KEYS,
    REFUSED_KEY_REASONS,
    BrokerConfig,
    BrokerConfigError,
    inert_reason,
    refusal,
)
from josefk.config.definitions import Dynamic, Support, keys_of
from josefk.config.loader import load_broker_config
from josefk.config.reference import reference_markdown
from josefk.config.topic import TOPIC_KEYS, InvalidConfigError, LogConfig

LISTS = Path(__file__).parent / "kafka_keys"


def kafka_keys(name: str) -> list[str]:
    lines = (LISTS / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


BROKER = kafka_keys("broker.txt")
TOPIC = kafka_keys("topic.txt")
PAGE = reference_markdown()
# A value each key's type takes, for trying it: Kafka's default where josefk declares one.
SAMPLE = {"remote.log.storage.system.enable": "false"}


def test_the_lists_are_kafkas_whole_sets() -> None:
    assert len(BROKER) > 250 and len(set(BROKER)) == len(BROKER)
    assert len(TOPIC) == 36


@pytest.mark.parametrize("key", BROKER)
def test_each_kafka_broker_key_is_honoured_inert_or_refused_with_a_reason(key: str) -> None:
    declared = BROKER_KEYS.get(key)
    value = SAMPLE.get(key, (declared.default if declared else None) or "x")
    reason = refusal(key, value)
    if declared is not None and declared.support is Support.HONOURED:
        assert reason is None
        assert declared.doc, f"{key} has no documentation"
        assert f"| `{key}` |" in PAGE
    elif inert_reason(key) is not None and reason is None:
        # Accepted: it loads, is kept, described, and the page says why it does nothing.
        config = load_broker_config(env={}, overrides=[f"{key}={value}"])
        entries = {e.name: e for e in config.describe_entries()}
        assert key in entries and entries[key].source == "STATIC_BROKER_CONFIG"
        assert any(note.startswith(f"{key}=") for note in config.inert_notes())
        listed = f"| `{key}` |" in PAGE or any(
            key.startswith(prefix) and f"| `{prefix}` |" in PAGE
            for prefix in (
                "controller.",
                "metadata.",
                "group.consumer.",
                "group.share.",
                "share.",
                "group.coordinator.",
                "remote.log.",
                "log.dir.failure.",
            )
        )
        assert listed, f"{key} is inert but docs/configuration.md does not say so"
    else:
        assert reason, f"{key} is neither honoured, inert nor refused with a reason"
        with pytest.raises(BrokerConfigError, match=key.replace(".", r"\.")):
            load_broker_config(env={}, overrides=[f"{key}=x"])


@pytest.mark.parametrize("key", TOPIC)
def test_each_kafka_topic_key_is_honoured_inert_or_refused_with_a_reason(key: str) -> None:
    declared = TOPIC_KEYS.get(key)
    assert declared is not None, f"{key} is not declared"
    assert declared.doc
    assert f"| `{key}` |" in PAGE
    if declared.support is Support.INERT:
        assert declared.reason
    default = declared.default if declared.default is not None else "0.10.0"
    # Every declared key is taken at its default (an inert one is kept aside, unchecked).
    LogConfig().with_overrides({key: default})


def test_tiered_storage_on_a_topic_is_refused_with_the_reason() -> None:
    with pytest.raises(InvalidConfigError, match="tiered storage is not offered"):
        LogConfig().with_overrides({"remote.storage.enable": "true"})


def test_each_key_is_declared_once() -> None:
    """A key BrokerConfig honours is neither declared inert nor refused as well."""
    model = set(keys_of(BrokerConfig))
    assert not model & set(INERT_KEYS)
    assert not model & set(REFUSED_KEY_REASONS)
    assert not set(INERT_KEYS) & set(REFUSED_KEY_REASONS)


def test_the_dynamic_list_is_the_declarations() -> None:
    """What AlterConfigs may change is what the declarations say, and every live setting a
    registered part applies is declared dynamic."""
    assert LogCleanerSettings.NAMES <= DYNAMIC_KEYS
    assert ConnectionLimits.NAMES <= DYNAMIC_KEYS
    assert LOG_DEFAULT_KEYS <= DYNAMIC_KEYS
    for key in DYNAMIC_SSL_KEYS:
        assert BROKER_KEYS[key].dynamic is Dynamic.PER_LISTENER
    assert {
        name
        for name, key in BROKER_KEYS.items()
        if key.dynamic in (Dynamic.PER_BROKER, Dynamic.CLUSTER_WIDE)
    } == DYNAMIC_KEYS
    # Read-only by declaration: a restart is needed.
    assert "log.dirs" not in DYNAMIC_KEYS and "num.partitions" not in DYNAMIC_KEYS


def test_sensitivity_is_the_declarations() -> None:
    """Kafka's PASSWORD-typed keys, and nothing because of its name alone."""
    config = BrokerConfig()
    sensitive = {e.name for e in config.describe_entries() if e.sensitive}
    assert sensitive == {name for name, key in BROKER_KEYS.items() if key.sensitive} & set(
        e.name for e in config.describe_entries()
    )
    assert all(BROKER_KEYS[name].type == "password" for name in sensitive)
