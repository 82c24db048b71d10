"""``josefk transactions list|describe|producers|find-hanging|abort``.

Owns the operator's view of transactions (KIP-664): every transactional id the coordinators
know with its producer and state, for chosen ids the open transaction's partitions, age and
timeout, the producers a topic's partition leaders track (who holds the LSO back), the
hanging transactions among them (open past the timeout, unknown to their coordinator) and
aborting one with a marker written to the partition's leader. Talks to the broker through
josefk.client's AIOAdmin only.
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
# The states of a transaction not yet ended.
_OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})


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
        started = start is not None and start >= 0
        # The coordinator keeps the last transaction's start after it ends (as Kafka's does):
        # only an open one has been open for that long.
        if info["state"] in _OPEN_STATES:
            since = ("open for", f"{max(0, now_ms - start)} ms" if started else "-")
        else:
            since = ("last began", f"{max(0, now_ms - start)} ms ago" if started else "-")
        print_fields(
            [
                ("transactional id", info["transactional_id"]),
                ("state", info["state"]),
                ("producer", f"{info['producer_id']} epoch {info['producer_epoch']}"),
                ("coordinator", info["coordinator"]),
                ("timeout", f"{info['transaction_timeout_ms']} ms"),
                since,
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


async def _open_transactions(
    admin: Any, topic: str, partitions: tuple[int, ...]
) -> list[tuple[TopicPartition, Any]]:
    """(partition, ProducerState) of every open transaction on ``topic``'s partitions."""
    (description,) = await describe_existing_topics(admin, [topic])
    known = [p.partition for p in description.partitions]
    for p in partitions:
        if p not in known:
            raise CliError(f'topic "{topic}" has partitions 0..{len(known) - 1}, not {p}')
    found = await admin.describe_producers(
        [TopicPartition(topic, p) for p in (partitions or sorted(known))]
    )
    out = []
    for tp, states in sorted(found.items()):
        if isinstance(states, KafkaError):
            raise states
        out += [(tp, s) for s in states if s.current_transaction_start_offset >= 0]
    return out


@transactions.command(
    "find-hanging", short_help="Open transactions their coordinator does not know."
)
@click.option("-t", "--topic", required=True, help="Look at this topic's partitions.")
@click.option(
    "-p", "--partition", "partitions", type=int, multiple=True, help="Only this partition."
)
@click.option(
    "--max-transaction-timeout",
    type=click.FloatRange(min=0),
    default=15.0,
    show_default=True,
    metavar="MINUTES",
    help="A transaction open for less than this may still complete: not reported.",
)
@bootstrap_option
@json_option
def find_hanging(
    topic: str,
    partitions: tuple[int, ...],
    max_transaction_timeout: float,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """List the open transactions on --topic's partitions that hold the last stable offset
    back and that no coordinator will finish (as kafka-transactions.sh find-hanging): open
    longer than --max-transaction-timeout, and their producer has no ongoing transaction
    over that partition at its coordinator. `josefk transactions abort` ends one."""
    server = resolve_bootstrap(bootstrap)
    now_ms = int(time.time() * 1000)

    async def go() -> list[dict[str, Any]]:
        async with admin_for(server) as admin:
            open_ones = await _open_transactions(admin, topic, partitions)
            old = [
                (tp, s)
                for tp, s in open_ones
                if now_ms - s.last_timestamp >= max_transaction_timeout * 60_000
            ]
            hanging = []
            for tp, state in old:
                listings = await admin.list_transactions(producer_ids=[state.producer_id])
                ids = [listing.transactional_id for listing in listings]
                described = await admin.describe_transactions(ids) if ids else []
                known = any(
                    d.state in _OPEN_STATES
                    and d.producer_epoch == state.producer_epoch
                    and tp in set(d.partitions)
                    for d in described
                )
                if not known:
                    hanging.append((tp, state))
        return [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "producer_id": s.producer_id,
                "producer_epoch": s.producer_epoch,
                "coordinator_epoch": s.coordinator_epoch,
                "start_offset": s.current_transaction_start_offset,
                "last_timestamp": s.last_timestamp,
            }
            for tp, s in hanging
        ]

    rows = run(go(), bootstrap=server)
    if as_json:
        print_json(rows)
    elif not rows:
        note(f"no hanging transactions on {topic}")
    else:
        print_table(
            ["TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "COORDINATOR-EPOCH", "START-OFFSET"],
            [
                (
                    r["topic"],
                    r["partition"],
                    r["producer_id"],
                    r["producer_epoch"],
                    r["coordinator_epoch"],
                    r["start_offset"],
                )
                for r in rows
            ],
        )


@transactions.command("abort", short_help="Abort an open transaction on one partition.")
@click.option("-t", "--topic", required=True)
@click.option("-p", "--partition", required=True, type=click.IntRange(min=0))
@click.option(
    "--start-offset",
    type=click.IntRange(min=0),
    help="The open transaction that starts at this offset (as find-hanging shows it).",
)
@click.option("--producer-id", type=int, help="Instead of --start-offset: the producer id ...")
@click.option("--producer-epoch", type=int, help="... its epoch ...")
@click.option("--coordinator-epoch", type=int, help="... and the coordinator epoch.")
@bootstrap_option
@json_option
def abort(
    topic: str,
    partition: int,
    start_offset: int | None,
    producer_id: int | None,
    producer_epoch: int | None,
    coordinator_epoch: int | None,
    bootstrap: str | None,
    as_json: bool,
) -> None:
    """Write an abort marker for a transaction left open on TOPIC's PARTITION (as
    kafka-transactions.sh abort): its records become aborted and the last stable offset
    moves on. For hanging transactions (find-hanging); a live producer's transaction is its
    coordinator's to end."""
    explicit = (producer_id, producer_epoch, coordinator_epoch)
    if (start_offset is None) == (None in explicit):
        raise click.UsageError(
            "give --start-offset, or all of --producer-id, --producer-epoch and --coordinator-epoch"
        )
    server = resolve_bootstrap(bootstrap)

    async def go() -> dict[str, Any]:
        async with admin_for(server) as admin:
            tp = TopicPartition(topic, partition)
            if start_offset is not None:
                open_ones = await _open_transactions(admin, topic, (partition,))
                matches = [
                    s for _, s in open_ones if s.current_transaction_start_offset == start_offset
                ]
                if not matches:
                    starts = sorted(s.current_transaction_start_offset for _, s in open_ones)
                    raise CliError(
                        f"no open transaction starts at offset {start_offset} of "
                        f"{topic}:{partition} (open ones start at {starts or 'none'})"
                    )
                state = matches[0]
                pid, epoch, coord = (
                    state.producer_id,
                    state.producer_epoch,
                    state.coordinator_epoch,
                )
            else:
                assert producer_id is not None and producer_epoch is not None
                assert coordinator_epoch is not None
                pid, epoch, coord = producer_id, producer_epoch, coordinator_epoch
            await admin.abort_transaction(
                tp, producer_id=pid, producer_epoch=epoch, coordinator_epoch=coord
            )
        return {
            "topic": topic,
            "partition": partition,
            "producer_id": pid,
            "producer_epoch": epoch,
            "coordinator_epoch": coord,
            "aborted": True,
        }

    outcome = run(go(), bootstrap=server)
    if as_json:
        print_json(outcome)
    else:
        note(f"aborted producer {outcome['producer_id']}'s transaction on {topic}:{partition}")
