"""Fixtures of the container tests: the images, built once per run with
``scripts/build-image.sh`` (local Debian base images, no registry, no network in the build).

These tests need a Docker engine. Where none answers (a laptop without Docker) they skip and
say so; on this project's machines, CI included, the engine is there and they run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from docker_support import NOTES, REPO, engine_problem


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if NOTES:
        terminalreporter.section("container tests")
        for note in NOTES:
            terminalreporter.write_line(note)


@pytest.fixture(scope="session")
def images() -> None:
    problem = engine_problem()
    if problem is not None:
        pytest.skip(problem)
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(
        [str(REPO / "scripts" / "build-image.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    if done.returncode != 0:
        raise AssertionError(f"scripts/build-image.sh failed:\n{done.stdout}\n{done.stderr}")
    NOTES.extend(line for line in done.stdout.splitlines() if line.startswith("built "))
