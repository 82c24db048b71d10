"""A real etcd server process for the cluster tests.

Owns starting and stopping one single-member etcd (Debian's ``etcd-server``, found on PATH)
on free loopback ports with its data in a test's directory. Readiness is etcd's own log line
("serving client traffic"), read from its stderr; nothing sleeps to wait for state.

Must not import josefk: the tests reach etcd only through its client port.
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from broker_process import free_ports

ETCD = shutil.which("etcd")
SKIP_REASON = "etcd is not installed (Debian package etcd-server; ./scripts/test.sh installs it)"
START_TIMEOUT_S = 30.0
# etcd 3.4 (zap logger) says this once its client listener serves; later versions say
# "ready to serve client requests" too.
READY_MARKS = ("serving client traffic", "ready to serve client requests")


class EtcdStartError(RuntimeError):
    pass


class EtcdServer:
    """One etcd member. ``endpoint`` is ``127.0.0.1:PORT``; ``restart`` keeps data and ports."""

    def __init__(self, data_dir: Path, log_path: Path, *, host: str = "127.0.0.1") -> None:
        self.host = host
        self.data_dir = data_dir
        self.log_path = log_path
        self.client_port, self.peer_port = free_ports(2)
        self._process: subprocess.Popen[str] | None = None
        self._log_file = None

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.client_port}"

    def start(self) -> None:
        if ETCD is None:
            raise EtcdStartError(SKIP_REASON)
        client_url = f"http://{self.host}:{self.client_port}"
        peer_url = f"http://{self.host}:{self.peer_port}"
        args = [
            ETCD,
            "--name", "josefk-test",
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", client_url,
            "--advertise-client-urls", client_url,
            "--listen-peer-urls", peer_url,
            "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"josefk-test={peer_url}",
            "--logger", "zap",
            "--log-outputs", "stderr",
        ]  # fmt: skip
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._process = process
        lines: queue.Queue[str | None] = queue.Queue()
        log = self.log_path.open("a")

        def pump() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                log.write(line)
                log.flush()
                lines.put(line)
            lines.put(None)
            log.close()

        threading.Thread(target=pump, daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                self.kill()
                raise EtcdStartError(f"etcd did not become ready; see {self.log_path}") from None
            if line is None:
                raise EtcdStartError(f"etcd exited during start-up; see {self.log_path}")
            if any(mark in line for mark in READY_MARKS):
                return

    def is_alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.kill()
