"""josefk's own producer, consumer and admin over a SASL_PLAINTEXT listener of a real broker:
SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; a wrong password, an unknown user, a mechanism the
broker does not offer and SASL against a PLAINTEXT listener each fail at once with the
broker's error (no retry loop); a session with a lifetime (KIP-368) re-authenticates on the
same connection and keeps working."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from broker_process import free_port
from sasl_broker import SaslBroker, start_plaintext_and_sasl, start_sasl_broker, stop_broker

from josefk.client import AIOAdmin, AIOConsumer, AIOProducer, TopicPartition
from josefk.client.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)

pytestmark = pytest.mark.timeout(120)

# Bounds each client call; never reached when the test passes.
CALL_TIMEOUT_S = 30.0
PASSWORD = "alice-secret"


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    started = start_plaintext_and_sasl(
        tmp_path_factory.mktemp("josefk-client-sasl"),
        users={"alice": PASSWORD},
        # KIP-368: sessions last 3 s, so the re-authentication test sees one.
        settings=[
            "connections.max.reauth.ms=3000",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        ],
    )
    yield started
    started.stop()


def _auth(mechanism: str, user: str = "alice", password: str = PASSWORD) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_username": user,
        "sasl_password": password,
    }


async def _round_trip(bootstrap: str, mechanism: str) -> None:
    auth = _auth(mechanism)
    topic = f"client-sasl-{mechanism.lower()}"
    async with asyncio.timeout(CALL_TIMEOUT_S):
        async with AIOAdmin(bootstrap_servers=bootstrap, **auth) as admin:
            await admin.create_topic(topic, num_partitions=2)
            assert topic in await admin.list_topics()
        async with AIOProducer(bootstrap_servers=bootstrap, **auth) as producer:
            for i in range(10):
                await producer.send(topic, f"v{i}".encode(), key=f"k{i}".encode())
            await producer.flush()
        async with AIOConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"g-{mechanism}",
            auto_offset_reset="earliest",
            **auth,
        ) as consumer:
            values: list[bytes] = []
            while len(values) < 10:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    values += [r.value for r in records if r.value is not None]
            await consumer.commit()
        async with AIOAdmin(bootstrap_servers=bootstrap, **auth) as admin:
            offsets = await admin.list_group_offsets(f"g-{mechanism}")
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(10))
    assert sum(o for o in offsets.values()) == 10


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_producer_consumer_admin_over_sasl(sasl_broker: SaslBroker, mechanism: str) -> None:
    asyncio.run(_round_trip(sasl_broker.sasl, mechanism))


async def _refused(bootstrap: str, settings: dict[str, Any]) -> BaseException:
    """The error a producer's start meets. A client that retried would run into the call's
    bound (TimeoutError, before the producer's own 60 s max_block_ms), not raise this."""
    with pytest.raises(Exception) as caught:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            async with AIOProducer(bootstrap_servers=bootstrap, **settings) as producer:
                await producer.send("never", b"x")
    return caught.value


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_wrong_password_or_unknown_user_fails_at_once(
    sasl_broker: SaslBroker, mechanism: str
) -> None:
    for user, password in (("alice", "not-the-password"), ("mallory", PASSWORD)):
        error = asyncio.run(_refused(sasl_broker.sasl, _auth(mechanism, user, password)))
        assert isinstance(error, SaslAuthenticationFailedError), repr(error)
        assert "Invalid username or password" in str(error)
        assert not error.retriable


def test_mechanism_not_offered_and_sasl_on_a_plaintext_listener(
    tmp_path_factory: pytest.TempPathFactory, sasl_broker: SaslBroker
) -> None:
    error = asyncio.run(_refused(sasl_broker.plaintext, _auth("SCRAM-SHA-256")))
    assert isinstance(error, IllegalSaslStateError), repr(error)
    assert "security.protocol" in str(error)
    port = free_port()
    only_plain = start_sasl_broker(
        tmp_path_factory.mktemp("josefk-client-sasl-plain-only"),
        listeners=f"SASL_PLAINTEXT://127.0.0.1:{port}",
        users={"alice": PASSWORD},
        settings=["sasl.enabled.mechanisms=PLAIN"],
    )
    try:
        error = asyncio.run(_refused(only_plain.bootstrap, _auth("SCRAM-SHA-512")))
        assert isinstance(error, UnsupportedSaslMechanismError), repr(error)
        assert "offers PLAIN" in str(error)
    finally:
        stop_broker(only_plain)


async def _reauthenticates(bootstrap: str) -> None:
    async with AIOAdmin(bootstrap_servers=bootstrap, **_auth("SCRAM-SHA-512")) as admin:
        await admin.create_topic("reauth", num_partitions=1)
        client = admin.client
        node = next(iter(client.metadata.brokers))
        connection = await client.connection(node)
        first_deadline = connection._reauthenticate_at
        assert first_deadline is not None
        # Keep using the connection until it has re-authenticated (the broker closes a
        # connection whose session expired, so staying open past it means it did).
        async with asyncio.timeout(CALL_TIMEOUT_S):
            while connection._reauthenticate_at == first_deadline:
                await admin.list_offsets({TopicPartition("reauth", 0): -1})
                await asyncio.sleep(0.2)
            for _ in range(3):
                await admin.list_offsets({TopicPartition("reauth", 0): -1})
        assert await client.connection(node) is connection
        assert not connection.closed


def test_a_session_with_a_lifetime_reauthenticates_on_the_same_connection(
    sasl_broker: SaslBroker,
) -> None:
    asyncio.run(_reauthenticates(sasl_broker.sasl))
