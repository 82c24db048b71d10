"""Whether KafkaJS can run here, and why not: one skip condition for every KafkaJS test.

``scripts/test.sh`` runs ``npm install`` in tests/js and, where that fails (the npm registry
is refused on some of this project's machines), writes the reason to
``tests/js/.npm-unavailable``; the tests skip with that reason.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

JS_DIR = Path(__file__).resolve().parent.parent / "js"
NODE = shutil.which("node")
_UNAVAILABLE = JS_DIR / ".npm-unavailable"


def _reason() -> str | None:
    if NODE is None:
        return "node is not installed"
    if (JS_DIR / "node_modules" / "kafkajs").is_dir():
        return None
    if _UNAVAILABLE.exists():
        return f"KafkaJS not installed: {_UNAVAILABLE.read_text().strip()}"
    return "tests/js/node_modules/kafkajs missing (run npm install in tests/js)"


REASON = _reason()
needs_kafkajs = pytest.mark.skipif(REASON is not None, reason=REASON or "")
