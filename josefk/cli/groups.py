"""``josefk groups list|describe|reset-offsets|delete``.

Owns the consumer-group verbs: the describe view (state, members with their assignments, and
per partition the committed offset, the log end offset and the lag between them), moving a
group's committed offsets (refused while the group has members; a preview unless
``--execute``, as Kafka's kafka-consumer-groups.sh; targets ``--to``, ``--shift-by``,
``--to-current``, ``--by-duration``) and deleting groups. Talks to the broker through josefk.client's AIOAdmin only.
"""

from __future__ import annotations

import re
import time
from typing import Any

import click

from josefk.cli.common import (
    CliError,
    StartSpec,
    admin_for,
    bootstrap_option,
    describe_error,
    describe_existing_topics,
    json_option,
    parse_start,
    resolve_bootstrap,
    run,
    unknown_error,
)
from josefk.cli.completion import complete_groups
from josefk.cli.output import note, print_fields, print_json, print_table
from josefk.client import AIOAdmin, GroupDescription, TopicPartition
from josefk.client.cluster import find_coordinator
from josefk.client.errors import KafkaError

# Group states in which the group has no members and its offsets may be moved.
_IDLE_STATES = frozenset({"Empty", "Dead"})


@click.group("groups", short_help="List, describe (with lag), reset and delete consumer groups.")
def groups() -> None:
    """List, describe (with lag), reset and delete consumer groups."""


@groups.command("list", short_help="List consumer groups and their state.")
@bootstrap_option
@json_option
def list_groups(bootstrap: str | None, as_json: bool) -> None:
    """List the consumer groups the brokers know, with their state."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            listings = await admin.list_groups()
            described = (
                await admin.describe_groups([g.group_id for g in listings]) if listings else []
            )
        members = {d.group_id: len(d.members) for d in described}
        return [
            {
                "group": g.group_id,
                "state": g.state,
                "type": g.group_type,
                "protocol_type": g.protocol_type,
                "members": members.get(g.group_id, 0),
            }
            for g in listings
        ]

    rows = run(go(), bootstrap=server)
    if as_json:
        print_json(rows)
    elif not rows:
        note("no consumer groups yet")
    else:
        print_table(
            ["GROUP", "TYPE", "STATE", "MEMBERS", "PROTOCOL-TYPE"],
            [(r["group"], r["type"], r["state"], r["members"], r["protocol_type"]) for r in rows],
        )


async def _existing_group(admin: AIOAdmin, group: str) -> GroupDescription:
    """The group's description; an unknown group is a CliError naming close matches."""
    (description,) = await admin.describe_groups([group])
    offsets = await admin.list_group_offsets(group)
    if description.state == "Dead" and not description.members and not offsets:
        known = [g.group_id for g in await admin.list_groups()]
        raise unknown_error("group", group, known, "josefk groups list")
    if description.error is not None and description.error.name != "GROUP_ID_NOT_FOUND":
        raise description.error
    return description


async def describe_group(admin: AIOAdmin, group: str) -> dict[str, Any]:
    """Everything ``groups describe`` shows, JSON-ready."""
    description = await _existing_group(admin, group)
    if description.group_type == "share":
        # A share group has no committed offsets: its partitions' share-partition start
        # offsets stand in their place, and the broker's lag (acknowledged records excluded).
        shared = await admin.list_share_group_offsets(group)
        committed = {tp: start for tp, (start, _) in shared.items() if start >= 0}
        share_lag = {tp: lag for tp, (_, lag) in shared.items() if lag >= 0}
    else:
        committed = await admin.list_group_offsets(group)
        share_lag = {}
    coordinator_id = await find_coordinator(admin.client, group)
    host, port = admin.client._address(coordinator_id)
    # A share group's partition may have several members: they are listed comma-separated.
    owner: dict[TopicPartition, str] = {}
    for member in description.members:
        for tp in member.assignment:
            held = owner.get(tp)
            owner[tp] = member.member_id if held is None else f"{held},{member.member_id}"
    tps = sorted(set(committed) | set(owner))
    ends = await admin.list_offsets({tp: admin.LATEST for tp in tps}) if tps else {}
    partitions = []
    for tp in tps:
        end = ends.get(tp)
        log_end = end.offset if end is not None else None
        offset = committed.get(tp)
        partitions.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": offset,
                # The same number under the name share groups give it (kept beside
                # committed_offset so scripts read every group type alike).
                **({"start_offset": offset} if description.group_type == "share" else {}),
                "log_end_offset": log_end,
                "lag": share_lag[tp]
                if tp in share_lag
                else max(0, log_end - offset)
                if log_end is not None and offset is not None
                else None,
                "member_id": owner.get(tp),
            }
        )
    consumer = description.group_type in ("consumer", "share")
    return {
        "group": description.group_id,
        "type": description.group_type,
        "state": description.state,
        "protocol_type": description.protocol_type,
        "protocol": description.protocol,
        "coordinator": {"id": coordinator_id, "host": host, "port": port},
        **(
            {
                "group_epoch": description.group_epoch,
                "assignment_epoch": description.assignment_epoch,
            }
            if consumer
            else {}
        ),
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assignment": [
                    {"topic": tp.topic, "partition": tp.partition} for tp in sorted(m.assignment)
                ],
                **({"member_epoch": m.member_epoch} if consumer else {}),
                # A share group's member has no target: the broker answers its assignment only.
                **(
                    {
                        "target_assignment": [
                            {"topic": tp.topic, "partition": tp.partition}
                            for tp in sorted(m.target_assignment or [])
                        ]
                    }
                    if description.group_type == "consumer"
                    else {}
                ),
            }
            for m in description.members
        ],
        "partitions": partitions,
        "total_lag": sum(p["lag"] or 0 for p in partitions),
    }


@groups.command("describe", short_help="Members, assignments and lag per partition.")
@click.argument("names", nargs=-1, metavar="GROUP...", shell_complete=complete_groups)
@click.option("--all-groups", is_flag=True, help="Describe every group the brokers know.")
@bootstrap_option
@json_option
def describe(
    names: tuple[str, ...], all_groups: bool, bootstrap: str | None, as_json: bool
) -> None:
    """Show each GROUP's state, coordinator, members and assignments, and for every
    partition its committed offset, log end offset and lag."""
    if bool(names) == all_groups:
        raise click.UsageError("name one or more groups, or give --all-groups")
    server = resolve_bootstrap(bootstrap)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            chosen = list(names) or sorted(g.group_id for g in await admin.list_groups())
            return [await describe_group(admin, name) for name in chosen]

    found = run(go(), bootstrap=server)
    if as_json:
        print_json(found if len(found) != 1 or all_groups else found[0])
        return
    if not found:
        note("no consumer groups yet")
    for n, info in enumerate(found):
        if n:
            click.echo()
        consumer = info["type"] == "consumer"
        share = info["type"] == "share"
        fields: list[tuple[str, Any]] = [
            ("group", info["group"]),
            ("type", info["type"]),
            ("state", info["state"]),
        ]
        if consumer or share:
            fields += [
                ("assignor", info["protocol"] or "-"),
                ("epoch", f"{info['group_epoch']} (target {info['assignment_epoch']})"),
            ]
        else:
            fields.append(
                ("protocol", f"{info['protocol_type'] or '-'} / {info['protocol'] or '-'}")
            )
        coordinator = info["coordinator"]
        fields.append(
            (
                "coordinator",
                f"{coordinator['id']} ({coordinator['host']}:{coordinator['port']})",
            )
        )
        fields += [("members", len(info["members"])), ("total lag", info["total_lag"])]
        print_fields(fields)
        if info["members"] and consumer:
            print_table(
                ["MEMBER", "EPOCH", "CLIENT-ID", "HOST", "ASSIGNMENT", "TARGET"],
                [
                    (
                        m["member_id"],
                        m["member_epoch"],
                        m["client_id"],
                        m["client_host"],
                        ", ".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"]),
                        ", ".join(f"{a['topic']}-{a['partition']}" for a in m["target_assignment"]),
                    )
                    for m in info["members"]
                ],
                title="Members",
            )
        elif info["members"] and share:
            print_table(
                ["MEMBER", "EPOCH", "CLIENT-ID", "HOST", "ASSIGNMENT"],
                [
                    (
                        m["member_id"],
                        m["member_epoch"],
                        m["client_id"],
                        m["client_host"],
                        ", ".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"]),
                    )
                    for m in info["members"]
                ],
                title="Members",
            )
        elif info["members"]:
            print_table(
                ["MEMBER", "CLIENT-ID", "HOST", "ASSIGNMENT"],
                [
                    (
                        m["member_id"],
                        m["client_id"],
                        m["client_host"],
                        ", ".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"]),
                    )
                    for m in info["members"]
                ],
                title="Members",
            )
        print_table(
            # A share group commits no offsets: its column is the share-partition start
            # offset, as Kafka's kafka-share-groups.sh calls it.
            [
                "TOPIC",
                "PARTITION",
                "START-OFFSET" if share else "COMMITTED",
                "LOG-END",
                "LAG",
                "MEMBER",
            ],
            [
                (
                    p["topic"],
                    p["partition"],
                    p["committed_offset"],
                    p["log_end_offset"],
                    p["lag"],
                    p["member_id"],
                )
                for p in info["partitions"]
            ],
            title="Offsets",
        )


@groups.command("reset-offsets", short_help="Move a group's committed offsets.")
@click.argument("group", shell_complete=complete_groups)
@click.option("-t", "--topic", "topics", multiple=True, help="Topic to reset (repeatable).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option(
    "--to",
    "target",
    metavar="WHERE",
    help="earliest | latest | offset:N | timestamp:MS | timestamp:ISO-DATE | ISO-DATE",
)
@click.option(
    "--shift-by", type=int, metavar="N", help="Move each committed offset by N (negative: back)."
)
@click.option("--to-current", is_flag=True, help="To the committed offsets (kept within the log).")
@click.option(
    "--by-duration",
    metavar="DURATION",
    help="To the first record at or after this long ago: 30m, 2h, 1d, PT15M (ISO 8601).",
)
@click.option(
    "-p",
    "--partition",
    "partitions",
    type=int,
    multiple=True,
    help="Only this partition (repeatable).",
)
@click.option(
    "--execute",
    is_flag=True,
    help="Commit the new offsets (without it: a preview, as Kafka's tool).",
)
@click.option("--dry-run", is_flag=True, help="Preview only (the default; kept for scripts).")
@bootstrap_option
@json_option
def reset_offsets(
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    target: str | None,
    shift_by: int | None,
    to_current: bool,
    by_duration: str | None,
    partitions: tuple[int, ...],
    execute: bool,
    dry_run: bool,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Compute new committed offsets for GROUP and show them; --execute commits them.

    One target: --to (earliest, latest, an offset, the first record at or after a time),
    --shift-by N, --to-current or --by-duration. Offsets stay within each partition's log
    start and end. The group must have no members (stop its consumers first). For a share
    group the offsets are its share-partition start offsets (AlterShareGroupOffsets).

    \b
      josefk groups reset-offsets billing --topic orders --to earliest
      josefk groups reset-offsets billing --all-topics --shift-by -10 --execute
      josefk groups reset-offsets billing --topic orders --by-duration 1h --execute
    """
    chosen = [target is not None, shift_by is not None, to_current, by_duration is not None]
    if sum(chosen) != 1:
        raise click.UsageError("give one of --to, --shift-by, --to-current, --by-duration")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run exclude each other")
    spec: StartSpec | None = None
    if target is not None:
        spec = parse_start(target, param="--to", relative=False)
    elif by_duration is not None:
        spec = StartSpec("timestamp", int(time.time() * 1000) - parse_duration_ms(by_duration))
    server = resolve_bootstrap(bootstrap)

    async def go() -> tuple[str, list[dict[str, Any]]]:
        async with admin_for(server) as admin:
            (description,) = await admin.describe_groups([group])
            if description.state not in _IDLE_STATES or description.members:
                raise CliError(
                    f'group "{group}" is {description.state} with {len(description.members)} '
                    "member(s); stop its consumers before resetting its offsets"
                )
            share = description.group_type == "share"
            if share:
                # A share group (KIP-932): its share-partition start offsets, set with
                # AlterShareGroupOffsets (the group must be empty, as Kafka's rule).
                starts = await admin.list_share_group_offsets(group)
                committed = {tp: start for tp, (start, _) in starts.items() if start >= 0}
            else:
                committed = await admin.list_group_offsets(group)
            names = sorted({tp.topic for tp in committed}) if all_topics else list(topics)
            if not names:
                raise CliError(f'group "{group}" has no committed offsets (--all-topics)')
            descriptions = await describe_existing_topics(admin, names)
            tps = [
                TopicPartition(d.name, p.partition)
                for d in descriptions
                for p in d.partitions
                if not partitions or p.partition in partitions
            ]
            if not tps:
                raise CliError(f"no partition {list(partitions)} in {names}")
            if share:
                old = {tp: committed[tp] for tp in tps if tp in committed}
            else:
                old = await admin.list_group_offsets(group, tps)
            new = await _target_offsets(admin, tps, spec, old, shift_by or 0)
            if execute and share:
                await admin.alter_share_group_offsets(group, new)
            elif execute:
                await admin.alter_group_offsets(group, new)
            return description.state, [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "old_offset": old.get(tp),
                    "new_offset": new[tp],
                }
                for tp in sorted(new)
            ]

    _state, plan = run(go(), bootstrap=server)
    if as_json:
        print_json({"group": group, "dry_run": not execute, "partitions": plan})
        return
    print_table(
        ["TOPIC", "PARTITION", "OLD", "NEW"],
        [(p["topic"], p["partition"], p["old_offset"], p["new_offset"]) for p in plan],
    )
    if not execute:
        note("preview: nothing committed (add --execute to apply)")
    else:
        note(f"committed {len(plan)} offset{'' if len(plan) == 1 else 's'} for group {group}")


_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    """``30m``, ``2h``, ``1d``, ``500ms``, or ISO 8601's ``PT15M`` / ``P1DT2H`` (Kafka's
    tool takes the latter), in milliseconds."""
    raw = text.strip()
    match = re.fullmatch(r"(\d+)\s*(ms|s|m|h|d)", raw.lower())
    if match:
        return int(match.group(1)) * _DURATION_UNITS[match.group(2)]
    iso = re.fullmatch(
        r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", raw.upper()
    )
    if iso and raw.upper() not in ("P", "PT"):
        days, hours, minutes, seconds = (float(g) if g else 0.0 for g in iso.groups())
        return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)
    raise click.BadParameter(
        f"{text!r}: expected a duration such as 30m, 2h, 1d or PT15M", param_hint="--by-duration"
    )


async def _target_offsets(
    admin: AIOAdmin,
    tps: list[TopicPartition],
    spec: StartSpec | None,
    committed: dict[TopicPartition, int],
    shift_by: int = 0,
) -> dict[TopicPartition, int]:
    """The new offset of each partition: ``spec`` (None: the committed offset moved by
    ``shift_by``; a partition without one starts from its log start), within the log."""
    starts = await admin.list_offsets({tp: admin.EARLIEST for tp in tps})
    ends = await admin.list_offsets({tp: admin.LATEST for tp in tps})

    def bounds(tp: TopicPartition) -> tuple[int, int]:
        start, end = starts.get(tp), ends.get(tp)
        low = start.offset if start is not None else 0
        return low, end.offset if end is not None else low

    def within(tp: TopicPartition, offset: int) -> int:
        low, high = bounds(tp)
        return min(max(offset, low), high)

    if spec is None:
        return {tp: within(tp, committed.get(tp, bounds(tp)[0]) + shift_by) for tp in tps}
    if spec.kind == "timestamp":
        found = await admin.list_offsets({tp: spec.value for tp in tps})
        return {
            tp: hit.offset if (hit := found.get(tp)) is not None else bounds(tp)[1] for tp in tps
        }
    new: dict[TopicPartition, int] = {}
    for tp in tps:
        low, high = bounds(tp)
        if spec.kind == "beginning":
            new[tp] = low
        elif spec.kind == "end":
            new[tp] = high
        else:
            new[tp] = within(tp, spec.value)
    return new


@groups.command("delete", short_help="Delete consumer groups and their offsets.")
@click.argument(
    "names",
    nargs=-1,
    required=True,
    metavar="GROUP...",
    shell_complete=complete_groups,
)
@bootstrap_option
@json_option
def delete(names: tuple[str, ...], bootstrap: str | None, as_json: bool) -> None:
    """Delete GROUP(s) and their committed offsets (only groups without members)."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> dict[str, KafkaError | None]:
        async with admin_for(server) as admin:
            return await admin.delete_groups(list(names))

    results = run(go(), bootstrap=server)
    outcome = [
        {
            "group": name,
            "ok": results.get(name) is None,
            "error": describe_error(e) if (e := results.get(name)) is not None else None,
        }
        for name in names
    ]
    if as_json:
        print_json(outcome)
    else:
        print_table(
            ["GROUP", "STATUS"],
            [(o["group"], "deleted" if o["ok"] else o["error"]) for o in outcome],
        )
    _fail_if_any(outcome)


def _fail_if_any(outcome: list[dict[str, Any]]) -> None:
    """Exit 1 when an item failed, each failure repeated on stderr for people and logs."""
    failures = [o for o in outcome if not o["ok"]]
    for failure in failures:
        click.echo(f"Error: {failure['group']}: {failure['error']}", err=True)
    if failures:
        raise SystemExit(1)
