"""``josefk topics create|list|describe|alter|delete|offsets|delete-records``.

Owns the topic verbs: partitions and replication factor at creation, topic configs
(``-c key=value``), the describe view (partitions with leader, epoch, replicas, ISR, log
start offset and high watermark; then every config with its source), config changes and
partition growth, offsets per partition for a time (``offsets --time``, as
kafka-get-offsets.sh) and deleting records before an offset (``delete-records``, alias
``trim``, as kafka-delete-records.sh). Talks to the broker through josefk.client's AIOAdmin only.
"""

from __future__ import annotations

from typing import Any

import click

from josefk.cli.common import (
    CliError,
    admin_for,
    bootstrap_option,
    describe_error,
    describe_existing_topics,
    json_option,
    parse_key_values,
    resolve_bootstrap,
    run,
    unknown_error,
)
from josefk.cli.completion import complete_topics
from josefk.cli.output import note, print_fields, print_json, print_table
from josefk.client import AIOAdmin, TopicDescription, TopicPartition
from josefk.client.errors import KafkaError, UnknownTopicOrPartitionError


@click.group("topics", short_help="Create, list, describe, alter and delete topics.")
def topics() -> None:
    """Create, list, describe, alter and delete topics."""


# ---------------------------------------------------------------------------- create


@topics.command("create", short_help="Create topics.")
@click.argument("names", nargs=-1, required=True, metavar="TOPIC...")
@click.option(
    "-p", "--partitions", type=int, default=-1, help="Partitions (default: num.partitions)."
)
@click.option(
    "-r",
    "--replication-factor",
    type=int,
    default=-1,
    help="Replicas of each partition (default: default.replication.factor).",
)
@click.option("-c", "--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config.")
@click.option("--if-not-exists", is_flag=True, help="A topic that already exists is no error.")
@bootstrap_option
@json_option
def create(
    names: tuple[str, ...],
    partitions: int,
    replication_factor: int,
    configs: tuple[str, ...],
    if_not_exists: bool,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Create TOPIC(s).

    \b
      josefk topics create orders -p 3 -c retention.ms=86400000
    """
    from josefk.client import NewTopic

    settings = parse_key_values(configs, "--config")
    if partitions == 0 or partitions < -1:
        raise click.BadParameter("must be a positive number", param_hint="--partitions")
    server = resolve_bootstrap(bootstrap)

    async def go() -> dict[str, KafkaError | None]:
        async with admin_for(server) as admin:
            return await admin.create_topics(
                [NewTopic(n, partitions, replication_factor, settings) for n in names]
            )

    results = run(go(), bootstrap=server)
    outcome: list[dict[str, Any]] = []
    for name in names:
        error = results.get(name)
        if error is not None and if_not_exists and error.name == "TOPIC_ALREADY_EXISTS":
            error = None
        outcome.append(
            {"topic": name, "ok": error is None, "error": describe_error(error) if error else None}
        )
    if as_json:
        print_json(outcome)
    else:
        print_table(
            ["TOPIC", "STATUS"],
            [(o["topic"], "created" if o["ok"] else o["error"]) for o in outcome],
        )
    _fail_if_any(outcome)


# ---------------------------------------------------------------------------- list


@topics.command("list", short_help="List topics with partitions and replicas.")
@click.option("-i", "--internal", is_flag=True, help="Include internal topics.")
@bootstrap_option
@json_option
def list_topics(internal: bool, bootstrap: str | None, as_json: bool) -> None:
    """List topics with their partition count and replication factor."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> list[TopicDescription]:
        async with admin_for(server) as admin:
            names = await admin.list_topics(include_internal=internal)
            return await admin.describe_topics(names) if names else []

    found = run(go(), bootstrap=server)
    rows = [
        {
            "name": t.name,
            "partitions": len(t.partitions),
            "replication_factor": max((len(p.replicas) for p in t.partitions), default=0),
            "internal": t.is_internal,
        }
        for t in found
    ]
    if as_json:
        print_json(rows)
    elif not rows:
        note("no topics yet; create one with `josefk topics create NAME`")
    else:
        print_table(
            ["NAME", "PARTITIONS", "REPLICAS"] + (["INTERNAL"] if internal else []),
            [
                [r["name"], r["partitions"], r["replication_factor"]]
                + ([r["internal"]] if internal else [])
                for r in rows
            ],
        )


# ---------------------------------------------------------------------------- describe


async def describe_topic(admin: AIOAdmin, name: str) -> dict[str, Any]:
    """Everything ``topics describe`` shows about one topic, JSON-ready."""
    (description,) = await describe_existing_topics(admin, [name])
    tps = [TopicPartition(name, p.partition) for p in description.partitions]
    starts = await admin.list_offsets({tp: admin.EARLIEST for tp in tps}) if tps else {}
    ends = await admin.list_offsets({tp: admin.LATEST for tp in tps}) if tps else {}
    configs = await admin.describe_topic_configs(name)
    partitions = []
    for p in description.partitions:
        tp = TopicPartition(name, p.partition)
        start, end = starts.get(tp), ends.get(tp)
        partitions.append(
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                # Kafka's --under-replicated-partitions: fewer in sync than replicas.
                "under_replicated": len(p.isr) < len(p.replicas),
                "log_start_offset": start.offset if start is not None else None,
                "high_watermark": end.offset if end is not None else None,
            }
        )
    return {
        "name": description.name,
        "topic_id": str(description.topic_id) if description.topic_id else None,
        "internal": description.is_internal,
        "partitions": partitions,
        "configs": {
            key: {
                "value": None if entry.is_sensitive else entry.value,
                "source": entry.source.name,
                "read_only": entry.read_only,
                "sensitive": entry.is_sensitive,
            }
            for key, entry in sorted(configs.items())
        },
    }


@topics.command("describe", short_help="Partitions, offsets and configs of a topic.")
@click.argument("name", metavar="TOPIC", shell_complete=complete_topics)
@click.option("--non-default", is_flag=True, help="Show only configs set on the topic.")
@click.option(
    "--under-replicated",
    is_flag=True,
    help="Show only partitions with fewer in-sync replicas than replicas, or no leader.",
)
@bootstrap_option
@json_option
def describe(
    name: str, non_default: bool, under_replicated: bool, bootstrap: str | None, as_json: bool
) -> None:
    """Show TOPIC's partitions (leader, replicas, ISR, log start offset, high watermark)
    and its configs with where each value comes from."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> dict[str, Any]:
        async with admin_for(server) as admin:
            return await describe_topic(admin, name)

    info = run(go(), bootstrap=server)
    configs = {
        k: v
        for k, v in info["configs"].items()
        if not non_default or v["source"] != "DEFAULT_CONFIG"
    }
    if under_replicated:
        info["partitions"] = [
            p for p in info["partitions"] if p["under_replicated"] or p["leader"] < 0
        ]
    if as_json:
        print_json({**info, "configs": configs})
        return
    parts = info["partitions"]
    print_fields(
        [
            ("name", info["name"]),
            ("topic id", info["topic_id"]),
            ("internal", info["internal"]),
            ("partitions", len(parts)),
            ("replicas", max((len(p["replicas"]) for p in parts), default=0)),
            (
                "records",
                sum((p["high_watermark"] or 0) - (p["log_start_offset"] or 0) for p in parts),
            ),
            ("under-replicated", sum(p["under_replicated"] for p in parts)),
        ]
    )
    print_table(
        [
            "PARTITION",
            "LEADER",
            "EPOCH",
            "REPLICAS",
            "ISR",
            "LOG-START",
            "HIGH-WATERMARK",
            "STATUS",
        ],
        [
            (
                p["partition"],
                p["leader"],
                p["leader_epoch"],
                p["replicas"],
                p["isr"],
                p["log_start_offset"],
                p["high_watermark"],
                "offline"
                if p["leader"] < 0
                else ("under-replicated" if p["under_replicated"] else "ok"),
            )
            for p in parts
        ],
        title="Partitions",
    )
    print_table(
        ["KEY", "VALUE", "SOURCE"],
        [(k, v["value"], v["source"]) for k, v in configs.items()],
        title="Configs",
    )


# ---------------------------------------------------------------------------- alter


@topics.command("alter", short_help="Set or delete configs, add partitions.")
@click.argument("name", metavar="TOPIC", shell_complete=complete_topics)
@click.option(
    "-c",
    "--set",
    "--config",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a topic config (repeatable).",
)
@click.option(
    "-d",
    "--delete",
    "deletes",
    multiple=True,
    metavar="KEY",
    help="Remove a topic config: back to the broker's default (repeatable).",
)
@click.option(
    "-p", "--partitions", type=int, default=None, help="Grow the topic to this many partitions."
)
@bootstrap_option
@json_option
def alter(
    name: str,
    sets: tuple[str, ...],
    deletes: tuple[str, ...],
    partitions: int | None,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Change TOPIC's configs, or grow its partitions (they can only grow).

    \b
      josefk topics alter orders --set retention.ms=3600000
      josefk topics alter orders --delete cleanup.policy --partitions 6
    """
    from josefk.client import ResourceType

    changes: dict[str, str | None] = dict(parse_key_values(sets, "--set"))
    for key in deletes:
        if key in changes:
            raise click.BadParameter(f"{key} is both set and deleted", param_hint="--delete")
        changes[key] = None
    if not changes and partitions is None:
        raise click.UsageError("nothing to change: give --set, --delete or --partitions")
    server = resolve_bootstrap(bootstrap)

    async def go() -> int:
        async with admin_for(server) as admin:
            (description,) = await describe_existing_topics(admin, [name])
            count = len(description.partitions)
            if partitions is not None and partitions != count:
                if partitions < count:
                    raise CliError(
                        f'topic "{name}" has {count} partitions; partitions can only be added'
                    )
                error = (await admin.create_partitions({name: partitions})).get(name)
                if error is not None:
                    raise error
                count = partitions
            if changes:
                await admin.alter_configs((ResourceType.TOPIC, name), changes)
            return count

    count = run(go(), bootstrap=server)
    set_configs = {k: v for k, v in changes.items() if v is not None}
    deleted = [k for k, v in changes.items() if v is None]
    result = {"topic": name, "set": set_configs, "deleted": deleted, "partitions": count}
    if as_json:
        print_json(result)
        return
    for key, value in set_configs.items():
        click.echo(f"{name}: set {key}={value}")
    for key in deleted:
        click.echo(f"{name}: deleted {key} (back to the default)")
    if partitions is not None:
        click.echo(f"{name}: {count} partitions")


# ---------------------------------------------------------------------------- delete


@topics.command("delete", short_help="Delete topics and their data.")
@click.argument(
    "names",
    nargs=-1,
    required=True,
    metavar="TOPIC...",
    shell_complete=complete_topics,
)
@bootstrap_option
@json_option
def delete(names: tuple[str, ...], bootstrap: str | None, as_json: bool) -> None:
    """Delete TOPIC(s) and all their records."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> tuple[dict[str, KafkaError | None], list[str]]:
        async with admin_for(server) as admin:
            results = await admin.delete_topics(list(names))
            unknown = [n for n, e in results.items() if isinstance(e, UnknownTopicOrPartitionError)]
            known = await admin.list_topics(include_internal=True) if unknown else []
            return results, known

    results, known = run(go(), bootstrap=server)
    outcome = []
    for name in names:
        error = results.get(name)
        message = None
        if isinstance(error, UnknownTopicOrPartitionError):
            message = unknown_error("topic", name, known, "josefk topics list").message
        elif error is not None:
            message = describe_error(error)
        outcome.append({"topic": name, "ok": error is None, "error": message})
    if as_json:
        print_json(outcome)
    else:
        print_table(
            ["TOPIC", "STATUS"],
            [(o["topic"], "deleted" if o["ok"] else o["error"]) for o in outcome],
        )
    _fail_if_any(outcome)


def _fail_if_any(outcome: list[dict[str, Any]]) -> None:
    """Exit 1 when an item failed, each failure repeated on stderr for people and logs."""
    failures = [o for o in outcome if not o["ok"]]
    for failure in failures:
        click.echo(f"Error: {failure['topic']}: {failure['error']}", err=True)
    if failures:
        raise SystemExit(1)


# ---------------------------------------------------------------------- offsets, delete-records


def _partition_spec(text: str, *, with_offset: bool, param: str) -> tuple[str, int | None, int]:
    """``TOPIC[:PARTITION]=OFFSET`` (with_offset) or ``TOPIC[:PARTITION]``; partition None
    means every partition. The offset may be -1: the high watermark (everything)."""
    where, sep, offset_text = text.rpartition("=") if with_offset else (text, "", "")
    if with_offset and (not sep or not where):
        raise click.BadParameter(f"{text!r}: expected TOPIC[:PARTITION]=OFFSET", param_hint=param)
    topic, colon, partition_text = where.rpartition(":")
    if not colon:
        topic, partition_text = where, ""
    partition = None
    if partition_text:
        if not partition_text.isdigit():
            raise click.BadParameter(
                f"{text!r}: partition {partition_text!r} is not a number", param_hint=param
            )
        partition = int(partition_text)
    offset = 0
    if with_offset:
        if not (offset_text.isdigit() or offset_text == "-1"):
            raise click.BadParameter(
                f"{text!r}: offset {offset_text!r} is not a number (-1: the high watermark)",
                param_hint=param,
            )
        offset = int(offset_text)
    return topic, partition, offset


async def _expand(
    admin: AIOAdmin, specs: list[tuple[str, int | None, int]]
) -> dict[TopicPartition, int]:
    """Each spec's partitions (all when none is named), checked against the topic."""
    topics = list(dict.fromkeys(topic for topic, _, _ in specs))
    descriptions = {d.name: d for d in await describe_existing_topics(admin, topics)}
    out: dict[TopicPartition, int] = {}
    for topic, partition, offset in specs:
        known = [p.partition for p in descriptions[topic].partitions]
        if partition is not None and partition not in known:
            raise CliError(f'topic "{topic}" has partitions 0..{len(known) - 1}, not {partition}')
        for p in known if partition is None else [partition]:
            out[TopicPartition(topic, p)] = offset
    return out


@topics.command("delete-records", short_help="Delete records before an offset (trim).")
@click.argument("specs", nargs=-1, required=True, metavar="TOPIC[:PARTITION]=OFFSET...")
@bootstrap_option
@json_option
def delete_records(specs: tuple[str, ...], bootstrap: str | None, as_json: bool) -> None:
    """Delete the records before OFFSET (the partition's log start offset moves up to it),
    as kafka-delete-records.sh. No partition: every partition of the topic; offset -1: up
    to the high watermark (everything so far).

    \b
      josefk topics delete-records orders:0=100 orders:1=-1
      josefk topics trim orders=-1
    """
    parsed = [_partition_spec(s, with_offset=True, param="SPEC") for s in specs]
    server = resolve_bootstrap(bootstrap)

    async def go() -> dict[TopicPartition, int]:
        async with admin_for(server) as admin:
            wanted = await _expand(admin, parsed)
            return await admin.delete_records(wanted)

    low = run(go(), bootstrap=server)
    rows = [
        {"topic": tp.topic, "partition": tp.partition, "log_start_offset": offset}
        for tp, offset in sorted(low.items())
    ]
    if as_json:
        print_json(rows)
    else:
        print_table(
            ["TOPIC", "PARTITION", "LOG-START"],
            [(r["topic"], r["partition"], r["log_start_offset"]) for r in rows],
        )


topics.add_command(delete_records, "trim")


@topics.command("offsets", short_help="Offsets per partition: ends, or for a time.")
@click.argument(
    "specs",
    nargs=-1,
    required=True,
    metavar="TOPIC[:PARTITION]...",
    shell_complete=complete_topics,
)
@click.option(
    "--time",
    "when",
    metavar="WHEN",
    default="latest",
    show_default=True,
    help="earliest | latest | MS | ISO-DATE: for a time, the first offset whose record is at "
    "or after it (as kafka-get-offsets.sh --time).",
)
@bootstrap_option
@json_option
def offsets(specs: tuple[str, ...], when: str, bootstrap: str | None, as_json: bool) -> None:
    """Print an offset per partition: the log start (earliest), the high watermark (latest)
    or the first offset at or after a time (none: the high watermark, marked)."""
    from josefk.cli.common import parse_timestamp

    lowered = when.strip().lower()
    timestamp = {"earliest": -2, "beginning": -2, "latest": -1, "end": -1}.get(lowered)
    if timestamp is None:
        try:
            timestamp = parse_timestamp(when)
        except click.BadParameter as exc:
            raise click.BadParameter(exc.message, param_hint="--time") from None
    parsed = [_partition_spec(s, with_offset=False, param="SPEC") for s in specs]
    server = resolve_bootstrap(bootstrap)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            tps = sorted(await _expand(admin, parsed))
            found = await admin.list_offsets({tp: timestamp for tp in tps})
            ends = await admin.list_offsets({tp: admin.LATEST for tp in tps})
        rows = []
        for tp in tps:
            hit, end = found.get(tp), ends.get(tp)
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "offset": hit.offset if hit is not None else (end.offset if end else None),
                    "timestamp": hit.timestamp if hit is not None and timestamp >= 0 else None,
                    # No record at or after the time: the next offset to be written.
                    "after_last_record": hit is None,
                }
            )
        return rows

    rows = run(go(), bootstrap=server)
    if as_json:
        print_json(rows)
        return
    for r in rows:
        click.echo(f"{r['topic']}:{r['partition']}:{r['offset']}")
