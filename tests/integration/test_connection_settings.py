"""Connection settings a user sets are honoured, each shown with a real ``josefk serve``:
``socket.listen.backlog.size``, ``max.connections.per.ip``, ``max.connections`` and
``josefk.uvloop.enable``. Before, all four were validated and then ignored."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from typing import Any

import pytest
from broker_process import BrokerProcess

from josefk.client.connection import BrokerConnection
from josefk.client.errors import KafkaConnectionError, KafkaTimeoutError
from josefk.protocol.api import ApiKey, request_class

pytestmark = pytest.mark.timeout(120)
ApiVersions = request_class(ApiKey.API_VERSIONS)


async def open_connection(broker: BrokerProcess) -> BrokerConnection:
    return await BrokerConnection.open(
        broker.host, broker.port, node_id=0, client_id="settings", timeout_s=5
    )


async def serves(conn: BrokerConnection, timeout_s: float = 5) -> bool:
    try:
        response = await conn.request(ApiKey.API_VERSIONS, ApiVersions(), timeout_s=timeout_s)
    except (KafkaConnectionError, KafkaTimeoutError):
        return False
    return bool(response.error_code == 0)


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")
def test_listen_backlog(broker_factory: Any) -> None:
    broker = broker_factory(settings=["socket.listen.backlog.size=7"])
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{broker.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    # For a listening socket, ss shows the backlog in the Send-Q column.
    assert out[0] == "LISTEN" and out[2] == "7", out


async def test_max_connections_per_ip(broker_factory: Any) -> None:
    broker = broker_factory(settings=["max.connections.per.ip=2"])
    first, second = await open_connection(broker), await open_connection(broker)
    with pytest.raises(KafkaConnectionError):
        await open_connection(broker)  # the broker closes the third at once
    assert await serves(first) and await serves(second)
    first.close()
    # The broker notices the close on its own schedule: ask again, boundedly.
    for _ in range(50):
        try:
            third = await open_connection(broker)
            break
        except KafkaConnectionError:
            await asyncio.sleep(0.1)
    else:
        raise AssertionError("a slot freed by a closed connection was never given back")
    assert await serves(third)
    second.close()
    third.close()


async def test_max_connections(broker_factory: Any) -> None:
    broker = broker_factory(settings=["max.connections=2"])
    first, second = await open_connection(broker), await open_connection(broker)
    # The third connection waits in the listen backlog: connected, but not served.
    reader, writer = await asyncio.open_connection(broker.host, broker.port)
    frame = bytes.fromhex("0000000e0012000000000001000474657374")
    writer.write(frame)
    await writer.drain()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.readexactly(4), 1.0)
    first.close()
    size = await asyncio.wait_for(reader.readexactly(4), 10)  # served once a slot is free
    assert int.from_bytes(size, "big") > 0
    writer.close()
    second.close()


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_uvloop_setting(broker_factory: Any, enabled: str) -> None:
    broker = broker_factory(settings=[f"josefk.uvloop.enable={enabled}"])
    expected = "event loop: uvloop" if enabled == "true" else "event loop: asyncio"
    assert expected in broker.stderr_tail()
