"""Topic-level configuration (Kafka's ``LogConfig``): names, defaults, validation, broker defaults.

Owns the ``LogConfig`` model, the table that maps each topic key to the broker-level keys that
supply its default (``segment.bytes`` <- ``log.segment.bytes``, ``retention.ms`` <-
``log.retention.ms`` / ``minutes`` / ``hours``, ...) and the parsing of string properties as
they arrive from a properties file, CreateTopics or AlterConfigs.

Must not import josefk.storage, josefk.broker or josefk.protocol: the storage layer imports
this module, not the other way round.

Defaults follow Kafka 4.0's documented topic configs. Two deliberate differences, both about
lower bounds: ``segment.bytes`` accepts anything from 14 bytes (Kafka 3.x's bound; 4.0 raised it
to 1 MiB) so that tests and small deployments can roll tiny segments, and the message-format
keys Kafka 4.0 removed (``message.format.version``, ``message.downconversion.enable``,
``message.timestamp.difference.max.ms``) are accepted as inert, as Kafka 3.x took them as
deprecated no-ops: stored with the topic, described, without effect (``INERT_TOPIC_KEYS``).

Every key is declared once: a field of ``LogConfig`` carries its name, default, type,
validation and documentation (``config_field``); ``TOPIC_KEYS`` is the whole declared set. A
topic with ``remote.storage.enable=true`` is refused: tiered storage is not offered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from josefk.config.definitions import ConfigKey, Support, config_field, keys_of

LONG_MAX: Final = (1 << 63) - 1
INT_MAX: Final = (1 << 31) - 1

CLEANUP_POLICIES: Final = ("compact", "delete")
COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES: Final = ("CreateTime", "LogAppendTime")


class InvalidConfigError(ValueError):
    """A topic config key is unknown or its value is invalid; the message names the key.

    The broker answers CreateTopics/AlterConfigs with INVALID_CONFIG carrying this message.
    """

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"invalid value {value!r} for topic config {key!r}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason


class LogConfig(BaseModel):
    """The configuration of one partition log, as Kafka's topic-level configs.

    Construct with Kafka's names through ``from_properties`` (string values, as from a file or
    the wire) or with Python names as keyword arguments. The model is frozen: a config change
    builds a new LogConfig with ``with_overrides`` and the log swaps it in whole.

    Example::

        >>> config = LogConfig.from_properties({"segment.bytes": "1048576", "cleanup.policy": "compact,delete"})
        >>> config.segment_bytes, config.cleanup_policy
        (1048576, ('compact', 'delete'))
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    cleanup_policy: tuple[Literal["compact", "delete"], ...] = config_field(
        "cleanup.policy",
        ("delete",),
        (
            "What happens to old segments: delete (retention), compact (keep each key's latest "
            "record), both, or neither (empty)."
        ),
    )
    compression_type: Literal["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"] = (
        config_field(
            "compression.type",
            "producer",
            (
                "The codec batches are stored in; producer keeps each batch as the producer "
                "compressed it."
            ),
        )
    )
    compression_gzip_level: int = config_field(
        "compression.gzip.level",
        -1,
        "gzip level when the broker compresses (-1: the codec's default).",
    )
    compression_lz4_level: int = config_field(
        "compression.lz4.level", 9, "lz4 level when the broker compresses.", ge=1, le=17
    )
    compression_zstd_level: int = config_field(
        "compression.zstd.level", 3, "zstd level when the broker compresses.", ge=-131072, le=22
    )
    delete_retention_ms: int = config_field(
        "delete.retention.ms",
        86_400_000,
        "How long a tombstone stays in a compacted log after its cleaning.",
        ge=0,
        le=LONG_MAX,
    )
    file_delete_delay_ms: int = config_field(
        "file.delete.delay.ms",
        60_000,
        "How long a deleted segment's files wait before they are removed.",
        ge=0,
        le=LONG_MAX,
    )
    flush_messages: int = config_field(
        "flush.messages", LONG_MAX, "Records appended before the log is fsynced.", ge=1, le=LONG_MAX
    )
    flush_ms: int = config_field(
        "flush.ms", LONG_MAX, "The longest a record stays unsynced.", ge=0, le=LONG_MAX
    )
    follower_replication_throttled_replicas: str = config_field(
        "follower.replication.throttled.replicas",
        "",
        "Replicas throttled when they fetch as followers (Kafka's replication quotas).",
        inert="replication throttling (quotas) is not enforced",
    )
    index_interval_bytes: int = config_field(
        "index.interval.bytes", 4096, "Bytes between offset index entries.", ge=0, le=INT_MAX
    )
    leader_replication_throttled_replicas: str = config_field(
        "leader.replication.throttled.replicas",
        "",
        "Replicas throttled when they serve followers (Kafka's replication quotas).",
        inert="replication throttling (quotas) is not enforced",
    )
    local_retention_bytes: int = config_field(
        "local.retention.bytes",
        -2,
        "Local bytes kept when tiered storage copies older segments away.",
        ge=-2,
        le=LONG_MAX,
        inert="no tiered storage: the whole log is local",
    )
    local_retention_ms: int = config_field(
        "local.retention.ms",
        -2,
        "Local time kept when tiered storage copies older segments away.",
        ge=-2,
        le=LONG_MAX,
        inert="no tiered storage: the whole log is local",
    )
    max_compaction_lag_ms: int = config_field(
        "max.compaction.lag.ms",
        LONG_MAX,
        "The longest a record may stay uncompacted.",
        ge=1,
        le=LONG_MAX,
    )
    max_message_bytes: int = config_field(
        "max.message.bytes", 1_048_588, "The largest record batch accepted.", ge=0, le=INT_MAX
    )
    message_timestamp_after_max_ms: int = config_field(
        "message.timestamp.after.max.ms",
        3_600_000,
        "How far in the future a CreateTime timestamp may be.",
        ge=0,
        le=LONG_MAX,
    )
    message_timestamp_before_max_ms: int = config_field(
        "message.timestamp.before.max.ms",
        LONG_MAX,
        "How far in the past a CreateTime timestamp may be.",
        ge=0,
        le=LONG_MAX,
    )
    message_timestamp_type: Literal["CreateTime", "LogAppendTime"] = config_field(
        "message.timestamp.type",
        "CreateTime",
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps the append time.",
    )
    min_cleanable_dirty_ratio: float = config_field(
        "min.cleanable.dirty.ratio",
        0.5,
        "The share of a compacted log not yet cleaned that makes it eligible for cleaning.",
        ge=0.0,
        le=1.0,
    )
    min_compaction_lag_ms: int = config_field(
        "min.compaction.lag.ms", 0, "The shortest a record stays uncompacted.", ge=0, le=LONG_MAX
    )
    min_insync_replicas: int = config_field(
        "min.insync.replicas", 1, "Replicas that must hold an acks=all write.", ge=1, le=INT_MAX
    )
    preallocate: bool = config_field(
        "preallocate", False, "Create segment files at their full size."
    )
    remote_log_copy_disable: bool = config_field(
        "remote.log.copy.disable",
        False,
        "Stop copying segments to tiered storage.",
        inert="no tiered storage: the whole log is local",
    )
    remote_log_delete_on_disable: bool = config_field(
        "remote.log.delete.on.disable",
        False,
        "Delete tiered segments when tiered storage is switched off.",
        inert="no tiered storage: the whole log is local",
    )
    remote_storage_enable: bool = config_field(
        "remote.storage.enable", False, "Copy the topic's segments to tiered storage."
    )
    retention_bytes: int = config_field(
        "retention.bytes",
        -1,
        "The size a partition is trimmed to by deleting old segments; -1: no size limit.",
        ge=-1,
        le=LONG_MAX,
    )
    retention_ms: int = config_field(
        "retention.ms",
        604_800_000,
        "How long records are kept; -1: no time limit.",
        ge=-1,
        le=LONG_MAX,
    )
    segment_bytes: int = config_field(
        "segment.bytes", 1_073_741_824, "The size at which a segment is rolled.", ge=14, le=INT_MAX
    )
    segment_index_bytes: int = config_field(
        "segment.index.bytes",
        10_485_760,
        "The size of each segment's offset and time index files.",
        ge=4,
        le=INT_MAX,
    )
    segment_jitter_ms: int = config_field(
        "segment.jitter.ms",
        0,
        "A random amount taken off segment.ms per segment, so that segments do not roll together.",
        ge=0,
        le=LONG_MAX,
    )
    segment_ms: int = config_field(
        "segment.ms",
        604_800_000,
        "The age at which a segment is rolled, even if not full.",
        ge=1,
        le=LONG_MAX,
    )
    unclean_leader_election_enable: bool = config_field(
        "unclean.leader.election.enable",
        False,
        "Elect a replica outside the ISR when no ISR member is alive (data loss possible).",
    )

    # -- parsing of the string forms Kafka accepts -------------------------------------------

    @field_validator("cleanup_policy", mode="before")
    @classmethod
    def _split_policy(cls, value: object) -> object:
        if isinstance(value, str):
            parts = tuple(p.strip().lower() for p in value.split(",") if p.strip())
            if not parts:
                # Kafka 4.0 allows an empty policy meaning "neither"; josefk keeps it.
                return ()
            return parts
        return value

    @field_validator("cleanup_policy")
    @classmethod
    def _dedupe_policy(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))

    @field_validator(
        "preallocate",
        "remote_log_copy_disable",
        "remote_log_delete_on_disable",
        "remote_storage_enable",
        "unclean_leader_election_enable",
        mode="before",
    )
    @classmethod
    def _kafka_boolean(cls, value: object) -> object:
        # Kafka's BOOLEAN type takes only "true"/"false" (any case), not pydantic's yes/on/1.
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError("expected true or false")
            return lowered == "true"
        return value

    @field_validator("remote_storage_enable")
    @classmethod
    def _no_tiered_storage(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "tiered storage is not offered; josefk refuses it rather than ignoring it"
            )
        return value

    @field_validator("compression_gzip_level")
    @classmethod
    def _gzip_level(cls, value: int) -> int:
        if value != -1 and not 1 <= value <= 9:
            raise ValueError("must be -1 (the codec's default) or between 1 and 9")
        return value

    @field_validator("compression_type", "message_timestamp_type", mode="before")
    @classmethod
    def _strip(cls, value: object) -> object:
        return value.strip() if isinstance(value, str) else value

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def from_properties(
        cls,
        properties: Mapping[str, str],
        *,
        defaults: LogConfig | None = None,
        ignore_unknown: bool = False,
    ) -> LogConfig:
        """Build from Kafka-named string properties layered over ``defaults``.

        Unknown keys raise InvalidConfigError (as Kafka's CreateTopics does) unless
        ``ignore_unknown``; every error names the offending key.
        """
        base = defaults if defaults is not None else _DEFAULT
        return base.with_overrides(properties, ignore_unknown=ignore_unknown)

    @classmethod
    def from_broker_properties(cls, broker: Mapping[str, str]) -> LogConfig:
        """The topic defaults a broker with these ``server.properties`` gives new topics."""
        return cls.from_properties(broker_defaults(broker))

    def with_overrides(
        self, overrides: Mapping[str, Any], *, ignore_unknown: bool = False
    ) -> LogConfig:
        """A copy with some keys changed; keys may be Kafka names or Python field names."""
        values: dict[str, Any] = self.model_dump(by_alias=True)
        for key, value in overrides.items():
            name = key if key in _FIELD_BY_KEY else _KEY_BY_FIELD.get(key)
            if name is None:
                if ignore_unknown or key in INERT_TOPIC_KEYS:
                    continue  # an inert key is kept with the topic's overrides, not here
                raise InvalidConfigError(key, value, "unknown topic config")
            values[name] = value.strip() if isinstance(value, str) else value
        try:
            return type(self).model_validate(values)
        except ValidationError as exc:
            raise _translate(exc, values) from None

    def to_properties(self, *, only_overrides_of: LogConfig | None = None) -> dict[str, str]:
        """Kafka-named string properties; with ``only_overrides_of``, only keys that differ."""
        result: dict[str, str] = {}
        other = only_overrides_of.model_dump(by_alias=True) if only_overrides_of else None
        for key, value in self.model_dump(by_alias=True).items():
            if other is not None and other[key] == value:
                continue
            result[key] = _format(value)
        return result

    # -- derived values the log uses --------------------------------------------------------

    @property
    def delete_enabled(self) -> bool:
        """Time and size retention apply (``cleanup.policy`` contains ``delete``)."""
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def initial_file_size(self) -> int:
        """Size to preallocate a new segment's log file to (0 unless ``preallocate``)."""
        return self.segment_bytes if self.preallocate else 0


def _format(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _translate(exc: ValidationError, values: Mapping[str, Any]) -> InvalidConfigError:
    first = exc.errors()[0]
    loc = first.get("loc", ())
    key = str(loc[0]) if loc else "?"
    key = _KEY_BY_FIELD.get(key, key)
    message = str(first.get("msg", "invalid"))
    return InvalidConfigError(key, values.get(key, first.get("input")), message)


_KEY_BY_FIELD: Final[dict[str, str]] = {
    name: str(info.alias) for name, info in LogConfig.model_fields.items()
}
_FIELD_BY_KEY: Final[dict[str, str]] = {key: name for name, key in _KEY_BY_FIELD.items()}
TOPIC_CONFIG_KEYS: Final[tuple[str, ...]] = tuple(sorted(_FIELD_BY_KEY))
_DEFAULT: Final = LogConfig()


def _removed(name: str, reason: str) -> ConfigKey:
    return ConfigKey(
        name, "string", None, f"Kafka 3.x's {name}.", support=Support.INERT, reason=reason
    )


# Kafka's topic keys josefk accepts and stores without effect (Kafka 3.x took them as
# deprecated no-ops; 4.0 removed them): tools written for 3.x still set them.
INERT_TOPIC_KEYS: Final[dict[str, ConfigKey]] = {
    "message.format.version": _removed(
        "message.format.version", "removed in Kafka 4.0 (a no-op since 3.0): only record batch v2"
    ),
    "message.downconversion.enable": _removed(
        "message.downconversion.enable",
        "removed in Kafka 4.0: fetch versions that would need down-conversion are not served",
    ),
    "message.timestamp.difference.max.ms": _removed(
        "message.timestamp.difference.max.ms",
        "removed in Kafka 4.0: message.timestamp.before.max.ms and after.max.ms bound timestamps",
    ),
}
# Every topic key josefk declares.
TOPIC_KEYS: Final[dict[str, ConfigKey]] = {**keys_of(LogConfig), **INERT_TOPIC_KEYS}


def inert_topic_notes(overrides: Mapping[str, str]) -> list[str]:
    """A line per inert key among a topic's overrides: accepted, and why it changes nothing."""
    notes = []
    for key, value in sorted(overrides.items()):
        declared = TOPIC_KEYS.get(key)
        if declared is not None and declared.support is Support.INERT:
            notes.append(f"{key}={value} accepted; it has no effect in josefk: {declared.reason}")
    return notes


@dataclass(frozen=True, slots=True)
class BrokerKey:
    """One broker property that supplies a topic default, and the factor to its unit.

    ``log.retention.hours`` has scale 3_600_000: its value times the scale is milliseconds.
    """

    key: str
    scale: int = 1


# Topic key -> broker keys that give its default, first present wins (Kafka's precedence:
# log.retention.ms over log.retention.minutes over log.retention.hours). Topic keys absent
# here have no broker-level default and always start at LogConfig's default.
BROKER_DEFAULT_KEYS: Final[Mapping[str, tuple[BrokerKey, ...]]] = {
    "cleanup.policy": (BrokerKey("log.cleanup.policy"),),
    "compression.type": (BrokerKey("compression.type"),),
    "compression.gzip.level": (BrokerKey("compression.gzip.level"),),
    "compression.lz4.level": (BrokerKey("compression.lz4.level"),),
    "compression.zstd.level": (BrokerKey("compression.zstd.level"),),
    "delete.retention.ms": (BrokerKey("log.cleaner.delete.retention.ms"),),
    "file.delete.delay.ms": (BrokerKey("log.segment.delete.delay.ms"),),
    "flush.messages": (BrokerKey("log.flush.interval.messages"),),
    "flush.ms": (
        BrokerKey("log.flush.interval.ms"),
        # Kafka falls back to the scheduler interval when log.flush.interval.ms is unset.
        BrokerKey("log.flush.scheduler.interval.ms"),
    ),
    "index.interval.bytes": (BrokerKey("log.index.interval.bytes"),),
    "local.retention.bytes": (BrokerKey("log.local.retention.bytes"),),
    "local.retention.ms": (BrokerKey("log.local.retention.ms"),),
    "max.compaction.lag.ms": (BrokerKey("log.cleaner.max.compaction.lag.ms"),),
    "max.message.bytes": (BrokerKey("message.max.bytes"),),
    "message.timestamp.after.max.ms": (BrokerKey("log.message.timestamp.after.max.ms"),),
    "message.timestamp.before.max.ms": (BrokerKey("log.message.timestamp.before.max.ms"),),
    "message.timestamp.type": (BrokerKey("log.message.timestamp.type"),),
    "min.cleanable.dirty.ratio": (BrokerKey("log.cleaner.min.cleanable.ratio"),),
    "min.compaction.lag.ms": (BrokerKey("log.cleaner.min.compaction.lag.ms"),),
    "min.insync.replicas": (BrokerKey("min.insync.replicas"),),
    "preallocate": (BrokerKey("log.preallocate"),),
    "retention.bytes": (BrokerKey("log.retention.bytes"),),
    "retention.ms": (
        BrokerKey("log.retention.ms"),
        BrokerKey("log.retention.minutes", 60_000),
        BrokerKey("log.retention.hours", 3_600_000),
    ),
    "segment.bytes": (BrokerKey("log.segment.bytes"),),
    "segment.index.bytes": (BrokerKey("log.index.size.max.bytes"),),
    "segment.jitter.ms": (
        BrokerKey("log.roll.jitter.ms"),
        BrokerKey("log.roll.jitter.hours", 3_600_000),
    ),
    "segment.ms": (
        BrokerKey("log.roll.ms"),
        BrokerKey("log.roll.hours", 3_600_000),
    ),
    "unclean.leader.election.enable": (BrokerKey("unclean.leader.election.enable"),),
}


def broker_defaults(broker: Mapping[str, str]) -> dict[str, str]:
    """Topic-keyed string properties derived from broker-level properties.

    Only topic keys whose broker keys are present appear. Scaled keys (hours, minutes) are
    converted to milliseconds; a negative scaled value means "unlimited" and becomes -1, as in
    Kafka. A non-integer scaled value raises InvalidConfigError naming the broker key.
    """
    result: dict[str, str] = {}
    for topic_key, candidates in BROKER_DEFAULT_KEYS.items():
        for candidate in candidates:
            raw = broker.get(candidate.key)
            if raw is None:
                continue
            if candidate.scale == 1:
                result[topic_key] = raw.strip()
            else:
                try:
                    number = int(raw.strip())
                except ValueError:
                    raise InvalidConfigError(candidate.key, raw, "expected an integer") from None
                result[topic_key] = str(-1 if number < 0 else number * candidate.scale)
            break
    return result
