"""LogConfig: Kafka names and defaults, string parsing, errors naming the key, broker defaults."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.config.topic import (
    BROKER_DEFAULT_KEYS,
    LONG_MAX,
    TOPIC_CONFIG_KEYS,
    InvalidConfigError,
    LogConfig,
    broker_defaults,
)


def test_kafka_defaults() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1_073_741_824
    assert config.segment_ms == 604_800_000
    assert config.segment_jitter_ms == 0
    assert config.segment_index_bytes == 10_485_760
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 604_800_000
    assert config.retention_bytes == -1
    assert config.max_message_bytes == 1_048_588
    assert config.cleanup_policy == ("delete",)
    assert config.message_timestamp_type == "CreateTime"
    assert config.file_delete_delay_ms == 60_000
    assert config.flush_messages == LONG_MAX
    assert config.flush_ms == LONG_MAX
    assert config.min_insync_replicas == 1
    assert config.compression_type == "producer"
    assert config.delete_enabled and not config.compact_enabled
    assert not config.log_append_time


def test_from_properties_parses_strings() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": " 1048576 ",
            "cleanup.policy": "compact,delete",
            "preallocate": "TRUE",
            "message.timestamp.type": "LogAppendTime",
            "min.cleanable.dirty.ratio": "0.25",
        }
    )
    assert config.segment_bytes == 1_048_576
    assert config.cleanup_policy == ("compact", "delete")
    assert config.preallocate is True
    assert config.log_append_time
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.initial_file_size == 1_048_576


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", "13"),
        ("segment.bytes", str(1 << 31)),
        ("retention.ms", "-2"),
        ("cleanup.policy", "purge"),
        ("preallocate", "yes"),
        ("compression.type", "brotli"),
        ("compression.gzip.level", "10"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.insync.replicas", "0"),
        ("flush.messages", "0"),
        ("no.such.key", "1"),
    ],
)
def test_errors_name_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_properties({key: value})
    assert info.value.key == key
    assert key in str(info.value)


def test_unknown_keys_can_be_ignored() -> None:
    config = LogConfig.from_properties({"no.such.key": "1"}, ignore_unknown=True)
    assert config == LogConfig()


def test_frozen_and_with_overrides() -> None:
    config = LogConfig(segment_bytes=1024)
    with pytest.raises(ValueError):
        config.segment_bytes = 5  # type: ignore[misc]
    changed = config.with_overrides({"retention.ms": "10", "segment_ms": 20})
    assert (changed.retention_ms, changed.segment_ms, changed.segment_bytes) == (10, 20, 1024)
    assert config.retention_ms == 604_800_000


def test_from_properties_layers_over_defaults() -> None:
    base = LogConfig(segment_bytes=4096, retention_ms=5)
    config = LogConfig.from_properties({"retention.ms": "7"}, defaults=base)
    assert (config.segment_bytes, config.retention_ms) == (4096, 7)


def test_to_properties_round_trip_and_overrides() -> None:
    config = LogConfig.from_properties({"segment.bytes": "2048", "cleanup.policy": "compact"})
    props = config.to_properties()
    assert set(props) == set(TOPIC_CONFIG_KEYS)
    assert LogConfig.from_properties(props) == config
    assert config.to_properties(only_overrides_of=LogConfig()) == {
        "segment.bytes": "2048",
        "cleanup.policy": "compact",
    }


@given(
    segment_bytes=st.integers(14, (1 << 31) - 1),
    retention_ms=st.integers(-1, LONG_MAX),
    jitter=st.integers(0, LONG_MAX),
    policy=st.sets(st.sampled_from(["compact", "delete"])),
    ratio=st.floats(0.0, 1.0),
)
def test_round_trip_property(
    segment_bytes: int, retention_ms: int, jitter: int, policy: set[str], ratio: float
) -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": str(segment_bytes),
            "retention.ms": str(retention_ms),
            "segment.jitter.ms": str(jitter),
            "cleanup.policy": ",".join(policy),
            "min.cleanable.dirty.ratio": repr(ratio),
        }
    )
    assert LogConfig.from_properties(config.to_properties()) == config


def test_every_broker_default_names_a_topic_key() -> None:
    assert set(BROKER_DEFAULT_KEYS) <= set(TOPIC_CONFIG_KEYS)
    assert BROKER_DEFAULT_KEYS["segment.bytes"][0].key == "log.segment.bytes"
    assert BROKER_DEFAULT_KEYS["max.message.bytes"][0].key == "message.max.bytes"


def test_broker_defaults_precedence_and_units() -> None:
    broker = {
        "log.retention.hours": "168",
        "log.retention.minutes": "10",
        "log.roll.hours": "2",
        "log.roll.jitter.hours": "1",
        "log.segment.bytes": "1048576",
        "message.max.bytes": "2000000",
        "log.cleanup.policy": "compact",
        "num.partitions": "3",
    }
    topic = broker_defaults(broker)
    assert topic["retention.ms"] == str(10 * 60_000)
    assert topic["segment.ms"] == str(2 * 3_600_000)
    assert topic["segment.jitter.ms"] == str(3_600_000)
    config = LogConfig.from_broker_properties(broker)
    assert config.segment_bytes == 1_048_576
    assert config.max_message_bytes == 2_000_000
    assert config.cleanup_policy == ("compact",)
    broker["log.retention.ms"] = "-1"
    assert LogConfig.from_broker_properties(broker).retention_ms == -1
    assert LogConfig.from_broker_properties({"log.retention.hours": "-1"}).retention_ms == -1


def test_broker_defaults_error_names_broker_key() -> None:
    with pytest.raises(InvalidConfigError) as info:
        broker_defaults({"log.retention.hours": "a week"})
    assert info.value.key == "log.retention.hours"
