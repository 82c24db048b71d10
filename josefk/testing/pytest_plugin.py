"""pytest fixtures for real josefk brokers, registered as the ``josefk`` pytest11 entry point:
installing josefk makes them available to any test suite, with nothing in conftest.py.

- ``josefk_broker``: a fresh broker for one test (own data dir, free port).
- ``josefk_session_broker``: one broker shared by the whole session (give topics unique
  names: ``josefk_topic`` does).
- ``josefk_cluster``: an etcd and three brokers for the session; the test is skipped with the
  reason when no ``etcd`` program is installed.
- ``josefk_topic``: a new, uniquely named topic (one partition) on the session broker,
  waited for until its partition has a leader.

Imports josefk.testing only; the brokers start when a fixture is first used, not on import.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest

from josefk.testing import ETCD_MISSING, JosefkBroker, JosefkCluster, etcd_binary

_topic_numbers = itertools.count(1)


@pytest.fixture
def josefk_broker() -> Iterator[JosefkBroker]:
    """A josefk broker for this test alone: ``.bootstrap`` is its address."""
    with JosefkBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def josefk_session_broker() -> Iterator[JosefkBroker]:
    """One josefk broker for the whole test session."""
    with JosefkBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def josefk_cluster() -> Iterator[JosefkCluster]:
    """Three josefk brokers and an etcd, for the whole session (skipped without etcd)."""
    if etcd_binary() is None:
        pytest.skip(ETCD_MISSING)
    with JosefkCluster() as cluster:
        yield cluster


@pytest.fixture
def josefk_topic(request: pytest.FixtureRequest, josefk_session_broker: JosefkBroker) -> str:
    """A new topic on ``josefk_session_broker``, named after the test, ready to produce to."""
    stem = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:180]
    return josefk_session_broker.create_topic(f"{stem}-{next(_topic_numbers)}")
