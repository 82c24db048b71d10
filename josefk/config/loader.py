"""Where the broker's configuration comes from, and in which order the sources win.

Owns ``load_broker_config``, which ``josefk serve`` calls. Sources, lowest precedence first:

1. Kafka's defaults (as josefk adjusts them, see ``josefk.config.broker``);
2. a ``server.properties``-style file (``--config FILE``);
3. environment variables ``JOSEFK_<KEY>``: the key upper-cased with dots as underscores,
   ``JOSEFK_LOG_SEGMENT_BYTES`` for ``log.segment.bytes``;
4. ``--set KEY=VALUE`` on the command line, in the order given;
5. the convenience flags ``--data-dir`` (``log.dirs``), ``--listen HOST:PORT`` (the host and
   port of the first client listener) and ``--metrics-port`` (``josefk.metrics.port``).

Synonyms are resolved per source: when a source sets any key of a group (``node.id`` /
``broker.id``; ``log.dirs`` / ``log.dir``; ``log.retention.ms`` / ``minutes`` / ``hours``;
``log.roll.ms`` / ``hours``; ``log.roll.jitter.ms`` / ``hours``), the group's keys from lower
sources are dropped, so ``JOSEFK_LOG_RETENTION_HOURS=1`` overrides ``log.retention.ms`` in the
file. Within one source Kafka's own precedence applies (``ms`` over ``minutes`` over ``hours``).

Environment names are ambiguous (an underscore may stand for a dot or for an underscore), so
they are resolved by matching against the known keys, never by blind replacement. A name that
matches no known key is read with the convention of Kafka's Docker images (``_`` is ``.``,
``__`` is ``_``, ``___`` is ``-``) only to name it in the warning. ``JOSEFK_METRICS_PORT`` and
``JOSEFK_JOSEFK_METRICS_PORT`` both set ``josefk.metrics.port``.

Unknown keys never stop start-up: they are reported in ``BrokerConfig.warnings`` (with a
suggestion when a known key is close) and ignored. Anything invalid raises
``BrokerConfigError`` naming the key (or the flag) and why.

Must not import josefk.broker, josefk.storage or josefk.protocol.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from josefk.config.broker import (
    ACCEPTED_UNUSED_KEYS,
    BROKER_CONFIG_KEYS,
    REFUSED_KEYS,
    BrokerConfig,
    BrokerConfigError,
    ConfigProblem,
    Listener,
    is_accepted_unused,
    is_listener_property,
    listener_ssl_key,
    parse_host_port,
    refusal,
)
from josefk.config.properties import PropertiesSyntaxError, read_properties_file_lines

__all__ = [
    "ENV_PREFIX",
    "SYNONYM_GROUPS",
    "ConfigSource",
    "env_key",
    "env_name",
    "env_properties",
    "load_broker_config",
    "parse_overrides",
]

ENV_PREFIX: Final = "JOSEFK_"
_OWN_PREFIX: Final = "josefk."

SYNONYM_GROUPS: Final[tuple[frozenset[str], ...]] = (
    frozenset({"node.id", "broker.id"}),
    frozenset({"log.dirs", "log.dir"}),
    frozenset({"log.retention.ms", "log.retention.minutes", "log.retention.hours"}),
    frozenset({"log.roll.ms", "log.roll.hours"}),
    frozenset({"log.roll.jitter.ms", "log.roll.jitter.hours"}),
)
_GROUP_OF: Final[dict[str, frozenset[str]]] = {
    key: group for group in SYNONYM_GROUPS for key in group
}


@dataclass(slots=True)
class ConfigSource:
    """One layer of settings: Kafka-named string properties and where each came from."""

    name: str
    properties: dict[str, str] = field(default_factory=dict)
    # Per key, a finer origin than the source name (the environment variable's name).
    origins: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def set(self, key: str, value: str, origin: str | None = None) -> None:
        self.properties[key] = value
        self.origins[key] = origin or self.name


# ------------------------------------------------------------------------------ environment


def env_name(key: str) -> str:
    """The environment variable that sets ``key``: ``log.segment.bytes`` -> ``JOSEFK_LOG_SEGMENT_BYTES``."""
    return ENV_PREFIX + key.replace(".", "_").replace("-", "_").upper()


def _build_env_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for key in (*BROKER_CONFIG_KEYS, *sorted(ACCEPTED_UNUSED_KEYS)):
        name = env_name(key)
        other = index.get(name)
        if other is not None and other != key:
            raise AssertionError(f"{key} and {other} share the environment name {name}")
        index[name] = key
    return index


_ENV_INDEX: Final = _build_env_index()


def _docker_style_key(suffix: str) -> str:
    # Kafka's images: ___ is '-', __ is '_', _ is '.'; placeholders keep the passes apart.
    text = suffix.lower().replace("___", "\0").replace("__", "\1")
    return text.replace("_", ".").replace("\0", "-").replace("\1", "_")


def env_key(variable: str) -> str | None:
    """The known key an environment variable sets, or None when it matches none.

    ``JOSEFK_LOG_SEGMENT_BYTES`` -> ``log.segment.bytes``; ``JOSEFK_METRICS_PORT`` ->
    ``josefk.metrics.port`` (josefk's own keys may drop their repeated prefix).
    """
    if not variable.startswith(ENV_PREFIX):
        return None
    key = _ENV_INDEX.get(variable)
    if key is not None:
        return key
    return _ENV_INDEX.get(ENV_PREFIX + "JOSEFK_" + variable[len(ENV_PREFIX) :])


def env_properties(env: Mapping[str, str]) -> ConfigSource:
    """The settings ``JOSEFK_*`` variables carry; unmatched names become warnings."""
    source = ConfigSource("environment")
    # Sorted so the long form JOSEFK_JOSEFK_X is applied after (and wins over) JOSEFK_X.
    for variable in sorted(env, key=lambda name: (name.startswith(ENV_PREFIX + "JOSEFK_"), name)):
        if not variable.startswith(ENV_PREFIX):
            continue
        key = env_key(variable)
        if key is None:
            guess = _docker_style_key(variable[len(ENV_PREFIX) :])
            if listener_ssl_key(guess) is not None:
                # JOSEFK_LISTENER_NAME_SSL_SSL_KEYSTORE_LOCATION: a per-listener TLS key, read
                # as Kafka's images read names (a listener name with "_" is written "__").
                source.set(guess, env[variable], f"environment variable {variable}")
                continue
            if is_accepted_unused(guess):
                # An inert key by its prefix (JOSEFK_CONTROLLER_QUORUM_VOTERS): kept, as in a file.
                source.set(guess, env[variable], f"environment variable {variable}")
                continue
            source.warnings.append(
                f"environment variable {variable} matches no known config key "
                f"(read as {guess!r}{_suggestion(guess)}); ignored"
            )
            continue
        source.set(key, env[variable], f"environment variable {variable}")
    return source


# ------------------------------------------------------------------------------ command line


def parse_overrides(items: Iterable[str] | Mapping[str, str]) -> ConfigSource:
    """``--set KEY=VALUE`` items (or a mapping) as a source; a later item wins."""
    source = ConfigSource("--set")
    if isinstance(items, Mapping):
        for key, value in items.items():
            source.set(key.strip(), value, "--set")
        return source
    problems: list[ConfigProblem] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(ConfigProblem("--set", item, "expected KEY=VALUE"))
            continue
        source.set(key.strip(), value, "--set")
    if problems:
        raise BrokerConfigError(problems)
    return source


def _suggestion(key: str) -> str:
    close = difflib.get_close_matches(key, BROKER_CONFIG_KEYS, n=1, cutoff=0.8)
    return f"; did you mean {close[0]}?" if close else ""


def _file_source(path: str | os.PathLike[str]) -> ConfigSource:
    source = ConfigSource(f"file {os.fspath(path)}")
    try:
        props, lines = read_properties_file_lines(path)
    except PropertiesSyntaxError as exc:
        raise BrokerConfigError([ConfigProblem("--config", os.fspath(path), str(exc))]) from None
    except OSError as exc:
        reason = f"cannot read the file: {exc.strerror or exc}"
        raise BrokerConfigError([ConfigProblem("--config", os.fspath(path), reason)]) from None
    for key, value in props.items():
        source.set(key, value, f"file {os.fspath(path)}, line {lines[key]}")
    return source


def _flag_source(
    merged: Mapping[str, str],
    data_dir: str | os.PathLike[str] | None,
    listen: str | None,
    metrics_port: int | None,
) -> ConfigSource:
    source = ConfigSource("command line flags")
    if data_dir is not None:
        source.set("log.dirs", os.fspath(data_dir), "--data-dir")
    if listen is not None:
        try:
            host, port = parse_host_port(listen)
        except ValueError as exc:
            raise BrokerConfigError([ConfigProblem("--listen", listen, str(exc))]) from None
        source.set("listeners", _listen_over(merged, host, port), "--listen")
    if metrics_port is not None:
        if not 0 <= metrics_port <= 65535:
            problem = ConfigProblem("--metrics-port", metrics_port, "not between 0 and 65535")
            raise BrokerConfigError([problem])
        source.set("josefk.metrics.port", str(metrics_port), "--metrics-port")
    return source


def _listen_over(merged: Mapping[str, str], host: str, port: int) -> str:
    """``listeners`` with the first client listener moved to host:port, its name kept.

    With no listeners configured this is ``PLAINTEXT://host:port``; a configured list that
    does not parse is replaced whole (the flag is the user's latest word).
    """
    raw = merged.get("listeners", "")
    try:
        current = [Listener.parse(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        current = []
    controllers = {
        name.strip().upper() for name in merged.get("controller.listener.names", "").split(",")
    }
    for index, listener in enumerate(current):
        if listener.name not in controllers:
            current[index] = Listener(listener.name, host, port)
            return ",".join(str(item) for item in current)
    return str(Listener.plaintext(host, port))


# ------------------------------------------------------------------------------ merging


def _merge(sources: Iterable[ConfigSource]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    merged: dict[str, str] = {}
    origins: dict[str, str] = {}
    warnings: list[str] = []
    refused: list[ConfigProblem] = []
    for source in sources:
        warnings.extend(source.warnings)
        known: dict[str, str] = {}
        for key, value in source.properties.items():
            reason = refusal(key, value)
            if reason is not None:
                refused.append(
                    ConfigProblem(key, value, reason, source.origins.get(key, source.name))
                )
            elif (
                key in _KNOWN
                or listener_ssl_key(key) is not None
                or is_listener_property(key)
                or is_accepted_unused(key)  # kept and described; BrokerConfig.inert_notes
            ):
                known[key] = value
            elif key in REFUSED_KEYS:
                pass  # set to "off" (empty): as josefk has it
            else:
                warnings.append(
                    f"unknown config key {key!r} from {source.origins.get(key, source.name)}"
                    f"{_suggestion(key)}; ignored"
                )
        for key in known:
            for synonym in _GROUP_OF.get(key, ()):
                if synonym not in known:
                    merged.pop(synonym, None)
                    origins.pop(synonym, None)
        for key, value in known.items():
            merged[key] = value
            origins[key] = source.origins.get(key, source.name)
    if refused:
        raise BrokerConfigError(refused)
    return merged, origins, warnings


_KNOWN: Final = frozenset(BROKER_CONFIG_KEYS)


def load_broker_config(
    config_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Iterable[str] | Mapping[str, str] = (),
    data_dir: str | os.PathLike[str] | None = None,
    listen: str | None = None,
    metrics_port: int | None = None,
) -> BrokerConfig:
    """The broker's configuration from every source, highest precedence last.

    ``env`` defaults to ``os.environ``; pass ``{}`` to ignore the environment. ``overrides``
    are ``--set`` items (``"KEY=VALUE"`` strings) or a mapping. The result's ``warnings`` list
    unknown keys; ``origin(key)`` says which source set a key. Raises BrokerConfigError naming
    each invalid key (or flag) and why.
    """
    sources: list[ConfigSource] = []
    if config_file is not None:
        sources.append(_file_source(config_file))
    sources.append(env_properties(os.environ if env is None else env))
    sources.append(parse_overrides(overrides))
    merged, _, _ = _merge(sources)
    sources.append(_flag_source(merged, data_dir, listen, metrics_port))
    merged, origins, warnings = _merge(sources)
    return BrokerConfig.from_properties(merged, origins=origins, warnings=tuple(warnings))
