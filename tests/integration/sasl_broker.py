"""A real ``josefk serve`` whose SCRAM users are written into its credential file before it
starts, for the tests of SASL, TLS and ACLs and of josefk's own client and CLI over them.

Owns ``write_scram_users`` (credentials in a data dir, before the broker reads it),
``start_sasl_broker``: the listeners given (the first one is what ``--listen`` moves to a
free port, so ``SASL_PLAINTEXT://127.0.0.1:0`` alone makes a SASL-only broker whose
``bootstrap`` is that listener), ``SaslBroker`` (a PLAINTEXT listener beside a
SASL_PLAINTEXT one, ``start_plaintext_and_sasl``) and ``stop_broker``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from broker_process import BrokerProcess, free_port, start_or_close, stop_broker

from josefk.broker.security.scram import make_credential
from josefk.broker.security.store import CredentialStore

__all__ = [
    "SCRAM",
    "SaslBroker",
    "start_plaintext_and_sasl",
    "start_sasl_broker",
    "stop_broker",
    "write_scram_users",
]

SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def write_scram_users(
    data: Path, users: Mapping[str, str], *, mechanisms: Sequence[str] = SCRAM
) -> None:
    """Give each user (name: password) a credential of each mechanism, in ``data``'s
    credential file (PLAIN checks the same credentials)."""
    data.mkdir(parents=True, exist_ok=True)
    store = CredentialStore.load(data)
    for user, password in users.items():
        for mechanism in mechanisms:
            store.upsert(user, make_credential(mechanism, password.encode()))
    store.save()


def start_sasl_broker(
    base: Path,
    *,
    listeners: str,
    users: Mapping[str, str],
    settings: Sequence[str] = (),
    port: int = 0,
    metrics_port: int = 0,
) -> BrokerProcess:
    """Users get both SCRAM mechanisms. ``port``: where ``--listen`` puts the first listener
    (0: any free port)."""
    data = base / "data"
    write_scram_users(data, users)
    broker = BrokerProcess(
        data,
        base / "broker.stderr.log",
        settings=[f"listeners={listeners}", *settings],
        metrics_port=metrics_port,
    )
    broker.port = port
    return start_or_close(broker)


class SaslBroker:
    """A broker's PLAINTEXT listener (``plaintext``) and SASL_PLAINTEXT one (``sasl``)."""

    def __init__(self, process: BrokerProcess, sasl_port: int) -> None:
        self.process = process
        self.plaintext = process.bootstrap
        self.sasl = f"{process.host}:{sasl_port}"

    def stop(self) -> None:
        stop_broker(self.process)


def start_plaintext_and_sasl(
    base: Path, *, users: Mapping[str, str], settings: Sequence[str] = ()
) -> SaslBroker:
    """A PLAINTEXT listener (where ``--listen`` puts it) and a SASL_PLAINTEXT one."""
    sasl_port = free_port()
    process = start_sasl_broker(
        base,
        listeners=f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        users=users,
        settings=settings,
    )
    return SaslBroker(process, sasl_port)
