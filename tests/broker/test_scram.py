"""The SCRAM server exchange (RFC 5802) against RFC 7677's SCRAM-SHA-256 example, the
credential file's encoding, and the SASL session's refusals."""

from __future__ import annotations

import base64
import hashlib
import hmac
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.broker.security.scram import (
    FAILED,
    ScramCredential,
    ScramError,
    ScramServer,
    make_credential,
)
from josefk.broker.security.session import AuthenticationFailed, SaslSession
from josefk.broker.security.store import FILE_NAME, FileCredentialStore, decode, encode

# RFC 7677, section 3: user "user", password "pencil".
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_user(name: str, mechanism: str) -> ScramCredential | None:
    if name != "user":
        return None
    return make_credential(mechanism, b"pencil", salt=SALT, iterations=4096)


def test_rfc_7677_exchange() -> None:
    server = ScramServer("SCRAM-SHA-256", _rfc_user, nonce=SERVER_NONCE)
    assert server.step(CLIENT_FIRST) == SERVER_FIRST
    assert not server.complete
    assert server.step(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete
    assert server.username == "user"


def test_wrong_proof_is_refused() -> None:
    server = ScramServer("SCRAM-SHA-256", _rfc_user, nonce=SERVER_NONCE)
    server.step(CLIENT_FIRST)
    forged = CLIENT_FINAL[:-8] + b"AAAAAAA="
    with pytest.raises(ScramError) as refused:
        server.step(forged)
    assert str(refused.value) == FAILED
    assert not server.complete


def test_old_librdkafka_doubled_nonce_is_accepted_a_wrong_one_is_not() -> None:
    """librdkafka < 2.6.1 sends its client nonce, then the server's whole nonce (which starts
    with the client's); the proof covers what it sent. A nonce that does not end with the
    server's is refused."""
    credential = make_credential("SCRAM-SHA-256", b"s3cret", iterations=4096)

    def final(nonce: str, server_first: str) -> bytes:
        fields = dict(part.split("=", 1) for part in server_first.split(","))
        salted = hashlib.pbkdf2_hmac(
            "sha256", b"s3cret", base64.b64decode(fields["s"]), int(fields["i"])
        )
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"n=alice,r=cli,{server_first},{without_proof}".encode()
        signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_message, "sha256")
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    server = ScramServer("SCRAM-SHA-256", lambda _u, _m: credential, nonce="srv")
    server_first = server.step(b"n,,n=alice,r=cli").decode()
    assert server.step(final("cli" + "clisrv", server_first)).startswith(b"v=")
    assert server.complete

    server = ScramServer("SCRAM-SHA-256", lambda _u, _m: credential, nonce="srv")
    server_first = server.step(b"n,,n=alice,r=cli").decode()
    with pytest.raises(ScramError):
        server.step(final("clisrvX", server_first))
    assert not server.complete


def test_unknown_user_fails_like_a_wrong_password() -> None:
    """The unknown user gets a server-first too, with a salt that stays the same across
    attempts, and fails only at the proof, with the same message."""
    first = ScramServer("SCRAM-SHA-256", _rfc_user, nonce=SERVER_NONCE)
    again = ScramServer("SCRAM-SHA-256", _rfc_user, nonce=SERVER_NONCE)
    answer = first.step(b"n,,n=mallory,r=rOprNGfwEbeRWgbNEkqO")
    assert answer.startswith(b"r=rOprNGfwEbeRWgbNEkqO" + SERVER_NONCE.encode() + b",s=")
    assert again.step(b"n,,n=mallory,r=rOprNGfwEbeRWgbNEkqO") == answer
    with pytest.raises(ScramError) as refused:
        first.step(CLIENT_FINAL)
    assert str(refused.value) == FAILED


@pytest.mark.parametrize(
    "client_first",
    [b"p=tls-unique,,n=user,r=abc", b"n,,r=abc", b"garbage", b"n,a=other,n=user,r=abc", b"\xff"],
)
def test_malformed_or_unsupported_client_first_is_refused(client_first: bytes) -> None:
    with pytest.raises(ScramError, match="Authentication failed"):
        ScramServer("SCRAM-SHA-256", _rfc_user).step(client_first)


def test_a_full_exchange_with_sha512_as_a_client_computes_it() -> None:
    credential = make_credential("SCRAM-SHA-512", b"s3cret", iterations=4096)
    server = ScramServer("SCRAM-SHA-512", lambda _u, _m: credential, nonce="srv")
    server_first = server.step(b"n,,n=alice,r=cli").decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha512", b"s3cret", base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    stored_key = hashlib.sha512(client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"n=alice,r=cli,{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth_message, "sha512")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    server_key = hmac.digest(salted, b"Server Key", "sha512")
    expected = b"v=" + base64.b64encode(hmac.digest(server_key, auth_message, "sha512"))
    assert server.step(final) == expected


def test_the_credential_keeps_no_password() -> None:
    credential = make_credential("SCRAM-SHA-256", b"pencil-pencil", iterations=4096)
    assert b"pencil-pencil" not in encode({"user": {"SCRAM-SHA-256": credential}})
    assert credential.matches(b"pencil-pencil")
    assert not credential.matches(b"pencil")


@given(
    users=st.dictionaries(
        st.text(min_size=1, max_size=20),
        st.tuples(
            st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
            st.binary(min_size=1, max_size=64),
            st.integers(min_value=4096, max_value=16384),
            st.binary(min_size=32, max_size=64),
            st.binary(min_size=32, max_size=64),
        ),
        max_size=5,
    )
)
def test_credential_encoding_round_trips(
    users: dict[str, tuple[str, bytes, int, bytes, bytes]],
) -> None:
    credentials = {
        name: {mechanism: ScramCredential(mechanism, salt, iterations, stored, server)}
        for name, (mechanism, salt, iterations, stored, server) in users.items()
    }
    assert decode(encode(credentials)) == credentials


def test_plain_checks_the_scram_credential() -> None:
    store = FileCredentialStore(None, {})
    store.upsert("alice", make_credential("SCRAM-SHA-512", b"alice-secret"))
    session = SaslSession(("PLAIN",), store)
    assert session.handshake("PLAIN")
    user, password = session.plain_credentials(b"\0alice\0alice-secret")
    session.check_plain(user, password)
    assert session.principal == "User:alice"

    for token in (b"\0alice\0wrong", b"\0bob\0alice-secret"):
        other = SaslSession(("PLAIN",), store)
        other.handshake("PLAIN")
        with pytest.raises(AuthenticationFailed) as refused:
            other.check_plain(*other.plain_credentials(token))
        assert str(refused.value) == FAILED
    with pytest.raises(AuthenticationFailed):
        SaslSession(("PLAIN",), store).plain_credentials(b"bob\0alice\0alice-secret")


def test_a_mechanism_not_enabled_is_refused() -> None:
    session = SaslSession(("SCRAM-SHA-512",), FileCredentialStore(None, {}))
    assert not session.handshake("PLAIN")
    assert session.handshake("SCRAM-SHA-512")


def test_the_credential_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """scram-credentials.json holds what an offline guess needs: 0600, as broker-configs.json;
    a file an older josefk left world-readable is tightened when loaded."""
    store = FileCredentialStore.load(tmp_path)
    store.upsert("alice", make_credential("SCRAM-SHA-256", b"secret", iterations=4096))
    store.save()
    path = tmp_path / FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    FileCredentialStore.load(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
