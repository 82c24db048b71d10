"""``josefk cluster info`` (cluster id, controller, brokers, topic count) and ``josefk cluster
elect-leaders`` (preferred or unclean leader election through the controller), ``josefk
cluster reassign`` and ``reassignments`` (moving replicas to other brokers, KIP-455), and
``josefk cluster log-dirs`` (each broker's log directories and the replicas they hold).

Owns the cluster verbs; talks to the broker through josefk.client's AIOAdmin only.
"""

from __future__ import annotations

import asyncio
from typing import Any

import click

from josefk.cli.common import admin_for, bootstrap_option, json_option, resolve_bootstrap, run
from josefk.cli.output import note, print_fields, print_json, print_table
from josefk.client import AIOAdmin, TopicPartition


@click.group("cluster", short_help="Describe the cluster: id, controller, brokers.")
def cluster() -> None:
    """Describe the cluster."""


@cluster.command("info", short_help="Cluster id, controller, brokers and topic count.")
@bootstrap_option
@json_option
def info(bootstrap: str | None, as_json: bool) -> None:
    """Show the cluster id, the controller, every broker and the number of topics."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> dict[str, Any]:
        async with admin_for(server) as admin:
            description = await admin.describe_cluster()
            every = await admin.list_topics(include_internal=True)
            user = await admin.list_topics(include_internal=False)
        return {
            "cluster_id": description.cluster_id,
            "controller_id": description.controller_id,
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in sorted(description.brokers, key=lambda b: b.node_id)
            ],
            "topics": len(user),
            "internal_topics": len(every) - len(user),
        }

    data = run(go(), bootstrap=server)
    if as_json:
        print_json(data)
        return
    print_fields(
        [
            ("cluster id", data["cluster_id"]),
            ("controller", data["controller_id"]),
            ("brokers", len(data["brokers"])),
            ("topics", f"{data['topics']} (+{data['internal_topics']} internal)"),
        ]
    )
    print_table(
        ["ID", "HOST", "PORT", "RACK", "CONTROLLER"],
        [
            (b["node_id"], b["host"], b["port"], b["rack"], b["node_id"] == data["controller_id"])
            for b in data["brokers"]
        ],
        title="Brokers",
    )


def _partitions(specs: tuple[str, ...]) -> list[TopicPartition] | None:
    """``TOPIC:PARTITION`` arguments; none means every partition of the cluster."""
    if not specs:
        return None
    out = []
    for spec in specs:
        topic, sep, index = spec.rpartition(":")
        if not sep or not topic or not index.isdigit():
            raise click.BadParameter(f"{spec!r} is not TOPIC:PARTITION", param_hint="PARTITIONS")
        out.append(TopicPartition(topic, int(index)))
    return out


@cluster.command("elect-leaders", short_help="Give leadership back to preferred replicas.")
@click.argument("specs", metavar="[TOPIC:PARTITION]...", nargs=-1)
@click.option(
    "--unclean",
    is_flag=True,
    help="Give leaderless partitions any live replica, in sync or not (may lose data).",
)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Also list the partitions whose leader was already the preferred one.",
)
@bootstrap_option
@json_option
def elect_leaders(
    specs: tuple[str, ...], unclean: bool, show_all: bool, bootstrap: str | None, as_json: bool
) -> None:
    """Elect each partition's preferred replica (the first of its replicas) as its leader,
    as after a broker came back (Kafka's ElectLeaders); all partitions when none is named.
    Lists the partitions whose leader changed and those that failed; --all also the ones
    already led by their preferred replica (ELECTION_NOT_NEEDED).

    \b
      josefk cluster elect-leaders
      josefk cluster elect-leaders orders:0 orders:1
    """
    server = resolve_bootstrap(bootstrap)
    wanted = _partitions(specs)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            results = await admin.elect_leaders(wanted, unclean=unclean)
        return [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "result": "elected" if error is None else error.name,
            }
            for tp, error in sorted(results.items())
        ]

    every = run(go(), bootstrap=server)
    rows = [r for r in every if show_all or r["result"] != "ELECTION_NOT_NEEDED"]
    if as_json:
        print_json(rows)
        return
    unchanged = len(every) - len(rows)
    if rows:
        print_table(
            ["TOPIC", "PARTITION", "RESULT"],
            [(r["topic"], r["partition"], r["result"]) for r in rows],
        )
    elected = sum(r["result"] == "elected" for r in rows)
    tail = f"; {unchanged} already led by their preferred replica (--all lists them)"
    note(f"{elected} leader(s) changed{tail if unchanged else ''}")


def _targets(specs: tuple[str, ...], cancel: bool) -> dict[TopicPartition, list[int] | None]:
    """``TOPIC:PARTITION=B1,B2,...`` arguments (or plain ``TOPIC:PARTITION`` with --cancel)."""
    targets: dict[TopicPartition, list[int] | None] = {}
    for spec in specs:
        where, sep, brokers = spec.partition("=")
        (tp,) = _partitions((where,)) or []
        if cancel:
            if sep:
                raise click.BadParameter(f"{spec!r}: --cancel takes TOPIC:PARTITION only")
            targets[tp] = None
            continue
        ids = [b.strip() for b in brokers.split(",") if b.strip()]
        if not sep or not ids or not all(b.isdigit() for b in ids):
            raise click.BadParameter(
                f"{spec!r} is not TOPIC:PARTITION=BROKER,BROKER,...", param_hint="MOVES"
            )
        targets[tp] = [int(b) for b in ids]
    return targets


@cluster.command("reassign", short_help="Move partitions' replicas to other brokers.")
@click.argument("specs", metavar="TOPIC:PARTITION=BROKER,...", nargs=-1, required=True)
@click.option("--cancel", is_flag=True, help="Cancel the moves in progress of TOPIC:PARTITION.")
@click.option(
    "--keep-replication-factor",
    is_flag=True,
    help="Refuse a move that changes the number of replicas (KIP-860).",
)
@click.option("--wait", is_flag=True, help="Return once every move has finished.")
@click.option(
    "--timeout", type=float, default=120.0, show_default=True, help="Seconds --wait waits."
)
@bootstrap_option
@json_option
def reassign(
    specs: tuple[str, ...],
    cancel: bool,
    keep_replication_factor: bool,
    wait: bool,
    timeout: float,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Move each partition to the given brokers, the first being its preferred leader (Kafka's
    AlterPartitionReassignments): the new replicas copy the log and join the ISR, then the
    replicas not named leave and delete their copy. Clients keep producing and consuming.

    \b
      josefk cluster reassign orders:0=2,3,4 orders:1=3,4,2 --wait
      josefk cluster reassign --cancel orders:0
    """
    server = resolve_bootstrap(bootstrap)
    targets = _targets(specs, cancel)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            results = await admin.alter_partition_reassignments(
                targets, allow_replication_factor_change=not keep_replication_factor
            )
            started = [tp for tp, error in results.items() if error is None]
            if wait and started:
                await _wait_for_moves(admin, started, timeout_s=timeout)
        return [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": targets.get(tp),
                "result": ("cancelled" if cancel else "done" if wait else "started")
                if error is None
                else error.name,
            }
            for tp, error in sorted(results.items())
        ]

    rows = run(go(), bootstrap=server)
    if as_json:
        print_json(rows)
    else:
        print_table(
            ["TOPIC", "PARTITION", "REPLICAS", "RESULT"],
            [
                (
                    r["topic"],
                    r["partition"],
                    ",".join(map(str, r["replicas"] or [])),
                    r["result"],
                )
                for r in rows
            ],
        )
    if any(r["result"] not in ("cancelled", "done", "started") for r in rows):
        raise SystemExit(1)


async def _wait_for_moves(
    admin: AIOAdmin, partitions: list[TopicPartition], *, timeout_s: float
) -> None:
    try:
        async with asyncio.timeout(timeout_s):
            # A person waits here, not the broker: a short poll of the controller is fine.
            while await admin.list_partition_reassignments(partitions):  # noqa: ASYNC110
                await asyncio.sleep(0.25)
    except TimeoutError:
        raise click.ClickException(f"moves still in progress after {timeout_s:.0f} s") from None


@cluster.command("reassignments", short_help="List the partition moves in progress.")
@click.argument("specs", metavar="[TOPIC:PARTITION]...", nargs=-1)
@bootstrap_option
@json_option
def reassignments(specs: tuple[str, ...], bootstrap: str | None, as_json: bool) -> None:
    """List the moves in progress (Kafka's ListPartitionReassignments): every replica, and
    which are being added and removed."""
    server = resolve_bootstrap(bootstrap)
    wanted = _partitions(specs)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            moves = await admin.list_partition_reassignments(wanted)
        return [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": move.replicas,
                "adding": move.adding_replicas,
                "removing": move.removing_replicas,
            }
            for tp, move in sorted(moves.items())
        ]

    rows = run(go(), bootstrap=server)
    if as_json:
        print_json(rows)
        return
    print_table(
        ["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
        [
            (
                r["topic"],
                r["partition"],
                ",".join(map(str, r["replicas"])),
                ",".join(map(str, r["adding"])),
                ",".join(map(str, r["removing"])),
            )
            for r in rows
        ],
    )


@cluster.command("log-dirs", short_help="Each broker's log directories and their replicas.")
@click.option("--broker", "broker_ids", type=int, multiple=True, help="Only this broker (repeat).")
@bootstrap_option
@json_option
def log_dirs(broker_ids: tuple[int, ...], bootstrap: str | None, as_json: bool) -> None:
    """Show, per broker, its log directories with their free space and every partition
    replica they hold with its size (Kafka's DescribeLogDirs)."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            brokers = broker_ids or tuple(
                sorted(b.node_id for b in (await admin.describe_cluster()).brokers)
            )
            rows = []
            for broker_id in brokers:
                for directory in await admin.describe_log_dirs(broker_id):
                    rows.append(
                        {
                            "broker": broker_id,
                            "path": directory.path,
                            "error": None if directory.error is None else directory.error.name,
                            "total_bytes": directory.total_bytes,
                            "usable_bytes": directory.usable_bytes,
                            "partitions": [
                                {
                                    "topic": p.topic,
                                    "partition": p.partition,
                                    "size": p.size,
                                    "offset_lag": p.offset_lag,
                                }
                                for p in sorted(
                                    directory.partitions, key=lambda p: (p.topic, p.partition)
                                )
                            ],
                        }
                    )
        return rows

    rows = run(go(), bootstrap=server)
    if as_json:
        print_json(rows)
        return
    print_table(
        ["BROKER", "DIR", "TOPIC", "PARTITION", "SIZE", "LAG"],
        [
            (r["broker"], r["path"], p["topic"], p["partition"], p["size"], p["offset_lag"])
            for r in rows
            for p in r["partitions"]
        ],
    )
