"""PLAIN over a v0 SaslHandshake (raw tokens, KIP-43): the password check (PBKDF2 against the
user's SCRAM credential) runs in the executor, as on the SaslAuthenticate path; before, it
ran on the event loop and a flood of failing logins slowed every client."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from josefk.broker.context import BrokerContext
from josefk.broker.dispatch import RequestDispatcher
from josefk.broker.network import CloseConnection, ConnectionInfo, is_awaitable
from josefk.broker.security.scram import make_credential
from josefk.broker.security.session import SaslSession
from josefk.broker.security.store import FileCredentialStore


def _connection() -> tuple[ConnectionInfo, list[int]]:
    store = FileCredentialStore(None, {})
    store.upsert("alice", make_credential("SCRAM-SHA-512", b"secret", iterations=4096))
    session = SaslSession(("PLAIN",), store)
    assert session.handshake("PLAIN")
    session.raw_tokens = True
    threads: list[int] = []
    check = session.check_plain

    def recording_check(user: str, password: bytes) -> None:
        threads.append(threading.get_ident())
        check(user, password)

    session.check_plain = recording_check  # type: ignore[method-assign]
    info = ConnectionInfo(1, "SASL_PLAINTEXT", "127.0.0.1:1", 9092, principal=None, sasl=session)
    return info, threads


def _dispatcher() -> RequestDispatcher:
    context = BrokerContext(
        config=None,  # type: ignore[arg-type]
        broker_id=1,
        cluster_id="c",
        replica_manager=None,  # type: ignore[arg-type]
        clock=None,  # type: ignore[arg-type]
        topic_admin=None,  # type: ignore[arg-type]
        handlers={},
    )
    return RequestDispatcher(context)


async def test_the_password_is_checked_off_the_event_loop() -> None:
    info, threads = _connection()
    result: Any = _dispatcher().dispatch(memoryview(b"\0alice\0secret"), info)
    assert is_awaitable(result)
    assert await result == [b""]
    assert info.principal == "User:alice"
    assert threads and threads[0] != threading.get_ident()


async def test_a_wrong_password_closes_the_connection() -> None:
    info, threads = _connection()
    result: Any = _dispatcher().dispatch(memoryview(b"\0alice\0wrong"), info)
    with pytest.raises(CloseConnection):
        await result
    assert info.principal is None
    assert threads and threads[0] != threading.get_ident()
