"""``josefk cluster info`` (cluster id, controller, brokers, topic count) and ``josefk cluster
elect-leaders`` (preferred or unclean leader election through the controller).

Owns the cluster verbs; talks to the broker through josefk.client's AIOAdmin only.
"""

from __future__ import annotations

from typing import Any

import click

from josefk.cli.common import admin_for, bootstrap_option, json_option, resolve_bootstrap, run
from josefk.cli.output import print_fields, print_json, print_table
from josefk.client import TopicPartition


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
@bootstrap_option
@json_option
def elect_leaders(
    specs: tuple[str, ...], unclean: bool, bootstrap: str | None, as_json: bool
) -> None:
    """Elect each partition's preferred replica (the first of its replicas) as its leader,
    as after a broker came back (Kafka's ElectLeaders); all partitions when none is named.

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

    rows = run(go(), bootstrap=server)
    if as_json:
        print_json(rows)
        return
    print_table(
        ["TOPIC", "PARTITION", "RESULT"], [(r["topic"], r["partition"], r["result"]) for r in rows]
    )
