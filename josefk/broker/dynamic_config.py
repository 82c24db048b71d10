"""Dynamic broker configuration (KIP-226): settings changed without a restart.

Owns ``DynamicBrokerConfig``: the broker's two layers of dynamic overrides over its static
(start-up) configuration, as Kafka keeps them:

- per broker, the resource ``BROKER "<id>"`` (DYNAMIC_BROKER_CONFIG),
- cluster-wide, the resource ``BROKER ""`` (DYNAMIC_DEFAULT_BROKER_CONFIG),

with Kafka's precedence per-broker > cluster default > static > Kafka's default. A dynamic
key overrides its unit synonyms of lower layers (``log.retention.hours`` set dynamically
beats a static ``log.retention.ms``), as Kafka's overrideProps does.

Which keys are dynamic: those their declaration (josefk.config.broker.BROKER_KEYS) makes
per-broker or cluster-wide (``DYNAMIC_KEYS``): the broker ``log.*`` defaults of topic configs
that the logs read live (``LOG_DEFAULT_KEYS``; a change reaches every topic without its own
override at once), the log cleaner's and the connection limits' settings, Kafka's inert
per-broker keys (``sasl.kerberos.*``: stored, no effect); plus every name a part registered
in the ``ReconfigurableRegistry`` applies (the TLS listeners' ``listener.name.<l>.ssl.*``...).
A change is checked whole before anything moves: the effective ``BrokerConfig`` is rebuilt (a
bad value is refused naming its key), each affected part validates it, then the overrides are
persisted and only then applied: log defaults swapped into the replica manager, parts
reconfigured.

Where the overrides live (``OverridesStore``): a single node keeps them in
``broker-configs.json`` in the first log dir (``FileOverridesStore``, rewritten whole through
``josefk.fileio``, mode 0600: dynamic TLS passwords are kept as given); a cluster keeps them in
etcd (``EtcdOverridesStore``), watched by every broker, so a cluster default set through one
broker reaches all of them (``apply_stored``).

Also owns two parts the broker registers: ``LogCleanerSettings`` (``log.cleaner.threads``,
...) and ``ConnectionLimits`` (``max.connections``, ``max.connections.per.ip``).

Imports josefk.config, josefk.cluster's metadata store, josefk.fileio, the storage log
cleaner and the broker's configs/reconfigurable modules; must not import the handlers, the
server or the network.
"""

from __future__ import annotations

import asyncio
import json
import logging
import typing
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from josefk.broker.configs import (
    BrokerConfigLayers,
    broker_synonyms,
    is_sensitive,
    listener_base_name,
)
from josefk.broker.reconfigurable import (
    Reconfigurable,
    ReconfigurableRegistry,
    ReconfigurationError,
)
from josefk.config.broker import (
    BROKER_CONFIG_KEYS,
    BROKER_KEYS,
    BrokerConfig,
    BrokerConfigError,
    ConfigProblem,
    inert_reason,
    is_accepted_unused,
)
from josefk.config.definitions import Dynamic
from josefk.config.topic import BROKER_DEFAULT_KEYS, LogConfig
from josefk.fileio import write_atomically
from josefk.storage.log_cleaner import CleanerConfig, LogCleaner

if TYPE_CHECKING:
    from josefk.cluster.metadata_store import EtcdMetadataStore


logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_ENTITY",
    "LOG_DEFAULT_KEYS",
    "DynamicBrokerConfig",
    "EtcdOverridesStore",
    "FileOverridesStore",
    "InvalidBrokerConfig",
    "InvalidBrokerConfigRequest",
    "OverridesStore",
]

# The resource name of the cluster-wide default, and how it is stored (Kafka's ZooKeeper
# path was /config/brokers/<default>).
DEFAULT_ENTITY: Final = ""
STORED_DEFAULT_NAME: Final = "<default>"
FILE_NAME: Final = "broker-configs.json"
_FORMAT_VERSION: Final = 1

# The keys AlterConfigs may change, as declared: per-broker or cluster-wide. The keys dynamic
# only with a listener prefix are registered by the TLS listeners that apply them.
DYNAMIC_KEYS: Final = frozenset(
    name
    for name, key in BROKER_KEYS.items()
    if key.dynamic in (Dynamic.PER_BROKER, Dynamic.CLUSTER_WIDE)
)
# Broker synonyms of topic configs that josefk's logs read at each append, roll or retention
# pass, so a swapped LogConfig takes effect at once (Kafka's DynamicLogConfig): those of the
# dynamic keys that give topic defaults. Not dynamic (declared read-only): the flush
# scheduler's period (read once by the LogManager), tiered storage's local retention (no
# tiered storage) and unclean.leader.election.enable (the cluster's elections read the static
# broker value).
LOG_DEFAULT_KEYS: Final = frozenset(
    candidate.key
    for candidates in BROKER_DEFAULT_KEYS.values()
    for candidate in candidates
    if candidate.key in DYNAMIC_KEYS
)

# Listener settings Kafka takes at the cluster level too; every other listener-prefixed or
# security setting names one broker's files and secrets, so only a broker id may set it.
_CLUSTER_LEVEL_LISTENER_KEYS: Final = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
# Broker keys of Kafka's LIST type: APPEND and SUBTRACT work on them only.
_LIST_KEYS: Final = frozenset(
    str(info.alias)
    for info in BrokerConfig.model_fields.values()
    if typing.get_origin(info.annotation) is tuple
)


class InvalidBrokerConfigRequest(Exception):
    """The change cannot be made as asked (a static key, a per-broker key at the cluster
    level, another broker's id): Kafka answers INVALID_REQUEST."""


class InvalidBrokerConfig(Exception):
    """An unknown key or a value a key cannot take: INVALID_CONFIG, naming the key."""


def per_broker_only(name: str) -> bool:
    """Kafka refuses these at the cluster default: they name one broker's files/secrets
    (declared per-broker)."""
    base = listener_base_name(name)
    if base is not None:
        return base not in _CLUSTER_LEVEL_LISTENER_KEYS
    declared = BROKER_KEYS.get(name)
    if declared is not None and declared.dynamic is Dynamic.PER_BROKER:
        return True
    return name.startswith(("ssl.", "sasl."))


# BrokerConfig.from_properties's reason for a key it has no setting for.
_UNKNOWN_TO_BROKER_CONFIG: Final = "unknown broker config"


def is_list_key(name: str) -> bool:
    """APPEND/SUBTRACT apply: a LIST broker key, or a name only a registered part knows
    (the part validates the result)."""
    return name in _LIST_KEYS or name not in BROKER_CONFIG_KEYS


def scala_set(names: Set[str]) -> str:
    """Names as Kafka's messages print a Scala set: ``Set(a, b)``."""
    return "Set(" + ", ".join(sorted(names)) + ")"


# ---------------------------------------------------------------------------- stores

# Replaces one entity's overrides with the result of the change applied to the stored ones;
# the change may raise to refuse (and may be called again if another writer got there first).
OverridesChange = Callable[[dict[str, str]], dict[str, str]]


class OverridesStore(Protocol):
    async def update(self, entity: str, change: OverridesChange) -> dict[str, str]:
        """Persist ``change(stored overrides of entity)``; returns what was stored."""
        ...


def _stored_name(entity: str) -> str:
    return STORED_DEFAULT_NAME if entity == DEFAULT_ENTITY else entity


def _entity_of(stored_name: str) -> str:
    return DEFAULT_ENTITY if stored_name == STORED_DEFAULT_NAME else stored_name


class FileOverridesStore:
    """The single node's overrides: ``broker-configs.json`` in the first log dir, every
    entity's overrides in one file, replaced whole and atomically on each change."""

    def __init__(self, path: Path | None, entities: dict[str, dict[str, str]]) -> None:
        # path None: in memory only (unit tests).
        self.path = path
        self._entities = entities

    @classmethod
    def load(cls, log_dir: str | Path) -> FileOverridesStore:
        """Read the file; a file that cannot be parsed stops start-up (ValueError naming
        it) rather than dropping settings an operator made."""
        path = Path(log_dir) / FILE_NAME
        if not path.exists():
            return cls(path, {})
        try:
            document = json.loads(path.read_bytes())
            if not isinstance(document, dict) or document.get("version") != _FORMAT_VERSION:
                raise ValueError("unknown format")
            entities = {
                _entity_of(str(name)): {str(k): str(v) for k, v in dict(configs).items()}
                for name, configs in dict(document.get("brokers", {})).items()
            }
        except (ValueError, TypeError, AttributeError) as exc:
            raise ValueError(f"cannot read {path}: {exc}") from None
        return cls(path, entities)

    def overrides(self, entity: str) -> dict[str, str]:
        return dict(self._entities.get(entity, {}))

    async def update(self, entity: str, change: OverridesChange) -> dict[str, str]:
        new = change(self.overrides(entity))
        entities = {**self._entities, entity: dict(new)}
        if not new:
            del entities[entity]
        if self.path is not None:
            data = _encode(entities)
            path = self.path
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: write_atomically(path, data, mode=0o600)
            )
        self._entities = entities
        return dict(new)


def _encode(entities: Mapping[str, Mapping[str, str]]) -> bytes:
    document = {
        "version": _FORMAT_VERSION,
        "brokers": {
            _stored_name(entity): dict(sorted(configs.items()))
            for entity, configs in sorted(entities.items())
        },
    }
    return json.dumps(document, indent=1).encode() + b"\n"


class EtcdOverridesStore:
    """A cluster's overrides: ``P/configs/brokers/<id>`` and ``P/configs/brokers/<default>``
    in etcd, changed by compare-and-swap; every broker learns of them by its watch."""

    def __init__(self, store: EtcdMetadataStore) -> None:
        self._store = store

    async def load(self) -> dict[str, dict[str, str]]:
        return {
            _entity_of(name): configs
            for name, configs in (await self._store.broker_configs()).items()
        }

    async def update(self, entity: str, change: OverridesChange) -> dict[str, str]:
        return await self._store.update_broker_configs(_stored_name(entity), change)


def entities_from_view(stored: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """The watcher's ``broker_configs`` (stored names) by resource name."""
    return {_entity_of(name): dict(configs) for name, configs in stored.items()}


# ---------------------------------------------------------------------------- the config


@dataclass(frozen=True, slots=True)
class _Effective:
    """The configuration in force for one pair of layers."""

    config: BrokerConfig
    # Every name with a value, as strings: the config's properties, and the dynamic names
    # BrokerConfig does not take (those only a registered part knows).
    properties: dict[str, str]

    @classmethod
    def of(cls, config: BrokerConfig, extra: Mapping[str, str]) -> _Effective:
        return cls(config, {**config.to_properties(), **extra})


class DynamicBrokerConfig:
    """The dynamic layers of one broker and the configuration in force. Runs on the event
    loop; ``alter`` serialises changes made through this broker, ``apply_stored`` takes
    changes made elsewhere (etcd's watch)."""

    def __init__(
        self,
        static: BrokerConfig,
        *,
        broker_id: int,
        registry: ReconfigurableRegistry,
        store: OverridesStore,
        stored: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.static = static
        self.broker_id = broker_id
        self._registry = registry
        self._store = store
        self._static_properties = static.to_properties(include_defaults=False)
        self._default: dict[str, str] = {}
        self._per_broker: dict[str, str] = {}
        self._effective = _Effective.of(static, {})
        # Told the topic defaults (LogConfig) in force whenever they change.
        self.log_defaults_listeners: list[Callable[[LogConfig], None]] = []
        self._lock = asyncio.Lock()
        if stored:
            self._install(self._entity_layers(stored), touched=set(), validate=True)
        registry.added_listeners.append(self._part_added)

    def _part_added(self, part: Reconfigurable) -> None:
        """A part registered after the stored overrides were read (a TLS listener built at
        start-up from the static config) takes the dynamic values of its names now."""
        if not part.reconfigurable_configs() & {*self._default, *self._per_broker}:
            return
        values = self._values_for(part, self._effective)
        try:
            part.validate_reconfiguration(values)
            part.reconfigure(values)
        except Exception as exc:  # noqa: BLE001  a Reconfigurable may raise anything; logged, config kept
            logger.error("stored dynamic broker configs refused by %r: %s", part, exc)

    # -- what is in force ------------------------------------------------------------------

    @property
    def current(self) -> BrokerConfig:
        """The effective configuration: static settings under the dynamic overrides."""
        return self._effective.config

    def overrides(self, entity: str) -> dict[str, str]:
        if entity == DEFAULT_ENTITY:
            return dict(self._default)
        return dict(self._per_broker) if entity == str(self.broker_id) else {}

    def dynamic_keys(self) -> frozenset[str]:
        return DYNAMIC_KEYS | self._registry.configs()

    def layers(self) -> BrokerConfigLayers:
        """This broker's settings by source, for DescribeConfigs."""
        return BrokerConfigLayers(
            dict(self._per_broker),
            dict(self._default),
            self._static_properties,
            dict(self._effective.properties),
            self.dynamic_keys(),
        )

    def check_resource_name(self, name: str) -> None:
        """Kafka's rule: the cluster default ("") or this broker's own id."""
        if name == DEFAULT_ENTITY:
            return
        if not name.lstrip("-").isdigit():
            raise InvalidBrokerConfigRequest(f"Node id must be an integer, but it is: {name}")
        if int(name) != self.broker_id:
            raise InvalidBrokerConfigRequest(
                f"Unexpected broker id, expected {self.broker_id}, but received {name}"
            )

    # -- changes made through this broker --------------------------------------------------

    async def alter(
        self,
        entity: str,
        edit: Callable[[dict[str, str]], dict[str, str]],
        *,
        touched: Set[str],
        validate_only: bool = False,
    ) -> None:
        """Change one entity's overrides to ``edit(stored overrides)``: checked whole (raises
        InvalidBrokerConfigRequest / InvalidBrokerConfig, nothing changed), persisted, then
        applied. ``touched`` are the names the request mentions: their parts are
        reconfigured even when the value is unchanged (a keystore rewritten in place is
        reloaded by setting its path again)."""
        self.check_resource_name(entity)
        async with self._lock:

            def change(stored: dict[str, str]) -> dict[str, str]:
                new = edit(dict(stored))
                self._check(entity, stored, new, touched)
                return new

            if validate_only:
                change(self.overrides(entity))
                return
            new = await self._store.update(entity, change)
            layers = {DEFAULT_ENTITY: self._default, str(self.broker_id): self._per_broker}
            layers[entity] = new
            # Validated in ``change`` against these layers: the parts are not asked twice.
            self._install(layers, touched=set(touched), validate=False)

    def _check(
        self, entity: str, stored: Mapping[str, str], new: Mapping[str, str], touched: Set[str]
    ) -> None:
        changed = {k for k in new if stored.get(k) != new[k]}
        dynamic = self.dynamic_keys()
        bare = {k for k in changed if any(listener_base_name(d) == k for d in dynamic)}
        if bare:
            raise InvalidBrokerConfigRequest(
                "These security configs can be dynamically updated only per-listener using "
                f"the listener prefix: {scala_set(bare)}"
            )
        unknown = {
            k
            for k in changed
            if k not in dynamic and k not in BROKER_CONFIG_KEYS and not is_accepted_unused(k)
        }
        if unknown:
            raise InvalidBrokerConfig(f"Unknown config name: {', '.join(sorted(unknown))}")
        static = changed - dynamic
        if static:
            raise InvalidBrokerConfigRequest(
                f"Cannot update these configs dynamically: {scala_set(static)}"
            )
        if entity == DEFAULT_ENTITY:
            per_broker = {k for k in changed if per_broker_only(k)}
            if per_broker:
                raise InvalidBrokerConfigRequest(
                    "Cannot update these configs at default cluster level, broker id must be "
                    f"specified: {scala_set(per_broker)}"
                )
        layers = self._layer_dict()
        layers[entity] = dict(new)
        try:
            effective = self._build(layers)
        except BrokerConfigError as exc:
            raise InvalidBrokerConfig(_problems_text(exc.problems)) from None
        for part in self._affected(effective, touched | changed | (set(stored) - set(new))):
            try:
                part.validate_reconfiguration(self._values_for(part, effective))
            except ReconfigurationError as exc:
                raise InvalidBrokerConfig(str(exc)) from None
            except Exception as exc:
                # A part that fails otherwise refuses too, as Kafka's processReconfigurable.
                logger.exception("validating a dynamic config change failed in %r", part)
                raise InvalidBrokerConfig(
                    f"validation of {sorted(touched)} failed: {exc}"
                ) from None

    # -- changes stored by others (etcd's watch) ----------------------------------------------

    def apply_stored(self, stored: Mapping[str, Mapping[str, str]]) -> None:
        """Take the overrides as stored now (by resource name; other brokers' entries are
        ignored). Never raises: a value this broker cannot take is logged and left out, a
        part that refuses keeps its settings, as Kafka's brokers do."""
        layers = self._entity_layers(stored)
        before = self._layer_dict()
        touched = {
            k
            for entity in layers
            for k in set(layers[entity]) | set(before.get(entity, {}))
            if layers[entity].get(k) != before.get(entity, {}).get(k)
        }
        if touched:
            self._install(layers, touched=touched, validate=True)

    # -- internals ------------------------------------------------------------------------------

    def _entity_layers(self, stored: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
        own = str(self.broker_id)
        return {
            DEFAULT_ENTITY: dict(stored.get(DEFAULT_ENTITY, {})),
            own: dict(stored.get(own, {})),
        }

    def _layer_dict(self) -> dict[str, dict[str, str]]:
        return {DEFAULT_ENTITY: dict(self._default), str(self.broker_id): dict(self._per_broker)}

    def _build(self, layers: Mapping[str, Mapping[str, str]]) -> _Effective:
        """Static properties, then the cluster default, then this broker's overrides; a key
        removes its unit synonyms from the layers below it. Raises BrokerConfigError."""
        own = str(self.broker_id)
        properties = dict(self._static_properties)
        for entity in (DEFAULT_ENTITY, own):
            layer = layers.get(entity, {})
            # Synonyms go from the layers below only: one layer may set ms and hours both.
            for key in layer:
                for synonym in broker_synonyms(key) if key in BROKER_CONFIG_KEYS else ():
                    properties.pop(synonym, None)
            properties.update(layer)
        # Where each key came from, for log lines and errors: the static origins, and the
        # dynamic layers for the rest.
        origins = {key: self.static.origin(key) or "" for key in self._static_properties}
        for entity, label in ((DEFAULT_ENTITY, "cluster default"), (own, f"broker {own}")):
            for key in layers.get(entity, {}):
                origins[key] = f"dynamic config of {label}"
        extra: dict[str, str] = {}
        while True:
            try:
                config = BrokerConfig.from_properties(
                    properties,
                    origins={k: o for k, o in origins.items() if o and k in properties},
                    warnings=self.static.warnings,
                )
                return _Effective.of(config, extra)
            except BrokerConfigError as exc:
                # A name only a registered part knows (BrokerConfig has no such setting) is
                # kept beside the config and handed to that part; any other problem stands.
                foreign = {
                    p.key
                    for p in exc.problems
                    if p.reason == _UNKNOWN_TO_BROKER_CONFIG and p.key not in BROKER_CONFIG_KEYS
                }
                if not foreign:
                    raise
                for key in foreign:
                    extra[key] = properties.pop(key)

    def _install(
        self, layers: Mapping[str, Mapping[str, str]], *, touched: set[str], validate: bool
    ) -> None:
        """Make ``layers`` the overrides in force and apply them. With ``validate`` (values
        stored by others, or read at start-up) a value that cannot be taken is dropped with
        an error logged, and a refusing part is left as it was."""
        working = {entity: dict(configs) for entity, configs in layers.items()}
        while True:
            try:
                effective = self._build(working)
                break
            except BrokerConfigError as exc:
                dropped = self._drop(working, {problem.key for problem in exc.problems})
                logger.error(
                    "dynamic broker configs ignored, %s: %s",
                    "invalid here" if dropped else "cannot be applied",
                    _problems_text(exc.problems),
                )
                if not dropped:
                    return
        old_effective = self._effective
        parts = self._affected(effective, touched, old=old_effective)
        refused: list[Reconfigurable] = []
        if validate:
            for part in parts:
                try:
                    part.validate_reconfiguration(self._values_for(part, effective))
                except Exception as exc:  # noqa: BLE001  a Reconfigurable may raise anything; it refuses
                    logger.error("dynamic broker config refused by %r: %s", part, exc)
                    refused.append(part)
        self._default = working.get(DEFAULT_ENTITY, {})
        self._per_broker = working.get(str(self.broker_id), {})
        self._effective = effective
        old_defaults = old_effective.config.default_log_config()
        new_defaults = effective.config.default_log_config()
        if new_defaults != old_defaults:
            for listener in self.log_defaults_listeners:
                listener(new_defaults)
        for part in parts:
            if part in refused:
                continue
            try:
                part.reconfigure(self._values_for(part, effective))
            except Exception:
                # Validated already; a failure now is the part's bug, not the request's.
                logger.exception("applying a dynamic broker config failed in %r", part)
        if touched:
            logger.info(
                "dynamic broker configs in force: cluster default %s, broker %d %s",
                _loggable(self._default),
                self.broker_id,
                _loggable(self._per_broker),
            )
            for key in sorted(touched & set(effective.properties)):
                reason = inert_reason(key)
                if reason is not None:
                    logger.info("%s accepted; it has no effect in josefk: %s", key, reason)

    def _drop(self, layers: dict[str, dict[str, str]], keys: set[str]) -> bool:
        """Remove ``keys`` (and the dynamic synonyms that set them) from the dynamic layers;
        False when none of them is dynamic (the static config itself is at fault)."""
        dropped = False
        for configs in layers.values():
            for key in list(configs):
                if key in keys or any(key in broker_synonyms(k) for k in keys):
                    del configs[key]
                    dropped = True
        return dropped

    def _affected(
        self, effective: _Effective, touched: Set[str], *, old: _Effective | None = None
    ) -> list[Reconfigurable]:
        """The parts a change concerns: one of their names is touched, or one of their
        values differs from what is in force."""
        before = old if old is not None else self._effective
        parts = []
        for part in self._registry:
            names = part.reconfigurable_configs()
            if names & touched or self._values_for(part, effective) != self._values_for(
                part, before
            ):
                parts.append(part)
        return parts

    def _values_for(self, part: Reconfigurable, effective: _Effective) -> dict[str, str]:
        names = part.reconfigurable_configs()
        return {name: effective.properties[name] for name in names if name in effective.properties}


def _problems_text(problems: list[ConfigProblem]) -> str:
    return "; ".join(
        f"Invalid value {problem.value} for configuration {problem.key}: {problem.reason}"
        if problem.value is not None
        else f"{problem.key}: {problem.reason}"
        for problem in problems
    )


def _loggable(configs: Mapping[str, str]) -> dict[str, str]:
    return {k: "[hidden]" if is_sensitive(k) else v for k, v in sorted(configs.items())}


# ---------------------------------------------------------------------------- parts


class LogCleanerSettings:
    """The log cleaner's live settings (Kafka's LogCleaner reconfigurable configs that
    josefk's cleaner has): registered by the broker in its ``ReconfigurableRegistry``."""

    NAMES: Final = frozenset(
        {
            "log.cleaner.threads",
            "log.cleaner.dedupe.buffer.size",
            "log.cleaner.io.buffer.load.factor",
            "log.cleaner.io.max.bytes.per.second",
            "log.cleaner.backoff.ms",
        }
    )

    def __init__(self, cleaner: LogCleaner) -> None:
        self._cleaner = cleaner

    def __repr__(self) -> str:
        return "LogCleanerSettings"

    def reconfigurable_configs(self) -> Set[str]:
        return self.NAMES

    def validate_reconfiguration(self, configs: Mapping[str, str]) -> None:
        # Kafka's bounds: a thread count changes by at most a factor of two at a time.
        threads = int(configs.get("log.cleaner.threads", "1"))
        current = self._cleaner.config.threads
        if threads < 1:
            raise ReconfigurationError(
                "log.cleaner.threads: Log cleaner threads should be at least 1"
            )
        if threads < current // 2:
            raise ReconfigurationError(
                "log.cleaner.threads: Log cleaner threads cannot be reduced to less than half "
                f"the current value {current}"
            )
        if threads > current * 2:
            raise ReconfigurationError(
                "log.cleaner.threads: Log cleaner threads cannot be increased to more than "
                f"double the current value {current}"
            )

    def reconfigure(self, configs: Mapping[str, str]) -> None:
        current = self._cleaner.config
        self._cleaner.reconfigure(
            CleanerConfig(
                enable=current.enable,
                threads=int(configs.get("log.cleaner.threads", current.threads)),
                dedupe_buffer_size=int(
                    configs.get("log.cleaner.dedupe.buffer.size", current.dedupe_buffer_size)
                ),
                io_buffer_load_factor=float(
                    configs.get("log.cleaner.io.buffer.load.factor", current.io_buffer_load_factor)
                ),
                io_max_bytes_per_second=float(
                    configs.get(
                        "log.cleaner.io.max.bytes.per.second", current.io_max_bytes_per_second
                    )
                ),
                backoff_ms=int(configs.get("log.cleaner.backoff.ms", current.backoff_ms)),
            )
        )


class _ConnectionLimited(Protocol):
    def set_connection_limits(self, max_connections: int, max_connections_per_ip: int) -> None: ...


class ConnectionLimits:
    """The socket server's connection limits (Kafka's cluster-level listener configs
    ``max.connections`` and ``max.connections.per.ip``)."""

    NAMES: Final = frozenset({"max.connections", "max.connections.per.ip"})

    def __init__(self, server: _ConnectionLimited) -> None:
        self._server = server

    def __repr__(self) -> str:
        return "ConnectionLimits"

    def reconfigurable_configs(self) -> Set[str]:
        return self.NAMES

    def validate_reconfiguration(self, configs: Mapping[str, str]) -> None:
        # BrokerConfig has checked the ranges; nothing else can be wrong with a limit.
        pass

    def reconfigure(self, configs: Mapping[str, str]) -> None:
        unlimited = str((1 << 31) - 1)
        self._server.set_connection_limits(
            int(configs.get("max.connections", unlimited)),
            int(configs.get("max.connections.per.ip", unlimited)),
        )
