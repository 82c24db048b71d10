"""TLS for SSL and SASL_SSL listeners: server contexts from PEM files, the client's principal
from its certificate, and each listener's context holder that takes new certificates live.

Owns:

- ``build_server_context``: an ``ssl.SSLContext`` from a listener's effective ``ssl.*``
  settings (Kafka's names: ``ssl.keystore.location`` or ``ssl.keystore.certificate.chain`` +
  ``ssl.keystore.key``, ``ssl.key.password``, ``ssl.truststore.location`` or
  ``ssl.truststore.certificates``, ``ssl.client.auth``, ``ssl.enabled.protocols``,
  ``ssl.protocol``, ``ssl.cipher.suites``). PEM only; every problem is a ``TlsConfigError``
  naming the setting (and the file).
- ``subject_dn``: the subject of a DER certificate as an RFC 2253 string, the form Kafka's
  principal is made of (most specific RDN first: ``CN=alice,OU=eng,O=josefk``).
- ``PrincipalMapper``: ``ssl.principal.mapping.rules`` (KIP-371): ``RULE:pattern/replacement/``
  with an optional ``L`` or ``U`` after the last slash, and ``DEFAULT``, comma-separated,
  first match wins. The pattern must match the whole DN; ``$1`` in the replacement is a group.
  A DN no rule matches is kept whole, as ``DEFAULT`` would.
- ``TlsListener``: one listener's current context and mapper, a ``Reconfigurable`` whose
  keystore and truststore keys (``listener.name.<name>.ssl.keystore.location``... and the
  unprefixed forms) swap in a new context for new connections; existing ones keep theirs.

The handshake and the encrypted byte stream are the network layer's
(josefk.broker.tls_connection). Must not import josefk.broker.network, the handlers or
josefk.storage.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from josefk.broker.reconfigurable import ReconfigurationError

logger = logging.getLogger(__name__)

ANONYMOUS: Final = "User:ANONYMOUS"

# The keys Kafka lets a running broker change per listener (KIP-226's dynamic SSL configs);
# each is taken both with the listener's prefix and without it.
DYNAMIC_SSL_KEYS: Final = (
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
)

_VERSIONS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH: Final = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
# TLS 1.3's suites: OpenSSL enables all of them and Python's ssl cannot narrow them.
_TLS13_SUITES: Final = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)


class TlsConfigError(ReconfigurationError):
    """A TLS setting that cannot be used: the message names the key, the value or file, and
    why. At start-up it stops the broker; in a reconfiguration it refuses the change."""

    def __init__(self, key: str, value: str | None, reason: str) -> None:
        shown = "" if value is None else f"={value}"
        super().__init__(f"{key}{shown}: {reason}")
        self.key = key


# ------------------------------------------------------------------------------ contexts


def build_server_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """A server context from one listener's effective ``ssl.*`` settings (strings, as
    ``BrokerConfig.ssl_settings`` gives them). Reads the files now; raises TlsConfigError."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # A client may not ask for TLS 1.2 renegotiations: each costs a full handshake.
    context.options |= ssl.OP_NO_RENEGOTIATION
    minimum, maximum = _versions(settings)
    _load_keystore(context, settings)
    client_auth = settings.get("ssl.client.auth", "none").strip().lower()
    if client_auth not in _CLIENT_AUTH:
        raise TlsConfigError("ssl.client.auth", client_auth, "expected none, requested or required")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    _load_truststore(context, settings, needed=client_auth != "none")
    minimum, maximum = _cipher_suites(context, settings, minimum, maximum)
    context.minimum_version = minimum
    context.maximum_version = maximum
    return context


def _versions(settings: Mapping[str, str]) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    # Absent (a holder built from a partial mapping) means Kafka's default.
    listed = settings.get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"
    enabled = [p.strip() for p in listed.split(",") if p.strip()]
    for name in enabled:
        if name not in _VERSIONS:
            raise TlsConfigError(
                "ssl.enabled.protocols",
                ",".join(enabled),
                f"{name} is not offered; josefk serves TLSv1.2 and TLSv1.3",
            )
    protocol = settings.get("ssl.protocol", "TLSv1.3").strip()
    if protocol not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise TlsConfigError("ssl.protocol", protocol, "expected TLSv1.3, TLSv1.2 or TLS")
    versions = sorted(_VERSIONS[name] for name in enabled)
    maximum = versions[-1]
    if protocol == "TLSv1.2":
        # The context's protocol caps what may be negotiated, as a JVM's SSLContext does.
        maximum = ssl.TLSVersion.TLSv1_2
        if versions[0] > maximum:
            raise TlsConfigError("ssl.protocol", protocol, "excludes every enabled protocol")
    return versions[0], maximum


def _cipher_suites(
    context: ssl.SSLContext,
    settings: Mapping[str, str],
    minimum: ssl.TLSVersion,
    maximum: ssl.TLSVersion,
) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """``ssl.cipher.suites``: IANA names as Kafka takes them (or OpenSSL's names). A list of
    TLS 1.2 suites only rules TLS 1.3 out, and one of TLS 1.3 suites only rules 1.2 out, as a
    JVM would then find no common suite in the other version."""
    names = [n.strip() for n in settings.get("ssl.cipher.suites", "").split(",") if n.strip()]
    if not names:
        return minimum, maximum
    tls13 = [n for n in names if n in _TLS13_SUITES]
    tls12 = [_openssl_cipher_name(n) for n in names if n not in _TLS13_SUITES]
    for name, openssl_name in zip([n for n in names if n not in _TLS13_SUITES], tls12, strict=True):
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(openssl_name)
        except ssl.SSLError:
            raise TlsConfigError(
                "ssl.cipher.suites", ",".join(names), f"{name} is not a cipher suite OpenSSL offers"
            ) from None
    if tls12:
        context.set_ciphers(":".join(tls12))
    else:
        minimum = ssl.TLSVersion.TLSv1_3
    if not tls13:
        maximum = ssl.TLSVersion.TLSv1_2
    if minimum > maximum:
        raise TlsConfigError(
            "ssl.cipher.suites", ",".join(names), "no suite of an enabled protocol is listed"
        )
    return minimum, maximum


_KEY_EXCHANGES: Final = {
    "ECDHE_RSA": "ECDHE-RSA-",
    "ECDHE_ECDSA": "ECDHE-ECDSA-",
    "DHE_RSA": "DHE-RSA-",
}


def _openssl_cipher_name(name: str) -> str:
    """``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` -> ``ECDHE-RSA-AES128-GCM-SHA256``; a name
    that is not an IANA TLS 1.2 name is taken as OpenSSL's own."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, _, rest = name[4:].partition("_WITH_")
    if exchange == "RSA":
        prefix = ""
    elif exchange in _KEY_EXCHANGES:
        prefix = _KEY_EXCHANGES[exchange]
    else:
        return name
    if rest.startswith("CHACHA20_POLY1305"):
        return f"{prefix}CHACHA20-POLY1305"
    rest = re.sub(r"^AES_(128|256)", r"AES\1", rest).replace("_CBC", "")
    return prefix + rest.replace("_", "-")


def _load_keystore(context: ssl.SSLContext, settings: Mapping[str, str]) -> None:
    if settings.get("ssl.keystore.password"):
        # Kafka's rule for PEM keystores: only the key itself may carry a password.
        raise TlsConfigError(
            "ssl.keystore.password",
            "[hidden]",
            "cannot be used with a PEM keystore; give the private key's password as "
            "ssl.key.password",
        )
    password = settings.get("ssl.key.password") or None

    location = settings.get("ssl.keystore.location")
    chain = settings.get("ssl.keystore.certificate.chain")
    if location:
        text = _read_pem_file("ssl.keystore.location", location)
        if "PRIVATE KEY-----" not in text:
            raise TlsConfigError(
                "ssl.keystore.location",
                location,
                "holds no private key; the PEM keystore is the key followed by the "
                "certificate chain, in one file",
            )
        _load_key_pair(context, "ssl.keystore.location", location, location, None, password)
        return
    if not chain:
        raise TlsConfigError(
            "ssl.keystore.location",
            None,
            "a TLS listener needs a keystore: ssl.keystore.location, or "
            "ssl.keystore.certificate.chain and ssl.keystore.key",
        )
    key = settings.get("ssl.keystore.key")
    if not key:
        raise TlsConfigError(
            "ssl.keystore.key", None, "is needed with ssl.keystore.certificate.chain"
        )
    chain_pem = normalise_pem(chain, "ssl.keystore.certificate.chain")
    key_pem = normalise_pem(key, "ssl.keystore.key")
    # load_cert_chain reads files only: the inline PEM goes through a private directory that
    # is gone before this returns.
    with tempfile.TemporaryDirectory(prefix="josefk-tls-") as scratch:
        chain_path, key_path = Path(scratch, "chain.pem"), Path(scratch, "key.pem")
        for path, pem in ((chain_path, chain_pem), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(pem)
        _load_key_pair(
            context, "ssl.keystore.certificate.chain", None, chain_path, key_path, password
        )


def _load_key_pair(
    context: ssl.SSLContext,
    setting: str,
    shown: str | None,
    certfile: str | Path,
    keyfile: str | Path | None,
    password: str | None,
) -> None:
    """Load the certificate chain and key; a failure is a TlsConfigError naming ``setting``
    (with ``shown`` as its value) and what is wrong with the key."""

    def no_password() -> str:
        raise TlsConfigError(
            "ssl.key.password", None, "the private key is encrypted: set its password"
        )

    try:
        context.load_cert_chain(certfile, keyfile, password=password or no_password)
    except TlsConfigError:
        raise
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise TlsConfigError(setting, shown, _key_problem(exc, password)) from None


def _key_problem(exc: BaseException, password: str | None) -> str:
    text = str(exc)
    if "KEY_VALUES_MISMATCH" in text or "key values mismatch" in text:
        return "the private key does not belong to the first certificate"
    if password and ("bad decrypt" in text.lower() or "PEM lib" in text):
        # OpenSSL says no more than "PEM lib" for a wrong password.
        return "ssl.key.password does not decrypt the private key (or the PEM is damaged)"
    return f"cannot load the key and certificate chain: {text}"


def _load_truststore(context: ssl.SSLContext, settings: Mapping[str, str], *, needed: bool) -> None:
    if settings.get("ssl.truststore.password"):
        raise TlsConfigError(
            "ssl.truststore.password", "[hidden]", "cannot be used with a PEM truststore"
        )
    location = settings.get("ssl.truststore.location")
    certificates = settings.get("ssl.truststore.certificates")
    try:
        if location:
            _read_pem_file("ssl.truststore.location", location)
            context.load_verify_locations(cafile=location)
        elif certificates:
            pem = normalise_pem(certificates, "ssl.truststore.certificates")
            context.load_verify_locations(cadata=pem)
        elif needed:
            # As a JVM falls back to its default trust store.
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except TlsConfigError:
        raise
    except (ssl.SSLError, OSError, ValueError) as exc:
        key = "ssl.truststore.location" if location else "ssl.truststore.certificates"
        raise TlsConfigError(key, location, f"cannot load the certificates: {exc}") from None


def _read_pem_file(key: str, location: str) -> str:
    try:
        data = Path(location).read_bytes()
    except OSError as exc:
        raise TlsConfigError(
            key, location, f"cannot read the file: {exc.strerror or exc}"
        ) from None
    text = data.decode("ascii", errors="replace")
    if "-----BEGIN " not in text:
        raise TlsConfigError(
            key,
            location,
            "is not a PEM file; if it is a JKS or PKCS12 store, convert it: `keytool "
            "-importkeystore -srckeystore store.jks -destkeystore store.p12 -deststoretype "
            "PKCS12`, then `openssl pkcs12 -in store.p12 -out store.pem`",
        )
    return text


_PEM_BLOCK: Final = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalise_pem(text: str, key: str) -> str:
    """PEM blocks given inline, rewritten with standard line breaks.

    A properties file joins continued lines without their breaks, so inline PEM arrives as
    one line; the base64 between the markers is taken whatever its white space."""
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        body = re.sub(r"\s+", "", match[2])
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        blocks.append(
            "\n".join([f"-----BEGIN {match[1]}-----", *lines, f"-----END {match[1]}-----"])
        )
    if not blocks:
        raise TlsConfigError(key, None, "holds no PEM block (-----BEGIN ...-----)")
    return "\n".join(blocks) + "\n"


# ------------------------------------------------------------------------------ the subject DN

# RFC 2253's keywords; any other attribute is written as its OID and the value's DER in hex.
_KEYWORDS: Final = {
    "2.5.4.3": "CN",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.6": "C",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types and how their bytes decode.
_STRING_TYPES: Final = {
    0x0C: "utf-8",  # UTF8String
    0x12: "ascii",  # NumericString
    0x13: "ascii",  # PrintableString
    0x14: "latin-1",  # TeletexString (T.61; Latin-1 is what is met in practice)
    0x16: "ascii",  # IA5String
    0x1C: "utf-32-be",  # UniversalString
    0x1E: "utf-16-be",  # BMPString
}


class CertificateParseError(ValueError):
    """The certificate's DER could not be read as far as its subject."""


def _tlv(der: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at ``pos``."""
    if pos + 2 > len(der):
        raise CertificateParseError("truncated element")
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(der):
            raise CertificateParseError("bad length")
        length = int.from_bytes(der[pos : pos + count], "big")
        pos += count
    if pos + length > len(der):
        raise CertificateParseError("element runs past the end")
    return tag, pos, pos + length


def _oid(data: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in data:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        raise CertificateParseError("empty OID")
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in [first, arcs[0] - 40 * first, *arcs[1:]])


def subject_dn(der: bytes) -> str:
    """The subject of a DER X.509 certificate in RFC 2253 form, RDNs from the most specific
    (last in the certificate) to the least: ``CN=alice,OU=eng,O=josefk``."""
    _, start, _ = _tlv(der, 0)  # Certificate
    _, pos, _ = _tlv(der, start)  # TBSCertificate
    tag, _, end = _tlv(der, pos)
    if tag == 0xA0:  # [0] version
        pos = end
    for _ in range(4):  # serial number, signature algorithm, issuer, validity
        pos = _tlv(der, pos)[2]
    tag, pos, end = _tlv(der, pos)
    if tag != 0x30:
        raise CertificateParseError("no subject")
    rdns: list[str] = []
    while pos < end:
        _, set_pos, set_end = _tlv(der, pos)
        pos = set_end
        attributes = []
        while set_pos < set_end:
            _, seq_pos, seq_end = _tlv(der, set_pos)
            set_pos = seq_end
            _, oid_start, oid_end = _tlv(der, seq_pos)
            value_tag, value_start, value_end = _tlv(der, oid_end)
            attributes.append(
                _attribute(
                    _oid(der[oid_start:oid_end]), value_tag, der, oid_end, value_start, value_end
                )
            )
        rdns.append("+".join(attributes))
    return ",".join(reversed(rdns))


def _attribute(oid: str, tag: int, der: bytes, element: int, start: int, end: int) -> str:
    keyword = _KEYWORDS.get(oid)
    encoding = _STRING_TYPES.get(tag)
    if keyword is not None and encoding is not None:
        try:
            return f"{keyword}={escape_dn_value(der[start:end].decode(encoding))}"
        except UnicodeDecodeError:
            pass
    return f"{keyword or oid}=#{der[element:end].hex()}"


def escape_dn_value(value: str) -> str:
    """RFC 2253 section 2.4: backslash before , + " \\ < > ; and before a leading # or
    space or a trailing space."""
    out = []
    for index, char in enumerate(value):
        if char in ',+"\\<>;' or (char == "#" and index == 0):
            out.append("\\" + char)
        elif char == " " and (index == 0 or index == len(value) - 1):
            out.append("\\ ")
        else:
            out.append(char)
    return "".join(out)


# ------------------------------------------------------------------------------ mapping rules


@dataclass(frozen=True, slots=True)
class MappingRule:
    """One ``RULE:pattern/replacement/[LU]``, or ``DEFAULT`` (``pattern`` None)."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(self.replacement, dn)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name


_RULE: Final = re.compile(
    r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>[^/]*)/(?P<replacement>[^/]*)/(?P<case>[LU]?))\s*(?:,|$)"
)


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: the short name a client certificate's DN maps to."""

    def __init__(self, rules: tuple[MappingRule, ...]) -> None:
        self.rules = rules

    @classmethod
    def parse(cls, text: str) -> PrincipalMapper:
        """Raises TlsConfigError naming the part of ``text`` that is not a rule."""
        rules: list[MappingRule] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            match = _RULE.match(text, pos)
            if match is None or match.end() == pos:
                raise TlsConfigError(
                    "ssl.principal.mapping.rules",
                    text,
                    f"cannot read a rule at {text[pos:]!r}; expected "
                    "RULE:pattern/replacement/ (optionally /L or /U) or DEFAULT",
                )
            pos = match.end()
            if match["default"]:
                rules.append(MappingRule(None))
                continue
            try:
                pattern = re.compile(match["pattern"])
            except re.error as exc:
                raise TlsConfigError(
                    "ssl.principal.mapping.rules", match["pattern"], f"bad pattern: {exc}"
                ) from None
            rules.append(
                MappingRule(pattern, _python_replacement(match["replacement"]), match["case"])
            )
        if not rules:
            rules.append(MappingRule(None))
        return cls(tuple(rules))

    def name_for(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        return dn


def _python_replacement(java: str) -> str:
    """A Java replacement string (``$1``, ``${name}``, ``\\x`` for a literal x) as one for
    ``re.sub``."""
    out: list[str] = []
    index = 0
    while index < len(java):
        char = java[index]
        if char == "\\" and index + 1 < len(java):
            literal = java[index + 1]
            out.append("\\\\" if literal == "\\" else literal)
            index += 2
            continue
        if char == "$":
            named = re.match(r"\{(\w+)\}", java[index + 1 :])
            digits = re.match(r"\d+", java[index + 1 :])
            if named:
                out.append(f"\\g<{named[1]}>")
                index += 1 + named.end()
                continue
            if digits:
                out.append(f"\\g<{digits[0]}>")
                index += 1 + digits.end()
                continue
        out.append("\\\\" if char == "\\" else char)
        index += 1
    return "".join(out)


# ------------------------------------------------------------------------------ the listener


class TlsListener:
    """One TLS listener's current server context and principal mapping.

    A ``Reconfigurable``: the keystore and truststore keys (listener-prefixed and not) build
    a new context, which new connections get from ``context``; a connection keeps the context
    it was accepted with. Runs on the event loop thread.
    """

    def __init__(
        self,
        name: str,
        security_protocol: str,
        *,
        static_settings: Mapping[str, str],
        handshake_timeout_ms: int,
        on_handshake: Callable[[str, bool, str], None] | None = None,
    ) -> None:
        """``static_settings``: the listener's effective ``ssl.*`` values at start-up
        (``BrokerConfig.ssl_settings``). ``on_handshake(listener, succeeded, reason)`` is
        told of each handshake's end (metrics). Raises TlsConfigError."""
        self.name = name
        self.security_protocol = security_protocol
        self._prefix = f"listener.name.{name.lower()}."
        self._static = dict(static_settings)
        self.handshake_timeout_s = handshake_timeout_ms / 1000
        self.on_handshake = on_handshake
        self.mapper = PrincipalMapper.parse(
            self._static.get("ssl.principal.mapping.rules", "DEFAULT")
        )
        self.context = self._build(self._static)

    def _build(self, settings: Mapping[str, str]) -> ssl.SSLContext:
        try:
            return build_server_context(settings)
        except TlsConfigError as exc:
            exc.args = (f"listener {self.name}: {exc}",)
            raise

    # -- Reconfigurable ---------------------------------------------------------------------

    def reconfigurable_configs(self) -> Set[str]:
        return frozenset(DYNAMIC_SSL_KEYS) | {self._prefix + key for key in DYNAMIC_SSL_KEYS}

    def _settings_after(self, configs: Mapping[str, str]) -> dict[str, str]:
        settings = dict(self._static)
        for key in DYNAMIC_SSL_KEYS:
            # The listener's own key wins over the broker-wide one, as at start-up; a key
            # the change leaves absent is unset.
            value = configs.get(self._prefix + key, configs.get(key))
            if value is None or value == "":
                settings.pop(key, None)
            else:
                settings[key] = value
        return settings

    def validate_reconfiguration(self, configs: Mapping[str, str]) -> None:
        self._build(self._settings_after(configs))

    def reconfigure(self, configs: Mapping[str, str]) -> None:
        settings = self._settings_after(configs)
        self.context = self._build(settings)
        self._static = settings
        logger.info(
            "listener %s: new TLS keystore/truststore in use for new connections", self.name
        )

    # -- connections ------------------------------------------------------------------------

    def principal(self, certificate: bytes | None) -> str | None:
        """The principal of a connection whose handshake ended with ``certificate`` (DER,
        None when the client sent none): on SSL the mapped subject, ``User:ANONYMOUS``
        without a certificate; on SASL_SSL None, as SASL authenticates the client."""
        if self.security_protocol != "SSL":
            return None
        if certificate is None:
            return ANONYMOUS
        return "User:" + self.mapper.name_for(subject_dn(certificate))

    def handshake_ended(self, succeeded: bool, reason: str = "") -> None:
        if self.on_handshake is not None:
            self.on_handshake(self.name, succeeded, reason)
