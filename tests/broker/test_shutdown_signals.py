"""What SIGTERM and SIGINT ask of ``josefk serve``, before and during its shutdown."""

from __future__ import annotations

import signal

import pytest

from josefk.broker.server import SignalAction, signal_action


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_first_signal_shuts_down_cleanly(signum: int) -> None:
    assert signal_action(signum, shutting_down=False) is SignalAction.SHUT_DOWN


def test_sigterm_during_shutdown_is_ignored() -> None:
    # GNU timeout signals the command and then its process group: the same request twice.
    assert signal_action(signal.SIGTERM, shutting_down=True) is SignalAction.IGNORE


def test_sigint_during_shutdown_exits_at_once() -> None:
    # Ctrl-C pressed again by someone who will not wait.
    assert signal_action(signal.SIGINT, shutting_down=True) is SignalAction.EXIT_NOW
