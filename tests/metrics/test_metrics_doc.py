"""docs/metrics.md is what scripts/make-metrics-doc.py writes from the probes today."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_metrics_page_is_current() -> None:
    spec = importlib.util.spec_from_file_location(
        "make_metrics_doc", ROOT / "scripts" / "make-metrics-doc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "metrics.md").read_text() == module.render(), (
        "docs/metrics.md is stale: run scripts/make-metrics-doc.py"
    )
