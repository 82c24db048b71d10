"""``josefk users add|list|delete``: SCRAM users for SASL listeners.

Owns the operator's verbs for SCRAM credentials. The password is salted and hashed here
(PBKDF2) and only the salted password goes to the broker, through AlterUserScramCredentials;
``list`` uses DescribeUserScramCredentials. Talks to the broker through josefk.client's AIOAdmin,
over any listener (``--command-config`` / ``-X`` for a SASL or SSL one).

With ``--etcd ENDPOINTS`` the verbs write and read a cluster's credentials in etcd directly
(josefk.cluster.credentials), no broker needed: that is how the user the brokers themselves
authenticate as (inter-broker SCRAM) is created before the first broker starts, as Kafka's
``kafka-configs.sh --zookeeper`` (or KIP-900's ``kafka-storage format --add-scram``) does.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from josefk.broker.security.scram import ScramCredential, credential_from_salted
from josefk.broker.security.store import decode_user, encode_user
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
from josefk.cluster.values import DEFAULT_PREFIX

if TYPE_CHECKING:
    from josefk.cluster.credentials import CredentialRecords

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def etcd_options(f: F) -> F:
    f = click.option(
        "--etcd-prefix",
        default=DEFAULT_PREFIX,
        show_default=True,
        help="The cluster's josefk.etcd.prefix (with --etcd).",
    )(f)
    return click.option(
        "--etcd",
        "etcd",
        metavar="HOST:PORT[,HOST:PORT...]",
        default=None,
        help="Work on a cluster's credentials in etcd directly, without a broker "
        "(e.g. the inter-broker user, before the brokers start).",
    )(f)


def _in_etcd(endpoints: str, prefix: str, action: Callable[[CredentialRecords], Awaitable[T]]) -> T:
    # Imported here: every josefk command (josefk serve included) registers this module,
    # and only --etcd needs the etcd client.
    from josefk.cluster.credentials import CredentialRecords
    from josefk.cluster.errors import MetadataStoreError
    from josefk.cluster.metadata_store import EtcdMetadataStore, parse_endpoints

    async def go() -> T:
        try:
            store = EtcdMetadataStore(parse_endpoints(endpoints), prefix=prefix)
            await store.connect()
        except (ValueError, MetadataStoreError) as exc:
            raise CliError(f"cannot reach etcd at {endpoints}: {exc}") from None
        try:
            return await action(CredentialRecords(store))
        finally:
            await store.close()

    return asyncio.run(go())


async def _etcd_users(records: CredentialRecords) -> dict[str, dict[str, ScramCredential]]:
    _, found = await records.load()
    return {user: decode_user(value) for user, value in found.items()}


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
@etcd_options
def add(
    name: str,
    mechanisms: tuple[str, ...],
    password: str,
    iterations: int,
    bootstrap: str | None,
    etcd: str | None,
    etcd_prefix: str,
) -> None:
    """Set NAME's SCRAM credentials from a password (salted and hashed before it is sent)."""
    chosen = mechanisms or MECHANISMS
    upsertions = []
    for mechanism in chosen:
        salt = secrets.token_bytes(32)
        salted = hashlib.pbkdf2_hmac(_DIGESTS[mechanism], password.encode(), salt, iterations)
        upsertions.append((name, mechanism, iterations, salt, salted))
    if etcd is not None:
        if not name:
            raise click.BadParameter("the user name must not be empty", param_hint="NAME")

        async def put(records: CredentialRecords) -> None:
            credentials = (await _etcd_users(records)).get(name, {})
            for _, mechanism, count, salt, salted in upsertions:
                credentials[mechanism] = credential_from_salted(mechanism, salt, count, salted)
            await records.put(name, encode_user(credentials))

        _in_etcd(etcd, etcd_prefix, put)
        note(f"user {name}: {', '.join(chosen)} set in etcd")
        return
    server = resolve_bootstrap(bootstrap)

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
@etcd_options
def delete(
    name: str,
    mechanisms: tuple[str, ...],
    bootstrap: str | None,
    etcd: str | None,
    etcd_prefix: str,
) -> None:
    """Delete NAME's SCRAM credentials."""
    if etcd is not None:

        async def remove(records: CredentialRecords) -> None:
            credentials = (await _etcd_users(records)).get(name)
            if credentials is None:
                raise CliError(f"no user {name!r} in etcd")
            for mechanism in mechanisms or list(credentials):
                credentials.pop(mechanism, None)
            if credentials:
                await records.put(name, encode_user(credentials))
            else:
                await records.delete(name)

        _in_etcd(etcd, etcd_prefix, remove)
        note(f"user {name}: deleted from etcd")
        return
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
@etcd_options
@json_option
def list_users(bootstrap: str | None, etcd: str | None, etcd_prefix: str, as_json: bool) -> None:
    """Every SCRAM user with its mechanisms and iteration counts (never a key)."""

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            described = await admin.describe_user_scram_credentials()
        return [
            {"user": user, "credentials": [{"mechanism": m, "iterations": i} for m, i in infos]}
            for user, infos in sorted(described.items())
            if not isinstance(infos, KafkaError)
        ]

    async def from_etcd(records: CredentialRecords) -> list[dict[str, Any]]:
        return [
            {
                "user": user,
                "credentials": [
                    {"mechanism": m, "iterations": c.iterations}
                    for m, c in sorted(credentials.items())
                ],
            }
            for user, credentials in sorted((await _etcd_users(records)).items())
        ]

    if etcd is not None:
        rows = _in_etcd(etcd, etcd_prefix, from_etcd)
    else:
        server = resolve_bootstrap(bootstrap)
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
