"""The HTTP endpoint Prometheus scrapes: ``GET /metrics`` on the broker's event loop.

Owns ``MetricsExporter``, a minimal HTTP/1.x responder on ``asyncio.start_server``: no web
framework and no thread. Serving on the loop is deliberate: the scrape-time collectors read
broker state that only the loop thread may touch (see ``josefk.metrics.collectors``). The
text is rendered by prometheus-client in the format the ``Accept`` header asks for
(Prometheus text by default, OpenMetrics when requested).

Each connection carries one request and is closed after the response (``Connection:
close``); a scraper opens one connection per scrape, so keep-alive would buy nothing. Request
heads are capped at 16 KiB and must arrive within ``read_timeout`` seconds, so a stuck or
hostile client cannot pin memory or a task.

Must not import josefk.storage, josefk.broker or josefk.protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

__all__ = ["MetricsExporter"]

_log = logging.getLogger(__name__)

_MAX_HEAD: Final = 16 * 1024
_REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
}
_INDEX: Final = b"josefk metrics: see /metrics\n"


class MetricsExporter:
    """Serve a registry's metrics on ``host:port`` (port 0 picks a free port; see ``port``).

    Usage::

        exporter = MetricsExporter(metrics.registry, host="127.0.0.1", port=0)
        await exporter.start()
        ... exporter.port ...
        await exporter.stop()

    or ``async with MetricsExporter(...) as exporter:``. ``start`` and ``stop`` must be called
    from the event loop that will serve scrapes; ``stop`` is idempotent.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        host: str | None = "127.0.0.1",
        port: int = 9404,
        read_timeout: float = 10.0,
    ) -> None:
        self._registry = registry
        self._host = host
        self._requested_port = port
        self._read_timeout = read_timeout
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for); only valid after ``start``."""
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the metrics exporter is not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = self._host or "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/metrics"

    async def start(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(
            self._serve, host=self._host, port=self._requested_port, limit=_MAX_HEAD
        )

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        await server.wait_closed()

    async def __aenter__(self) -> MetricsExporter:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- one connection ----------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self._read_timeout)
            status, headers, body = self._respond(head)
            writer.write(_response_head(status, headers, len(body)))
            if not head.startswith(b"HEAD "):
                writer.write(body)
            await writer.drain()
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            TimeoutError,
            ConnectionError,
        ):
            pass
        finally:
            if task is not None:
                self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    def _respond(self, head: bytes) -> tuple[int, dict[str, str], bytes]:
        text_plain = {"Content-Type": "text/plain; charset=utf-8"}
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return 400, text_plain, b"bad request line\n"
        method, target, _ = parts
        if method not in ("GET", "HEAD"):
            return 405, {**text_plain, "Allow": "GET, HEAD"}, b"only GET and HEAD\n"
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        path = target.split("?", 1)[0]
        if path == "/":
            return 200, text_plain, _INDEX
        if path != "/metrics":
            return 404, text_plain, b"not found; metrics are at /metrics\n"
        encoder, content_type = choose_encoder(headers.get("accept", ""))
        try:
            body = encoder(self._registry)
        except Exception:  # noqa: BLE001  logged; the scraper gets a 500
            _log.exception("rendering /metrics failed")
            return 500, text_plain, b"metrics rendering failed\n"
        return 200, {"Content-Type": content_type}, body


def _response_head(status: int, headers: dict[str, str], length: int) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}"]
    lines.extend(f"{name}: {value}" for name, value in headers.items())
    lines.append(f"Content-Length: {length}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
