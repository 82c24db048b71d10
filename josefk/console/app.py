"""The console's web application: the aiohttp app, its clients and its life cycle.

Owns ``ConsoleSettings``, ``build_app`` (pages, ``/api/``, ``/static/``, and the start-up and
clean-up that open and close the admin client, the sampler and the metrics scraper with the
app) and ``serve`` (run until cancelled, calling back with the URL once listening).

Imports josefk.client only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from josefk.client import AIOAdmin
from josefk.client.errors import KafkaError
from josefk.console import api, pages
from josefk.console.history import History
from josefk.console.metrics import MetricsScraper
from josefk.console.sampler import Sampler

log = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).resolve().parent / "static"


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    bootstrap: str
    client_settings: dict[str, Any] = field(default_factory=dict)
    # Seconds between two looks at the cluster, and how many of them the charts keep.
    interval: float = 5.0
    history_samples: int = 120
    metrics_urls: Sequence[str] = ()


def build_app(settings: ConsoleSettings) -> web.Application:
    app = web.Application(middlewares=[api.same_origin_actions])
    pages.add_routes(app)
    api.add_routes(app)
    app.router.add_static("/static/", STATIC_DIR)

    async def clients(app: web.Application) -> AsyncIterator[None]:
        admin = AIOAdmin(
            bootstrap_servers=settings.bootstrap,
            client_id="josefk-console",
            request_timeout_ms=10_000,
            connect_timeout_ms=3_000,
            **settings.client_settings,
        )
        try:
            await admin.start()
        except KafkaError as exc:
            # The cluster may come up after the console (a compose file starts both): serve
            # the pages, which say that no broker answers, and keep asking.
            log.warning("no broker answered at %s yet: %s", settings.bootstrap, exc)
        history = History(settings.history_samples)
        metrics = MetricsScraper(settings.metrics_urls) if settings.metrics_urls else None
        sampler = Sampler(admin, history, interval=settings.interval, metrics=metrics)
        console = api.Console(
            admin, sampler, history, dict(settings.client_settings), settings.bootstrap
        )
        app["console"] = console
        sampler.start()
        # The first page shows data when the cluster answers at once; a cluster that does not
        # answer (yet) must not keep the console from serving the page that says so.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(3.0):
                await sampler.ready()
        yield
        await sampler.close()
        await console.close()
        if metrics is not None:
            await metrics.close()
        await admin.close()

    app.cleanup_ctx.append(clients)
    return app


async def serve(
    settings: ConsoleSettings,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until cancelled; ``on_ready`` gets the URL (the real port when ``port`` is 0)."""
    runner = web.AppRunner(build_app(settings), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        server = site._server  # aiohttp exposes the bound sockets only here
        sockets = getattr(server, "sockets", None) or []
        bound = sockets[0].getsockname()[1] if sockets else port
        shown = f"[{host}]" if ":" in host else host
        if on_ready is not None:
            on_ready(f"http://{shown}:{bound}/")
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
