"""The data source's options, parsed once on the driver into plain values.

Owns ``SourceOptions`` (what to read: subscription, starting/ending offsets, limits, data
loss policy, ``isolation.level``), ``SinkOptions`` (where to write, and whether in
transactions: ``transactional.id.prefix``) and the translation of ``kafka.``-prefixed
client settings into josefk.client keyword settings (``kafka.max.partition.fetch.bytes`` ->
``max_partition_fetch_bytes``). Option names and meanings follow Spark's Kafka source so that
a pipeline moves over by changing the format name; option keys are case-insensitive as Spark
hands them over.

Pure Python: imports josefk.client's config classes only (for the names and types of the
settings), never pyspark or pyarrow, so it is usable and testable without Spark.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from josefk.client import ClientConfig, ConsumerConfig, ProducerConfig

log = logging.getLogger("josefk.spark")

EARLIEST: Final = -2
LATEST: Final = -1
ISOLATION_LEVELS: Final = ("read_uncommitted", "read_committed")

# Settings the data source decides itself: a consumer of the source reads explicit offset
# ranges, never through a group, and never resets silently (data loss is reported by policy).
_CONTROLLED: Final = frozenset(
    {
        "group_id",
        "group_instance_id",
        "auto_offset_reset",
        "enable_auto_commit",
        "auto_commit_interval_ms",
        "key_deserializer",
        "value_deserializer",
        "key_serializer",
        "value_serializer",
        "clock",
        "rng",
        "partitioner",
        "partition_assignment_strategy",
    }
)


class OptionError(ValueError):
    """An option is missing, malformed or contradicts another."""


TopicPartitionKey = tuple[str, int]
# Offsets per topic and partition, as Spark's Kafka source writes them:
# {"topic": {"0": 23, "1": -2}} with -2 earliest and -1 latest.
OffsetJson = dict[str, dict[str, int]]


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, got {raw!r}")


def _int(name: str, raw: str, *, minimum: int | None = None) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise OptionError(f"option {name} must be >= {minimum}, got {value}")
    return value


def parse_offsets_json(name: str, raw: str) -> dict[TopicPartitionKey, int]:
    """``{"t": {"0": 5, "1": -2}}`` -> ``{("t", 0): 5, ("t", 1): -2}``."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise OptionError(f"option {name} must be a JSON object of topics, got {raw!r}")
    out: dict[TopicPartitionKey, int] = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map partitions to offsets")
        for partition, offset in partitions.items():
            try:
                out[(str(topic), int(partition))] = int(offset)
            except (TypeError, ValueError):
                raise OptionError(
                    f"option {name}: bad partition/offset {partition!r}: {offset!r}"
                ) from None
    return out


def offsets_to_json(offsets: Mapping[TopicPartitionKey, int]) -> OffsetJson:
    """The inverse of ``offsets_from_json``: topics sorted, partitions as strings."""
    out: OffsetJson = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(data: Mapping[str, Any]) -> dict[TopicPartitionKey, int]:
    return {
        (str(topic), int(partition)): int(offset)
        for topic, partitions in data.items()
        for partition, offset in partitions.items()
    }


def _parse_assign(raw: str) -> list[TopicPartitionKey]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option assign is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise OptionError('option assign must look like {"topic": [0, 1]}')
    return sorted((str(t), int(p)) for t, parts in data.items() for p in parts)


@dataclass(frozen=True)
class Subscription:
    """Exactly one of: topic names, a topic name pattern, or fixed partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartitionKey, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        if self.assign:
            return any(t == topic for t, _ in self.assign)
        return topic in self.topics

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern={self.pattern}"
        if self.assign:
            return f"assign={list(self.assign)}"
        return f"subscribe={','.join(self.topics)}"


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: earliest, latest, per partition, or by timestamp."""

    kind: str  # "earliest" | "latest" | "json" | "timestamp"
    per_partition: Mapping[TopicPartitionKey, int] = field(default_factory=dict)
    timestamp_ms: int | None = None


def _offset_spec(options: Mapping[str, str], name: str, ts_name: str, default: str) -> OffsetSpec:
    if ts_name in options:
        return OffsetSpec("timestamp", timestamp_ms=_int(ts_name, options[ts_name], minimum=0))
    raw = options.get(name, default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower())
    return OffsetSpec("json", per_partition=parse_offsets_json(name, raw))


def client_settings(options: Mapping[str, str], config_class: type[ClientConfig]) -> dict[str, Any]:
    """``kafka.``-prefixed options as keyword settings of ``config_class``.

    ``kafka.bootstrap.servers`` (or ``bootstrap.servers``) becomes ``bootstrap_servers``.
    Security settings pass as Spark's Kafka source takes them (``kafka.security.protocol``,
    ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``, ``kafka.ssl.ca.location``...).
    Keys that the client does not know (e.g. ``kafka.sasl.kerberos.service.name``) or that the data
    source controls itself (group id, offset reset) are dropped with a warning, as a pipeline
    moved over from Spark's Kafka source may carry them.
    """
    lowered = _lower(options)
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    settings: dict[str, Any] = {}
    bootstrap = lowered.get("kafka.bootstrap.servers") or lowered.get("bootstrap.servers")
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers (or bootstrap.servers) is required")
    settings["bootstrap_servers"] = bootstrap
    for key, raw in lowered.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        name = key[len("kafka.") :].replace(".", "_")
        known = fields.get(name)
        if known is None or name in _CONTROLLED:
            log.warning("josefk data source ignores client setting %s", key)
            continue
        default = known.default
        if isinstance(default, bool) or name == "enable_idempotence":
            settings[name] = _bool(key, raw)
        elif isinstance(default, int):
            settings[name] = _int(key, raw)
        elif isinstance(default, float):
            try:
                settings[name] = float(raw)
            except ValueError:
                raise OptionError(f"option {key} must be a number, got {raw!r}") from None
        else:
            settings[name] = raw
    return settings


@dataclass(frozen=True)
class SourceOptions:
    """Everything a read needs, parsed and checked on the driver."""

    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    consumer_settings: Mapping[str, Any]
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    poll_timeout_ms: int = 120_000

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        lowered = _lower(options)
        given = [k for k in ("subscribe", "subscribepattern", "assign") if lowered.get(k)]
        if len(given) != 1:
            raise OptionError(
                "exactly one of the options subscribe, subscribePattern, assign is required"
                f" (got {given or 'none'})"
            )
        kind = given[0]
        if kind == "subscribe":
            topics = tuple(t.strip() for t in lowered["subscribe"].split(",") if t.strip())
            if not topics:
                raise OptionError("option subscribe names no topic")
            subscription = Subscription(topics=topics)
        elif kind == "subscribepattern":
            pattern = lowered["subscribepattern"]
            try:
                re.compile(pattern)
            except re.error as exc:
                raise OptionError(f"option subscribePattern is not a regex: {exc}") from None
            subscription = Subscription(pattern=pattern)
        else:
            subscription = Subscription(assign=tuple(_parse_assign(lowered["assign"])))
        starting = _offset_spec(
            lowered, "startingoffsets", "startingtimestamp", "latest" if streaming else "earliest"
        )
        if streaming and ("endingoffsets" in lowered or "endingtimestamp" in lowered):
            raise OptionError("option endingOffsets is not allowed in a streaming query")
        ending = _offset_spec(lowered, "endingoffsets", "endingtimestamp", "latest")
        if not streaming:
            if starting.kind == "latest":
                raise OptionError("startingOffsets=latest is not allowed in a batch query")
            if ending.kind == "earliest":
                raise OptionError("endingOffsets=earliest is not allowed in a batch query")
            if any(v == EARLIEST for v in ending.per_partition.values()):
                raise OptionError("endingOffsets may not use -2 (earliest) in a batch query")
            if any(v == LATEST for v in starting.per_partition.values()):
                raise OptionError("startingOffsets may not use -1 (latest) in a batch query")
        max_per_trigger = lowered.get("maxoffsetspertrigger")
        min_partitions = lowered.get("minpartitions")
        consumer_settings = client_settings(lowered, ConsumerConfig)
        # Spark's Kafka source takes kafka.isolation.level; isolation.level is accepted too.
        isolation = (
            lowered.get("kafka.isolation.level")
            or lowered.get("isolation.level")
            or "read_uncommitted"
        ).strip()
        if isolation not in ISOLATION_LEVELS:
            raise OptionError(
                f"option isolation.level must be read_committed or read_uncommitted, "
                f"got {isolation!r}"
            )
        consumer_settings["isolation_level"] = isolation
        return cls(
            subscription=subscription,
            starting=starting,
            ending=ending,
            consumer_settings=consumer_settings,
            include_headers=_bool("includeHeaders", lowered.get("includeheaders", "false")),
            fail_on_data_loss=_bool("failOnDataLoss", lowered.get("failondataloss", "true")),
            max_offsets_per_trigger=(
                _int("maxOffsetsPerTrigger", max_per_trigger, minimum=1)
                if max_per_trigger
                else None
            ),
            min_partitions=(
                _int("minPartitions", min_partitions, minimum=1) if min_partitions else None
            ),
            poll_timeout_ms=_int(
                "kafkaConsumer.pollTimeoutMs",
                lowered.get("kafkaconsumer.polltimeoutms", "120000"),
                minimum=1,
            ),
        )


@dataclass(frozen=True)
class SinkOptions:
    """Where rows go: a default topic (the ``topic`` option), the producer's settings and,
    with ``transactional.id.prefix``, the transactional mode (each task writes in its own
    transaction under ``<prefix>-<partition id>``, and the driver ends them all)."""

    topic: str | None
    producer_settings: Mapping[str, Any]
    transactional_id_prefix: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        lowered = _lower(options)
        topic = lowered.get("topic") or None
        settings = client_settings(lowered, ProducerConfig)
        if "transactional_id" in settings:
            raise OptionError(
                "option kafka.transactional.id would make every task share one id (each "
                "fencing the others): use transactional.id.prefix"
            )
        prefix = lowered.get("transactional.id.prefix", "").strip() or None
        if prefix is not None:
            if settings.get("enable_idempotence") is False:
                raise OptionError("transactional.id.prefix needs idempotence")
            if str(settings.get("acks", "all")) not in ("all", "-1"):
                raise OptionError("transactional.id.prefix needs kafka.acks=all")
        return cls(topic=topic, producer_settings=settings, transactional_id_prefix=prefix)
