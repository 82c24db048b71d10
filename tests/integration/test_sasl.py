"""SASL on a SASL_PLAINTEXT listener of a real ``josefk serve``, beside a PLAINTEXT one.

confluent-kafka (SCRAM-SHA-512 and PLAIN, a consumer group included), kafka-python
(SCRAM-SHA-256) and kcat (PLAIN and SCRAM) authenticate and produce and consume; a wrong password and an
unknown user are refused with SASL_AUTHENTICATION_FAILED and append nothing; a request before
authentication closes the connection; the PLAINTEXT listener serves without authentication.
The users are written into the data dir's credential file before the broker starts.
"""

from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import run_josefk
from client_helpers import (
    CLIENT_TIMEOUT_S,
    assert_delivered,
    ck_consume,
    ck_create_topic,
    ck_group_round_trip,
    ck_produce,
    ck_watermarks,
    kafka_python_round_trip,
    make_messages,
    unique_topic,
)
from confluent_kafka import KafkaError, Producer
from raw_client import RawClient
from sasl_broker import SaslBroker, start_plaintext_and_sasl, write_scram_users

from josefk.broker.security.store import FILE_NAME
from josefk.protocol.api import ApiKey, request_class

pytestmark = pytest.mark.timeout(120)

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}


def _start_sasl_broker(base: Path, *settings: str) -> SaslBroker:
    """alice has both SCRAM credentials, bob only SCRAM-SHA-256's."""
    write_scram_users(base / "data", {"alice": PASSWORDS["alice"]})
    write_scram_users(base / "data", {"bob": PASSWORDS["bob"]}, mechanisms=["SCRAM-SHA-256"])
    return start_plaintext_and_sasl(base, users={}, settings=settings)


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    started = _start_sasl_broker(
        tmp_path_factory.mktemp("josefk-sasl"),
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    )
    yield started
    started.stop()


def _ck_sasl(mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_produces_and_consumes_in_a_group(
    sasl_broker: SaslBroker, mechanism: str
) -> None:
    auth = _ck_sasl(mechanism, "alice", "alice-secret")
    topic = unique_topic(f"sasl-{mechanism.lower()}")
    ck_group_round_trip(sasl_broker.sasl, sasl_broker.plaintext, topic, make_messages(20), **auth)


def test_kafka_python_with_scram_sha_256(sasl_broker: SaslBroker) -> None:
    auth: dict[str, Any] = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "bob",
        "sasl_plain_password": "bob-secret",
    }
    topic = unique_topic("sasl-kafka-python")
    kafka_python_round_trip(sasl_broker.sasl, sasl_broker.plaintext, topic, **auth)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat(sasl_broker: SaslBroker, mechanism: str) -> None:
    """kcat, whose librdkafka (Debian's 2.0.2) predates the fix of its SCRAM nonce."""
    topic = unique_topic("sasl-kcat")
    ck_create_topic(sasl_broker.plaintext, topic)
    common = [
        "kcat",
        "-b",
        sasl_broker.sasl,
        "-X",
        "broker.address.family=v4",
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        f"sasl.mechanisms={mechanism}",
        "-X",
        "sasl.username=alice",
        "-X",
        "sasl.password=alice-secret",
    ]
    produced = subprocess.run(
        [*common, "-P", "-t", topic, "-p", "0"],
        input=b"one\ntwo\nthree\n",
        capture_output=True,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr.decode(errors="replace")
    consumed = subprocess.run(
        [*common, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"],
        capture_output=True,
        timeout=60,
    )
    assert consumed.returncode == 0, consumed.stderr.decode(errors="replace")
    assert consumed.stdout.split() == [b"one", b"two", b"three"]


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("SCRAM-SHA-512", "alice", "wrong"),
        ("SCRAM-SHA-256", "nobody", "alice-secret"),
        ("PLAIN", "alice", "wrong"),
        ("PLAIN", "nobody", "alice-secret"),
    ],
)
def test_bad_credentials_are_refused_and_nothing_is_appended(
    sasl_broker: SaslBroker, mechanism: str, user: str, password: str
) -> None:
    topic = unique_topic("sasl-refused")
    ck_create_topic(sasl_broker.plaintext, topic)
    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": sasl_broker.sasl,
            "broker.address.family": "v4",
            "message.timeout.ms": 3000,
            "error_cb": errors.append,
            **_ck_sasl(mechanism, user, password),
        }
    )
    producer.produce(topic, b"must not be appended", partition=0)
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, f"no authentication error, got {errors}"
        producer.poll(0.2)
    producer.flush(5)
    auth_errors = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert "Invalid username or password" in auth_errors[0].str()
    assert ck_watermarks(sasl_broker.plaintext, topic) == (0, 0)


def test_raw_sasl_failure_answers_sasl_authentication_failed(sasl_broker: SaslBroker) -> None:
    client = RawClient(sasl_broker.sasl)
    try:
        handshake = client.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        assert handshake.error_code == 0
        assert set(handshake.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        answer = client.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\0alice\0wrong")
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert _closed(client.sock)
    finally:
        client.close()


def test_unknown_mechanism_is_answered_with_the_enabled_ones(sasl_broker: SaslBroker) -> None:
    client = RawClient(sasl_broker.sasl)
    try:
        handshake = client.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="GSSAPI")
        assert handshake.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert set(handshake.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    finally:
        client.close()


def test_a_request_before_authentication_closes_the_connection(sasl_broker: SaslBroker) -> None:
    client = RawClient(sasl_broker.sasl)
    try:
        # ApiVersions is allowed before authentication...
        assert client.call(ApiKey.API_VERSIONS, 3, client_software_name="t").error_code == 0
        # ...Metadata is not: the broker closes without an answer.
        _, frame = client.frame(ApiKey.METADATA, 1, request_class(ApiKey.METADATA)(topics=None))
        client.sock.sendall(frame)
        assert _closed(client.sock)
    finally:
        client.close()


def test_plaintext_listener_beside_it_needs_no_authentication(sasl_broker: SaslBroker) -> None:
    topic = unique_topic("sasl-beside")
    ck_create_topic(sasl_broker.plaintext, topic)
    assert_delivered(ck_produce(sasl_broker.plaintext, topic, make_messages(3)))
    assert len(ck_consume(sasl_broker.plaintext, topic, count=3)) == 3
    client = RawClient(sasl_broker.plaintext)
    try:
        answer = client.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        assert answer.error_code == 34  # ILLEGAL_SASL_STATE: nothing to authenticate here
    finally:
        client.close()


def _closed(sock: socket.socket) -> bool:
    """Whether the broker closed the connection: reads until EOF (or a reset)."""
    sock.settimeout(CLIENT_TIMEOUT_S)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_users_cli_adds_lists_and_deletes_through_the_admin_apis(
    sasl_broker: SaslBroker,
) -> None:
    """The password is salted and hashed by the CLI; the credential file gets only keys."""
    run_josefk(sasl_broker.plaintext, "users", "add", "carol", "--password", "carol-secret")
    listed = json.loads(run_josefk(sasl_broker.plaintext, "users", "list", "--json"))
    carol = next(row for row in listed if row["user"] == "carol")
    assert sorted(c["mechanism"] for c in carol["credentials"]) == [
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    ]
    stored = (sasl_broker.process.data_dir / FILE_NAME).read_bytes()
    assert b"carol" in stored and b"carol-secret" not in stored

    topic = unique_topic("sasl-cli")
    ck_create_topic(sasl_broker.plaintext, topic)
    auth = _ck_sasl("SCRAM-SHA-512", "carol", "carol-secret")
    assert_delivered(ck_produce(sasl_broker.sasl, topic, make_messages(2), **auth))

    run_josefk(sasl_broker.plaintext, "users", "delete", "carol", "--mechanism", "SCRAM-SHA-512")
    listed = json.loads(run_josefk(sasl_broker.plaintext, "users", "list", "--json"))
    carol = next(row for row in listed if row["user"] == "carol")
    assert [c["mechanism"] for c in carol["credentials"]] == ["SCRAM-SHA-256"]
    run_josefk(sasl_broker.plaintext, "users", "delete", "carol")
    assert "carol" not in {
        row["user"]
        for row in json.loads(run_josefk(sasl_broker.plaintext, "users", "list", "--json"))
    }
    run_josefk(sasl_broker.plaintext, "users", "delete", "carol", expect=1)


def test_alter_refuses_bad_upsertions_per_user(sasl_broker: SaslBroker) -> None:
    client = RawClient(sasl_broker.plaintext)
    try:
        req = request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
        answer = client.call(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            deletions=[req.ScramCredentialDeletion(name="nobody", mechanism=1)],
            upsertions=[
                req.ScramCredentialUpsertion(
                    name="few", mechanism=1, iterations=100, salt=b"s", salted_password=b"p"
                ),
                req.ScramCredentialUpsertion(
                    name="odd", mechanism=7, iterations=4096, salt=b"s", salted_password=b"p"
                ),
            ],
        )
        errors = {r.user: r.error_code for r in answer.results}
        assert errors == {"nobody": 91, "few": 93, "odd": 33}
        described = client.call(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            0,
            users=[request_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS).UserName(name="few")],
        )
        assert [(r.user, r.error_code) for r in described.results] == [("few", 91)]
    finally:
        client.close()


def test_a_session_past_its_lifetime_must_reauthenticate(tmp_path: Path) -> None:
    """KIP-368: the answer carries connections.max.reauth.ms; a re-authentication (a second
    SaslHandshake and SaslAuthenticate) is accepted; a connection that stops
    re-authenticating is closed at its first request after the lifetime."""
    started = _start_sasl_broker(tmp_path, "connections.max.reauth.ms=3000")
    client = RawClient(started.sasl)
    try:
        assert client.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == 0
        answer = client.call(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=b"\0alice\0alice-secret")
        assert answer.error_code == 0
        assert answer.session_lifetime_ms == 3000
        assert client.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == 0
        again = client.call(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=b"\0alice\0alice-secret")
        assert again.error_code == 0
        metadata = request_class(ApiKey.METADATA)(topics=None)
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        served = 0
        while True:
            assert time.monotonic() < deadline, "the expired session was never closed"
            _, frame = client.frame(ApiKey.METADATA, 1, metadata)
            try:
                client.sock.sendall(frame)
                header = client.sock.recv(4)
            except ConnectionError:
                break
            if not header:
                break
            size = struct.unpack(">i", header)[0]
            client._read_exactly(size)
            served += 1
            time.sleep(0.2)  # pacing of the client's requests, not a wait for state
        assert served >= 1
    finally:
        client.close()
        started.stop()


def test_v0_handshake_takes_raw_tokens(sasl_broker: SaslBroker) -> None:
    """KIP-43: after SaslHandshake v0 the token is a bare size-prefixed frame, answered the
    same way; then the connection is authenticated and served."""
    client = RawClient(sasl_broker.sasl)
    try:
        assert client.call(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN").error_code == 0
        token = b"\0alice\0alice-secret"
        client.sock.sendall(struct.pack(">i", len(token)) + token)
        assert struct.unpack(">i", client._read_exactly(4))[0] == 0
        metadata = client.call(ApiKey.METADATA, 1, topics=None)
        assert [b.node_id for b in metadata.brokers] == [1]
    finally:
        client.close()


def _log_mentions(sasl_broker: SaslBroker, text: str) -> bool:
    """Whether the broker's log says ``text``, polled until it does or a deadline passes."""
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while time.monotonic() < deadline:
        if text in sasl_broker.process.log_path.read_text(errors="replace"):
            return True
        time.sleep(0.05)
    return False


def test_a_frame_over_the_pre_authentication_limit_closes_at_its_size_prefix(
    sasl_broker: SaslBroker,
) -> None:
    """sasl.server.max.receive.size (512 KiB by default) bounds what a client that has not
    authenticated may send: the size prefix alone closes the connection, nothing of the
    body is waited for (Kafka's InvalidReceiveException)."""
    client = RawClient(sasl_broker.sasl)
    try:
        client.sock.sendall(struct.pack(">i", 524_289) + struct.pack(">hhi", 18, 3, 1))
        assert _closed(client.sock)
    finally:
        client.close()
    assert _log_mentions(sasl_broker, "larger than sasl.server.max.receive.size (524288)")


def test_after_authentication_socket_request_max_bytes_applies(sasl_broker: SaslBroker) -> None:
    """The pre-authentication limit ends with authentication: a 600 KiB Produce is taken."""
    topic = unique_topic("sasl-large")
    ck_create_topic(sasl_broker.plaintext, topic)
    producer = Producer(
        {
            "bootstrap.servers": sasl_broker.sasl,
            **_ck_sasl("SCRAM-SHA-512", "alice", "alice-secret"),
        }
    )
    errors: list[KafkaError] = []
    producer.produce(
        topic, b"v" * 600 * 1024, on_delivery=lambda err, _msg: errors.append(err) if err else None
    )
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    assert errors == []
    assert ck_watermarks(sasl_broker.plaintext, topic) == (0, 1)


def test_an_api_other_than_sasl_is_refused_from_its_header_before_decoding(
    sasl_broker: SaslBroker,
) -> None:
    """Before authentication the header's API key decides: a Metadata frame whose body
    could not even be decoded closes the connection as 'before SASL authentication', the
    body never reaching a decoder."""
    client = RawClient(sasl_broker.sasl)
    try:
        header = struct.pack(">hhih", int(ApiKey.METADATA), 12, 7, -1)
        body = b"\xff" * 64  # not a Metadata v12 body
        frame = header + b"\x00" + body
        client.sock.sendall(struct.pack(">i", len(frame)) + frame)
        assert _closed(client.sock)
    finally:
        client.close()
    assert _log_mentions(sasl_broker, "api key 3 before SASL authentication")
