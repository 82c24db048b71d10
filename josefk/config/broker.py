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
- josefk's own settings carry a ``josefk.`` prefix (``josefk.metrics.port`` = 9404, ...).

Keys accepted for compatibility and documented as unused: ``num.network.threads``,
``num.io.threads``, ``background.threads`` (one event loop does all the work),
``replica.*`` (until replication lands), the KRaft controller keys and a list of prefixes
(``controller.``, ``zookeeper.``, ...) that a Kafka ``server.properties`` often carries.

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

from josefk.config.topic import BROKER_DEFAULT_KEYS, InvalidConfigError, LogConfig

__all__ = [
    "ACCEPTED_UNUSED_KEYS",
    "ACCEPTED_UNUSED_PREFIXES",
    "BROKER_CONFIG_KEYS",
    "INT_MAX",
    "LONG_MAX",
    "REFUSED_KEYS",
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
# The sasl.* keys josefk honours; every other one is still refused by name.
_SUPPORTED_SASL_KEYS: Final = frozenset(
    {"sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config"}
)
# ``listener.name.<listener>.<key>``: the per-listener keys josefk reads, by the <key> part
# (see ``listener_property``); every other listener-prefixed key is still refused.
_LISTENER_KEY: Final = re.compile(r"^listener\.name\.([^.]+)\.(.+)$")
_LISTENER_SUFFIXES: Final = re.compile(
    r"^(?:plain|scram-sha-256|scram-sha-512)\.sasl\.jaas\.config$"
)
# Values never shown (DescribeConfigs answers null for them).
SENSITIVE_KEYS: Final = frozenset({"sasl.jaas.config"})

# The ssl.* keys josefk honours, each also as ``listener.name.<lowercase name>.<key>``; every
# other ssl.* key is refused by name. The SSL engine's own choices of a JVM (key manager,
# provider, engine factory) have no counterpart here.
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
# Values a client must not read back (DescribeConfigs answers null for them).
SENSITIVE_SSL_KEYS: Final = frozenset(
    {"ssl.keystore.password", "ssl.keystore.key", "ssl.key.password", "ssl.truststore.password"}
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


def _key(alias: str, default: Any, **constraints: Any) -> Any:
    return Field(default=default, alias=alias, **constraints)


_DEFAULT_PROTOCOL_MAP: Final = (
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
)

# Keys a Kafka server.properties may carry that josefk accepts without a warning and ignores.
# Keys of a Kafka server.properties whose job josefk does another way (KRaft's quorum and
# roles, ZooKeeper, protocol versions): a Kafka config file loads unchanged, they are
# accepted and have no effect, as their purpose is met by josefk's own design (etcd for the
# cluster's metadata, one protocol version set per release).
ACCEPTED_UNUSED_KEYS: Final = frozenset(
    {
        "process.roles",
        "inter.broker.protocol.version",
        "reserved.broker.max.id",
        "initial.broker.registration.timeout.ms",
        "broker.heartbeat.interval.ms",
        "broker.session.timeout.ms",
        "node.id.generation.enable",
        "eligible.leader.replicas.enable",
        "unstable.api.versions.enable",
        "unstable.feature.versions.enable",
    }
)
ACCEPTED_UNUSED_PREFIXES: Final = (
    "controller.",
    "zookeeper.",
    "metadata.",
    "confluent.",
    "log.dir.failure.",
    # Tuning of group protocols josefk does not offer (KIP-848 consumer groups, share
    # groups): clients that ask for them are told so by ApiVersions and use the classic
    # protocol; Kafka's quickstart file sets some of these.
    "group.consumer.",
    "group.share.",
    "share.",
    "group.coordinator.",
)

# Prefixes of Kafka capabilities josefk does not have: a key under one of them stops start-up,
# naming the key, rather than being accepted and dropped (a user who set ssl.keystore.* must
# not run a plaintext broker believing it encrypts).
_MISSING_CAPABILITIES: Final[tuple[tuple[str, str], ...]] = (
    ("ssl.", "this TLS setting is not supported"),
    ("sasl.", "this SASL setting is not supported yet (security release)"),
    (
        "listener.name.",
        "per-listener settings other than ssl.* and <mechanism>.sasl.jaas.config are not supported",
    ),
    ("principal.builder.", "authentication is not supported yet"),
    ("connection.failed.authentication.", "authentication is not supported yet"),
    ("delegation.token.", "delegation tokens are not supported"),
    ("password.encoder.", "dynamic broker passwords are not supported"),
    ("quota.", "client quotas are not supported yet"),
    ("client.quota.", "client quotas are not supported yet"),
    ("remote.log.", "tiered storage is not supported"),
    ("metric.reporters", "josefk exports Prometheus metrics (josefk.metrics.*), not JMX reporters"),
    ("kafka.metrics.", "josefk exports Prometheus metrics (josefk.metrics.*), not JMX reporters"),
    ("metrics.", "josefk exports Prometheus metrics (josefk.metrics.*), not JMX reporters"),
)


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
    """Why ``key=value`` cannot be honoured, or None."""
    if key in REFUSED_KEYS and value.strip():
        return REFUSED_KEYS[key]
    if (
        key in _SUPPORTED_SASL_KEYS
        or key in SSL_KEYS
        or listener_ssl_key(key) is not None
        or is_listener_property(key)
    ):
        return None
    for prefix, reason in _MISSING_CAPABILITIES:
        if key.startswith(prefix):
            return f"{reason}; josefk refuses it rather than ignoring it"
    return None


def is_listener_property(key: str) -> bool:
    """A ``listener.name.<listener>.<key>`` josefk reads (not refused, not unknown)."""
    match = _LISTENER_KEY.match(key)
    return match is not None and _LISTENER_SUFFIXES.match(match.group(2)) is not None


def is_accepted_unused(key: str) -> bool:
    return key in ACCEPTED_UNUSED_KEYS or key.startswith(ACCEPTED_UNUSED_PREFIXES)


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
    node_id: Int = _key("node.id", 1, ge=0, le=INT_MAX)
    broker_id: OptInt = _key("broker.id", None, ge=0, le=INT_MAX)
    listeners: Listeners = _key("listeners", (Listener("PLAINTEXT", "127.0.0.1", 9092),))
    advertised_listeners: OptListeners = _key("advertised.listeners", None)
    listener_security_protocol_map: ProtocolMap = _key(
        "listener.security.protocol.map", _DEFAULT_PROTOCOL_MAP
    )
    controller_listener_names: Csv = _key("controller.listener.names", ())
    inter_broker_listener_name: OptStr = _key("inter.broker.listener.name", None)
    # Kafka: the inter-broker listener is the one named after this protocol, unless
    # inter.broker.listener.name is set (both set is an error).
    security_inter_broker_protocol: OptStr = _key("security.inter.broker.protocol", None)
    log_dirs: Csv = _key("log.dirs", ("./josefk-data",))
    log_dir: Str = _key("log.dir", "./josefk-data")

    # -- topics ------------------------------------------------------------------------------
    num_partitions: Int = _key("num.partitions", 1, ge=1, le=INT_MAX)
    default_replication_factor: Int = _key("default.replication.factor", 1, ge=1, le=32767)
    auto_create_topics_enable: KBool = _key("auto.create.topics.enable", True)
    delete_topic_enable: KBool = _key("delete.topic.enable", True)
    min_insync_replicas: Int = _key("min.insync.replicas", 1, ge=1, le=INT_MAX)
    unclean_leader_election_enable: KBool = _key("unclean.leader.election.enable", False)
    message_max_bytes: Int = _key("message.max.bytes", 1_048_588, ge=0, le=INT_MAX)
    compression_type: Literal["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"] = _key(
        "compression.type", "producer"
    )
    compression_gzip_level: Int = _key("compression.gzip.level", -1)
    compression_lz4_level: Int = _key("compression.lz4.level", 9, ge=1, le=17)
    compression_zstd_level: Int = _key("compression.zstd.level", 3, ge=-131072, le=22)

    # -- network -----------------------------------------------------------------------------
    socket_request_max_bytes: Int = _key("socket.request.max.bytes", 104_857_600, ge=1, le=INT_MAX)
    socket_send_buffer_bytes: Int = _key("socket.send.buffer.bytes", 102_400, ge=-1, le=INT_MAX)
    socket_receive_buffer_bytes: Int = _key(
        "socket.receive.buffer.bytes", 102_400, ge=-1, le=INT_MAX
    )
    socket_listen_backlog_size: Int = _key("socket.listen.backlog.size", 50, ge=1, le=INT_MAX)
    connections_max_idle_ms: Int = _key("connections.max.idle.ms", 600_000, le=LONG_MAX)
    max_connections: Int = _key("max.connections", INT_MAX, ge=0, le=INT_MAX)
    # KIP-368: 0 means a SASL session never expires and is never asked to re-authenticate.
    connections_max_reauth_ms: Int = _key("connections.max.reauth.ms", 0, ge=0, le=LONG_MAX)
    sasl_enabled_mechanisms: Csv = _key(
        "sasl.enabled.mechanisms", ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
    )
    # Empty: no authorizer, every request allowed. See AUTHORIZER_CLASS_NAMES.
    authorizer_class_name: Str = _key("authorizer.class.name", "")
    # Principals (User:name) that pass every check, separated by semicolons as in Kafka.
    super_users: Str = _key("super.users", "")
    allow_everyone_if_no_acl_found: KBool = _key("allow.everyone.if.no.acl.found", False)
    sasl_mechanism_inter_broker_protocol: Str = _key(
        "sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"
    )
    sasl_jaas_config: OptStr = _key("sasl.jaas.config", None)
    max_connections_per_ip: Int = _key("max.connections.per.ip", INT_MAX, ge=0, le=INT_MAX)

    # -- TLS (SSL and SASL_SSL listeners; josefk.broker.security.tls reads the files) --------
    ssl_keystore_type: Str = _key("ssl.keystore.type", "PEM")
    ssl_keystore_location: OptStr = _key("ssl.keystore.location", None)
    ssl_keystore_password: OptStr = _key("ssl.keystore.password", None)
    ssl_keystore_certificate_chain: OptStr = _key("ssl.keystore.certificate.chain", None)
    ssl_keystore_key: OptStr = _key("ssl.keystore.key", None)
    ssl_key_password: OptStr = _key("ssl.key.password", None)
    ssl_truststore_type: Str = _key("ssl.truststore.type", "PEM")
    ssl_truststore_location: OptStr = _key("ssl.truststore.location", None)
    ssl_truststore_password: OptStr = _key("ssl.truststore.password", None)
    ssl_truststore_certificates: OptStr = _key("ssl.truststore.certificates", None)
    ssl_client_auth: Literal["none", "requested", "required"] = _key("ssl.client.auth", "none")
    ssl_enabled_protocols: Csv = _key("ssl.enabled.protocols", ("TLSv1.2", "TLSv1.3"))
    ssl_protocol: Str = _key("ssl.protocol", "TLSv1.3")
    ssl_cipher_suites: Csv = _key("ssl.cipher.suites", ())
    # A client's setting (host name verification of the broker); accepted, as Kafka does.
    ssl_endpoint_identification_algorithm: OptStr = _key(
        "ssl.endpoint.identification.algorithm", "https"
    )
    ssl_principal_mapping_rules: Str = _key("ssl.principal.mapping.rules", "DEFAULT")
    # A TLS client that has not finished its handshake by then is disconnected.
    ssl_handshake_timeout_ms: Int = _key(
        "josefk.ssl.handshake.timeout.ms", 10_000, ge=1, le=INT_MAX
    )
    # listener.name.<name>.ssl.* keys as given (listener_ssl_key() reads one); not a Kafka key
    # of its own: each entry is one.
    listener_ssl_configs: dict[str, str] = Field(default_factory=dict)
    queued_max_requests: Int = _key("queued.max.requests", 500, ge=1, le=INT_MAX)
    queued_max_request_bytes: Int = _key("queued.max.request.bytes", -1, ge=-1, le=LONG_MAX)
    fetch_max_bytes: Int = _key("fetch.max.bytes", 57_671_680, ge=1024, le=INT_MAX)
    # KIP-227 fetch sessions: 0 makes the broker decline every incremental session.
    max_incremental_fetch_session_cache_slots: Int = _key(
        "max.incremental.fetch.session.cache.slots", 1000, ge=0, le=INT_MAX
    )
    # Accepted for compatibility; josefk runs one event loop and has no thread pools to size.
    num_network_threads: Int = _key("num.network.threads", 3, ge=1, le=INT_MAX)
    num_io_threads: Int = _key("num.io.threads", 8, ge=1, le=INT_MAX)
    background_threads: Int = _key("background.threads", 10, ge=1, le=INT_MAX)
    num_recovery_threads_per_data_dir: Int = _key(
        "num.recovery.threads.per.data.dir", 2, ge=1, le=INT_MAX
    )

    # -- log defaults (log.*) ----------------------------------------------------------------
    log_segment_bytes: Int = _key("log.segment.bytes", 1_073_741_824, ge=14, le=INT_MAX)
    log_roll_ms: OptInt = _key("log.roll.ms", None, ge=1, le=LONG_MAX)
    log_roll_hours: Int = _key("log.roll.hours", 168, ge=1, le=INT_MAX)
    log_roll_jitter_ms: OptInt = _key("log.roll.jitter.ms", None, ge=0, le=LONG_MAX)
    log_roll_jitter_hours: Int = _key("log.roll.jitter.hours", 0, ge=0, le=INT_MAX)
    log_retention_ms: OptInt = _key("log.retention.ms", None, le=LONG_MAX)
    log_retention_minutes: OptInt = _key("log.retention.minutes", None, le=INT_MAX)
    log_retention_hours: Int = _key("log.retention.hours", 168, le=INT_MAX)
    log_retention_bytes: Int = _key("log.retention.bytes", -1, le=LONG_MAX)
    log_retention_check_interval_ms: Int = _key(
        "log.retention.check.interval.ms", 300_000, ge=1, le=LONG_MAX
    )
    log_index_size_max_bytes: Int = _key("log.index.size.max.bytes", 10_485_760, ge=4, le=INT_MAX)
    log_index_interval_bytes: Int = _key("log.index.interval.bytes", 4096, ge=0, le=INT_MAX)
    log_flush_interval_messages: Int = _key(
        "log.flush.interval.messages", LONG_MAX, ge=1, le=LONG_MAX
    )
    log_flush_interval_ms: OptInt = _key("log.flush.interval.ms", None, ge=0, le=LONG_MAX)
    log_flush_scheduler_interval_ms: Int = _key(
        "log.flush.scheduler.interval.ms", LONG_MAX, ge=0, le=LONG_MAX
    )
    log_flush_offset_checkpoint_interval_ms: Int = _key(
        "log.flush.offset.checkpoint.interval.ms", 60_000, ge=0, le=INT_MAX
    )
    log_flush_start_offset_checkpoint_interval_ms: Int = _key(
        "log.flush.start.offset.checkpoint.interval.ms", 60_000, ge=0, le=INT_MAX
    )
    log_segment_delete_delay_ms: Int = _key(
        "log.segment.delete.delay.ms", 60_000, ge=0, le=LONG_MAX
    )
    log_cleanup_policy: Csv = _key("log.cleanup.policy", ("delete",))
    log_message_timestamp_type: Literal["CreateTime", "LogAppendTime"] = _key(
        "log.message.timestamp.type", "CreateTime"
    )
    log_message_timestamp_before_max_ms: Int = _key(
        "log.message.timestamp.before.max.ms", LONG_MAX, ge=0, le=LONG_MAX
    )
    log_message_timestamp_after_max_ms: Int = _key(
        "log.message.timestamp.after.max.ms", 3_600_000, ge=0, le=LONG_MAX
    )
    log_preallocate: KBool = _key("log.preallocate", False)
    log_local_retention_ms: Int = _key("log.local.retention.ms", -2, ge=-2, le=LONG_MAX)
    log_local_retention_bytes: Int = _key("log.local.retention.bytes", -2, ge=-2, le=LONG_MAX)
    log_cleaner_enable: KBool = _key("log.cleaner.enable", True)
    log_cleaner_threads: Int = _key("log.cleaner.threads", 1, ge=0, le=INT_MAX)
    log_cleaner_dedupe_buffer_size: Int = _key(
        "log.cleaner.dedupe.buffer.size", 134_217_728, le=LONG_MAX
    )
    log_cleaner_io_buffer_size: Int = _key("log.cleaner.io.buffer.size", 524_288, ge=0, le=INT_MAX)
    log_cleaner_io_buffer_load_factor: Float = _key("log.cleaner.io.buffer.load.factor", 0.9)
    log_cleaner_io_max_bytes_per_second: Float = _key(
        "log.cleaner.io.max.bytes.per.second", DOUBLE_MAX
    )
    log_cleaner_backoff_ms: Int = _key("log.cleaner.backoff.ms", 15_000, ge=0, le=LONG_MAX)
    log_cleaner_min_cleanable_ratio: Float = _key(
        "log.cleaner.min.cleanable.ratio", 0.5, ge=0.0, le=1.0
    )
    log_cleaner_delete_retention_ms: Int = _key(
        "log.cleaner.delete.retention.ms", 86_400_000, ge=0, le=LONG_MAX
    )
    log_cleaner_min_compaction_lag_ms: Int = _key(
        "log.cleaner.min.compaction.lag.ms", 0, ge=0, le=LONG_MAX
    )
    log_cleaner_max_compaction_lag_ms: Int = _key(
        "log.cleaner.max.compaction.lag.ms", LONG_MAX, ge=1, le=LONG_MAX
    )

    # -- consumer groups and committed offsets ----------------------------------------------
    offsets_topic_num_partitions: Int = _key("offsets.topic.num.partitions", 50, ge=1, le=INT_MAX)
    # Kafka's default is 3. The single node keeps the offsets topic on its one replica
    # whatever this says; a cluster's controller creates the topic once this many brokers are
    # alive, as Kafka does (josefk dev-cluster sets min(3, brokers)).
    offsets_topic_replication_factor: Int = _key(
        "offsets.topic.replication.factor", 3, ge=1, le=32767
    )
    offsets_topic_segment_bytes: Int = _key(
        "offsets.topic.segment.bytes", 104_857_600, ge=1, le=INT_MAX
    )
    offsets_topic_compression_codec: Int = _key("offsets.topic.compression.codec", 0, ge=0, le=4)
    offsets_load_buffer_size: Int = _key("offsets.load.buffer.size", 5_242_880, ge=1, le=INT_MAX)
    offsets_retention_minutes: Int = _key("offsets.retention.minutes", 10_080, ge=1, le=INT_MAX)
    offsets_retention_check_interval_ms: Int = _key(
        "offsets.retention.check.interval.ms", 600_000, ge=1, le=LONG_MAX
    )
    offsets_commit_timeout_ms: Int = _key("offsets.commit.timeout.ms", 5000, ge=1, le=INT_MAX)
    group_initial_rebalance_delay_ms: Int = _key(
        "group.initial.rebalance.delay.ms", 3000, ge=0, le=INT_MAX
    )
    group_min_session_timeout_ms: Int = _key("group.min.session.timeout.ms", 6000, ge=0, le=INT_MAX)
    group_max_session_timeout_ms: Int = _key(
        "group.max.session.timeout.ms", 1_800_000, ge=0, le=INT_MAX
    )
    group_max_size: Int = _key("group.max.size", INT_MAX, ge=1, le=INT_MAX)
    # KIP-848 consumer groups (group.protocol=consumer), with Kafka 4's defaults.
    group_consumer_heartbeat_interval_ms: Int = _key(
        "group.consumer.heartbeat.interval.ms", 5000, ge=1, le=INT_MAX
    )
    group_consumer_min_heartbeat_interval_ms: Int = _key(
        "group.consumer.min.heartbeat.interval.ms", 5000, ge=1, le=INT_MAX
    )
    group_consumer_max_heartbeat_interval_ms: Int = _key(
        "group.consumer.max.heartbeat.interval.ms", 15000, ge=1, le=INT_MAX
    )
    group_consumer_session_timeout_ms: Int = _key(
        "group.consumer.session.timeout.ms", 45000, ge=1, le=INT_MAX
    )
    group_consumer_min_session_timeout_ms: Int = _key(
        "group.consumer.min.session.timeout.ms", 45000, ge=1, le=INT_MAX
    )
    group_consumer_max_session_timeout_ms: Int = _key(
        "group.consumer.max.session.timeout.ms", 60000, ge=1, le=INT_MAX
    )
    group_consumer_max_size: Int = _key("group.consumer.max.size", INT_MAX, ge=1, le=INT_MAX)
    # Names (uniform, range) or Kafka's class names of them; the first is the default.
    group_consumer_assignors: Csv = _key("group.consumer.assignors", ("uniform", "range"))
    group_consumer_migration_policy: Literal["bidirectional", "upgrade", "downgrade", "disabled"] = (
        _key("group.consumer.migration.policy", "bidirectional")
    )

    # -- idempotent producer and transactions -----------------------------------------------
    producer_id_expiration_ms: Int = _key("producer.id.expiration.ms", 86_400_000, ge=1, le=INT_MAX)
    producer_id_expiration_check_interval_ms: Int = _key(
        "producer.id.expiration.check.interval.ms", 600_000, ge=1, le=INT_MAX
    )
    transactional_id_expiration_ms: Int = _key(
        "transactional.id.expiration.ms", 604_800_000, ge=1, le=INT_MAX
    )
    transaction_max_timeout_ms: Int = _key("transaction.max.timeout.ms", 900_000, ge=1, le=INT_MAX)
    transaction_state_log_num_partitions: Int = _key(
        "transaction.state.log.num.partitions", 50, ge=1, le=INT_MAX
    )
    # Like offsets.topic.replication.factor: the single node keeps __transaction_state on its
    # one replica; a cluster's controller creates it once this many brokers are alive, with
    # min.insync.replicas = transaction.state.log.min.isr. The coordinator's timers use the
    # two cleanup intervals below (josefk.broker.txn.coordinator).
    transaction_state_log_replication_factor: Int = _key(
        "transaction.state.log.replication.factor", 3, ge=1, le=32767
    )
    transaction_state_log_min_isr: Int = _key("transaction.state.log.min.isr", 2, ge=1, le=INT_MAX)
    transaction_state_log_segment_bytes: Int = _key(
        "transaction.state.log.segment.bytes", 104_857_600, ge=1, le=INT_MAX
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: Int = _key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000, ge=1, le=INT_MAX
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: Int = _key(
        "transaction.remove.expired.transaction.cleanup.interval.ms", 3_600_000, ge=1, le=INT_MAX
    )

    # -- purgatories -------------------------------------------------------------------------
    fetch_purgatory_purge_interval_requests: Int = _key(
        "fetch.purgatory.purge.interval.requests", 1000, le=INT_MAX
    )
    producer_purgatory_purge_interval_requests: Int = _key(
        "producer.purgatory.purge.interval.requests", 1000, le=INT_MAX
    )
    delete_records_purgatory_purge_interval_requests: Int = _key(
        "delete.records.purgatory.purge.interval.requests", 1, le=INT_MAX
    )

    # -- replication (accepted; used once josefk replicates) ----------------------------------
    num_replica_fetchers: Int = _key("num.replica.fetchers", 1, ge=1, le=INT_MAX)
    replica_fetch_max_bytes: Int = _key("replica.fetch.max.bytes", 1_048_576, ge=0, le=INT_MAX)
    replica_fetch_min_bytes: Int = _key("replica.fetch.min.bytes", 1, le=INT_MAX)
    replica_fetch_wait_max_ms: Int = _key("replica.fetch.wait.max.ms", 500, le=INT_MAX)
    replica_fetch_response_max_bytes: Int = _key(
        "replica.fetch.response.max.bytes", 10_485_760, ge=0, le=INT_MAX
    )
    replica_fetch_backoff_ms: Int = _key("replica.fetch.backoff.ms", 1000, ge=0, le=INT_MAX)
    replica_lag_time_max_ms: Int = _key("replica.lag.time.max.ms", 30_000, le=LONG_MAX)
    replica_socket_timeout_ms: Int = _key("replica.socket.timeout.ms", 30_000, le=INT_MAX)
    replica_socket_receive_buffer_bytes: Int = _key(
        "replica.socket.receive.buffer.bytes", 65_536, le=INT_MAX
    )
    replica_high_watermark_checkpoint_interval_ms: Int = _key(
        "replica.high.watermark.checkpoint.interval.ms", 5000, le=LONG_MAX
    )

    # -- josefk's own ------------------------------------------------------------------------
    metrics_enable: KBool = _key("josefk.metrics.enable", True)
    metrics_host: Str = _key("josefk.metrics.host", "127.0.0.1")
    metrics_port: Int = _key("josefk.metrics.port", 9404, ge=0, le=65535)
    shutdown_timeout_ms: Int = _key("josefk.shutdown.timeout.ms", 30_000, ge=0, le=INT_MAX)
    uvloop_enable: KBool = _key("josefk.uvloop.enable", True)

    # -- the cluster (josefk.etcd.endpoints set; a single node needs none of it) -------------
    broker_rack: OptStr = _key("broker.rack", None)
    auto_leader_rebalance_enable: KBool = _key("auto.leader.rebalance.enable", True)
    leader_imbalance_check_interval_seconds: Int = _key(
        "leader.imbalance.check.interval.seconds", 300, ge=1, le=LONG_MAX
    )
    leader_imbalance_per_broker_percentage: Int = _key(
        "leader.imbalance.per.broker.percentage", 10, ge=0, le=100
    )
    etcd_endpoints: OptStr = _key("josefk.etcd.endpoints", None)
    etcd_prefix: Str = _key("josefk.etcd.prefix", "/josefk")
    # The broker's etcd lease: how long a dead broker stays registered, and so the floor of
    # failover time. 6 s by default; 2000 brings failover under 3 s on a quiet network.
    etcd_session_timeout_ms: Int = _key("josefk.etcd.session.timeout.ms", 6000, ge=1000, le=INT_MAX)

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
        if key in self.listener_ssl_configs:
            return False
        name = _FIELD_BY_KEY[key]
        return key not in self._origins and name not in self.model_fields_set

    def value_of(self, key: str) -> str | None:
        """The Kafka string form of one key's value (None for an unset nullable key)."""
        if listener_ssl_key(key) is not None:
            return self.listener_ssl_configs.get(key)
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
                sensitive=_is_sensitive(key) or key in SENSITIVE_KEYS,
            )
            for key in (*BROKER_CONFIG_KEYS, *sorted(self.listener_ssl_configs))
        ]

    def to_properties(self, *, include_defaults: bool = True) -> dict[str, str]:
        """Kafka-named string properties; unset nullable keys are left out."""
        result: dict[str, str] = {}
        for key in (*BROKER_CONFIG_KEYS, *sorted(self.listener_ssl_configs)):
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


def _format(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float) and value == DOUBLE_MAX:
        return "1.7976931348623157E308"
    return str(value)


def _is_sensitive(key: str) -> bool:
    parsed = listener_ssl_key(key)
    return (parsed[1] if parsed else key) in SENSITIVE_SSL_KEYS or "password" in key


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
