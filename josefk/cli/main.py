"""The ``josefk`` command: one program, one subcommand per verb.

Each verb lives in its own module and is attached here when it is first asked for; this
module owns only the group.
"""

from __future__ import annotations

import functools
import importlib

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


class _Verbs(click.Group):
    """The verbs, each imported when it runs or when help lists them: ``josefk serve`` does
    not import the client tools, nor a client verb the broker."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _COMMANDS:
            _load(cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=_Verbs,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_CODES_HELP,
)
@click.version_option(__version__, prog_name="josefk")
@click.option(
    "-b",
    "--bootstrap",
    "--bootstrap-server",
    metavar="HOST:PORT[,HOST:PORT...]",
    envvar=BOOTSTRAP_ENV,
    help=f"Broker(s) the client verbs talk to (env {BOOTSTRAP_ENV}, default {DEFAULT_BOOTSTRAP}).",
)
@functools.partial(client_config_options, envvar=COMMAND_CONFIG_ENV)
@click.pass_context
def cli(ctx: click.Context, bootstrap: str | None) -> None:
    """josefk: a Kafka-compatible broker and its tools."""
    ctx.meta[BOOTSTRAP_META_KEY] = bootstrap


# Each verb -> the module of josefk.cli that defines it and the click command's name there.
_COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("serve", "serve"),
    "dump-log": ("dump_log", "dump_log"),
    "topics": ("topics", "topics"),
    "configs": ("configs", "configs"),
    "produce": ("produce", "produce"),
    "consume": ("consume", "consume"),
    "groups": ("groups", "groups"),
    "transactions": ("transactions", "transactions"),
    "users": ("users", "users"),
    "acls": ("acls", "acls"),
    "cluster": ("cluster", "cluster"),
    "dev-cluster": ("dev_cluster", "dev_cluster"),
    "console": ("console", "console"),
    "perf": ("perf", "perf"),
    "completion": ("completion", "completion"),
}


def _load(name: str) -> None:
    module_name, attribute = _COMMANDS[name]
    module = importlib.import_module(f"josefk.cli.{module_name}")
    cli.add_command(getattr(module, attribute), name)


def _register() -> None:
    """Attach every verb now (tests that walk them all)."""
    for name in _COMMANDS:
        if name not in cli.commands:
            _load(name)


def main() -> None:
    # The completion script (josefk completion SHELL) calls back through this variable,
    # whether josefk runs as the ``josefk`` script or as ``python -m josefk``.
    cli(complete_var="_JOSEFK_COMPLETE")
