"""A ``josefk serve`` process for benchmarks: started on a free port, stopped with SIGTERM.

The benchmarks import it as a sibling module (they run as scripts from bench/).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class ServeProcess:
    """Waits for the broker's one ready line on stdout, then knows its bootstrap address."""

    def __init__(self, data_dir: Path) -> None:
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
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        match = re.search(r"listening on \w+://([^:]+):(\d+)", line)
        if not match:
            raise RuntimeError(f"broker did not start: {line!r}")
        self.bootstrap = f"{match.group(1)}:{match.group(2)}"

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
