"""The package imports and its command line answers."""

from __future__ import annotations

import subprocess
import sys

import josefk


def test_version_is_reported() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "josefk", "--version"], capture_output=True, text=True, check=True
    )
    assert josefk.__version__ in out.stdout
