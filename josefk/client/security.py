"""How a client connection is secured: the security protocol, SASL credentials, the TLS context.

Owns ``ClientSecurity``, one small frozen object every ``BrokerConnection`` of a client (or of
a broker's inter-broker connections) is opened with, built from the property names users know
from librdkafka and Kafka's Java client:

    security.protocol                       PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
    sasl.mechanism (librdkafka: sasl.mechanisms)   PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    sasl.username, sasl.password            the SASL credentials, or, as Java clients give them,
    sasl.jaas.config                        ``...ScramLoginModule required username="u" password="p";``
    ssl.ca.location                         PEM file of the CAs to trust (default: the system's)
    ssl.certificate.location, ssl.key.location, ssl.key.password   a client certificate
    ssl.endpoint.identification.algorithm   https (default: the broker's certificate must name
                                            the host connected to) or none

and ``parse_jaas_config``, the reader of Kafka's one-line JAAS configuration. Building a
``ClientSecurity`` checks everything it can up front (a missing file, an unknown mechanism) and
raises ``ValueError`` naming the property, so a mistake shows before the first connection.

Imports the standard library and josefk.client.sasl only.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from josefk.client.sasl import MECHANISMS

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Client property name -> the keyword of ``ClientSecurity.build`` (and the ClientConfig field).
PROPERTY_NAMES: Final[dict[str, str]] = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_username",
    "sasl.password": "sasl_password",
    "sasl.jaas.config": "sasl_jaas_config",
    "ssl.ca.location": "ssl_ca_location",
    "ssl.certificate.location": "ssl_certificate_location",
    "ssl.key.location": "ssl_key_location",
    "ssl.key.password": "ssl_key_password",
    "ssl.endpoint.identification.algorithm": "ssl_endpoint_identification_algorithm",
}
# Values that must never be printed (ClientConfig's repr, DescribeConfigs).
SENSITIVE: Final = frozenset({"sasl_password", "sasl_jaas_config", "ssl_key_password"})


@dataclass(frozen=True, slots=True)
class JaasLogin:
    """One parsed JAAS login module line: the module's class name and its options."""

    module: str
    options: Mapping[str, str]


_JAAS_LINE: Final = re.compile(
    r"^\s*([A-Za-z_$][\w.$]*)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;\s*$",
    re.DOTALL,
)
_JAAS_OPTION: Final = re.compile(r'\s*([\w.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s";]+)')


def parse_jaas_config(text: str) -> JaasLogin:
    """``org...ScramLoginModule required username="admin" password="admin-secret";`` ->
    JaasLogin(module, {"username": "admin", "password": "admin-secret"}). Raises ValueError
    on anything else (JAAS files with several sections are not Kafka's ``sasl.jaas.config``)."""
    match = _JAAS_LINE.match(text)
    if match is None:
        raise ValueError('expected one login module: <LoginModule class> required key="value" ...;')
    module, _, rest = match.groups()
    options: dict[str, str] = {}
    position = 0
    while position < len(rest):
        option = _JAAS_OPTION.match(rest, position)
        if option is None:
            if rest[position:].strip():
                raise ValueError(f"cannot read the JAAS options from {rest[position:]!r}")
            break
        key, value = option.groups()
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[key] = value
        position = option.end()
    return JaasLogin(module, options)


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """What a connection does after TCP connect: TLS (``ssl_context``), then SASL."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)

    @property
    def uses_sasl(self) -> bool:
        return self.sasl_mechanism is not None

    @property
    def uses_tls(self) -> bool:
        return self.ssl_context is not None

    @classmethod
    def build(
        cls,
        *,
        security_protocol: str = "PLAINTEXT",
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        sasl_jaas_config: str | None = None,
        ssl_ca_location: str | None = None,
        ssl_ca_pem: str | None = None,
        ssl_certificate_location: str | None = None,
        ssl_key_location: str | None = None,
        ssl_key_password: str | None = None,
        ssl_endpoint_identification_algorithm: str | None = "https",
    ) -> ClientSecurity:
        """Check the settings and build the TLS context; ValueError names what is wrong."""
        protocol = (security_protocol or "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"security.protocol={security_protocol}: expected one of "
                + ", ".join(SECURITY_PROTOCOLS)
            )
        mechanism: str | None = None
        if protocol.startswith("SASL_"):
            if sasl_jaas_config:
                try:
                    login = parse_jaas_config(sasl_jaas_config)
                except ValueError as exc:
                    raise ValueError(f"sasl.jaas.config: {exc}") from None
                sasl_username = sasl_username or login.options.get("username")
                sasl_password = sasl_password or login.options.get("password")
            if not sasl_mechanism:
                raise ValueError(
                    f"security.protocol={protocol} needs sasl.mechanism: "
                    + ", ".join(MECHANISMS)
                    + " (Kafka's default, GSSAPI, is not supported)"
                )
            mechanism = sasl_mechanism.strip().upper()
            if mechanism not in MECHANISMS:
                raise ValueError(
                    f"sasl.mechanism={sasl_mechanism} is not supported; use one of "
                    + ", ".join(MECHANISMS)
                )
            if not sasl_username or sasl_password is None:
                raise ValueError(
                    f"SASL {mechanism} needs sasl.username and sasl.password "
                    "(or sasl.jaas.config with username and password)"
                )
        context: ssl.SSLContext | None = None
        if protocol.endswith("SSL"):
            context = _ssl_context(
                ca_location=ssl_ca_location,
                ca_pem=ssl_ca_pem,
                certificate_location=ssl_certificate_location,
                key_location=ssl_key_location,
                key_password=ssl_key_password,
                identification=ssl_endpoint_identification_algorithm,
            )
        return cls(
            protocol=protocol,
            sasl_mechanism=mechanism,
            sasl_username=sasl_username if mechanism else None,
            sasl_password=sasl_password if mechanism else None,
            ssl_context=context,
        )

    @classmethod
    def from_config(cls, config: Any) -> ClientSecurity:
        """From a ClientConfig's fields (``security_protocol``, ``sasl_mechanism``, ...)."""
        values = {name: getattr(config, name, None) for name in set(PROPERTY_NAMES.values())}
        if values["security_protocol"] in (None, "", "PLAINTEXT"):
            return PLAINTEXT
        return cls.build(**{k: v for k, v in values.items() if v is not None})

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ClientSecurity:
        """From Kafka/librdkafka property names; unknown names raise ValueError."""
        return cls.build(**security_settings(properties))


PLAINTEXT: Final = ClientSecurity()


def security_settings(properties: Mapping[str, str]) -> dict[str, str]:
    """Kafka property names -> ClientConfig field names, for the security keys only;
    ValueError for any other key."""
    settings: dict[str, str] = {}
    for key, value in properties.items():
        name = PROPERTY_NAMES.get(key.strip())
        if name is None:
            raise ValueError(
                f"unknown client security setting {key!r}; known: " + ", ".join(PROPERTY_NAMES)
            )
        settings[name] = value
    return settings


def _ssl_context(
    *,
    ca_location: str | None,
    ca_pem: str | None,
    certificate_location: str | None,
    key_location: str | None,
    key_password: str | None,
    identification: str | None,
) -> ssl.SSLContext:
    algorithm = (identification or "").strip().lower()
    if algorithm not in ("https", "", "none"):
        raise ValueError(
            f"ssl.endpoint.identification.algorithm={identification}: expected https or none"
        )
    try:
        context = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH, cafile=ca_location or None, cadata=ca_pem or None
        )
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"ssl.ca.location={ca_location}: {_reason(exc)}") from None
    # Kafka's and librdkafka's floor.
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # Without hostname checking the certificate must still be signed by a trusted CA.
    context.check_hostname = algorithm == "https"
    if certificate_location or key_location:
        if not certificate_location:
            raise ValueError("ssl.key.location needs ssl.certificate.location")
        try:
            context.load_cert_chain(
                certificate_location, key_location or None, key_password or None
            )
        except (OSError, ssl.SSLError) as exc:
            where = f"ssl.certificate.location={certificate_location}"
            if key_location:
                where += f", ssl.key.location={key_location}"
            raise ValueError(f"{where}: {_reason(exc)}") from None
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)
