"""DeliveryFuture keeps asyncio.Future's contract for one record of a producer batch.

The producer resolves a whole batch at once; each record's handle must still behave as the
asyncio future ``send`` used to return: awaitable, usable with gather / wait / wait_for /
shield, done callbacks called with the handle, cancellation of one record only, errors
delivered to every record. Driven on a bare ``_Batch``, no broker.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from josefk.client.errors import KafkaTimeoutError
from josefk.client.producer import DeliveryFuture, _Batch
from josefk.client.types import RecordMetadata, TopicPartition
from josefk.records import BatchBuilder

TP = TopicPartition("events", 3)


def _batch(records: int = 3) -> tuple[_Batch, list[DeliveryFuture]]:
    builder = BatchBuilder(keep_times=True)
    batch = _Batch(TP, builder, 1e18, -1, asyncio.get_running_loop().create_future)
    handles = []
    for i in range(records):
        builder.append(None, b"v", (), 1000 + i)
        batch.record_count += 1
        handles.append(DeliveryFuture(batch, i))
    return batch, handles


async def test_await_gives_each_record_its_metadata() -> None:
    batch, handles = _batch()
    waiter = asyncio.ensure_future(handles[1])
    await asyncio.sleep(0)
    assert not handles[1].done() and not waiter.done()
    batch.complete(40, -1)
    assert await waiter == RecordMetadata("events", 3, 41, 1001)
    assert handles[0].done() and handles[0].result() == RecordMetadata("events", 3, 40, 1000)
    assert await handles[2] == RecordMetadata("events", 3, 42, 1002)
    assert handles[2].exception() is None and not handles[2].cancelled()


async def test_log_append_time_and_acks_0() -> None:
    batch, handles = _batch(2)
    batch.complete(7, 5555)
    assert [h.result().timestamp for h in handles] == [5555, 5555]
    other, (handle,) = _batch(1)
    other.complete(-1, -1)  # acks=0: no offset comes back
    assert (await handle).offset == -1


async def test_result_before_delivery_raises_invalid_state() -> None:
    _, (handle,) = _batch(1)
    with pytest.raises(asyncio.InvalidStateError):
        handle.result()
    with pytest.raises(asyncio.InvalidStateError):
        handle.exception()
    with pytest.raises(asyncio.InvalidStateError):
        handle.set_result(RecordMetadata("events", 3, 0, 0))


async def test_gather_and_wait_take_handles() -> None:
    batch, handles = _batch()
    assert asyncio.isfuture(handles[0])
    gathered = asyncio.gather(*handles)
    waited = asyncio.ensure_future(asyncio.wait(handles))
    await asyncio.sleep(0)
    batch.complete(0, -1)
    assert [m.offset for m in await gathered] == [0, 1, 2]
    done, pending = await waited
    assert done == set(handles) and not pending


async def test_failure_reaches_every_record() -> None:
    batch, handles = _batch()
    waiter = asyncio.ensure_future(handles[0])
    await asyncio.sleep(0)
    error = KafkaTimeoutError("delivery_timeout_ms expired")
    batch.fail(error)
    with pytest.raises(KafkaTimeoutError):
        await waiter
    assert handles[1].exception() is error
    with pytest.raises(KafkaTimeoutError):
        handles[2].result()
    with pytest.raises(KafkaTimeoutError):
        await asyncio.gather(*handles)
    batch.complete(0, -1)  # a late answer changes nothing
    assert handles[1].exception() is error


async def test_done_callbacks_get_the_handle_and_can_be_removed() -> None:
    batch, handles = _batch()
    seen: list[object] = []

    def callback(future: DeliveryFuture) -> None:
        seen.append(future)

    handles[0].add_done_callback(callback)
    handles[1].add_done_callback(callback)
    assert handles[1].remove_done_callback(callback) == 1
    assert handles[2].remove_done_callback(callback) == 0
    batch.complete(0, -1)
    await asyncio.sleep(0)
    assert seen == [handles[0]]
    handles[2].add_done_callback(callback)  # already done: called soon
    await asyncio.sleep(0)
    assert seen == [handles[0], handles[2]]


async def test_cancelling_one_record_leaves_the_others() -> None:
    batch, handles = _batch()
    assert handles[1].cancel()
    assert handles[1].cancelled() and handles[1].done()
    assert not handles[0].done()
    with pytest.raises(asyncio.CancelledError):
        await handles[1]
    batch.complete(10, -1)
    assert handles[1].cancelled()
    assert handles[0].result().offset == 10 and handles[2].result().offset == 12
    assert not handles[0].cancel()


async def test_wait_for_times_out_and_cancels_only_its_record() -> None:
    batch, handles = _batch(2)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(handles[0], timeout=0)
    assert handles[0].cancelled()
    shielded = asyncio.shield(handles[1])
    batch.complete(0, -1)
    assert (await shielded).offset == 1


async def test_a_gather_cancelled_with_pending_records() -> None:
    _, handles = _batch(2)
    gathered = asyncio.gather(*handles)
    await asyncio.sleep(0)
    gathered.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gathered
    assert all(h.cancelled() for h in handles)


async def test_a_task_awaiting_a_record_can_be_cancelled() -> None:
    _, (handle,) = _batch(1)
    task = asyncio.ensure_future(handle)
    waiter = asyncio.ensure_future(asyncio.wait_for(task, 5))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert handle.cancelled()
    assert "events-3" in repr(handle)


async def test_as_completed_takes_handles() -> None:
    batch, handles = _batch(2)
    asyncio.get_running_loop().call_soon(batch.complete, 5, -1)
    offsets = sorted([(await f).offset for f in asyncio.as_completed(handles)])
    assert offsets == [5, 6]


def test_run_until_complete_takes_a_handle() -> None:
    loop = asyncio.new_event_loop()
    try:
        builder = BatchBuilder(keep_times=True)
        batch = _Batch(TP, builder, 1e18, -1, loop.create_future)
        builder.append(None, b"v", (), 9)
        batch.record_count = 1
        loop.call_soon(batch.complete, 100, -1)
        assert loop.run_until_complete(DeliveryFuture(batch, 0)).offset == 100
    finally:
        loop.close()


async def test_callbacks_without_futures_run_in_order_after_the_batch() -> None:
    batch, handles = _batch()
    seen: list[tuple[int, bool]] = []
    for handle in reversed(handles):
        handle.add_done_callback(lambda f: seen.append((f.result().offset, f.done())))
    assert not batch.waiting  # no asyncio future was made for a callback
    batch.complete(20, -1)
    assert seen == []  # called through the loop, as asyncio calls a future's callbacks
    await asyncio.sleep(0)
    assert seen == [(22, True), (21, True), (20, True)]


async def test_a_failing_callback_is_reported_and_the_others_still_run() -> None:
    batch, handles = _batch(2)
    reported: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    seen: list[DeliveryFuture] = []

    def boom(_future: DeliveryFuture) -> None:
        raise RuntimeError("boom")

    handles[0].add_done_callback(boom)
    handles[1].add_done_callback(seen.append)
    batch.fail(KafkaTimeoutError("expired"))
    await asyncio.sleep(0)
    assert seen == [handles[1]]
    assert isinstance(reported[0]["exception"], RuntimeError)


async def test_cancel_runs_the_callbacks_of_that_record_only() -> None:
    batch, handles = _batch(2)
    seen: list[tuple[DeliveryFuture, bool]] = []
    for handle in handles:
        handle.add_done_callback(lambda f: seen.append((f, f.cancelled())))
    handles[0].cancel()
    await asyncio.sleep(0)
    assert seen == [(handles[0], True)]
    batch.complete(0, -1)
    await asyncio.sleep(0)
    assert seen == [(handles[0], True), (handles[1], False)]


async def test_latency_is_from_send_to_the_batch_outcome() -> None:
    before = time.perf_counter()
    batch, handles = _batch(2)
    after = time.perf_counter()
    assert handles[0].latency() is None
    batch.complete(0, -1)
    assert batch.done_at >= after
    sent = [batch.records.appended_at(i) for i in range(2)]
    # Each record's send time is read on perf_counter's clock as it is appended.
    assert before <= sent[0] <= sent[1] <= after
    assert handles[0].latency() == batch.done_at - sent[0]
    assert handles[1].latency() == batch.done_at - sent[1]
