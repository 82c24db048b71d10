"""Connection settings a user sets are honoured, each shown with a real ``josefk serve``:
``socket.listen.backlog.size``, ``max.connections.per.ip``, ``max.connections`` and
``josefk.uvloop.enable``. Before, all four were validated and then ignored."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess, free_port, start_or_close, stop_broker
from client_helpers import (
    assert_delivered,
    ck_create_topic,
    ck_produce,
    make_messages,
    unique_topic,
)

from josefk.client.connection import BrokerConnection
from josefk.client.errors import KafkaConnectionError, KafkaTimeoutError
from josefk.protocol.api import ApiKey, request_class

pytestmark = pytest.mark.timeout(120)
ApiVersions = request_class(ApiKey.API_VERSIONS)
Fetch = request_class(ApiKey.FETCH)


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


def _long_poll(topic: str) -> Any:
    """A Fetch of partition 0 from offset 0 that waits two minutes for one byte."""
    return Fetch(
        replica_id=-1,
        max_wait_ms=120_000,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            Fetch.FetchTopic(
                topic=topic,
                partitions=[
                    Fetch.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


async def test_parked_long_polls_do_not_count_against_queued_max_requests(
    tmp_path: Path,
) -> None:
    """queued.max.requests=5 and 3 connections pipelining 4 long-poll Fetches each on an idle
    partition: the 12 parked fetches hold no place in the request queue (Kafka's holds only
    requests waiting for a handler), so another client's ApiVersions and Produce are answered,
    and the produce then answers the fetches. Before, ApiVersions waited for a fetch to time
    out."""
    broker = start_or_close(
        BrokerProcess(
            tmp_path / "data",
            tmp_path / "broker.stderr.log",
            settings=["queued.max.requests=5"],
            metrics_port=free_port(),
        )
    )
    topic = unique_topic("parked")
    ck_create_topic(broker.bootstrap, topic)
    pollers = [await open_connection(broker) for _ in range(3)]
    fetches = [
        asyncio.ensure_future(
            conn.request(ApiKey.FETCH, _long_poll(topic), version=12, timeout_s=150)
        )
        for conn in pollers
        for _ in range(4)
    ]
    try:
        other = await open_connection(broker)
        # Every fetch reached the broker and parked before the others ask: wait until the
        # broker's fetch purgatory holds all twelve (its metric), boundedly.
        await _until_parked(broker, 12)
        assert await serves(other, timeout_s=20)
        producer = await asyncio.to_thread(ck_produce, broker.bootstrap, topic, make_messages(1))
        assert_delivered(producer)
        answers = await asyncio.wait_for(asyncio.gather(*fetches), 20)
        for answer in answers:
            partition = answer.responses[0].partitions[0]
            assert partition.error_code == 0 and partition.records
        other.close()
    finally:
        for fetch in fetches:
            fetch.cancel()
        for conn in pollers:
            conn.close()
        stop_broker(broker)


async def _until_parked(broker: BrokerProcess, count: int) -> None:
    """Until the broker's fetch purgatory holds ``count`` fetches (from its metrics)."""
    deadline = asyncio.get_running_loop().time() + 20
    while asyncio.get_running_loop().time() < deadline:
        text = await asyncio.to_thread(_scrape, broker)
        for line in text.splitlines():
            if (
                line.startswith(
                    'kafka_server_delayedoperationpurgatory_numdelayedoperations{delayed_operation="Fetch"}'
                )
                and float(line.rsplit(" ", 1)[1]) >= count
            ):
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} fetches parked")


def _scrape(broker: BrokerProcess) -> str:
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=20) as response:
        return str(response.read().decode())
