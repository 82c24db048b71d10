"""``josefk consume --group`` ends within ``--shutdown-timeout`` after Ctrl-C or SIGTERM,
whatever the network does, leaves the group on the way out, and commits as it goes.

Before: its last commit and close had no deadline (a frozen broker held it forever), SIGTERM
killed it without leaving the group, and it committed only at exit."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import BrokerProcess, command, env_for, josefk

from josefk.client.connection import BrokerConnection
from josefk.client.consumer_protocol import Subscription, encode_subscription
from josefk.protocol.api import ApiKey, request_class

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.stderr.log")
    process.start()
    try:
        yield process
    finally:
        process.send_signal(signal.SIGCONT)
        process.close()


def consumer(broker: BrokerProcess, group: str, *extra: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        command("consume", "orders", "--group", group, *extra),
        env=env_for(broker.bootstrap),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "r0"  # consuming
    return process


def committed(broker: BrokerProcess, group: str) -> int:
    described = josefk(broker, "groups", "describe", group, "--json").json()
    return sum(max(p["committed_offset"] or 0, 0) for p in described["partitions"])


def members(broker: BrokerProcess, group: str) -> int:
    return len(josefk(broker, "groups", "describe", group, "--json").json()["members"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopping_leaves_the_group_and_commits(broker: BrokerProcess, sig: signal.Signals) -> None:
    josefk(broker, "topics", "create", "orders")
    josefk(broker, "produce", "orders", stdin="".join(f"r{i}\n" for i in range(5)))
    process = consumer(broker, "g1")
    process.send_signal(sig)
    process.communicate(timeout=30)
    assert process.returncode in (130, 143, 0)
    # Left the group: no member lingers until the session times out.
    assert members(broker, "g1") == 0
    assert committed(broker, "g1") == 5


def test_a_frozen_broker_does_not_hold_the_exit(broker: BrokerProcess) -> None:
    josefk(broker, "topics", "create", "orders")
    josefk(broker, "produce", "orders", stdin="r0\nr1\n")
    process = consumer(broker, "g2", "--shutdown-timeout", "2")
    broker.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        assert time.monotonic() - started < 25  # generous: the deadline is 2 s
        assert "did not finish within 2s" in err
    finally:
        broker.send_signal(signal.SIGCONT)


def test_a_group_consumer_commits_as_it_goes(broker: BrokerProcess) -> None:
    josefk(broker, "topics", "create", "orders")
    josefk(broker, "produce", "orders", stdin="".join(f"r{i}\n" for i in range(3)))
    process = consumer(broker, "g3")
    try:
        deadline = time.monotonic() + 30  # the auto-commit interval is 5 s
        while committed(broker, "g3") < 3:
            assert time.monotonic() < deadline, "no commit while consuming"
            time.sleep(0.5)
    finally:
        process.kill()  # no chance to commit at exit
        process.communicate(timeout=30)
    assert committed(broker, "g3") == 3


async def _join(conn: BrokerConnection, group: str, member_id: str) -> Any:
    """One member's JoinGroup, as a consumer subscribed to "orders" sends it."""
    join = request_class(ApiKey.JOIN_GROUP)
    metadata = encode_subscription(Subscription(["orders"]))
    while True:
        response = await conn.request(
            ApiKey.JOIN_GROUP,
            join(
                group_id=group,
                session_timeout_ms=60_000,
                rebalance_timeout_ms=90_000,
                member_id=member_id,
                protocol_type="consumer",
                protocols=[
                    join.JoinGroupRequestProtocol(name=name, metadata=metadata)
                    for name in ("range", "roundrobin")
                ],
            ),
            version=5,
            timeout_s=30,
        )
        if response.error_code != 79:  # MEMBER_ID_REQUIRED: join again with the id given
            return response
        member_id = response.member_id


async def test_interrupted_while_joining_it_still_leaves_the_group(
    broker: BrokerProcess,
) -> None:
    """A first member holds the group; the CLI's join then waits for that member to rejoin
    (up to its 90 s rebalance timeout). Ctrl-C in that wait must still send LeaveGroup: the
    first member's rejoin then completes at once with itself alone. Before, a member without a
    generation skipped the leave, and the group waited the whole rebalance timeout for it."""
    josefk(broker, "topics", "create", "orders")
    conn = await BrokerConnection.open(
        broker.host, broker.port, node_id=0, client_id="first", timeout_s=10
    )
    try:
        first = await _join(conn, "g4", "")
        assert first.error_code == 0 and first.leader == first.member_id
        sync = request_class(ApiKey.SYNC_GROUP)
        synced = await conn.request(
            ApiKey.SYNC_GROUP,
            sync(
                group_id="g4",
                generation_id=first.generation_id,
                member_id=first.member_id,
                protocol_type="consumer",
                protocol_name=first.protocol_name,
                assignments=[],
            ),
            version=5,
        )
        assert synced.error_code == 0

        process = subprocess.Popen(  # noqa: ASYNC220  the test drives a real CLI process
            command("consume", "orders", "--group", "g4"),
            env=env_for(broker.bootstrap),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # The CLI's JoinGroup is parked once the group prepares a rebalance for it.
            deadline = time.monotonic() + 30
            while (
                josefk(broker, "groups", "describe", "g4", "--json").json()["state"]
                != "PreparingRebalance"
            ):
                assert time.monotonic() < deadline, "the CLI never joined"
                await asyncio.sleep(0.2)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode in (130, 0), err

        again = await _join(conn, "g4", first.member_id)
        assert again.error_code == 0
        assert [m.member_id for m in again.members] == [first.member_id]
    finally:
        conn.close()
