"""``josefk acls add|list|delete``: the authorizer's ACLs, with kafka-acls.sh's flags.

Owns the operator's verbs for ACLs: ``add`` makes one ALLOW binding per
(--allow-principal, --operation, resource) and one DENY binding per --deny-principal;
``list`` and ``delete`` take the same flags as a filter (no resource flag: every resource;
``--resource-pattern-type`` any, match, literal or prefixed). Resources: ``--topic``,
``--group``, ``--transactional-id`` (repeatable) and ``--cluster``. Hosts: ``--host`` for
both kinds, or kafka-acls.sh's ``--allow-host`` and ``--deny-host`` (repeatable), each for
the principals of its kind; ``delete`` takes kafka-acls.sh's ``--force`` and, as without it,
asks nothing. Talks to the broker through josefk.client's AIOAdmin only (CreateAcls,
DescribeAcls, DeleteAcls).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from josefk.cli.common import (
    CliError,
    F,
    admin_for,
    bootstrap_option,
    json_option,
    option_group,
    resolve_bootstrap,
    run,
)
from josefk.cli.output import note, print_json, print_table
from josefk.client.admin import AclBinding, AclBindingFilter
from josefk.client.errors import KafkaError
from josefk.protocol.acls import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_code,
)


@dataclass(frozen=True, slots=True)
class AclFlags:
    """The flags ``add``, ``list`` and ``delete`` share: resources, principals, operations,
    host and pattern type."""

    topics: tuple[str, ...]
    groups: tuple[str, ...]
    txn_ids: tuple[str, ...]
    cluster: bool
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    operations: tuple[str, ...]
    host: str | None
    allow_hosts: tuple[str, ...]
    deny_hosts: tuple[str, ...]
    pattern: str

    def principals(self) -> list[tuple[AclPermissionType, str, str | None]]:
        """(permission, principal, host) for each principal and each of its kind's hosts:
        --allow-host or --deny-host where given, else --host (None: not named)."""
        found = []
        for permission, principals, hosts in (
            (AclPermissionType.ALLOW, self.allow, self.allow_hosts),
            (AclPermissionType.DENY, self.deny, self.deny_hosts),
        ):
            for principal in principals:
                for host in hosts or (self.host,):
                    found.append((permission, principal, host))
        return found

    def resources(self) -> list[tuple[ResourceType, str]]:
        found = [(ResourceType.TOPIC, t) for t in self.topics]
        found += [(ResourceType.GROUP, g) for g in self.groups]
        found += [(ResourceType.TRANSACTIONAL_ID, t) for t in self.txn_ids]
        if self.cluster:
            found.append((ResourceType.CLUSTER, CLUSTER_NAME))
        return found

    def parsed_operations(self) -> list[AclOperation]:
        try:
            return [parse_code(AclOperation, name) for name in self.operations]
        except ValueError as exc:
            raise CliError(str(exc)) from None

    def pattern_type(self) -> PatternType:
        try:
            return parse_code(PatternType, self.pattern)
        except ValueError as exc:
            raise CliError(str(exc)) from None


def _acl_flags(pattern_default: str, pattern_help: str) -> Callable[[F], F]:
    """The shared flags, handed to the verb as ``flags: AclFlags``."""
    return option_group(
        "flags",
        AclFlags,
        click.option("--topic", "topics", multiple=True, help="A topic (repeatable)."),
        click.option("--group", "groups", multiple=True, help="A group (repeatable)."),
        click.option("--transactional-id", "txn_ids", multiple=True, help="A transactional id."),
        click.option("--cluster", is_flag=True, help="The cluster resource."),
        click.option(
            "--allow-principal", "allow", multiple=True, help="e.g. User:alice (repeatable)."
        ),
        click.option("--deny-principal", "deny", multiple=True, help="e.g. User:mallory."),
        click.option(
            "--operation",
            "operations",
            multiple=True,
            help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
            "DescribeConfigs, AlterConfigs, IdempotentWrite, All (repeatable).",
        ),
        click.option("--host", default=None, help="The client address (default: any, *)."),
        click.option(
            "--allow-host",
            "allow_hosts",
            multiple=True,
            help="The client address of the --allow-principal ones (repeatable; as "
            "kafka-acls.sh, instead of --host).",
        ),
        click.option(
            "--deny-host",
            "deny_hosts",
            multiple=True,
            help="The client address of the --deny-principal ones (repeatable).",
        ),
        click.option(
            "--resource-pattern-type",
            "pattern",
            default=pattern_default,
            show_default=True,
            help=pattern_help,
        ),
    )


@click.group("acls", short_help="Add, list and delete ACLs (authorizer).")
def acls() -> None:
    """Add, list and delete the ACLs the broker's authorizer enforces."""


@acls.command("add", short_help="Add ALLOW/DENY ACLs.")
@_acl_flags("literal", "literal or prefixed.")
@bootstrap_option
def add(flags: AclFlags, bootstrap: str | None) -> None:
    """Give (--allow-principal) or refuse (--deny-principal) the operations on the
    resources."""
    server = resolve_bootstrap(bootstrap)
    resources = flags.resources()
    if not resources:
        raise CliError("name a resource: --topic, --group, --transactional-id or --cluster")
    if not flags.allow and not flags.deny:
        raise CliError("name a principal: --allow-principal or --deny-principal")
    ops = flags.parsed_operations() or [AclOperation.ALL]
    pattern_type = flags.pattern_type()
    bindings = [
        AclBinding(rtype, name, pattern_type, principal, host or "*", op, permission)
        for rtype, name in resources
        for permission, principal, host in flags.principals()
        for op in ops
    ]

    async def go() -> list[KafkaError | None]:
        async with admin_for(server) as admin:
            return await admin.create_acls(bindings)

    failed = [(b, e) for b, e in zip(bindings, run(go(), bootstrap=server), strict=True) if e]
    for binding, error in failed:
        note(f"refused: {_describe(binding)}: {error}")
    if failed:
        raise CliError(f"{len(failed)} of {len(bindings)} ACLs were not created")
    note(f"added {len(bindings)} ACL{'s' if len(bindings) != 1 else ''}")


def _filters(flags: AclFlags) -> list[AclBindingFilter]:
    resources: list[tuple[ResourceType, str | None]] = list(flags.resources()) or [
        (ResourceType.ANY, None)
    ]
    principals: list[tuple[AclPermissionType, str | None, str | None]] = list(
        flags.principals()
    ) or [(AclPermissionType.ANY, None, flags.host)]
    ops = flags.parsed_operations() or [AclOperation.ANY]
    pattern_type = flags.pattern_type()
    return [
        AclBindingFilter(rtype, name, pattern_type, principal, host, op, permission)
        for rtype, name in resources
        for permission, principal, host in principals
        for op in ops
    ]


def _describe(binding: AclBinding) -> str:
    return (
        f"{binding.permission.name} {binding.principal} {binding.operation.name} on "
        f"{binding.resource_type.name} {binding.pattern_type.name} {binding.resource_name!r}"
        f" from {binding.host}"
    )


def _rows(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    return [
        {
            "resource_type": b.resource_type.name,
            "pattern_type": b.pattern_type.name,
            "resource_name": b.resource_name,
            "principal": b.principal,
            "host": b.host,
            "operation": b.operation.name,
            "permission": b.permission.name,
        }
        for b in sorted(set(bindings), key=lambda b: (b.resource_type, b.resource_name, repr(b)))
    ]


def _print(rows: list[dict[str, Any]], as_json: bool, empty: str) -> None:
    if as_json:
        print_json(rows)
    elif not rows:
        note(empty)
    else:
        print_table(
            ["RESOURCE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
            [tuple(row.values()) for row in rows],
        )


@acls.command("list", short_help="ACLs matching the flags (all without flags).")
@_acl_flags(
    "any", "any, match (every ACL that applies to the named resource), literal or prefixed."
)
@bootstrap_option
@json_option
def list_acls(flags: AclFlags, bootstrap: str | None, as_json: bool) -> None:
    """The ACLs matching the flags."""
    server = resolve_bootstrap(bootstrap)
    filters = _filters(flags)

    async def go() -> list[AclBinding]:
        async with admin_for(server) as admin:
            found: list[AclBinding] = []
            for acl_filter in filters:
                found += await admin.describe_acls(acl_filter)
            return found

    _print(_rows(run(go(), bootstrap=server)), as_json, "no ACLs match")


@acls.command("delete", short_help="Delete the ACLs matching the flags.")
@_acl_flags("any", "any, match, literal or prefixed.")
@click.option("--all", "everything", is_flag=True, help="Allow a filter that matches every ACL.")
@click.option("--force", is_flag=True, help="As kafka-acls.sh's: do not ask (delete never asks).")
@bootstrap_option
@json_option
def delete(
    flags: AclFlags, everything: bool, force: bool, bootstrap: str | None, as_json: bool
) -> None:
    """Delete the ACLs matching the flags and list what was deleted."""
    server = resolve_bootstrap(bootstrap)
    if not (flags.resources() or flags.allow or flags.deny or everything):
        raise CliError("name a resource or a principal (or --all to delete every ACL)")
    filters = _filters(flags)

    async def go() -> list[list[AclBinding] | KafkaError]:
        async with admin_for(server) as admin:
            return await admin.delete_acls(filters)

    deleted: list[AclBinding] = []
    for result in run(go(), bootstrap=server):
        if isinstance(result, KafkaError):
            raise CliError(f"delete refused: {result}")
        deleted += result
    _print(_rows(deleted), as_json, "no ACLs matched; nothing deleted")
