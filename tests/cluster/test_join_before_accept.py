"""A cluster broker accepts no client before it has joined: a request sent as soon as the TCP
connect succeeds (the listener is bound while the broker joins) is answered with the
cluster's view, and a broker whose join fails never answers it.

Broker 2 is a real ``josefk serve`` process on a real etcd; broker 1 runs in this process so
that its join can be held at the door (a wrapper around ``ClusterNode.join`` that waits for
the test before calling the real one: the only fake here, and it changes no behaviour). The
window between binding and joining is otherwise a few etcd round trips long, too short to
aim a client at without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from etcd_server import EtcdServer

from josefk.broker.cluster_node import ClusterNode
from josefk.broker.server import Broker, StartupError
from josefk.config.broker import BrokerConfig
from josefk.protocol.api import ApiKey, decode_response, encode_request, request_class
from josefk.protocol.headers import RequestHeader

pytestmark = pytest.mark.timeout(120)

WAIT_S = 60.0
METADATA_VERSION = 12


class HeldJoin:
    """Holds every ``ClusterNode.join`` until released, telling the test the endpoints it
    is about to register (the bound ports)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.joining = asyncio.Event()
        self.release = asyncio.Event()
        self.endpoints: list[tuple[str, str, int]] = []
        real_join = ClusterNode.join

        async def held(
            node: ClusterNode, endpoints: Sequence[tuple[str, str, int]], **kwargs: Any
        ) -> None:
            self.endpoints = list(endpoints)
            self.joining.set()
            await self.release.wait()
            await real_join(node, endpoints, **kwargs)

        monkeypatch.setattr(ClusterNode, "join", held)


@pytest.fixture
def other_broker(etcd: EtcdServer, tmp_path: Path) -> Iterator[BrokerProcess]:
    """Broker 2, a real process, already a member when broker 1 starts."""
    broker = BrokerProcess(
        tmp_path / "broker2" / "data",
        tmp_path / "broker2.stderr.log",
        settings=["broker.id=2", f"josefk.etcd.endpoints={etcd.endpoint}"],
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


def in_process_config(etcd: EtcdServer, data: Path, broker_id: int) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "broker.id": str(broker_id),
            "josefk.etcd.endpoints": etcd.endpoint,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(data),
            "josefk.metrics.enable": "false",
        }
    )


def metadata_request(correlation_id: int) -> bytes:
    header = RequestHeader(
        request_api_key=ApiKey.METADATA,
        request_api_version=METADATA_VERSION,
        correlation_id=correlation_id,
        client_id="join-before-accept",
    )
    return encode_request(header, request_class(ApiKey.METADATA)(topics=[]))


async def read_response(reader: asyncio.StreamReader) -> tuple[int, Any]:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return decode_response(await reader.readexactly(size), ApiKey.METADATA, METADATA_VERSION)


async def ask_during_join(
    held: HeldJoin, correlation_id: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Once the join is held, connect to the bound listener and send a Metadata request."""
    async with asyncio.timeout(WAIT_S):
        await held.joining.wait()
    (_listener, host, port) = held.endpoints[0]
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(metadata_request(correlation_id=correlation_id))
    await writer.drain()
    return reader, writer


async def test_a_request_sent_while_the_broker_joins_gets_the_clusters_view(
    etcd: EtcdServer, other_broker: BrokerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldJoin(monkeypatch)
    broker = Broker(in_process_config(etcd, tmp_path / "broker1", 1))
    starting = asyncio.create_task(broker.start())
    writer: asyncio.StreamWriter | None = None
    try:
        # The listener is bound: the connect succeeds and the request waits, unread.
        reader, writer = await ask_during_join(held, correlation_id=7)
        assert not starting.done()

        held.release.set()
        async with asyncio.timeout(WAIT_S):
            correlation_id, response = await read_response(reader)
            await starting
        assert correlation_id == 7
        # A single node's answer would name broker 1 alone (or none: no metadata yet).
        assert sorted(b.node_id for b in response.brokers) == [1, 2]
    finally:
        if writer is not None:
            writer.close()
        held.release.set()
        with contextlib.suppress(Exception):
            await starting
        await broker.stop(1)


async def test_a_broker_whose_join_fails_answers_no_one(
    etcd: EtcdServer, other_broker: BrokerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broker id 2 is taken by the live process: the real join refuses, start-up fails, and
    the client that connected while it tried is closed on without an answer."""
    held = HeldJoin(monkeypatch)
    broker = Broker(in_process_config(etcd, tmp_path / "imposter", 2))
    starting = asyncio.create_task(broker.start())
    stopped = False
    try:
        reader, writer = await ask_during_join(held, correlation_id=1)

        held.release.set()
        with pytest.raises(StartupError, match=r"broker\.id"):
            async with asyncio.timeout(WAIT_S):
                await starting
        # What ``josefk serve`` does when start fails: the bound listener closes with it.
        stopped = True
        await broker.stop(0)
        try:
            async with asyncio.timeout(WAIT_S):
                answered = await reader.read()
        except ConnectionResetError:
            answered = b""
        assert answered == b""
        writer.close()
        (_listener, host, port) = held.endpoints[0]
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection(host, port)
    finally:
        held.release.set()
        with contextlib.suppress(Exception):
            await starting
        if not stopped:
            await broker.stop(0)
