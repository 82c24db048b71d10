"""Driving the real Docker engine from tests: the image, containers, the compose tool.

No Docker SDK: the tests run the same ``docker`` and ``docker compose`` commands a user types,
so what they prove is what the README tells people to do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("JOSEFK_IMAGE", "josefk:local")
ETCD_IMAGE = os.environ.get("JOSEFK_ETCD_IMAGE", "josefk-etcd:local")
# What these tests ran with (the compose tool, the images, the counts), printed by conftest.py
# at the end of the run.
NOTES: list[str] = []
# Long enough for a three-broker cluster on two busy cores; a healthy one takes ~10 s.
HEALTHY_TIMEOUT_S = 180


def engine_problem() -> str | None:
    """Why these tests cannot run here, or None when a Docker engine answers."""
    if shutil.which("docker") is None:
        return "no Docker engine on this machine (the docker command is not installed)"
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return "the Docker engine did not answer `docker info` within 30 s"
    if done.returncode != 0:
        return f"no Docker engine answers here: {done.stderr.strip()[:200]}"
    return None


def run(args: Sequence[str], *, timeout: float = 300, check: bool = True) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {done.returncode}\n{done.stdout[-2000:]}"
            f"\n{done.stderr[-2000:]}"
        )
    return done.stdout


def docker(*args: str, timeout: float = 300, check: bool = True) -> str:
    return run(["docker", *args], timeout=timeout, check=check)


def inspect(container: str) -> dict[str, Any]:
    return json.loads(docker("inspect", container))[0]  # type: ignore[no-any-return]


def health(container: str) -> str:
    state = inspect(container)["State"]
    if not state["Running"]:
        return "exited"
    return str(state.get("Health", {}).get("Status", "none"))


def wait_healthy(containers: Sequence[str], timeout: float = HEALTHY_TIMEOUT_S) -> None:
    """Wait on the images' own HEALTHCHECKs, as ``docker compose up --wait`` does."""
    deadline = time.monotonic() + timeout
    while True:
        states = {c: health(c) for c in containers}
        if all(s == "healthy" for s in states.values()):
            return
        exited = [c for c, s in states.items() if s == "exited"]
        if exited or time.monotonic() > deadline:
            logs = "\n".join(f"--- {c}\n{logs_of(c)}" for c in containers)
            raise AssertionError(f"not healthy: {states}\n{logs}")
        time.sleep(1)


def logs_of(container: str, tail: int = 40) -> str:
    done = subprocess.run(
        ["docker", "logs", "--tail", str(tail), container],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout + done.stderr


class Compose:
    """``docker compose`` (v2) where the engine has it, else the older ``docker-compose``;
    ``tool`` says which, and the tests print it."""

    def __init__(self, project: str, files: Sequence[str] = ("docker-compose.yml",)) -> None:
        self.project = project
        self.files = list(files)
        v2 = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if v2.returncode == 0:
            self.base = ["docker", "compose"]
            self.tool = "docker compose (v2)"
            self.has_wait = True
        elif shutil.which("docker-compose") is not None:
            self.base = ["docker-compose"]
            version = run(["docker-compose", "version", "--short"], timeout=30).strip()
            self.tool = f"docker-compose {version} (no --wait: the tests wait on healthchecks)"
            self.has_wait = False
        else:
            raise RuntimeError("neither `docker compose` nor `docker-compose` is installed")

    def __call__(self, *args: str, timeout: float = 600, check: bool = True) -> str:
        command = [*self.base, "-p", self.project]
        for file in self.files:
            command += ["-f", str(REPO / file)]
        return run([*command, *args], timeout=timeout, check=check)

    def container(self, service: str) -> str:
        """The name of the service's container (the two tools name them differently)."""
        (container_id,) = self("ps", "-q", service).split()
        return str(inspect(container_id)["Name"]).lstrip("/")

    def up(self, services: Sequence[str]) -> None:
        if self.has_wait:
            self("up", "-d", "--no-build", "--wait")
        else:
            self("up", "-d", "--no-build")
        wait_healthy([self.container(s) for s in services])

    def leftovers(self) -> list[str]:
        """Containers, volumes and networks of this project that still exist."""
        label = f"label=com.docker.compose.project={self.project}"
        found = []
        for kind in ("container", "volume", "network"):
            extra = ["-a"] if kind == "container" else []
            names = docker(kind, "ls", *extra, "-q", "--filter", label).split()
            found += [f"{kind} {n}" for n in names]
        return found
