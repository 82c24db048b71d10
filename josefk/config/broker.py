"""Broker-level configuration: Kafka's ``server.properties`` keys, defaults and validation.

Owns ``BrokerConfig`` (a frozen pydantic model whose aliases are Kafka's property names),
``Listener`` (one parsed ``NAME://host:port`` entry) and ``BrokerConfigError``. Loading from
files, the environment and the command line lives in ``josefk.config.loader``; the topic-level
``LogConfig`` and its table of broker synonyms live in ``josefk.config.topic``.

Defaults are Kafka 4.0's, with josefk's deliberate differences:

- ``listeners`` defaults to ``PLAINTEXT://127.0.0.1:9092`` and ``log.dirs`` to
  ``./josefk-data``, so that ``josefk serve`` with no arguments is a usable local broker;
- ``node.id`` defaults to 1 (Kafka requires it in KRaft mode), and ``broker.id`` is accepted
  as its synonym; setting both to different values is an error, as in Kafka;
- ``log.segment.bytes`` accepts values from 14 bytes, like ``segment.bytes`` in topic.py;
- every security protocol is served (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); TLS reads
  PEM keystores and truststores only, so ``ssl.keystore.type`` and ``ssl.truststore.type``
  default to PEM (Kafka's default, JKS, is refused with how to convert the file); the
  ``ssl.*`` keys may be given per listener as ``listener.name.<name>.ssl.*`` (the listener's
  key wins), and ``josefk.ssl.handshake.timeout.ms`` bounds a client's TLS handshake;
- ``sasl.enabled.mechanisms`` defaults to ``SCRAM-SHA-256,SCRAM-SHA-512,PLAIN`` (Kafka's
  default, GSSAPI, is not offered), and every mechanism checks the SCRAM credentials kept in
  the first log dir (see josefk.broker.security);
- ``authorizer.class.name`` takes Kafka's AclAuthorizer or StandardAuthorizer class name (or
  ``josefk.AclAuthorizer``): all three enable josefk's ACL authorizer, with ``super.users``
  and ``allow.everyone.if.no.acl.found``;
- ``sasl.mechanism.inter.broker.protocol`` defaults to ``SCRAM-SHA-512`` (Kafka's default,
  GSSAPI, does not exist here); the broker's own credentials for it come from
  ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, else ``sasl.jaas.config`` (the
  one per-listener key family josefk reads: ``listener_property``);
- ``socket.send.buffer.bytes`` and ``socket.receive.buffer.bytes`` default to -1 (the
  operating system's buffers, which Linux grows with the connection's traffic) instead of
  Kafka's 102400: a fixed 100 KiB receive buffer turns off that autotuning, so a 1 MB
  produce request arrived in ~8 receives through a ~100 KiB TCP window, and the broker spent
  ~50% more CPU per GB produced (docs/benchmarks.md, "Cost per byte");
- josefk's own settings carry a ``josefk.`` prefix (``josefk.metrics.port`` = 9404, ...).

Every key is declared once: a field of ``BrokerConfig`` carries its name, default, type,
validation, documentation, update mode and sensitivity (``_key``, through
josefk.config.definitions); Kafka's keys that BrokerConfig has no setting for are declared in
``INERT_KEYS`` (accepted, stored, no effect, with the reason) or ``REFUSED_KEY_REASONS`` /
``REFUSED_PREFIXES`` (refused, with the reason). ``BROKER_KEYS`` is the whole declared set.

Must not import josefk.broker, josefk.storage or josefk.protocol.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from josefk.config.definitions import (
    ConfigKey,
    Dynamic,
    Support,
    config_field,
    format_value,
    keys_of,
)
from josefk.config.topic import BROKER_DEFAULT_KEYS, InvalidConfigError, LogConfig

__all__ = [
    "ACCEPTED_UNUSED_KEYS",
    "ACCEPTED_UNUSED_PREFIXES",
    "BROKER_CONFIG_KEYS",
    "BROKER_KEYS",
    "INERT_KEYS",
    "INERT_PREFIXES",
    "INT_MAX",
    "LONG_MAX",
    "REFUSED_KEYS",
    "REFUSED_KEY_REASONS",
    "REFUSED_PREFIXES",
    "SECURITY_PROTOCOLS",
    "SSL_KEYS",
    "TLS_SECURITY_PROTOCOLS",
    "BrokerConfig",
    "BrokerConfigError",
    "ConfigEntry",
    "ConfigProblem",
    "Listener",
    "listener_ssl_key",
]

LONG_MAX: Final = (1 << 63) - 1
INT_MAX: Final = (1 << 31) - 1
DOUBLE_MAX: Final = 1.7976931348623157e308

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_SECURITY_PROTOCOLS: Final = ("SSL", "SASL_SSL")
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# ``listener.name.<listener>.<key>``: the per-listener keys josefk reads, by the <key> part
# (see ``listener_property``); every other listener-prefixed key is still refused.
_LISTENER_KEY: Final = re.compile(r"^listener\.name\.([^.]+)\.(.+)$")
_LISTENER_SUFFIXES: Final = re.compile(
    r"^(?:plain|scram-sha-256|scram-sha-512)\.sasl\.jaas\.config$"
)

# The ssl.* keys josefk honours, each also as ``listener.name.<lowercase name>.<key>``; Kafka's
# other ssl.* keys are inert (INERT_KEYS: the JVM's key and trust manager algorithms) or
# refused (REFUSED_KEY_REASONS: a JVM provider or engine factory has no counterpart here).
SSL_KEYS: Final = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.protocol",
        "ssl.cipher.suites",
        "ssl.endpoint.identification.algorithm",
        "ssl.principal.mapping.rules",
    }
)
_LISTENER_SSL_KEY: Final = re.compile(r"^listener\.name\.(?P<listener>[^.]+)\.(?P<key>ssl\..+)$")


def listener_ssl_key(key: str) -> tuple[str, str] | None:
    """``listener.name.<name>.ssl.<x>`` -> (NAME upper-cased, ``ssl.<x>``); None for other
    keys, including listener-prefixed keys of settings josefk does not take per listener."""
    match = _LISTENER_SSL_KEY.match(key)
    if match is None or match["key"] not in SSL_KEYS:
        return None
    return match["listener"].upper(), match["key"]


_MS_PER_MINUTE: Final = 60_000
_MS_PER_HOUR: Final = 3_600_000


# ------------------------------------------------------------------------------- errors


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One invalid setting: the Kafka key, the value as given, and why it was refused."""

    key: str
    value: object
    reason: str
    # Where the key was set, when it came from a file or the environment.
    origin: str | None = None

    def __str__(self) -> str:
        where = f" ({self.origin})" if self.origin else ""
        if self.value is None:
            return f"{self.key}{where}: {self.reason}"
        return f"{self.key}={_show(self.value)}{where}: {self.reason}"


def _show(value: object) -> str:
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


class BrokerConfigError(Exception):
    """The broker configuration is invalid; start-up stops with this message.

    Deliberately not a ValueError: pydantic wraps ValueErrors raised in validators, and the
    cross-field checks want their key-naming message to reach the user unchanged.
    """

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        if len(problems) == 1:
            super().__init__(f"invalid broker configuration: {problems[0]}")
            return
        lines = "\n".join(f"  {problem}" for problem in problems)
        super().__init__(f"invalid broker configuration ({len(problems)} settings):\n{lines}")


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One broker setting as DescribeConfigs reports it.

    ``source`` is the name of Kafka's ConfigSource (DEFAULT_CONFIG = 5, STATIC_BROKER_CONFIG =
    4 on the wire); ``origin`` says which file, variable or flag set it.
    """

    name: str
    value: str | None
    source: Literal["DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"]
    origin: str | None = None
    read_only: bool = True
    sensitive: bool = False


# ------------------------------------------------------------------------------- listeners

_LISTENER_PATTERN: Final = re.compile(
    r"^(?P<name>[^:/]*)://(?:\[(?P<ip6>[^\]]*)\]|(?P<host>[^:\[\]]*)):(?P<port>-?\d+)$"
)


@dataclass(frozen=True, slots=True)
class Listener:
    """One entry of ``listeners`` / ``advertised.listeners``: ``NAME://host:port``.

    The name is upper-cased as Kafka normalises it. An empty host (``PLAINTEXT://:9092``)
    binds every interface and is advertised as this machine's host name; IPv6 hosts are
    written in brackets. Port 0 asks the operating system for a free port (tests use it).
    """

    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Listener:
        """Parse ``NAME://host:port``; raises ValueError saying what is wrong."""
        match = _LISTENER_PATTERN.match(text.strip())
        if match is None:
            raise ValueError(f"{text.strip()!r} is not of the form NAME://host:port")
        name = match["name"].strip().upper()
        if not name:
            raise ValueError(f"{text.strip()!r} has no listener name")
        host = match["ip6"] if match["ip6"] is not None else match["host"]
        port = int(match["port"])
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} of {text.strip()!r} is not between 0 and 65535")
        return cls(name=name, host=host, port=port)

    @classmethod
    def plaintext(cls, host: str, port: int) -> Listener:
        return cls(name="PLAINTEXT", host=host, port=port)

    def with_port(self, port: int) -> Listener:
        """The same listener on another port: the bound port once port 0 got one."""
        return Listener(name=self.name, host=self.host, port=port)

    def with_host(self, host: str) -> Listener:
        return Listener(name=self.name, host=host, port=self.port)

    @property
    def binds_all_interfaces(self) -> bool:
        return self.host in ("", "0.0.0.0", "::")

    @property
    def bind_host(self) -> str | None:
        """The host for ``asyncio.start_server``: None binds every interface."""
        return None if self.host == "" else self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_host_port(text: str) -> tuple[str, int]:
    """Parse ``--listen`` style ``HOST:PORT`` (``[::1]:9092`` for IPv6, ``:9092`` for all)."""
    listener = Listener.parse(f"PLAINTEXT://{text.strip()}")
    return listener.host, listener.port


# ------------------------------------------------------------------------------- value parsing


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _kafka_bool(value: object) -> object:
    # Kafka's BOOLEAN takes only true/false in any case; pydantic would also take yes/on/1.
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered not in ("true", "false"):
            raise ValueError("expected true or false")
        return lowered == "true"
    return value


def _strip(value: object) -> object:
    return value.strip() if isinstance(value, str) else value


def _parse_listeners(value: object) -> object:
    if isinstance(value, str):
        return tuple(Listener.parse(part) for part in value.split(",") if part.strip())
    if isinstance(value, list | tuple):
        return tuple(Listener.parse(v) if isinstance(v, str) else v for v in value)
    return value


def _parse_protocol_map(value: object) -> object:
    if isinstance(value, str):
        result: dict[str, str] = {}
        for entry in value.split(","):
            if not entry.strip():
                continue
            name, sep, protocol = entry.partition(":")
            if not sep or not name.strip() or not protocol.strip():
                raise ValueError(f"entry {entry.strip()!r} is not of the form NAME:PROTOCOL")
            key = name.strip().upper()
            if key in result:
                raise ValueError(f"listener name {key} appears twice")
            result[key] = protocol.strip().upper()
        return result
    return value


def _nullable(value: object) -> object:
    # An empty value for a key whose default is null means "not set", as Kafka reads it.
    if isinstance(value, str) and not value.strip():
        return None
    return _strip(value)


KBool = Annotated[bool, BeforeValidator(_kafka_bool)]
Int = Annotated[int, BeforeValidator(_strip)]
OptInt = Annotated[int | None, BeforeValidator(_nullable)]
Float = Annotated[float, BeforeValidator(_strip)]
Str = Annotated[str, BeforeValidator(_strip)]
OptStr = Annotated[str | None, BeforeValidator(_nullable)]
Csv = Annotated[tuple[str, ...], BeforeValidator(_split_csv)]
Listeners = Annotated[tuple[Listener, ...], BeforeValidator(_parse_listeners)]
OptListeners = Annotated[tuple[Listener, ...] | None, BeforeValidator(_parse_listeners)]
ProtocolMap = Annotated[dict[str, str], BeforeValidator(_parse_protocol_map)]


def _key(alias: str, default: Any, *, doc: str = "", **declared: Any) -> Any:
    """One broker key, declared once: see josefk.config.definitions.config_field. Every key
    needs its ``doc`` (tests/config/test_reference.py fails on a key without one)."""
    return config_field(alias, default, doc, **declared)


_DEFAULT_PROTOCOL_MAP: Final = (
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
)

# ------------------------------------------------------------------------------- Kafka's other keys
#
# Kafka's broker keys that BrokerConfig has no setting for are declared here, each with what
# josefk does with it. INERT: the key's feature is off or absent here, or josefk meets its
# purpose another way (etcd for the cluster's metadata, one event loop for Kafka's thread
# pools): the key is accepted, stored (``BrokerConfig.inert_configs``), described with its
# source, changes nothing, and a log line says so. REFUSED: a user who sets it would rely on
# an effect josefk cannot give (an authentication plug-in class, quotas, tiered storage
# switched on); start-up and AlterConfigs refuse it naming the reason.


def _inert(reason: str, *names: str, dynamic: Dynamic = Dynamic.READ_ONLY) -> dict[str, ConfigKey]:
    return {
        name: ConfigKey(
            name,
            "string",
            None,
            f"Kafka's {name}.",
            dynamic=dynamic,
            support=Support.INERT,
            reason=reason,
        )
        for name in names
    }


_ETCD = "etcd holds the cluster's metadata and membership (no KRaft quorum, no ZooKeeper)"
_TIERED = "tiered storage is off (remote.log.storage.system.enable): the whole log is local"
INERT_KEYS: Final[dict[str, ConfigKey]] = {
    **_inert(
        "GSSAPI (Kerberos) is not among sasl.enabled.mechanisms",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.kerberos.service.name",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        dynamic=Dynamic.PER_BROKER,
    ),
    **_inert(
        "they tune the token refresh of OAUTHBEARER and Kerberos logins, neither offered here",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        dynamic=Dynamic.PER_BROKER,
    ),
    **_inert(
        "OAUTHBEARER is not among sasl.enabled.mechanisms",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.retry.backoff.max.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.token.endpoint.url",
    ),
    **_inert(
        _ETCD,
        "process.roles",
        "sasl.mechanism.controller.protocol",
        "reserved.broker.max.id",
        "broker.id.generation.enable",
        "node.id.generation.enable",
        "control.plane.listener.name",
        "early.start.listeners",
        "initial.broker.registration.timeout.ms",
        "broker.heartbeat.interval.ms",
        "broker.session.timeout.ms",
        "eligible.leader.replicas.enable",
    ),
    **_inert(
        "one protocol version set per josefk release",
        "inter.broker.protocol.version",
        "unstable.api.versions.enable",
        "unstable.feature.versions.enable",
    ),
    **_inert(
        "a cluster broker always hands its leaderships over through etcd before it stops",
        "controlled.shutdown.enable",
        "controlled.shutdown.max.retries",
        "controlled.shutdown.retry.backoff.ms",
    ),
    **_inert(
        "removed in Kafka 4.0 (a no-op since 3.0): only record batch v2 is written",
        "log.message.format.version",
        "log.message.downconversion.enable",
    ),
    **_inert(
        "removed in Kafka 4.0: log.message.timestamp.before.max.ms and after.max.ms bound "
        "timestamps",
        "log.message.timestamp.difference.max.ms",
    ),
    **_inert(
        "the broker's own connections to other brokers use replica.socket.timeout.ms and "
        "replica.fetch.backoff.ms",
        "request.timeout.ms",
        "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
    ),
    **_inert("client telemetry (KIP-714) is not offered", "telemetry.max.bytes"),
    **_inert(
        "transactional produce is always verified with its coordinator (KIP-890)",
        "transaction.partition.verification.enable",
    ),
    **_inert(
        "loading reads whole batches through the page cache",
        "transaction.state.log.load.buffer.size",
    ),
    **_inert(
        "a failed authentication closes the connection at once",
        "connection.failed.authentication.delay.ms",
    ),
    **_inert(
        "moving replicas between log dirs (AlterReplicaLogDirs) is not offered",
        "num.replica.alter.log.dirs.threads",
    ),
    **_inert(
        "a share fetch leaves the purgatory when it completes; there is nothing to purge",
        "share.fetch.purgatory.purge.interval.requests",
    ),
    **_inert(
        "a log dir that fails goes offline; the broker keeps serving the others",
        "log.dir.failure.timeout.ms",
    ),
    **_inert(
        "a reloaded keystore is not compared with the one before it",
        "ssl.allow.dn.changes",
        "ssl.allow.san.changes",
    ),
    **_inert(
        "JVM TLS choices: josefk's TLS is OpenSSL through Python's ssl module",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
    ),
    **_inert(
        "delegation tokens are off: they need delegation.token.secret.key, which josefk refuses",
        "delegation.token.expiry.check.interval.ms",
        "delegation.token.expiry.time.ms",
        "delegation.token.max.lifetime.ms",
    ),
    **_inert(
        "no password encoder: password.encoder.secret is refused",
        "password.encoder.cipher.algorithm",
        "password.encoder.iterations",
        "password.encoder.key.length",
        "password.encoder.keyfactory.algorithm",
    ),
    **_inert(
        _TIERED,
        "remote.fetch.max.wait.ms",
        "remote.list.offsets.request.timeout.ms",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.log.manager.copier.thread.pool.size",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.copy.quota.window.num",
        "remote.log.manager.copy.quota.window.size.seconds",
        "remote.log.manager.expiration.thread.pool.size",
        "remote.log.manager.fetch.max.bytes.per.second",
        "remote.log.manager.fetch.quota.window.num",
        "remote.log.manager.fetch.quota.window.size.seconds",
        "remote.log.manager.task.interval.ms",
        "remote.log.manager.thread.pool.size",
        "remote.log.metadata.custom.metadata.max.bytes",
        "remote.log.metadata.manager.class.name",
        "remote.log.metadata.manager.class.path",
        "remote.log.metadata.manager.impl.prefix",
        "remote.log.metadata.manager.listener.name",
        "remote.log.reader.max.pending.tasks",
        "remote.log.reader.threads",
        "remote.log.storage.manager.class.name",
        "remote.log.storage.manager.class.path",
        "remote.log.storage.manager.impl.prefix",
    ),
}
# Families of keys accepted as inert by prefix (any key under them, Kafka's present and
# future ones and vendors' own), with why.
INERT_PREFIXES: Final[dict[str, str]] = {
    "controller.": _ETCD,
    "zookeeper.": _ETCD,
    "metadata.": _ETCD,
    "confluent.": "a vendor's own settings",
    "log.dir.failure.": "a log dir that fails goes offline; the broker keeps serving the others",
    # KIP-848 consumer groups are served: the group.consumer.* keys declared here are
    # honoured, Kafka's others change nothing. KIP-932 share groups likewise for group.share.*.
    "group.consumer.": "the KIP-848 settings not declared above (regex refresh interval, "
    "per-rack assignment, ...) have no counterpart in josefk's consumer groups",
    "group.share.": "the KIP-932 settings not declared above (min/max bounds, max groups, "
    "assignors, ...) have no counterpart in josefk's share groups",
    "share.": "the share coordinator and __share_group_state are not built (josefk keeps "
    "share state in its own files)",
    "group.coordinator.": "the classic group coordinator runs on the event loop",
    "remote.log.": _TIERED,
}
# Kept for the environment lookup and older callers: the inert keys by name.
ACCEPTED_UNUSED_KEYS: Final = frozenset(INERT_KEYS)
ACCEPTED_UNUSED_PREFIXES: Final = tuple(INERT_PREFIXES)

_CLASSES = (
    "Java plug-in classes cannot be loaded; josefk authenticates PLAIN and SCRAM against its "
    "own credential store"
)
_QUOTAS = "quotas (client, replication and controller mutation) are not enforced yet"
# Kafka's keys whose effect a user would rely on and josefk cannot give, with the reason.
REFUSED_KEY_REASONS: Final[dict[str, str]] = {
    "sasl.client.callback.handler.class": _CLASSES,
    "sasl.server.callback.handler.class": _CLASSES,
    "sasl.login.class": _CLASSES,
    "sasl.login.callback.handler.class": _CLASSES,
    "principal.builder.class": (
        "principals are built by josefk (User:<SASL name>, or the TLS certificate's name "
        "through ssl.principal.mapping.rules); a builder class cannot be loaded"
    ),
    "security.providers": "JVM security providers have no counterpart here",
    "ssl.provider": "JVM TLS providers have no counterpart: TLS is OpenSSL through Python",
    "ssl.engine.factory.class": (
        "JVM TLS engines have no counterpart: TLS is OpenSSL through Python"
    ),
    "alter.config.policy.class.name": "config and topic policy classes cannot be loaded",
    "create.topic.policy.class.name": "config and topic policy classes cannot be loaded",
    "replica.selector.class": "consumers fetching from followers (KIP-392) is not offered",
    "max.connection.creation.rate": "connection rate limits are not enforced",
    "max.connections.per.ip.overrides": "per-address connection limits are not offered",
    "offset.metadata.max.bytes": "commit metadata is limited to Kafka's default, 4096 bytes",
    "delegation.token.secret.key": "delegation tokens are not offered",
    "password.encoder.secret": (
        "dynamic passwords are kept as given in a mode-0600 file (or etcd); no encoder"
    ),
    "password.encoder.old.secret": (
        "dynamic passwords are kept as given in a mode-0600 file (or etcd); no encoder"
    ),
    "client.quota.callback.class": _QUOTAS,
    "remote.log.storage.system.enable": "tiered storage is not offered",
}
# Keys refused only when set to anything but their "off" value: at that value they are inert.
REFUSED_UNLESS: Final[dict[str, str]] = {"remote.log.storage.system.enable": "false"}
# Prefixes of capabilities josefk does not have: a key under one of them stops start-up,
# naming the key, rather than being accepted and dropped (a user who set ssl.keystore.* must
# not run a plaintext broker believing it encrypts).
REFUSED_PREFIXES: Final[dict[str, str]] = {
    "ssl.": "this TLS setting is not offered",
    "sasl.": "this SASL setting is not offered",
    "listener.name.": (
        "per-listener settings other than ssl.* and <mechanism>.sasl.jaas.config are not offered"
    ),
    "quota.": _QUOTAS,
    "client.quota.": _QUOTAS,
    "replication.quota.": _QUOTAS,
    "alter.log.dirs.replication.quota.": _QUOTAS,
    "metric.reporters": "josefk exports Prometheus metrics (josefk.metrics.*), not JMX reporters",
    "kafka.metrics.": "josefk exports Prometheus metrics (josefk.metrics.*), not JMX reporters",
    "metrics.": "josefk exports Prometheus metrics (josefk.metrics.*), not JMX reporters",
}


# The authorizer is enabled by any of these names (Kafka's two standard authorizers and
# josefk's own); they all mean josefk's ACL authorizer (josefk.broker.security.authorizer).
AUTHORIZER_CLASS_NAMES: Final = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "josefk.AclAuthorizer",
)
# Keys refused whenever set to anything but their "off" value (empty); none at present.
REFUSED_KEYS: Final[dict[str, str]] = {}


def refusal(key: str, value: str) -> str | None:
    """Why ``key=value`` cannot be honoured, or None (honoured, inert, or unknown). A key
    BrokerConfig has a setting for is never refused here (its validation speaks for it)."""
    if key in _FIELD_BY_KEY:
        return None
    if key in REFUSED_KEYS and value.strip():
        return REFUSED_KEYS[key]
    off = REFUSED_UNLESS.get(key)
    if off is not None:
        if value.strip().lower() == off:
            return None
        return f"{REFUSED_KEY_REASONS[key]}; josefk refuses it rather than ignoring it"
    if key in REFUSED_KEY_REASONS:
        return f"{REFUSED_KEY_REASONS[key]}; josefk refuses it rather than ignoring it"
    if key in INERT_KEYS or listener_ssl_key(key) is not None or is_listener_property(key):
        return None
    for prefix, reason in REFUSED_PREFIXES.items():
        if key.startswith(prefix):
            return f"{reason}; josefk refuses it rather than ignoring it"
    return None


def is_listener_property(key: str) -> bool:
    """A ``listener.name.<listener>.<key>`` josefk reads (not refused, not unknown)."""
    match = _LISTENER_KEY.match(key)
    return match is not None and _LISTENER_SUFFIXES.match(match.group(2)) is not None


def inert_reason(key: str) -> str | None:
    """Why ``key`` is accepted and changes nothing here; None for any other key."""
    declared = INERT_KEYS.get(key) or _MODEL_KEYS.get(key)
    if declared is not None:
        return declared.reason if declared.support is Support.INERT else None
    if key in REFUSED_UNLESS:
        return REFUSED_KEY_REASONS[key] + f" (accepted as {REFUSED_UNLESS[key]})"
    for prefix, reason in INERT_PREFIXES.items():
        if key.startswith(prefix):
            return reason
    return None


def is_accepted_unused(key: str) -> bool:
    """An inert key: accepted, stored, described, without effect."""
    return inert_reason(key) is not None


# ------------------------------------------------------------------------------- the model


class BrokerConfig(BaseModel):
    """Every broker property josefk knows, with Kafka's names (aliases) and defaults.

    Build it from Kafka-named string properties with ``from_properties`` (what the loader
    does) or with Python field names for tests: ``BrokerConfig(num_partitions=3)``. The model
    is frozen; the broker never changes its static config in place.

    Field names are the Kafka keys with dots as underscores. Where Kafka offers a value in
    several units (``log.retention.ms`` / ``minutes`` / ``hours``, ``log.roll.ms`` / ``hours``)
    every field is kept as given and a property (``retention_ms``, ``roll_ms``) applies Kafka's
    precedence: the finest unit that is set wins, and a negative retention means unlimited.

    >>> config = BrokerConfig.from_properties({"log.retention.minutes": "5", "num.partitions": "3"})
    >>> config.retention_ms, config.num_partitions, str(config.listeners[0])
    (300000, 3, 'PLAINTEXT://127.0.0.1:9092')
    """

    model_config = ConfigDict(
        frozen=True,
        validate_by_name=True,
        validate_by_alias=True,
        validate_default=True,
        extra="forbid",
    )

    # -- server basics -----------------------------------------------------------------------
    node_id: Int = _key(
        "node.id",
        1,
        ge=0,
        le=INT_MAX,
        doc="This broker's id in the cluster (broker.id is its synonym).",
    )
    broker_id: OptInt = _key(
        "broker.id",
        None,
        ge=0,
        le=INT_MAX,
        doc="Synonym of node.id; if both are set they must be equal.",
    )
    listeners: Listeners = _key(
        "listeners",
        (Listener("PLAINTEXT", "127.0.0.1", 9092),),
        doc=(
            "Comma-separated NAME://host:port addresses to listen on; port 0 takes any free port, "
            "an empty host binds every interface."
        ),
    )
    advertised_listeners: OptListeners = _key(
        "advertised.listeners",
        None,
        doc=(
            "The addresses clients are told to use, if they differ from listeners; null advertises"
            " listeners."
        ),
    )
    listener_security_protocol_map: ProtocolMap = _key(
        "listener.security.protocol.map",
        _DEFAULT_PROTOCOL_MAP,
        doc="Security protocol of each listener name, as NAME:PROTOCOL pairs.",
    )
    controller_listener_names: Csv = _key(
        "controller.listener.names",
        (),
        doc=(
            "Listener names reserved for KRaft controllers in Kafka; josefk serves no clients on "
            "them."
        ),
    )
    inter_broker_listener_name: OptStr = _key(
        "inter.broker.listener.name",
        None,
        doc=(
            "The listener brokers use to reach each other; null: the one named by "
            "security.inter.broker.protocol, else the first."
        ),
    )
    # Kafka: the inter-broker listener is the one named after this protocol, unless
    # inter.broker.listener.name is set (both set is an error).
    security_inter_broker_protocol: OptStr = _key(
        "security.inter.broker.protocol",
        None,
        doc=(
            "The security protocol between brokers, naming the listener of that name; set it or "
            "inter.broker.listener.name, not both."
        ),
    )
    log_dirs: Csv = _key(
        "log.dirs",
        ("./josefk-data",),
        doc="Comma-separated directories holding the partition logs.",
    )
    log_dir: Str = _key(
        "log.dir", "./josefk-data", doc="A single log directory, used when log.dirs is not set."
    )

    # -- topics ------------------------------------------------------------------------------
    num_partitions: Int = _key(
        "num.partitions",
        1,
        ge=1,
        le=INT_MAX,
        doc="Partitions of a topic created without a count (auto-created or -1 in CreateTopics).",
    )
    default_replication_factor: Int = _key(
        "default.replication.factor",
        1,
        ge=1,
        le=32767,
        doc="Replication factor of a topic created without one.",
    )
    auto_create_topics_enable: KBool = _key(
        "auto.create.topics.enable",
        True,
        doc=(
            "Create a topic when a client asks for metadata or produces to a name that does not "
            "exist."
        ),
    )
    delete_topic_enable: KBool = _key(
        "delete.topic.enable", True, doc="Allow DeleteTopics; false refuses it."
    )
    min_insync_replicas: Int = _key(
        "min.insync.replicas",
        1,
        ge=1,
        le=INT_MAX,
        doc=(
            "Default of the topic config min.insync.replicas: replicas that must hold an acks=all "
            "write."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    unclean_leader_election_enable: KBool = _key(
        "unclean.leader.election.enable",
        False,
        doc=(
            "Default of the topic config: elect a replica outside the ISR when no ISR member is "
            "alive (data loss possible)."
        ),
    )
    message_max_bytes: Int = _key(
        "message.max.bytes",
        1_048_588,
        ge=0,
        le=INT_MAX,
        doc="Default of the topic config max.message.bytes: the largest record batch accepted.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    compression_type: Literal["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"] = _key(
        "compression.type",
        "producer",
        doc=(
            "Default of the topic config compression.type: the codec batches are stored in "
            "(producer keeps the producer's)."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    compression_gzip_level: Int = _key(
        "compression.gzip.level",
        -1,
        doc="Default of the topic config compression.gzip.level.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    compression_lz4_level: Int = _key(
        "compression.lz4.level",
        9,
        ge=1,
        le=17,
        doc="Default of the topic config compression.lz4.level.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    compression_zstd_level: Int = _key(
        "compression.zstd.level",
        3,
        ge=-131072,
        le=22,
        doc="Default of the topic config compression.zstd.level.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )

    # -- network -----------------------------------------------------------------------------
    socket_request_max_bytes: Int = _key(
        "socket.request.max.bytes",
        104_857_600,
        ge=1,
        le=INT_MAX,
        doc="The largest request frame accepted; a larger one closes the connection.",
    )
    socket_send_buffer_bytes: Int = _key(
        "socket.send.buffer.bytes",
        -1,
        ge=-1,
        le=INT_MAX,
        doc="SO_SNDBUF of client connections; -1 (the default; Kafka's is 102400) leaves the "
        "operating system's value, which grows with the traffic.",
    )
    socket_receive_buffer_bytes: Int = _key(
        "socket.receive.buffer.bytes",
        -1,
        ge=-1,
        le=INT_MAX,
        doc="SO_RCVBUF of client connections; -1 (the default; Kafka's is 102400) leaves the "
        "operating system's value, which grows with the traffic.",
    )
    socket_listen_backlog_size: Int = _key(
        "socket.listen.backlog.size",
        50,
        ge=1,
        le=INT_MAX,
        doc="The listen backlog of each listener socket.",
    )
    connections_max_idle_ms: Int = _key(
        "connections.max.idle.ms",
        600_000,
        le=LONG_MAX,
        doc="Close a connection that has been idle this long.",
    )
    max_connections: Int = _key(
        "max.connections",
        INT_MAX,
        ge=0,
        le=INT_MAX,
        doc="The most connections the broker accepts at once; past it new connections are closed.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    # KIP-368: 0 means a SASL session never expires and is never asked to re-authenticate.
    connections_max_reauth_ms: Int = _key(
        "connections.max.reauth.ms",
        0,
        ge=0,
        le=LONG_MAX,
        doc=(
            "Lifetime of a SASL session before the client must re-authenticate (KIP-368); 0: never."
        ),
    )
    sasl_enabled_mechanisms: Csv = _key(
        "sasl.enabled.mechanisms",
        ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"),
        doc="SASL mechanisms offered on SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).",
    )
    # Empty: no authorizer, every request allowed. See AUTHORIZER_CLASS_NAMES.
    authorizer_class_name: Str = _key(
        "authorizer.class.name",
        "",
        doc=(
            "Enables ACL authorization when set to Kafka's AclAuthorizer or StandardAuthorizer "
            "class name (or josefk.AclAuthorizer); empty: every request allowed."
        ),
    )
    # Principals (User:name) that pass every check, separated by semicolons as in Kafka.
    super_users: Str = _key(
        "super.users", "", doc="Principals (User:name) allowed everything, separated by semicolons."
    )
    allow_everyone_if_no_acl_found: KBool = _key(
        "allow.everyone.if.no.acl.found",
        False,
        doc="Allow a request on a resource that no ACL names.",
    )
    sasl_mechanism_inter_broker_protocol: Str = _key(
        "sasl.mechanism.inter.broker.protocol",
        "SCRAM-SHA-512",
        doc="The SASL mechanism brokers use with each other on a SASL inter-broker listener.",
    )
    sasl_jaas_config: OptStr = _key(
        "sasl.jaas.config",
        None,
        doc=(
            "A JAAS line with the broker's own credentials for inter-broker SASL (listener- and "
            "mechanism-prefixed keys win)."
        ),
        sensitive=True,
        type="password",
    )
    max_connections_per_ip: Int = _key(
        "max.connections.per.ip",
        INT_MAX,
        ge=0,
        le=INT_MAX,
        doc="The most connections accepted from one address at once.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    # The largest frame a SASL listener reads from a client that has not authenticated yet
    # (Kafka's InvalidReceiveException limit): socket.request.max.bytes applies only after.
    sasl_server_max_receive_size: Int = _key(
        "sasl.server.max.receive.size",
        524_288,
        ge=1,
        le=INT_MAX,
        doc=(
            "The largest request a client may send on a SASL listener before it authenticated; "
            "a larger one closes the connection."
        ),
    )

    # -- TLS (SSL and SASL_SSL listeners; josefk.broker.security.tls reads the files) --------
    ssl_keystore_type: Str = _key(
        "ssl.keystore.type", "PEM", doc="Format of the keystore; josefk reads PEM only."
    )
    ssl_keystore_location: OptStr = _key(
        "ssl.keystore.location",
        None,
        doc="Path of the PEM file with the broker's certificate chain and private key.",
        dynamic=Dynamic.PER_LISTENER,
    )
    ssl_keystore_password: OptStr = _key(
        "ssl.keystore.password",
        None,
        doc="Password of the keystore file.",
        sensitive=True,
        type="password",
    )
    ssl_keystore_certificate_chain: OptStr = _key(
        "ssl.keystore.certificate.chain",
        None,
        doc="The certificate chain in PEM, inline instead of a keystore file.",
        dynamic=Dynamic.PER_LISTENER,
        sensitive=True,
        type="password",
    )
    ssl_keystore_key: OptStr = _key(
        "ssl.keystore.key",
        None,
        doc="The private key in PEM, inline instead of a keystore file.",
        dynamic=Dynamic.PER_LISTENER,
        sensitive=True,
        type="password",
    )
    ssl_key_password: OptStr = _key(
        "ssl.key.password",
        None,
        doc="Password of the private key.",
        dynamic=Dynamic.PER_LISTENER,
        sensitive=True,
        type="password",
    )
    ssl_truststore_type: Str = _key(
        "ssl.truststore.type", "PEM", doc="Format of the truststore; josefk reads PEM only."
    )
    ssl_truststore_location: OptStr = _key(
        "ssl.truststore.location",
        None,
        doc="Path of the PEM file with the certificates trusted for client authentication.",
        dynamic=Dynamic.PER_LISTENER,
    )
    ssl_truststore_password: OptStr = _key(
        "ssl.truststore.password",
        None,
        doc="Password of the truststore file.",
        sensitive=True,
        type="password",
    )
    ssl_truststore_certificates: OptStr = _key(
        "ssl.truststore.certificates",
        None,
        doc="Trusted certificates in PEM, inline instead of a truststore file.",
        dynamic=Dynamic.PER_LISTENER,
        sensitive=True,
        type="password",
    )
    ssl_client_auth: Literal["none", "requested", "required"] = _key(
        "ssl.client.auth",
        "none",
        doc="Whether TLS clients must present a certificate: none, requested or required.",
    )
    ssl_enabled_protocols: Csv = _key(
        "ssl.enabled.protocols", ("TLSv1.2", "TLSv1.3"), doc="TLS versions accepted."
    )
    ssl_protocol: Str = _key(
        "ssl.protocol", "TLSv1.3", doc="The TLS protocol the broker's own connections start from."
    )
    ssl_cipher_suites: Csv = _key(
        "ssl.cipher.suites", (), doc="Cipher suites offered; empty: the TLS library's defaults."
    )
    # A client's setting (host name verification of the broker); accepted, as Kafka does.
    ssl_endpoint_identification_algorithm: OptStr = _key(
        "ssl.endpoint.identification.algorithm",
        "https",
        doc=(
            "Host name verification of the peer when this broker is the TLS client (https, or "
            "empty for none)."
        ),
    )
    ssl_principal_mapping_rules: Str = _key(
        "ssl.principal.mapping.rules",
        "DEFAULT",
        doc=(
            "Rules that turn a client certificate's distinguished name into a principal name "
            "(Kafka's syntax)."
        ),
    )
    # A TLS client that has not finished its handshake by then is disconnected.
    ssl_handshake_timeout_ms: Int = _key(
        "josefk.ssl.handshake.timeout.ms",
        10_000,
        ge=1,
        le=INT_MAX,
        doc="josefk: close a TLS connection whose handshake has not finished in this time.",
    )
    # listener.name.<name>.ssl.* keys as given (listener_ssl_key() reads one); not a Kafka key
    # of its own: each entry is one.
    listener_ssl_configs: dict[str, str] = Field(default_factory=dict)
    # Kafka's keys accepted as inert (``inert_reason``) as given; likewise one field, each key
    # its own entry for DescribeConfigs.
    inert_configs: dict[str, str] = Field(default_factory=dict)
    max_request_partition_size_limit: Int = _key(
        "max.request.partition.size.limit",
        2000,
        ge=1,
        le=INT_MAX,
        doc="The most partitions one DescribeTopicPartitions answer holds.",
    )
    queued_max_requests: Int = _key(
        "queued.max.requests",
        500,
        ge=1,
        le=INT_MAX,
        doc=(
            "Requests read from connections but not yet handled, across the broker, before reading"
            " pauses."
        ),
    )
    queued_max_request_bytes: Int = _key(
        "queued.max.request.bytes",
        -1,
        ge=-1,
        le=LONG_MAX,
        doc="Bytes of such requests before reading pauses; -1: no byte limit.",
    )
    fetch_max_bytes: Int = _key(
        "fetch.max.bytes",
        57_671_680,
        ge=1024,
        le=INT_MAX,
        doc="The most bytes one Fetch answer carries.",
    )
    # KIP-227 fetch sessions: 0 makes the broker decline every incremental session.
    max_incremental_fetch_session_cache_slots: Int = _key(
        "max.incremental.fetch.session.cache.slots",
        1000,
        ge=0,
        le=INT_MAX,
        doc="Incremental fetch sessions (KIP-227) kept; 0 declines them all.",
    )
    # Inert (declared so): josefk runs one event loop and has no thread pools to size.
    num_network_threads: Int = _key(
        "num.network.threads",
        3,
        ge=1,
        le=INT_MAX,
        doc="Kafka's network thread count.",
        inert="one event loop does all network work",
    )
    num_io_threads: Int = _key(
        "num.io.threads",
        8,
        ge=1,
        le=INT_MAX,
        doc="Kafka's request handler thread count.",
        inert="one event loop handles every request",
    )
    background_threads: Int = _key(
        "background.threads",
        10,
        ge=1,
        le=INT_MAX,
        doc="Kafka's background thread count.",
        inert="background work runs on the event loop and its executor",
    )
    num_recovery_threads_per_data_dir: Int = _key(
        "num.recovery.threads.per.data.dir",
        2,
        ge=1,
        le=INT_MAX,
        doc=(
            "Threads per log dir that load and recover logs at start-up and flush them at shutdown."
        ),
    )

    # -- log defaults (log.*) ----------------------------------------------------------------
    log_segment_bytes: Int = _key(
        "log.segment.bytes",
        1_073_741_824,
        ge=14,
        le=INT_MAX,
        doc="Default of the topic config segment.bytes: the size at which a segment is rolled.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_roll_ms: OptInt = _key(
        "log.roll.ms",
        None,
        ge=1,
        le=LONG_MAX,
        doc=(
            "Default of the topic config segment.ms: the age at which a segment is rolled; null: "
            "log.roll.hours."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_roll_hours: Int = _key(
        "log.roll.hours",
        168,
        ge=1,
        le=INT_MAX,
        doc="log.roll.ms in hours, used when log.roll.ms is not set.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_roll_jitter_ms: OptInt = _key(
        "log.roll.jitter.ms",
        None,
        ge=0,
        le=LONG_MAX,
        doc="Default of the topic config segment.jitter.ms; null: log.roll.jitter.hours.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_roll_jitter_hours: Int = _key(
        "log.roll.jitter.hours",
        0,
        ge=0,
        le=INT_MAX,
        doc="log.roll.jitter.ms in hours, used when log.roll.jitter.ms is not set.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_retention_ms: OptInt = _key(
        "log.retention.ms",
        None,
        le=LONG_MAX,
        doc=(
            "Default of the topic config retention.ms; null: log.retention.minutes, then hours; "
            "-1: no time limit."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_retention_minutes: OptInt = _key(
        "log.retention.minutes",
        None,
        le=INT_MAX,
        doc="Retention in minutes, used when log.retention.ms is not set.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_retention_hours: Int = _key(
        "log.retention.hours",
        168,
        le=INT_MAX,
        doc="Retention in hours, used when neither log.retention.ms nor minutes is set.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_retention_bytes: Int = _key(
        "log.retention.bytes",
        -1,
        le=LONG_MAX,
        doc=(
            "Default of the topic config retention.bytes: the size a partition is trimmed to; -1: "
            "no size limit."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_retention_check_interval_ms: Int = _key(
        "log.retention.check.interval.ms",
        300_000,
        ge=1,
        le=LONG_MAX,
        doc="How often segments are checked for deletion by retention.",
    )
    log_index_size_max_bytes: Int = _key(
        "log.index.size.max.bytes",
        10_485_760,
        ge=4,
        le=INT_MAX,
        doc=(
            "Default of the topic config segment.index.bytes: the size of offset and time index "
            "files."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_index_interval_bytes: Int = _key(
        "log.index.interval.bytes",
        4096,
        ge=0,
        le=INT_MAX,
        doc="Default of the topic config index.interval.bytes: bytes between offset index entries.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_flush_interval_messages: Int = _key(
        "log.flush.interval.messages",
        LONG_MAX,
        ge=1,
        le=LONG_MAX,
        doc=(
            "Default of the topic config flush.messages: records appended before the log is "
            "fsynced."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_flush_interval_ms: OptInt = _key(
        "log.flush.interval.ms",
        None,
        ge=0,
        le=LONG_MAX,
        doc=(
            "Default of the topic config flush.ms: the longest a record stays unsynced; null: "
            "log.flush.scheduler.interval.ms."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_flush_scheduler_interval_ms: Int = _key(
        "log.flush.scheduler.interval.ms",
        LONG_MAX,
        ge=0,
        le=LONG_MAX,
        doc="How often logs are checked for a flush by time.",
    )
    log_flush_offset_checkpoint_interval_ms: Int = _key(
        "log.flush.offset.checkpoint.interval.ms",
        60_000,
        ge=0,
        le=INT_MAX,
        doc="How often the recovery-point checkpoint is written.",
    )
    log_flush_start_offset_checkpoint_interval_ms: Int = _key(
        "log.flush.start.offset.checkpoint.interval.ms",
        60_000,
        ge=0,
        le=INT_MAX,
        doc="How often the log-start-offset checkpoint is written.",
    )
    log_segment_delete_delay_ms: Int = _key(
        "log.segment.delete.delay.ms",
        60_000,
        ge=0,
        le=LONG_MAX,
        doc=(
            "Default of the topic config file.delete.delay.ms: how long a deleted segment's files "
            "stay before removal."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_cleanup_policy: Csv = _key(
        "log.cleanup.policy",
        ("delete",),
        doc="Default of the topic config cleanup.policy: delete, compact or both.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_message_timestamp_type: Literal["CreateTime", "LogAppendTime"] = _key(
        "log.message.timestamp.type",
        "CreateTime",
        doc="Default of the topic config message.timestamp.type: CreateTime or LogAppendTime.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_message_timestamp_before_max_ms: Int = _key(
        "log.message.timestamp.before.max.ms",
        LONG_MAX,
        ge=0,
        le=LONG_MAX,
        doc=(
            "Default of the topic config message.timestamp.before.max.ms: how far in the past a "
            "CreateTime timestamp may be."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_message_timestamp_after_max_ms: Int = _key(
        "log.message.timestamp.after.max.ms",
        3_600_000,
        ge=0,
        le=LONG_MAX,
        doc=(
            "Default of the topic config message.timestamp.after.max.ms: how far in the future a "
            "CreateTime timestamp may be."
        ),
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_preallocate: KBool = _key(
        "log.preallocate",
        False,
        doc="Default of the topic config preallocate: create segment files at full size.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_local_retention_ms: Int = _key(
        "log.local.retention.ms",
        -2,
        ge=-2,
        le=LONG_MAX,
        doc="Default of the topic config local.retention.ms (tiered storage).",
        inert="no tiered storage: the whole log is local",
    )
    log_local_retention_bytes: Int = _key(
        "log.local.retention.bytes",
        -2,
        ge=-2,
        le=LONG_MAX,
        doc="Default of the topic config local.retention.bytes (tiered storage).",
        inert="no tiered storage: the whole log is local",
    )
    log_cleaner_enable: KBool = _key(
        "log.cleaner.enable", True, doc="Run the log cleaner (compaction of compact topics)."
    )
    log_cleaner_threads: Int = _key(
        "log.cleaner.threads",
        1,
        ge=0,
        le=INT_MAX,
        doc="Logs cleaned at once.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_cleaner_dedupe_buffer_size: Int = _key(
        "log.cleaner.dedupe.buffer.size",
        134_217_728,
        le=LONG_MAX,
        doc="Memory for the cleaner's key map, across cleaner threads.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_cleaner_io_buffer_size: Int = _key(
        "log.cleaner.io.buffer.size",
        524_288,
        ge=0,
        le=INT_MAX,
        doc="Kafka's cleaner I/O buffer size.",
        inert="the cleaner reads whole batches through the page cache",
    )
    log_cleaner_io_buffer_load_factor: Float = _key(
        "log.cleaner.io.buffer.load.factor",
        0.9,
        doc="How full the cleaner's key map may get.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_cleaner_io_max_bytes_per_second: Float = _key(
        "log.cleaner.io.max.bytes.per.second",
        DOUBLE_MAX,
        doc="Throttle of the cleaner's reads and writes.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_cleaner_backoff_ms: Int = _key(
        "log.cleaner.backoff.ms",
        15_000,
        ge=0,
        le=LONG_MAX,
        doc="How long the cleaner sleeps when no log needs cleaning.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_cleaner_min_cleanable_ratio: Float = _key(
        "log.cleaner.min.cleanable.ratio",
        0.5,
        ge=0.0,
        le=1.0,
        doc="Default of the topic config min.cleanable.dirty.ratio.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_cleaner_delete_retention_ms: Int = _key(
        "log.cleaner.delete.retention.ms",
        86_400_000,
        ge=0,
        le=LONG_MAX,
        doc="Default of the topic config delete.retention.ms: how long tombstones are kept.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_cleaner_min_compaction_lag_ms: Int = _key(
        "log.cleaner.min.compaction.lag.ms",
        0,
        ge=0,
        le=LONG_MAX,
        doc="Default of the topic config min.compaction.lag.ms.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )
    log_cleaner_max_compaction_lag_ms: Int = _key(
        "log.cleaner.max.compaction.lag.ms",
        LONG_MAX,
        ge=1,
        le=LONG_MAX,
        doc="Default of the topic config max.compaction.lag.ms.",
        dynamic=Dynamic.CLUSTER_WIDE,
    )

    # -- consumer groups and committed offsets ----------------------------------------------
    offsets_topic_num_partitions: Int = _key(
        "offsets.topic.num.partitions",
        50,
        ge=1,
        le=INT_MAX,
        doc="Partitions of __consumer_offsets (fixed once the topic exists).",
    )
    # Kafka's default is 3. The single node keeps the offsets topic on its one replica
    # whatever this says; a cluster's controller creates the topic once this many brokers are
    # alive, as Kafka does (josefk dev-cluster sets min(3, brokers)).
    offsets_topic_replication_factor: Int = _key(
        "offsets.topic.replication.factor",
        3,
        ge=1,
        le=32767,
        doc=(
            "Replication factor of __consumer_offsets; a cluster creates it once this many brokers"
            " are alive (the single node keeps one replica)."
        ),
    )
    offsets_topic_segment_bytes: Int = _key(
        "offsets.topic.segment.bytes",
        104_857_600,
        ge=1,
        le=INT_MAX,
        doc="segment.bytes of __consumer_offsets.",
    )
    offsets_topic_compression_codec: Int = _key(
        "offsets.topic.compression.codec",
        0,
        ge=0,
        le=4,
        doc="Kafka's codec for offset commit batches.",
        inert="offset commits are written uncompressed",
    )
    offsets_load_buffer_size: Int = _key(
        "offsets.load.buffer.size",
        5_242_880,
        ge=1,
        le=INT_MAX,
        doc="Kafka's read buffer when loading __consumer_offsets.",
        inert="loading reads whole batches through the page cache",
    )
    offsets_retention_minutes: Int = _key(
        "offsets.retention.minutes",
        10_080,
        ge=1,
        le=INT_MAX,
        doc="How long a committed offset of an empty group is kept.",
    )
    offsets_retention_check_interval_ms: Int = _key(
        "offsets.retention.check.interval.ms",
        600_000,
        ge=1,
        le=LONG_MAX,
        doc="How often expired offsets are removed.",
    )
    offsets_commit_timeout_ms: Int = _key(
        "offsets.commit.timeout.ms",
        5000,
        ge=1,
        le=INT_MAX,
        doc="How long a commit waits for the offsets topic's in-sync replicas.",
    )
    group_initial_rebalance_delay_ms: Int = _key(
        "group.initial.rebalance.delay.ms",
        3000,
        ge=0,
        le=INT_MAX,
        doc="How long the first rebalance of a new group waits for more members.",
    )
    group_min_session_timeout_ms: Int = _key(
        "group.min.session.timeout.ms",
        6000,
        ge=0,
        le=INT_MAX,
        doc="The shortest session timeout a member may ask for.",
    )
    group_max_session_timeout_ms: Int = _key(
        "group.max.session.timeout.ms",
        1_800_000,
        ge=0,
        le=INT_MAX,
        doc="The longest session timeout a member may ask for.",
    )
    group_max_size: Int = _key(
        "group.max.size", INT_MAX, ge=1, le=INT_MAX, doc="The most members a group may have."
    )
    # KIP-848 consumer groups (group.protocol=consumer), with Kafka 4's defaults.
    group_consumer_heartbeat_interval_ms: Int = _key(
        "group.consumer.heartbeat.interval.ms",
        5000,
        ge=1,
        le=INT_MAX,
        doc="How often a KIP-848 consumer group member heartbeats.",
    )
    group_consumer_min_heartbeat_interval_ms: Int = _key(
        "group.consumer.min.heartbeat.interval.ms",
        5000,
        ge=1,
        le=INT_MAX,
        doc="The shortest heartbeat interval a consumer group may set.",
    )
    group_consumer_max_heartbeat_interval_ms: Int = _key(
        "group.consumer.max.heartbeat.interval.ms",
        15000,
        ge=1,
        le=INT_MAX,
        doc="The longest heartbeat interval a consumer group may set.",
    )
    group_consumer_session_timeout_ms: Int = _key(
        "group.consumer.session.timeout.ms",
        45000,
        ge=1,
        le=INT_MAX,
        doc="How long a consumer group member may go without a heartbeat.",
    )
    group_consumer_min_session_timeout_ms: Int = _key(
        "group.consumer.min.session.timeout.ms",
        45000,
        ge=1,
        le=INT_MAX,
        doc="The shortest session timeout a consumer group may set.",
    )
    group_consumer_max_session_timeout_ms: Int = _key(
        "group.consumer.max.session.timeout.ms",
        60000,
        ge=1,
        le=INT_MAX,
        doc="The longest session timeout a consumer group may set.",
    )
    group_consumer_max_size: Int = _key(
        "group.consumer.max.size",
        INT_MAX,
        ge=1,
        le=INT_MAX,
        doc="The most members a consumer group may have.",
    )
    # Names (uniform, range) or Kafka's class names of them; the first is the default.
    group_consumer_assignors: Csv = _key(
        "group.consumer.assignors",
        ("uniform", "range"),
        doc="Server-side assignors (uniform, range); the first is the default.",
    )
    group_consumer_migration_policy: Literal[
        "bidirectional", "upgrade", "downgrade", "disabled"
    ] = _key(
        "group.consumer.migration.policy",
        "bidirectional",
        doc="Which conversions between classic and consumer groups are allowed.",
    )

    # KIP-932 share groups (the rest of Kafka's group.share.* keys are inert).
    group_share_heartbeat_interval_ms: Int = _key(
        "group.share.heartbeat.interval.ms",
        5000,
        ge=1,
        le=INT_MAX,
        doc="How often a share group member heartbeats.",
    )
    group_share_session_timeout_ms: Int = _key(
        "group.share.session.timeout.ms",
        45000,
        ge=1,
        le=INT_MAX,
        doc="How long a share group member may go without a heartbeat.",
    )
    group_share_max_size: Int = _key(
        "group.share.max.size",
        200,
        ge=1,
        le=1000,
        doc="The most members a share group may have.",
    )
    group_share_record_lock_duration_ms: Int = _key(
        "group.share.record.lock.duration.ms",
        30000,
        ge=1000,
        le=3_600_000,
        doc="How long a share group member holds the records it acquired before they are "
        "released for redelivery.",
    )
    group_share_min_record_lock_duration_ms: Int = _key(
        "group.share.min.record.lock.duration.ms",
        15000,
        ge=1000,
        le=3_600_000,
        doc="The shortest acquisition lock a share group may set (the group config "
        "share.record.lock.duration.ms).",
    )
    group_share_max_record_lock_duration_ms: Int = _key(
        "group.share.max.record.lock.duration.ms",
        60000,
        ge=1000,
        le=3_600_000,
        doc="The longest acquisition lock a share group may set (the group config "
        "share.record.lock.duration.ms).",
    )
    group_share_delivery_count_limit: Int = _key(
        "group.share.delivery.count.limit",
        5,
        ge=2,
        le=10,
        doc="How many times a record of a share partition is delivered before it is archived.",
    )
    group_share_partition_max_record_locks: Int = _key(
        "group.share.partition.max.record.locks",
        2000,
        ge=100,
        le=10000,
        doc="The most records of one share partition in flight (acquired or waiting for "
        "redelivery) at once.",
    )
    # The share coordinator's topic (josefk.broker.share.coordinator): as
    # __transaction_state, a cluster's controller creates it once this many brokers live.
    share_coordinator_state_topic_num_partitions: Int = _key(
        "share.coordinator.state.topic.num.partitions",
        50,
        ge=1,
        le=INT_MAX,
        doc="Partitions of __share_group_state (fixed once the topic exists).",
    )
    share_coordinator_state_topic_replication_factor: Int = _key(
        "share.coordinator.state.topic.replication.factor",
        3,
        ge=1,
        le=32767,
        doc=(
            "Replication factor of __share_group_state; a cluster creates it once this many "
            "brokers are alive."
        ),
    )
    share_coordinator_state_topic_min_isr: Int = _key(
        "share.coordinator.state.topic.min.isr",
        2,
        ge=1,
        le=INT_MAX,
        doc="min.insync.replicas of __share_group_state.",
    )
    share_coordinator_state_topic_segment_bytes: Int = _key(
        "share.coordinator.state.topic.segment.bytes",
        104_857_600,
        ge=1,
        le=INT_MAX,
        doc="segment.bytes of __share_group_state.",
    )
    share_coordinator_snapshot_update_records_per_snapshot: Int = _key(
        "share.coordinator.snapshot.update.records.per.snapshot",
        500,
        ge=0,
        le=500,
        doc="ShareUpdate records of one share partition written before a ShareSnapshot.",
    )

    # -- idempotent producer and transactions -----------------------------------------------
    producer_id_expiration_ms: Int = _key(
        "producer.id.expiration.ms",
        86_400_000,
        ge=1,
        le=INT_MAX,
        doc="How long an idle producer id's state is kept.",
    )
    producer_id_expiration_check_interval_ms: Int = _key(
        "producer.id.expiration.check.interval.ms",
        600_000,
        ge=1,
        le=INT_MAX,
        doc="How often expired producer ids are removed.",
    )
    transactional_id_expiration_ms: Int = _key(
        "transactional.id.expiration.ms",
        604_800_000,
        ge=1,
        le=INT_MAX,
        doc="How long an idle transactional id is kept.",
    )
    transaction_max_timeout_ms: Int = _key(
        "transaction.max.timeout.ms",
        900_000,
        ge=1,
        le=INT_MAX,
        doc="The longest transaction timeout a producer may ask for.",
    )
    transaction_state_log_num_partitions: Int = _key(
        "transaction.state.log.num.partitions",
        50,
        ge=1,
        le=INT_MAX,
        doc="Partitions of __transaction_state (fixed once the topic exists).",
    )
    # Like offsets.topic.replication.factor: the single node keeps __transaction_state on its
    # one replica; a cluster's controller creates it once this many brokers are alive, with
    # min.insync.replicas = transaction.state.log.min.isr. The coordinator's timers use the
    # two cleanup intervals below (josefk.broker.txn.coordinator).
    transaction_state_log_replication_factor: Int = _key(
        "transaction.state.log.replication.factor",
        3,
        ge=1,
        le=32767,
        doc=(
            "Replication factor of __transaction_state; a cluster creates it once this many "
            "brokers are alive."
        ),
    )
    transaction_state_log_min_isr: Int = _key(
        "transaction.state.log.min.isr",
        2,
        ge=1,
        le=INT_MAX,
        doc="min.insync.replicas of __transaction_state.",
    )
    transaction_state_log_segment_bytes: Int = _key(
        "transaction.state.log.segment.bytes",
        104_857_600,
        ge=1,
        le=INT_MAX,
        doc="segment.bytes of __transaction_state.",
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: Int = _key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        10_000,
        ge=1,
        le=INT_MAX,
        doc="How often timed-out transactions are aborted.",
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: Int = _key(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        3_600_000,
        ge=1,
        le=INT_MAX,
        doc="How often expired transactional ids are removed.",
    )

    # -- purgatories -------------------------------------------------------------------------
    fetch_purgatory_purge_interval_requests: Int = _key(
        "fetch.purgatory.purge.interval.requests",
        1000,
        le=INT_MAX,
        doc="Kafka's purge interval of the fetch purgatory.",
        inert="completed waits leave the purgatory at once",
    )
    producer_purgatory_purge_interval_requests: Int = _key(
        "producer.purgatory.purge.interval.requests",
        1000,
        le=INT_MAX,
        doc="Kafka's purge interval of the produce purgatory.",
        inert="completed waits leave the purgatory at once",
    )
    delete_records_purgatory_purge_interval_requests: Int = _key(
        "delete.records.purgatory.purge.interval.requests",
        1,
        le=INT_MAX,
        doc="Kafka's purge interval of the DeleteRecords purgatory.",
        inert="completed waits leave the purgatory at once",
    )

    # -- replication (a cluster's followers and ISR) -------------------------------------------
    num_replica_fetchers: Int = _key(
        "num.replica.fetchers",
        1,
        ge=1,
        le=INT_MAX,
        doc="Kafka's fetcher threads per source broker.",
        inert="one fetcher per source broker, on the event loop",
    )
    replica_fetch_max_bytes: Int = _key(
        "replica.fetch.max.bytes",
        1_048_576,
        ge=0,
        le=INT_MAX,
        doc="Bytes a follower asks per partition in one fetch.",
    )
    replica_fetch_min_bytes: Int = _key(
        "replica.fetch.min.bytes", 1, le=INT_MAX, doc="Bytes a follower's fetch waits for."
    )
    replica_fetch_wait_max_ms: Int = _key(
        "replica.fetch.wait.max.ms",
        500,
        le=INT_MAX,
        doc="How long a follower's fetch may wait at the leader.",
    )
    replica_fetch_response_max_bytes: Int = _key(
        "replica.fetch.response.max.bytes",
        10_485_760,
        ge=0,
        le=INT_MAX,
        doc="The most bytes of one follower fetch answer.",
    )
    replica_fetch_backoff_ms: Int = _key(
        "replica.fetch.backoff.ms",
        1000,
        ge=0,
        le=INT_MAX,
        doc="How long a follower waits after a failed fetch.",
    )
    replica_lag_time_max_ms: Int = _key(
        "replica.lag.time.max.ms",
        30_000,
        le=LONG_MAX,
        doc="A follower that has not caught up for this long leaves the ISR.",
    )
    replica_socket_timeout_ms: Int = _key(
        "replica.socket.timeout.ms",
        30_000,
        le=INT_MAX,
        doc="Timeout of a follower's fetch requests.",
    )
    replica_socket_receive_buffer_bytes: Int = _key(
        "replica.socket.receive.buffer.bytes",
        65_536,
        le=INT_MAX,
        doc="Kafka's receive buffer of follower connections.",
        inert="follower connections keep the operating system's buffer size",
    )
    replica_high_watermark_checkpoint_interval_ms: Int = _key(
        "replica.high.watermark.checkpoint.interval.ms",
        5000,
        le=LONG_MAX,
        doc="How often the high watermark checkpoint is written.",
    )

    # -- josefk's own ------------------------------------------------------------------------
    metrics_enable: KBool = _key(
        "josefk.metrics.enable", True, doc="josefk: serve Prometheus metrics over HTTP."
    )
    metrics_host: Str = _key(
        "josefk.metrics.host", "127.0.0.1", doc="josefk: the address of the metrics endpoint."
    )
    metrics_port: Int = _key(
        "josefk.metrics.port",
        9404,
        ge=0,
        le=65535,
        doc="josefk: the port of the metrics endpoint (0: any free port).",
    )
    shutdown_timeout_ms: Int = _key(
        "josefk.shutdown.timeout.ms",
        30_000,
        ge=0,
        le=INT_MAX,
        doc="josefk: how long a graceful shutdown may take before connections are cut.",
    )
    uvloop_enable: KBool = _key(
        "josefk.uvloop.enable", True, doc="josefk: run on uvloop when it is installed."
    )

    # -- the cluster (josefk.etcd.endpoints set; a single node needs none of it) -------------
    broker_rack: OptStr = _key(
        "broker.rack",
        None,
        doc="The broker's rack; replica placement spreads a partition's replicas across racks.",
    )
    auto_leader_rebalance_enable: KBool = _key(
        "auto.leader.rebalance.enable",
        True,
        doc=(
            "Move leadership back to each partition's preferred replica when it is alive and in "
            "sync."
        ),
    )
    leader_imbalance_check_interval_seconds: Int = _key(
        "leader.imbalance.check.interval.seconds",
        300,
        ge=1,
        le=LONG_MAX,
        doc="How often the controller checks for leaders to move back.",
    )
    leader_imbalance_per_broker_percentage: Int = _key(
        "leader.imbalance.per.broker.percentage",
        10,
        ge=0,
        le=100,
        doc="The share of a broker's partitions led elsewhere that triggers moving leaders back.",
    )
    etcd_endpoints: OptStr = _key(
        "josefk.etcd.endpoints",
        None,
        doc=(
            "josefk: comma-separated host:port of the etcd servers that hold the cluster's "
            "metadata; null: a single node."
        ),
    )
    etcd_prefix: Str = _key(
        "josefk.etcd.prefix", "/josefk", doc="josefk: the etcd key prefix of this cluster."
    )
    # The broker's etcd lease: how long a dead broker stays registered, and so the floor of
    # failover time. 6 s by default; 2000 brings failover under 3 s on a quiet network.
    etcd_session_timeout_ms: Int = _key(
        "josefk.etcd.session.timeout.ms",
        6000,
        ge=1000,
        le=INT_MAX,
        doc="josefk: the broker's etcd lease; how long a dead broker stays registered.",
    )

    @property
    def super_user_principals(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.super_users.split(";") if p.strip())

    @property
    def cluster_mode(self) -> bool:
        """Brokers that share metadata in etcd, as opposed to the embedded single node."""
        return bool(self.etcd_endpoints)

    # Where each explicitly set key came from ("file server.properties", "env JOSEFK_X", ...).
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)
    # listener.name.<listener>.<key> settings josefk reads (is_listener_property), the
    # listener part lower-cased as Kafka writes it.
    _listener_properties: dict[str, str] = PrivateAttr(default_factory=dict)
    _warnings: tuple[str, ...] = PrivateAttr(default=())

    # -- validation --------------------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _resolve_synonyms(cls, data: Any) -> Any:
        """Fold Kafka's synonym pairs before field validation.

        ``broker.id`` alone sets ``node.id``; both set must agree. ``log.dirs`` wins over
        ``log.dir``, and ``log.dir`` alone fills ``log.dirs``.
        """
        if not isinstance(data, Mapping):
            return data
        values = dict(data)
        # Per-listener TLS keys have names of their own; they travel in one field.
        prefixed = {k: v for k, v in values.items() if isinstance(k, str) and listener_ssl_key(k)}
        if prefixed:
            for k in prefixed:
                del values[k]
            values["listener_ssl_configs"] = {**values.get("listener_ssl_configs", {}), **prefixed}
        inert = {
            k: v
            for k, v in values.items()
            if isinstance(k, str) and k not in _FIELD_BY_KEY and is_accepted_unused(k)
        }
        if inert:
            for k in inert:
                del values[k]
            values["inert_configs"] = {**values.get("inert_configs", {}), **inert}

        def pick(alias: str, name: str) -> tuple[str | None, Any]:
            for k in (alias, name):
                if k in values and values[k] is not None:
                    return k, values[k]
            return None, None

        node_key, node = pick("node.id", "node_id")
        broker_key, broker = pick("broker.id", "broker_id")
        if broker_key is not None and (not isinstance(broker, str) or broker.strip()):
            if node_key is None:
                values["node.id"] = broker
            elif str(node).strip() != str(broker).strip():
                raise BrokerConfigError(
                    [
                        ConfigProblem(
                            "broker.id",
                            broker,
                            f"differs from node.id={node}; set one of them, or both equal",
                        )
                    ]
                )
        dirs_key, _ = pick("log.dirs", "log_dirs")
        dir_key, single = pick("log.dir", "log_dir")
        if dirs_key is None and dir_key is not None:
            values["log.dirs"] = single
        return values

    @field_validator("ssl_keystore_type", "ssl_truststore_type")
    @classmethod
    def _check_store_type(cls, value: str) -> str:
        if value.upper() != "PEM":
            raise ValueError(pem_only_reason(value))
        return "PEM"

    @field_validator("log_cleanup_policy")
    @classmethod
    def _check_policy(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        policies = tuple(sorted({p.lower() for p in value}))
        unknown = [p for p in policies if p not in ("compact", "delete")]
        if unknown:
            raise ValueError(f"unknown policy {unknown[0]!r}; expected delete, compact or both")
        return policies

    @field_validator("compression_gzip_level")
    @classmethod
    def _check_gzip_level(cls, value: int) -> int:
        if value != -1 and not 1 <= value <= 9:
            raise ValueError("must be -1 (the codec's default) or between 1 and 9")
        return value

    @field_validator("log_dirs")
    @classmethod
    def _check_log_dirs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one log dir is needed")
        if len(set(value)) != len(value):
            raise ValueError("a log dir is listed twice")
        return value

    @field_validator("compression_type", "log_message_timestamp_type", mode="before")
    @classmethod
    def _strip_literal(cls, value: object) -> object:
        return _strip(value)

    @field_validator("listener_ssl_configs")
    @classmethod
    def _check_listener_ssl_configs(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            parsed = listener_ssl_key(key)
            if parsed is None:
                raise ValueError(f"{key} is not a listener.name.<name>.ssl.* key josefk knows")
            if key.split(".")[2] != key.split(".")[2].lower():
                raise ValueError(f"{key}: the listener name in the key is written in lower case")
            if parsed[1].endswith(".type") and str(text).strip().upper() != "PEM":
                raise ValueError(f"{key}: {pem_only_reason(str(text).strip())}")
        return {key: str(text).strip() for key, text in value.items()}

    @model_validator(mode="after")
    def _check_consistency(self) -> BrokerConfig:
        problems = list(self._consistency_problems())
        if problems:
            raise BrokerConfigError(problems)
        if self.broker_id != self.node_id:
            # Keep the two synonyms equal so either name reads the same id.
            object.__setattr__(self, "broker_id", self.node_id)
        return self

    def _consistency_problems(self) -> Iterator[ConfigProblem]:
        listeners = self.listeners
        if not listeners:
            yield ConfigProblem("listeners", "", "at least one listener is needed")
        names = [listener.name for listener in listeners]
        for name in sorted({n for n in names if names.count(n) > 1}):
            yield ConfigProblem("listeners", listeners, f"listener name {name} is used twice")
        ports = [listener.port for listener in listeners if listener.port != 0]
        for port in sorted({p for p in ports if ports.count(p) > 1}):
            yield ConfigProblem("listeners", listeners, f"port {port} is used twice")
        protocol_map = self.listener_security_protocol_map
        for protocol in protocol_map.values():
            if protocol not in SECURITY_PROTOCOLS:
                yield ConfigProblem(
                    "listener.security.protocol.map",
                    ",".join(f"{k}:{v}" for k, v in protocol_map.items()),
                    f"unknown security protocol {protocol}",
                )
        for listener in listeners:
            mapped = protocol_map.get(listener.name)
            if mapped is None:
                yield ConfigProblem(
                    "listeners",
                    listeners,
                    f"no security protocol for listener {listener.name} in "
                    "listener.security.protocol.map",
                )
        yield from self._tls_problems()
        for mechanism in self.sasl_enabled_mechanisms:
            if mechanism not in SASL_MECHANISMS:
                yield ConfigProblem(
                    "sasl.enabled.mechanisms",
                    ",".join(self.sasl_enabled_mechanisms),
                    f"mechanism {mechanism} is not supported; josefk offers "
                    + ", ".join(SASL_MECHANISMS),
                )
        if self.authorizer_class_name and self.authorizer_class_name not in AUTHORIZER_CLASS_NAMES:
            yield ConfigProblem(
                "authorizer.class.name",
                self.authorizer_class_name,
                "unknown authorizer; josefk's ACL authorizer answers to "
                + ", ".join(AUTHORIZER_CLASS_NAMES),
            )
        for principal in self.super_user_principals:
            if not re.fullmatch(r"[^:]+:.+", principal):
                yield ConfigProblem(
                    "super.users", self.super_users, f"{principal!r} is not a Type:name principal"
                )
        if self.advertised_listeners is not None:
            known = set(names)
            for listener in self.advertised_listeners:
                if listener.name not in known:
                    yield ConfigProblem(
                        "advertised.listeners",
                        self.advertised_listeners,
                        f"listener {listener.name} is not in listeners",
                    )
                if listener.host in ("0.0.0.0", "::"):
                    yield ConfigProblem(
                        "advertised.listeners",
                        self.advertised_listeners,
                        f"{listener} advertises the non-routable address {listener.host}",
                    )
        if (
            self.inter_broker_listener_name is not None
            and self.inter_broker_listener_name.upper() not in names
        ):
            yield ConfigProblem(
                "inter.broker.listener.name",
                self.inter_broker_listener_name,
                "is not the name of a listener",
            )
        yield from self._inter_broker_problems()
        if not self.client_listeners():
            yield ConfigProblem(
                "listeners",
                listeners,
                "every listener is a controller listener; none serve clients",
            )
        yield from self._consumer_group_problems()
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            yield ConfigProblem(
                "group.min.session.timeout.ms",
                self.group_min_session_timeout_ms,
                f"is above group.max.session.timeout.ms={self.group_max_session_timeout_ms}",
            )
        yield from self._topic_default_problems()
        if self.metrics_enable and self.metrics_port != 0:
            for listener in listeners:
                if listener.port == self.metrics_port:
                    yield ConfigProblem(
                        "josefk.metrics.port",
                        self.metrics_port,
                        f"is also the port of listener {listener}",
                    )

    def _tls_problems(self) -> Iterator[ConfigProblem]:
        """Listener-prefixed keys name a listener; a TLS listener has a keystore."""
        names = {listener.name for listener in self.listeners}
        for key in self.listener_ssl_configs:
            parsed = listener_ssl_key(key)
            if parsed is not None and parsed[0] not in names:
                yield ConfigProblem(key, self.listener_ssl_configs[key], "names no listener")
        for listener in self.listeners:
            if self.security_protocol_of(listener.name) not in TLS_SECURITY_PROTOCOLS:
                continue
            settings = self.ssl_settings(listener.name)
            prefix = f"listener.name.{listener.name.lower()}."
            if not settings.get("ssl.keystore.location") and not settings.get(
                "ssl.keystore.certificate.chain"
            ):
                yield ConfigProblem(
                    "ssl.keystore.location",
                    None,
                    f"listener {listener.name} serves TLS and needs a keystore: set "
                    f"ssl.keystore.location (or {prefix}ssl.keystore.location), or "
                    "ssl.keystore.certificate.chain and ssl.keystore.key",
                )

    def ssl_settings(self, listener_name: str) -> dict[str, str]:
        """The effective ``ssl.*`` settings of one listener, as strings: the broker-wide key,
        overridden by ``listener.name.<name>.ssl.*`` where set (Kafka's rule)."""
        settings: dict[str, str] = {}
        for key in SSL_KEYS:
            text = _format(getattr(self, _FIELD_BY_KEY[key]))
            if text is not None:
                settings[key] = text
        prefix = f"listener.name.{listener_name.lower()}."
        for key, text in self.listener_ssl_configs.items():
            if key.startswith(prefix):
                settings[key[len(prefix) :]] = text
        return settings

    def _inter_broker_problems(self) -> Iterator[ConfigProblem]:
        protocol = self.security_inter_broker_protocol
        if protocol is not None and protocol.strip():
            if self.inter_broker_listener_name is not None:
                yield ConfigProblem(
                    "security.inter.broker.protocol",
                    protocol,
                    "set either it or inter.broker.listener.name, not both (as Kafka)",
                )
            elif protocol.strip().upper() not in SECURITY_PROTOCOLS:
                yield ConfigProblem(
                    "security.inter.broker.protocol",
                    protocol,
                    "expected one of " + ", ".join(SECURITY_PROTOCOLS),
                )
            elif protocol.strip().upper() not in {listener.name for listener in self.listeners}:
                yield ConfigProblem(
                    "security.inter.broker.protocol",
                    protocol,
                    f"no listener is named {protocol.strip().upper()}: brokers talk to each "
                    "other on the listener named after this protocol (as Kafka); name one so, "
                    "or set inter.broker.listener.name instead",
                )
        mechanism = self.sasl_mechanism_inter_broker_protocol
        # A single node opens no connection to another broker: nothing to check there.
        if (
            self.cluster_mode
            and self.inter_broker_security_protocol().startswith("SASL_")
            and mechanism not in self.sasl_enabled_mechanisms
        ):
            yield ConfigProblem(
                "sasl.mechanism.inter.broker.protocol",
                mechanism,
                "must be one of sasl.enabled.mechanisms when brokers talk SASL to each "
                "other (" + ",".join(self.sasl_enabled_mechanisms) + ")",
            )

    def _consumer_group_problems(self) -> Iterator[ConfigProblem]:
        """Kafka's checks of the group.consumer.* settings: each value within its min and
        max, the heartbeat interval below the session timeout, known assignors."""
        for name, low, value, high in (
            (
                "group.consumer.heartbeat.interval.ms",
                self.group_consumer_min_heartbeat_interval_ms,
                self.group_consumer_heartbeat_interval_ms,
                self.group_consumer_max_heartbeat_interval_ms,
            ),
            (
                "group.consumer.session.timeout.ms",
                self.group_consumer_min_session_timeout_ms,
                self.group_consumer_session_timeout_ms,
                self.group_consumer_max_session_timeout_ms,
            ),
        ):
            if not low <= value <= high:
                yield ConfigProblem(name, value, f"must be between {low} and {high}")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            yield ConfigProblem(
                "group.consumer.heartbeat.interval.ms",
                self.group_consumer_heartbeat_interval_ms,
                "must be below group.consumer.session.timeout.ms",
            )
        for assignor in self.group_consumer_assignors:
            short = assignor.rsplit(".", 1)[-1].lower().removesuffix("assignor")
            if short not in ("uniform", "range"):
                yield ConfigProblem(
                    "group.consumer.assignors", assignor, "is not a known assignor (uniform, range)"
                )

    def _topic_default_problems(self) -> Iterator[ConfigProblem]:
        """Broker values that would make an invalid topic default stop start-up here, named
        by the broker key, rather than fail the first CreateTopics."""
        try:
            self.default_log_config()
        except InvalidConfigError as exc:
            present = self.log_properties()
            for candidate in BROKER_DEFAULT_KEYS.get(exc.key, ()):
                if candidate.key in present:
                    reason = f"as the default of topic config {exc.key}: {exc.reason}"
                    yield ConfigProblem(candidate.key, present[candidate.key], reason)
                    return
            yield ConfigProblem(exc.key, exc.value, exc.reason)

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_properties(
        cls,
        properties: Mapping[str, str],
        *,
        origins: Mapping[str, str] | None = None,
        warnings: tuple[str, ...] = (),
    ) -> BrokerConfig:
        """Build from Kafka-named string properties; every key must be a BrokerConfig key.

        Unknown keys are the loader's business (it warns and drops them). Raises
        BrokerConfigError listing every invalid key with its value and the reason.
        """
        listener_properties = {k: v for k, v in properties.items() if is_listener_property(k)}
        unknown = [
            key
            for key in properties
            if key not in _FIELD_BY_KEY
            and listener_ssl_key(key) is None
            and key not in listener_properties
            and not is_accepted_unused(key)
        ]
        if unknown:
            raise BrokerConfigError(
                [ConfigProblem(key, properties[key], "unknown broker config") for key in unknown]
            )
        values = {k: v for k, v in properties.items() if k not in listener_properties}
        try:
            config = cls.model_validate(values)
        except ValidationError as exc:
            error = _translate(exc, properties)
            raise BrokerConfigError([_with_origin(p, origins) for p in error.problems]) from None
        except BrokerConfigError as exc:
            raise BrokerConfigError([_with_origin(p, origins) for p in exc.problems]) from None
        config._origins = dict(origins or {})
        config._warnings = tuple(warnings)
        config._listener_properties = {
            _lower_listener(key): value for key, value in listener_properties.items()
        }
        return config

    # -- provenance (DescribeConfigs) -------------------------------------------------------

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the loader noticed without failing: unknown keys, environment names, ..."""
        return self._warnings

    def origin(self, key: str) -> str | None:
        """Where an explicitly set key came from, or None when it holds its default."""
        return self._origins.get(key)

    def is_default(self, key: str) -> bool:
        if key in self.listener_ssl_configs or key in self.inert_configs:
            return False
        name = _FIELD_BY_KEY[key]
        return key not in self._origins and name not in self.model_fields_set

    def value_of(self, key: str) -> str | None:
        """The Kafka string form of one key's value (None for an unset nullable key)."""
        if listener_ssl_key(key) is not None:
            return self.listener_ssl_configs.get(key)
        if key not in _FIELD_BY_KEY:
            return self.inert_configs.get(key)
        return _format(getattr(self, _FIELD_BY_KEY[key]))

    def describe_entries(self) -> list[ConfigEntry]:
        """Every key with its value and whether it is a default: the static layer only
        (josefk.broker.configs describes the dynamic ones over it).
        """
        return [
            ConfigEntry(
                name=key,
                value=self.value_of(key),
                source="DEFAULT_CONFIG" if self.is_default(key) else "STATIC_BROKER_CONFIG",
                origin=self.origin(key),
                sensitive=is_sensitive_key(key),
            )
            for key in self._keys()
        ]

    def _keys(self) -> tuple[str, ...]:
        return (
            *BROKER_CONFIG_KEYS,
            *sorted(self.listener_ssl_configs),
            *sorted(self.inert_configs),
        )

    def inert_notes(self) -> list[str]:
        """A line per inert key set: accepted, and why it changes nothing here."""
        inert = {
            key: self.value_of(key)
            for key, declared in _MODEL_KEYS.items()
            if declared.support is Support.INERT and not self.is_default(key)
        }
        inert.update(self.inert_configs)
        return [
            f"{key}={value} accepted; it has no effect in josefk: {inert_reason(key)}"
            for key, value in sorted(inert.items())
        ]

    def to_properties(self, *, include_defaults: bool = True) -> dict[str, str]:
        """Kafka-named string properties; unset nullable keys are left out."""
        result: dict[str, str] = {}
        for key in self._keys():
            if not include_defaults and self.is_default(key):
                continue
            text = self.value_of(key)
            if text is not None:
                result[key] = text
        return result

    # -- derived values ----------------------------------------------------------------------

    @property
    def retention_ms(self) -> int:
        """Kafka's precedence: log.retention.ms, then minutes, then hours; negative = -1."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * _MS_PER_MINUTE
        else:
            millis = self.log_retention_hours * _MS_PER_HOUR
        return -1 if millis < 0 else millis

    @property
    def roll_ms(self) -> int:
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * _MS_PER_HOUR

    @property
    def roll_jitter_ms(self) -> int:
        if self.log_roll_jitter_ms is not None:
            return self.log_roll_jitter_ms
        return self.log_roll_jitter_hours * _MS_PER_HOUR

    @property
    def flush_interval_ms(self) -> int:
        """``log.flush.interval.ms``, falling back to the scheduler interval as Kafka does."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * _MS_PER_MINUTE

    def security_protocol(self, listener_name: str) -> str | None:
        return self.listener_security_protocol_map.get(listener_name.upper())

    def security_protocol_of(self, listener_name: str) -> str:
        return self.listener_security_protocol_map.get(listener_name, "PLAINTEXT")

    def listener_property(self, key: str) -> str | None:
        """A ``listener.name.<listener>.<...>`` value (listener in any case), or None."""
        return self._listener_properties.get(_lower_listener(key))

    def sasl_jaas_config_for(self, listener_name: str, mechanism: str) -> str | None:
        """Kafka's lookup of a listener's JAAS line: the listener- and mechanism-prefixed
        key, else ``sasl.jaas.config``."""
        prefixed = f"listener.name.{listener_name}.{mechanism.lower()}.sasl.jaas.config"
        return self.listener_property(prefixed) or self.sasl_jaas_config

    def inter_broker_listener(self) -> str | None:
        """The listener brokers reach each other on: ``inter.broker.listener.name``, else the
        one named after ``security.inter.broker.protocol`` (Kafka's rule), else None: the
        first listener a broker registered."""
        if self.inter_broker_listener_name:
            return self.inter_broker_listener_name.upper()
        protocol = (self.security_inter_broker_protocol or "").strip().upper()
        return protocol or None

    def inter_broker_security_protocol(self) -> str:
        """The security protocol of the inter-broker listener (its protocol map entry)."""
        name = self.inter_broker_listener()
        if name is None:
            listeners = self.client_listeners()
            if not listeners:
                return "PLAINTEXT"
            name = listeners[0].name
        return self.listener_security_protocol_map.get(name, name)

    def client_listeners(self) -> tuple[Listener, ...]:
        """The listeners that serve clients: all but ``controller.listener.names``."""
        controllers = {name.upper() for name in self.controller_listener_names}
        return tuple(listener for listener in self.listeners if listener.name not in controllers)

    def effective_advertised_listeners(
        self,
        *,
        bound: Mapping[str, int] | None = None,
        hostname: Callable[[], str] = socket.getfqdn,
    ) -> tuple[Listener, ...]:
        """What Metadata tells clients: ``advertised.listeners``, else the client listeners.

        ``bound`` maps a listener name to the port it actually bound (for port 0), used when
        the advertised entry says port 0 too. A listener bound to every interface is
        advertised with ``hostname()`` (Kafka uses the canonical host name) rather than the
        unroutable 0.0.0.0.
        """
        source = self.advertised_listeners
        if source is None:
            source = self.client_listeners()
        ports = dict(bound or {})
        result: list[Listener] = []
        for listener in source:
            advertised = listener
            if advertised.port == 0 and advertised.name in ports:
                advertised = advertised.with_port(ports[advertised.name])
            if advertised.binds_all_interfaces:
                advertised = advertised.with_host(hostname())
            result.append(advertised)
        return tuple(result)

    def log_properties(self) -> dict[str, str]:
        """The broker keys that give topic defaults (topic.py's synonym table), as strings.

        Unset nullable keys (``log.retention.ms``, ``log.roll.ms``) are absent, so the table's
        precedence falls through to the next unit, as Kafka's does.
        """
        wanted = _TOPIC_DEFAULT_BROKER_KEYS
        return {key: value for key, value in self.to_properties().items() if key in wanted}

    def default_log_config(self) -> LogConfig:
        """The LogConfig a new topic starts from: Kafka's topic defaults under this broker's
        ``log.*`` settings (``segment.bytes`` <- ``log.segment.bytes``, ``retention.ms`` <-
        ``log.retention.ms``/``minutes``/``hours``, ...), per topic.py's synonym table.
        """
        return LogConfig.from_broker_properties(self.log_properties())


def _lower_listener(key: str) -> str:
    """``listener.name.SASL_PLAINTEXT.x`` -> ``listener.name.sasl_plaintext.x``: Kafka writes
    the listener part lower-case; josefk accepts either."""
    match = _LISTENER_KEY.match(key)
    if match is None:
        return key
    return f"listener.name.{match.group(1).lower()}.{match.group(2)}"


_format = format_value


def is_sensitive_key(key: str) -> bool:
    """Whether a broker key's value is never shown (Kafka's PASSWORD type), by its
    declaration; a listener-prefixed key as its base key. A name nothing declares is taken
    as sensitive, as Kafka takes a name of unknown type."""
    parsed = listener_ssl_key(key)
    base = parsed[1] if parsed else key
    match = _LISTENER_KEY.match(base)
    if match is not None and _LISTENER_SUFFIXES.match(match.group(2)):
        base = "sasl.jaas.config"  # listener.name.<l>.<mechanism>.sasl.jaas.config
    declared = BROKER_KEYS.get(base)
    if declared is None:
        return not is_accepted_unused(base)
    return declared.sensitive


def pem_only_reason(store_type: str) -> str:
    """Why a JKS or PKCS12 store is refused, and how to make the PEM file josefk reads."""
    return (
        f"store type {store_type} is not supported: josefk reads PEM files (set the type to "
        "PEM). Convert a JKS keystore with `keytool -importkeystore -srckeystore server.jks "
        "-destkeystore server.p12 -deststoretype PKCS12`, then a PKCS12 file with `openssl "
        "pkcs12 -in server.p12 -out server.pem` (the key stays encrypted: give its password "
        "as ssl.key.password; add -noenc to write it unencrypted)"
    )


def _with_origin(problem: ConfigProblem, origins: Mapping[str, str] | None) -> ConfigProblem:
    origin = (origins or {}).get(problem.key)
    if problem.origin or origin is None or origin.startswith("--"):
        return problem  # a flag names itself already
    return ConfigProblem(problem.key, problem.value, problem.reason, origin)


def _translate(exc: ValidationError, properties: Mapping[str, object]) -> BrokerConfigError:
    problems: list[ConfigProblem] = []
    seen: set[str] = set()
    for error in exc.errors():
        loc = error.get("loc", ())
        key = str(loc[0]) if loc else "?"
        key = _KEY_BY_FIELD.get(key, key)
        if key in seen:
            continue
        seen.add(key)
        reason = str(error.get("msg", "invalid"))
        # pydantic prefixes messages of ValueErrors raised by our validators.
        reason = reason.removeprefix("Value error, ")
        value = properties.get(key, error.get("input"))
        problems.append(ConfigProblem(key, value, reason))
    return BrokerConfigError(problems)


_KEY_BY_FIELD: Final[dict[str, str]] = {
    name: str(info.alias)
    for name, info in BrokerConfig.model_fields.items()
    if info.alias is not None
}
_FIELD_BY_KEY: Final[dict[str, str]] = {key: name for name, key in _KEY_BY_FIELD.items()}
BROKER_CONFIG_KEYS: Final[tuple[str, ...]] = tuple(sorted(_FIELD_BY_KEY))
_TOPIC_DEFAULT_BROKER_KEYS: Final = frozenset(
    candidate.key for candidates in BROKER_DEFAULT_KEYS.values() for candidate in candidates
)
# Every broker key josefk declares: BrokerConfig's fields and Kafka's keys accepted as inert.
_MODEL_KEYS: Final[dict[str, ConfigKey]] = keys_of(BrokerConfig)
BROKER_KEYS: Final[dict[str, ConfigKey]] = {**_MODEL_KEYS, **INERT_KEYS}
