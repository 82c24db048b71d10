"""TLS server contexts from Kafka's ``ssl.*`` settings, and a listener's context reloaded live.

Contexts are checked by handshakes in memory (two ``SSLObject``s over memory BIOs); the
reload through ``Broker.reconfigurables`` is checked on an in-process broker with a real TLS
client. Bad settings are refused naming the key and the file.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from pathlib import Path

import pytest
from tls_pki import KEY_PASSWORD, Pki, make_pki

from josefk.broker.reconfigurable import ReconfigurationError
from josefk.broker.security.tls import TlsConfigError, TlsListener, build_server_context
from josefk.broker.server import Broker
from josefk.config.broker import BrokerConfig


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _client_context(pki: Pki, *, certificate: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if certificate:
        context.load_cert_chain(pki.alice_cert, pki.alice_key)
    return context


def _handshake(server_context: ssl.SSLContext, client_context: ssl.SSLContext) -> dict[str, object]:
    """A handshake in memory; returns the server certificate the client saw."""
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server = server_context.wrap_bio(server_in, server_out, server_side=True)
    client = client_context.wrap_bio(client_in, client_out, server_hostname="localhost")
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    # TLS 1.3 checks the client's certificate after the client thinks it is done: a refusal
    # reaches the client on its first read.
    client.write(b"ping")
    server_in.write(client_out.read())
    assert server.read(4) == b"ping"
    peer = client.getpeercert()
    assert peer is not None
    return dict(peer)


def _subject(peer: dict[str, object]) -> dict[str, str]:
    return {k: v for rdn in peer["subject"] for k, v in rdn}  # type: ignore[attr-defined]


def test_keystore_file_and_truststore(pki: Pki) -> None:
    context = build_server_context(
        {
            "ssl.keystore.location": str(pki.server_keystore),
            "ssl.truststore.location": str(pki.ca),
            "ssl.client.auth": "required",
        }
    )
    assert _subject(_handshake(context, _client_context(pki)))["commonName"] == "localhost"
    with pytest.raises(ssl.SSLError):
        _handshake(context, _client_context(pki, certificate=False))


def test_inline_pem_even_when_a_properties_file_joined_its_lines(pki: Pki) -> None:
    one_line = lambda path: " ".join(path.read_text().splitlines())  # noqa: E731
    context = build_server_context(
        {
            "ssl.keystore.certificate.chain": one_line(pki.server_cert) + one_line(pki.ca),
            "ssl.keystore.key": one_line(pki.server_key),
            "ssl.truststore.certificates": one_line(pki.ca),
            "ssl.client.auth": "requested",
        }
    )
    assert _subject(_handshake(context, _client_context(pki)))["organizationName"] == "josefk"


def test_encrypted_key(pki: Pki, tmp_path: Path) -> None:
    keystore = tmp_path / "encrypted-keystore.pem"
    keystore.write_text(pki.server_key_encrypted.read_text() + pki.server_cert.read_text())
    settings = {"ssl.keystore.location": str(keystore)}
    context = build_server_context({**settings, "ssl.key.password": KEY_PASSWORD})
    _handshake(context, _client_context(pki, certificate=False))
    with pytest.raises(TlsConfigError, match=r"ssl\.key\.password.*encrypted"):
        build_server_context(settings)
    with pytest.raises(TlsConfigError, match="does not decrypt"):
        build_server_context({**settings, "ssl.key.password": "wrong"})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ssl.keystore.location": "/nonexistent/ks.pem"}, r"/nonexistent/ks.pem: cannot read"),
        ({"ssl.keystore.password": "x"}, "only the key itself|ssl.key.password"),
        ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, "TLSv1.1 is not offered"),
        ({"ssl.protocol": "SSLv3"}, "expected TLSv1.3"),
        ({"ssl.client.auth": "sometimes"}, "none, requested or required"),
        ({"ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}, "not a cipher suite"),
        ({"ssl.truststore.password": "x"}, "PEM truststore"),
        (
            {"ssl.keystore.location": None, "ssl.keystore.certificate.chain": "x"},
            "ssl.keystore.key",
        ),
    ],
)
def test_bad_settings_name_the_key(pki: Pki, settings: dict[str, str | None], message: str) -> None:
    merged = {"ssl.keystore.location": str(pki.server_keystore), **settings}
    with pytest.raises(TlsConfigError, match=message):
        build_server_context({k: v for k, v in merged.items() if v is not None})


def test_a_jks_file_is_refused_with_how_to_convert(pki: Pki, tmp_path: Path) -> None:
    jks = tmp_path / "server.jks"
    jks.write_bytes(bytes.fromhex("feedfeed00000002") + b"\0" * 64)
    with pytest.raises(TlsConfigError, match=r"server.jks: is not a PEM file.*keytool"):
        build_server_context({"ssl.keystore.location": str(jks)})


def test_protocols_and_cipher_suites(pki: Pki) -> None:
    base = {"ssl.keystore.location": str(pki.server_keystore)}
    only12 = build_server_context({**base, "ssl.protocol": "TLSv1.2"})
    assert only12.maximum_version == ssl.TLSVersion.TLSv1_2
    # IANA names, as a JVM takes them; TLS 1.2 suites alone rule TLS 1.3 out.
    suites = build_server_context(
        {**base, "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}
    )
    assert suites.maximum_version == ssl.TLSVersion.TLSv1_2
    assert [c["name"] for c in suites.get_ciphers() if c["protocol"] == "TLSv1.2"] == [
        "ECDHE-ECDSA-AES256-GCM-SHA384"
    ]
    only13 = build_server_context({**base, "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"})
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3


# ------------------------------------------------------------------------------ reloading


def test_the_listener_reloads_its_keystore_for_new_connections(pki: Pki) -> None:
    listener = TlsListener(
        "SECURE",
        "SSL",
        static_settings={"ssl.keystore.location": str(pki.server_keystore)},
        handshake_timeout_ms=1000,
    )
    assert "listener.name.secure.ssl.keystore.location" in listener.reconfigurable_configs()
    assert "ssl.truststore.certificates" in listener.reconfigurable_configs()
    before = listener.context
    bad = {"listener.name.secure.ssl.keystore.location": "/gone/keystore.pem"}
    with pytest.raises(ReconfigurationError, match=r"/gone/keystore\.pem"):
        listener.validate_reconfiguration(bad)
    assert listener.context is before

    # The listener-prefixed key wins over the broker-wide one.
    change = {
        "ssl.keystore.location": str(pki.server_keystore),
        "listener.name.secure.ssl.keystore.location": str(pki.other_server_keystore),
    }
    listener.validate_reconfiguration(change)
    listener.reconfigure(change)
    client = _client_context(pki, certificate=False)
    assert _subject(_handshake(listener.context, client)).get("organizationalUnitName") == "rotated"
    # A connection accepted before keeps the context it started with.
    assert "organizationalUnitName" not in _subject(_handshake(before, client))


async def _api_versions(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """One ApiVersions v0 request; returns its error code."""
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    writer.write(struct.pack(">i", len(body)) + body)
    await writer.drain()
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    answer = await reader.readexactly(size)
    correlation, error = struct.unpack_from(">ih", answer)
    assert correlation == 7
    return int(error)


async def test_reconfiguring_a_running_broker(pki: Pki, tmp_path: Path) -> None:
    broker = Broker(
        BrokerConfig.from_properties(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                "log.dirs": str(tmp_path / "data"),
                "josefk.metrics.enable": "false",
                "listener.name.ssl.ssl.keystore.location": str(pki.server_keystore),
            }
        )
    )
    endpoints = await broker.start()
    try:
        port = next(e.port for e in endpoints if e.listener_name == "SSL")
        # The dynamic broker config registers parts of its own (the log cleaner...).
        (holder,) = [part for part in broker.reconfigurables if isinstance(part, TlsListener)]
        assert "listener.name.ssl.ssl.keystore.location" in broker.reconfigurables.configs()
        client = _client_context(pki, certificate=False)
        old = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname="localhost"
        )
        assert await _api_versions(*old) == 0

        change = {"listener.name.ssl.ssl.keystore.location": str(pki.other_server_keystore)}
        holder.validate_reconfiguration(change)
        holder.reconfigure(change)
        new = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname="localhost"
        )
        peer = new[1].get_extra_info("peercert")
        assert _subject(peer).get("organizationalUnitName") == "rotated"
        assert await _api_versions(*new) == 0
        # The connection made before the change goes on with its own certificate.
        assert "organizationalUnitName" not in _subject(old[1].get_extra_info("peercert"))
        assert await _api_versions(*old) == 0
        for _, writer in (old, new):
            writer.close()
    finally:
        await broker.stop(1)
