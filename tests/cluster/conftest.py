"""Fixtures of the cluster suite: real etcd servers (and, through tests/integration's
``broker_process``, real ``josefk serve`` processes).

``etcd`` is one etcd per test, so that leases, controller claims and counters of one test never
leak into another. Tests that need etcd skip with a reason when the ``etcd`` binary is missing
(``./scripts/test.sh`` installs Debian's etcd-server).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_INTEGRATION = Path(__file__).resolve().parent.parent / "integration"
if str(_INTEGRATION) not in sys.path:
    sys.path.insert(0, str(_INTEGRATION))

from etcd_server import ETCD, SKIP_REASON, EtcdServer  # noqa: E402


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    if ETCD is None:
        pytest.skip(SKIP_REASON)
    server = EtcdServer(tmp_path / "etcd-data", tmp_path / "etcd.log")
    server.start()
    try:
        yield server
    finally:
        server.close()
