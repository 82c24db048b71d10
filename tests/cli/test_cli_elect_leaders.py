"""``josefk cluster elect-leaders`` lists what changed (and what failed), not every partition
that already had its preferred leader, unless ``--all``.

Before: a row per partition of the cluster, internal topics included, all of them
ELECTION_NOT_NEEDED on a healthy single node."""

from __future__ import annotations

import pytest
from cli_helpers import (
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    josefk,
)

pytestmark = pytest.mark.timeout(120)


def test_elect_leaders_prints_only_what_changed(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "led", "--partitions", "3")
    quiet = josefk(cli_broker, "cluster", "elect-leaders")
    assert quiet.stdout == ""
    assert "0 leader(s) changed" in quiet.stderr and "already led" in quiet.stderr
    assert josefk(cli_broker, "cluster", "elect-leaders", "led:0", "--json").json() == []

    everything = josefk(cli_broker, "cluster", "elect-leaders", "led:0", "led:1", "--all", "--json")
    assert everything.json() == [
        {"topic": "led", "partition": 0, "result": "ELECTION_NOT_NEEDED"},
        {"topic": "led", "partition": 1, "result": "ELECTION_NOT_NEEDED"},
    ]
