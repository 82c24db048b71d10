"""An asynchronous handler whose answer is cancelled (its connection closed, or the broker
stopping) before the loop ever ran it is cancelled itself, never dropped unawaited.

Before: the dispatcher wrapped the handler's coroutine in a coroutine of its own; cancelling
that wrapper before its first step left the handler's coroutine unawaited ("RuntimeWarning:
coroutine 'handle_fetch' was never awaited"), and a parked fetch could outlive its
connection. With warnings as errors this test fails on that code."""

from __future__ import annotations

import asyncio
import gc
import warnings
from typing import Any

from josefk.broker.context import BrokerContext
from josefk.broker.dispatch import RequestDispatcher
from josefk.broker.handlers import HandlerSpec
from josefk.broker.network import ConnectionInfo
from josefk.protocol.api import ApiKey, api, encode_request, request_class
from josefk.protocol.headers import RequestHeader


def fetch_frame() -> memoryview:
    F = request_class(ApiKey.FETCH)
    body = F(max_wait_ms=60_000, min_bytes=1, topics=[])
    header = RequestHeader(
        request_api_key=ApiKey.FETCH, request_api_version=12, correlation_id=7, client_id="t"
    )
    return memoryview(encode_request(header, body))[4:]


async def test_a_cancelled_answer_cancels_its_handler() -> None:
    events: list[str] = []
    parked = asyncio.Event()

    async def long_poll(context: Any, request: Any) -> Any:
        events.append("started")
        try:
            parked.set()
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    declared = api(ApiKey.FETCH)
    spec = HandlerSpec(ApiKey.FETCH, "Fetch", declared.min_version, declared.max_version, long_poll)
    context = BrokerContext(
        config=None,  # type: ignore[arg-type]
        broker_id=1,
        cluster_id="c",
        replica_manager=None,  # type: ignore[arg-type]
        clock=None,  # type: ignore[arg-type]
        topic_admin=None,  # type: ignore[arg-type]
        handlers={ApiKey.FETCH: spec},
    )
    dispatcher = RequestDispatcher(context)
    info = ConnectionInfo(1, "PLAINTEXT", "127.0.0.1:1", 9092)

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        # Cancelled before the loop ran anything: the handler never even started.
        answer = dispatcher.dispatch(fetch_frame(), info)
        assert isinstance(answer, asyncio.Future)
        answer.cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        gc.collect()
        # Cancelled while parked: the handler sees the cancellation.
        answer = dispatcher.dispatch(fetch_frame(), info)
        assert isinstance(answer, asyncio.Future)
        await asyncio.wait_for(parked.wait(), 10)
        answer.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()
    assert events[-2:] == ["started", "cancelled"]
