"""Fixtures of the client suite: the integration suite's real ``josefk serve`` processes.

Reuses ``broker`` (one broker per module) and ``broker_factory`` (private brokers a test
may restart) from tests/integration/conftest.py, loaded under its own module name, with its
report hook so a failing test shows the broker's stderr. tests/integration is put on
sys.path so ``broker_process`` and ``client_helpers`` are the same modules for both suites.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_INTEGRATION = Path(__file__).resolve().parent.parent / "integration"
if str(_INTEGRATION) not in sys.path:
    sys.path.insert(0, str(_INTEGRATION))

_spec = importlib.util.spec_from_file_location(
    "josefk_integration_fixtures", _INTEGRATION / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)

broker = _fixtures.broker
broker_factory = _fixtures.broker_factory
pytest_runtest_makereport = _fixtures.pytest_runtest_makereport
