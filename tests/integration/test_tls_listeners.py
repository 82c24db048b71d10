"""TLS on a real ``josefk serve`` with three listeners at once: PLAINTEXT, SSL (client
certificates required, set per listener with ``listener.name.ssl.*``) and SASL_SSL (SCRAM).

confluent-kafka and kafka-python produce and consume in a consumer group over SSL with a
client certificate and over SASL_SSL with SCRAM-SHA-512; aiokafka over SASL_SSL with
SCRAM-SHA-256. A client certificate of another CA, or none, is refused: the client reports
the failure and nothing is appended (the log end offset is read over PLAINTEXT). Clients that
connect and then send garbage, or nothing, do not hold up another client's handshake, and the
silent one is disconnected at ``josefk.ssl.handshake.timeout.ms``; both failures are counted.
Certificates come from ``tls_pki`` (the openssl command line).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import SOURCE_DIR, BrokerProcess, free_ports, stop_broker
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
from prometheus_client.parser import text_string_to_metric_families
from sasl_broker import start_sasl_broker
from tls_pki import Pki, make_pki

pytestmark = pytest.mark.timeout(180)

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
# Short, so the silent client below is cut off soon; long enough for a loaded machine.
HANDSHAKE_TIMEOUT_MS = 5000


class TlsBroker:
    def __init__(self, process: BrokerProcess, pki: Pki, ssl_port: int, sasl_ssl_port: int) -> None:
        self.process = process
        self.pki = pki
        self.plaintext = process.bootstrap
        self.ssl = f"127.0.0.1:{ssl_port}"
        self.sasl_ssl = f"127.0.0.1:{sasl_ssl_port}"
        self.ssl_port = ssl_port


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    base = tmp_path_factory.mktemp("josefk-tls")
    pki = make_pki(base / "pki")
    ssl_port, sasl_ssl_port, metrics_port = free_ports(3)
    process = start_sasl_broker(
        base,
        listeners="PLAINTEXT://127.0.0.1:0,"
        f"SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_ssl_port}",
        users=USERS,
        metrics_port=metrics_port,
        settings=[
            f"ssl.keystore.location={pki.server_keystore}",
            f"ssl.truststore.location={pki.ca}",
            # Client certificates on the SSL listener only; SASL_SSL authenticates by SASL.
            "listener.name.ssl.ssl.client.auth=required",
            "ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
            f"josefk.ssl.handshake.timeout.ms={HANDSHAKE_TIMEOUT_MS}",
            "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        ],
    )
    yield TlsBroker(process, pki, ssl_port, sasl_ssl_port)
    stop_broker(process)


def _ck_ssl(pki: Pki, *, cert: Path | None = None, key: Path | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    if cert is not None and key is not None:
        conf |= {"ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
    return conf


def _ck_sasl_ssl(pki: Pki, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
    return {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca),
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
        "sasl.password": USERS["alice"],
    }


def test_confluent_kafka_over_ssl_with_a_client_certificate(tls_broker: TlsBroker) -> None:
    pki = tls_broker.pki
    auth = _ck_ssl(pki, cert=pki.alice_cert, key=pki.alice_key)
    messages = make_messages(30, value_size=2000)
    ck_group_round_trip(
        tls_broker.ssl, tls_broker.plaintext, unique_topic("tls-ck"), messages, **auth
    )


def test_confluent_kafka_over_sasl_ssl_with_scram_sha_512(tls_broker: TlsBroker) -> None:
    messages = make_messages(30, value_size=2000)
    auth = _ck_sasl_ssl(tls_broker.pki)
    ck_group_round_trip(
        tls_broker.sasl_ssl, tls_broker.plaintext, unique_topic("tls-ck"), messages, **auth
    )


def test_kafka_python_over_ssl_with_a_client_certificate(tls_broker: TlsBroker) -> None:
    pki = tls_broker.pki
    auth = {
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.ca),
        "ssl_certfile": str(pki.alice_cert),
        "ssl_keyfile": str(pki.alice_key),
    }
    topic = unique_topic("tls-kafka-python")
    kafka_python_round_trip(tls_broker.ssl, tls_broker.plaintext, topic, **auth)


def test_kafka_python_over_sasl_ssl_with_scram_sha_512(tls_broker: TlsBroker) -> None:
    auth = {
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(tls_broker.pki.ca),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "bob",
        "sasl_plain_password": USERS["bob"],
    }
    topic = unique_topic("tls-kafka-python")
    kafka_python_round_trip(tls_broker.sasl_ssl, tls_broker.plaintext, topic, **auth)


def test_aiokafka_over_sasl_ssl_with_scram_sha_256(tls_broker: TlsBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = unique_topic("tls-aiokafka")
    ck_create_topic(tls_broker.plaintext, topic)

    async def run() -> list[bytes]:
        auth: dict[str, Any] = {
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(tls_broker.pki.ca)),
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": "alice",
            "sasl_plain_password": USERS["alice"],
        }
        producer = AIOKafkaProducer(bootstrap_servers=tls_broker.sasl_ssl, **auth)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"a{i}".encode(), partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=tls_broker.sasl_ssl,
            group_id=f"group-{topic}",
            auto_offset_reset="earliest",
            **auth,
        )
        await consumer.start()
        try:
            values: list[bytes] = []
            async with asyncio.timeout(CLIENT_TIMEOUT_S):
                while len(values) < 10:
                    batch = await consumer.getmany(timeout_ms=500)
                    values.extend(r.value for records in batch.values() for r in records)
            await consumer.commit()
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [f"a{i}".encode() for i in range(10)]


def test_large_fetches_over_ssl_match_what_was_produced(tls_broker: TlsBroker) -> None:
    """Several MiB per fetch: file regions go out in many encrypted chunks."""
    pki = tls_broker.pki
    auth = _ck_ssl(pki, cert=pki.alice_cert, key=pki.alice_key)
    topic = unique_topic("tls-large")
    ck_create_topic(tls_broker.plaintext, topic)
    messages = make_messages(400, value_size=20_000)
    assert_delivered(ck_produce(tls_broker.plaintext, topic, messages))
    got = ck_consume(tls_broker.ssl, topic, count=400, **auth)
    assert [m.value() for m in got] == [m.value for m in messages]


def test_the_plaintext_listener_serves_beside_the_tls_ones(tls_broker: TlsBroker) -> None:
    topic = unique_topic("tls-plain")
    ck_create_topic(tls_broker.plaintext, topic)
    messages = make_messages(10)
    assert_delivered(ck_produce(tls_broker.plaintext, topic, messages))
    pki = tls_broker.pki
    # Records produced in plaintext read back over TLS, on both TLS listeners.
    ssl_auth = _ck_ssl(pki, cert=pki.alice_cert, key=pki.alice_key)
    assert len(ck_consume(tls_broker.ssl, topic, count=10, **ssl_auth)) == 10
    assert len(ck_consume(tls_broker.sasl_ssl, topic, count=10, **_ck_sasl_ssl(pki))) == 10


# ------------------------------------------------------------------------------ refusals


def _failed_produce(bootstrap: str, topic: str, auth: dict[str, Any]) -> list[KafkaError]:
    """Produce one message with a short timeout; returns the errors the client reported."""
    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "message.timeout.ms": 5000,
            "error_cb": errors.append,
            **auth,
        }
    )
    delivered: list[KafkaError | None] = []
    producer.produce(
        topic, b"must not arrive", partition=0, on_delivery=lambda e, _m: delivered.append(e)
    )
    producer.flush(20)
    assert delivered and delivered[0] is not None, "the message was delivered"
    return errors + [e for e in delivered if e is not None]


@pytest.mark.parametrize("certificate", ["other-ca", "none"])
def test_a_bad_or_missing_client_certificate_is_refused(
    tls_broker: TlsBroker, certificate: str
) -> None:
    pki = tls_broker.pki
    topic = unique_topic(f"tls-refused-{certificate}")
    ck_create_topic(tls_broker.plaintext, topic)
    auth = (
        _ck_ssl(pki, cert=pki.mallory_cert, key=pki.mallory_key)
        if certificate == "other-ca"
        else _ck_ssl(pki)
    )
    errors = _failed_produce(tls_broker.ssl, topic, auth)
    assert any("SSL" in str(e) or "ssl" in str(e) for e in errors), errors
    assert ck_watermarks(tls_broker.plaintext, topic) == (0, 0)


def test_the_broker_alert_names_the_reason(tls_broker: TlsBroker) -> None:
    pki = tls_broker.pki
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.load_cert_chain(pki.mallory_cert, pki.mallory_key)
    with (
        socket.create_connection(("127.0.0.1", tls_broker.ssl_port), timeout=20) as raw,
        pytest.raises(ssl.SSLError, match=r"UNKNOWN_CA|unknown ca"),
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        # TLS 1.3: the client finishes first; the refusal arrives on its first read.
        tls.sendall(b"\0\0\0\0")
        tls.recv(1)


def _scrape(broker: BrokerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=20) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _failures(broker: BrokerProcess, reason: str) -> float:
    key = (
        "kafka_server_socketservermetrics_failed_tls_handshake_total",
        (("listener", "SSL"), ("reason", reason)),
    )
    return _scrape(broker).get(key, 0.0)


def _read_until_closed(sock: socket.socket) -> None:
    """Whatever the broker sends (a TLS alert) until it closes (a reset is a close too); the
    socket's timeout fails the test if it never does."""
    with contextlib.suppress(ConnectionResetError):
        while sock.recv(4096):
            pass


def test_stalled_and_garbage_handshakes_do_not_hold_up_a_client(tls_broker: TlsBroker) -> None:
    pki = tls_broker.pki
    timeouts_before = _failures(tls_broker.process, "timeout")
    refused_before = _failures(tls_broker.process, "refused")
    silent = socket.create_connection(("127.0.0.1", tls_broker.ssl_port), timeout=30)
    garbage = socket.create_connection(("127.0.0.1", tls_broker.ssl_port), timeout=30)
    try:
        garbage.sendall(b"\0\0\0\x10this is not a TLS ClientHello")
        # A real client completes its handshake and a round trip meanwhile.
        topic = unique_topic("tls-beside-stalled")
        ck_create_topic(tls_broker.plaintext, topic)
        auth = _ck_ssl(pki, cert=pki.alice_cert, key=pki.alice_key)
        assert_delivered(ck_produce(tls_broker.ssl, topic, make_messages(5), **auth))
        assert len(ck_consume(tls_broker.ssl, topic, count=5, **auth)) == 5
        # The garbage was refused; the silent one is closed at the handshake timeout.
        _read_until_closed(garbage)
        assert silent.recv(1) == b""
    finally:
        silent.close()
        garbage.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if (
            _failures(tls_broker.process, "timeout") > timeouts_before
            and _failures(tls_broker.process, "refused") > refused_before
        ):
            break
        time.sleep(0.1)  # polling the metric with a deadline, not waiting for state
    assert _failures(tls_broker.process, "timeout") > timeouts_before
    assert _failures(tls_broker.process, "refused") > refused_before


# ------------------------------------------------------------------------------ start-up


@pytest.mark.parametrize(
    ("settings", "fragments"),
    [
        (["ssl.keystore.location={missing}"], ["listener SSL", "{missing}", "cannot read"]),
        (["ssl.keystore.location={ca}"], ["{ca}", "holds no private key"]),
        (["ssl.keystore.location={keystore}", "ssl.keystore.type=JKS"], ["keytool"]),
        (["listener.name.ssl.ssl.keystore.location={keystore}", "ssl.enabled.protocols=TLSv1"],
         ["TLSv1 is not offered"]),
    ],
)  # fmt: skip
def test_tls_settings_that_cannot_work_stop_start_up_naming_them(
    tls_broker: TlsBroker, tmp_path: Path, settings: list[str], fragments: list[str]
) -> None:
    pki = tls_broker.pki
    names = {"missing": str(tmp_path / "missing.pem"), "ca": str(pki.ca)}
    names["keystore"] = str(pki.server_keystore)
    command = [sys.executable, "-m", "josefk", "serve", "--metrics-port", "0"]
    command += ["--data-dir", str(tmp_path / "data"), "--set", "listeners=SSL://127.0.0.1:0"]
    for setting in settings:
        command += ["--set", setting.format(**names)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOSEFK_")}
    env["PYTHONPATH"] = str(SOURCE_DIR)
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment.format(**names) in result.stderr, result.stderr
