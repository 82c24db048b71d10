"""MetricsExporter serves /metrics over loopback; fetched with urllib as a scraper would."""

from __future__ import annotations

import asyncio
import socket
import urllib.error
import urllib.request

import pytest

from josefk.metrics import BrokerMetrics, MetricsExporter, PartitionLogStats


def fetch(url: str, *, method: str = "GET", accept: str | None = None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, method=method)
    if accept is not None:
        request.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


async def fetch_async(url: str, **kwargs: str) -> tuple[int, str, bytes]:
    # urllib blocks; the exporter serves on this loop, so the fetch runs in a thread.
    return await asyncio.to_thread(fetch, url, **kwargs)


async def test_serves_probe_series_on_an_ephemeral_port() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    metrics.topics.produced("orders", messages=7, nbytes=700)
    metrics.requests.request_completed("Produce", 9, seconds=0.001)
    metrics.watch_partition_logs(lambda: [PartitionLogStats("orders", 0, 700, 1, 0, 7, 7)])
    async with MetricsExporter(metrics.registry, host="127.0.0.1", port=0) as exporter:
        assert exporter.port != 0
        status, content_type, body = await fetch_async(exporter.url)
    assert status == 200
    assert content_type.startswith("text/plain")
    text = body.decode()
    assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 7.0' in text
    assert 'kafka_log_log_logendoffset{partition="0",topic="orders"} 7.0' in text
    assert 'kafka_network_requestmetrics_requests_total{request="Produce",version="9"} 1.0' in text


async def test_scrapes_see_fresh_values() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    async with MetricsExporter(metrics.registry, port=0) as exporter:
        metrics.sockets.connection_opened("PLAINTEXT")
        _, _, first = await fetch_async(exporter.url)
        metrics.sockets.connection_opened("PLAINTEXT")
        _, _, second = await fetch_async(exporter.url)
    line = 'kafka_server_socketservermetrics_connection_count{listener="PLAINTEXT"}'
    assert f"{line} 1.0" in first.decode()
    assert f"{line} 2.0" in second.decode()


async def test_openmetrics_when_asked() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    metrics.topics.produced("t", messages=1, nbytes=1)
    async with MetricsExporter(metrics.registry, port=0) as exporter:
        status, content_type, body = await fetch_async(
            exporter.url, accept="application/openmetrics-text; version=1.0.0"
        )
    assert status == 200
    assert content_type.startswith("application/openmetrics-text")
    assert body.rstrip().endswith(b"# EOF")


async def test_other_paths_and_methods() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    async with MetricsExporter(metrics.registry, port=0) as exporter:
        base = f"http://127.0.0.1:{exporter.port}"
        status, _, body = await fetch_async(base + "/")
        assert status == 200 and b"/metrics" in body
        status, _, _ = await fetch_async(base + "/nope")
        assert status == 404
        status, _, _ = await fetch_async(base + "/metrics", method="POST")
        assert status == 405
        status, _, body = await fetch_async(base + "/metrics?x=1", method="HEAD")
        assert status == 200 and body == b""


async def test_garbage_request_gets_400_and_the_exporter_keeps_serving() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    async with MetricsExporter(metrics.registry, port=0) as exporter:
        reader, writer = await asyncio.open_connection("127.0.0.1", exporter.port)
        writer.write(b"\x00\x01garbage\r\n\r\n")
        await writer.drain()
        reply = await reader.read()
        writer.close()
        await writer.wait_closed()
        assert reply.startswith(b"HTTP/1.1 400 ")
        # A client that disconnects mid-request does no harm either.
        _, writer = await asyncio.open_connection("127.0.0.1", exporter.port)
        writer.write(b"GET /metr")
        writer.close()
        await writer.wait_closed()
        status, _, _ = await fetch_async(exporter.url)
        assert status == 200


async def test_oversized_head_is_dropped() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    async with MetricsExporter(metrics.registry, port=0) as exporter:
        reader, writer = await asyncio.open_connection("127.0.0.1", exporter.port)
        writer.write(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 100_000)
        try:
            await writer.drain()
            reply = await reader.read()
        except ConnectionError:
            reply = b""  # the server hung up with our bytes unread: a reset
        writer.close()
        assert reply == b""
        status, _, _ = await fetch_async(exporter.url)
        assert status == 200


async def test_stop_releases_the_port_and_is_idempotent() -> None:
    metrics = BrokerMetrics(process_metrics=False)
    exporter = MetricsExporter(metrics.registry, port=0)
    await exporter.start()
    await exporter.start()
    port = exporter.port
    await exporter.stop()
    await exporter.stop()
    with pytest.raises(RuntimeError):
        _ = exporter.port
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


async def test_two_brokers_two_exporters() -> None:
    first, second = BrokerMetrics(process_metrics=False), BrokerMetrics(process_metrics=False)
    first.topics.produced("one", messages=1, nbytes=1)
    second.topics.produced("two", messages=1, nbytes=1)
    async with (
        MetricsExporter(first.registry, port=0) as a,
        MetricsExporter(second.registry, port=0) as b,
    ):
        _, _, body_a = await fetch_async(a.url)
        _, _, body_b = await fetch_async(b.url)
    assert b'topic="one"' in body_a and b'topic="two"' not in body_a
    assert b'topic="two"' in body_b and b'topic="one"' not in body_b
