"""Units of the client's security: the SCRAM client against josefk's SCRAM server, PLAIN's
token, the JAAS line reader and the checks ``ClientSecurity.build`` makes up front."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.broker.security.scram import ScramServer, make_credential
from josefk.client.sasl import SaslExchangeError, ScramClient, plain_token
from josefk.client.security import ClientSecurity, parse_jaas_config

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _exchange(mechanism: str, user: str, stored: str, given_password: str) -> ScramClient:
    credential = make_credential(mechanism, stored.encode())
    server = ScramServer(mechanism, lambda name, mech: credential if name == user else None)
    client = ScramClient(mechanism, user, given_password)
    final = client.final(server.step(client.first()))
    client.verify(server.step(final))
    return client


@settings(max_examples=20, deadline=None)
@given(
    mechanism=st.sampled_from(MECHANISMS),
    user=st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1
    ),
    password=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1),
)
def test_scram_client_and_server_agree(mechanism: str, user: str, password: str) -> None:
    # User names with "=" and "," travel escaped (=3D, =2C) and come back as given.
    _exchange(mechanism, user, password, password)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_is_refused_by_the_server(mechanism: str) -> None:
    from josefk.broker.security.scram import ScramError

    with pytest.raises(ScramError):
        _exchange(mechanism, "alice", "right", "wrong")


def test_a_server_without_the_credential_cannot_forge_server_final() -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "secret", nonce="abc")
    impostor = ScramServer("SCRAM-SHA-256", lambda n, m: make_credential(m, b"other"), nonce="xyz")
    client.final(impostor.step(client.first()))
    with pytest.raises(SaslExchangeError, match="signature"):
        client.verify(b"v=" + b"A" * 44)


def test_scram_client_refuses_a_weak_or_foreign_server_first() -> None:
    client = ScramClient("SCRAM-SHA-512", "alice", "secret", nonce="abc")
    client.first()
    with pytest.raises(SaslExchangeError, match="iterations"):
        client.final(b"r=abcdef,s=c2FsdA==,i=1000")
    with pytest.raises(SaslExchangeError, match="nonce"):
        client.final(b"r=zzz,s=c2FsdA==,i=4096")
    with pytest.raises(SaslExchangeError, match="malformed"):
        client.final(b"garbage")


def test_plain_token() -> None:
    assert plain_token("alice", "pw") == b"\0alice\0pw"


def test_jaas_config_lines_as_kafka_writes_them() -> None:
    login = parse_jaas_config(
        "org.apache.kafka.common.security.scram.ScramLoginModule required\n"
        '  username="admin" password="admin-\\"secret";'
    )
    assert login.module.endswith("ScramLoginModule")
    assert login.options == {"username": "admin", "password": 'admin-"secret'}
    plain = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username=admin password="a b" user_admin="a b";'
    )
    assert plain.options == {"username": "admin", "password": "a b", "user_admin": "a b"}
    with pytest.raises(ValueError):
        parse_jaas_config('username="admin"')


def test_client_security_is_checked_up_front() -> None:
    assert not ClientSecurity.build().uses_sasl
    sasl = ClientSecurity.build(
        security_protocol="sasl_plaintext",
        sasl_mechanism="scram-sha-256",
        sasl_jaas_config='x.ScramLoginModule required username="u" password="s3cr3t-pw";',
    )
    assert (sasl.protocol, sasl.sasl_mechanism, sasl.sasl_username) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
        "u",
    )
    assert "s3cr3t-pw" not in repr(sasl)
    with pytest.raises(ValueError, match=r"sasl\.mechanism"):
        ClientSecurity.build(security_protocol="SASL_PLAINTEXT", sasl_username="u")
    with pytest.raises(ValueError, match=r"GSSAPI|not supported"):
        ClientSecurity.build(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="GSSAPI",
            sasl_username="u",
            sasl_password="p",
        )
    with pytest.raises(ValueError, match=r"security\.protocol"):
        ClientSecurity.build(security_protocol="TLS")
    with pytest.raises(ValueError, match=r"ssl\.ca\.location=/nonexistent"):
        ClientSecurity.build(security_protocol="SSL", ssl_ca_location="/nonexistent/ca.pem")
    tls = ClientSecurity.build(
        security_protocol="SSL", ssl_endpoint_identification_algorithm="none"
    )
    assert tls.ssl_context is not None and not tls.ssl_context.check_hostname
    with pytest.raises(ValueError, match="unknown client security setting"):
        ClientSecurity.from_properties({"ssl.keystore.password": "x"})
