"""``josefk transactions find-hanging`` and ``abort`` (kafka-transactions.sh's), against a real
broker with an open transaction held by josefk's own producer."""

from __future__ import annotations

import contextlib

from cli_helpers import (
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    josefk,
)

from josefk.client.errors import KafkaError
from josefk.client.sync import Producer


def test_find_hanging_skips_live_transactions_and_abort_ends_one(
    cli_broker: BrokerProcess,
) -> None:
    josefk(cli_broker, "topics", "create", "t-hang", "-p", "1")
    josefk(cli_broker, "produce", "t-hang", stdin="before\n")
    producer = Producer(bootstrap_servers=cli_broker.bootstrap, transactional_id="cli-hang")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send_and_wait("t-hang", b"stuck", partition=0)

        # Its coordinator knows it (Ongoing over t-hang:0): not hanging, however old.
        hanging = josefk(
            cli_broker, "transactions", "find-hanging", "-t", "t-hang",
            "--max-transaction-timeout", "0", "--json",
        ).json()  # fmt: skip
        assert hanging == []
        assert (
            "no hanging transactions"
            in josefk(cli_broker, "transactions", "find-hanging", "-t", "t-hang").stderr
        )

        refused = josefk(
            cli_broker, "transactions", "abort", "-t", "t-hang", "-p", "0",
            "--start-offset", "0", expect=1,
        )  # fmt: skip
        assert "no open transaction starts at offset 0" in refused.stderr
        josefk(cli_broker, "transactions", "abort", "-t", "t-hang", "-p", "0", expect=2)

        aborted = josefk(
            cli_broker, "transactions", "abort", "-t", "t-hang", "-p", "0",
            "--start-offset", "1", "--json",
        ).json()  # fmt: skip
        assert aborted["aborted"] is True and aborted["producer_id"] >= 0
        # The last stable offset moved past the aborted record: read_committed reaches the
        # end without it, and the leader tracks no open transaction any more.
        committed = josefk(
            cli_broker, "consume", "t-hang", "--isolation", "read_committed", "--no-follow"
        ).stdout
        assert committed.splitlines() == ["before"]
        producers = josefk(cli_broker, "transactions", "producers", "t-hang", "--json").json()
        assert all(p["current_transaction_start_offset"] is None for p in producers)
    finally:
        with contextlib.suppress(KafkaError):
            producer.close()
