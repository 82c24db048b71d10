"""``josefk completion bash|zsh|fish``: the scripts, and completion of verbs, topic names and
group names asked of a real broker (nothing, quickly, when no broker answers)."""

from __future__ import annotations

import subprocess

import pytest
from cli_helpers import (
    COMMAND_TIMEOUT_S,
    BrokerProcess,
    cli_broker_fixture,  # noqa: F401  (the cli_broker fixture)
    command,
    env_for,
    josefk,
)

pytestmark = pytest.mark.timeout(120)


def complete(broker: BrokerProcess | None, words: str) -> list[str]:
    """What bash completion offers for the command line ``words`` (cursor at its end)."""
    env = env_for(broker.bootstrap if broker is not None else "127.0.0.1:1")
    parts = words.split(" ")
    env.update(_JOSEFK_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(len(parts) - 1))
    done = subprocess.run(
        command(), env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr
    # One "type,value" line per offer.
    offers = [line.split(",", 1) for line in done.stdout.splitlines() if line]
    return [value for kind, value in offers if kind == "plain"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str) -> None:
    script = josefk(None, "completion", shell).stdout
    assert "_JOSEFK_COMPLETE" in script
    josefk(None, "completion", "tcsh", expect=2)


def test_completes_verbs_topics_and_groups(cli_broker: BrokerProcess) -> None:
    josefk(cli_broker, "topics", "create", "compl-orders")
    josefk(cli_broker, "topics", "create", "compl-refunds")
    josefk(cli_broker, "produce", "compl-orders", stdin="x\n")
    josefk(cli_broker, "consume", "compl-orders", "--group", "compl-billing", "--no-follow")

    assert "consume" in complete(cli_broker, "josefk cons")
    assert complete(cli_broker, "josefk consume compl-") == ["compl-orders", "compl-refunds"]
    assert complete(cli_broker, "josefk topics describe compl-r") == ["compl-refunds"]
    assert complete(cli_broker, "josefk groups describe compl-") == ["compl-billing"]
    # No broker: no names, no error, no wait beyond the second it allows.
    assert complete(None, "josefk consume compl-") == []
