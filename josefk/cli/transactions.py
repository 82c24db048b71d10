"""``josefk transactions list|describe|producers``.

Owns the operator's view of transactions (KIP-664): every transactional id the coordinators
know with its producer and state, for chosen ids the open transaction's partitions, age and
timeout, and the producers a topic's partition leaders track (who holds the LSO back). Talks to the broker through josefk.client's AIOAdmin only.
"""

from __future__ import annotations

import time
from typing import Any

import click

from josefk.cli.common import (
    CliError,
    admin_for,
    bootstrap_option,
    describe_existing_topics,
    json_option,
    resolve_bootstrap,
    run,
)
from josefk.cli.output import note, print_fields, print_json, print_table
from josefk.client import TopicPartition
from josefk.client.errors import KafkaError

# Kafka's coordinator state names, as ListTransactions filters and answers them.
STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


@click.group("transactions", short_help="List and describe transactions (transactional ids).")
def transactions() -> None:
    """List and describe the transactional ids the transaction coordinators know."""


@transactions.command("list", short_help="Transactional ids with their producer and state.")
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    help=f"Only ids in this state (repeatable): {', '.join(STATES)}.",
)
@click.option(
    "--producer-id",
    "producer_ids",
    type=int,
    multiple=True,
    help="Only this producer id (repeatable).",
)
@bootstrap_option
@json_option
def list_transactions(
    states: tuple[str, ...], producer_ids: tuple[int, ...], bootstrap: str | None, as_json: bool
) -> None:
    """List the transactional ids every broker's transaction coordinator knows."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            listings = await admin.list_transactions(states=states, producer_ids=producer_ids)
        return [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "state": t.state,
            }
            for t in listings
        ]

    rows = run(go(), bootstrap=server)
    if as_json:
        print_json(rows)
    elif not rows:
        note("no transactional ids" + (" match" if states or producer_ids else " yet"))
    else:
        print_table(
            ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"],
            [(r["transactional_id"], r["producer_id"], r["state"]) for r in rows],
        )


@transactions.command("describe", short_help="State, producer, partitions of transactions.")
@click.argument("ids", nargs=-1, required=True, metavar="TRANSACTIONAL-ID...")
@bootstrap_option
@json_option
def describe(ids: tuple[str, ...], bootstrap: str | None, as_json: bool) -> None:
    """Show each transactional id's state, producer id and epoch, timeout, and the open
    transaction's start time and partitions."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            described = await admin.describe_transactions(list(ids))
        out = []
        for d in described:
            if d.error is not None:
                if d.error.name == "TRANSACTIONAL_ID_NOT_FOUND":
                    raise CliError(
                        f"no transactional id {d.transactional_id!r}"
                        " (see: josefk transactions list)"
                    )
                raise d.error
            out.append(
                {
                    "transactional_id": d.transactional_id,
                    "state": d.state,
                    "producer_id": d.producer_id,
                    "producer_epoch": d.producer_epoch,
                    "transaction_timeout_ms": d.transaction_timeout_ms,
                    "transaction_start_time_ms": d.transaction_start_time_ms,
                    "coordinator": d.coordinator_id,
                    "partitions": [
                        {"topic": tp.topic, "partition": tp.partition} for tp in d.partitions
                    ],
                }
            )
        return out

    found = run(go(), bootstrap=server)
    if as_json:
        print_json(found if len(found) != 1 else found[0])
        return
    now_ms = int(time.time() * 1000)
    for n, info in enumerate(found):
        if n:
            click.echo()
        start = info["transaction_start_time_ms"]
        print_fields(
            [
                ("transactional id", info["transactional_id"]),
                ("state", info["state"]),
                ("producer", f"{info['producer_id']} epoch {info['producer_epoch']}"),
                ("coordinator", info["coordinator"]),
                ("timeout", f"{info['transaction_timeout_ms']} ms"),
                (
                    "open for",
                    f"{max(0, now_ms - start)} ms" if start is not None and start >= 0 else "-",
                ),
            ]
        )
        if info["partitions"]:
            print_table(
                ["TOPIC", "PARTITION"],
                [(p["topic"], p["partition"]) for p in info["partitions"]],
                title="Partitions",
            )


@transactions.command("producers", short_help="Active producers of a topic's partitions.")
@click.argument("topic")
@click.option(
    "-p",
    "--partition",
    "partitions",
    type=int,
    multiple=True,
    help="Only this partition (repeatable; default: every partition).",
)
@bootstrap_option
@json_option
def producers(
    topic: str, partitions: tuple[int, ...], bootstrap: str | None, as_json: bool
) -> None:
    """Show the producers each partition's leader tracks (DescribeProducers): producer id
    and epoch, last sequence and timestamp, and the first offset of an open transaction
    (what holds the last stable offset back)."""
    server = resolve_bootstrap(bootstrap)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            (description,) = await describe_existing_topics(admin, [topic])
            known = [p.partition for p in description.partitions]
            for p in partitions:
                if p not in known:
                    raise CliError(f'topic "{topic}" has partitions 0..{len(known) - 1}, not {p}')
            found = await admin.describe_producers(
                [TopicPartition(topic, p) for p in (partitions or sorted(known))]
            )
        rows: list[dict[str, Any]] = []
        for tp, states in sorted(found.items()):
            if isinstance(states, KafkaError):
                raise states
            rows.extend(
                {
                    "partition": tp.partition,
                    "producer_id": s.producer_id,
                    "producer_epoch": s.producer_epoch,
                    "last_sequence": s.last_sequence,
                    "last_timestamp": s.last_timestamp,
                    "coordinator_epoch": s.coordinator_epoch,
                    "current_transaction_start_offset": (
                        s.current_transaction_start_offset
                        if s.current_transaction_start_offset >= 0
                        else None
                    ),
                }
                for s in states
            )
        return rows

    rows = run(go(), bootstrap=server)
    if as_json:
        print_json(rows)
    elif not rows:
        note(f"no active producers on {topic}")
    else:
        print_table(
            ["PARTITION", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "OPEN-TXN-START"],
            [
                (
                    r["partition"],
                    r["producer_id"],
                    r["producer_epoch"],
                    r["last_sequence"],
                    r["current_transaction_start_offset"],
                )
                for r in rows
            ],
        )
