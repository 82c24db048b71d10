"""``josefk configs describe|alter``: topic and broker configs, as kafka-configs.sh.

Owns the config verbs on one resource: a topic (``--topic NAME``), one broker
(``--broker ID``, its dynamic per-broker configs, KIP-226) or every broker
(``--broker-defaults``, the cluster-wide default). kafka-configs.sh's spelling works too:
``--entity-type brokers --entity-name 1``, ``--entity-default``, ``--add-config
'k1=v1,k2=[a,b]'``, ``--delete-config k1,k2``, and ``--entity-type broker-loggers
--entity-name 1`` for a broker's log levels (KIP-412). Talks to the broker through josefk.client's
AIOAdmin only (describe with synonyms, IncrementalAlterConfigs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from josefk.cli.common import (
    F,
    admin_for,
    bootstrap_option,
    describe_existing_topics,
    json_option,
    option_group,
    resolve_bootstrap,
    run,
)
from josefk.cli.output import print_json, print_table
from josefk.client import AIOAdmin, ConfigEntry, ResourceType

_ENTITY_TYPES = {
    "broker-loggers": ResourceType.BROKER_LOGGER,
    "brokers": ResourceType.BROKER,
    "topics": ResourceType.TOPIC,
    "groups": ResourceType.GROUP,
}


@click.group("configs", short_help="Describe and alter topic, group and broker configs.")
def configs() -> None:
    """Describe and alter the configs of a topic, a group, a broker (dynamic, without a
    restart) or every broker (the cluster-wide default), as kafka-configs.sh does."""


def _resource_options(f: F) -> F:
    """The flags naming one resource, handed to the verb as ``resource: ConfigResourceFlags``."""
    return option_group(
        "resource",
        ConfigResourceFlags,
        click.option("--topic", metavar="NAME", help="A topic's configs."),
        click.option(
            "--group",
            metavar="NAME",
            help="A group's configs (consumer.session.timeout.ms, share.auto.offset.reset, ...).",
        ),
        click.option(
            "--broker", metavar="ID", help="One broker's configs (its dynamic overrides)."
        ),
        click.option(
            "--broker-defaults",
            is_flag=True,
            help="The cluster-wide default of every broker.",
        ),
        click.option(
            "--entity-type",
            type=click.Choice(sorted(_ENTITY_TYPES)),
            help="kafka-configs.sh spelling: brokers, topics, groups, or broker-loggers (a "
            "broker's log levels, e.g. --add-config josefk.broker.group=DEBUG).",
        ),
        click.option("--entity-name", metavar="NAME", help="With --entity-type."),
        click.option("--entity-default", is_flag=True, help="With --entity-type brokers."),
    )(f)


@dataclass(frozen=True, slots=True)
class ConfigResourceFlags:
    """The flags that name the resource of ``describe`` and ``alter``."""

    topic: str | None
    group: str | None
    broker: str | None
    broker_defaults: bool
    entity_type: str | None
    entity_name: str | None
    entity_default: bool

    def resource(self) -> tuple[ResourceType, str]:
        """The one resource the flags name; anything else is a usage error."""
        return resource_of(
            self.topic,
            self.group,
            self.broker,
            self.broker_defaults,
            self.entity_type,
            self.entity_name,
            self.entity_default,
        )


def resource_of(
    topic: str | None,
    group: str | None,
    broker: str | None,
    broker_defaults: bool,
    entity_type: str | None,
    entity_name: str | None,
    entity_default: bool,
) -> tuple[ResourceType, str]:
    """The one resource the flags name; anything else is a usage error."""
    chosen: list[tuple[ResourceType, str]] = []
    if topic is not None:
        chosen.append((ResourceType.TOPIC, topic))
    if group is not None:
        chosen.append((ResourceType.GROUP, group))
    if broker is not None:
        chosen.append((ResourceType.BROKER, broker))
    if broker_defaults:
        chosen.append((ResourceType.BROKER, ""))
    if entity_type is not None:
        rtype = _ENTITY_TYPES[entity_type]
        if entity_default:
            if rtype != ResourceType.BROKER:
                raise click.UsageError("--entity-default goes with --entity-type brokers")
            chosen.append((rtype, ""))
        elif entity_name is not None:
            chosen.append((rtype, entity_name))
        else:
            raise click.UsageError("--entity-type needs --entity-name or --entity-default")
    elif entity_name is not None or entity_default:
        raise click.UsageError("--entity-name and --entity-default go with --entity-type")
    if len(chosen) != 1:
        raise click.UsageError(
            "name exactly one of --topic NAME, --group NAME, --broker ID, --broker-defaults "
            "(or --entity-type with --entity-name/--entity-default)"
        )
    rtype, name = chosen[0]
    if rtype in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and name and not name.isdigit():
        raise click.BadParameter(f"a broker id is a number, not {name!r}", param_hint="--broker")
    if rtype == ResourceType.TOPIC and not name:
        raise click.BadParameter("a topic needs a name", param_hint="--topic")
    if rtype == ResourceType.GROUP and not name:
        raise click.BadParameter("a group needs a name", param_hint="--group")
    return rtype, name


async def _check_exists(admin: AIOAdmin, rtype: ResourceType, name: str) -> None:
    """An unknown topic is named with its close matches, as the topics verbs do."""
    if rtype == ResourceType.TOPIC:
        await describe_existing_topics(admin, [name])


def _label(rtype: ResourceType, name: str) -> str:
    if rtype == ResourceType.TOPIC:
        return f"topic {name}"
    if rtype == ResourceType.GROUP:
        return f"group {name}"
    if rtype == ResourceType.BROKER_LOGGER:
        return f"the loggers of broker {name}"
    return f"broker {name}" if name else "the default of every broker"


def _entry_json(entry: ConfigEntry) -> dict[str, Any]:
    return {
        "value": None if entry.is_sensitive else entry.value,
        "source": entry.source.name,
        "read_only": entry.read_only,
        "sensitive": entry.is_sensitive,
        "synonyms": [
            {"name": s.name, "value": s.value, "source": s.source.name} for s in entry.synonyms
        ],
    }


@configs.command("describe", short_help="Configs of a topic or broker, with their sources.")
@_resource_options
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Every config, defaults included (default: only those set somewhere).",
)
@click.option("--synonyms", is_flag=True, help="Show every layer's value of each config.")
@bootstrap_option
@json_option
def describe(
    resource: ConfigResourceFlags,
    show_all: bool,
    synonyms: bool,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Show the configs of one topic or broker and where each value comes from (a
    dynamic per-broker or cluster-default override, the broker's start-up settings, or
    Kafka's default); READ-ONLY ones need a restart to change."""
    rtype, name = resource.resource()
    server = resolve_bootstrap(bootstrap)

    async def go() -> dict[str, ConfigEntry]:
        async with admin_for(server) as admin:
            await _check_exists(admin, rtype, name)
            found = await admin.describe_configs([(rtype, name)], include_synonyms=True)
        return found[(rtype, name)]

    entries = run(go(), bootstrap=server)
    shown = {
        key: entry
        for key, entry in sorted(entries.items())
        if show_all or entry.source.name != "DEFAULT_CONFIG"
    }
    if as_json:
        print_json(
            {
                "resource": {"type": rtype.name.lower(), "name": name},
                "configs": {key: _entry_json(entry) for key, entry in shown.items()},
            }
        )
        return
    columns = ["KEY", "VALUE", "SOURCE", "READ-ONLY"]
    if synonyms:
        columns.append("SYNONYMS")
    rows = []
    for key, entry in shown.items():
        value = "[hidden]" if entry.is_sensitive else entry.value
        row: list[Any] = [key, value, entry.source.name, entry.read_only]
        if synonyms:
            row.append(
                " ".join(
                    f"{s.name}={'[hidden]' if entry.is_sensitive else s.value}({s.source.name})"
                    for s in entry.synonyms
                )
            )
        rows.append(row)
    print_table(columns, rows, title=f"Configs of {_label(rtype, name)}")


def parse_add_config(values: tuple[str, ...]) -> dict[str, str]:
    """kafka-configs.sh's ``--add-config 'k1=v1,k2=[a,b]'`` (repeatable): commas separate
    pairs except inside brackets, which hold a list value."""
    out: dict[str, str] = {}
    for text in values:
        depth, current, pairs = 0, "", []
        for char in text:
            if char == "[":
                depth += 1
            elif char == "]":
                depth -= 1
            if char == "," and depth == 0:
                pairs.append(current)
                current = ""
            else:
                current += char
        pairs.append(current)
        for pair in pairs:
            if not pair.strip():
                continue
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise click.BadParameter(
                    f"expected KEY=VALUE, got {pair!r}", param_hint="--add-config"
                )
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key.strip()] = value
    return out


@configs.command("alter", short_help="Set or delete configs of a topic or broker.")
@_resource_options
@click.option(
    "--add-config",
    "--set",
    "adds",
    multiple=True,
    metavar="K=V[,K=V]",
    help="Set configs: 'k1=v1,k2=[a,b]' (repeatable).",
)
@click.option(
    "--delete-config",
    "--delete",
    "deletes",
    multiple=True,
    metavar="K[,K]",
    help="Remove configs: back to the layer below (repeatable).",
)
@click.option("--validate-only", is_flag=True, help="Ask the broker to check, change nothing.")
@bootstrap_option
@json_option
def alter(
    resource: ConfigResourceFlags,
    adds: tuple[str, ...],
    deletes: tuple[str, ...],
    validate_only: bool,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Change configs of one topic, one broker or every broker without a restart. The
    broker refuses keys that need a restart (INVALID_REQUEST) and bad values, naming the key.

    \b
      josefk configs alter --broker-defaults --add-config log.retention.ms=3600000
      josefk configs alter --broker 1 --delete-config log.retention.ms
    """
    rtype, name = resource.resource()
    changes: dict[str, str | None] = dict(parse_add_config(adds))
    for text in deletes:
        for key in (k.strip() for k in text.split(",")):
            if not key:
                continue
            if key in changes:
                raise click.BadParameter(
                    f"{key} is both set and deleted", param_hint="--delete-config"
                )
            changes[key] = None
    if not changes:
        raise click.UsageError("nothing to change: give --add-config or --delete-config")
    server = resolve_bootstrap(bootstrap)

    async def go() -> None:
        async with admin_for(server) as admin:
            await _check_exists(admin, rtype, name)
            await admin.alter_configs((rtype, name), changes, validate_only=validate_only)

    run(go(), bootstrap=server)
    set_configs = {k: v for k, v in changes.items() if v is not None}
    deleted = [k for k, v in changes.items() if v is None]
    if as_json:
        print_json(
            {
                "resource": {"type": rtype.name.lower(), "name": name},
                "set": set_configs,
                "deleted": deleted,
                "validate_only": validate_only,
            }
        )
        return
    label = _label(rtype, name)
    verb = "would set" if validate_only else "set"
    for key, value in set_configs.items():
        click.echo(f"{label}: {verb} {key}={value}")
    for key in deleted:
        click.echo(f"{label}: {'would delete' if validate_only else 'deleted'} {key}")
