"""A ``josefk serve`` process for benchmarks: started on a free port, stopped with SIGTERM.

The benchmarks import it as a sibling module (they run as scripts from bench/).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class ServeProcess:
    """Waits for the broker's one ready line on stdout, then knows its bootstrap address."""

    def __init__(self, data_dir: Path, settings: Sequence[str] = ()) -> None:
        """``settings``: ``key=value`` broker settings (``--set``). ``ready_s`` is the time
        from starting the process to its ready line (the broker's start-up)."""
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "josefk",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                str(data_dir),
                "--metrics-port",
                "0",
                "--log-level",
                "warning",
                *(arg for setting in settings for arg in ("--set", setting)),
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        self.ready_s = time.perf_counter() - started
        match = re.search(r"listening on \w+://([^:]+):(\d+)", line)
        if not match:
            raise RuntimeError(f"broker did not start: {line!r}")
        self.bootstrap = f"{match.group(1)}:{match.group(2)}"

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)
