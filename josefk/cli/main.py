"""The ``josefk`` command: one program, one subcommand per verb.

Each verb lives in its own module and is attached here; this module owns only the group.
"""

from __future__ import annotations

import click

from josefk import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="josefk")
def cli() -> None:
    """josefk: a Kafka-compatible broker and its tools."""


# Each entry names a module of josefk.cli and the click command it defines.
_COMMANDS: list[tuple[str, str]] = [
    ("serve", "serve"),
    ("dump_log", "dump_log"),
]


def _register() -> None:
    import importlib

    for module_name, attribute in _COMMANDS:
        module = importlib.import_module(f"josefk.cli.{module_name}")
        cli.add_command(getattr(module, attribute))


def main() -> None:
    _register()
    cli()
