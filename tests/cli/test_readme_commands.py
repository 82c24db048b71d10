"""Every ``josefk`` command the README shows parses: its verb exists, its options are known and
take the values written there. Nothing is run and no broker is needed: each command goes
through click's parser only (``make_context`` down its verb chain), which is where a renamed
verb or option, or a value an option no longer takes, would make the README lie.

Commands are taken from the README's ``sh`` blocks: every stage of a line (with its ``\\``
continuations; stages split at pipes and ``;``, ``&&``, ``||``, ``&``, and cut at a
redirection) whose first word is ``josefk``. Lines with shell expansions (``$...``) are left
out: their words are only known when a shell runs them.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from josefk.cli.common import parse_start
from josefk.cli.main import _register, cli

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)


_SEPARATORS = frozenset({"|", ";", "&&", "||", "&"})
_REDIRECTIONS = frozenset({">", ">>", "<", "<<", "2>", ">&"})


def _stages(line: str) -> list[list[str]]:
    """The words of each stage of a shell line, comments and redirections left out."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    stages: list[list[str]] = [[]]
    redirected = False
    for token in lexer:
        if token in _SEPARATORS:
            stages.append([])
            redirected = False
        elif token in _REDIRECTIONS or redirected:
            if not redirected and stages[-1][-1:] in (["1"], ["2"]):
                stages[-1].pop()  # the descriptor of 2>, which the lexer gives apart
            redirected = True  # the redirection and its target
        else:
            stages[-1].append(token)
    return stages


def readme_commands() -> list[tuple[str, ...]]:
    commands = []
    for block in _BLOCK.findall(README.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            if "$" in line:
                continue
            commands += [tuple(words) for words in _stages(line) if words[:1] == ["josefk"]]
    return commands


COMMANDS = readme_commands()


def test_the_readme_shows_commands() -> None:
    # A change of the README's layout that hides its commands from this test fails here.
    assert len(COMMANDS) >= 40


def _parse(args: list[str]) -> None:
    """Parse ``args`` as ``josefk`` would, verb by verb, raising click's usage errors."""
    command: click.Command = cli
    name = "josefk"
    parent = None
    while True:
        context = command.make_context(name, list(args), parent=parent)
        if not isinstance(command, click.Group):
            break
        # click 8.2+ keeps the verb's name in _protected_args (protected_args before it).
        protected = getattr(context, "_protected_args", None)
        if protected is None:
            protected = context.protected_args
        rest = [*protected, *context.args]
        if not rest:
            break
        name, found, args = command.resolve_command(context, rest)
        assert found is not None, rest
        command, parent = found, context
    # Positions (--from, --until, --to) are checked in the verbs' bodies: check them here.
    for param in command.params:
        named = {"--from", "--until", "--to"} & set(param.opts)
        value = context.params.get(param.name or "")
        if named and isinstance(value, str):
            (option,) = named
            parse_start(value, param=option, relative=option == "--from")


@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
def test_a_readme_command_parses(words: tuple[str, ...]) -> None:
    _register()
    try:
        _parse(list(words[1:]))
    except click.BadParameter as exc:
        # The files the README names (values.txt, logo.png, server.properties) are the
        # reader's, not this checkout's.
        if "does not exist" not in exc.format_message():
            raise
