"""Fixtures of the Spark suite: a real ``josefk serve`` process and a local[2] SparkSession.

``broker`` (one broker per module) comes from tests/integration/conftest.py, loaded under its
own module name with its report hook, as tests/client/conftest.py does. ``spark`` is one
local[2] session per module with ``format("josefk")`` registered; tests that use it are
skipped with a reason when pyspark or pyarrow cannot be imported.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_INTEGRATION = Path(__file__).resolve().parent.parent / "integration"
if str(_INTEGRATION) not in sys.path:
    sys.path.insert(0, str(_INTEGRATION))

_spec = importlib.util.spec_from_file_location(
    "josefk_integration_fixtures_spark", _INTEGRATION / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)

broker = _fixtures.broker
pytest_runtest_makereport = _fixtures.pytest_runtest_makereport


def _missing() -> str | None:
    for name in ("pyspark", "pyarrow"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed (pip install 'josefk[spark]')"
    return None


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    from josefk.spark import local_session

    session = local_session("josefk-tests")
    yield session
    session.stop()
