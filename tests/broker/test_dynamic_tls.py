"""A TLS listener's keystore rotated with IncrementalAlterConfigs (KIP-226), on an in-process
broker with a real TLS client: the new certificate is served without a restart, the change is
stored and served again after a restart, and Kafka's refusals (a bare ``ssl.*`` key, a
listener key at the cluster default, an unreadable file) change nothing.

Needs the TLS listeners (``josefk.broker.security.tls`` and tests/tls_pki.py); skips, saying
so, on a tree without them.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from pathlib import Path
from typing import Any

import pytest

from josefk.broker.server import Broker
from josefk.client import AIOAdmin, ConfigSource, ResourceType
from josefk.client.errors import KafkaError
from josefk.config.broker import BrokerConfig

tls_pki = pytest.importorskip("tls_pki", reason="needs the TLS listeners (tests/tls_pki.py)")
pytest.importorskip("josefk.broker.security.tls", reason="needs the TLS listeners")

KEYSTORE = "listener.name.ssl.ssl.keystore.location"


def broker_for(pki: Any, data: Path) -> Broker:
    return Broker(
        BrokerConfig.from_properties(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                "log.dirs": str(data),
                "josefk.metrics.enable": "false",
                KEYSTORE: str(pki.server_keystore),
            }
        )
    )


async def served_unit(pki: Any, port: int) -> str | None:
    """The organizational unit of the certificate the SSL listener presents; one ApiVersions
    over the connection shows it serves."""
    client = ssl.create_default_context(cafile=str(pki.ca))
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=client, server_hostname="localhost"
    )
    try:
        body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
        writer.write(struct.pack(">i", len(body)) + body)
        await writer.drain()
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        correlation, error = struct.unpack_from(">ih", await reader.readexactly(size))
        assert (correlation, error) == (7, 0)
        peer = writer.get_extra_info("peercert")
        subject = {k: v for rdn in peer["subject"] for k, v in rdn}
        return subject.get("organizationalUnitName")
    finally:
        writer.close()


async def test_a_keystore_rotated_through_the_admin_api(tmp_path: Path) -> None:
    pki = tls_pki.make_pki(tmp_path / "pki")
    broker = broker_for(pki, tmp_path / "data")
    endpoints = await broker.start()
    try:
        plain = next(e.port for e in endpoints if e.listener_name == "PLAINTEXT")
        port = next(e.port for e in endpoints if e.listener_name == "SSL")
        assert await served_unit(pki, port) != "rotated"
        async with AIOAdmin(bootstrap_servers=f"127.0.0.1:{plain}") as admin:
            refusals = [
                # Per listener only, per broker only, and a file the listener cannot load.
                ("1", {"ssl.keystore.location": str(pki.other_server_keystore)}, "INVALID_REQUEST"),
                ("", {KEYSTORE: str(pki.other_server_keystore)}, "INVALID_REQUEST"),
                ("1", {KEYSTORE: str(tmp_path / "missing.pem")}, "INVALID_CONFIG"),
            ]
            for name, change, code in refusals:
                with pytest.raises(KafkaError) as info:
                    await admin.alter_configs((ResourceType.BROKER, name), change)
                assert info.value.name == code, info.value
            assert await served_unit(pki, port) != "rotated"

            await admin.alter_configs(
                (ResourceType.BROKER, "1"), {KEYSTORE: str(pki.other_server_keystore)}
            )
            assert await served_unit(pki, port) == "rotated"
            described = await admin.describe_configs(
                [(ResourceType.BROKER, "1")], include_synonyms=True
            )
            entry = described[(ResourceType.BROKER, "1")][KEYSTORE]
            assert (entry.value, entry.source, entry.read_only) == (
                str(pki.other_server_keystore),
                ConfigSource.DYNAMIC_BROKER_CONFIG,
                False,
            )
            assert [s.source for s in entry.synonyms][:2] == [
                ConfigSource.DYNAMIC_BROKER_CONFIG,
                ConfigSource.STATIC_BROKER_CONFIG,
            ]
    finally:
        await broker.stop(1)

    again = broker_for(pki, tmp_path / "data")
    endpoints = await again.start()
    try:
        port = next(e.port for e in endpoints if e.listener_name == "SSL")
        assert await served_unit(pki, port) == "rotated"
    finally:
        await again.stop(1)
