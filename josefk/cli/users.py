"""``josefk users add|list|delete``: SCRAM users for SASL listeners.

Owns the operator's verbs for SCRAM credentials. The password is salted and hashed here
(PBKDF2) and only the salted password goes to the broker, through AlterUserScramCredentials;
``list`` uses DescribeUserScramCredentials. Talks to the broker through josefk.client's AIOAdmin
only, over any listener (``--command-config`` / ``-X`` for a SASL or SSL one).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import click

from josefk.cli.common import (
    CliError,
    admin_for,
    bootstrap_option,
    json_option,
    resolve_bootstrap,
    run,
)
from josefk.cli.output import note, print_json, print_table
from josefk.client.errors import KafkaError

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@click.group("users", short_help="Add, list and delete SCRAM users (SASL).")
def users() -> None:
    """Add, list and delete the SCRAM users that SASL listeners authenticate."""


@users.command("add", short_help="Add a user or change its password.")
@click.argument("name")
@click.option(
    "--mechanism",
    "mechanisms",
    type=click.Choice(MECHANISMS),
    multiple=True,
    help="SCRAM mechanism (repeatable; default both). PLAIN checks the same credentials.",
)
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True)
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True)
@bootstrap_option
def add(
    name: str,
    mechanisms: tuple[str, ...],
    password: str,
    iterations: int,
    bootstrap: str | None,
) -> None:
    """Set NAME's SCRAM credentials from a password (salted and hashed before it is sent)."""
    server = resolve_bootstrap(bootstrap)
    chosen = mechanisms or MECHANISMS
    upsertions = []
    for mechanism in chosen:
        salt = secrets.token_bytes(32)
        salted = hashlib.pbkdf2_hmac(_DIGESTS[mechanism], password.encode(), salt, iterations)
        upsertions.append((name, mechanism, iterations, salt, salted))

    async def go() -> dict[str, KafkaError | None]:
        async with admin_for(server) as admin:
            return await admin.alter_user_scram_credentials(upsertions=upsertions)

    _raise_errors(run(go(), bootstrap=server))
    note(f"user {name}: {', '.join(chosen)} set")


@users.command("delete", short_help="Delete a user's credentials.")
@click.argument("name")
@click.option(
    "--mechanism",
    "mechanisms",
    type=click.Choice(MECHANISMS),
    multiple=True,
    help="Only this mechanism (repeatable; default every one the user has).",
)
@bootstrap_option
def delete(name: str, mechanisms: tuple[str, ...], bootstrap: str | None) -> None:
    """Delete NAME's SCRAM credentials."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> dict[str, KafkaError | None]:
        async with admin_for(server) as admin:
            chosen = list(mechanisms)
            if not chosen:
                described = (await admin.describe_user_scram_credentials([name]))[name]
                if isinstance(described, KafkaError):
                    raise CliError(f"no user {name!r} (see: josefk users list)")
                chosen = [mechanism for mechanism, _ in described]
            return await admin.alter_user_scram_credentials(
                deletions=[(name, mechanism) for mechanism in chosen]
            )

    _raise_errors(run(go(), bootstrap=server))
    note(f"user {name}: deleted")


@users.command("list", short_help="Users and their SCRAM mechanisms.")
@bootstrap_option
@json_option
def list_users(bootstrap: str | None, as_json: bool) -> None:
    """Every SCRAM user with its mechanisms and iteration counts (never a key)."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            described = await admin.describe_user_scram_credentials()
        return [
            {"user": user, "credentials": [{"mechanism": m, "iterations": i} for m, i in infos]}
            for user, infos in sorted(described.items())
            if not isinstance(infos, KafkaError)
        ]

    rows = run(go(), bootstrap=server)
    if as_json:
        print_json(rows)
    elif not rows:
        note("no users yet (add one: josefk users add NAME)")
    else:
        print_table(
            ["USER", "MECHANISM", "ITERATIONS"],
            [
                (row["user"], cred["mechanism"], cred["iterations"])
                for row in rows
                for cred in row["credentials"]
            ],
        )


def _raise_errors(results: dict[str, KafkaError | None]) -> None:
    for user, error in results.items():
        if error is not None:
            raise CliError(f"user {user}: {error}")
