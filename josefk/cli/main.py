"""The ``josefk`` command: one program, one subcommand per verb.

Each verb lives in its own module and is attached here; this module owns only the group.
"""

from __future__ import annotations

import functools

import click

from josefk import __version__
from josefk.cli.common import (
    BOOTSTRAP_ENV,
    BOOTSTRAP_META_KEY,
    COMMAND_CONFIG_ENV,
    DEFAULT_BOOTSTRAP,
    EXIT_CODES_HELP,
    client_config_options,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="josefk")
@click.option(
    "-b",
    "--bootstrap",
    metavar="HOST:PORT[,HOST:PORT...]",
    envvar=BOOTSTRAP_ENV,
    help=f"Broker(s) the client verbs talk to (env {BOOTSTRAP_ENV}, default {DEFAULT_BOOTSTRAP}).",
)
@functools.partial(client_config_options, envvar=COMMAND_CONFIG_ENV)
@click.pass_context
def cli(ctx: click.Context, bootstrap: str | None) -> None:
    """josefk: a Kafka-compatible broker and its tools."""
    ctx.meta[BOOTSTRAP_META_KEY] = bootstrap


# Each entry names a module of josefk.cli and the click command it defines.
_COMMANDS: list[tuple[str, str]] = [
    ("serve", "serve"),
    ("dump_log", "dump_log"),
    ("topics", "topics"),
    ("configs", "configs"),
    ("produce", "produce"),
    ("consume", "consume"),
    ("groups", "groups"),
    ("transactions", "transactions"),
    ("users", "users"),
    ("acls", "acls"),
    ("cluster", "cluster"),
    ("dev_cluster", "dev_cluster"),
    ("console", "console"),
    ("perf", "perf"),
    ("completion", "completion"),
]


def _register() -> None:
    import importlib

    for module_name, attribute in _COMMANDS:
        module = importlib.import_module(f"josefk.cli.{module_name}")
        cli.add_command(getattr(module, attribute))


def main() -> None:
    _register()
    # The completion script (josefk completion SHELL) calls back through this variable,
    # whether josefk runs as the ``josefk`` script or as ``python -m josefk``.
    cli(complete_var="_JOSEFK_COMPLETE")
