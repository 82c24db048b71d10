"""docs/configuration.md and ``josefk serve --help-config`` are made from the declarations;
the page in the repository is the one they make now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from josefk.config.broker import BROKER_KEYS
from josefk.config.reference import REGENERATE, reference_markdown
from josefk.config.topic import TOPIC_KEYS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_page_matches_the_declarations() -> None:
    assert PAGE.read_text() == reference_markdown(), f"regenerate it: {REGENERATE}"


def test_every_declared_key_has_documentation() -> None:
    undocumented = [k.name for k in (*BROKER_KEYS.values(), *TOPIC_KEYS.values()) if not k.doc]
    assert undocumented == []


def test_help_config_lists_every_key_with_default_mode_and_doc() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "josefk", "serve", "--help-config"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "log.segment.bytes  1073741824  cluster-wide" in lines
    assert "    " + BROKER_KEYS["log.segment.bytes"].doc in lines
    assert "sasl.kerberos.min.time.before.relogin  null  per-broker" in lines
    assert "retention.ms  604800000" in lines
    for name in (*BROKER_KEYS, *TOPIC_KEYS):
        assert any(line.startswith(name + "  ") for line in lines), name
