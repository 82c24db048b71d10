"""The principal of a TLS client: its certificate's subject in RFC 2253 form (checked against
``openssl x509 -nameopt RFC2253`` on certificates made here), and ``ssl.principal.mapping.rules``
(KIP-371: several rules, first match wins, L/U, DEFAULT, a DN no rule matches kept whole)."""

from __future__ import annotations

import re
import ssl
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.broker.reconfigurable import ReconfigurationError
from josefk.broker.security.tls import (
    ANONYMOUS,
    PrincipalMapper,
    TlsConfigError,
    TlsListener,
    escape_dn_value,
    subject_dn,
)


def _certificate(directory: Path, subject: str, *extra: str) -> bytes:
    """A self-signed certificate with ``subject`` (openssl's -subj form), as DER."""
    key, cert = directory / "key.pem", directory / "cert.der"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-outform", "DER", "-out", str(cert), "-days", "1",
         "-subj", subject, *extra],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert.read_bytes()


def _openssl_rfc2253(der: bytes, directory: Path) -> str:
    path = directory / "check.der"
    path.write_bytes(der)
    out = subprocess.run(
        ["openssl", "x509", "-inform", "DER", "-in", str(path), "-noout", "-subject",
         "-nameopt", "RFC2253"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return out.rstrip("\n").removeprefix("subject=")


@pytest.mark.parametrize(
    "subject",
    [
        "/O=josefk/OU=eng/CN=alice",
        "/C=DE/ST=Berlin/L=Berlin/O=josefk/OU=eng/CN=bob",
        "/DC=org/DC=josefk/UID=carol/CN=carol",
        "/O=Smith\\, Jones; and <Co>/CN=dave",
        "/CN=#hash and trailing space ",
    ],
)
def test_subject_dn_is_rfc_2253(tmp_path: Path, subject: str) -> None:
    der = _certificate(tmp_path, subject, "-utf8")
    assert subject_dn(der) == _openssl_rfc2253(der, tmp_path)


@pytest.mark.parametrize(
    ("subject", "dn"),
    [
        ("/O=josefk/OU=eng/CN=alice", "CN=alice,OU=eng,O=josefk"),
        # A multi-valued RDN keeps its attributes in the certificate's order (openssl's
        # RFC2253 option reverses them too; a JVM does not).
        ("/O=josefk/OU=eng+CN=erin", "OU=eng+CN=erin,O=josefk"),
        # Non-ASCII characters as they are (openssl escapes UTF-8 bytes as \\C3\\BC).
        ("/O=josefk/CN=j\u00fcrgen", "CN=j\u00fcrgen,O=josefk"),
    ],
)
def test_subject_dn_reverses_the_certificate_order(tmp_path: Path, subject: str, dn: str) -> None:
    assert subject_dn(_certificate(tmp_path, subject, "-utf8")) == dn


def test_attributes_without_an_rfc_2253_keyword_are_oid_and_hex(tmp_path: Path) -> None:
    der = _certificate(tmp_path, "/O=josefk/CN=frank/emailAddress=frank@example.org")
    email = b"frank@example.org"
    ia5 = bytes([0x16, len(email)]) + email
    assert subject_dn(der) == f"1.2.840.113549.1.9.1=#{ia5.hex()},CN=frank,O=josefk"


@given(st.text())
def test_escaped_values_never_split_a_dn(value: str) -> None:
    escaped = escape_dn_value(value)
    # Every special character is escaped: the value cannot end an RDN or start another.
    unescaped = re.sub(r"\\.", "", escaped)
    assert not set(unescaped) & set(',+"\\<>;')
    assert not unescaped.startswith("#") and not escaped.startswith(" ")


# ------------------------------------------------------------------------------ mapping rules

DN = "CN=alice,OU=ServiceUsers,O=josefk,L=Berlin,ST=Berlin,C=DE"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("DEFAULT", DN),
        ("", DN),
        (r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "alice"),
        (r"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$3/U", "ALICE@JOSEFK"),
        (r"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT", "alice"),
        # The first rule that matches wins; later ones are not tried.
        (
            r"RULE:^CN=(.*?),OU=Nobody.*$/nobody/,RULE:^CN=(\w+),.*$/$1-first/,RULE:.*/x/",
            "alice-first",
        ),
        # No rule matches and no DEFAULT: the DN is kept whole.
        (r"RULE:^CN=bob,.*$/bob/", DN),
        (r"RULE:^CN=bob,.*$/bob/, DEFAULT", DN),
        # A literal dollar, escaped as Java's replacement syntax has it.
        (r"RULE:^CN=(\w+),.*$/\$$1/", "$alice"),
        (r"RULE:^CN=(?<user>\w+),.*$/${user}!/L", "alice!"),
    ],
)
def test_mapping_rules(rules: str, expected: str) -> None:
    rules = rules.replace("(?<user>", "(?P<user>")  # Python's named group syntax
    assert PrincipalMapper.parse(rules).name_for(DN) == expected


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*$/$1/", "RULE:abc", "NONSENSE", "RULE:a/b/X"])
def test_unreadable_rules_are_refused_naming_the_key(rules: str) -> None:
    with pytest.raises(TlsConfigError, match=r"ssl\.principal\.mapping\.rules"):
        PrincipalMapper.parse(rules)


# ------------------------------------------------------------------------------ the listener


def _listener(protocol: str, pki_settings: dict[str, str], rules: str = "DEFAULT") -> TlsListener:
    return TlsListener(
        "SECURE",
        protocol,
        static_settings={**pki_settings, "ssl.principal.mapping.rules": rules},
        handshake_timeout_ms=1000,
    )


@pytest.fixture(scope="module")
def keystore(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from tls_pki import make_pki

    pki = make_pki(tmp_path_factory.mktemp("pki"))
    return {
        "ssl.keystore.location": str(pki.server_keystore),
        "ssl.truststore.location": str(pki.ca),
    }


def test_principal_on_ssl_and_sasl_ssl(tmp_path: Path, keystore: dict[str, str]) -> None:
    der = _certificate(tmp_path, "/O=josefk/OU=eng/CN=alice")
    ssl_listener = _listener("SSL", keystore, r"RULE:^CN=([^,]+),.*$/$1/U")
    assert ssl_listener.principal(der) == "User:ALICE"
    assert ssl_listener.principal(None) == ANONYMOUS
    assert _listener("SSL", keystore).principal(der) == "User:CN=alice,OU=eng,O=josefk"
    # On SASL_SSL SASL says who the client is.
    assert _listener("SASL_SSL", keystore).principal(der) is None


def test_a_bad_rule_stops_the_listener(keystore: dict[str, str]) -> None:
    with pytest.raises(ReconfigurationError, match=r"ssl\.principal\.mapping\.rules"):
        _listener("SSL", keystore, "RULE:broken")


def test_the_context_verifies_clients_as_configured(keystore: dict[str, str]) -> None:
    required = TlsListener(
        "SECURE",
        "SSL",
        static_settings={**keystore, "ssl.client.auth": "required"},
        handshake_timeout_ms=1000,
    )
    assert required.context.verify_mode == ssl.CERT_REQUIRED
    assert _listener("SSL", keystore).context.verify_mode == ssl.CERT_NONE
