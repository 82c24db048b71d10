"""``josefk cluster info``: cluster id, controller, brokers and how many topics.

Owns the cluster verbs; talks to the broker through josefk.client's AIOAdmin only.
"""

from __future__ import annotations

from typing import Any

import click

from josefk.cli.common import admin_for, bootstrap_option, json_option, resolve_bootstrap, run
from josefk.cli.output import print_fields, print_json, print_table


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
