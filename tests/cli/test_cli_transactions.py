"""``josefk produce --transactional-id``, ``josefk consume --isolation`` and ``josefk
transactions list|describe``, run as subprocesses against a real broker, with an open
transaction held by josefk's own producer.
"""

from __future__ import annotations

from cli_helpers import (
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    josefk,
)

from josefk.client.sync import Producer


def test_transactional_produce_and_isolated_consume(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "t-txn", "-p", "1")
    summary = josefk(
        cli_broker,
        "produce",
        "t-txn",
        "--transactional-id",
        "cli-loader",
        "--transaction-size",
        "2",
        "--json",
        stdin="".join(f"r{i}\n" for i in range(5)),
    ).json()
    assert summary["records"] == 5
    assert summary["transactions"] == 3  # 2 + 2 + the last 1 at the end of the input
    assert summary["transactional_id"] == "cli-loader"
    # Three commit markers sit between the records; neither level prints them.
    for isolation in ("read_committed", "read_uncommitted"):
        out = josefk(cli_broker, "consume", "t-txn", "--isolation", isolation, "--no-follow").stdout
        assert out.splitlines() == [f"r{i}" for i in range(5)]
    offsets = [
        r["offset"]
        for r in josefk(
            cli_broker, "consume", "t-txn", "--isolation", "read_committed", "--no-follow", "--json"
        ).json_lines()
    ]
    assert offsets == [0, 1, 3, 4, 6]

    with Producer(bootstrap_servers=cli_broker.bootstrap, transactional_id="cli-open") as open_:
        open_.init_transactions()
        open_.begin_transaction()
        open_.send_and_wait("t-txn", b"pending", partition=0)

        committed = josefk(
            cli_broker, "consume", "t-txn", "--isolation", "read_committed", "--no-follow"
        ).stdout
        assert "pending" not in committed.splitlines()
        uncommitted = josefk(
            cli_broker, "consume", "t-txn", "--isolation", "read_uncommitted", "--no-follow"
        ).stdout
        assert uncommitted.splitlines()[-1] == "pending"

        listed = josefk(cli_broker, "transactions", "list", "--json").json()
        states = {t["transactional_id"]: t["state"] for t in listed}
        assert states["cli-open"] == "Ongoing"
        assert states["cli-loader"] == "CompleteCommit"
        ongoing = josefk(cli_broker, "transactions", "list", "--state", "Ongoing", "--json")
        assert [t["transactional_id"] for t in ongoing.json()] == ["cli-open"]
        table = josefk(cli_broker, "transactions", "list").stdout
        assert "TRANSACTIONAL-ID" in table and "cli-open" in table

        described = josefk(cli_broker, "transactions", "describe", "cli-open", "--json").json()
        assert described["state"] == "Ongoing"
        assert described["partitions"] == [{"topic": "t-txn", "partition": 0}]
        assert described["transaction_start_time_ms"] > 0
        text = josefk(cli_broker, "transactions", "describe", "cli-open").stdout
        assert "Ongoing" in text and "t-txn" in text and "open for" in text
        # An ended transaction is not "open for" anything: its last one began some time ago.
        ended = josefk(cli_broker, "transactions", "describe", "cli-loader").stdout
        assert "CompleteCommit" in ended and "last began" in ended and "open for" not in ended
        active = josefk(cli_broker, "transactions", "producers", "t-txn", "--json").json()
        open_start = [p["current_transaction_start_offset"] for p in active]
        assert 8 in open_start  # "pending" went to offset 8, after 5 records and 3 markers
        assert "OPEN-TXN-START" in josefk(cli_broker, "transactions", "producers", "t-txn").stdout
        open_.abort_transaction()

    unknown = josefk(cli_broker, "transactions", "describe", "no-such-id", expect=1)
    assert "no transactional id 'no-such-id'" in unknown.stderr


def test_transaction_options_are_checked(cli_broker: BrokerProcess) -> None:
    result = josefk(cli_broker, "produce", "t-x", "--transaction-size", "3", expect=2)
    assert "--transaction-size needs --transactional-id" in result.stderr
    result = josefk(
        cli_broker, "produce", "t-x", "--transactional-id", "a", "--acks", "1", expect=2
    )
    assert "--transactional-id needs --acks all" in result.stderr
    result = josefk(cli_broker, "consume", "t-x", "--isolation", "serializable", expect=2)
    assert "serializable" in result.stderr
