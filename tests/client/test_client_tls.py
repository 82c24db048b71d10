"""josefk's client over TLS (SSL and SASL_SSL), against a real broker behind an in-test TLS
terminator: an asyncio TLS server (certificates made with the ``openssl`` command line) that
forwards the decrypted bytes to the broker's PLAINTEXT or SASL_PLAINTEXT listener, which
advertises the terminator's address. This tests the client's side of TLS (CA, hostname
check, client certificate with an encrypted key) without the broker's TLS listeners; the
broker's own TLS is tested where it is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess, free_ports
from sasl_broker import start_sasl_broker, stop_broker

from josefk.client import AIOAdmin, AIOConsumer, AIOProducer
from josefk.client.errors import SslAuthenticationError

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command"),
]
CALL_TIMEOUT_S = 30.0
KEY_PASSWORD = "client-key-pw"


@dataclass(frozen=True)
class Certificates:
    ca: Path
    other_ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path  # encrypted with KEY_PASSWORD


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(directory: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
        cwd=directory,
    )  # fmt: skip


def _signed(directory: Path, name: str, subject: str, extensions: str, *key_args: str) -> None:
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", *key_args,
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
        cwd=directory,
    )  # fmt: skip
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
        cwd=directory,
    )  # fmt: skip


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    directory = tmp_path_factory.mktemp("josefk-client-tls-certs")
    _ca(directory, "ca")
    _ca(directory, "other-ca")
    _signed(
        directory, "server", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        "-nodes",
    )  # fmt: skip
    _signed(
        directory, "client", "/CN=alice", "extendedKeyUsage=clientAuth\n",
        "-passout", f"pass:{KEY_PASSWORD}",
    )  # fmt: skip
    return Certificates(
        ca=directory / "ca.pem",
        other_ca=directory / "other-ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
    )


class Terminated:
    """A broker whose listeners are reached through TLS terminators on ``tls_ports``."""

    def __init__(self, process: BrokerProcess, tls_ports: dict[str, int], targets: dict[str, int]):
        self.process = process
        self.tls_ports = tls_ports
        self.targets = targets

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.tls_ports[listener]}"


@pytest.fixture(scope="module")
def terminated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Terminated]:
    plain, sasl_plain, tls_plain, tls_sasl_plain = free_ports(4)
    targets = {"PLAINTEXT": plain, "SASL_PLAINTEXT": sasl_plain}
    tls_ports = {"PLAINTEXT": tls_plain, "SASL_PLAINTEXT": tls_sasl_plain}
    base = tmp_path_factory.mktemp("josefk-client-tls")
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in targets.items())
    advertised = ",".join(f"{name}://127.0.0.1:{port}" for name, port in tls_ports.items())
    process = start_sasl_broker(
        base,
        listeners=listeners,
        users={"alice": "alice-secret"},
        settings=[f"advertised.listeners={advertised}", "group.initial.rebalance.delay.ms=0"],
        port=targets["PLAINTEXT"],
    )
    yield Terminated(process, tls_ports, targets)
    stop_broker(process)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def tls_terminators(
    broker: Terminated, certificates: Certificates, *, require_client_cert: bool = False
) -> AsyncIterator[None]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates.server_cert, certificates.server_key)
    if require_client_cert:
        context.load_verify_locations(certificates.ca)
        context.verify_mode = ssl.CERT_REQUIRED
    servers = []
    for listener, tls_port in broker.tls_ports.items():
        target = broker.targets[listener]

        async def forward(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: int = target
        ) -> None:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
            except OSError:
                writer.close()
                return
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

        # Also on 127.0.0.2, an address the server certificate does not name.
        for host in ("127.0.0.1", "127.0.0.2"):
            servers.append(await asyncio.start_server(forward, host, tls_port, ssl=context))
    try:
        yield
    finally:
        for server in servers:
            server.close()


def _ssl(certificates: Certificates, **extra: Any) -> dict[str, Any]:
    return {
        "security_protocol": "SSL",
        "ssl_ca_location": str(certificates.ca),
        "ssl_certificate_location": str(certificates.client_cert),
        "ssl_key_location": str(certificates.client_key),
        "ssl_key_password": KEY_PASSWORD,
        **extra,
    }


async def _round_trip(bootstrap: str, settings: dict[str, Any], topic: str) -> list[bytes]:
    async with asyncio.timeout(CALL_TIMEOUT_S):
        async with AIOAdmin(bootstrap_servers=bootstrap, **settings) as admin:
            await admin.create_topic(topic, num_partitions=1)
        async with AIOProducer(bootstrap_servers=bootstrap, **settings) as producer:
            for i in range(5):
                await producer.send(topic, f"v{i}".encode())
            await producer.flush()
        async with AIOConsumer(
            topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **settings
        ) as consumer:
            values: list[bytes] = []
            while len(values) < 5:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    values += [r.value for r in records if r.value is not None]
    return values


def test_ssl_with_a_client_certificate_and_sasl_ssl(
    terminated: Terminated, certificates: Certificates
) -> None:
    async def run() -> None:
        async with tls_terminators(terminated, certificates, require_client_cert=True):
            values = await _round_trip(
                terminated.address("PLAINTEXT"), _ssl(certificates), "tls-ssl"
            )
            assert values == [f"v{i}".encode() for i in range(5)]
            sasl_ssl = _ssl(
                certificates,
                security_protocol="SASL_SSL",
                sasl_mechanism="SCRAM-SHA-512",
                sasl_username="alice",
                sasl_password="alice-secret",
            )
            values = await _round_trip(
                terminated.address("SASL_PLAINTEXT"), sasl_ssl, "tls-sasl-ssl"
            )
            assert values == [f"v{i}".encode() for i in range(5)]

    asyncio.run(run())


async def _refusal(bootstrap: str, settings: dict[str, Any]) -> BaseException:
    with pytest.raises(Exception) as caught:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            async with AIOAdmin(bootstrap_servers=bootstrap, **settings) as admin:
                await admin.list_topics()
    return caught.value


def test_untrusted_or_misnamed_broker_and_tls_to_plaintext_fail_at_once(
    terminated: Terminated, certificates: Certificates
) -> None:
    async def run() -> None:
        async with tls_terminators(terminated, certificates):
            address = terminated.address("PLAINTEXT")
            plain = {"security_protocol": "SSL", "ssl_ca_location": str(certificates.ca)}
            untrusted = await _refusal(
                address, {**plain, "ssl_ca_location": str(certificates.other_ca)}
            )
            assert isinstance(untrusted, SslAuthenticationError), repr(untrusted)
            assert "CERTIFICATE_VERIFY_FAILED" in str(untrusted)
            # The certificate names 127.0.0.1 and localhost, not the address connected to...
            misnamed_address = address.replace("127.0.0.1", "127.0.0.2")
            misnamed = await _refusal(misnamed_address, plain)
            assert isinstance(misnamed, SslAuthenticationError), repr(misnamed)
            assert "CERTIFICATE_VERIFY_FAILED" in str(misnamed)
            # ... which ssl.endpoint.identification.algorithm=none accepts (the CA still counts).
            async with asyncio.timeout(CALL_TIMEOUT_S):
                async with AIOAdmin(
                    bootstrap_servers=misnamed_address,
                    ssl_endpoint_identification_algorithm="none",
                    **plain,
                ) as admin:
                    await admin.describe_cluster()
            to_plaintext = await _refusal(f"127.0.0.1:{terminated.targets['PLAINTEXT']}", plain)
            assert isinstance(to_plaintext, SslAuthenticationError), repr(to_plaintext)
            assert "security.protocol" in str(to_plaintext)

    asyncio.run(run())
