"""A real ``josefk serve`` whose SCRAM users are written into its credential file before it
starts, for the tests of josefk's own client and CLI over SASL.

Owns ``start_sasl_broker``: the listeners given (the first one is what ``--listen`` moves to a
free port, so ``SASL_PLAINTEXT://127.0.0.1:0`` alone makes a SASL-only broker whose
``bootstrap`` is that listener), and ``stop_broker``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from broker_process import BrokerProcess

from josefk.broker.security.scram import make_credential
from josefk.broker.security.store import CredentialStore

SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def start_sasl_broker(
    base: Path,
    *,
    listeners: str,
    users: Mapping[str, str],
    settings: Sequence[str] = (),
    port: int = 0,
) -> BrokerProcess:
    """Users get both SCRAM mechanisms (PLAIN checks the same credentials). ``port``: where
    ``--listen`` puts the first listener (0: any free port)."""
    data = base / "data"
    data.mkdir(parents=True, exist_ok=True)
    store = CredentialStore.load(data)
    for user, password in users.items():
        for mechanism in SCRAM:
            store.upsert(user, make_credential(mechanism, password.encode()))
    store.save()
    broker = BrokerProcess(
        data, base / "broker.stderr.log", settings=[f"listeners={listeners}", *settings]
    )
    broker.port = port
    try:
        broker.start()
    except Exception:
        broker.close()
        raise
    return broker


def stop_broker(broker: BrokerProcess) -> None:
    try:
        if broker.is_alive():
            broker.stop()
    finally:
        broker.close()
