"""``josefk console``: serve the web console for a cluster until Ctrl-C.

Owns the verb's options (the bootstrap and security options every client verb has,
``--listen``, ``--metrics-url``, the sampling interval and history length) and its one
output line, the URL. The console itself is josefk.console.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

import click

from josefk.cli.common import CliError, bootstrap_option, client_settings, resolve_bootstrap

DEFAULT_LISTEN = "127.0.0.1:8080"


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise click.BadParameter(f"expected HOST:PORT, got {text!r}", param_hint="--listen")
    return host.strip("[]"), int(port)


@click.command("console", short_help="Serve the web console of a cluster.")
@bootstrap_option
@click.option(
    "--listen",
    metavar="HOST:PORT",
    default=DEFAULT_LISTEN,
    show_default=True,
    help="Where the console's web server listens (port 0: any free port).",
)
@click.option(
    "--metrics-url",
    "metrics_urls",
    multiple=True,
    metavar="URL",
    help="A broker's Prometheus endpoint, e.g. http://127.0.0.1:9404/metrics (repeatable): "
    "the overview then charts bytes in and out from the brokers' own counters.",
)
@click.option(
    "--interval",
    type=click.FloatRange(0.2, 300),
    default=5.0,
    show_default=True,
    help="Seconds between two looks at the cluster (charts, lists, lag).",
)
@click.option(
    "--history",
    "history_minutes",
    type=click.FloatRange(0.5, 120),
    default=10.0,
    show_default=True,
    help="Minutes of history the charts keep in memory.",
)
def console(
    bootstrap: str | None,
    listen: str,
    metrics_urls: tuple[str, ...],
    interval: float,
    history_minutes: float,
) -> None:
    """Serve a web console for the cluster at --bootstrap: topics, records, consumer groups
    and their lag, brokers, ACLs, with actions sent under the console's own credentials
    (--command-config, -X). Prints the URL; Ctrl-C stops it."""
    from josefk.console.app import ConsoleSettings, serve

    server = resolve_bootstrap(bootstrap)
    host, port = parse_listen(listen)
    settings = ConsoleSettings(
        bootstrap=server,
        client_settings=client_settings(),
        interval=interval,
        history_samples=max(2, int(history_minutes * 60 / interval)),
        metrics_urls=metrics_urls,
    )

    def ready(url: str) -> None:
        click.echo(f"josefk console: {url} (cluster at {server})", nl=True)

    async def main() -> None:
        task = asyncio.ensure_future(serve(settings, host, port, on_ready=ready))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
    except OSError as exc:
        raise CliError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
