"""``josefk completion bash|zsh|fish``: the shell completion script, and the completers of
topic and group names.

Owns the script (click's completion for the ``josefk`` program, through the
``_JOSEFK_COMPLETE`` variable) and ``complete_topics`` / ``complete_groups``, which ask the
broker (the command line's ``--bootstrap``, else JOSEFK_BOOTSTRAP, else 127.0.0.1:9092) for
names within a second and offer nothing when it does not answer: a tab press never hangs.

Imports josefk.client only (besides the CLI's helpers).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, Final

import click
from click.shell_completion import CompletionItem, get_completion_class

from josefk.cli.common import BOOTSTRAP_ENV, BOOTSTRAP_META_KEY, DEFAULT_BOOTSTRAP

SHELLS: Final = ("bash", "zsh", "fish")
COMPLETE_VAR: Final = "_JOSEFK_COMPLETE"
# A tab press waits at most this long for the broker.
_ANSWER_WITHIN_S: Final = 1.0

_INSTALL: Final = {
    "bash": 'eval "$(josefk completion bash)"   # in ~/.bashrc',
    "zsh": 'eval "$(josefk completion zsh)"    # in ~/.zshrc',
    "fish": "josefk completion fish > ~/.config/fish/completions/josefk.fish",
}


@click.command("completion", short_help="Print the shell completion script.")
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL: verbs, options, and topic and group names
    asked of the broker.

    \b
      eval "$(josefk completion bash)"    # in ~/.bashrc
      eval "$(josefk completion zsh)"     # in ~/.zshrc
      josefk completion fish > ~/.config/fish/completions/josefk.fish
    """
    root = click.get_current_context().find_root().command
    completion_class = get_completion_class(shell)
    assert completion_class is not None
    click.echo(completion_class(root, {}, "josefk", COMPLETE_VAR).source())


def _bootstrap(ctx: click.Context) -> str:
    current: click.Context | None = ctx
    while current is not None:
        value = current.params.get("bootstrap") or current.meta.get(BOOTSTRAP_META_KEY)
        if value:
            return str(value)
        current = current.parent
    return os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP


def _ask(
    ctx: click.Context, question: Callable[[Any], Coroutine[Any, Any, list[str]]]
) -> list[str]:
    from josefk.client import AIOAdmin

    async def go() -> list[str]:
        async with asyncio.timeout(_ANSWER_WITHIN_S):
            async with AIOAdmin(
                bootstrap_servers=_bootstrap(ctx),
                client_id="josefk-completion",
                connect_timeout_ms=int(_ANSWER_WITHIN_S * 1000),
            ) as admin:
                return await question(admin)

    try:
        return asyncio.run(go())
    except Exception:  # noqa: BLE001  no broker, no answer, any failure: complete nothing
        return []


def complete_topics(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    async def names(admin: Any) -> list[str]:
        return sorted(await admin.list_topics(include_internal=True))

    return [CompletionItem(n) for n in _ask(ctx, names) if n.startswith(incomplete)]


def complete_groups(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    async def names(admin: Any) -> list[str]:
        return sorted(g.group_id for g in await admin.list_groups())

    return [CompletionItem(n) for n in _ask(ctx, names) if n.startswith(incomplete)]
