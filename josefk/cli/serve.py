"""``josefk serve``: run the broker.

With no arguments: a single node on 127.0.0.1:9092 with its data under ./josefk-data. Sources
of configuration, lowest precedence first: Kafka's defaults, ``--config`` (a
server.properties file), ``JOSEFK_*`` environment variables, ``--set key=value``, and the
convenience flags. ``--help-config`` lists every config key from its declaration.
"""

from __future__ import annotations

import logging
import sys

import click


def _print_config_help(ctx: click.Context) -> None:
    from josefk.config.reference import help_text

    click.echo(help_text(), nl=False)
    ctx.exit()


@click.command("serve")
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="A server.properties file (Kafka's property names).",
)
@click.option("--data-dir", help="Log directory (log.dirs). Default: ./josefk-data")
@click.option("--listen", metavar="HOST:PORT", help="Client listener. Default: 127.0.0.1:9092")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any broker property, e.g. --set num.partitions=3 (repeatable).",
)
@click.option("--metrics-port", type=int, help="Prometheus /metrics port (0: any free port).")
@click.option(
    "--help-config",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=lambda ctx, _param, value: _print_config_help(ctx) if value else None,
    help="List every config key (name, default, update mode, documentation) and exit.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
def serve(
    config_file: str | None,
    data_dir: str | None,
    listen: str | None,
    overrides: tuple[str, ...],
    metrics_port: int | None,
    log_level: str,
) -> None:
    """Run a josefk broker until SIGTERM or Ctrl-C."""
    from josefk.config.broker import BrokerConfigError
    from josefk.config.loader import load_broker_config
    from josefk.config.properties import PropertiesSyntaxError

    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = load_broker_config(
            config_file,
            overrides=overrides,
            data_dir=data_dir,
            listen=listen,
            metrics_port=metrics_port,
        )
    except BrokerConfigError as exc:
        raise click.ClickException(str(exc)) from None
    except (PropertiesSyntaxError, OSError) as exc:
        raise click.ClickException(f"invalid configuration: {exc}") from None
    for warning in config.warnings:
        logging.getLogger("josefk.config").warning("%s", warning)
    for note in config.inert_notes():
        logging.getLogger("josefk.config").info("%s", note)

    from josefk.broker.server import run_broker

    run_broker(config)
