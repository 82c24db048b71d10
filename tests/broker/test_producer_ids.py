"""Producer id allocation: persisted blocks, epoch bumps, and the InitProducerId handler."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.broker.context import RequestContext
from josefk.broker.handlers.init_producer_id import handle_init_producer_id
from josefk.broker.producer_ids import (
    MAX_BUMPABLE_EPOCH,
    PRODUCER_ID_BLOCK_FILE,
    ProducerFencedError,
    ProducerIdBlockError,
    ProducerIdManager,
)
from josefk.protocol.api import ApiKey, request_class
from josefk.protocol.errors import ErrorCode

Request = request_class(ApiKey.INIT_PRODUCER_ID)


def test_ids_are_fresh_and_the_block_is_persisted_before_use(tmp_path: Path) -> None:
    manager = ProducerIdManager.load(tmp_path, block_size=3)
    assert not (tmp_path / PRODUCER_ID_BLOCK_FILE).exists()
    assert manager.generate_producer_id() == 0
    assert (tmp_path / PRODUCER_ID_BLOCK_FILE).read_text() == "1\n3\n"
    assert [manager.generate_producer_id() for _ in range(3)] == [1, 2, 3]
    assert (tmp_path / PRODUCER_ID_BLOCK_FILE).read_text() == "1\n6\n"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 7), min_size=1, max_size=6))
def test_ids_are_never_reused_across_restarts(uses_per_run: list[int]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        seen: list[int] = []
        for uses in uses_per_run:
            # Each run ends without any shutdown step, as a SIGKILL would end it.
            manager = ProducerIdManager.load(directory, block_size=4)
            seen.extend(manager.init_producer_id()[0] for _ in range(uses))
        assert len(set(seen)) == len(seen)
        assert seen == sorted(seen)


def test_epoch_bumps_retries_and_fencing(tmp_path: Path) -> None:
    manager = ProducerIdManager.load(tmp_path)
    producer_id, epoch = manager.init_producer_id()
    assert epoch == 0
    assert manager.init_producer_id(producer_id, 0) == (producer_id, 1)
    assert manager.init_producer_id(producer_id, 0) == (producer_id, 1)  # a retried bump
    assert manager.init_producer_id(producer_id, 1) == (producer_id, 2)
    with pytest.raises(ProducerFencedError):
        manager.init_producer_id(producer_id, 0)


def test_an_exhausted_epoch_gets_a_new_producer_id(tmp_path: Path) -> None:
    manager = ProducerIdManager.load(tmp_path)
    producer_id, epoch = manager.init_producer_id()
    while epoch < MAX_BUMPABLE_EPOCH:
        producer_id, epoch = manager.init_producer_id(producer_id, epoch)
    new_id, new_epoch = manager.init_producer_id(producer_id, epoch)
    assert new_id != producer_id and new_epoch == 0


def test_an_id_the_broker_does_not_remember_gets_a_new_one(tmp_path: Path) -> None:
    first = ProducerIdManager.load(tmp_path).init_producer_id()[0]
    restarted = ProducerIdManager.load(tmp_path)
    producer_id, epoch = restarted.init_producer_id(first, 0)
    assert producer_id != first and epoch == 0


def test_a_malformed_block_file_names_itself(tmp_path: Path) -> None:
    (tmp_path / PRODUCER_ID_BLOCK_FILE).write_text("1\nlots\n")
    with pytest.raises(ProducerIdBlockError, match=PRODUCER_ID_BLOCK_FILE):
        ProducerIdManager.load(tmp_path)


# -- the handler --------------------------------------------------------------------------------


def call(manager: ProducerIdManager | None, version: int, **fields: Any) -> Any:
    context = RequestContext(
        broker=SimpleNamespace(producer_ids=manager, txn_coordinator=None, authorizer=None),  # type: ignore[arg-type]
        header=None,  # type: ignore[arg-type]
        api_version=version,
        connection=None,  # type: ignore[arg-type]
    )
    fields.setdefault("transaction_timeout_ms", 60_000)
    fields.setdefault("transactional_id", None)
    return handle_init_producer_id(context, Request(**fields))  # type: ignore[arg-type]


def test_handler_hands_out_ids_and_bumps_epochs(tmp_path: Path) -> None:
    manager = ProducerIdManager.load(tmp_path)
    first = call(manager, 0)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
    bumped = call(manager, 4, producer_id=first.producer_id, producer_epoch=0)
    assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 1)
    assert call(manager, 0).producer_id != first.producer_id


def test_handler_fencing_code_depends_on_the_version(tmp_path: Path) -> None:
    manager = ProducerIdManager.load(tmp_path)
    producer_id = call(manager, 3).producer_id
    for _ in range(2):
        call(manager, 3, producer_id=producer_id, producer_epoch=call_epoch(manager, producer_id))
    assert call(manager, 3, producer_id=producer_id, producer_epoch=0).error_code == (
        ErrorCode.INVALID_PRODUCER_EPOCH
    )
    assert call(manager, 4, producer_id=producer_id, producer_epoch=0).error_code == (
        ErrorCode.PRODUCER_FENCED
    )


def call_epoch(manager: ProducerIdManager, producer_id: int) -> int:
    return manager._epochs[producer_id]


def test_handler_hands_transactional_ids_to_the_coordinator_and_refuses_malformed_requests(
    tmp_path: Path,
) -> None:
    manager = ProducerIdManager.load(tmp_path)
    # No transaction coordinator (yet): a retriable error, answered by a coroutine.
    refused = asyncio.run(call(manager, 4, transactional_id="txn-1"))
    assert refused.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert (refused.producer_id, refused.producer_epoch) == (-1, -1)
    empty = asyncio.run(call(manager, 4, transactional_id=""))
    assert empty.error_code == ErrorCode.INVALID_REQUEST
    assert (
        call(manager, 4, producer_id=5, producer_epoch=-1).error_code == ErrorCode.INVALID_REQUEST
    )
    assert call(None, 4).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
